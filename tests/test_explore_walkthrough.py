"""kuiper_core.explore.walkthrough: the state the Execution order page shows at each step."""

from __future__ import annotations

import re

import pytest

import kuiper_core
from conftest import OPS
from kuiper_core.explore import walkthrough as W
from kuiper_core.runtime.order import is_topological


def test_kuiperinfer_example_dfs_ends_with_the_reversed_output_list() -> None:
    w = W.walkthrough(W.PRESETS["KuiperInfer's worked example"], "dfs")
    assert w.error is None
    assert w.order == ["input", "op1", "op3", "op5", "output", "op4"]  # the order KuiperInfer's article documents
    before, last = w.events[-2], w.events[-1]
    assert last.kind == "reverse" and list(last.output) == list(reversed(before.output))
    # op4 is the first node to finish: it is a leaf reached first from op3
    first_finish = next(e for e in w.events if e.kind == "finish")
    assert first_finish.node == "op4" and first_finish.stack == ("input", "op1", "op3")


def test_node_colours_follow_stack_and_finished_nodes() -> None:
    w = W.walkthrough(W.PRESETS["KuiperInfer's worked example"], "dfs")
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


def test_cycle_narration_names_only_the_nodes_on_the_cycle() -> None:
    """'output' waits behind the cycle a -> b -> c; it does not lie on it."""
    kahn = W.walkthrough(W.PRESETS["A graph with a cycle"], "kahn").events[-1].message
    assert "a, b, c lie on a cycle" in kahn and "output comes after the cycle" in kahn
    assert "output lie" not in kahn and "a, b, c, output lie" not in kahn
    # Unreachable from any root: the DFS says which nodes are on the cycle and which behind it.
    w = W.walkthrough({"a": ["b"], "b": ["a", "z"], "z": []}, "dfs")
    assert w.events[-1].kind == "cycle"
    assert "a, b lie on a cycle" in w.events[-1].message and "z comes after" in w.events[-1].message


def test_nodes_on_cycles_is_exactly_the_cyclic_components() -> None:
    from kuiper_core.runtime.order import nodes_on_cycles

    succ = {"x": ["a"], "a": ["b"], "b": ["a", "c"], "c": ["c", "d"], "d": [], "e": ["f"], "f": []}
    assert nodes_on_cycles(list(succ), succ) == ["a", "b", "c"]  # c: a self-loop
    assert nodes_on_cycles(list(W.PRESETS["A small diamond"]), W.PRESETS["A small diamond"]) == []


def test_typed_graph_syntax_and_located_errors() -> None:
    from kuiper_core.errors import LimitError, ParseError

    g = W.parse_edges("a -> b -> c\nb -> d, e   # two successors\nf\nx, y -> z; z -> a")
    assert g == {
        "a": ["b"],
        "b": ["c", "d", "e"],
        "c": [],
        "d": [],
        "e": [],
        "f": [],
        "x": ["z"],
        "y": ["z"],
        "z": ["a"],
    }
    assert W.parse_edges(W.edges_text(W.PRESETS["A small diamond"])) == W.PRESETS["A small diamond"]
    for text, line, col, words in [
        ("a -> b\nc - > d", 2, 2, "edge is written '->'"),
        ("a -> ", 1, 6, "expected a node name after '->'"),
        ("a -> b; c -> d!", 1, 15, "unexpected character '!'"),
        ("   ", 1, 1, "empty"),
    ]:
        with pytest.raises(ParseError) as e:
            W.parse_edges(text)
        assert (e.value.line, e.value.column) == (line, col) and words in e.value.message, e.value.render()
        assert "^" in e.value.render()
    with pytest.raises(LimitError):
        W.parse_edges(" -> ".join(f"n{i}" for i in range(W.MAX_TYPED_NODES + 1)))
    w = W.walkthrough(W.parse_edges("in -> a -> out\nin -> b -> out"), "kahn")
    assert w.order is not None and w.order[0] == "in" and w.order[-1] == "out"
