"""Pass instruments: observers the PassContext calls around every pass (TVM's
`tvm.ir.instrument`). Passes know nothing of them.

    log = PassLog(); snaps = IRSnapshots()
    with PassContext(opt_level=2, instruments=[log, snaps]):
        graph, _ = pipeline(graph)
    for row in log.rows: print(row.name, row.seconds, row.ops_before, row.ops_after, row.changes)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TextIO
from collections.abc import Callable, Iterable

from ..graph import Graph
from .records import Change, PassInfo
from .text import graph_text


class PassInstrument:
    """Base class: every hook does nothing (and `should_run` says yes)."""

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def should_run(self, graph: Graph, info: PassInfo) -> bool:
        return True

    def run_before_pass(self, graph: Graph, info: PassInfo) -> None:
        pass

    def run_after_pass(self, graph: Graph, info: PassInfo, changed: bool, changes: list[Change]) -> None:
        pass


@dataclass
class PassRecord:
    """One pass as it ran: time, operator counts around it, what it changed."""

    name: str
    opt_level: int
    seconds: float
    ops_before: int
    ops_after: int
    changed: bool
    changes: list[Change] = field(default_factory=list)

    @property
    def summary(self) -> str:
        if not self.changed:
            return "no change"
        counts: dict[str, int] = {}
        for c in self.changes:
            counts[c.action] = counts.get(c.action, 0) + 1
        return ", ".join(f"{n} {a}" for a, n in counts.items()) or "changed"


class PassLog(PassInstrument):
    """Time per pass, operators before and after, and the changes it recorded."""

    def __init__(self) -> None:
        self.rows: list[PassRecord] = []
        self._start = 0.0
        self._ops = 0

    def run_before_pass(self, graph: Graph, info: PassInfo) -> None:
        self._ops = len(graph.operators)
        self._start = time.perf_counter()

    def run_after_pass(self, graph: Graph, info: PassInfo, changed: bool, changes: list[Change]) -> None:
        seconds = time.perf_counter() - self._start
        self.rows.append(
            PassRecord(info.name, info.opt_level, seconds, self._ops, len(graph.operators), changed, list(changes))
        )

    @property
    def total_seconds(self) -> float:
        return sum(r.seconds for r in self.rows)

    def text(self, *, changes_per_pass: int | None = 5, only_changed: bool = False) -> str:
        """The log as a table, one line per pass, the changes it made indented below."""
        lines = [f"{'pass':<24} {'level':>5} {'time':>9}  {'operators':>13}  what changed"]
        for r in self.rows:
            if only_changed and not r.changed:
                continue
            ops = f"{r.ops_before} → {r.ops_after}"
            lines.append(f"{r.name:<24} {'O' + str(r.opt_level):>5} {r.seconds * 1000:7.2f}ms  {ops:>13}  {r.summary}")
            shown = r.changes if changes_per_pass is None else r.changes[:changes_per_pass]
            lines += [f"    {c}" for c in shown]
            if len(shown) < len(r.changes):
                lines.append(f"    … {len(r.changes) - len(shown)} more")
        return "\n".join(lines) + "\n"


@dataclass
class Snapshot:
    name: str  # the pass
    before: str
    after: str


class IRSnapshots(PassInstrument):
    """The graph's text before and after each pass that changed something (only the
    passes in `names`, when given). The text is printed once per change: a pass that
    changes nothing leaves the last text valid for the next one."""

    def __init__(self, names: Iterable[str] | None = None, text: Callable[[Graph], str] = graph_text) -> None:
        self.names = set(names) if names is not None else None
        self.text = text
        self.snapshots: list[Snapshot] = []
        self._current: str | None = None  # the graph's text now, when known

    def _wanted(self, info: PassInfo) -> bool:
        return self.names is None or info.name in self.names

    def run_before_pass(self, graph: Graph, info: PassInfo) -> None:
        if self._wanted(info) and self._current is None:
            self._current = self.text(graph)

    def run_after_pass(self, graph: Graph, info: PassInfo, changed: bool, changes: list[Change]) -> None:
        if not changed:
            return
        if not self._wanted(info):
            self._current = None  # stale: printed again before the next wanted pass
            return
        after = self.text(graph)
        self.snapshots.append(Snapshot(info.name, self._current or "", after))
        self._current = after


class PrintAfter(PassInstrument):
    """Write the graph's text after each run of a pass named in `names` that changed it
    (`kuiper opt --print-after`); a named pass that never changed it is said so at the end."""

    def __init__(self, names: Iterable[str], stream: TextIO, text: Callable[[Graph], str] = graph_text) -> None:
        self.names = set(names)
        self.stream = stream
        self.text = text
        self.printed: set[str] = set()

    def run_after_pass(self, graph: Graph, info: PassInfo, changed: bool, changes: list[Change]) -> None:
        if info.name in self.names and changed:
            self.stream.write(f"// ----- after {info.name} -----\n")
            self.stream.write(self.text(graph))
            self.printed.add(info.name)

    def exit_pass_ctx(self) -> None:
        for name in sorted(self.names - self.printed):
            self.stream.write(f"// ----- {name} changed nothing (or did not run) -----\n")


class ShouldRun(PassInstrument):
    """A should-run hook from a predicate `(graph, info) -> bool` (TVM's `should_run`)."""

    def __init__(self, predicate: Callable[[Graph, PassInfo], bool]) -> None:
        self.predicate = predicate
        self.skipped: list[str] = []

    def should_run(self, graph: Graph, info: PassInfo) -> bool:
        ok = self.predicate(graph, info)
        if not ok:
            self.skipped.append(info.name)
        return ok
