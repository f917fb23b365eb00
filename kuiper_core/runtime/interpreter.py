"""The reference interpreter: a Program run one operator at a time.

Read it beside KuiperInfer's RuntimeGraph::Forward (seed 004) or torch.fx's Interpreter.
For each operator, in execution order (program.py):

1. gather its inputs: the values its producers stored, by reference (nothing is copied);
2. call its layer's `forward`, which allocates its outputs;
3. check each output against the `#` annotation of its operand (shape_check.py);
4. store the outputs under their operand names, for the operators after it.

No buffer plan, no in-place, no prepared kernels: this is the oracle the fast executors are
tested against (tests/test_executors.py), and what runs when nothing faster applies (see
RuntimeGraph.forward). `run` is a forward; `steps` yields one StepEvent per operator (the
app's stepper shows each), constants folded at build included. As in torch.fx's Interpreter,
how an operator's layer is called can be swapped: steps() passes the layers' prepared
functions (prepared.PreparedSteps.call), the same results sooner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from .. import limits as _limits
from ..layers.registry import Layer
from .calls import call_layer, store
from .events import StepEvent
from .program import Program
from .runtime_operator import RuntimeOperator, Value
from .shape_check import Batch, check_outputs

# note(operator, args, results): called after every operator of a run (prepared.py learns
# from it which operators return views, and every operand's shape).
Note = Callable[[RuntimeOperator, list[Value], list[Value]], None]
# call(program, operator, layer, args) -> results: how a layer is called (call_forward below).
Call = Callable[[Program, RuntimeOperator, Layer, list[Value]], list[Value]]


def call_forward(program: Program, operator: RuntimeOperator, layer: Layer, args: list[Value]) -> list[Value]:
    """The reference call: the layer's forward, which allocates its outputs."""
    return call_layer(operator, layer, args, [None] * len(operator.binding.outputs), program.limits)


def call_reference(program: Program, operator: RuntimeOperator, layer: Layer, args: list[Value]) -> list[Value]:
    """The reference mode's call (`executor="reference"`): the layer's plain definition
    (Layer.reference: a convolution on the blackboard instead of Winograd or im2col), the one
    numerical oracle of every fast kernel and executor."""
    return call_layer(operator, layer, args, [None] * len(operator.binding.outputs), program.limits, reference=True)


def run(
    program: Program, inputs: list[np.ndarray], note: Note | None = None, call: Call = call_forward
) -> dict[str, Value]:
    """One forward over the operators not folded at build; returns the operand values left at
    the end (the graph outputs among them: program.outputs_of). An operand is let go of after
    the last operator that reads it, so a deep model holds only what is still to be read.
    `call`: how each layer is called (call_reference: reference mode)."""
    values: dict[str, Value] = dict(program.run_constants)
    feeds = program.feeds(inputs)
    batch = program.batch(inputs)
    last_use = program.plan.last_use
    for operator in program.run_order:
        args, results = run_operator(program, operator, values, feeds, batch, call)
        if note is not None:
            note(operator, args, results)
        store(operator, results, values)
        for o in operator.binding.reads:
            if last_use.get(o.name, -1) <= operator.step:
                values.pop(o.name, None)
    return values


def steps(
    program: Program, inputs: list[np.ndarray], values: dict[str, Value], call: Call = call_forward
) -> Iterator[StepEvent]:
    """One StepEvent per operator of program.order, after it ran; `values` keeps every operand
    (the caller shows them). A folded operator's step shows the value build computed.
    What it keeps is bounded by max_planned_bytes, the arena's bound (step_arena.py), counted
    by the memory the values own: 14 ReLUs of (1, 2^26) after an `expand` of one number kept
    3.6 GB under the app's limits."""
    feeds = program.feeds(inputs)
    batch = program.batch(inputs)
    kept = _KeptBytes(program)
    for operator in program.order:
        start = time.perf_counter()
        if operator.folded:
            for o in operator.op.outputs:
                values[o.name] = program.constants[o.name]
        else:
            # the caller iterates outside forward()'s context (its limits, its silence on overflow)
            with _limits.use(program.limits), np.errstate(all="ignore"):
                _, results = run_operator(program, operator, values, feeds, batch, call)
            store(operator, results, values)
            kept.add(operator, results)
        yield StepEvent(operator, values, time.perf_counter() - start)


class _KeptBytes:
    """The bytes the arrays a step-by-step run keeps own (a view of another array, or of one
    number broadcast, owns nothing new), checked against max_planned_bytes as they grow."""

    def __init__(self, program: Program) -> None:
        self.budget = _limits.Budget("max_planned_bytes", "the operand values a step-by-step run keeps", program.limits)
        self.seen: set[int] = set()

    def add(self, operator: RuntimeOperator, results: list[Any]) -> None:
        for value in results:
            for array in value if isinstance(value, (list, tuple)) else (value,):
                if not isinstance(array, np.ndarray):
                    continue
                while isinstance(array.base, np.ndarray):
                    array = array.base
                if id(array) not in self.seen:  # the values dict keeps every root alive: ids stay unique
                    self.seen.add(id(array))
                    self.budget.add(array, operator.op.name, operator.op.type)


def run_operator(
    program: Program,
    operator: RuntimeOperator,
    values: Mapping[str, Value],
    feeds: Mapping[str, np.ndarray],
    batch: Batch,
    call: Call = call_forward,
) -> tuple[list[Value], list[Any]]:
    """Steps 1-3 of the module docstring for one operator: its arguments and its checked results."""
    op = operator.op
    layer, _ = operator.layer_for(values)  # made at build, or for this run's computed parameters
    if op.type == "pnnx.Input":  # the caller's array (RuntimeGraph checked it against the declaration)
        return [feeds[op.name]], call(program, operator, layer, [feeds[op.name]])
    args = [values[o.name] for o in operator.binding.inputs]
    results = call(program, operator, layer, args)
    check_outputs(op, operator.binding.outputs, results, batch, program.value_shaped)
    return args, results
