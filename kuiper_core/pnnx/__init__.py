"""The PNNX file format only: .param text, .bin weights, and writing both back."""

from __future__ import annotations

from pathlib import Path

from ..graph import Graph
from .param import parse_param, parse_param_bytes, read_param
from .weights import load_weights
from .writer import default_bin_path, format_param, save


def load_graph(param_path: str | Path, bin_path: str | Path | None = None, *, lazy: bool = False) -> Graph:
    """Read .param and its .bin (default: the sibling `NAME.pnnx.bin`) into a Graph.

    lazy: the .bin is checked now (every entry's place, size and CRC-32) but each weight is
    read when first used, and held only while something uses it (Attribute.defer): for a
    caller that will not write the graph back over its own .bin (kuiper_core.load, the app)."""
    graph = read_param(param_path)
    load_weights(graph, bin_path if bin_path is not None else default_bin_path(param_path), lazy=lazy)
    return graph


def load_graph_bytes(param: bytes, bin_bytes: bytes | None, name: str = "model.pnnx.param") -> Graph:
    """A Graph from the bytes of a .param and its .bin (an upload): nothing touches the disk.
    Messages call the files `name` and its sibling .bin name."""
    graph = parse_param_bytes(param, name)
    bin_name = default_bin_path(name).name
    if bin_bytes is None:
        if any(op.attrs for op in graph.operators):
            from ..errors import WeightError

            n = sum(len(op.attrs) for op in graph.operators)
            raise WeightError(f"the model has {n} weight(s) but no {bin_name} was given")
        return graph
    load_weights(graph, bin_bytes, name=bin_name)
    return graph


__all__ = [
    "load_graph",
    "load_graph_bytes",
    "parse_param",
    "parse_param_bytes",
    "read_param",
    "load_weights",
    "save",
    "format_param",
    "default_bin_path",
]
