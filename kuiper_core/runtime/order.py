"""Execution order: the seeds' reverse-topological DFS, and Kahn's algorithm.

Both work on plain node names and a successor map, so the app can walk through toy graphs
(seed 004's example, a diamond, a cycle) with the same code that orders real models. Each
also records a trace of events for the app to animate. The DFS is iterative: a deep model
(1,700 operators, a 1,650-long path) would overflow Python's recursion limit.

A trace records only what each step did (`TraceStep`); the algorithm's whole state at a
step (`TraceEvent`: stack, visited set, output, queue, in-degrees) is rebuilt when asked
for, by replaying from a checkpoint. Copying the state at every step made memory grow with
the square of the graph (12,000 operators took over 3 GB).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple, overload
from collections.abc import Iterator, Mapping, Sequence

from ..errors import CycleError

Successors = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class TraceEvent:
    """One step of an ordering algorithm, with the algorithm's whole state after it.

    kind: DFS: 'call' (ReverseTopo(node) entered: marked visited, pushed on the call
    stack), 'skip' (a successor already visited), 'finish' (all successors done: node
    appended to the output list, popped), 'reverse' (the final reversal).
    Kahn: 'indegree' (table computed), 'enqueue', 'dequeue' (node emitted to the order),
    'decrement' (an edge removed from a successor's in-degree). Both: 'cycle' (no order exists).
    """

    kind: str
    node: str | None
    message: str
    stack: tuple[str, ...] = ()
    visited: tuple[str, ...] = ()
    output: tuple[str, ...] = ()
    queue: tuple[str, ...] = ()
    indegree: Mapping[str, int] = field(default_factory=dict)
    edge: tuple[str, str] | None = None


class TraceStep(NamedTuple):
    """What one step did: its kind and node (see TraceEvent), the sentence the app shows,
    and for Kahn's 'decrement' the edge removed. Small: one is kept for every step."""

    kind: str
    node: str | None
    message: str
    edge: tuple[str, str] | None = None


class Trace(Sequence[TraceEvent]):
    """The steps of one ordering run; `trace[i]` is the TraceEvent after step i.

    States are replayed from the nearest checkpoint (at most ~32 are kept, filled in as
    steps are asked for), so memory stays linear in the number of steps and a page showing
    one step does at most len/32 replay steps.
    """

    MAX_CHECKPOINTS = 32

    def __init__(self, algorithm: str, indegree: Mapping[str, int] | None = None) -> None:
        self.algorithm = algorithm
        self.steps: list[TraceStep] = []
        self._indegree = dict(indegree or {})  # Kahn: the table before any decrement
        self._checkpoints: dict[int, tuple] = {}

    def record(self, kind: str, node: str | None, message: str, edge: tuple[str, str] | None = None) -> None:
        self.steps.append(TraceStep(kind, node, message, edge))

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, i: int) -> TraceEvent: ...
    @overload
    def __getitem__(self, i: slice) -> list[TraceEvent]: ...
    def __getitem__(self, i: int | slice) -> TraceEvent | list[TraceEvent]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("trace index out of range")
        return self._event(i)

    def __iter__(self) -> Iterator[TraceEvent]:
        state = self._initial()
        for step in self.steps:
            self._apply(state, step)
            yield self._freeze(step, state)

    # -- replay -----------------------------------------------------------------------------
    def _every(self) -> int:
        return max(256, math.ceil(len(self.steps) / self.MAX_CHECKPOINTS))

    def _event(self, i: int) -> TraceEvent:
        every = self._every()
        start = max((c for c in self._checkpoints if c <= i), default=-1)
        state = self._thaw(self._checkpoints[start]) if start >= 0 else self._initial()
        for j in range(start + 1, i + 1):
            self._apply(state, self.steps[j])
            if (j + 1) % every == 0 and j not in self._checkpoints:
                self._checkpoints[j] = self._snapshot(state)
        return self._freeze(self.steps[i], state)

    def _initial(self) -> list:
        if self.algorithm == "dfs":
            return [[], [], []]  # stack, visited (in visiting order), output
        return [deque(), [], dict(self._indegree)]  # queue, order, in-degrees

    @staticmethod
    def _snapshot(state: list) -> tuple:
        return tuple(tuple(x) if not isinstance(x, dict) else dict(x) for x in state)

    def _thaw(self, snap: tuple) -> list:
        if self.algorithm == "dfs":
            return [list(x) for x in snap]
        return [deque(snap[0]), list(snap[1]), dict(snap[2])]

    def _apply(self, state: list, step: TraceStep) -> None:
        kind, node = step.kind, step.node
        if self.algorithm == "dfs":
            stack, visited, output = state
            if kind == "call":
                stack.append(node)
                visited.append(node)
            elif kind == "finish":
                stack.pop()
                output.append(node)
            elif kind == "reverse":
                stack.clear()
                output.reverse()
        else:
            queue, order, indeg = state
            if kind == "enqueue":
                queue.append(node)
            elif kind == "dequeue":
                queue.popleft()
                order.append(node)
            elif kind == "decrement":
                indeg[node] -= 1

    def _freeze(self, step: TraceStep, state: list) -> TraceEvent:
        if self.algorithm == "dfs":
            stack, visited, output = state
            return TraceEvent(step.kind, step.node, step.message, tuple(stack), tuple(visited), tuple(output))
        queue, order, indeg = state
        return TraceEvent(
            step.kind, step.node, step.message, (), (), tuple(order), tuple(queue), dict(indeg), step.edge
        )


def _roots(nodes: Sequence[str], succ: Successors) -> list[str]:
    has_pred = {s for n in nodes for s in succ.get(n, ())}
    return [n for n in nodes if n not in has_pred]


def find_cycle(nodes: Sequence[str], succ: Successors) -> list[str] | None:
    """Some cycle as a list of nodes (first not repeated), or None (iterative DFS)."""
    color: dict[str, int] = {n: 0 for n in nodes}  # 0 new, 1 on stack, 2 done
    for start in nodes:
        if color[start]:
            continue
        path: list[str] = [start]
        iters = [iter(succ.get(start, ()))]
        color[start] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                iters.pop()
            elif color.get(nxt, 0) == 1:
                return path[path.index(nxt) :]
            elif color.get(nxt, 0) == 0:
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(succ.get(nxt, ())))
    return None


def nodes_on_cycles(nodes: Sequence[str], succ: Successors) -> list[str]:
    """Every node that lies on some cycle (in a strongly connected component of two or
    more nodes, or with an edge to itself), in `nodes` order. Iterative Tarjan."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cyclic: set[str] = set()
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(succ.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1 or node in succ.get(node, ()):
                    cyclic.update(component)
    return [n for n in nodes if n in cyclic]


def _stuck_message(stuck: Sequence[str], on_cycle: Sequence[str], why: str) -> str:
    """Name the nodes on a cycle, and the ones that only wait behind it, separately."""
    after = [n for n in stuck if n not in set(on_cycle)]
    text = f"{why}: {', '.join(on_cycle)} lie on a cycle"
    if after:
        text += f"; {', '.join(after)} {'comes' if len(after) == 1 else 'come'} after the cycle, so {'it was' if len(after) == 1 else 'they were'} never processed either"
    return text + "."


def dfs_trace(nodes: Sequence[str], succ: Successors, *, record: bool = True) -> tuple[list[str], Trace]:
    """Reverse-topological order by DFS (seed 004's ReverseTopo), with its trace.

    Starting from each node with no predecessor (in the given order), visit unvisited
    successors depth-first; a node is appended to the output list once all its successors
    are done; the reversed list is the execution order.
    """
    visited: set[str] = set()
    visited_order: list[str] = []
    output: list[str] = []
    events = Trace("dfs")
    stack: list[str] = []
    on_stack: set[str] = set()

    def emit(kind: str, node: str | None, message: str) -> None:
        if record:
            events.record(kind, node, message)

    for root in _roots(nodes, succ):
        if root in visited:
            continue
        iters = [iter(succ.get(root, ()))]
        stack.append(root)
        on_stack.add(root)
        visited.add(root)
        visited_order.append(root)
        emit("call", root, f"Start at {root}: it has no predecessor. Mark it visited and look at its successors.")
        while stack:
            node = stack[-1]
            nxt = next(iters[-1], None)
            if nxt is None:
                on_stack.discard(stack.pop())
                iters.pop()
                output.append(node)
                emit(
                    "finish",
                    node,
                    f"Every successor of {node} is done, so append {node} to the output list"
                    + (f" and return to {stack[-1]}." if stack else "."),
                )
            elif nxt in on_stack:  # a back edge: nxt is still waiting for this node
                cycle = stack[stack.index(nxt) :]
                emit(
                    "cycle",
                    nxt,
                    f"{nxt} is on the call stack: the path {' -> '.join(cycle + [nxt])} is a cycle, "
                    "so no order exists.",
                )
                raise _with_trace(CycleError(cycle), events)
            elif nxt in visited:
                emit("skip", nxt, f"{nxt} (successor of {node}) is already visited: skip it.")
            else:
                stack.append(nxt)
                on_stack.add(nxt)
                iters.append(iter(succ.get(nxt, ())))
                visited.add(nxt)
                visited_order.append(nxt)
                emit("call", nxt, f"{nxt} (successor of {node}) is not visited: recurse into it and mark it visited.")
    if len(visited) != len(nodes):  # nodes no root reaches: on a cycle, or behind one
        unvisited = [n for n in nodes if n not in visited]
        cycle = find_cycle(unvisited, succ) or unvisited
        on_cycle = [n for n in nodes_on_cycles(nodes, succ) if n in set(unvisited)] or cycle
        emit(
            "cycle",
            cycle[0],
            _stuck_message(unvisited, on_cycle, "No node without predecessors reaches " + ", ".join(unvisited)),
        )
        raise _with_trace(CycleError(cycle), events)
    order = output[::-1]
    emit("reverse", None, "Reverse the output list: that is the execution order.")
    return order, events


def kahn_trace(nodes: Sequence[str], succ: Successors, *, record: bool = True) -> tuple[list[str], Trace]:
    """Kahn's algorithm: repeatedly emit a node whose in-degree is zero."""
    indeg: dict[str, int] = {n: 0 for n in nodes}
    for n in nodes:
        for s in succ.get(n, ()):
            indeg[s] += 1
    queue: deque[str] = deque()
    order: list[str] = []
    events = Trace("kahn", indeg)

    def emit(kind: str, node: str | None, message: str, edge: tuple[str, str] | None = None) -> None:
        if record:
            events.record(kind, node, message, edge)

    emit("indegree", None, "Count each node's predecessors (its in-degree).")
    for n in nodes:
        if indeg[n] == 0:
            queue.append(n)
            emit("enqueue", n, f"{n} has in-degree 0: it can run now, so enqueue it.")
    while queue:
        n = queue.popleft()
        order.append(n)
        emit("dequeue", n, f"Dequeue {n} and append it to the order.")
        for s in succ.get(n, ()):
            indeg[s] -= 1
            emit("decrement", s, f"Remove edge {n} -> {s}: in-degree of {s} drops to {indeg[s]}.", (n, s))
            if indeg[s] == 0:
                queue.append(s)
                emit("enqueue", s, f"{s} now has in-degree 0: enqueue it.")
    if len(order) != len(nodes):
        cycle = find_cycle(nodes, succ) or [n for n in nodes if indeg[n] > 0]
        stuck = [n for n in nodes if indeg[n] > 0]
        on_cycle = nodes_on_cycles(nodes, succ) or cycle
        emit(
            "cycle",
            cycle[0],
            _stuck_message(stuck, on_cycle, f"The queue is empty but {', '.join(stuck)} still wait for predecessors"),
        )
        raise _with_trace(CycleError(cycle), events)
    return order, events


def _with_trace(err: CycleError, events: Trace) -> CycleError:
    err.events = events  # type: ignore[attr-defined]  # the walkthrough shows how it was found
    return err


def dfs_order(nodes: Sequence[str], succ: Successors) -> list[str]:
    return dfs_trace(nodes, succ, record=False)[0]


def kahn_order(nodes: Sequence[str], succ: Successors) -> list[str]:
    return kahn_trace(nodes, succ, record=False)[0]


ALGORITHMS = {"dfs": dfs_trace, "kahn": kahn_trace}


def is_topological(order: Sequence[str], succ: Successors) -> bool:
    """Every edge goes forward in `order`, and `order` has no repeats."""
    pos = {n: i for i, n in enumerate(order)}
    if len(pos) != len(order):
        return False
    return all(pos[n] < pos[s] for n in order for s in succ.get(n, ()))


# Toy graphs for teaching (the app's presets).
SEED_004_EXAMPLE: dict[str, list[str]] = {
    "input": ["op1"],
    "op1": ["op3"],
    "op3": ["op4", "op5"],
    "op4": [],
    "op5": ["output"],
    "output": [],
}
DIAMOND: dict[str, list[str]] = {
    "input": ["left", "right"],
    "left": ["add"],
    "right": ["add"],
    "add": ["output"],
    "output": [],
}
WITH_CYCLE: dict[str, list[str]] = {"input": ["a"], "a": ["b"], "b": ["c"], "c": ["a", "output"], "output": []}
