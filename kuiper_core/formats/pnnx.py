"""PNNX: a `.param` text (first line the magic `7767517`) and its `.bin` weights (a zip)."""

from __future__ import annotations

from pathlib import Path

from .. import pnnx as pnnx_io  # looked up when called (tests patch kuiper_core.pnnx's readers)
from ..graph import Graph
from .base import Context, OpenedModel, PnnxFiles, reference_info

NAME = "pnnx"
SUFFIXES = (".param",)
MAGIC = "7767517"


def _lines(context: Context, n: int) -> list[str]:
    return context.text_head().lstrip().split("\n", n)[:n]


def match(context: Context) -> bool:
    lines = _lines(context, 3)
    if not lines or lines[0].strip() != MAGIC:
        return False
    return not _is_ncnn(lines)


def _is_ncnn(lines: list[str]) -> bool:
    """ncnn's .param shares the magic line; its layer types are bare names (formats/ncnn.py)."""
    from ..ncnn.param import is_ncnn_text

    return is_ncnn_text(lines)


def explain(context: Context) -> str | None:
    names = context.zip_names
    if names and not any("/" in n for n in names) and any(n.endswith((".weight", ".bias", ".data")) for n in names):
        return "a PNNX .bin (the weights only): open its .pnnx.param"
    return None


def open(context: Context) -> OpenedModel:
    opts = context.options
    if context.path is not None:
        graph = pnnx_io.read_param(context.path)
        weights = opts.bin_path if opts.bin_path is not None else pnnx_io.default_bin_path(context.path)
        if opts.weights:
            source = weights if isinstance(weights, (str, Path)) else bytes(weights)
            pnnx_io.load_weights(graph, source, lazy=opts.weights == "lazy")
        bin_file = Path(weights) if isinstance(weights, (str, Path)) else None
        stem = context.path.name.removesuffix(".param").removesuffix(".pnnx")
        python = context.path.with_name(stem + "_pnnx.py")
        ncnn = [context.path.with_name(f"{stem}.ncnn.{ext}") for ext in ("param", "bin")]  # pnnx writes them beside
        deployed = ncnn if all(f.is_file() for f in ncnn) else [None, None]
        files = PnnxFiles(context.path, bin_file, python if python.is_file() else None, None, *deployed)
    else:
        data, bin_source = context.data(), opts.bin_path
        if isinstance(bin_source, (str, Path)) or not opts.weights:
            graph = pnnx_io.parse_param_bytes(data, context.where)
            if isinstance(bin_source, (str, Path)) and opts.weights:
                pnnx_io.load_weights(graph, bin_source)
        else:
            graph = pnnx_io.load_graph_bytes(data, None if bin_source is None else bytes(bin_source), context.where)
        files = None
    if opts.check_layers and not opts.allow_unregistered:
        _check_layers(graph)
    return OpenedModel(graph, NAME, context.where, context.path, files, references=reference_info(NAME, files))


def _check_layers(graph: Graph) -> None:
    """The check loading makes, and the .kir parser's (an op type needs a layer): `kuiper print`
    of a model that does not load gives this one message, never a .kir the parser refuses."""
    from ..errors import UnsupportedOperatorError
    from ..layers.registry import check_supported

    try:
        check_supported(graph.operators)
    except UnsupportedOperatorError as e:
        note = "(loading refuses the model too; --allow-unregistered prints it, for .kir read with that flag)"
        raise UnsupportedOperatorError(e.missing, note) from None
