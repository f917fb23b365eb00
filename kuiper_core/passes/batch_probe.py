"""Which dims of an operand follow the batch: every operand's shape at a second batch size.

A static export records each operand's shape at the traced batch (usually 1), and the engine
runs it at any batch. A rewrite that holds only at the traced sizes changes the answer at
batch 2: an `expand_as` whose two shapes agree at batch 1 is no no-op when only one of them
grows with the batch (`metric_head`), and `size(@k,0)` baked in as 1 makes `torch.zeros(2,
x.size(0), 5)` a batch-1 state (`recurrent_states`). Shapes are compared as symbols, not at
the traced size: a dim is the same symbol in two operands only if it is equal at both batches.

The second batch is found by running the graph once, every input's dim 0 doubled, the first
time a pass asks (`shapes_at_batch2(graph)`); the answer is kept on the graph for the passes
that follow. When the graph does not run at batch 2 (the export fixed its batch, or an input
has no known shape) there is nothing to keep: None, and the passes use the traced shapes.
Operands a pass made after the probe are unknown (None): their dims are not trusted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph, Operand, numpy_dtype

_KEY = "_kuiper_batch2_shapes"
_UNKNOWN: Any = object()


def _probe_inputs(graph: Graph) -> list[np.ndarray] | None:
    rng = np.random.default_rng(0)
    arrays = []
    for op in graph.inputs:
        o = op.outputs[0] if op.outputs else None
        shape = o.static_shape if o is not None else None
        if o is None or shape is None or not shape or o.dtype is None:
            return None  # a dynamic or scalar input: no batch to double
        dtype = numpy_dtype(o.dtype)
        shape = (2 * shape[0], *shape[1:])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        else:  # token ids, masks, indices: zeros stay in range
            arrays.append(np.zeros(shape, dtype))
    return arrays


def _run(graph: Graph) -> dict[str, tuple[int, ...] | None] | None:
    from ..runtime import RuntimeGraph

    inputs = _probe_inputs(graph)
    if inputs is None:
        return None
    try:
        with np.errstate(all="ignore"):
            run = RuntimeGraph.from_graph(graph).build().steps(*inputs)
            for _ in run:
                pass
    except Exception:  # noqa: BLE001  -- a KuiperError, or any failure: the model does not run at batch 2
        return None  # nothing there to keep
    return {name: (tuple(np.shape(v)) if isinstance(v, np.ndarray) else None) for name, v in run.values.items()}


def shapes_at_batch2(graph: Graph) -> dict[str, tuple[int, ...] | None] | None:
    """Every operand's shape (None: not an array) with each input's dim 0 doubled, or None
    when the graph does not run so. Computed once per graph (the passes share it)."""
    cached = graph.__dict__.get(_KEY, _UNKNOWN)
    if cached is _UNKNOWN:
        cached = _run(graph)
        graph.__dict__[_KEY] = cached
    return cached


def fixed_dims(graph: Graph, operand: Operand) -> list[bool] | None:
    """For each dim of `operand`'s shape: True if it is a known int that is the same at batch 2
    (it does not follow the batch). None when the operand has no shape. Without a probe (the
    graph does not run at batch 2, or its inputs have `?` dims: then `?` marks what varies)
    every int dim counts as fixed; an operand the probe did not see (made by a pass since) has
    no fixed dim."""
    shape = operand.shape
    if shape is None:
        return None
    known = [isinstance(d, int) for d in shape]
    probe = shapes_at_batch2(graph)
    if probe is None:
        return known
    other = probe.get(operand.name)
    if other is None or len(other) != len(shape):
        return [False] * len(shape)
    return [k and a == b for k, a, b in zip(known, shape, other)]


def same_symbolic_shape(graph: Graph, a: Operand, b: Operand) -> bool:
    """`a` and `b` have equal static shapes at the traced batch and at batch 2."""
    sa, sb = a.static_shape, b.static_shape
    if sa is None or sa != sb:
        return False
    probe = shapes_at_batch2(graph)
    if probe is None:
        return True
    pa, pb = probe.get(a.name), probe.get(b.name)
    return pa is not None and pa == pb
