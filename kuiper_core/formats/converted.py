"""Opening a model the `pnnx` converter turns into PNNX first (ONNX, TorchScript)."""

from __future__ import annotations

from ..pnnx import load_graph, read_param
from .base import Context, OpenedModel, reference_info


def open_converted(context: Context, kind: str) -> OpenedModel:
    """Convert (or find in the cache), then read the PNNX files pnnx wrote."""
    from .convert import convert  # subprocess, selectors, hashing: only when converting

    opts = context.options
    source = context.path if context.path is not None else context.data()
    files, conversion = convert(source, kind, opts.conversion, name=context.where, zip_names=context.zip_names)
    assert files.param is not None and files.bin is not None
    graph = load_graph(files.param, files.bin) if opts.weights else read_param(files.param)
    return OpenedModel(graph, kind, context.where, context.path, files, conversion, reference_info(kind, files))
