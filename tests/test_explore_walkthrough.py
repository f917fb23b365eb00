"""kuiper_core.explore.walkthrough: the state the Execution order page shows at each step."""

from __future__ import annotations

import re

import pytest

import kuiper_core
import kuiper_core.pnnx
from conftest import OPS, SAMPLES
from kuiper_core.explore import walkthrough as W
from kuiper_core.runtime.order import is_topological


def test_kuiperinfer_example_dfs_ends_with_the_reversed_output_list() -> None:
    w = W.walkthrough(W.PRESETS["KuiperInfer's worked example"], "dfs")
    assert w.error is None
    assert w.order == ["input", "op1", "op3", "op5", "output", "op4"]  # the order KuiperInfer's article documents
    before, last = w.state(-2), w.state(-1)
    assert last.kind == "reverse" and list(last.output) == list(reversed(before.output))
    # op4 is the first node to finish: it is a leaf reached first from op3
    first_finish = next(e for e in w.trace if e.kind == "finish")
    assert first_finish.node == "op4" and first_finish.stack == ("input", "op1", "op3")


def test_node_colours_follow_stack_and_finished_nodes() -> None:
    w = W.walkthrough(W.PRESETS["KuiperInfer's worked example"], "dfs")
    i = w.trace.first("finish")  # op4 finished
    colors = W.node_colors(w, i)
    assert colors["op4"] == W.COLORS["visited, finished (in the output list)"]
    assert colors["op3"] == colors["input"] == W.COLORS["on the call stack"]
    assert colors["op5"] == W.COLORS["not visited"]


def test_toy_dot_highlights_current_node_and_edge() -> None:
    w = W.walkthrough(W.PRESETS["A small diamond"], "dfs")
    i = w.trace.first("skip")  # right -> add, add already visited
    dot = W.toy_dot(w, i)
    assert re.search(r'"add" \[[^\]]*color="#d62728", penwidth=3', dot)
    assert re.search(r'"right" -> "add" \[color="#d62728"', dot)
    assert dot.count("penwidth=3") == 1
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert W.toy_dot(w, None).count("#d62728") == 0  # before the first step nothing is current


def test_kahn_shows_indegree_queue_and_removed_edges() -> None:
    w = W.walkthrough(W.PRESETS["A small diamond"], "kahn")
    assert w.order is not None and is_topological(w.order, w.successors)
    i = w.trace.first("decrement", "add")
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
    assert w.state(-1).kind == "cycle"
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
    kahn = W.walkthrough(W.PRESETS["A graph with a cycle"], "kahn").message(-1)
    assert "a, b, c lie on a cycle" in kahn and "output comes after the cycle" in kahn
    assert "output lie" not in kahn and "a, b, c, output lie" not in kahn
    # Unreachable from any root: the DFS says which nodes are on the cycle and which behind it.
    w = W.walkthrough({"a": ["b"], "b": ["a", "z"], "z": []}, "dfs")
    assert w.state(-1).kind == "cycle"
    assert "a, b lie on a cycle" in w.message(-1) and "z comes after" in w.message(-1)


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


# -- the events observed from outside, and the sentences told about them ---------------------------
TYPED = "in -> a -> out\nin -> b -> out\nb -> c\nlone"


def _graphs() -> list[tuple[str, dict[str, list[str]]]]:
    g = kuiper_core.pnnx.read_param(SAMPLES / "resnet18.pnnx.param")
    model = {op.name: [s.name for s in g.successors(op)] for op in g.operators}
    return [*W.PRESETS.items(), ("typed", W.parse_edges(TYPED)), ("resnet18", model)]


def _check_step(w: W.Walkthrough, i: int, preds: dict[str, list[str]]) -> None:
    """What the sentence for event i says holds in the state the trace rebuilds."""
    state, msg = w.state(i), w.message(i)
    prior = w.state(i - 1) if i else None
    e, n = state.event, state.node
    if e.kind == "visit":
        assert state.stack[-1] == n and state.visited[-1] == n and n not in (prior.visited if prior else ())
        if e.edge is None:
            assert f"Start at {n}: it has no predecessor" in msg and not preds[n] and state.stack == (n,)
        else:
            assert f"{n} (successor of {e.edge[0]}) is not visited" in msg
            assert state.stack[-2] == e.edge[0] and n in w.successors[e.edge[0]]
    elif e.kind == "skip":
        assert f"{n} (successor of {e.edge[0]}) is already visited" in msg
        assert prior is not None and n in prior.visited and n not in prior.stack and state.stack[-1] == e.edge[0]
    elif e.kind == "finish":
        assert state.output[-1] == n and n not in state.stack and prior is not None and prior.stack[-1] == n
        assert all(s in state.visited for s in w.successors[n])  # every successor is done
        assert f"append it to the output list{f' and return to {state.stack[-1]}.' if state.stack else '.'}" in msg
    elif e.kind == "reverse":
        assert list(state.output) == w.order and "Reverse the output list" in msg
    elif e.kind == "indegree":
        assert dict(state.indegree) == {m: len(preds[m]) for m in w.nodes}
    elif e.kind == "enqueue":
        assert state.queue[-1] == n and state.indegree[n] == 0 and f"{n} " in msg and "enqueue it" in msg
    elif e.kind == "dequeue":
        assert prior is not None and prior.queue[0] == n and state.output[-1] == n and n not in state.queue
        assert msg == f"Dequeue {n} and append it to the order."
    elif e.kind == "decrement":
        assert msg == f"Remove edge {e.edge[0]} -> {n}: in-degree of {n} drops to {state.indegree[n]}."
        assert state.removed[-1] == e.edge and e.edge[0] == state.output[-1]
    elif e.kind == "cycle":
        assert f"{', '.join(e.on_cycle)} lie on a cycle" in msg or " is a cycle, so no order exists" in msg
    if w.algorithm == "kahn" and state.indegree:  # in-degree = edges from predecessors not removed yet
        removed = set(state.removed)
        assert all(state.indegree[m] == sum((p, m) not in removed for p in preds[m]) for m in w.nodes)
    if w.algorithm == "dfs":  # the call stack is a path of the graph
        assert all(b in w.successors[a] for a, b in zip(state.stack, state.stack[1:]))


@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
def test_the_narration_agrees_with_the_events_state_at_every_step(algorithm: str) -> None:
    for name, succ in _graphs():
        w = W.walkthrough(succ, algorithm)
        preds: dict[str, list[str]] = {n: [] for n in w.nodes}
        for a in w.nodes:
            for b in w.successors[a]:
                preds[b].append(a)
        for i in range(len(w)):
            _check_step(w, i, preds)
        replayed = list(w.trace)  # iterating and indexing rebuild the same states
        assert replayed[len(w) // 2] == w.state(len(w) // 2), name
        if w.order is not None:
            assert is_topological(w.order, w.successors) and sorted(w.order) == sorted(w.nodes)


def test_the_drawing_agrees_with_the_state() -> None:
    """The toy DOT's labels and fills are the trace's state: in-degrees, removed edges, colours."""
    w = W.walkthrough(W.parse_edges(TYPED), "kahn")
    for i in range(len(w)):
        state, dot = w.state(i), W.toy_dot(w, i)
        for n in w.nodes:
            assert f"in-degree {state.indegree[n]}" in re.search(rf'^  "{n}" \[label="([^"]*)"', dot, re.M).group(1)
            fill = re.search(rf'^  "{n}" \[[^\n]*fillcolor="([^"]+)"', dot, re.M).group(1)
            assert fill == W.node_colors(w, i)[n]
        for a, b in state.removed:
            assert re.search(rf'^  "{a}" -> "{b}" \[(style="dashed"|color="#d62728")', dot, re.M)


@pytest.mark.slow
def test_no_order_event_is_made_without_an_observer(monkeypatch) -> None:
    """build() orders every model: without an observer the algorithms build no event and no
    sentence (the trace cost build ~4 ms on deep1500)."""
    from kuiper_core.runtime import order

    def refuse(*a, **k):
        raise AssertionError("an event was built with nobody observing")

    monkeypatch.setattr(order, "OrderEvent", refuse)
    g = kuiper_core.pnnx.read_param(SAMPLES / "deep1500.pnnx.param")
    names = [op.name for op in g.operators]
    succ = {op.name: [s.name for s in g.successors(op)] for op in g.operators}
    for algorithm in ("dfs", "kahn"):
        assert is_topological(order.execution_order(names, succ, algorithm), succ)
    rt = kuiper_core.load(SAMPLES / "deep1500.pnnx.param").build("kahn")  # dfs, then kahn
    assert not hasattr(rt, "order_trace") and len(rt.order) == len(names)
    with pytest.raises(kuiper_core.errors.CycleError):
        order.execution_order(list(W.WITH_CYCLE), W.WITH_CYCLE, "dfs")
