"""Forward for graphs the prepared forward cannot take, after their checked run.

The prepared forward (prepared.py) needs every operator to return arrays of fixed shapes
from fixed parameters. Where one does not (parameters computed at run time from
`Tensor.size` arithmetic, outputs packed into a tuple, a value that is not an array), later
runs at input shapes already checked by the interpreter (interpreter.py) run this: the
interpreter's loop without its shape checks (except for a layer just made for new computed
parameters), and, where the inputs have their declared shapes, writing into buffers of the
Program's declared-shape plan (memory.py), shared by liveness.

Which operators return views of their inputs (and so must keep the buffer they view alive)
is decided from the checked run (`views_of`), as the prepared forward decides from its
record run. A layer that returns a view the checked run did not see breaks the layer
contract (registry.py): the run stops, says so (None), and the caller runs the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .calls import call_layer, returns_views, store
from .program import Program, declared_plan
from .runtime_operator import RuntimeOperator, Value
from .shape_check import check_outputs


class ViewNotes:
    """Notes, during a checked run (interpreter.run's `note`), the operators that returned a
    view of an input."""

    def __init__(self) -> None:
        self.views: set[str] = set()

    def note(self, operator: RuntimeOperator, args: list[Value], results: list[Value]) -> None:
        if returns_views(args, results):
            self.views.add(operator.key)


class PlannedForward:
    """See the module docstring. `views`: the operators the checked run saw return views, or
    None for inputs of other than the declared shapes (then nothing is planned)."""

    def __init__(self, program: Program, views: set[str] | None) -> None:
        self.program = program
        self.view_ops = program.view_ops | (views or set())
        if views is None:
            self.buffer: Callable[[str], np.ndarray | None] = lambda name: None
        else:
            plan = program.plan
            if not self.view_ops <= program.view_ops:
                plan = declared_plan(program.run_order, self.view_ops, program.output_operands)
            self.buffer = plan.allocated(program.limits).buffer
        self.planned = views is not None

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """The outputs, or None where a layer returned a view nobody declared (module docstring)."""
        program = self.program
        values: dict[str, Value] = dict(program.run_constants)
        last_use = program.plan.last_use
        feeds = program.feeds(inputs)
        batch = program.batch(inputs)
        for operator in program.run_order:
            op, binding = operator.op, operator.binding
            layer, made = operator.layer_for(values)
            args = [feeds[op.name]] if op.type == "pnnx.Input" else [values[o.name] for o in binding.inputs]
            out = [None if binding.packed else self.buffer(o.name) for o in binding.outputs]
            results = call_layer(operator, layer, args, out, program.limits)
            if made and op.type != "pnnx.Input":  # new computed parameters: not checked yet
                check_outputs(op, binding.outputs, results, batch, program.value_shaped)
            if self.planned and operator.key not in self.view_ops and returns_views(args, results):
                return None
            store(operator, results, values)
            for o in binding.reads:  # what no later operator reads (planned buffers stay in the plan)
                if last_use.get(o.name, -1) <= operator.step:
                    values.pop(o.name, None)
        return program.outputs_of(values)
