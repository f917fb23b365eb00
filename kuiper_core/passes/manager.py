"""The pass manager, after TVM's `tvm.transform` (seed 003): PassInfo, Pass, PassContext,
Sequential.

    with PassContext(opt_level=2, disabled={"FoldBatchNorm"}, instruments=[PassLog()]):
        graph, changed = Sequential([...])(graph)

- A pass has a `PassInfo` (name, opt level, required passes) and returns `(graph, changed)`.
- A pass runs when it is not disabled and is either required or at most the context's
  opt level (TVM's `PassContext::PassEnabled`). A Sequential runs its passes in order,
  each one's required passes first; `fixed_point=True` repeats it until nothing changes.
- Instruments watch from outside (`should_run`, `run_before_pass`, `run_after_pass`);
  passes only emit structured `Change` records through `record(...)`.
- After every pass that changed the graph, the graph is verified (a pass that reports no
  change is checked to have left every operator and operand in place); an error inside a
  pass or a graph it leaves broken becomes a `PassError` naming the pass and the passes
  that ran before it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..errors import KuiperError, ModelError
from ..graph import Graph
from .records import Change, PassInfo
from .verify import verify_graph

if TYPE_CHECKING:
    from .instruments import PassInstrument


class PassError(KuiperError):
    """A pass raised, or left a graph that fails verification."""

    def __init__(self, pass_name: str, ran_before: Sequence[str], cause: Exception, *, broken_graph: bool) -> None:
        self.pass_name = pass_name
        self.ran_before = list(ran_before)
        self.cause = cause
        self.broken_graph = broken_graph
        self.operator = getattr(cause, "operator", None)
        what = "left an invalid graph" if broken_graph else "failed"
        shown = self.ran_before[-12:]
        before = ", ".join(shown) if shown else "none"
        if len(self.ran_before) > len(shown):
            before = f"{len(self.ran_before)} passes, the last: " + before
        super().__init__(f"pass '{pass_name}' {what}: {cause} (passes run before it: {before})")


class Pass:
    """Base class: subclasses set `info` and implement `transform`."""

    info: PassInfo

    def transform(self, graph: Graph) -> tuple[Graph, bool]:
        raise NotImplementedError

    def __call__(self, graph: Graph) -> tuple[Graph, bool]:
        """Run under the current PassContext (a default one when none is active)."""
        return PassContext.current().run(self, graph)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info.name} O{self.info.opt_level}>"


class FunctionPass(Pass):
    """A pass made from a function `graph -> (graph, changed)`."""

    def __init__(self, fn: Callable[[Graph], tuple[Graph, bool]], info: PassInfo) -> None:
        self.fn = fn
        self.info = info
        self.__doc__ = fn.__doc__

    def transform(self, graph: Graph) -> tuple[Graph, bool]:
        return self.fn(graph)


class Sequential(Pass):
    """Passes in order (TVM's Sequential); with `fixed_point`, repeated until a whole round
    changes nothing (at most `max_rounds` rounds)."""

    def __init__(
        self,
        passes: Sequence[Pass],
        name: str = "Sequential",
        *,
        opt_level: int = 0,
        required: Iterable[str] = (),
        fixed_point: bool = False,
        max_rounds: int = 8,
        known: Mapping[str, Pass] | None = None,
    ) -> None:
        """`known`: the passes a pass may name as required, by name (default: these)."""
        self.passes = list(passes)
        self.known = dict(known) if known is not None else {p.info.name: p for p in self.passes}
        self.info = PassInfo(name, opt_level, tuple(required))
        self.fixed_point = fixed_point
        self.max_rounds = max_rounds

    def _required(self, name: str) -> Pass:
        if name not in self.known:
            raise KuiperError(f"unknown pass {name!r}: expected one of {', '.join(sorted(self.known))}")
        return self.known[name]

    def transform(self, graph: Graph) -> tuple[Graph, bool]:
        ctx = PassContext.current()
        changed_any = False
        clean: set[str] = set()  # passes that ran, with no change by any pass since

        def run(p: Pass) -> bool:
            nonlocal graph
            graph, ch = ctx.run(p, graph)
            if ch:
                clean.clear()
            clean.add(p.info.name)
            return ch

        for _ in range(self.max_rounds if self.fixed_point else 1):
            changed = False
            for p in self.passes:
                if not ctx.pass_enabled(p.info):
                    continue
                for name in p.info.required:
                    if name not in clean:  # a required pass with nothing new to do is skipped
                        changed |= run(self._required(name))
                changed |= run(p)
            changed_any |= changed
            if not changed:
                break
        return graph, changed_any


def graph_pass(
    name: str, opt_level: int, required: Iterable[str] = (), description: str = ""
) -> Callable[[Callable[[Graph], tuple[Graph, bool]]], FunctionPass]:
    """Decorator: a FunctionPass from `def f(graph) -> (graph, changed)` (pipeline.py lists
    every pass by name)."""

    def deco(fn: Callable[[Graph], tuple[Graph, bool]]) -> FunctionPass:
        doc = description or (fn.__doc__ or "").strip().split("\n")[0]
        return FunctionPass(fn, PassInfo(name, opt_level, tuple(required), doc))

    return deco


def record(action: str, operator: str, detail: str = "") -> None:
    """Called by passes: note one rewrite for the instruments of the active context."""
    ctx = PassContext.current()
    if ctx._changes is not None:
        ctx._changes.append(Change(action, operator, detail))


def _structure(graph: Graph) -> tuple:
    """Which operators, in which order, read and write which operands (by identity): what a
    pass that reports no change must leave as it was."""
    return tuple((id(op), op.type, tuple(map(id, op.inputs)), tuple(map(id, op.outputs))) for op in graph.operators)


# -- the context -------------------------------------------------------------------------------
class PassContext:
    """Opt level, required and disabled passes, instruments, and whether to verify.

    Used as a context manager; `PassContext.current()` is the innermost active one.
    `config` carries options for individual passes (e.g. `{"cse.fskip": fn}`).
    """

    # Active contexts per thread: the app optimises for several sessions at once.
    _local = threading.local()

    @classmethod
    def _active(cls) -> list[PassContext]:
        stack = getattr(cls._local, "stack", None)
        if stack is None:
            stack = cls._local.stack = []
        return stack

    def __init__(
        self,
        opt_level: int = 2,
        *,
        required: Iterable[str] = (),
        disabled: Iterable[str] = (),
        instruments: Sequence[PassInstrument] = (),
        verify: bool = True,
        config: dict | None = None,
        known: Iterable[str] | None = None,
    ) -> None:
        """`known`: the pass names `required` and `disabled` must come from (pipeline.optimize
        passes every pass's: pipeline.PASSES); None: any name."""
        self.opt_level = opt_level
        self.required = set(required)
        self.disabled = set(disabled)
        if known is not None:
            names = set(known)
            for name in sorted(self.required | self.disabled):
                if name not in names:
                    raise KuiperError(f"unknown pass {name!r}: expected one of {', '.join(sorted(names))}")
        self.instruments = list(instruments)
        self.verify = verify
        self.config = dict(config or {})
        self.history: list[str] = []  # names of the passes run so far, in order
        self._changes: list[Change] | None = None

    def __enter__(self) -> PassContext:
        PassContext._active().append(self)
        for inst in self.instruments:
            inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for inst in self.instruments:
                inst.exit_pass_ctx()
        finally:
            PassContext._active().remove(self)

    @classmethod
    def current(cls) -> PassContext:
        stack = cls._active()
        return stack[-1] if stack else PassContext()

    def pass_enabled(self, info: PassInfo) -> bool:
        """TVM's rule: not disabled, and required or within the opt level."""
        if info.name in self.disabled:
            return False
        return info.name in self.required or info.opt_level <= self.opt_level

    def run(self, p: Pass, graph: Graph) -> tuple[Graph, bool]:
        """Run one pass with the instruments around it (a Sequential runs its own passes
        through here, so instruments see every pass, not the container)."""
        if isinstance(p, Sequential):
            if PassContext.current() is not self:
                with self:
                    return p.transform(graph)
            return p.transform(graph)
        if not all(inst.should_run(graph, p.info) for inst in self.instruments):
            return graph, False
        for inst in self.instruments:
            inst.run_before_pass(graph, p.info)
        shape_before = _structure(graph) if self.verify else None
        outer, self._changes = self._changes, []
        entered = PassContext.current() is not self
        if entered:
            PassContext._active().append(self)
        try:
            try:
                graph, changed = p.transform(graph)
            except Exception as e:  # a pass bug or a graph it cannot handle: name the pass
                raise PassError(p.info.name, self.history, e, broken_graph=False) from e
            changes = self._changes
        finally:
            self._changes = outer
            if entered:
                PassContext._active().pop()
        for inst in self.instruments:
            inst.run_after_pass(graph, p.info, changed, changes)
        # After the instruments (a pass's time excludes the check); a pass that changed nothing
        # gets the cheap structure check only (verifying a 20,000-operator graph after each of
        # ~26 runs was half of -O2's 29 s)
        if self.verify:
            try:
                if changed:
                    verify_graph(graph)
                elif _structure(graph) != shape_before:  # the full check costs most of a run on big graphs
                    raise ModelError("it reported no change, but its operators or their operands changed")
            except ModelError as e:
                raise PassError(p.info.name, self.history, e, broken_graph=True) from e
        self.history.append(p.info.name)
        return graph, changed
