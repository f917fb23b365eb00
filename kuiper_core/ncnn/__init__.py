"""ncnn's file format (`.ncnn.param` + `.ncnn.bin`, what pnnx writes beside its PNNX files) and
ncnn's layer semantics, run by the engine's own runtime.

    from kuiper_core.ncnn import load_ncnn
    graph = load_ncnn("model.ncnn.param")        # the sibling model.ncnn.bin
    RuntimeGraph.from_graph(graph).build().forward(chw_array)

param.py reads the text (located errors), schema.py says what each numbered param means and
which weights a layer has, weights.py reads the .bin (fp32 / fp16 / table-quantized storage),
graph.py makes the Graph (see there why the project's Graph), layers/ holds ncnn's layers.
A blob has no batch dim: an image is (c, h, w).
"""

from __future__ import annotations

from pathlib import Path

from .. import limits as _limits
from ..errors import WeightError
from ..files import read_regular
from ..graph import Graph
from .graph import build_graph
from .param import NcnnParam, parse_bytes, read_param
from .weights import load_weights, specs_only


def default_bin_path(param_path: str | Path) -> Path:
    """`m.ncnn.param` -> `m.ncnn.bin` (`m.param` -> `m.bin`)."""
    p = Path(param_path)
    return p.with_name(p.name.removesuffix(".param") + ".bin")


def _register_layers() -> None:
    from . import layers  # noqa: F401  (importing registers the ncnn.* layer types)


def _read_bin(path: str | Path) -> bytes:
    lim = _limits.current()

    def fail(reason: str) -> WeightError:
        return WeightError(f"cannot read the ncnn weights {path}: {reason}")

    # a .bin holds at most max_tensor_elements float32 values per weight; the whole file is
    # bounded like an upload (the app) or by 64x the per-tensor limit (the command line)
    return read_regular(path, fail, max_bytes=4 * lim.max_tensor_elements * 16, limit="max_tensor_elements")


def graph_of(param: NcnnParam, bin_data: bytes | None, bin_name: str) -> Graph:
    _register_layers()
    weights = specs_only(param.layers) if bin_data is None else load_weights(param.layers, bin_data, bin_name)
    return build_graph(param, weights)


def load_ncnn(param_path: str | Path, bin_path: str | Path | None = None, *, weights: bool = True) -> Graph:
    """The Graph of an ncnn .param and its .bin (default: the sibling `.bin`)."""
    param = read_param(param_path)
    if not weights:
        return graph_of(param, None, "")
    bin_file = Path(bin_path) if bin_path is not None else default_bin_path(param_path)
    return graph_of(param, _read_bin(bin_file), str(bin_file))


def load_ncnn_bytes(param: bytes, bin_bytes: bytes | None, name: str = "model.ncnn.param") -> Graph:
    """The Graph from the bytes of a .param and its .bin (an upload)."""
    parsed = parse_bytes(param, name)
    if bin_bytes is None:
        g = graph_of(parsed, None, "")
        if any(op.attrs for op in g.operators):
            raise WeightError(f"the model has weights but no {default_bin_path(name).name} was given")
        return g
    return graph_of(parsed, bin_bytes, default_bin_path(name).name)


__all__ = ["load_ncnn", "load_ncnn_bytes", "default_bin_path", "read_param"]
