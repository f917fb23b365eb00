"""Run the real `pnnx` converter on an ONNX or TorchScript file, and cache what it made.

The converter is the self-contained binary inside the `pnnx` wheel (`pip install --no-deps
pnnx` installs only it; it needs no torch). It is found without importing the package
(`import pnnx` imports torch): KUIPER_PNNX names a binary, else the installed package's
folder, else a `pnnx` binary on PATH.

Each conversion runs in a private temporary folder under a time limit; every line it prints
goes to `on_log` as it comes (the app shows it live). pnnx at optlevel 0/1 often aborts
(-6, std::out_of_range) *after* writing valid .pnnx.param/.bin: valid files are accepted
and the record says so. Results are cached by content hash + options + converter version
under KUIPER_CACHE (default ~/.cache/kuiper)/convert/KEY/, least recently used evicted past
KUIPER_CACHE_MAX_MB (default 2048): model.pnnx.param, model.pnnx.bin, model_pnnx.py (when
pnnx wrote a complete one), the source, converter.log and record.json.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..cache_dir import cache_root, trusted_folder
from ..children import BACKTRACE_FRAME, private_folder, rlimit_code, slot
from ..errors import ConversionError, ConverterNotFoundError, InputError
from .param_order import put_in_order
from .traced_inputs import forget_traced_inputs, records_input_shapes
from .base import Conversion, ConversionOptions, InputShape, PnnxFiles
from .onnx_given import given_values, mark_fixed_inputs, values_text
from .onnx_prepare import prepare
from .scripted import NOT_A_TENSOR, scripted_argument_hint

ENV_CONVERTER = "KUIPER_PNNX"
ENV_CACHE_MAX = "KUIPER_CACHE_MAX_MB"
ENV_TIMEOUT = "KUIPER_CONVERT_TIMEOUT"
DEFAULT_TIMEOUT = 600.0
DEFAULT_CACHE_MAX_MB = 2048
DEFAULT_OPTLEVEL = 2
CACHE_VERSION = "6"  # bump when what a cache entry holds changes: older entries are not reused (6: auto_pad SAME pads; the source kept as given)
STEM = "model"  # the converted files' stem in the cache (pnnx's NAME_pnnx.py opens NAME.pnnx.bin)
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}
QUOTED_LINES = 12  # of the converter's log in a ConversionError

INSTALL_HINT = (
    "install it with `pip install --no-deps pnnx` (the converter alone, no torch), "
    "or `pip install torch==2.13.0 pnnx` for torch references too; "
    f"or set {ENV_CONVERTER} to the path of a pnnx binary"
)

_DTYPES = "f32|f64|f16|bf16|i64|i32|i16|i8|u8|bool|c64|c128"
_SHAPE = re.compile(rf"\[(?:[0-9]+(?:,[0-9]+)*)?\](?:{_DTYPES})?")  # ASCII digits (\d takes any script's); [] is 0-d
_SHAPES = re.compile(rf"{_SHAPE.pattern}(?:,{_SHAPE.pattern})*\Z")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# -- the converter ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Converter:
    path: Path
    version: str  # the wheel's version, or size:mtime of a binary found elsewhere


def _is_binary(path: Path) -> bool:
    """An executable file that is no script (pip's `pnnx` entry point is a Python script
    that imports torch)."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(2) != b"#!"
    except OSError:
        return False


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def find_converter() -> Converter:
    """The pnnx binary: KUIPER_PNNX, else the installed `pnnx` package's, else PATH's.
    ConverterNotFoundError (saying how to install it) when there is none."""
    named = os.environ.get(ENV_CONVERTER)
    if named:
        path = Path(named).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):  # any executable: a wrapper script too
            raise ConverterNotFoundError(
                f"the pnnx converter was not found: {ENV_CONVERTER}={named} is not an executable file; {INSTALL_HINT}"
            )
        return Converter(path, _stamp(path))
    try:
        spec = importlib.util.find_spec("pnnx")  # finds the package without running its __init__
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            for exe in ("pnnx", "pnnx.exe"):
                path = Path(folder) / exe
                if _is_binary(path):
                    from importlib import metadata  # ~20 ms: only when a converter is looked for

                    try:
                        version = metadata.version("pnnx")
                    except metadata.PackageNotFoundError:
                        version = _stamp(path)
                    return Converter(path, version)
    found = shutil.which("pnnx")
    if found and _is_binary(Path(found)):
        return Converter(Path(found), _stamp(Path(found)))
    raise ConverterNotFoundError(
        f"converting ONNX and TorchScript models needs the pnnx converter, which is not installed: {INSTALL_HINT}"
    )


def converter_available() -> bool:
    try:
        find_converter()
    except ConverterNotFoundError:
        return False
    return True


# -- options ----------------------------------------------------------------------------------------
def inputshape_text(value: InputShape, flag: str = "inputshape") -> str | None:
    """pnnx's `[1,3,224,224]` or `[1,3,224,224]f32,[1,10]i64` from a string (brackets
    optional for one shape, spaces ignored) or a sequence of ints or of shapes."""
    if value is None:
        return None
    if isinstance(value, str):
        text = "".join(value.split())
        if not text:
            return None
        if text[0] != "[":
            text = f"[{text}]"
    else:
        items: list[Any] = list(value)
        if items and all(isinstance(d, int) for d in items):
            items = [items]
        try:
            text = ",".join("[" + ",".join(str(int(d)) for d in shape) + "]" for shape in items)
        except (TypeError, ValueError):
            text = repr(value)
    if not _SHAPES.match(text):
        raise InputError(
            f"{flag} {value!r} is not a list of shapes: expected e.g. [1,3,224,224] or [1,3,224,224]f32,[1,10]i64"
        )
    return text


# -- the cache --------------------------------------------------------------------------------------
def _cache_max_bytes() -> int:
    try:
        return int(float(os.environ.get(ENV_CACHE_MAX, DEFAULT_CACHE_MAX_MB)) * 2**20)
    except ValueError:
        return DEFAULT_CACHE_MAX_MB * 2**20


def content_digest(source: Path | bytes) -> str:
    h = hashlib.sha256()
    if isinstance(source, bytes):
        h.update(source)
    else:
        with open(source, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def cache_key(
    digest: str,
    kind: str,
    inputshape: str | None,
    inputshape2: str | None,
    optlevel: int,
    version: str,
    values: str = "",
) -> str:
    """`values`: the given values of small integer inputs (onnx_given.values_text), which a
    converted file may be specialised at; '' (none) keeps the keys made before they counted."""
    parts = [CACHE_VERSION, digest, kind, inputshape or "", inputshape2 or "", str(optlevel), version]
    text = "\0".join(parts + ([values] if values else []))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _entry_size(folder: Path) -> int:
    """Bytes of an entry's files; what another session removes meanwhile counts 0."""
    total = 0
    try:
        for p in folder.iterdir():
            try:
                total += p.stat().st_size if p.is_file() else 0
            except OSError:
                continue
    except OSError:
        pass
    return total


EVICT_GRACE = 600.0  # seconds: entries used more recently go last (a session reads its files just after finding one)


@contextlib.contextmanager
def _cache_lock(root: Path) -> Iterator[None]:
    """The cache's own lock (an fcntl lock on root/.lock), held while entries are stored and
    evicted, so that processes sharing the cache never count it at once."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _evict(root: Path, keep: Path) -> None:
    """Remove entries until the cache is within KUIPER_CACHE_MAX_MB: the least recently used
    first, those used in the last EVICT_GRACE seconds last, `keep` (just stored) never.
    Staging folders of processes that died are removed after a day. Safe with other
    sessions and processes doing the same (an entry that vanishes while counted counts 0)."""
    now = time.time()
    entries: list[tuple[bool, float, Path]] = []
    for d in root.iterdir():
        try:
            if d.name.startswith("."):  # another process's staging folder (or a crashed one's, after a day)
                if d.is_dir() and now - d.stat().st_mtime > 86400:
                    shutil.rmtree(d, ignore_errors=True)
                continue
            if d.is_dir() and d != keep:
                try:
                    used = (d / "record.json").stat().st_mtime
                except OSError:  # no record: a damaged entry, the first to go
                    used = 0.0
                entries.append((now - used < EVICT_GRACE, used, d))
        except OSError:  # removed meanwhile
            continue
    total = _entry_size(keep) + sum(_entry_size(d) for _, _, d in entries)
    limit = _cache_max_bytes()
    for _, _, d in sorted(entries):
        if total <= limit:
            break
        total -= _entry_size(d)
        shutil.rmtree(d, ignore_errors=True)


def _files(entry: Path, kind: str) -> PnnxFiles:
    python = entry / f"{STEM}_pnnx.py"
    source = entry / f"source{SUFFIX[kind]}"
    ncnn_param, ncnn_bin = entry / f"{STEM}.ncnn.param", entry / f"{STEM}.ncnn.bin"
    has_ncnn = ncnn_param.exists() and ncnn_bin.exists()
    return PnnxFiles(
        entry / f"{STEM}.pnnx.param",
        entry / f"{STEM}.pnnx.bin",
        python if python.exists() else None,
        source if source.exists() else None,
        ncnn_param if has_ncnn else None,
        ncnn_bin if has_ncnn else None,
    )


def _read_record(entry: Path, cached: bool) -> Conversion:
    r = json.loads((entry / "record.json").read_text())
    log = (entry / "converter.log").read_text() if (entry / "converter.log").exists() else ""
    return Conversion(
        kind=r["kind"],
        source_name=r["name"],
        converter=r["converter"],
        version=r["version"],
        key=r["key"],
        seconds=r["seconds"],
        cached=cached,
        exit_code=r["exit_code"],
        log=log,
        inputshape=r["inputshape"],
        inputshape2=r["inputshape2"],
        optlevel=r["optlevel"],
        directory=entry,
        note=r.get("note"),
        guessed=r.get("guessed"),
    )


def _damage(entry: Path, kind: str) -> str | None:
    """What is wrong with a cache entry's files (None when whole): the .pnnx.param and .bin
    must be there, and every file the record lists at the size it was stored with."""
    files = _files(entry, kind)
    if files.param is None or not _valid_param(files.param):
        return f"{STEM}.pnnx.param is missing or damaged"
    if files.bin is None or not files.bin.is_file():
        return f"{STEM}.pnnx.bin is missing"
    try:
        sizes = json.loads((entry / "record.json").read_text()).get("files") or {}
    except (OSError, ValueError):
        return "record.json is unreadable"
    for name, size in sizes.items() if isinstance(sizes, dict) else ():
        try:
            if (entry / Path(str(name)).name).stat().st_size != size:
                return f"{name} changed size since it was stored"
        except OSError:
            return f"{name} is missing"
    return None


def cached_conversion(
    key: str, cache_dir: str | Path | None = None, on_log: Callable[[str], None] | None = None
) -> tuple[PnnxFiles, Conversion] | None:
    """A conversion already in the cache, by its key (e.g. a reloaded app page), or None:
    also when the cache is not this user's alone (cache_dir.trusted_folder), or the entry is
    damaged, which is then removed (`on_log` hears why) so that the model is converted again."""
    if not re.fullmatch(r"[0-9a-f]{8,64}", key):
        return None
    root = cache_root(cache_dir)
    if not (trusted_folder(root, make=False) and trusted_folder(root / "convert", make=False)):
        return None
    entry = root / "convert" / key
    try:
        conversion = _read_record(entry, cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        if entry.is_dir() and not (entry / "record.json").exists():
            _drop(entry, "record.json is missing", on_log)
        return None
    damage = _damage(entry, conversion.kind) if conversion.kind in SUFFIX else "its record names no known format"
    if damage is not None:
        _drop(entry, damage, on_log)
        return None
    files = _files(entry, conversion.kind)
    try:
        os.utime(entry / "record.json")  # recently used
    except OSError:
        return None
    return files, conversion


def _cached(
    keys: Sequence[str], cache_dir: str | Path | None, on_log: Callable[[str], None] | None
) -> tuple[PnnxFiles, Conversion] | None:
    """The first of `keys` in the cache, said to `on_log`: a conversion that fixed no input at its
    given value is stored under the key without the values (valid for every value), one that
    did under the key with them (onnx_given.py)."""
    for key in dict.fromkeys(keys):
        hit = cached_conversion(key, cache_dir, on_log)
        if hit is not None:
            if on_log is not None:
                on_log(f"using the cached conversion {key} (pnnx {hit[1].version}, {hit[1].seconds:.2f} s when made)")
            return hit
    return None


def _drop(entry: Path, why: str, on_log: Callable[[str], None] | None) -> None:
    shutil.rmtree(entry, ignore_errors=True)
    if on_log is not None:
        on_log(f"the conversion cache's entry {entry.name} was damaged ({why}): removed, converting again")


# -- running it --------------------------------------------------------------------------------------
def _kill(proc: subprocess.Popen) -> None:
    """Kill the converter and everything it started (its own process group; on Windows, it)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def converter_timeout(asked: float | None = None) -> float:
    """Seconds the converter may run: `asked`, else KUIPER_CONVERT_TIMEOUT, else the current
    limits' max_child_seconds (the app's are lower than the command line's)."""
    from .. import limits

    if asked is not None:
        return float(asked)
    try:
        return float(os.environ[ENV_TIMEOUT])
    except (KeyError, ValueError):
        return float(limits.current().max_child_seconds)


def converter_memory() -> int:
    """The converter's address space and largest file: max_planned_bytes + 2 GiB. A 214-byte
    .onnx folding a ConstantOfShape of 2^28 floats took pnnx 1.2 GB; one of 2^31 would take
    8 GB of a shared server. Real conversions need far less (LRASPP: within 1 GiB)."""
    from .. import limits

    return limits.current().max_planned_bytes + (2 << 30)


def _limited(cmd: Sequence[str]) -> list[str]:
    """`cmd` started through a Python trampoline that sets its limits (preexec_fn is not safe
    in a threaded server): converter_memory(), or the hard limit when that is lower
    (children.rlimit_code); as it is on systems without rlimits."""
    if os.name != "posix":
        return list(cmd)
    trampoline = rlimit_code(converter_memory()) + "import os, sys\nos.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", trampoline, *cmd]


def _run(
    cmd: Sequence[str], cwd: Path, timeout: float, on_log: Callable[[str], None] | None
) -> tuple[int | None, list[str]]:
    """Run `cmd`, passing each line it prints (stdout and stderr) to on_log on this thread.
    (None, lines) when it ran past `timeout` seconds. However this ends (the time limit, an
    exception from on_log such as a closed browser tab's, Ctrl-C), nothing it started is left.
    It starts once one of the machine's child slots is free (children.slot: on_log hears
    "waiting for the converter" meanwhile); `timeout` counts from then."""
    lines: list[str] = []

    def emit(raw: bytes) -> None:
        line = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip("\r\n")
        lines.append(line)
        if on_log is not None:
            on_log(line)

    with slot("the converter", on_log):
        return _run_now(cmd, cwd, timeout, emit), lines


def _run_now(cmd: Sequence[str], cwd: Path, timeout: float, emit: Callable[[bytes], None]) -> int | None:
    pending = b""
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=os.name == "posix",  # its own process group: one kill stops everything it started
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not sel.select(min(left, 0.5)):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    emit(raw)
        if pending:
            emit(pending)
        code = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            _kill(proc)
        proc.stdout.close()
    return code


# pnnx first echoes its options (`optlevel = 2`): no use in an error message.
_ECHO = re.compile(r"(pnnx|ncnn)\w* = |(fp16|optlevel|device|inputshape2?|input2?|customop|moduleop) = ")


def _last_lines(lines: Sequence[str], n: int = QUOTED_LINES) -> str:
    kept = [line for line in lines if line.strip() and not _ECHO.match(line) and not _frame(line)]
    frames = sum(1 for line in lines if _frame(line))
    note = [f"({frames} frames of a C++ backtrace left out: the whole log is kept)"] if frames else []  # pnnx's
    # message is above them, and a dozen frames would push it out of the quoted lines
    return "\n".join("  " + line for line in kept[-n:] + note)


# c10's "Exception raised from reportError at …" heads a backtrace, and its dispatcher lists
# every backend ("AutocastCPU: fallthrough registered at …"): neither says why.
_NOT_A_REASON = re.compile(r"\s*(File \"|Traceback |Exception raised from |\w+: (fallthrough )?registered at )")


def _frame(line: str) -> bool:
    """A line of a stack trace (a C++ backtrace's frame and c10's header over them, Python's
    traceback, c10's dispatcher listing): no reason."""
    return bool(BACKTRACE_FRAME.match(line) or _NOT_A_REASON.match(line))


# The converter's own reason: the line that says what went wrong.
_REASON = re.compile(
    r"error|exception|what\(\)|failed|expect|missing|not supported|unsupported|invalid|cannot|can't|"
    r"unknown|not found|mismatch|terminate",
    re.I,
)
_MEMORY = re.compile(r"bad_alloc|failed to allocate|cannot allocate|out of memory|memoryerror", re.I)
_SHAPE_ERROR = re.compile(r"shape|reshape|broadcast|dimension|\bdims?\b|size mismatch|expect.*\[", re.I)
_GUESSED = re.compile(r"get inputshape from traced inputs")
_NESTED = re.compile(r"NestedTensor|nested_tensor")
_BOOL_INPUT = re.compile(r"CreateTensorAsOrtValue failed tensor type")  # pnnx 20261020's ONNX import
_INDEX_RANGE = re.compile(r"ort Run failed.*(out of (data )?bounds|out of range value in index)", re.I)


def reason_line(lines: Sequence[str]) -> str | None:
    """The converter's own line that says why it failed: a C++ exception's `what():` (the
    last), else the last line that reads as a reason; frames left out."""
    kept = [line.strip() for line in lines if line.strip() and not _ECHO.match(line) and not _frame(line)]
    # (TorchScript's "what():  The following operation failed in the TorchScript interpreter." says
    # where; its reason is the `RuntimeError: …` line after the traceback)
    thrown = [
        line for line in kept if line.startswith("what():") and "failed in the TorchScript interpreter" not in line
    ]
    if thrown:
        return thrown[-1][:500]
    for line in reversed(kept):
        if _REASON.search(line) and not line.startswith("#"):
            return line[:500]
    return None


def guessed_shapes(lines: Sequence[str]) -> tuple[str, str] | None:
    """(inputshape, inputshape2) pnnx chose itself where the file leaves input dims open (ONNX's
    dynamic dims: it picks two sizes, e.g. [1,3,128,128] and [1,3,512,512]); None when it read
    fixed shapes from the file."""
    for i, line in enumerate(lines):
        if _GUESSED.search(line):
            echo = dict((k.strip(), v.strip()) for k, _, v in (x.partition("=") for x in lines[i + 1 : i + 3]) if _)
            if echo.get("inputshape2"):
                return echo.get("inputshape", ""), echo["inputshape2"]
    return None


def failure_message(
    name: str, kind: str, code: int | None, lines: Sequence[str], inputshape: str | None, records_shapes: bool
) -> str:
    """Why the converter wrote no model: its own reason line first, then only the hints that apply
    (memory where an allocation failed, shapes where a shape is what it quotes or the sizes were
    guessed, torch.jit.trace where a TorchScript module crashed it, a bool ONNX input where pnnx
    could not make one, input-given indices where its made-up values fell out of range), then
    its last lines, stack frames left out (the whole log: --converter-log, ConversionError.log)."""
    reason = reason_line(lines)
    hints: list[str] = []
    text = "\n".join(lines)
    if _MEMORY.search(text) or code == -9:
        hints.append(
            f"it ran out of memory: it runs within {converter_memory() >> 20:,} MiB of address space and files"
        )
    guess = guessed_shapes(lines) if inputshape is None else None
    if guess is not None:
        hints.append(
            f"the file leaves input dims open and pnnx guessed {guess[0]} and {guess[1]}: give the size the model "
            "runs at (--inputshape, or --input: converted at the input's shapes)"
        )
    elif reason is not None and _SHAPE_ERROR.search(reason) and inputshape is None and kind == "onnx":
        hints.append("a shape is what it quotes: giving the input shape the model runs at (--inputshape) may help")
    if kind == "onnx" and _BOOL_INPUT.search(text):
        hints.append(
            "pnnx cannot take a bool graph input (its ONNX import feeds every input to onnxruntime and makes no bool "
            "tensor): export the mask as a uint8 or float input made bool inside the model (mask.bool() or mask > 0 "
            "in forward)"
        )
    elif kind == "onnx" and _INDEX_RANGE.search(text):
        hints.append(
            "pnnx runs the model once on input values it makes up, and an index computed from or given as an input "
            "fell out of range there (not your values: pnnx does not take them): it cannot convert a model that "
            "indexes with its inputs' values; keep such indices inside the model (a constant or a buffer), or "
            "convert the traced .pt"
        )
    if kind == "torchscript" and inputshape is None and not records_shapes:
        hints.append("giving inputshape, e.g. [1,3,224,224], may help")
    argument = NOT_A_TENSOR.search(reason or "") if kind == "torchscript" else None
    if kind == "torchscript" and _NESTED.search(text):
        hints.append(
            "the trace holds nested tensors (nn.TransformerEncoder's fast path given a padding mask), which pnnx "
            "cannot convert: trace with enable_nested_tensor=False (for nn.Transformer: model.encoder."
            "use_nested_tensor = False before torch.jit.trace)"
        )
    elif argument is not None:
        hints.append(scripted_argument_hint(argument.group(1)))
    elif kind == "torchscript" and code is not None and code < 0 and os.name == "posix":
        # pnnx 20261020 dies in pass_level1 on a torch.jit.script module
        hints.append("pnnx crashes on some torch.jit.script modules: if this is one, save it with torch.jit.trace")
    head = f"{name}: the pnnx converter failed (exit code {code}) and wrote no model"
    head += f": {reason}" if reason else ""
    head += "".join(f"; {h}" for h in hints)
    return f"{head}. Its last lines:\n{_last_lines(lines)}"  # (backtrace frames left out there, counted)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


_SELF_NAME = re.compile(r"\bself\.([0-9][\w-]*|\w*-[\w-]*)")
_ATEN_CALL = re.compile(r"(?<![\w.:])aten::(\w+)\(")


def repair_python(text: str) -> str | None:
    """pnnx's NAME_pnnx.py names submodules after module paths, which need not be Python
    names (`self.2` for a top-level nn.Sequential, `self.block1-0_f` for torchvision's RegNet):
    renamed consistently (`m_2`, `block1_0_f`); an operator it has no Python for is written
    `aten::op(…)`, which is `torch.ops.aten.op(…)`. None when it still does not parse (cut short)."""
    if _parses(text):
        return text
    fixed = _SELF_NAME.sub(
        lambda m: "self." + ("m_" if m.group(1)[0].isdigit() else "") + m.group(1).replace("-", "_"), text
    )
    fixed = _ATEN_CALL.sub(r"torch.ops.aten.\1(", fixed)
    return fixed if _parses(fixed) else None


def _valid_param(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64).split(b"\n")
    except OSError:
        return False
    return len(head) >= 2 and head[0].strip() == b"7767517" and len(head[1].split()) == 2


def convert(
    source: Path | bytes,
    kind: str,
    options: ConversionOptions | None = None,
    *,
    name: str = "model",
    zip_names: Sequence[str] | None = None,
) -> tuple[PnnxFiles, Conversion]:
    """Convert an ONNX (`kind="onnx"`) or TorchScript (`"torchscript"`) model with pnnx, or
    find the result in the cache. Returns the PNNX files and the record of the conversion.

    ConverterNotFoundError without a converter; ConversionError quoting the converter when
    it fails, runs past its time limit, or a TorchScript model comes without its input shape.
    `zip_names`: a TorchScript file's entries (whether it records its input shapes)."""
    options = options or ConversionOptions()
    inputshape, inputshape2, optlevel = options.inputshape, options.inputshape2, options.optlevel
    timeout, on_log, cache_dir = options.timeout, options.on_log, options.cache_dir
    if kind not in SUFFIX:
        raise ValueError(f"unknown kind {kind!r}")
    converter = find_converter()
    shape1 = inputshape_text(inputshape, "inputshape")
    shape2 = inputshape_text(inputshape2, "inputshape2")
    level = DEFAULT_OPTLEVEL if optlevel is None else int(optlevel)
    if level not in (0, 1, 2):
        raise InputError(f"optlevel must be 0, 1 or 2, got {optlevel!r}")
    if kind == "torchscript" and shape1 is None and not records_input_shapes(zip_names):
        raise ConversionError(
            f"{name}: a TorchScript model needs its input shape(s) to be converted: give inputshape, "
            "e.g. [1,3,224,224] (several inputs: [1,3,224,224],[1,10]i64; "
            "`--inputshape` on the command line)"
        )
    values, digest = (given_values(options.inputs, options.values) if kind == "onnx" else None), content_digest(source)
    key, key_given = (
        cache_key(digest, kind, shape1, shape2, level, converter.version, v) for v in ("", values_text(values))
    )
    root = cache_root(cache_dir) / "convert"
    hit = _cached((key, key_given), cache_dir, on_log)
    if hit is not None:
        return hit
    timeout = converter_timeout(timeout)

    # One slot of the machine's children and one deadline for every step (the normalisation's
    # child, then pnnx): an upload holds a slot at most `timeout` seconds once it has one.
    with private_folder("kuiper-convert-") as work, slot("the converter", on_log):  # (a kill: swept)
        deadline = time.monotonic() + timeout
        model_file = work / f"{STEM}{SUFFIX[kind]}"
        if isinstance(source, bytes):
            model_file.write_bytes(source)
        else:
            shutil.copyfile(source, model_file)
        original = _kept_original(model_file, kind)
        prepared = prepare(
            model_file, kind, shape1, timeout, converter_memory(), name=name, on_log=on_log, values=values
        )
        pnnx_shape, key = prepared.inputshape, (key_given if prepared.fixed else key)  # valid for these values only
        cmd = [str(converter.path), model_file.name, f"optlevel={level}"]
        cmd += [f"inputshape={pnnx_shape}"] if pnnx_shape else []
        cmd += [f"inputshape2={shape2}"] if shape2 else []
        if on_log is not None:
            on_log("$ pnnx " + " ".join(cmd[1:]))
        untraced = kind == "torchscript" and shape1 is not None and forget_traced_inputs(model_file)
        started = time.perf_counter()
        try:
            code, lines = _run(_limited(cmd), work, max(1.0, deadline - time.monotonic()), on_log)
        except OSError as e:
            raise ConversionError(f"could not run the pnnx converter {converter.path}: {e.strerror or e}") from None
        seconds = time.perf_counter() - started
        log = "\n".join(lines)
        if code is None:
            raise ConversionError(
                f"{name}: the conversion ran past its time limit of {timeout:g} s and pnnx was stopped "
                f"(set {ENV_TIMEOUT} or the timeout option for more); its last lines:\n{_last_lines(lines)}",
                log=log,
            )
        param, binf, python = (work / f"{STEM}.pnnx.param", work / f"{STEM}.pnnx.bin", work / f"{STEM}_pnnx.py")
        if not (_valid_param(param) and binf.exists()):
            raise ConversionError(
                failure_message(name, kind, code, lines, shape1, records_input_shapes(zip_names)),
                log=log,
                exit_code=code,
            )
        notes = []
        if code != 0:
            notes.append(f"pnnx exited with code {code} after writing a valid .pnnx.param/.bin: accepted")
        notes += mark_fixed_inputs(param, prepared.fixed)
        guess = guessed_shapes(lines) if shape1 is None else None
        if guess is not None:
            notes.append(
                f"the file leaves input dims open and pnnx guessed {guess[0]}"
                + (f" (and {guess[1]} to find which dims vary)" if guess[1] else "")
                + ": give the size the model runs at (--inputshape, or --input: converted at the input's shapes)"
            )
        if kind == "torchscript":
            notes += _restore_causal_masks(model_file, param, binf, python, name)
        if untraced:
            notes.append(f"the file records the inputs it was traced with; converted at {shape1}, the shapes given")
        notes += _keep_python(python, code)
        record = {
            "converter": str(converter.path),
            "version": converter.version,
            "key": key,
            "kind": kind,
            "name": Path(name).name,
            "seconds": round(seconds, 4),
            "exit_code": code,
            "inputshape": shape1,
            "inputshape2": shape2,
            "optlevel": level,
            "guessed": guess[0] if guess is not None else None,
            "note": "; ".join(notes) or None,
        }
        keep = [param, binf] + ([python] if python.exists() else [])
        ncnn_files = [work / f"{STEM}.ncnn.param", work / f"{STEM}.ncnn.bin"]
        if _valid_ncnn(*ncnn_files):  # the deployed model, kept for `kuiper compare --ncnn`
            keep += ncnn_files
        try:
            return _store(root, key, keep, original, kind, record, log)
        except OSError as e:  # a full disk, a cache folder made read-only meanwhile
            raise ConversionError(f"{name}: converted, but the result could not be stored: {e.strerror or e}") from None


def _kept_original(model_file: Path, kind: str) -> Path:
    """The file as the user gave it, which the conversion check and `compare --framework` run:
    an .onnx is normalised in place before pnnx reads it (onnx_prepare.py replaces the file), so
    a second name keeps the original (a hard link: no copy). A TorchScript file is run as pnnx
    read it (dropping its stored example inputs changes no computation)."""
    if kind != "onnx":
        return model_file
    original = model_file.with_name(f"original{SUFFIX[kind]}")
    try:
        os.link(model_file, original)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(model_file, original)
    return original


def _keep_python(python: Path, code: int | None) -> list[str]:
    """pnnx's model_pnnx.py repaired so that torch can run it (the torch references), or dropped
    with a note saying why."""
    if not python.exists():
        return []
    code_text = repair_python(python.read_text(errors="replace"))
    if code_text is None:
        python.unlink()
        why = "was cut short" if code != 0 else "is not valid Python"
        return [f"the {STEM}_pnnx.py it wrote {why}: no torch references from it"]
    python.write_text(code_text)
    return []


def _valid_ncnn(param: Path, binf: Path) -> bool:
    """pnnx wrote ncnn files and their .param reads whole (pnnx may abort in its ncnn writer
    after writing the PNNX files). Layers the engine cannot run (an LSTM) keep them too: ncnn
    itself may."""
    from ..errors import KuiperError
    from ..ncnn import read_param

    if not (param.is_file() and binf.is_file()):
        return False
    try:
        read_param(param)
    except KuiperError:
        return False
    return True


def _restore_causal_masks(model_file: Path, param: Path, binf: Path, python: Path, name: str) -> list[str]:
    """Give back the causal masks pnnx drops (causal_attention.py); a note if any were."""
    from .causal_attention import add_causal_masks, causal_attention_paths

    paths = causal_attention_paths(model_file, Path(name).name)
    if not paths:
        return []
    from ..pnnx import load_graph, save

    graph = load_graph(param, binf)
    given = add_causal_masks(graph, paths)
    if not given:
        return []
    save(graph, param, binf)
    python.unlink(missing_ok=True)  # pnnx's Python runs them without: not a reference
    return [
        f"pnnx dropped the causality of {len(given)} nn.MultiheadAttention ({', '.join(given[:3])}"
        f"{', …' if len(given) > 3 else ''}: is_causal in the TorchScript code); Kuiper gave each its causal "
        "mask as $attn_mask, and did not keep pnnx's Python, which runs them without"
    ]


def _within_limits(param: Path, name: str) -> None:
    """The converted model's text parses under the current limits (every weight's declared
    size among them): else the LimitError its load would raise, before anything is stored (a
    146-byte .onnx folded by pnnx into a 512 MiB weight the app then refused stayed cached)."""
    from ..pnnx import parse_param_bytes

    parse_param_bytes(param.read_bytes(), f"{Path(name).name} (converted) {param.name}")


def _store(
    root: Path, key: str, files: Sequence[Path], model_file: Path, kind: str, record: dict, log: str
) -> tuple[PnnxFiles, Conversion]:
    """Move the results into the cache entry `key` (atomically: a rename), then evict to the
    cache's size. A model over the current limits is refused first (_within_limits); an
    entry larger than the whole cache, or a cache not this user's alone, or one that cannot
    be written, goes to a private folder that lives as long as the machine's temp instead."""
    if put_in_order(files[0]):
        why = "pnnx wrote an operator after one reading its output: put in an order that runs"
        record["note"] = "; ".join(filter(None, [record["note"], why]))
    _within_limits(files[0], record["name"])
    size = sum(f.stat().st_size for f in [*files, model_file]) + len(log)
    why_not = None
    if not (trusted_folder(root.parent) and trusted_folder(root)):
        why_not = "the conversion cache is not writable, or not this user's alone: not kept there"
    elif size > _cache_max_bytes():
        why_not = f"it is larger than the conversion cache ({ENV_CACHE_MAX}={_cache_max_bytes() / 2**20:g}): not kept"
    staging = None
    if why_not is None:
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        except OSError:
            why_not = "the conversion cache is not writable: not kept there"
    if staging is None:
        staging = Path(tempfile.mkdtemp(prefix="kuiper-converted-"))
        record["note"] = "; ".join(filter(None, [record["note"], why_not]))
    for f in files:
        shutil.move(str(f), staging / f.name)
    shutil.move(str(model_file), staging / f"source{SUFFIX[kind]}")
    (staging / "converter.log").write_text(log)
    record["files"] = {p.name: p.stat().st_size for p in staging.iterdir()}  # checked before each use
    (staging / "record.json").write_text(json.dumps(record, indent=1))
    if why_not is not None:
        return _files(staging, kind), _read_record(staging, cached=False)
    entry = root / key
    with _cache_lock(root):
        try:
            os.rename(staging, entry)
        except OSError:  # another process stored the same key first: theirs is as good
            shutil.rmtree(staging, ignore_errors=True)
        _evict(root, entry)
    return _files(entry, kind), _read_record(entry, cached=False)


def export_files(files: PnnxFiles, out_dir: str | Path, stem: str, inputs: Sequence[str | Path] = ()) -> list[Path]:
    """Copy a conversion's files to `out_dir` as STEM.pnnx.param, STEM.pnnx.bin,
    STEM_pnnx.py (its .bin file name rewritten to match) and pnnx's STEM.ncnn.param/.bin, written safely (output_files.py:
    all complete or none touched; a FIFO, a directory, a missing name or one of `inputs`,
    such as the model converted, refused)."""
    from ..output_files import check_targets, write_files

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out} is a file: give a folder for the converted files")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot write {e.filename or out}: {e.strerror or e}") from None

    def copy(src: Path) -> Callable[[IO[bytes]], None]:
        def write(f: IO[bytes]) -> None:
            with open(src, "rb") as source:
                shutil.copyfileobj(source, f)

        return write

    outputs: list[tuple[Path, Callable[[IO[bytes]], object]]] = []
    for src, dst in (
        (files.param, out / f"{stem}.pnnx.param"),
        (files.bin, out / f"{stem}.pnnx.bin"),
        (files.ncnn_param, out / f"{stem}.ncnn.param"),
        (files.ncnn_bin, out / f"{stem}.ncnn.bin"),
    ):
        if src is not None:
            outputs.append((dst, copy(src)))
    if files.python is not None:
        text = files.python.read_text().replace(f"'{STEM}.pnnx.bin'", repr(f"{stem}.pnnx.bin")).encode()
        outputs.append((out / f"{stem}_pnnx.py", lambda f: f.write(text)))
    targets = check_targets([("-o", dst) for dst, _ in outputs], inputs)
    return write_files([(dst, write) for dst, (_, write) in zip(targets, outputs)])
