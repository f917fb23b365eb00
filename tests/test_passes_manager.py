"""The pass manager: TVM's enabling rule, Sequential, fixed points, instruments, errors
that name the pass, and the verifier catching a pass that breaks the graph."""

from __future__ import annotations

import io

import pytest

from kuiper_core.errors import KuiperError
from kuiper_core.graph import Operand
from kuiper_core.passes import (
    FunctionPass,
    IRSnapshots,
    PassContext,
    PassError,
    PassInfo,
    PassLog,
    PrintAfter,
    Sequential,
    ShouldRun,
    optimize,
    pass_table,
    record,
    registered_passes,
)
from kuiper_core.passes.rewrite import bypass, clone_graph
from pass_testing import graph_of

CHAIN = (
    "pnnx.Input in 0 1 0 #0=(1,4)f32",
    "nn.ReLU r1 1 1 0 1 #0=(1,4)f32 #1=(1,4)f32",
    "nn.ReLU r2 1 1 1 2 #1=(1,4)f32 #2=(1,4)f32",
    "nn.ReLU r3 1 1 2 3 #2=(1,4)f32 #3=(1,4)f32",
    "pnnx.Output out 1 0 3 #3=(1,4)f32",
)


def toy(name: str, level: int, fn=None, required: tuple[str, ...] = ()) -> FunctionPass:
    """A pass of the test's own; by default it changes nothing and records that it ran."""

    def noop(graph):
        record("ran", name)
        return graph, False

    return FunctionPass(fn or noop, PassInfo(name, level, required))


def drop_one_relu(graph):
    """Removes the first nn.ReLU: changes the graph once per ReLU."""
    relu = next((op for op in graph.operators if op.type == "nn.ReLU"), None)
    if relu is None:
        return graph, False
    bypass(graph, relu)
    return graph, True


@pytest.mark.parametrize(
    "ctx_level, required, disabled, pass_level, enabled",
    [
        (2, (), (), 2, True),
        (1, (), (), 2, False),  # above the level
        (1, ("RemoveUnused",), (), 2, True),  # required beats the level
        (2, (), ("RemoveUnused",), 1, False),  # disabled beats everything
        (2, ("RemoveUnused",), ("RemoveUnused",), 1, False),  # even required
        (0, (), (), 1, False),
    ],
)
def test_tvm_enabling_rule(ctx_level, required, disabled, pass_level, enabled):
    ctx = PassContext(ctx_level, required=required, disabled=disabled)
    assert ctx.pass_enabled(PassInfo("RemoveUnused", pass_level)) is enabled


def test_unknown_pass_names_are_refused():
    with pytest.raises(KuiperError, match="unknown pass 'NoSuchPass'"):
        PassContext(2, disabled=["NoSuchPass"], known=registered_passes())
    with pytest.raises(KuiperError, match="unknown pass 'NoSuchPass'"):
        optimize(graph_of(*CHAIN), disabled=["NoSuchPass"])


def test_sequential_runs_enabled_passes_in_order_with_required_first():
    g = graph_of(*CHAIN)
    log = PassLog()
    seq = Sequential([toy("A", 1), toy("B", 3), toy("C", 2, required=("RemoveUnused",))], known=registered_passes())
    with PassContext(2, instruments=[log]) as ctx:
        seq(g)
    assert [r.name for r in log.rows] == ["A", "RemoveUnused", "C"]  # B is above level 2
    assert ctx.history == ["A", "RemoveUnused", "C"]


def test_fixed_point_repeats_until_nothing_changes():
    g = graph_of(*CHAIN)
    once, _ = Sequential([toy("Drop", 1, drop_one_relu)])(clone_graph(g))
    assert sum(op.type == "nn.ReLU" for op in once.operators) == 2
    log = PassLog()
    with PassContext(2, instruments=[log]):
        fixed, changed = Sequential([toy("Drop", 1, drop_one_relu)], fixed_point=True)(clone_graph(g))
    assert changed and not any(op.type == "nn.ReLU" for op in fixed.operators)
    assert [r.changed for r in log.rows] == [True, True, True, False]


def test_instruments_see_every_pass_from_outside():
    g = graph_of(*CHAIN)
    log, snaps, out = PassLog(), IRSnapshots(), io.StringIO()
    skip = ShouldRun(lambda graph, info: info.name != "Skipped")
    seq = Sequential([toy("Drop", 1, drop_one_relu), toy("Skipped", 1), toy("Quiet", 1)])
    with PassContext(2, instruments=[log, snaps, skip, PrintAfter(["Drop", "Quiet"], out)]):
        seq(g)
    assert [r.name for r in log.rows] == ["Drop", "Quiet"]
    assert skip.skipped == ["Skipped"]
    drop = log.rows[0]
    assert (drop.ops_before, drop.ops_after, drop.changed) == (5, 4, True) and drop.seconds >= 0
    assert log.rows[1].changes[0].action == "ran"
    assert [s.name for s in snaps.snapshots] == ["Drop"]  # only passes that changed something
    assert "r1" in snaps.snapshots[0].before and "r1" not in snaps.snapshots[0].after
    text = out.getvalue()
    assert "after Drop" in text and "Quiet changed nothing" in text
    assert "Drop" in log.text() and "5 → 4" in log.text()


def test_an_error_inside_a_pass_names_it_and_the_passes_before():
    def boom(graph):
        raise ValueError("no good")

    with pytest.raises(PassError) as info:
        with PassContext(2):
            Sequential([toy("First", 1), toy("Boom", 1, boom)])(graph_of(*CHAIN))
    err = info.value
    assert err.pass_name == "Boom" and err.ran_before == ["First"] and not err.broken_graph
    assert "pass 'Boom' failed: no good (passes run before it: First)" in str(err)


def test_the_verifier_stops_a_pass_that_breaks_the_graph_where_it_breaks():
    def breaks(graph):
        op = graph.operator("r2")
        op.inputs[0] = Operand("ghost")  # reads an operand nobody produces
        return graph, True

    with pytest.raises(PassError) as info:
        with PassContext(2):
            Sequential([toy("Fine", 1), toy("Breaks", 1, breaks), toy("Later", 1)])(graph_of(*CHAIN))
    err = info.value
    assert err.pass_name == "Breaks" and err.broken_graph and err.operator == "r2"
    assert "left an invalid graph" in str(err) and "ghost" in str(err)


def test_a_pass_that_changes_the_graph_but_says_it_did_not_is_caught():
    def sly(graph):
        graph.operators.remove(graph.operator("r2"))
        return graph, False

    with pytest.raises(PassError) as info:
        with PassContext(2):
            Sequential([toy("Sly", 1, sly)])(graph_of(*CHAIN))
    assert info.value.pass_name == "Sly" and "reported no change" in str(info.value)


def test_optimize_leaves_its_input_alone_and_level_0_does_nothing():
    g = graph_of(*CHAIN[:2], "nn.Dropout d 1 1 1 2 #1=(1,4)f32 #2=(1,4)f32", "pnnx.Output out 1 0 2 #2=(1,4)f32")
    copy = clone_graph(g)
    r0 = optimize(g, 0)
    assert r0.log.rows == [] and r0.after.equals(g)
    r1 = optimize(g, 1)
    assert "nn.Dropout" not in [op.type for op in r1.after.operators]
    assert g.equals(copy)  # untouched
    assert {r.name for r in r1.log.rows} <= {n for n, p in registered_passes().items() if p.info.opt_level <= 1}


def test_pass_table_lists_every_registered_pass_with_level_and_description():
    rows = pass_table()
    assert {r["name"] for r in rows} == set(registered_passes())
    assert all(r["level"] in (1, 2) and r["what"] for r in rows)


def test_contexts_are_per_thread():
    """The app optimises for several sessions at once: one thread's context (and the
    changes its passes record) never leaks into another's."""
    import threading

    results: dict[str, list[str]] = {}
    barrier = threading.Barrier(2)

    def slow(name: str):
        def fn(graph):
            barrier.wait(timeout=10)  # both threads inside a pass at the same time
            record("ran", name)
            return graph, False

        return fn

    def work(name: str) -> None:
        log = PassLog()
        with PassContext(2, instruments=[log]):
            Sequential([toy(name, 1, slow(name))])(graph_of(*CHAIN))
        results[name] = [str(c) for r in log.rows for c in r.changes]

    threads = [threading.Thread(target=work, args=(n,)) for n in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert results == {"A": ["ran A"], "B": ["ran B"]}
