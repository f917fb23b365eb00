"""The state of an ordering algorithm at each step, rebuilt from its events.

`OrderTrace` is an observer for `runtime.order.execution_order`: it keeps the events, and
`trace[i]` is the `OrderState` after event i (call stack, visited set, output list; or queue,
order so far, in-degrees, removed edges). The state is replayed from the nearest
checkpoint instead of copied at every step: copying made memory grow with the square of the
graph (12,000 operators took over 3 GB). The replay knows only what each event changes, so
the narration (walkthrough.py) and the quizzes (order_quiz.py) read one source of truth.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import overload
from collections.abc import Iterator, Mapping, Sequence

from ..runtime.order import OrderEvent


@dataclass(frozen=True)
class OrderState:
    """The algorithm's state after one event (`event`), as plain tuples.

    DFS: `stack` (the call stack, bottom first), `visited` (in visiting order), `output`
    (finishing order; after 'reverse' the execution order). Kahn: `queue` (front first),
    `output` (the order so far), `indegree` (remaining in-degrees), `removed` (edges
    removed so far, in removal order)."""

    index: int  # position of `event` in the trace
    event: OrderEvent
    stack: tuple[str, ...] = ()
    visited: tuple[str, ...] = ()
    output: tuple[str, ...] = ()
    queue: tuple[str, ...] = ()
    indegree: Mapping[str, int] = field(default_factory=dict)
    removed: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def node(self) -> str | None:
        return self.event.node


class _Working:
    """The mutable state the replay updates (one object; `freeze` makes an OrderState)."""

    __slots__ = ("stack", "visited", "output", "queue", "indegree", "removed")

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.visited: list[str] = []
        self.output: list[str] = []
        self.queue: deque[str] = deque()
        self.indegree: dict[str, int] = {}
        self.removed: list[tuple[str, str]] = []

    def apply(self, e: OrderEvent) -> None:
        kind, node = e.kind, e.node
        if kind == "reverse":
            self.output.reverse()
        elif kind == "indegree":
            self.indegree = dict(e.indegree or {})
        elif kind in ("skip", "cycle", "start"):
            pass  # nothing changes: a skipped successor, the end
        else:
            assert node is not None, f"a {kind!r} event names its node"
            if kind == "visit":
                self.stack.append(node)
                self.visited.append(node)
            elif kind == "finish":
                self.stack.pop()
                self.output.append(node)
            elif kind == "enqueue":
                self.queue.append(node)
            elif kind == "dequeue":
                self.queue.popleft()
                self.output.append(node)
            elif kind == "decrement":
                assert e.degree is not None and e.edge is not None
                self.indegree[node] = e.degree
                self.removed.append(e.edge)

    def snapshot(self) -> tuple:
        return (
            tuple(self.stack),
            tuple(self.visited),
            tuple(self.output),
            tuple(self.queue),
            dict(self.indegree),
            tuple(self.removed),
        )

    @classmethod
    def thaw(cls, snap: tuple) -> _Working:
        w = cls()
        w.stack, w.visited, w.output = list(snap[0]), list(snap[1]), list(snap[2])
        w.queue, w.indegree, w.removed = deque(snap[3]), dict(snap[4]), list(snap[5])
        return w

    def freeze(self, index: int, event: OrderEvent) -> OrderState:
        return OrderState(index, event, *self.snapshot())


class OrderTrace(Sequence[OrderState]):
    """The events of one ordering run (`events`); `trace[i]` is the state after event i.

    Use as the observer: `execution_order(nodes, succ, "kahn", observe=trace)`. At most
    ~32 checkpoints are kept (filled in as steps are asked for), so memory stays linear in
    the number of events and one state costs at most len/32 replayed events."""

    MAX_CHECKPOINTS = 32

    def __init__(self) -> None:
        self.events: list[OrderEvent] = []
        self._checkpoints: dict[int, tuple] = {}

    def __call__(self, event: OrderEvent) -> None:
        self.events.append(event)

    def __len__(self) -> int:
        return len(self.events)

    @overload
    def __getitem__(self, i: int) -> OrderState: ...
    @overload
    def __getitem__(self, i: slice) -> list[OrderState]: ...
    def __getitem__(self, i: int | slice) -> OrderState | list[OrderState]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("trace index out of range")
        return self._state(i)

    def __iter__(self) -> Iterator[OrderState]:
        work = _Working()
        for i, e in enumerate(self.events):
            work.apply(e)
            yield work.freeze(i, e)

    def _every(self) -> int:
        return max(256, math.ceil(len(self.events) / self.MAX_CHECKPOINTS))

    def _state(self, i: int) -> OrderState:
        every = self._every()
        start = max((c for c in self._checkpoints if c <= i), default=-1)
        work = _Working.thaw(self._checkpoints[start]) if start >= 0 else _Working()
        for j in range(start + 1, i + 1):
            work.apply(self.events[j])
            if (j + 1) % every == 0 and j not in self._checkpoints:
                self._checkpoints[j] = work.snapshot()
        return work.freeze(i, self.events[i])

    def first(self, kind: str, node: str | None = None, start: int = 0) -> int | None:
        """Index of the first event of `kind` (about `node`, when given) at or after `start`."""
        for i in range(start, len(self.events)):
            e = self.events[i]
            if e.kind == kind and (node is None or e.node == node):
                return i
        return None


START = -1  # the position before the first event


def state_at(trace: OrderTrace, i: int) -> OrderState:
    """The state after event i; i == START is the empty state before any event (kind 'start')."""
    return trace[i] if i != START else OrderState(START, OrderEvent("start"))
