"""A Forward stepper that survives app reruns: step, back, run to an operator, run all, reset.

`RuntimeGraph.steps()` is a generator; the app keeps one `ForwardStepper` per user in
`st.session_state`. It records every finished `StepEvent` and the operand values, so Back
only moves the view cursor. If its generator is lost or broken (an interrupted rerun closes
it), the next step re-creates it and fast-forwards to where it was. A layer error stops the
stepper with the engine's message in `error` instead of raising into the page.
"""

from __future__ import annotations

import time
from typing import Any
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import KuiperError
from ..runtime import RuntimeGraph, StepEvent


class ForwardStepper:
    def __init__(self, runtime: RuntimeGraph, inputs: Sequence[np.ndarray]) -> None:
        self.runtime = runtime
        self.inputs = [np.asarray(a) for a in inputs]
        self.events: list[StepEvent] = []  # finished steps, in execution order
        self.values: Mapping[str, Any] = {}  # every operand computed so far (steps()' values)
        self.cursor = -1  # index into events of the step on view (-1: nothing run yet)
        self.error: str | None = None
        self.failure: KuiperError | None = None  # the exception behind `error`
        self._gen: Iterator[StepEvent] | None = None

    # -- queries --------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return len(self.runtime.order)

    @property
    def done(self) -> bool:
        return len(self.events) >= self.total or self.error is not None

    @property
    def current(self) -> StepEvent | None:
        return self.events[self.cursor] if self.cursor >= 0 else None

    @property
    def next_name(self) -> str | None:
        """The operator the next Step would run (or show, after Back)."""
        i = self.cursor + 1
        return self.runtime.order[i].name if i < self.total else None

    # -- moving ------------------------------------------------------------------------------------
    def step(self) -> StepEvent | None:
        """Show the next step, computing it if it has not run yet; None at the end."""
        if self.cursor + 1 < len(self.events):
            self.cursor += 1
            return self.current
        event = self._advance()
        if event is not None:
            self.cursor = len(self.events) - 1
        return event

    def back(self) -> None:
        self.cursor = max(-1, self.cursor - 1)

    def run_to(self, name: str, progress: Callable[[int, int], None] | None = None) -> StepEvent | None:
        """Run (or move the view) until operator `name` has run; it becomes the current step.

        `name` is an operator key (RuntimeGraph.operators: unique, `detect#2` for the second
        of a name pnnx repeats at optlevel 0), or a name (its first operator)."""
        keys = [r.key for r in self.runtime.order]
        names = [r.name for r in self.runtime.order]
        if name not in keys and name not in names:
            raise KeyError(f"no operator named {name!r}")
        target = keys.index(name) if name in keys else names.index(name)
        while len(self.events) <= target and self._advance(progress) is not None:
            pass
        if len(self.events) > target:
            self.cursor = target
        else:
            self.cursor = len(self.events) - 1
        return self.current

    def run_all(self, progress: Callable[[int, int], None] | None = None) -> None:
        while self._advance(progress) is not None:
            pass
        self.cursor = len(self.events) - 1

    def run_ahead(self, seconds: float) -> None:
        """Run the operators after the last one run, the view staying where it is, until the
        end or until `seconds` have passed (the app precomputes the next steps' frames)."""
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline and self._advance() is not None:
            pass

    def reset(self) -> None:
        self.events, self.values, self.cursor, self.error, self.failure, self._gen = [], {}, -1, None, None, None

    def go_to(self, position: int, progress: Callable[[int, int], None] | None = None) -> StepEvent | None:
        """Show operator number `position` (1-based; 0 = before the first), running up to it."""
        position = max(0, min(self.total, position))
        if position == 0:
            self.cursor = -1
            return None
        return self.run_to(self.runtime.order[position - 1].name, progress)

    @property
    def failed_operator(self) -> str | None:
        """The operator the engine stopped at (a ModelError names it), or None."""
        return getattr(self.failure, "operator", None)

    # -- results ---------------------------------------------------------------------------------
    def outputs(self) -> list[np.ndarray] | None:
        """The graph outputs once every operator has run."""
        if len(self.events) < self.total:
            return None
        return self.runtime.outputs_of(self.values)

    # -- internals ---------------------------------------------------------------------------------
    def _advance(self, progress: Callable[[int, int], None] | None = None) -> StepEvent | None:
        if self.done:
            return None
        try:
            event = self._next_event()
        except KuiperError as e:
            self.error, self.failure = str(e), e
            self._gen = None
            return None
        self.events.append(event)
        if progress is not None:
            progress(len(self.events), self.total)
        return event

    def _next_event(self) -> StepEvent:
        for attempt in range(2):
            if self._gen is None:
                self._restart()
            assert self._gen is not None
            try:
                return next(self._gen)
            except (StopIteration, ValueError):
                # A generator closed by an interrupted rerun ends early (StopIteration) or
                # is still marked running (ValueError): start again and fast-forward.
                self._gen = None
                if attempt:
                    raise KuiperError("the stepper could not resume Forward") from None
        raise AssertionError("unreachable")

    def _restart(self) -> None:
        """A fresh generator, fast-forwarded past the steps already recorded."""
        gen = self.runtime.steps(*self.inputs)
        self.values = gen.values  # this run's own dict (another session may step the same graph)
        replayed = [next(gen) for _ in range(len(self.events))]
        self.events = replayed  # same operators; the arrays now live in self.values
        self._gen = gen

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_gen"] = None  # generators cannot be pickled; _restart rebuilds it
        return state
