"""The app's "open your own model" as plain data: what a file is, the bytes to open, the
TorchScript input-shape field's check, and the sentences about a conversion.

The formats registry (kuiper_core.formats) opens and converts; this module only prepares
its arguments from an upload or a path typed on the server, and words its records.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

from ..budgets import MAX_PICKLE_BYTES, Copied, load_pickle, open_zip, torchscript_pickle, walk_once
from ..errors import InputError, KuiperError, LimitError, excerpt
from ..files import read_regular
from ..formats import BY_NAME, Context, Conversion, OpenOptions, detect, needs_inputshape
from ..formats.base import ConversionOptions
from ..formats.convert import INSTALL_HINT, convert, inputshape_text
from ..pnnx.writer import default_bin_path

CONVERTED = ("onnx", "torchscript")
DEFAULT_SHAPE = "[1,3,224,224]"  # what most image models take; the field says to change it
LOG_LINES = 30  # of the converter's log shown while it runs
WAITING = "waiting for the converter"  # how a conversion's log says it is queued (children.slot)
NO_CONVERTER = (
    "Opening ONNX and TorchScript models needs the pnnx converter, which is not installed on this server: "
    f"{INSTALL_HINT}."
)


def kind_of(data: bytes, name: str) -> str | None:
    """The format of a file by its content (its name as a hint): 'pnnx', 'kir', 'onnx',
    'torchscript', or None when it is none of them."""
    try:
        return detect(Context(data, OpenOptions(name=name))).NAME
    except KuiperError:
        return None


def asks_for_shape(data: bytes, name: str) -> bool:
    """A TorchScript file that does not record its traced input shapes: pnnx needs them given."""
    return needs_inputshape(data, name)


class _Tensor:
    """A tensor in a TorchScript archive's data.pkl, by its shape only (no data is read)."""

    def __init__(self, shape: Any) -> None:
        ok = isinstance(shape, (tuple, list)) and len(shape) <= 64 and all(isinstance(d, int) for d in shape)
        self.shape = tuple(shape) if ok else ()


class _Module:
    """A scripted module's pickled state: its class name and attributes (in definition order)."""

    kind = ""

    def __setstate__(self, state: Any) -> None:
        self.__dict__["state"] = state if isinstance(state, dict) else {}


def _shapes_only(module: str, name: str) -> Any:
    """What a global in data.pkl becomes when read for its shapes only: tensors (as _Tensor),
    modules (as _Module) and dicts; any other global is refused, so nothing in the file runs.
    No call copies its argument: a pickle may pass one big object to many calls (a 100 KB
    data.pkl giving one 100,000-character string to 200 `build_intlist` calls, each a
    `list(…)`, took 160 MB). Each (module, name) is resolved once (budgets.BoundedUnpickler)."""
    if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
        return lambda storage, offset, size, *rest: _Tensor(size)
    if (module, name) == ("collections", "OrderedDict"):
        return lambda *args: {}  # torch pickles one empty, then sets its items
    if module == "torch" and name.endswith("Storage"):
        return name
    if module == "torch.jit._pickle":  # a scripted module's typed lists and tags
        if name.startswith("build_"):
            return lambda items: items
        if name == "restore_type_tag":
            return lambda value, tag: value
    if module.startswith("__torch__"):
        return type(name, (_Module,), {"kind": name})
    raise pickle.UnpicklingError(f"{module}.{name} is not read")


_WEIGHTS = ("weight", "weight_ih_l0", "in_proj_weight")  # a layer's first weight: what its input must fit


def _submodules(module: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(module, _Module):
        yield from ((str(k), v) for k, v in module.__dict__.get("state", {}).items() if isinstance(v, _Module))


def _first_layer(root: Any) -> tuple[str, tuple[int, ...]] | None:
    """(class name, weight shape) of the first module with a weight, in definition order.
    Each module is visited once (budgets.walk_once): a pickle may share one module under
    many keys or hold a cycle (a 100-byte data.pkl of `M.state = {a: M, b: M}` made the
    walk 2^64 steps)."""
    for _, module in walk_once(root, _submodules):
        if not isinstance(module, _Module):
            continue
        state = module.__dict__.get("state", {})
        for key in _WEIGHTS:
            weight = state.get(key)
            if isinstance(weight, _Tensor) and weight.shape:
                return module.kind, weight.shape
    return None


def guess_inputshape(data: bytes) -> str:
    """A sensible first guess of a TorchScript model's input shape from its first layer's
    weight: Conv2d [1,C,224,224], Conv1d [1,C,224], Linear [1,F], a recurrent or attention
    layer [1,16,F], an Embedding [1,16]i64; else DEFAULT_SHAPE. Sizes other than the channels
    or features are guesses to check. The data.pkl libtorch reads, within the budgets of
    kuiper_core.budgets; past one, the plain guess."""
    try:
        with open_zip(data, "the upload") as z:
            name = torchscript_pickle(z)
            if name is None:
                return DEFAULT_SHAPE
            root = load_pickle(Copied(z, "the upload").read(name, MAX_PICKLE_BYTES), name, _shapes_only)
    except Exception:  # noqa: BLE001  -- any archive we cannot (or will not) read: the plain guess
        return DEFAULT_SHAPE
    found = _first_layer(root)
    if found is None:
        return DEFAULT_SHAPE
    kind, shape = found
    kind = kind.split("___torch_mangle")[0]
    if kind == "Conv2d" and len(shape) == 4:
        return f"[1,{shape[1]},224,224]"
    if kind == "Conv1d" and len(shape) == 3:
        return f"[1,{shape[1]},224]"
    if kind == "Linear" and len(shape) == 2:
        return f"[1,{shape[1]}]"
    if kind in ("LSTM", "GRU", "RNN", "MultiheadAttention") and len(shape) == 2:
        return f"[1,16,{shape[1]}]"
    if kind == "Embedding":
        return "[1,16]i64"
    return DEFAULT_SHAPE


NCNN_SHAPE = "[3,224,224]"  # an ncnn blob has no batch dim: (c, h, w)


def ncnn_needs_shape(data: bytes, name: str) -> bool:
    """An ncnn .param with an `Input` that declares no shape (pnnx writes none): the app asks for it,
    as ncnn's own app is given it by whoever feeds the input (False when the file does not read:
    opening it says why)."""
    from ..ncnn import parse_bytes

    try:
        layers = parse_bytes(data, name).layers
    except KuiperError:
        return False
    return any(layer.type == "Input" and not any(layer.params.get(k) for k in (0, 1, 2, 11)) for layer in layers)


def shape_problem(text: str | None, *, required: bool) -> str | None:
    """What is wrong with the input-shape field ('' or None when it is fine)."""
    if not (text or "").strip():
        return "A TorchScript model needs its input shape(s) to be converted, e.g. [1,3,224,224]." if required else None
    try:
        inputshape_text(text)
    except InputError as e:
        return str(e)
    return None


VALUES_EXAMPLE = "sr=16000"
MAX_VALUES_TEXT = 400
# name, "=", value (an integer or up to 8 in brackets, ASCII digits), separator: matched in turn
# so that an error points where the text stops reading.
_VALUE_PARTS = (
    (re.compile(r"\s*[A-Za-z_][A-Za-z0-9_.:/-]{0,63}", re.ASCII), "an input's name"),
    (re.compile(r"\s*=", re.ASCII), "'='"),
    (
        re.compile(r"\s*(-?[0-9]{1,19}|\[\s*-?[0-9]{1,19}(\s*,\s*-?[0-9]{1,19}){0,7}\s*\])", re.ASCII),
        "an integer or [up to 8 of them]",
    ),
    (re.compile(r"\s*([,;]|$)", re.ASCII), "',' before the next value"),
)


def parse_values(text: str | None) -> dict[str, int | list[int]]:
    """The field for the values of an ONNX model's small integer inputs: `sr=16000`, several
    separated by commas (`sr=8000, mode=[1,2]`). {} for an empty field; InputError with a
    caret where the text stops reading (a name, `=`, at most 8 integers of ASCII digits)."""
    text = (text or "").strip()
    if len(text) > MAX_VALUES_TEXT:
        raise InputError(f"the values field holds {len(text)} characters; at most {MAX_VALUES_TEXT}")
    values: dict[str, int | list[int]] = {}
    at = 0
    while at < len(text):
        parts = []
        for pattern, expected in _VALUE_PARTS:
            m = pattern.match(text, at)
            if m is None:
                column = at + 1 + len(text[at:]) - len(text[at:].lstrip())
                raise InputError(
                    f"values, column {column}: expected {expected} (e.g. {VALUES_EXAMPLE}):\n{excerpt(text, column)}"
                )
            parts.append(m.group().strip())
            at = m.end()
        name, value = parts[0], parts[2]
        numbers = [int(v) for v in re.findall(r"-?[0-9]+", value)]
        if any(not -(1 << 63) <= v < (1 << 63) for v in numbers):
            raise InputError(f"values: the value of {name} does not fit in 64 bits")
        values[name] = numbers if value.startswith("[") else numbers[0]
    return values


def values_problem(text: str | None) -> str | None:
    """What is wrong with the values field (None when it is fine or empty)."""
    try:
        parse_values(text)
    except InputError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class OpenRequest:
    """What to open: the model's bytes, its weights' bytes (.param/.kir), its name and format."""

    name: str
    data: bytes
    bin: bytes | None
    kind: str | None
    inputshape: str | None = None  # an ncnn model's input blob shapes, from the PNNX files beside it


_EXTERNAL_SEEN: dict[bytes, bool] = {}  # by content digest: the page asks at every rerun


def may_have_external_data(data: bytes) -> bool:
    """Whether an .onnx may keep its weights in a separate file (the page then asks for it).
    Remembered per content for the page's reruns (the walk of a hostile 12 MB file of tiny
    fields takes about a second; its digest a few milliseconds)."""
    from ..formats.onnx_external import may_have_external_data as look

    key = hashlib.sha256(data).digest()
    if key not in _EXTERNAL_SEEN:
        if len(_EXTERNAL_SEEN) >= 64:
            _EXTERNAL_SEEN.clear()
        _EXTERNAL_SEEN[key] = look(data)
    return _EXTERNAL_SEEN[key]


def from_upload(model_file: Any, bin_file: Any) -> OpenRequest | None:
    """From Streamlit's uploaded files (None when no model file was chosen)."""
    if model_file is None:
        return None
    data = model_file.getvalue()
    kind = kind_of(data, model_file.name)
    # a .pnnx.bin, or an .onnx's external data file (model.onnx.data); TorchScript holds its own
    weights = bin_file.getvalue() if bin_file is not None and kind != "torchscript" else None
    return OpenRequest(model_file.name, data, weights, kind)


SERVER_MODELS_ENV = "KUIPER_SERVER_MODELS"  # the one folder the app's "a path on the server" reads from


def server_models_folder() -> Path | None:
    """The folder KUIPER_SERVER_MODELS names (resolved), or None: then the app offers no path
    on the server at all (safe by default: a student could otherwise read any model file the
    server's user can, the cache's and the teacher's, and tell which paths exist)."""
    named = os.environ.get(SERVER_MODELS_ENV, "").strip()
    if not named:
        return None
    folder = Path(named).expanduser().resolve()
    return folder if folder.is_dir() else None


def _inside(folder: Path, text: str) -> Path | None:
    """`text` (a name relative to `folder`, or an absolute path) resolved, when it lies inside
    `folder` once every symlink is followed; else None."""
    try:
        path = (folder / text).resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL
        return None
    return path if path != folder and path.is_relative_to(folder) else None


def from_path(text: str, max_bytes: int, folder: Path | None = None) -> OpenRequest:
    """A model file on the server by its path (a .param or .kir with its sibling .bin, an .onnx
    with its external data file), read within `max_bytes` per file. With `folder` (the app's
    KUIPER_SERVER_MODELS) only files inside it are read, named relative to it, and every
    failure to read one gets the same message, which says nothing of whether the path
    exists; without, the error says what is wrong with the path."""
    if not text.strip():
        raise InputError("type the path of a model file on the server")
    suffixes = tuple(s for m in BY_NAME.values() for s in m.SUFFIXES)
    shown = text.strip()[:200]
    if folder is not None:
        confined = _inside(folder, text.strip())
        refusal = InputError(
            f"cannot open {shown!r}: give the name of a model file in this server's models folder "
            f"(a name ending in {', '.join(suffixes)})"
        )
        if confined is None or not confined.name.lower().endswith(suffixes):
            raise refusal
        path = confined
    else:
        path = Path(text.strip()).expanduser()
        if not path.name.lower().endswith(suffixes):
            raise InputError(f"{path}: not a model file name; expected one ending in {', '.join(suffixes)}")

    def read(p: Path) -> bytes:
        if folder is not None and _inside(folder, str(p)) is None:
            raise refusal
        problem: Callable[[str], InputError] = (lambda m: refusal) if folder is not None else InputError
        try:
            return read_regular(p, problem, max_bytes=max_bytes, limit="max_upload_bytes")
        except LimitError:
            raise
        except OSError as e:  # permissions
            raise (refusal if folder is not None else InputError(f"cannot read {p}: {e.strerror or e}")) from None

    data = read(path)
    kind = kind_of(data, path.name)
    weights = None
    if kind in ("pnnx", "kir", "ncnn"):  # m.ncnn.param's weights: m.ncnn.bin
        sibling = default_bin_path(path)
        weights = read(sibling) if sibling.is_file() else None
    elif kind == "onnx":  # weights kept in one file beside it (model.onnx.data): read too
        from ..formats.onnx_external import external_files

        beside = [path.parent / name for name in external_files(data)]
        weights = read(beside[0]) if len(beside) == 1 and beside[0].is_file() else None
    shape = _ncnn_shape_beside(path, read) if kind == "ncnn" and ncnn_needs_shape(data, path.name) else None
    return OpenRequest(path.name, data, weights, kind, shape)


def _ncnn_shape_beside(path: Path, read: Callable[[Path], bytes]) -> str | None:
    """`[c,h,w]` per input from the .pnnx.param pnnx wrote beside an .ncnn.param (its inputs'
    shapes without the batch dim), or None (no such file, or its inputs do not say)."""
    from ..formats.ncnn import pnnx_sibling
    from ..pnnx import parse_param_bytes

    sibling = pnnx_sibling(path)
    if not sibling.is_file():
        return None
    try:
        shapes = [op.outputs[0].shape for op in parse_param_bytes(read(sibling), sibling.name).inputs]
    except KuiperError:
        return None
    if not shapes or any(not s or s[0] != 1 or not all(isinstance(d, int) for d in s[1:]) for s in shapes):
        return None
    return ",".join("[" + ",".join(str(d) for d in s[1:]) + "]" for s in shapes if s)


def conversion_text(conversion: Conversion, say_cached: bool = True) -> str:
    """'converted from onnx by pnnx 20261020 in 3.2 s (optlevel 2, inputshape [1,3,224,224])',
    and whether this open found it in the conversion cache (`say_cached`)."""
    what = f"optlevel {conversion.optlevel}" + (
        f", inputshape {conversion.inputshape}" if conversion.inputshape else ""
    )
    when = " (from the conversion cache)" if conversion.cached and say_cached else ""
    return f"converted from {conversion.kind} by pnnx {conversion.version} in {conversion.seconds:.1f} s ({what}){when}"


def convert_request(
    request: OpenRequest,
    inputshape: str | None,
    on_log: Callable[[str], None] | None,
    values: dict[str, int | list[int]] | None = None,
) -> Conversion:
    """Run the pnnx converter on an ONNX or TorchScript request (or find it in the conversion
    cache), `on_log` getting each line; opening the same bytes afterwards finds it cached.
    ConversionError quoting the converter when it fails; ConverterNotFoundError without one."""
    assert request.kind in CONVERTED
    zip_names = Context(request.data, OpenOptions()).zip_names
    options = ConversionOptions(inputshape=inputshape, on_log=on_log, values=values or None)
    source: Path | bytes = request.data
    if request.kind == "onnx":  # weights in a separate file: given beside it (as open_model does)
        from ..formats.onnx_external import self_contained

        source = self_contained(request.data, request.name, request.bin)
    _, conversion = convert(source, request.kind, options, name=request.name, zip_names=zip_names)
    return conversion
