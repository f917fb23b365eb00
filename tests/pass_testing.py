"""Helpers for the pass tests: small graphs from .param lines with random weights, running
a few passes, and checking that a rewritten graph computes what the original did."""

from __future__ import annotations

import numpy as np

from kuiper_core.graph import Graph, numpy_dtype
from kuiper_core.passes import PassContext, PassLog, Sequential, registered_passes, verify_graph
from kuiper_core.passes.rewrite import clone_graph
from kuiper_core.pnnx import parse_param
from kuiper_core.runtime import RuntimeGraph
from layer_testing import param_text


def graph_of(*lines: str, seed: int = 0) -> Graph:
    """A Graph from operator lines; every weight gets random data (variances positive)."""
    g = parse_param(param_text(*lines))
    rng = np.random.default_rng(seed)
    for op in g.operators:
        for key, attr in op.attrs.items():
            data = rng.standard_normal(attr.shape).astype(numpy_dtype(attr.dtype))
            if key == "running_var":
                data = np.abs(data) + 0.5
            attr.data = data
    verify_graph(g)
    return g


def run_passes(graph: Graph, *names: str, level: int = 2, **ctx: object) -> tuple[Graph, PassLog]:
    """Run the named passes (in order, once each, no fixed point) on a copy of `graph`."""
    passes = registered_passes()
    log = PassLog()
    with PassContext(level, instruments=[log], **ctx):  # type: ignore[arg-type]
        out, _ = Sequential([passes[n] for n in names], known=passes)(clone_graph(graph))
    return out, log


def types(graph: Graph) -> list[str]:
    return [op.type for op in graph.operators]


def inputs_for(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for op in graph.inputs:
        o = op.outputs[0]
        shape = o.static_shape
        assert shape is not None, f"input {o.name} needs a static shape"
        arrays.append(rng.standard_normal(shape).astype(numpy_dtype(o.dtype or "f32")))
    return arrays


def run(graph: Graph, *arrays: np.ndarray) -> list[np.ndarray]:
    return [np.array(y) for y in RuntimeGraph.from_graph(clone_graph(graph)).build().forward(*arrays)]


def assert_equivalent(before: Graph, after: Graph, seed: int = 0, rtol: float = 1e-5) -> None:
    """Both graphs give the same outputs on random inputs (the pass kept the meaning)."""
    xs = inputs_for(before, seed)
    ys0, ys1 = run(before, *xs), run(after, *xs)
    assert len(ys0) == len(ys1)
    for a, b in zip(ys0, ys1):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(b, a, rtol=rtol, atol=rtol * max(1.0, float(np.abs(a).max(initial=0))))
