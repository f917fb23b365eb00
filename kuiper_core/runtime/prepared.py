"""Forward as a flat list of prepared calls: the runtime's fast path.

Built once per set of input shapes (`PreparedForward.build`), from two runs:

1. The record run: the reference interpreter's checked run (interpreter.py: fresh outputs,
   each checked against its annotation), and what every operator returns is noted: each operand's shape and dtype, and which operators return views of their
   inputs (shape ops) or a constant of their own (pnnx.Attribute).
2. The plan: buffers for every operand, shared by liveness (memory.plan_buffers with the
   recorded shapes), and in place where an elementwise operator's input dies at it (its
   layer lists the input in `overwritable_inputs()`): ReLU and a residual add then write
   over the convolution output they read, in cache, with no buffer of their own.
3. The binding run: every operator runs once more, for real, on those buffers. Each
   non-view operator becomes one call bound to its arrays: the function `layer.prepare`
   returns when the layer offers one (its kernel made for these shapes), else its forward,
   with the argument lists fixed. A view of a buffer stays valid as long as the buffer does, so
   view operators drop out of the list entirely. A ReLU that runs in place on the output of
   a layer it alone reads joins that layer's call (`Layer.prepare_with_relu`: convolutions
   apply it while their output is in cache) and has no call of its own.

`run` makes the calls in order (pnnx.Input's copies the caller's array into its buffer)
and returns copies of the outputs (their buffers are reused by the next run). One run at a time
per PreparedForward (its owner, RuntimeGraph, holds a lock). Made from a Program (program.py)
and the inputs; it keeps its own buffers and kernels. Graphs whose operators return anything but
arrays and tuples of arrays (size arithmetic on dynamic shapes) are not prepared.

The memory plan and the in-place choices are this executor's: the graph is never rewritten,
and steps() still runs every operator on its own (step_arena.py), so the stepper shows every
operand.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import numpy as np

from ..graph import Operator
from ..layers.halves import Splittable, SplitRequest
from ..layers.registry import Layer
from ..ufunc_buffers import set_engine_bufsize
from . import interpreter
from .calls import arrays_of, call_layer, is_view, raise_for_operator
from .memory import BufferPlan, ShapeDtype, plan_buffers
from .program import Program
from .runtime_operator import RuntimeOperator


class NotPreparable(Exception):
    """The graph cannot run as fixed calls on fixed buffers (e.g. a value that is not an array)."""


@dataclass(frozen=True)
class Record:
    shapes: dict[str, ShapeDtype]  # operand -> shape and dtype of the array it held
    views: frozenset[str]  # operators whose outputs are views of their inputs or constants
    outputs: list[np.ndarray]  # the checked run's outputs


def record(program: Program, inputs: list[np.ndarray]) -> Record:
    """The checked first run (the interpreter's), noting what every operator returns."""
    for operator in program.run_order:
        if operator.computed:
            raise NotPreparable(f"operator '{operator.name}' takes parameters computed at run time")
        if operator.binding.packed:
            raise NotPreparable(f"operator '{operator.name}' packs its outputs into one operand")
    shapes: dict[str, ShapeDtype] = {}
    views: set[str] = set()

    def note(operator: RuntimeOperator, args: list[Any], results: list[Any]) -> None:
        arg_arrays = [a for v in args for a in (arrays_of(v) or [])]
        shared = []
        for o, r in zip(operator.binding.outputs, results):
            arrays = arrays_of(r)
            if arrays is None:
                raise NotPreparable(f"operator '{operator.name}' returned a {type(r).__name__}")
            if isinstance(r, np.ndarray):
                shapes[o.name] = (r.shape, r.dtype)
            shared += [is_view(a, arg_arrays) for a in arrays]
        layer = operator.layer
        constant = layer is not None and layer.returns_views and not args  # pnnx.Attribute
        if operator.type == "pnnx.Input":
            pass  # gets a buffer: its call copies the caller's array into it
        elif constant or (shared and all(shared)):
            views.add(operator.key)
        elif any(shared) or any(not isinstance(r, np.ndarray) for r in results):
            raise NotPreparable(f"operator '{operator.name}' returns views and new arrays together")

    values = interpreter.run(program, inputs, note)
    return Record(shapes, frozenset(views), program.outputs_of(values))


class PreparedForward:
    """See the module docstring."""

    def __init__(self, plan: BufferPlan, rec: Record, n_inputs: int) -> None:
        self.calls: list[Callable[[], Any]] = []
        self.names: list[str] = []  # operator of each call, for error messages
        self.types: list[str] = []
        self.feeds: list[Any] = [None] * n_inputs  # the caller's arrays during run()
        self.output_values: list[Any] = []  # graph outputs: buffers (or tuples of them)
        self.first_outputs: list[np.ndarray] = []  # the binding run's results
        self.plan = plan
        self.record = rec  # what the record run saw (steps' arenas reuse it)
        # operand -> (call index, layer, args, outs) of the bound call that writes it
        self.writers: dict[str, tuple[int, Layer, list[Any], list[np.ndarray]]] = {}
        self.fused: set[str] = set()  # operands a fused ReLU reads (never whole on their own)
        self.split: SplitRequest | None = None  # where splittable layers' halves go

    @classmethod
    def build(
        cls,
        program: Program,
        inputs: list[np.ndarray],
        rec: Record | None = None,
        make: Callable[[int], np.ndarray] | None = None,
        split: SplitRequest | None = None,
    ) -> PreparedForward:
        """Record, plan, bind (see the module docstring); `first_outputs` is this forward's result.
        `rec`: another prepared forward's record run on these inputs (not checked again).
        `make`: makes the buffers' byte arrays (BufferPlan.allocate).
        `split`: handed to every splittable layer's prepare (split_forward.py)."""
        rec = rec or record(program, inputs)
        ops = [
            Operator(r.type, r.key, inputs=r.binding.reads, outputs=list(r.binding.outputs)) for r in program.run_order
        ]
        outputs = set(program.output_operands)
        inplace = {
            r.key: r.layer.overwritable_inputs()
            for r in program.run_order
            if r.layer is not None and r.key not in rec.views and r.layer.overwritable_inputs()
        }
        plan = plan_buffers(ops, set(rec.views), outputs, shapes=rec.shapes, inplace=inplace, keep_outputs=True)
        plan.allocate(program.limits, make)
        self = cls(plan, replace(rec, outputs=[]), len(program.inputs))  # holds no record-run array
        self.split = split
        values: dict[str, Any] = dict(program.run_constants)  # constants folded at build
        feeds = program.feeds(inputs)
        input_index = {op.name: k for k, op in enumerate(program.inputs)}
        readers = Counter(o.name for op in ops for o in op.inputs)
        for operator in program.run_order:
            op = operator.op
            if op.type == "pnnx.Input":
                # Copied in at its place in the order: its buffer may be another input's
                # before that (buffers are shared by liveness).
                buf = plan.buffer(op.outputs[0].name)
                if buf is None:
                    raise NotPreparable(f"no buffer for input '{op.name}'")
                np.copyto(buf, feeds[op.name])
                self.calls.append(partial(feed, self.feeds, input_index[op.name], buf))
                self.names.append(op.name)
                self.types.append(op.type)
                values[op.outputs[0].name] = buf
            elif not self._fuse_relu(operator, plan, readers, outputs, values):
                args = [values[o.name] for o in operator.binding.inputs]
                self._bind(program, operator, args, plan.buffer, rec, values)
        self.output_values = [values[name] for name in program.output_operands]
        self.first_outputs = self._outputs()
        return self

    def _bind(
        self,
        program: Program,
        operator: RuntimeOperator,
        args: list[Any],
        buffer: Callable[[str], np.ndarray | None],
        rec: Record,
        values: dict[str, Any],
    ) -> None:
        outs = [buffer(o.name) for o in operator.binding.outputs]
        call = bind_operator(program, operator, args, outs, operator.key in rec.views, values, self.split)
        if call is None:
            return
        if len(outs) == 1 and operator.layer is not None and outs[0] is not None:
            self.writers[operator.binding.outputs[0].name] = (len(self.calls), operator.layer, args, [outs[0]])
        self.calls.append(call)
        self.names.append(operator.name)
        self.types.append(operator.type)

    def _fuse_relu(
        self,
        operator: RuntimeOperator,
        plan: BufferPlan,
        readers: Counter,
        outputs: set[str],
        values: dict[str, Any],
    ) -> bool:
        """Fold a ReLU into the call that writes its input (module docstring); False: bind it."""
        binding, relu = operator.binding, operator.layer
        if relu is None or not relu.fuses_into_writer or len(binding.inputs) != 1 or len(binding.outputs) != 1:
            return False
        src, dst = binding.inputs[0].name, binding.outputs[0].name
        writer = self.writers.get(src)
        buf = plan.buffer(dst)
        # Only reader (no one sees the values before the ReLU) and in place (same array).
        if writer is None or readers[src] != 1 or src in outputs or buf is None or not _same_array(buf, writer[3][0]):
            return False
        k, layer, args, outs = writer
        f = layer.prepare_with_relu(args, outs, self.split if layer.splittable else None)
        if f is None:
            return False
        self.calls[k] = partial(f, args, outs)
        # The binding run: the ReLU on the writer's output (running the fused call again would
        # apply an in-place writer twice: a residual add over its own input).
        relu.forward([buf], [buf])
        self.fused.add(src)
        values[dst] = buf
        return True

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        self.run_calls(inputs)
        return self._outputs()

    def run_calls(self, inputs: Sequence[np.ndarray | None], start: int = 0) -> None:
        """The calls from `start` on; the outputs stay in their buffers (`output_values`)."""
        self.feeds[:] = inputs
        i = start - 1
        calls = self.calls[start:] if start else self.calls
        try:
            with np.errstate(all="ignore"):  # as torch: silent on overflow, 0/0, log(-1)
                set_engine_bufsize()  # restored with the errstate (ufunc_buffers.py)
                for i, call in enumerate(calls, start):  # noqa: B007  (i names the failing call below)
                    call()
        except Exception as e:
            raise_for_operator(e, self.names[i], self.types[i])
        finally:
            self.feeds[:] = [None] * len(self.feeds)  # do not keep the caller's arrays alive

    def _outputs(self) -> list[np.ndarray]:
        result: list[np.ndarray] = []
        for v in self.output_values:
            result.extend(a.copy() for a in (arrays_of(v) or []))
        return result


def bind_operator(
    program: Program,
    operator: RuntimeOperator,
    args: list[Any],
    outs: list[np.ndarray | None],
    view: bool,
    values: dict[str, Any],
    split: SplitRequest | None = None,
) -> Callable[[], Any] | None:
    """Run one operator on its buffers `outs`, put its results into `values`, and return the
    call that repeats it (None for a view operator: its views of buffers and constants stay
    valid, nothing to repeat). NotPreparable where a result has nowhere to stay."""
    op, layer = operator.op, operator.layer
    assert layer is not None  # record() refused operators with parameters computed at run time
    operands = operator.binding.outputs
    call: Callable[[], Any] | None = None
    buffers = [b for b in outs if b is not None]
    if not view and len(buffers) == len(outs):
        if split is not None and layer.splittable:
            f = cast(Splittable, layer).prepare(args, buffers, split)
        else:
            f = layer.prepare(args, buffers)
        call = None if f is None else partial(f, args, buffers)
    if call is not None:
        call()
        results: list[Any] = list(outs)
    else:
        results = call_layer(operator, layer, args, outs, program.limits)
    copies: list[tuple[int, np.ndarray]] = []  # (output, its buffer) where the layer made its own array
    arg_arrays = [a for v in args for a in (arrays_of(v) or [])]
    for k, (o, r, b) in enumerate(zip(operands, results, outs)):
        if view:
            arrays = arrays_of(r)
            if arrays is None or (op.inputs and not all(is_view(a, arg_arrays) for a in arrays)):
                raise NotPreparable(f"operator '{op.name}' returned a view before, a new array now")
            values[o.name] = r
        elif r is b:
            values[o.name] = r
        elif isinstance(r, np.ndarray) and b is not None and r.shape == b.shape and r.dtype == b.dtype:
            np.copyto(b, r)  # the layer allocates its own result: copy it into the buffer
            values[o.name] = b
            copies.append((k, b))
        else:
            raise NotPreparable(f"operator '{op.name}' output {o.name}: nowhere to keep it")
    if view:
        return None
    if call is None:
        forward = partial(layer.forward, args, outs)
        call = partial(_copy_results, forward, copies) if copies else forward
    return call


_UNSEEN = object()


class PreparedSteps:
    """steps()' per-operator run made faster: each operator's prepared function
    (Layer.prepare), called on fresh output arrays, so every operand of a run stays readable
    as long as its holder wants, and no operator runs in place. `call` is the interpreter's
    call (interpreter.steps), the layer's forward replaced.

    Made lazily: the first steps() run at these input shapes calls each layer's forward and
    prepares it from what it returned; later runs call the prepared functions. A function
    owns its kernel's buffers, so calls are serialised (one lock, held only for the call:
    steps() of two threads interleave operator by operator)."""

    def __init__(self) -> None:
        self.functions: dict[str, Any] = {}  # operator key -> (f, output shapes and dtypes) or None
        self.lock = threading.Lock()

    def call(self, program: Program, operator: RuntimeOperator, layer: Layer, args: list[Any]) -> list[Any]:
        outputs = operator.binding.outputs
        # Computed params: the layers vary; sizes that follow the values: the shapes do.
        varies = operator.computed or (program.value_shaped and any(o.name in program.value_shaped for o in outputs))
        entry = None if varies else self.functions.get(operator.key, _UNSEEN)
        if entry is _UNSEEN or entry is None:
            results = call_layer(operator, layer, args, [None] * len(outputs), program.limits)
            if entry is _UNSEEN:
                self.functions[operator.key] = _prepare_fresh(layer, args, results)
            return results
        f, specs = entry
        outs = [np.empty(shape, dtype) for shape, dtype in specs]
        try:
            with self.lock:
                f(args, outs)
        except Exception as e:
            raise_for_operator(e, operator.name, operator.type)
        return outs


def _prepare_fresh(layer: Layer, args: list[Any], results: list[Any]) -> Any:
    """(the layer's prepared function, its outputs' shapes and dtypes), or None where its
    results are not fresh contiguous arrays or it has none."""
    arrays = [a for v in args for a in (arrays_of(v) or [])]
    fresh = all(isinstance(r, np.ndarray) and r.flags.c_contiguous and not is_view(r, arrays) for r in results)
    if not results or not fresh:
        return None
    f = layer.prepare(args, results)
    return None if f is None else (f, [(r.shape, r.dtype) for r in results])


def feed(feeds: list[Any], k: int, buf: np.ndarray) -> None:
    """pnnx.Input's call: the caller's k-th array into its buffer."""
    np.copyto(buf, feeds[k])


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
    )


def _copy_results(forward: Callable[[], list[Any]], targets: list[tuple[int, np.ndarray]]) -> None:
    results = forward()
    for k, buf in targets:
        np.copyto(buf, results[k])


__all__ = ["PreparedForward", "PreparedSteps", "NotPreparable", "Record", "record", "bind_operator", "feed"]
