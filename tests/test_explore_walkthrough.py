"""kuiper_core.explore.walkthrough: the state the Execution order page shows at each step."""

from __future__ import annotations

import re

import pytest

import kuiper_core
from conftest import OPS
from kuiper_core.explore import walkthrough as W
from kuiper_core.runtime.order import is_topological


def test_seed_004_dfs_ends_with_the_reversed_output_list() -> None:
    w = W.walkthrough(W.PRESETS["Seed 004's example"], "dfs")
    assert w.error is None
    assert w.order == ["input", "op1", "op3", "op5", "output", "op4"]  # seed 004's documented order
    before, last = w.events[-2], w.events[-1]
    assert last.kind == "reverse" and list(last.output) == list(reversed(before.output))
    # op4 is the first node to finish: it is a leaf reached first from op3
    first_finish = next(e for e in w.events if e.kind == "finish")
    assert first_finish.node == "op4" and first_finish.stack == ("input", "op1", "op3")


def test_node_colours_follow_stack_and_finished_nodes() -> None:
    w = W.walkthrough(W.PRESETS["Seed 004's example"], "dfs")
    i = next(i for i, e in enumerate(w.events) if e.kind == "finish")  # op4 finished
    colors = W.node_colors(w, i)
    assert colors["op4"] == W.COLORS["visited, finished (in the output list)"]
    assert colors["op3"] == colors["input"] == W.COLORS["on the call stack"]
    assert colors["op5"] == W.COLORS["not visited"]


def test_toy_dot_highlights_current_node_and_edge() -> None:
    w = W.walkthrough(W.PRESETS["A small diamond"], "dfs")
    i = next(i for i, e in enumerate(w.events) if e.kind == "skip")  # right -> add, add already visited
    dot = W.toy_dot(w, i)
    assert re.search(r'"add" \[[^\]]*color="#d62728", penwidth=3', dot)
    assert re.search(r'"right" -> "add" \[color="#d62728"', dot)
    assert dot.count("penwidth=3") == 1
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert W.toy_dot(w, None).count("#d62728") == 0  # before the first step nothing is current


def test_kahn_shows_indegree_queue_and_removed_edges() -> None:
    w = W.walkthrough(W.PRESETS["A small diamond"], "kahn")
    assert w.order is not None and is_topological(w.order, w.successors)
    i = next(i for i, e in enumerate(w.events) if e.kind == "decrement" and e.node == "add")
    rows = {r["node"]: r for r in W.indegree_rows(w, i)}
    assert rows["add"]["in-degree"] == 1 and rows["add"]["status"] == "waiting"
    assert rows["input"]["status"] == "emitted"
    dot = W.toy_dot(w, i)
    assert "in-degree 1" in dot
    assert '"input" -> "left" [style="dashed"' in dot  # removed earlier
    assert re.search(r'"left" -> "add" \[color="#d62728"', dot)  # removed now


@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
def test_cycle_is_the_lesson_not_a_crash(algorithm: str) -> None:
    w = W.walkthrough(W.PRESETS["A graph with a cycle"], algorithm)
    assert w.order is None and set(w.cycle or []) == {"a", "b", "c"}
    assert "cycle" in (w.error or "")
    assert w.events[-1].kind == "cycle"
    colors = W.node_colors(w, len(w) - 1)
    assert all(colors[n] == W.COLORS["on the cycle"] for n in "abc")
    assert W.order_rows(w) == []


def test_model_walkthrough_matches_the_runtime_order() -> None:
    g = kuiper_core.load(OPS / "rnn_lstm_proj" / "model.pnnx.param")
    for algorithm in ("dfs", "kahn"):
        g.build(algorithm)
        w = W.model_walkthrough(g.graph, algorithm)
        assert w.order == [r.name for r in g.order]
        rows = W.order_rows(w)
        assert [r["node"] for r in rows] == w.order and rows[1]["type"] == "nn.LSTM"
        assert W.step_of_node(w, "rnn") is not None
        assert "nn.LSTM" in W.toy_dot(w, len(w) - 1)


def test_unknown_algorithm() -> None:
    with pytest.raises(ValueError):
        W.walkthrough({"a": []}, "bfs")
