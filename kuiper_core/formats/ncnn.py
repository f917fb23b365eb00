"""ncnn: a `.ncnn.param` text (magic 7767517, bare layer types such as `Convolution`) and its
`.ncnn.bin` weights, as pnnx writes them beside every PNNX conversion. Run by the engine with
ncnn's own layer semantics (kuiper_core/ncnn); blobs have no batch dim."""

from __future__ import annotations

import re
from pathlib import Path

from .. import ncnn as ncnn_io
from ..ncnn.param import is_ncnn_text
from ..graph import Graph
from .base import Context, InputShape, OpenedModel, ReferenceInfo

NAME = "ncnn"
SUFFIXES = (".ncnn.param",)


def match(context: Context) -> bool:
    return is_ncnn_text(context.text_head().lstrip().split("\n", 3)[:3])


def explain(context: Context) -> str | None:
    if context.suffix_is(".ncnn.bin"):
        return "an ncnn .bin (the weights only): open its .ncnn.param"
    return None


def references() -> ReferenceInfo:
    """No framework reference: ncnn's own run of the file is a source of its own
    (references/ncnn_deployed.py; the app's "the deployed ncnn model"), PyTorch's comes from the
    PNNX files beside it (`kuiper compare --ncnn`)."""
    return ReferenceInfo()


def open(context: Context) -> OpenedModel:
    opts = context.options
    if context.path is not None:
        given = opts.bin_path
        bin_file = Path(given) if isinstance(given, (str, Path)) else None
        if given is not None and not isinstance(given, (str, Path)):  # the .bin given as bytes
            param = ncnn_io.read_param(context.path)
            graph = ncnn_io.graph_of(param, bytes(given) if opts.weights else None, "model.ncnn.bin")
        else:
            graph = ncnn_io.load_ncnn(context.path, bin_file, weights=bool(opts.weights))
            bin_file = bin_file or ncnn_io.default_bin_path(context.path)
        _declare_inputs(graph, context.path)
        declare_given(graph, opts.conversion.inputshape)
        return OpenedModel(graph, NAME, context.where, context.path, references=references(), ncnn_bin=bin_file)
    bin_bytes = None if opts.bin_path is None or not opts.weights else opts.bin_path
    if isinstance(bin_bytes, (str, Path)):
        bin_bytes = Path(bin_bytes).read_bytes()
    graph = (
        ncnn_io.load_ncnn_bytes(context.data(), None if bin_bytes is None else bytes(bin_bytes), context.where)
        if opts.weights
        else ncnn_io.graph_of(ncnn_io.parse_bytes(context.data(), context.where), None, "")
    )
    declare_given(graph, opts.conversion.inputshape)
    return OpenedModel(graph, NAME, context.where, None, None, references=references())


def pnnx_sibling(param: Path) -> Path:
    """`m.ncnn.param` -> `m.pnnx.param` (pnnx writes both; `m.fp16.ncnn.param` -> `m.pnnx.param` too)."""
    stem = param.name.removesuffix(".param").removesuffix(".ncnn")
    for tag in (".fp16", ".fp32"):
        stem = stem.removesuffix(tag)
    return param.with_name(f"{stem}.pnnx.param")


def _declare_inputs(graph: Graph, param: Path) -> None:
    """Give the inputs pnnx left undeclared (its ncnn `Input` lines carry no shape) the shapes of
    the PNNX inputs it wrote beside them, without their batch dim: the app can then make an
    input and step through the model. Nothing when there is no such .pnnx.param."""
    from ..errors import KuiperError
    from ..pnnx import read_param as read_pnnx

    inputs = [op.outputs[0] for op in graph.inputs]
    sibling = pnnx_sibling(param)
    if all(o.shape is not None for o in inputs) or not sibling.is_file():
        return
    try:
        declared = [op.outputs[0].shape for op in read_pnnx(sibling).inputs]
    except KuiperError:
        return
    if len(declared) != len(inputs):
        return
    for operand, shape in zip(inputs, declared):
        if operand.shape is None and shape and shape[0] == 1:
            operand.shape, operand.dtype = tuple(shape[1:]), "f32"


def declare_given(graph: Graph, inputshape: InputShape) -> None:
    """The input blobs' shapes from `inputshape` (ncnn's, without the batch dim: `[1,8,8]` is
    (c, h, w)), given by whoever opens the files: pnnx writes ncnn `Input` lines without a shape,
    and an upload has no PNNX files beside it to take one from."""
    from ..errors import InputError
    from .convert import inputshape_text

    text = inputshape_text(inputshape)
    if text is None:
        return
    shapes = [tuple(int(d) for d in m.group(1).split(",") if d) for m in re.finditer(r"\[([0-9,]*)\]", text)]
    inputs = [op.outputs[0] for op in graph.inputs]
    if len(shapes) != len(inputs) or any(not s or min(s) < 1 for s in shapes):
        names = ", ".join(o.name for o in inputs)
        raise InputError(
            f"the input shape {text} does not fit the ncnn model's {len(inputs)} input blob(s) ({names}): give one "
            "shape of sizes >= 1 per blob, without the batch dim, e.g. [3,224,224] for a (c, h, w) image"
        )
    for operand, shape in zip(inputs, shapes):
        operand.shape, operand.dtype = shape, "f32"
