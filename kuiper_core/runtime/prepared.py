"""Forward as a flat list of prepared calls: the runtime's fast path.

Built once per set of input shapes (`PreparedForward.build`), from two runs:

1. The record run: every operator runs as in steps() (fresh outputs), and what it returns
   is noted: each operand's shape and dtype, and which operators return views of their
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
per PreparedForward (RuntimeGraph holds a lock). Graphs whose operators return anything but
arrays and tuples of arrays (size arithmetic on dynamic shapes) are not prepared.

The memory plan and the in-place choices are the runtime's: the graph is never rewritten,
and steps() still runs every operator on its own, so the stepper shows every operand.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn
from collections.abc import Callable

import numpy as np

from .. import limits as _limits
from ..errors import KuiperError, LimitError, ModelError
from ..graph import Operator
from .memory import NEVER, BufferPlan, ShapeDtype, plan_buffers

if TYPE_CHECKING:
    from ..layers.registry import Layer
    from .runtime_graph import RuntimeGraph, RuntimeOperator


# Operators the prepared forward may fuse into the call of the layer whose output they read.
RELU_TYPES = ("nn.ReLU", "F.relu")


class NotPreparable(Exception):
    """The graph cannot run as fixed calls on fixed buffers (e.g. a value that is not an array)."""


@dataclass
class Record:
    shapes: dict[str, ShapeDtype]  # operand -> shape and dtype of the array it held
    views: set[str]  # operators whose outputs are views of their inputs or constants


def _arrays(value: Any) -> list[np.ndarray] | None:
    """The arrays of an operand value (one, or a tuple's), None for anything else."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)) and all(isinstance(v, np.ndarray) for v in value):
        return list(value)
    return None


def raise_for_operator(e: Exception, name: str, op_type: str) -> NoReturn:
    """Re-raise an exception from a layer as the error that names its operator."""
    if isinstance(e, LimitError):
        raise e.at_operator(name, op_type) from None
    if isinstance(e, KuiperError):
        raise e
    if isinstance(e, MemoryError):  # a size no check caught: still an error, not a crash
        raise _limits.out_of_memory(e, name, op_type) from None
    # A layer bug or an input the layer cannot take.
    raise ModelError(f"failed while running: {type(e).__name__}: {e}", operator=name, op_type=op_type) from e


def _is_view(a: np.ndarray, of: list[np.ndarray]) -> bool:
    return any(np.may_share_memory(a, b) for b in of)


def record(rt: RuntimeGraph, inputs: list[np.ndarray]) -> Record:
    """The checked first run (RuntimeGraph._run), noting what every operator returns."""
    for rop in rt._run_order:
        if rop.computed:
            raise NotPreparable(f"operator '{rop.name}' takes parameters computed at run time")
        if rop.binding is None or rop.binding.packed:
            raise NotPreparable(f"operator '{rop.name}' packs its outputs into one operand")
    shapes: dict[str, ShapeDtype] = {}
    views: set[str] = set()

    def note(rop: RuntimeOperator, args: list[Any], results: list[Any]) -> None:
        assert rop.binding is not None
        arg_arrays = [a for v in args for a in (_arrays(v) or [])]
        shared = []
        for o, r in zip(rop.binding.outputs, results):
            arrays = _arrays(r)
            if arrays is None:
                raise NotPreparable(f"operator '{rop.name}' returned a {type(r).__name__}")
            if isinstance(r, np.ndarray):
                shapes[o.name] = (r.shape, r.dtype)
            shared += [_is_view(a, arg_arrays) for a in arrays]
        constant = rop.layer is not None and rop.layer.returns_views and not args  # pnnx.Attribute
        if rop.type == "pnnx.Input":
            pass  # gets a buffer: its call copies the caller's array into it
        elif constant or (shared and all(shared)):
            views.add(rop.key)
        elif any(shared) or any(not isinstance(r, np.ndarray) for r in results):
            raise NotPreparable(f"operator '{rop.name}' returns views and new arrays together")

    rt._run(inputs, planned=False, check=True, record=note)
    return Record(shapes, views)


class PreparedForward:
    """See the module docstring."""

    def __init__(self) -> None:
        self.calls: list[Callable[[], Any]] = []
        self.names: list[str] = []  # operator of each call, for error messages
        self.types: list[str] = []
        self.feeds: list[Any] = []  # the caller's arrays during run()
        self.output_values: list[Any] = []  # graph outputs: buffers (or tuples of them)
        self.first_outputs: list[np.ndarray] = []  # the binding run's results
        self.plan: BufferPlan | None = None
        self.record: Record | None = None  # what the record run saw (steps' arenas reuse it)
        # operand -> (call index, layer, args, outs) of the bound call that writes it
        self._writers: dict[str, tuple[int, Layer, list[Any], list[np.ndarray]]] = {}

    @classmethod
    def build(cls, rt: RuntimeGraph, inputs: list[np.ndarray]) -> PreparedForward:
        """Record, plan, bind (see the module docstring); `first_outputs` is this forward's result."""
        assert rt.graph is not None
        rec = record(rt, inputs)
        ops = []
        for r in rt._run_order:
            assert r.binding is not None
            ops.append(Operator(r.type, r.key, inputs=r.binding.reads, outputs=list(r.binding.outputs)))
        outputs = {o.name for op in rt.graph.outputs for o in op.inputs}
        inplace = {
            r.key: r.layer.overwritable_inputs()
            for r in rt._run_order
            if r.layer is not None and r.key not in rec.views and r.layer.overwritable_inputs()
        }
        plan = plan_buffers(ops, rec.views, outputs, shapes=rec.shapes, inplace=inplace, keep_outputs=True)
        plan.allocate(rt.limits)
        self = cls()
        self.plan = plan
        self.record = rec
        values: dict[str, Any] = dict(rt._seed)  # constants folded at build
        feeds = rt._feeds(inputs)
        input_index = {op.name: k for k, op in enumerate(rt.graph.inputs)}
        readers = Counter(o.name for op in ops for o in op.inputs)
        self.feeds = [None] * len(input_index)
        for rop in rt._run_order:
            op = rop.op
            assert rop.binding is not None
            if op.type == "pnnx.Input":
                # Copied in at its place in the order: its buffer may be another input's
                # before that (buffers are shared by liveness).
                buf = plan.buffer(op.outputs[0].name)
                if buf is None:
                    raise NotPreparable(f"no buffer for input '{op.name}'")
                k = input_index[op.name]
                np.copyto(buf, feeds[op.name])
                self.calls.append(partial(_feed, self.feeds, k, buf))
                self.names.append(op.name)
                self.types.append(op.type)
                values[op.outputs[0].name] = buf
                continue
            if not self._fuse_relu(rop, plan, readers, outputs, values):
                self._bind(rt, rop, [values[o.name] for o in rop.binding.inputs], plan.buffer, rec, values)
        self.output_values = [values[o.name] for op in rt.graph.outputs for o in op.inputs]
        self.first_outputs = self._outputs()
        return self

    def _bind(
        self,
        rt: RuntimeGraph,
        rop: RuntimeOperator,
        args: list[Any],
        buffer: Callable[[str], np.ndarray | None],
        rec: Record,
        values: dict[str, Any],
    ) -> None:
        assert rop.binding is not None
        outs = [buffer(o.name) for o in rop.binding.outputs]
        call = bind_operator(rt, rop, args, outs, rop.key in rec.views, values)
        if call is not None and len(outs) == 1:
            self._writers[rop.binding.outputs[0].name] = (len(self.calls), rop.layer, args, outs)  # type: ignore[assignment]
        if call is not None:
            self.calls.append(call)
            self.names.append(rop.name)
            self.types.append(rop.type)

    def _fuse_relu(
        self, rop: RuntimeOperator, plan: BufferPlan, readers: Counter, outputs: set[str], values: dict[str, Any]
    ) -> bool:
        """Fold a ReLU into the call that writes its input (module docstring); False: bind it."""
        binding = rop.binding
        assert binding is not None
        if rop.type not in RELU_TYPES or len(binding.inputs) != 1 or len(binding.outputs) != 1:
            return False
        src, dst = binding.inputs[0].name, binding.outputs[0].name
        writer = self._writers.get(src)
        buf = plan.buffer(dst)
        # Only reader (no one sees the values before the ReLU) and in place (same array).
        if writer is None or readers[src] != 1 or src in outputs or buf is None or not _same_array(buf, writer[3][0]):
            return False
        k, layer, args, outs = writer
        f = layer.prepare_with_relu(args, outs)
        if f is None:
            return False
        self.calls[k] = partial(f, args, outs)
        self.calls[k]()  # the binding run: the buffer now holds the ReLU's output
        values[dst] = buf
        return True

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        self.feeds[:] = inputs
        i = -1
        try:
            with np.errstate(all="ignore"):  # as torch: silent on overflow, 0/0, log(-1)
                for i, call in enumerate(self.calls):  # noqa: B007  (i names the failing call below)
                    call()
        except Exception as e:
            raise_for_operator(e, self.names[i], self.types[i])
        finally:
            self.feeds[:] = [None] * len(self.feeds)  # do not keep the caller's arrays alive
        return self._outputs()

    def _outputs(self) -> list[np.ndarray]:
        result: list[np.ndarray] = []
        for v in self.output_values:
            result.extend(a.copy() for a in (_arrays(v) or []))
        return result


def bind_operator(
    rt: RuntimeGraph,
    rop: RuntimeOperator,
    args: list[Any],
    outs: list[np.ndarray | None],
    view: bool,
    values: dict[str, Any],
) -> Callable[[], Any] | None:
    """Run one operator on its buffers `outs`, put its results into `values`, and return the
    call that repeats it (None for a view operator: its views of buffers and constants stay
    valid, nothing to repeat). NotPreparable where a result has nowhere to stay."""
    op, layer = rop.op, rop.layer
    assert layer is not None and rop.binding is not None
    operands = rop.binding.outputs
    call: Callable[[], Any] | None = None
    if not view and all(b is not None for b in outs):
        f = layer.prepare(args, outs)  # type: ignore[arg-type]
        call = None if f is None else partial(f, args, outs)
    if call is not None:
        call()
        results: list[Any] = list(outs)
    else:
        results = rt._call(rop, layer, args, outs)
    copies = []
    arg_arrays = [a for v in args for a in (_arrays(v) or [])]
    for k, (o, r, b) in enumerate(zip(operands, results, outs)):
        if view:
            arrays = _arrays(r)
            if arrays is None or (op.inputs and not all(_is_view(a, arg_arrays) for a in arrays)):
                raise NotPreparable(f"operator '{op.name}' returned a view before, a new array now")
            values[o.name] = r
        elif r is b:
            values[o.name] = r
        elif isinstance(r, np.ndarray) and b is not None and r.shape == b.shape and r.dtype == b.dtype:
            np.copyto(b, r)  # the layer allocates its own result: copy it into the buffer
            values[o.name] = b
            copies.append(k)
        else:
            raise NotPreparable(f"operator '{op.name}' output {o.name}: nowhere to keep it")
    if view:
        return None
    if call is None:
        forward = partial(layer.forward, args, outs)
        call = partial(_copy_results, forward, [(k, outs[k]) for k in copies]) if copies else forward
    return call


_UNSEEN = object()


class PreparedSteps:
    """steps()'s fast path: each operator's prepared function (Layer.prepare), called on
    fresh output arrays, so every operand of a run stays readable as long as its holder
    wants, and no operator runs in place.

    Made lazily: the first steps() run at these input shapes calls each layer's forward and
    prepares it from what it returned; later runs call the prepared functions. A function
    owns its kernel's buffers, so calls are serialised (one lock, held only for the call:
    steps() of two threads interleave operator by operator)."""

    def __init__(self) -> None:
        self.fns: dict[str, Any] = {}  # operator -> (f, output shapes and dtypes) or None
        self.lock = threading.Lock()

    def call(self, rt: RuntimeGraph, rop: RuntimeOperator, layer: Layer, args: list[Any]) -> list[Any]:
        assert rop.binding is not None
        # Computed params: the layers vary; sizes that follow the values: the shapes do.
        varies = rop.computed or (rt.value_shaped and any(o.name in rt.value_shaped for o in rop.binding.outputs))
        entry = None if varies else self.fns.get(rop.key, _UNSEEN)
        if entry is _UNSEEN or entry is None:
            results = rt._call(rop, layer, args, [None] * len(rop.binding.outputs))
            if entry is _UNSEEN:
                self.fns[rop.key] = self._prepare(layer, args, results)
            return results
        f, specs = entry
        outs = [np.empty(shape, dtype) for shape, dtype in specs]
        try:
            with self.lock:
                f(args, outs)
        except Exception as e:
            raise_for_operator(e, rop.name, rop.type)
        return outs

    @staticmethod
    def _prepare(layer: Layer, args: list[Any], results: list[Any]) -> Any:
        arrays = [a for v in args for a in (_arrays(v) or [])]
        if (
            layer is None
            or not results
            or not all(isinstance(r, np.ndarray) and r.flags.c_contiguous and not _is_view(r, arrays) for r in results)
        ):
            return None
        f = layer.prepare(args, results)
        return None if f is None else (f, [(r.shape, r.dtype) for r in results])


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
    )


def _feed(feeds: list[Any], k: int, buf: np.ndarray) -> None:
    np.copyto(buf, feeds[k])


def _copy_results(forward: Callable[[], list[Any]], targets: list[tuple[int, np.ndarray]]) -> None:
    results = forward()
    for k, buf in targets:
        np.copyto(buf, results[k])


__all__ = ["PreparedForward", "PreparedSteps", "NotPreparable", "NEVER"]
