"""pnnx.Expression operators from real pnnx exports, evaluated alone.

For every pnnx.Expression in tests/data/ops/expr_* and in sample_models/, the layer is fed
the operands that pnnx's generated *_pnnx.py (PyTorch) computed for its inputs, and its
output must equal the operand PyTorch computed for it; where that operand is a graph
output, also PyTorch's output of the original module (expected.npz). The whole-graph run
is in test_ops.py / test_samples.py.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from conftest import OPS, SAMPLES, max_err_ok
from kuiper_core import expression as ex
from kuiper_core.graph import Graph, Operator
from kuiper_core.layers.registry import create_layer
from kuiper_core.pnnx.param import read_param


def _sources() -> list[tuple[str, Path, Path, Path | None]]:
    """(id, param, operands.npz, expected.npz or None) for every export with references."""
    out = []
    for case in sorted(OPS.glob("expr_*")):
        out.append((case.name, case / "model.pnnx.param", case / "operands.npz", case / "expected.npz"))
    for param in sorted(SAMPLES.glob("*.pnnx.param")):
        name = param.name[: -len(".pnnx.param")]
        operands = SAMPLES / f"{name}.operands.npz"
        if operands.exists():
            out.append((f"sample:{name}", param, operands, SAMPLES / f"{name}.expected.npz"))
    return out


def _expression_ops() -> list[tuple[str, Graph, Operator, Path, Path | None]]:
    found = []
    for ident, param, operands, expected in _sources():
        graph = read_param(param)
        for op in graph.by_type("pnnx.Expression"):
            found.append((f"{ident}:{op.name}", graph, op, operands, expected))
    return found


EXPRESSIONS = _expression_ops()


def test_the_expr_cases_are_exported() -> None:
    names = {p.name for p in OPS.glob("expr_*")}
    assert len(names) >= 12, "run: python tools/export_opcases.py expression"
    texts = " ".join(op.params["expr"] for (_, _, op, _, _) in EXPRESSIONS)
    for fn in [
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "rsqrt",
        "exp",
        "neg",
        "abs",
        "floor",
        "remainder",
        "fmod",
        "floor_divide",
        "maximum",
        "minimum",
        "sqrt",
        "round",
        "trunc",
        "ceil",
        "sign",
        "atan2",
        "log10",
        "reciprocal",
        "square",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
        "size",
        "[",
    ]:
        assert fn + "(" in texts or (fn == "[" and "[" in texts), f"no real export uses {fn}"


def _graph_output(graph: Graph, name: str, expected: Path | None) -> np.ndarray | None:
    if expected is None or not expected.exists():
        return None
    outs = [op.inputs[0].name for op in graph.outputs]
    if name not in outs:
        return None
    with np.load(expected) as z:
        return z[f"out{outs.index(name)}"]


@functools.cache
def _references(path: Path) -> np.lib.npyio.NpzFile:
    """One open archive per operands.npz (members are read afresh on each access): deep1500's
    lists 1,501 members, and opening it again for each of its 300 expressions was most of their time."""
    return np.load(path)


@pytest.mark.parametrize("ident,graph,op,operands,expected", EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_real_expression_matches_pytorch(
    ident: str, graph: Graph, op: Operator, operands: Path, expected: Path | None
) -> None:
    text = op.params["expr"]
    assert ex.to_text(ex.parse(text)) == text  # pnnx's text is canonical
    refs = _references(operands)
    missing = [o.name for o in op.inputs if o.name not in refs.files]
    if missing:
        pytest.skip(f"no reference for input operand(s) {missing}")
    inputs = [refs[o.name] for o in op.inputs]
    layer = create_layer(op)
    out_name = op.outputs[0].name
    shape = op.outputs[0].static_shape
    buf = np.empty(shape, refs[out_name].dtype) if shape is not None and out_name in refs.files else None
    (y,) = layer.forward(inputs, [buf])
    if out_name in refs.files:
        ref = refs[out_name]
        assert y.dtype == ref.dtype, f"{text}: dtype {y.dtype}, PyTorch {ref.dtype}"
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"{text}: max abs err {err:.3g} > {bound:.3g}"
    else:
        # A list expression (a shape): the consumer's output shape is what PyTorch used.
        consumer = op.outputs[0].consumers[0]
        assert consumer.type in ("Tensor.reshape", "Tensor.view"), consumer.type
        target = refs[consumer.outputs[0].name].shape
        sizes = list(y)  # a value operand: a list of ints
        assert tuple(sizes) == target or -1 in sizes
        assert np.empty(refs[consumer.inputs[0].name].shape).reshape(sizes).shape == target
    final = _graph_output(graph, out_name, expected)
    if final is not None:
        ok, err, bound = max_err_ok(y, final)
        assert ok, f"{text}: vs PyTorch's module output, max abs err {err:.3g} > {bound:.3g}"


def test_dynamic_size_expression_follows_a_new_batch() -> None:
    """expr_dyn_size_arith was exported with inputshape2: its sizes are read at run time."""
    graph = read_param(OPS / "expr_dyn_size_arith" / "model.pnnx.param")
    (op,) = graph.by_type("pnnx.Expression")
    assert "size(@0,0)" in op.params["expr"]
    layer = create_layer(op)
    x = np.random.default_rng(3).standard_normal((5, 3, 6)).astype(np.float32)
    (y,) = layer.forward([x], [None])
    ref = x * np.float32(5) + x / np.float32(6) - np.float32(3)  # x*N + x/W - W//2
    np.testing.assert_allclose(y, ref, rtol=1e-6)
