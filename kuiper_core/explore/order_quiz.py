"""Predict the next step of DFS or Kahn: the questions, and verdicts that say why.

The walkthrough's trace is the oracle: a question stops before one of its events (DFS
entering a node, DFS appending a node to the output list, Kahn emitting a node), and a
verdict explains any pick from the state just before that event, in the algorithm's terms:
"op3 is not next: its in-degree is still 1 (op2 has not been emitted)".

Ties: Kahn may emit any node of in-degree 0 and DFS may enter any unvisited successor; this
engine takes the front of a first-in first-out queue and successors in the order the graph
lists them. A pick that another valid order would make is judged by that rule and said to
be valid elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..runtime.order import roots
from .order_state import START, OrderState, state_at
from .quiz import Question, Verdict, names
from .walkthrough import Walkthrough

# What can be asked, per algorithm: kind -> prompt. The kind is the event that answers it.
KINDS: dict[str, dict[str, str]] = {
    "dfs": {
        "visit": "Which node does DFS enter next?",
        "finish": "Which node joins the output list next?",
    },
    "kahn": {"dequeue": "Which node does Kahn emit next?"},
}
KIND_LABELS = {"visit": "next node entered", "finish": "next node finished", "dequeue": "next node emitted"}


def questions(w: Walkthrough, kind: str) -> list[Question]:
    """One question for every event of `kind` (see KINDS) in the walkthrough.

    Kahn's questions show the state just before the emit (the in-degrees are up to date);
    DFS's show the state right after the previous event of the same kind, so the student
    also predicts what happens in between (calls returning, the descent to a leaf)."""
    prompts = KINDS[w.algorithm]
    if kind not in prompts:
        raise ValueError(f"{w.algorithm} has no {kind!r} question: expected one of {', '.join(prompts)}")
    out: list[Question] = []
    last = START
    for i, e in enumerate(w.trace.events):
        if e.kind == kind and e.node is not None:
            out.append(Question(i, i - 1 if kind == "dequeue" else last, kind, prompts[kind], e.node))
            last = i
    return out


def judge(w: Walkthrough, q: Question, picked: str) -> Verdict:
    """Right or wrong, and why, from the state the question shows (`q.shown`)."""
    if picked not in w.successors:
        return Verdict(picked, q.answer, False, f"{picked} is not a node of this graph.")
    prior = state_at(w.trace, q.shown)
    if q.kind == "dequeue":
        return _judge_kahn(w, prior, q, picked)
    if q.kind == "visit":
        return _judge_visit(w, prior, q, picked)
    return _judge_finish(w, prior, q, picked)


def _predecessors(w: Walkthrough) -> dict[str, list[str]]:
    preds: dict[str, list[str]] = {n: [] for n in w.nodes}
    for n in w.nodes:
        for s in w.successors.get(n, ()):
            preds[s].append(n)
    return preds


def _listing(w: Walkthrough, node: str, limit: int = 8) -> str:
    """'op3 -> op4, op5': a node's successors in the order the engine tries them."""
    succ = w.successors.get(node, ())
    shown = ", ".join(succ[:limit]) + (f", … ({len(succ)} in all)" if len(succ) > limit else "")
    return f"{node} -> {shown or '(none)'}"


def _path(nodes: Sequence[str], limit: int = 8) -> str:
    """'a -> b -> c'; a long descent keeps its ends: 'a -> b -> … (1,200 nodes) … -> y -> z'."""
    if len(nodes) <= limit:
        return " -> ".join(nodes)
    return " -> ".join(nodes[:3]) + f" -> … ({len(nodes):,} nodes) … -> " + " -> ".join(nodes[-3:])


def _is_are(items: Sequence[str], one: str = "has", many: str = "have") -> str:
    return one if len(items) == 1 else many


# -- Kahn ----------------------------------------------------------------------------------------
def _judge_kahn(w: Walkthrough, prior: OrderState, q: Question, picked: str) -> Verdict:
    ans, queue = q.answer, prior.queue
    preds = _predecessors(w)
    emitted = {n: i + 1 for i, n in enumerate(prior.output)}
    others = [n for n in queue if n != ans]
    tie = (
        f"{names(others)} {_is_are(others, 'is', 'are')} ready too, and taking {'it' if len(others) == 1 else 'one of them'} "
        f"would give another valid order; this engine's queue is first in, first out, and {ans} was enqueued first "
        f"(queue, front first: {names(queue)})."
        if others
        else None
    )
    if picked == ans:
        ready = (
            f"every predecessor of {ans} ({names(preds[ans])}) has been emitted"
            if preds[ans]
            else f"{ans} has no predecessor"
        )
        return Verdict(picked, ans, True, f"{ans} is at the front of the queue: its in-degree is 0 ({ready}).", tie)
    if picked in emitted:
        return Verdict(picked, ans, False, f"{picked} is already in the order (position {emitted[picked]}).")
    if picked in queue:
        why = f"{picked} is ready too: its in-degree is 0 and it waits in the queue."
        rule = (
            f"But this engine's queue is first in, first out: {ans} was enqueued before {picked} "
            f"(queue, front first: {names(queue)})."
        )
        return Verdict(picked, ans, False, why, rule, valid_elsewhere=True)
    waiting = [p for p in preds[picked] if p not in emitted]
    degree = prior.indegree.get(picked, len(waiting))
    why = (
        f"{picked} is not next: its in-degree is still {degree} "
        f"({names(waiting)} {_is_are(waiting)} not been emitted). A node is emitted only when its in-degree is 0."
    )
    return Verdict(picked, ans, False, why)


# -- DFS: which node is entered next -------------------------------------------------------------
def _branch_point(w: Walkthrough, q: Question) -> str | None:
    """The node whose loop enters the answer (None: a new search from a root)."""
    edge = w.trace.events[q.step].edge
    return edge[0] if edge is not None else None


def _unwinding(prior: OrderState, branch: str | None) -> list[str]:
    """The calls that return before the next visit, top first."""
    stack = list(prior.stack)
    keep = stack.index(branch) + 1 if branch is not None else 0
    return stack[keep:][::-1]


def _judge_visit(w: Walkthrough, prior: OrderState, q: Question, picked: str) -> Verdict:
    ans = q.answer
    visited, finished = set(prior.visited), {n: i + 1 for i, n in enumerate(prior.output)}
    branch = _branch_point(w, q)
    unwind = _unwinding(prior, branch)
    returned = (
        f"{names(unwind)} {_is_are(unwind)} no unvisited successor left, so {'it returns' if len(unwind) == 1 else 'they return'}"
        + (f" and DFS is back in {branch}. " if branch is not None else " and the call stack is empty. ")
        if unwind
        else ""
    )
    if branch is None:
        free_roots = [r for r in roots(w.nodes, w.successors) if r not in visited]
        others = [r for r in free_roots if r != ans]
        listed = f"the engine tries them in the order of the graph's nodes, and {ans} comes first."
        if picked == ans:
            why = returned + f"A search starts at a node without predecessors: {ans} is the first unvisited one."
            rule = (
                f"Other unvisited nodes without predecessors ({names(others)}) would start a valid search too; "
                + listed
            )
            return Verdict(picked, ans, True, why, rule if others else None)
        if picked in others:
            why = returned + f"{picked} has no predecessor, so a search could start there."
            return Verdict(picked, ans, False, why, "But " + listed, True)
    else:
        candidates = [s for s in w.successors[branch] if s not in visited]
        others = [s for s in candidates if s != ans]
        listed = f"the engine takes successors in the order the graph lists them ({_listing(w, branch)}), so {ans} comes first."
        if picked == ans:
            why = returned + f"{ans} is the first unvisited successor of {branch}, the node on top of the call stack."
            rule = (
                f"{names(others)} {_is_are(others, 'is', 'are')} unvisited too and would give a valid order; " + listed
            )
            return Verdict(picked, ans, True, why, rule if others else None)
        if picked in others:
            why = returned + f"{picked} is an unvisited successor of {branch}, the node on top of the call stack."
            return Verdict(picked, ans, False, why, "But " + listed, True)
    if picked in prior.stack:
        why = f"{picked} is already visited: it is on the call stack (ReverseTopo({picked}) is still running), and DFS enters a node only once."
        return Verdict(picked, ans, False, why)
    if picked in finished:
        why = f"{picked} is already visited and finished (position {finished[picked]} in the output list): DFS skips visited nodes."
        return Verdict(picked, ans, False, why)
    if branch is None:
        preds = [p for p in _predecessors(w)[picked]]
        why = returned + (
            f"{picked} has {_is_are(preds, 'a predecessor', 'predecessors')} ({names(preds)}): with the call stack empty, "
            f"DFS starts again only at a node without predecessors, and {ans} is the first unvisited one."
        )
        return Verdict(picked, ans, False, why)
    why = returned + (
        f"DFS enters only an unvisited successor of the node on top of the call stack, {branch} "
        f"({_listing(w, branch)}), and {picked} is not one of them."
    )
    lower = [n for n in prior.stack if picked in w.successors.get(n, ()) and n != branch]
    if lower:
        why += f" {picked} is a successor of {lower[-1]}, lower on the call stack: DFS comes back to it after {branch}'s branch is done (unless that branch reaches it first)."
    return Verdict(picked, ans, False, why)


# -- DFS: which node finishes next --------------------------------------------------------------
def _first_to_finish(w: Walkthrough, prior: OrderState) -> list[str]:
    """Every node that finishes next under some order of successors: reachable from the
    top of the call stack (or an unvisited root) through unvisited nodes, with no unvisited
    successor of its own."""
    visited = set(prior.visited)
    if prior.stack:
        top = prior.stack[-1]
        if all(s in visited for s in w.successors[top]):
            return [top]
        starts = [s for s in w.successors[top] if s not in visited]
    else:
        starts = [r for r in roots(w.nodes, w.successors) if r not in visited]
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(s for s in w.successors[n] if s not in visited)
    return [n for n in w.nodes if n in seen and all(s in visited for s in w.successors[n])]


def _judge_finish(w: Walkthrough, prior: OrderState, q: Question, picked: str) -> Verdict:
    ans = q.answer
    visited, finished = set(prior.visited), {n: i + 1 for i, n in enumerate(prior.output)}
    entered = [e.node for e in w.trace.events[prior.index + 1 : q.step] if e.kind == "visit" and e.node is not None]
    possible = _first_to_finish(w, prior)
    others = [n for n in possible if n != ans]
    rule = (
        f"Under another order of successors, {names(others)} could finish first; this engine takes successors in "
        "the order the graph lists them."
        if others
        else None
    )
    done = w.successors[ans]
    if picked == ans:
        how = f"DFS first enters {_path(entered)}. " if entered else ""
        succ = f"Every successor of {ans} ({names(done)}) is visited" if done else f"{ans} has no successors"
        return Verdict(
            picked, ans, True, how + f"{succ}, so ReverseTopo({ans}) returns and {ans} joins the output list.", rule
        )
    if picked in finished:
        return Verdict(
            picked, ans, False, f"{picked} already finished: it is in the output list (position {finished[picked]})."
        )
    stack = list(prior.stack)
    if picked in stack and picked != stack[-1]:
        above = stack[stack.index(picked) + 1 :][::-1]
        why = (
            f"{picked} is on the call stack under {names(above)}: a call returns only after the calls above it have "
            f"returned, so {names(above)} {_is_are(above, 'finishes', 'finish')} before {picked}."
        )
        return Verdict(picked, ans, False, why)
    if stack and picked == stack[-1]:
        pending = [s for s in w.successors[picked] if s not in visited]
        why = (
            f"{picked} still has {_is_are(pending, 'an unvisited successor', 'unvisited successors')}, {names(pending)}: "
            f"ReverseTopo({picked}) enters {pending[0]} first, and {picked} joins the output list only when the loop "
            "over its successors is done."
        )
        return Verdict(picked, ans, False, why)
    if picked in others:
        why = f"{picked} could finish first: it is reachable through unvisited nodes and has no unvisited successor."
        rule = (
            f"But this engine takes successors in the order the graph lists them, so DFS goes {_path(entered)} "
            f"and {ans} finishes first."
        )
        return Verdict(picked, ans, False, why, rule, True)
    pending = [s for s in w.successors[picked] if s not in visited]
    if pending:
        why = (
            f"{picked} is not even visited yet, and when it is, its unvisited "
            f"{_is_are(pending, 'successor', 'successors')} {names(pending)} will finish before it."
        )
        return Verdict(picked, ans, False, why)
    where = (
        f"the branch of {stack[-1]}, the top of the call stack,"
        if stack
        else f"the search from {entered[0] if entered else ans}"
    )
    why = f"{picked} is not reachable through unvisited nodes from where DFS is: {where} finishes first."
    return Verdict(picked, ans, False, why)


def progress(qs: Sequence[Question], step: int) -> int:
    """The index of the first question at or after walkthrough position `step`."""
    return next((i for i, q in enumerate(qs) if q.step >= step), len(qs))
