"""What steps() hands out: one StepEvent per operator, in a StepRun that holds the run's values."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..graph import Operator
from .runtime_operator import RuntimeOperator


class StepEvent:
    """What one operator did during `steps()`: the operator, its wall time, and its input and
    output arrays. Those are read from the run's values when asked (building two dicts per
    step would cost more than a small operator); every operand is written once per run, so
    they are the arrays the operator read and wrote."""

    __slots__ = ("runtime_operator", "values", "seconds")

    def __init__(self, runtime_operator: RuntimeOperator, values: Mapping[str, Any], seconds: float) -> None:
        self.runtime_operator = runtime_operator
        self.values = values  # the run's operand values (StepRun.values)
        self.seconds = seconds

    @property
    def index(self) -> int:
        return self.runtime_operator.index

    @property
    def name(self) -> str:
        return self.runtime_operator.op.name

    @property
    def type(self) -> str:
        return self.runtime_operator.op.type

    @property
    def operator(self) -> Operator:
        return self.runtime_operator.op

    @property
    def key(self) -> str:
        """The operator's unique key (RuntimeGraph.operators)."""
        return self.runtime_operator.key

    @property
    def folded(self) -> bool:
        """Computed at build from constants (its value is shown, not recomputed)."""
        return self.runtime_operator.folded

    @property
    def inputs(self) -> dict[str, Any]:
        """PNNX operand name -> array (a tuple for prim::TupleConstruct); none for pnnx.Input."""
        op = self.runtime_operator.op
        return {} if op.type == "pnnx.Input" else {o.name: self.values[o.name] for o in op.inputs}

    @property
    def outputs(self) -> dict[str, Any]:
        return {o.name: self.values[o.name] for o in self.runtime_operator.op.outputs}

    def __repr__(self) -> str:
        return f"StepEvent({self.index}, {self.name!r}, {self.type!r}, {self.seconds * 1e3:.3f} ms)"


class StepRun(Iterator[StepEvent]):
    """The iterator returned by steps(), with this run's operand values."""

    def __init__(self, events: Iterator[StepEvent], values: Mapping[str, Any]) -> None:
        self._events = events
        self.values = values

    def __iter__(self) -> Iterator[StepEvent]:
        return self._events  # a for loop runs the generator itself, without __next__ below

    def __next__(self) -> StepEvent:
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()
