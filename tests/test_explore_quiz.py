"""The "predict the next step" quizzes: DFS, Kahn, and the expression parser and stack machine.

Each verdict is checked against the engine: exactly the engine's next step is right, every
explanation names what the algorithm's state says, and where another valid order would pick
differently (Kahn's queue, DFS's successor order) the verdict says so and names the rule.
"""

from __future__ import annotations

import pytest
from conftest import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from kuiper_core import expression as ex
from kuiper_core.explore import expression_view as V
from kuiper_core.explore import order_quiz as Q
from kuiper_core.explore import walkthrough as W
from kuiper_core.explore.expression_quiz import ExpressionQuiz
from kuiper_core.explore.order_state import state_at
from kuiper_core.explore.quiz import Score
from kuiper_core.pnnx import read_param

SEED = W.PRESETS["KuiperInfer's worked example"]
DIAMOND = W.PRESETS["A small diamond"]


def _question(w: W.Walkthrough, kind: str, answer: str) -> Q.Question:
    return next(q for q in Q.questions(w, kind) if q.answer == answer)


# -- Kahn ----------------------------------------------------------------------------------------
def test_kahn_explains_a_node_that_still_waits_by_its_in_degree() -> None:
    w = W.walkthrough(SEED, "kahn")
    q = _question(w, "dequeue", "op1")
    v = Q.judge(w, q, "op3")
    assert not v.correct and not v.valid_elsewhere
    assert v.why.startswith("op3 is not next: its in-degree is still 1 (op1 has not been emitted)")
    diamond = W.walkthrough(DIAMOND, "kahn")
    v = Q.judge(diamond, Q.questions(diamond, "dequeue")[0], "add")
    assert "in-degree is still 2 (left and right have not been emitted)" in v.why
    right = Q.judge(w, q, "op1")
    assert right.correct and "front of the queue" in right.why and "every predecessor of op1 (input)" in right.why
    assert right.tie_rule is None  # the queue held only op1: nothing to break
    assert "already in the order (position 1)" in Q.judge(w, q, "input").why


def test_kahn_tie_is_decided_by_the_fifo_queue_and_the_verdict_says_so() -> None:
    w = W.walkthrough(DIAMOND, "kahn")
    q = _question(w, "dequeue", "left")
    assert state_at(w.trace, q.shown).queue == ("left", "right")
    other = Q.judge(w, q, "right")
    assert not other.correct and other.valid_elsewhere and other.headline.startswith("Valid, but not")
    assert "right is ready too" in other.why and "first in, first out: left was enqueued before right" in other.tie_rule
    right = Q.judge(w, q, "left")
    assert right.correct and "right is ready too" in right.tie_rule and "left was enqueued first" in right.tie_rule


# -- DFS ------------------------------------------------------------------------------------------
def test_dfs_visit_tie_follows_the_successor_list() -> None:
    w = W.walkthrough(SEED, "dfs")
    q = _question(w, "visit", "op4")
    v = Q.judge(w, q, "op5")
    assert v.valid_elsewhere and not v.correct and "(op3 -> op4, op5), so op4 comes first" in v.tie_rule
    assert Q.judge(w, q, "op4").correct and "op5 is unvisited too" in Q.judge(w, q, "op4").tie_rule
    assert "on the call stack" in Q.judge(w, q, "op1").why
    assert "not one of them" in Q.judge(w, q, "output").why


def test_dfs_visit_explains_the_calls_that_return_first() -> None:
    w = W.walkthrough(DIAMOND, "dfs")
    q = _question(w, "visit", "right")  # shown: right after output was entered
    assert state_at(w.trace, q.shown).stack == ("input", "left", "add", "output")
    v = Q.judge(w, q, "right")
    assert v.correct and v.why.startswith("output, add and left have no unvisited successor left, so they return")
    assert "already visited: it is on the call stack" in Q.judge(w, q, "add").why
    first = Q.questions(w, "visit")[0]
    assert "has predecessors (left and right)" in Q.judge(w, first, "add").why  # a search starts at a root


def test_dfs_finish_from_the_start_predicts_the_whole_descent() -> None:
    w = W.walkthrough(SEED, "dfs")
    q = Q.questions(w, "finish")[0]
    assert q.shown == -1 and q.answer == "op4"
    right = Q.judge(w, q, "op4")
    assert right.correct and "DFS first enters input -> op1 -> op3 -> op4" in right.why
    assert "output could finish first" in right.tie_rule  # op3 -> op5 first would finish output first
    elsewhere = Q.judge(w, q, "output")
    assert elsewhere.valid_elsewhere and "input -> op1 -> op3 -> op4" in elsewhere.tie_rule
    assert "its unvisited successors op4 and op5 will finish before it" in Q.judge(w, q, "op3").why
    later = _question(w, "finish", "op3")
    assert "op5 finishes before op3" in Q.judge(w, later, "op1").why or "under op3" in Q.judge(w, later, "op1").why
    assert "already finished" in Q.judge(w, later, "op4").why


def _all_graphs() -> list[tuple[str, dict[str, list[str]]]]:
    g = read_param(SAMPLES / "resnet18.pnnx.param")
    model = {op.name: [s.name for s in g.successors(op)] for op in g.operators}
    typed = W.parse_edges("a -> b -> d\na -> c -> d\nc -> e\nx -> e")
    return [*W.PRESETS.items(), ("typed", typed), ("resnet18", model)]


@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
def test_only_the_engines_next_step_is_right_and_every_pick_is_explained(algorithm: str) -> None:
    for name, succ in _all_graphs():
        w = W.walkthrough(succ, algorithm)
        for kind in Q.KINDS[algorithm]:
            qs = Q.questions(w, kind)
            assert [q.answer for q in qs] == [e.node for e in w.trace.events if e.kind == kind]
            for q in qs[:: max(1, len(qs) // 12)]:
                picks = w.nodes if len(w.nodes) < 20 else w.nodes[:: len(w.nodes) // 15] + [q.answer]
                prior = state_at(w.trace, q.shown)
                for p in picks:
                    v = Q.judge(w, q, p)
                    assert v.correct == (p == q.answer), (name, kind, q, p, v)
                    assert v.why and p in v.text() or v.correct
                    if v.valid_elsewhere and kind == "dequeue":  # truly ready: in-degree 0, queued
                        assert prior.indegree[p] == 0 and p in prior.queue
                    if v.valid_elsewhere and kind == "visit":
                        assert p not in prior.visited


def test_the_quiz_runs_on_a_cycle_until_the_cycle() -> None:
    w = W.walkthrough(W.PRESETS["A graph with a cycle"], "kahn")
    (q,) = Q.questions(w, "dequeue")  # input, then a waits on c forever
    assert q.answer == "input" and "in-degree is still 2 (input and c have not been emitted)" in Q.judge(w, q, "a").why


def test_score_counts_answers_and_runs() -> None:
    w = W.walkthrough(DIAMOND, "kahn")
    qs = Q.questions(w, "dequeue")
    score = Score()
    for q, pick in zip(qs, ["input", "right", "right", "add", "output"]):
        score.add(Q.judge(w, q, pick))
    assert (score.right, score.asked, score.best, score.streak) == (4, 5, 3, 3)
    assert score.text() == "Score: 4 of 5 · 3 in a row"
    with pytest.raises(ValueError):
        Q.questions(w, "visit")


# -- expressions ----------------------------------------------------------------------------------
def _quiz(text: str) -> ExpressionQuiz:
    ast = ex.parse(text)
    n = V.max_operand_index(ast) + 1
    return ExpressionQuiz(text, ast, ex.evaluate_traced(ast, V.example_inputs(n)))


EXPRESSIONS = [
    "mul(add(@0,1.5),neg(@1))",
    "add(add(mul(@0,@1),mul(@2,add(add(add(@0,@2),@3),@4))),@5)",  # seed 000's long example
    "[int(size(@0,0)),-1,pow(sub(@0,@1),2.0)]",
    "add(@0,@0)",
]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_next_node_only_reverse_polish_is_right(text: str) -> None:
    z = _quiz(text)
    for q in z.questions("next"):
        for p in range(len(z.rpn)):
            v = z.judge(q, str(p))
            assert v.correct == (p == q.step) and v.why
            if p < q.step:
                assert "already evaluated" in v.why
            elif p > q.step and not v.correct:
                assert "is not evaluated yet" in v.why or "comes first: it is in argument" in v.why


def test_next_node_explanations() -> None:
    z = _quiz("mul(add(@0,1.5),neg(@1))")  # rpn: @0 1.5 add @1 neg mul
    q = z.questions("next")[1]  # @0 pushed; 1.5 next
    assert (
        "`@1` is ready, but `1.5` comes first: it is in argument 1 of `mul(add(@0,1.5),neg(@1))`" in z.judge(q, "3").why
    )
    assert "its argument `1.5` is not evaluated yet" in z.judge(q, "2").why
    q = z.questions("next")[3]
    assert "`@0` is already evaluated, and `add(@0,1.5)` has used its value" in z.judge(q, "0").why
    assert z.judge(z.questions("next")[2], "2").why.startswith("Every argument of `add(@0,1.5)` is on the stack")
    same = _quiz("add(@0,@0)")
    assert "(column 5)" in same.describe(same.rpn[0]) and "(column 8)" in same.describe(same.rpn[1])


def test_first_argument_is_the_deepest_of_the_popped_values() -> None:
    z = _quiz("add(@0,mul(@1,sub(@2,1.0)))")  # stack before sub: @0 @1 @2 1.0
    qs = z.questions("first")
    assert [z.rpn[q.step].name for q in qs] == ["sub", "mul", "add"]
    sub = qs[0]
    assert sub.answer == "2" and z.judge(sub, "2").correct and "takes 2 arguments" in z.judge(sub, "2").why
    assert "`1.0` is argument 2 of `sub(@2,1.0)`" in z.judge(sub, "3").why
    assert "stays on the stack until `mul(@1,sub(@2,1.0))` uses it" in z.judge(sub, "1").why
    assert "stays on the stack until `add(@0,mul(@1,sub(@2,1.0)))` uses it" in z.judge(sub, "0").why
    listed = _quiz("[int(size(@0,0)),-1,7]")  # a list pops its three items
    (q,) = [q for q in listed.questions("first") if isinstance(listed.rpn[q.step], ex.ListExpr)]
    assert "takes 3 arguments" in listed.judge(q, q.answer).why
    assert not _quiz("neg(@0)").questions("first")  # one argument: nothing to choose


def test_close_names_the_innermost_open_call() -> None:
    z = _quiz("mul(add(@0,1.5),neg(@1))")
    qs = z.questions("close")
    assert [z.tokens[int(q.answer)].text for q in qs] == ["add", "neg", "mul"]
    first = qs[0]
    assert z.judge(first, "2").correct and "its 2 arguments are complete" in z.judge(first, "2").why
    assert "`add(` opened after it, at column 5" in z.judge(first, "0").why
    assert z.judge(first, "3").correct  # the '(' of add stands for add
    assert "opens after this ')'" in z.judge(first, "9").why
    assert "already closed, by the ')' at column 15" in z.judge(qs[1], "2").why
    assert "does not open a call" in z.judge(first, "4").why
    lists = _quiz("[int(size(@0,0)),-1]")
    closers = lists.questions("close")
    assert [lists.tokens[int(q.answer)].text for q in closers] == ["size", "int", "["]
    assert lists.node_of_token(0) is lists.ast and lists.node_of_token(2) is lists.ast.items[0]  # '[', '(' of int
    assert lists.node_of_token(8) is None  # ','


@pytest.mark.slow
def test_a_big_expression_is_judged_quickly() -> None:
    """A 3,000-node expression (a model's folded arithmetic can be long): naming nodes and
    finding tokens stay linear."""
    import time

    text = "add(" * 1500 + "@0" + ",1.0)" * 1500
    t0 = time.perf_counter()
    z = _quiz(text)
    for kind in ("next", "first", "close"):
        qs = z.questions(kind)
        for q in qs[:: len(qs) // 5]:
            assert z.judge(q, q.answer).correct and not z.judge(q, "0" if q.answer != "0" else "1").correct
    assert time.perf_counter() - t0 < 5, time.perf_counter() - t0
    assert "(column" in z.describe(z.rpn[1])  # every '1.0' reads the same: its column tells them apart


@st.composite
def _dags(draw) -> dict[str, list[str]]:
    """A random graph of up to 9 nodes: edges go forward in a shuffled order, or (rarely) back."""
    n = draw(st.integers(1, 9))
    names = [f"n{i}" for i in draw(st.permutations(range(n)))]
    succ: dict[str, list[str]] = {m: [] for m in names}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if draw(st.integers(0, 3)) == 0:
                succ[a].append(b)
    if n > 2 and draw(st.integers(0, 5)) == 0:
        succ[names[-1]].append(names[0])  # a cycle: the quiz stops where the algorithm does
    return succ


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(_dags(), st.sampled_from(["dfs", "kahn"]))
def test_any_graph_has_exactly_one_right_answer_per_question_and_explains_the_rest(succ, algorithm) -> None:
    w = W.walkthrough(succ, algorithm)
    for kind in Q.KINDS[algorithm]:
        for q in Q.questions(w, kind):
            prior = state_at(w.trace, q.shown)
            right = [p for p in w.nodes if Q.judge(w, q, p).correct]
            assert right == [q.answer]
            for p in w.nodes:
                v = Q.judge(w, q, p)
                assert v.why and (v.correct or p in v.text())
                if v.valid_elsewhere and kind == "dequeue":
                    assert prior.indegree[p] == 0 and p in prior.queue
                if v.valid_elsewhere and kind == "visit":
                    assert p not in prior.visited
                if v.valid_elsewhere and kind == "finish":
                    assert p not in prior.visited and all(s in prior.visited for s in w.successors[p])


def test_explanations_stay_short_on_a_deep_model() -> None:
    """deep1500's first 'which node finishes first' descends ~1,500 calls: the verdict keeps
    the ends of the path, not every name."""
    g = read_param(SAMPLES / "deep1500.pnnx.param")
    succ = {op.name: [s.name for s in g.successors(op)] for op in g.operators}
    w = W.walkthrough(succ, "dfs", nodes=[op.name for op in g.operators])
    q = Q.questions(w, "finish")[0]
    for pick in (q.answer, w.nodes[0], w.nodes[len(w.nodes) // 2]):
        v = Q.judge(w, q, pick)
        assert len(v.text()) < 700, (pick, len(v.text()))
    assert " nodes) … -> " in Q.judge(w, q, q.answer).why
