"""The runtime graph: states, execution order, zero-copy propagation, buffer reuse,
batches, multi-output operators and input checks. Numerics against PyTorch live in
test_ops.py and test_samples.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from kuiper_core.formats import open_model
from kuiper_core import GraphState, RuntimeGraph
from kuiper_core.errors import CycleError, InputError, LimitError, UnsupportedOperatorError
from kuiper_core.graph import Graph
from kuiper_core.pnnx import parse_param, read_param
from kuiper_core.explore.walkthrough import SEED_004_EXAMPLE, WITH_CYCLE
from kuiper_core.runtime.order import OrderEvent, dfs_order, execution_order, is_topological, kahn_order
from conftest import OPS, SAMPLES, max_err_ok, slow_cases

SAMPLE_PARAMS = sorted(SAMPLES.glob("*.pnnx.param"))


def _chain_graph(edges: dict[str, list[str]], relu: str = "nn.ReLU") -> Graph:
    """A PNNX graph with seed 004's shape: node names from `edges`, one operand per node."""
    g = Graph()
    made: dict[str, object] = {}
    preds: dict[str, list[str]] = {n: [] for n in edges}
    for n, succ in edges.items():
        for s in succ:
            preds[s].append(n)
    pending = list(edges)
    while pending:  # add in an order where producers come first
        for n in list(pending):
            if all(p in made for p in preds[n]):
                ins = [g.operands[f"{p}_out"] for p in preds[n]]
                typ = "pnnx.Input" if not ins else ("pnnx.Output" if not edges[n] and n == "output" else relu)
                outs = [] if typ == "pnnx.Output" else [g.add_operand(f"{n}_out")]
                for o in outs:
                    o.shape, o.dtype = (1, 4), "f32"
                made[n] = g.add_operator(typ, n, ins, outs)
                pending.remove(n)
    return g


def test_seed_004_example_order() -> None:
    assert dfs_order(list(SEED_004_EXAMPLE), SEED_004_EXAMPLE) == ["input", "op1", "op3", "op5", "output", "op4"]
    events: list[OrderEvent] = []
    order = execution_order(list(SEED_004_EXAMPLE), SEED_004_EXAMPLE, "dfs", observe=events.append)
    # The events walk the seed's steps: op4 finishes first, then output, op5, op3, op1, input.
    assert [e.node for e in events if e.kind == "finish"] == ["op4", "output", "op5", "op3", "op1", "input"]
    assert events[-1].kind == "reverse" and order == ["input", "op1", "op3", "op5", "output", "op4"]


def test_seed_004_example_through_the_runtime() -> None:
    g = RuntimeGraph.from_graph(_chain_graph(SEED_004_EXAMPLE))
    assert g.state == GraphState.NeedBuild
    g.build()
    assert g.state == GraphState.Complete
    assert [r.name for r in g.order] == ["input", "op1", "op3", "op5", "output", "op4"]
    assert set(g.operators["op3"].successors) == {"op4", "op5"}
    g.build("kahn")
    assert is_topological([r.name for r in g.order], {n: list(r.successors) for n, r in g.operators.items()})


def test_states_need_init_then_build() -> None:
    g = RuntimeGraph(OPS / "io_tuple_outputs" / "model.pnnx.param", reader=lambda p, b: open_model(p, bin_path=b).graph)
    assert g.state == GraphState.NeedInit and g.graph is None
    g.init()
    assert g.state == GraphState.NeedBuild and g.graph is not None
    g.build()
    assert g.state == GraphState.Complete


@pytest.mark.parametrize("param", SAMPLE_PARAMS, ids=lambda p: p.name.split(".")[0])
def test_both_algorithms_give_valid_orders_for_every_sample(param: Path) -> None:
    g = read_param(param)
    names = [op.name for op in g.operators]
    succ = {op.name: [s.name for s in g.successors(op)] for op in g.operators}
    for order in (dfs_order(names, succ), kahn_order(names, succ)):
        assert sorted(order) == sorted(names)
        assert is_topological(order, succ)


def test_deep_graph_does_not_hit_the_recursion_limit() -> None:
    n = 20000
    edges = {f"n{i}": [f"n{i + 1}"] for i in range(n)} | {f"n{n}": []}
    assert dfs_order(list(edges), edges)[-1] == f"n{n}"


def test_cycle_is_an_error_that_names_it() -> None:
    for algorithm in ("dfs", "kahn"):
        events: list[OrderEvent] = []
        with pytest.raises(CycleError) as info:
            execution_order(list(WITH_CYCLE), WITH_CYCLE, algorithm, observe=events.append)
        assert set(info.value.cycle) == {"a", "b", "c"} and "a -> b -> c -> a" in str(info.value)
        assert events[-1].kind == "cycle" and set(events[-1].on_cycle) == {"a", "b", "c"}  # the lesson


def test_cycle_in_a_runtime_graph() -> None:
    g = Graph()
    x = g.add_operand("x")
    a_out, b_out = g.add_operand("a"), g.add_operand("b")
    g.add_operator("pnnx.Input", "in", [], [x])
    a = g.add_operator("torch.cat", "cat_a", [x, b_out], [a_out], dim=1)
    g.add_operator("nn.ReLU", "relu_b", [a_out], [b_out])
    g.add_operator("pnnx.Output", "out", [a_out], [])
    assert a.inputs[1].producer is not None
    with pytest.raises(CycleError, match="cat_a -> relu_b -> cat_a"):
        RuntimeGraph.from_graph(g).build()


def test_unknown_types_are_all_listed_with_their_lines() -> None:
    text = """7767517
5 4
pnnx.Input               in0                      0 1 0
nn.Frobnicate            f1                       1 1 0 1
nn.ReLU                  r                        1 1 1 2
custom.Twist             t1                       1 1 2 3
pnnx.Output              out                      1 0 3
"""
    g = RuntimeGraph.from_graph(parse_param(text, "m.param"))
    with pytest.raises(UnsupportedOperatorError) as info:
        g.build()
    msg = str(info.value)
    assert "2 unsupported operator type(s)" in msg
    assert "nn.Frobnicate: f1 (line 4)" in msg and "custom.Twist: t1 (line 6)" in msg
    assert {m[0] for m in info.value.missing} == {"nn.Frobnicate", "custom.Twist"}


def _sample(name: str) -> tuple[Path, np.ndarray]:
    param = SAMPLES / f"{name}.pnnx.param"
    if not param.exists():
        pytest.skip(f"sample model {name} not exported")
    return param, np.load(SAMPLES / f"{name}.input.npy")


def test_consumers_read_producers_outputs_by_reference() -> None:
    param, x = _sample("digits_cnn")
    g = kuiper_core.load(param)
    produced: dict[str, np.ndarray] = {}
    checked = 0
    for ev in g.steps(x):
        for name, arr in ev.inputs.items():
            # The very memory, not a copy (an arena run hands out a new view per access).
            assert arr.__array_interface__ == produced[name].__array_interface__
            assert np.shares_memory(arr, produced[name])
            checked += 1
        produced.update(ev.outputs)
    assert checked >= len(g.order) - 1
    # The model's input itself is not copied either.
    assert g.values[g.input_operands[0]] is x or np.shares_memory(g.values[g.input_operands[0]], x)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "deep1500", "unet"])
def test_forward_reuses_buffers_by_liveness(name: str) -> None:
    param, x = _sample(name)
    g = kuiper_core.load(param)
    graph = g.graph
    assert graph is not None
    all_bytes = sum(
        int(np.prod(o.static_shape)) * 4 for o in graph.operands.values() if o.static_shape and o.dtype == "f32"
    )
    assert g.plan is not None and 0 < g.plan.total_bytes < all_bytes / 3
    y1 = g.forward(x)[0].copy()
    y_first = g.forward(x)[0]
    y_other = g.forward(np.zeros_like(x))[0]  # must not overwrite the previous result
    assert np.array_equal(y_first, y1) and not np.array_equal(y_other, y1)


@pytest.mark.parametrize(
    "name",
    slow_cases(
        ["digits_cnn", "mobilenetv3", "unet", "vit_tiny", "yolov5s_mini"], {"mobilenetv3", "unet", "yolov5s_mini"}
    ),
)
def test_batch_4_equals_four_batch_1_runs(name: str) -> None:
    param, x = _sample(name)
    g = kuiper_core.load(param)
    rng = np.random.default_rng(0)
    xs = [x] + [rng.standard_normal(x.shape).astype(np.float32) for _ in range(3)]
    singles = [g.forward(xi) for xi in xs]
    batched = g.forward(np.concatenate(xs, axis=0))
    for k, yb in enumerate(batched):
        for i in range(4):
            ok, err, bound = max_err_ok(yb[i : i + 1], singles[i][k])
            assert ok, f"output {k}, item {i}: err {err:.3g}"


def test_multi_output_models() -> None:
    """Tuple outputs and multi-output operators (KuiperInfer cannot run these)."""
    cases = [OPS / "io_tuple_outputs"] + sorted(p.parent for p in OPS.glob("tensor_chunk*/model.pnnx.param"))
    cases += sorted(p.parent for p in OPS.glob("tensor_split*/model.pnnx.param"))
    assert len(cases) >= 3
    for case in cases:
        g = kuiper_core.load(case / "model.pnnx.param")
        graph = g.graph
        assert graph is not None
        assert any(len(op.outputs) > 1 for op in graph.operators) or any(
            op.type == "prim::TupleConstruct" for op in graph.operators
        )
        with np.load(case / "inputs.npz") as z:
            ins = [z[f"in{i}"] for i in range(len(z.files))]
        with np.load(case / "expected.npz") as z:
            exp = [z[f"out{i}"] for i in range(len(z.files))]
        ys = g.forward(*ins)
        assert len(ys) == len(exp) >= 2, case.name
        for y, ref in zip(ys, exp):
            assert max_err_ok(y, ref)[0], case.name


def test_input_checks() -> None:
    g = kuiper_core.load(OPS / "io_two_inputs" / "model.pnnx.param")
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(InputError, match="takes 2 input"):
        g.forward(a)
    with pytest.raises(InputError, match="expected rank 2"):
        g.forward(a, np.zeros((2, 3, 1), np.float32))
    with pytest.raises(InputError, match="dim 1 must be 3"):
        g.forward(a, np.zeros((2, 4), np.float32))
    with pytest.raises(InputError, match="expected dtype float32"):
        g.forward(a, np.zeros((2, 3), np.int64))
    # Same kind, other width: cast explicitly, the result is right.
    s, p = g.forward(a + 1, np.ones((2, 3), np.float64))
    assert s.dtype == np.float32 and np.all(s == 2)


def test_accepted_inputs_are_checked_again_when_anything_differs() -> None:
    """Signatures that passed are remembered (the checks are skipped for them), but another
    shape, dtype, array type or the graph's limits get the full checks again."""
    g = kuiper_core.load(OPS / "io_two_inputs" / "model.pnnx.param")
    a = np.zeros((2, 3), np.float32)
    g.forward(a, a)
    g.forward(a, a)  # from the remembered signature
    with pytest.raises(InputError, match="dim 1 must be 3"):
        g.forward(a, np.zeros((2, 4), np.float32))
    with pytest.raises(InputError, match="expected dtype float32"):
        g.forward(a, np.zeros((2, 3), np.int64))
    with pytest.raises(InputError, match="expected rank 2"):
        g.forward(a, np.zeros((2, 3), np.float32).view(np.ma.MaskedArray)[None])
    g.limits = g.limits.replace(max_tensor_elements=4)
    with pytest.raises(LimitError):
        g.forward(a, a)


def test_models_json_lists_every_sample() -> None:
    meta = json.loads((SAMPLES / "models.json").read_text())
    on_disk = {p.name.split(".")[0] for p in SAMPLE_PARAMS}
    assert on_disk <= set(meta)
    assert sum(1 for m in meta.values() if m.get("default")) == 1


@pytest.mark.slow
def test_concurrent_forwards_on_one_cached_graph_do_not_mix() -> None:
    """The app shares one RuntimeGraph between browser sessions."""
    from concurrent.futures import ThreadPoolExecutor

    param, x = _sample("unet")
    g = kuiper_core.load(param)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(6)]
    serial = [g.forward(xi)[0].copy() for xi in xs]
    with ThreadPoolExecutor(3) as pool:
        parallel = list(pool.map(lambda xi: g.forward(xi)[0], xs * 2))
    for i, y in enumerate(parallel):
        assert np.array_equal(y, serial[i % 6])
    # Two interleaved step runs keep their own values.
    a, b = g.steps(xs[0]), g.steps(xs[1])
    for ea, eb in zip(a, b):
        pass
    assert np.array_equal(g.outputs_of(a.values)[0], serial[0])
    assert np.array_equal(g.outputs_of(b.values)[0], serial[1])
