"""One way in: open any model file the engine knows, by its content.

    from kuiper_core.formats import open_model
    model = open_model("resnet18.onnx")          # or .pnnx.param, .kir, TorchScript .pt, or bytes
    model.graph, model.format, model.files, model.conversion, model.references
    runtime = model.build()

Each format is one module with `match(context)` (looks at the bytes) and `open(context)`, as
Netron's ModelFactory: pnnx (.param + .bin), ncnn (.ncnn.param + .ncnn.bin, run with ncnn's
own layer semantics: kuiper_core/ncnn), kir (textual IR), onnx and torchscript (both
converted to PNNX by the real `pnnx` converter, convert.py). The suffix is only a hint, used
when no content matches (so a damaged `.param` still gets the .param parser's located error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ..errors import InputError
from . import kir, ncnn, onnx, pnnx, torchscript
from .base import (
    Checker,
    Context,
    Conversion,
    ConversionOptions,
    InputShape,
    ModelFormat,
    OpenedModel,
    OpenOptions,
    PnnxFiles,
    ReferenceInfo,
    Source,
    reference_info,
)

# The format modules are the factories (a module satisfies the ModelFormat protocol).
FORMATS: tuple[ModelFormat, ...] = cast("tuple[ModelFormat, ...]", (pnnx, ncnn, kir, onnx, torchscript))
BY_NAME: dict[str, ModelFormat] = {f.NAME: f for f in FORMATS}
CONVERTED = ("onnx", "torchscript")  # the formats the pnnx converter turns into PNNX first
EXPECTED = (
    "a PNNX .param (first line 7767517, weights in its .bin), an ncnn .ncnn.param (with its .ncnn.bin), "
    "textual IR (.kir), "
    "an ONNX model (.onnx) or a TorchScript module (.pt, from torch.jit.trace/script)"
)


def detect(context: Context) -> ModelFormat:
    """The format of the file: by content first, then by a file name suffix."""
    if context.problem is not None:
        for f in (
            BY_NAME["ncnn"],
            BY_NAME["pnnx"],
            BY_NAME["kir"],
        ):  # their readers say what is wrong, located (as always)
            if context.suffix_is(*f.SUFFIXES):
                return f
        raise InputError(f"cannot read {context.where}: {context.problem}")
    for f in FORMATS:
        if f.match(context):
            return f
    for f in FORMATS:
        explain: Callable[[Context], str | None] | None = getattr(f, "explain", None)
        reason = explain(context) if explain is not None else None
        if reason:
            raise InputError(f"{context.where} is {reason}")
    for f in FORMATS:
        if context.suffix_is(*f.SUFFIXES):
            return f
    raise InputError(f"{context.where}: not a model file this engine reads; expected {EXPECTED}")


def open_model(
    source: Source,
    *,
    bin_path: Source | None = None,
    name: str | None = None,
    format: str | None = None,
    weights: bool | str = True,
    inputshape: InputShape = None,
    inputshape2: InputShape = None,
    optlevel: int | None = None,
    timeout: float | None = None,
    on_log: Callable[[str], None] | None = None,
    cache_dir: str | Path | None = None,
    allow_unregistered: bool = False,
    check_layers: bool = False,
    inputs: Sequence[Any] | None = None,
    check: bool = True,
    checker: Checker | None = None,
    values: Mapping[str, Any] | None = None,
) -> OpenedModel:
    """Open a model file (a path, or its bytes with `name` for messages) of any known format.

    bin_path: the weights of a .param or .kir (default: the sibling .bin), or an .onnx's external
    data file (default: beside it, as its `location` names it); format: skip
    detection ("pnnx", "kir", "onnx", "torchscript"); weights=False reads the graph only,
    weights="lazy" checks a .pnnx.param's .bin file now and reads each weight when first used.
    The conversion options (inputshape, inputshape2, optlevel, timeout, on_log, cache_dir)
    apply to ONNX and TorchScript: see kuiper_core.formats.convert. `inputs`: the arrays the
    model will run on (a converted model is converted at their shapes unless inputshape is
    given, and checked on them); `values`: small integer ONNX inputs by name, fixed at these
    values for a model that branches on them (formats/onnx_given.py); `check`: check a conversion against the original's framework
    with `checker` (None: not checked; kuiper_core.open_model passes references/conversion_check.py's,
    which runs the framework; the verdict is OpenedModel.check, cached with the conversion)."""
    options = OpenOptions(
        bin_path=bin_path,
        name=name,
        weights=weights,
        conversion=ConversionOptions(
            inputshape, inputshape2, optlevel, timeout, on_log, cache_dir, inputs, check, checker, values
        ),
        allow_unregistered=allow_unregistered,
        check_layers=check_layers,
    )
    context = Context(source, options)
    if format is not None:
        if format not in BY_NAME:
            raise InputError(f"unknown model format {format!r}: expected one of {', '.join(BY_NAME)}")
        return BY_NAME[format].open(context)
    return detect(context).open(context)


def needs_inputshape(source: Source, name: str | None = None) -> bool:
    """Whether opening `source` needs `inputshape` (a TorchScript module that does not record
    the shapes it was traced with: scripted, or saved by an older torch). The app asks first."""
    from .traced_inputs import records_input_shapes

    context = Context(source, OpenOptions(name=name))
    return torchscript.match(context) and not records_input_shapes(context.zip_names)


def open_cached(
    key: str, *, name: str | None = None, cache_dir: str | Path | None = None, checker: Checker | None = None
) -> OpenedModel | None:
    """A converted model from the conversion cache by its key (Conversion.key), without its
    source: e.g. the app restoring an upload after a reload; its verdict from `checker` (None:
    none). None when it is not there."""
    from .convert import cached_conversion

    hit = cached_conversion(key, cache_dir)
    if hit is None:
        return None
    files, conversion = hit
    from ..pnnx import load_graph

    assert files.param is not None and files.bin is not None
    graph = load_graph(files.param, files.bin)
    kind = conversion.kind
    model = OpenedModel(
        graph, kind, name or conversion.source_name, files.source, files, conversion, reference_info(kind, files)
    )
    if checker is not None:
        model.check = checker(model, None, None)  # stored with the conversion when it was first opened
    return model


def converter_available() -> bool:
    """Whether the pnnx converter is installed (ONNX and TorchScript can be opened)."""
    from .convert import converter_available as available

    return available()


__all__ = [
    "open_model",
    "open_cached",
    "detect",
    "FORMATS",
    "OpenedModel",
    "OpenOptions",
    "Context",
    "PnnxFiles",
    "Conversion",
    "ConversionOptions",
    "ReferenceInfo",
    "converter_available",
    "needs_inputshape",
    "CONVERTED",
]
