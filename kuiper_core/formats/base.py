"""What every format module shares: the file being opened (`Context`), the options, and the
neutral result (`OpenedModel`) the CLI, `load()` and the app all receive.

A format module (pnnx.py, kir.py, onnx.py, torchscript.py) is Netron's ModelFactory in
Python: `NAME`, `SUFFIXES` (a hint only), `match(context) -> bool` that looks at the bytes,
and `open(context) -> OpenedModel`; optionally `explain(context) -> str | None` saying what a
file that is no model is ("a PNNX .bin holds weights only: open its .param").
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..budgets import open_zip
from ..errors import InputError
from ..files import file_problem
from ..graph import Graph

if TYPE_CHECKING:
    from ..ir.parser import IRModule
    from .conversion_check import ConversionCheck
    from ..runtime import RuntimeGraph

HEAD_BYTES = 64 * 1024  # what content detection reads of a file

Source = str | Path | bytes | bytearray | memoryview
InputShape = str | Sequence[int] | Sequence[Sequence[int]] | None
# What checks a conversion: (the opened model, the arrays it will run on or None, the framework's
# time limit or None) -> its verdict. The formats run no framework: the caller passes this in
# (kuiper_core.references.conversion_check.checked, which kuiper_core.open_model passes).
Checker = Callable[["OpenedModel", "Sequence[Any] | None", "float | None"], "ConversionCheck | None"]


@dataclass(frozen=True)
class ConversionOptions:
    """How the pnnx converter runs on an .onnx or TorchScript .pt (convert.py)."""

    inputshape: InputShape = None
    inputshape2: InputShape = None
    optlevel: int | None = None  # None: 2
    timeout: float | None = None  # seconds; None: KUIPER_CONVERT_TIMEOUT or 600
    on_log: Callable[[str], None] | None = None  # each converter log line, as it is printed
    cache_dir: str | Path | None = None  # None: KUIPER_CACHE or ~/.cache/kuiper
    # The arrays the model will run on: converted at their shapes when no inputshape is given,
    # and the conversion checked on them (conversion_check.py); None: the seeded probe.
    inputs: Sequence[Any] | None = None
    check: bool = True  # check the conversion against the original's framework (once: cached)
    checker: Checker | None = None  # what checks it; None: not checked
    # Values of small integer ONNX inputs by name (the app's "sr=16000"), for a model that
    # branches on them (onnx_given.py); `inputs`, when given, say them by position instead.
    values: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class OpenOptions:
    """How to open a model. Only the converted formats read `conversion`, only `.kir` the IR
    fields; `weights=False` reads the graph without its weights (printing); `weights="lazy"`
    checks a .pnnx.param's .bin file now and reads each weight when first used (pnnx.load_graph)."""

    bin_path: Source | None = None  # PNNX weights (.bin) of a .param or .kir: a path or bytes
    name: str | None = None  # what messages call a model given as bytes (its file name)
    weights: bool | str = True  # True, False or "lazy"
    conversion: ConversionOptions = ConversionOptions()
    # textual IR
    allow_unregistered: bool = False
    check_layers: bool = False


class Context:
    """The file being opened, read lazily: its first bytes, its zip entries, its text."""

    def __init__(self, source: Source, options: OpenOptions) -> None:
        self.options = options
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.path: Path | None = None
            self._data: bytes | None = bytes(source)
            self.name = options.name or "model"
        else:
            self.path = Path(source)
            self._data = None
            self.name = options.name or str(source)

    @property
    def where(self) -> str:
        """The file as messages name it."""
        return self.name

    @cached_property
    def problem(self) -> str | None:
        """Why the path cannot be read ('no such file', …), None for bytes or a good file."""
        return file_problem(self.path) if self.path is not None else None

    def suffix_is(self, *suffixes: str) -> bool:
        name = (self.path.name if self.path is not None else Path(self.name).name).lower()
        return any(name.endswith(s) for s in suffixes)

    @cached_property
    def head(self) -> bytes:
        """The first HEAD_BYTES bytes (b'' when the file cannot be read)."""
        if self._data is not None:
            return self._data[:HEAD_BYTES]
        if self.problem is not None:
            return b""
        assert self.path is not None
        try:
            with open(self.path, "rb") as f:
                return f.read(HEAD_BYTES)
        except OSError:
            return b""

    def data(self) -> bytes:
        """All the bytes (the file read once)."""
        if self._data is None:
            assert self.path is not None
            try:
                self._data = self.path.read_bytes()
            except OSError as e:
                raise InputError(f"cannot read {self.where}: {e.strerror or e}") from None
        return self._data

    def text_head(self) -> str:
        """The head as text (a UTF-8 byte-order mark dropped, undecodable bytes replaced)."""
        return self.head.decode("utf-8", errors="replace").removeprefix("\ufeff")

    @cached_property
    def zip_names(self) -> list[str] | None:
        """The entry names of a zip archive, or None when the file is no zip."""
        if not self.head.startswith(b"PK\x03\x04"):
            return None
        try:
            source: Any = self._data if self._data is not None else self.path
            with open_zip(source, self.where) as zf:  # its entry count checked before it is parsed
                return [i.filename for i in zf.infolist()]
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return None  # (a LimitError, a zip listing too many entries, is said as it is)


@dataclass(frozen=True)
class PnnxFiles:
    """The PNNX files a model came from or was converted to (paths; None: not on disk)."""

    param: Path | None
    bin: Path | None
    python: Path | None = None  # pnnx's NAME_pnnx.py: torch code of the same graph
    source: Path | None = None  # a converted model's original (.onnx/.pt), kept in the cache
    ncnn_param: Path | None = None  # the ncnn files pnnx wrote in the same conversion (docs/ncnn.md)
    ncnn_bin: Path | None = None


@dataclass(frozen=True)
class Conversion:
    """How a converted model was made: by which converter, with what, in how long."""

    kind: str  # "onnx" | "torchscript"
    source_name: str  # the original file's name
    converter: str  # the binary's path
    version: str
    key: str  # the cache key (content hash + options + converter version)
    seconds: float  # the converter's run time (of the original run, for a cache hit)
    cached: bool  # this open found it in the cache
    exit_code: int
    log: str
    inputshape: str | None
    inputshape2: str | None
    optlevel: int
    directory: Path  # the cache entry holding the files
    note: str | None = None  # e.g. "pnnx exited with -6 after writing valid files: accepted"
    guessed: str | None = None  # the inputshape pnnx chose itself for the file's open dims (none given)


@dataclass(frozen=True)
class ReferenceInfo:
    """How reference tensors can be computed for this model, without running anything yet.

    methods: "pnnx_py" (pnnx's NAME_pnnx.py run with torch: every operand), "onnxruntime"
    (the .onnx run with every intermediate value exposed, mapped by structure),
    "torchscript" (the original .pt run with torch: the outputs). `missing` says what to
    install for a method this machine lacks."""

    methods: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return bool(self.methods)

    def text(self) -> str:
        names = {
            "pnnx_py": "every operand from pnnx's generated PyTorch code (torch)",
            "onnxruntime": "the ONNX model's intermediate values (onnxruntime), mapped by structure",
            "torchscript": "the outputs of the original TorchScript module (torch)",
        }
        parts = [names[m] for m in self.methods]
        said = "; ".join(parts) if parts else "none can be computed here"
        return said + (f" (missing: {'; '.join(self.missing)})" if self.missing else "")


@dataclass
class OpenedModel:
    """A model opened by any format: its Graph and where it came from."""

    graph: Graph
    format: str  # "pnnx" | "kir" | "onnx" | "torchscript" | "ncnn"
    name: str  # the source as messages name it
    source: Path | None  # the file opened (None: given as bytes)
    files: PnnxFiles | None = None
    conversion: Conversion | None = None
    references: ReferenceInfo = field(default_factory=ReferenceInfo)
    ir_module: IRModule | None = None  # a .kir's parsed module: build errors point into its text
    # A converted model's verdict: does the converted file compute what the original does?
    # (conversion_check.py; None: not converted, or opened without checking)
    check: ConversionCheck | None = None
    ncnn_bin: Path | None = None  # an ncnn model's .ncnn.bin on disk (ncnn's own run reads it)

    @property
    def converted(self) -> bool:
        return self.conversion is not None

    def build(self, algorithm: str = "dfs", *, release_weights: bool = False) -> RuntimeGraph:
        """A built RuntimeGraph. release_weights: nothing else keeps this graph, so the
        runtime may let its weights go after build (load() does; the app keeps the graph)."""
        if self.ir_module is not None:
            from ..ir import build

            return build(self.ir_module, algorithm)
        from ..runtime import RuntimeGraph

        return RuntimeGraph.from_graph(self.graph, owned=release_weights).build(algorithm)

    def describe(self) -> str:
        """One line: what was opened and how (for CLI notes and the app)."""
        what = {"pnnx": "PNNX", "kir": "textual IR", "onnx": "ONNX", "torchscript": "TorchScript", "ncnn": "ncnn"}[
            self.format
        ]
        line = f"{self.name}: {what}, {len(self.graph.operators)} operators"
        c = self.conversion
        if c is not None:
            how = "from the cache" if c.cached else f"in {c.seconds:.2f} s"
            line += f", converted by pnnx {c.version} {how} (optlevel {c.optlevel})"
            if c.note:
                line += f"; {c.note}"
        return line


class ModelFormat(Protocol):
    """A format module's interface (see the module docstring)."""

    NAME: str
    SUFFIXES: tuple[str, ...]

    def match(self, context: Context) -> bool: ...

    def open(self, context: Context) -> OpenedModel: ...


def installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it (torch takes seconds)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def reference_info(fmt: str, files: PnnxFiles | None) -> ReferenceInfo:
    """Which reference methods apply to a model of format `fmt` with these files, on this
    machine (what is missing is named, never imported here)."""
    methods: list[str] = []
    missing: list[str] = []
    torch = installed("torch")
    if files is not None and files.python is not None:
        (methods if torch else missing).append("pnnx_py" if torch else "torch, to run pnnx's generated code")
    elif fmt == "torchscript":
        missing.append("pnnx wrote no runnable model_pnnx.py (see the conversion's note): only outputs are compared")
    if fmt == "onnx":
        if installed("onnxruntime") and installed("onnx"):
            methods.append("onnxruntime")
        else:
            missing.append("onnxruntime and onnx (pip install onnxruntime onnx)")
    if fmt == "torchscript" and files is not None and files.source is not None:
        (methods if torch else missing).append("torchscript" if torch else "torch, to run the TorchScript module")
    return ReferenceInfo(tuple(methods), tuple(dict.fromkeys(missing)))
