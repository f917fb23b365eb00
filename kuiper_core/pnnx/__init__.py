"""The PNNX file format only: .param text, .bin weights, and writing both back."""

from __future__ import annotations

from pathlib import Path

from ..graph import Graph
from .param import parse_param, read_param
from .weights import load_weights
from .writer import default_bin_path, format_param, save


def load_graph(param_path: str | Path, bin_path: str | Path | None = None) -> Graph:
    """Read .param and its .bin (default: the sibling `NAME.pnnx.bin`) into a Graph."""
    graph = read_param(param_path)
    load_weights(graph, bin_path if bin_path is not None else default_bin_path(param_path))
    return graph


__all__ = ["load_graph", "parse_param", "read_param", "load_weights", "save", "format_param", "default_bin_path"]
