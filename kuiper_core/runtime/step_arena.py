"""steps()' fast path: every operand in an arena of its own, every operator one bound call.

The stepper shows every intermediate tensor, so a step run cannot share buffers by liveness
or run ReLU in place as forward does (prepared.py): each operand needs memory of its own
that outlives the run. Allocating it afresh per operator costs more than a small operator
(deep1500: ~10 µs per step against forward's ~6) and, on big tensors, the first touch of
fresh pages (ResNet-18 at batch 4: 88 MB per run).

A `StepArena` is one allocation holding every operand the run computes, at fixed offsets,
and the operators bound to it as prepared.py binds forward's (`bind_operator`: the layer's
prepared kernel, or its forward with the argument lists fixed). A run is then, per operator,
one call, a counter moved on and the operator's `StepEvent` (made once with the arena: a new
object per step cost ~0.1 µs) with its time set. Views and constants need no call: views of
fixed buffers stay valid. The run's values are a `StepValues` mapping over the arena's
operands that shows those of the steps done (filling a dict per step cost 0.7 µs a step on
deep1500: its objects are out of cache after each operator's arrays went through).

A concatenation whose inputs can lie one after another in its output's block (torch.cat on
an axis with only size-1 axes before it: UNet's and YOLOv5's channel concatenations at batch
1) has no call: its inputs are laid out inside its output, their producers write there, and
its step shows the block (`_plan_joins`; checked against the layer's own result at build).
Every operand still has its own values, written once per run: nothing runs in place.

An arena is reused only when nothing outside it still holds its values, events or arrays:
while a run is going on it is busy, and afterwards the mapping, the events and the memory
block are checked by reference count against the counts they had when nobody else held
them. The mapping hands out new views of its arrays (StepValues), and views hold the block,
containers the views: any holder shows. A caller that keeps a run's values (the app's
stepper does) therefore gets another arena next time (up to `MAX_ARENAS` per input
signature, within `MAX_ARENA_BYTES`: arenas stay with the graph between runs, for its
latest input shapes only), or the reference interpreter's steps (interpreter.py), which
allocate fresh outputs: never another run's memory.

Built (one run of the model on the arena, after the shape-checked record run that forward's
preparation made, or one of its own) when a steps() run at these input shapes finds no free
arena. Graphs that cannot be prepared (prepared.NotPreparable) always take the interpreter's steps.
"""

from __future__ import annotations

import contextvars
import gc
import sys
import threading
import time
import weakref
from functools import partial
from typing import Any
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from .. import limits as _limits
from ..ufunc_buffers import set_engine_bufsize
from .calls import arrays_of, call_layer, raise_for_operator
from .events import StepEvent
from .prepared import NotPreparable, Record, bind_operator, feed, record
from .program import Program
from .runtime_operator import RuntimeOperator

# Arenas kept per input signature: two let a caller hold one run (a loop variable keeping
# the last event) while the next one runs.
MAX_ARENAS = 2
# At most this many bytes of arenas per input signature: a graph keeps its arenas between
# runs, so a big model at a big batch steps one operator at a time instead.
MAX_ARENA_BYTES = 256 << 20
ALIGN = 64  # bytes: every operand starts on a cache line


class StepArena:
    """See the module docstring."""

    def __init__(self, program: Program, memory: np.ndarray) -> None:
        self.memory = memory
        self.calls: list[Callable[[], Any] | None] = []  # per operator in program.order
        self.feeds: list[Any] = [None] * len(program.input_operands)  # this run's input arrays
        self.input_names = list(program.input_operands)  # their operands, in the same order
        self.events: list[StepEvent] = []  # one per operator, made at build
        self.values = StepValues()
        self.watched: list[Any] = []  # the block, its values' mapping and events
        self.baseline: list[int] = []  # their reference counts when nobody else holds them
        self.running: Callable[[], Any] = lambda: None  # a weak reference to the run using it

    @classmethod
    def build(cls, program: Program, inputs: list[np.ndarray], rec: Record, room: int = MAX_ARENA_BYTES) -> StepArena:
        """Lay out the operands, run the model once on them, bind every call."""
        joined, joins = _plan_joins(program, rec)
        layout: dict[str, tuple[int, tuple[int, ...], np.dtype]] = {}
        total = 0
        for operator in program.run_order:
            if operator.key in rec.views:
                continue
            for o in operator.binding.outputs:
                if o.name not in rec.shapes:
                    raise NotPreparable(f"operand '{o.name}' is not an array")
                if o.name in joined:
                    continue  # laid out inside its concatenation's block
                shape, dtype = rec.shapes[o.name]
                layout[o.name] = (total, shape, dtype)
                nbytes = _limits.elements(shape) * dtype.itemsize
                total += -(-nbytes // ALIGN) * ALIGN
        if total > min(program.limits.max_planned_bytes, room):
            raise NotPreparable(f"the operands need {total:,} bytes")
        memory = np.empty(max(total, 1), np.uint8)

        def start(name: str) -> int:
            if name in joined:
                outer, offset = joined[name]
                return start(outer) + offset
            return layout[name][0]

        def buffer(name: str) -> np.ndarray | None:
            if name not in layout and name not in joined:
                return None
            shape, dtype = rec.shapes[name]
            begin = start(name)
            return memory[begin : begin + _limits.elements(shape) * dtype.itemsize].view(dtype).reshape(shape)

        self = cls(program, memory)
        values: dict[str, Any] = dict(program.run_constants)
        feeds = program.feeds(inputs)
        input_number = {op.name: k for k, op in enumerate(program.inputs)}
        for operator in program.order:
            op = operator.op
            call: Callable[[], Any] | None = None
            if operator.folded:
                values.update((o.name, program.constants[o.name]) for o in op.outputs)
            elif op.type == "pnnx.Input":
                buf = buffer(op.outputs[0].name)
                assert buf is not None
                np.copyto(buf, feeds[op.name])
                values[op.outputs[0].name] = buf
                call = partial(feed, self.feeds, input_number[op.name], buf)
            elif operator.key in joins:
                args = [values[o.name] for o in operator.binding.inputs]
                out = buffer(operator.binding.outputs[0].name)
                assert out is not None
                _check_join(program, operator, args, out)
                values[operator.binding.outputs[0].name] = out
            else:
                args = [values[o.name] for o in operator.binding.inputs]
                outs = [buffer(o.name) for o in operator.binding.outputs]
                call = bind_operator(program, operator, args, outs, operator.key in rec.views, values)
            self.calls.append(call)
            self.values.add(operator.index, {o.name: values[o.name] for o in op.outputs})
        self.values.hand_out_views(memory)
        # One event per operator, reused by every run (a held event holds its run's arena).
        self.events = [StepEvent(operator, self.values, 0.0) for operator in program.order]
        self.watched += [memory, self.values, *self.events]
        return self

    def counts(self) -> list[int]:
        return list(map(sys.getrefcount, self.watched))

    def settle(self) -> None:
        """Note the reference counts now that only the arena holds its arrays (called by the
        builder's caller, after the building frame and its locals are gone; garbage that
        still refers to them is collected first)."""
        gc.collect(1)  # young garbage: made while building
        self.baseline = self.counts()

    def free(self) -> bool:
        """Not running, and nothing outside holds its values or any of its arrays."""
        if self.running() is not None:
            return False
        counts = self.counts()
        if counts == self.baseline:
            return True
        if any(n < b for n, b in zip(counts, self.baseline)):
            # Something held an array when the baseline was taken: the counts cannot tell
            # whether it is free. Never reuse it (StepArenas drops it).
            self.baseline = []
        return False

    def run(self, inputs: list[np.ndarray]) -> Iterator[StepEvent]:
        """A step run on these inputs (StepArenas.start hands it out); `self.values` shows
        nothing of earlier runs from now on."""
        values = self.values
        values.done = 0
        # The stepper shows the caller's array itself (consumers read the copy).
        values.inputs = dict(zip(self.input_names, inputs))
        self.feeds[:] = inputs  # pnnx.Input's calls copy them into their buffers
        return self._steps()

    def _steps(self) -> Iterator[StepEvent]:
        values = self.values
        clock = time.perf_counter
        # Each step in a copy of the caller's context with forward's ufunc buffer size
        # (ufunc_buffers.py) and its silence on overflow (runtime_graph.forward): 0.04 us a
        # step, where setting and restoring them cost 1.4.
        context = contextvars.copy_context()
        context.run(set_engine_bufsize)
        context.run(np.seterr, all="ignore")
        run = context.run
        for event, call in zip(self.events, self.calls):
            t0 = clock()
            if call is not None:
                try:
                    run(call)
                except Exception as e:
                    raise_for_operator(e, event.name, event.type)
            values.done += 1
            event.seconds = clock() - t0
            yield event


class StepValues(Mapping[str, Any]):
    """The operands of an arena run that its steps so far have computed (read-only).

    An operand in the arena is handed out as a new view of its array (a tuple of new views
    for a tuple): whoever keeps it holds the arena's memory block, so the block's reference
    count alone tells whether anything outside holds an array (checking every array's own
    count cost ~0.1 µs each after a run, cache-cold: 130 µs a walk on deep1500)."""

    def __init__(self) -> None:
        self.index: dict[str, tuple[int, Any, int]] = {}  # operand -> (step making it, value, kind)
        self.names: list[str] = []  # operands in the order the steps make them
        self.ends: list[int] = [0]  # ends[n]: how many of `names` the first n steps make
        self.inputs: dict[str, np.ndarray] = {}  # pnnx.Input operands: this run's arrays
        self.done = 0  # steps finished

    def add(self, step: int, outputs: dict[str, Any]) -> None:
        for name, value in outputs.items():
            self.index[name] = (step, value, _AS_IS)
        self.names += outputs
        self.ends.append(len(self.names))

    def hand_out_views(self, memory: np.ndarray) -> None:
        """Hand out views of the values that are (or hold) arrays on `memory`."""
        for name, (step, value, _) in self.index.items():
            arrays = arrays_of(value) or []
            if any(a.base is memory for a in arrays):
                self.index[name] = (step, value, _VIEW if isinstance(value, np.ndarray) else _VIEWS)

    def __getitem__(self, name: str) -> Any:
        step, value, kind = self.index[name]
        if step >= self.done:
            raise KeyError(name)
        if name in self.inputs:
            return self.inputs[name]
        if kind == _VIEW:
            return value[...]
        if kind == _VIEWS:
            return type(value)(a[...] for a in value)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.names[: self.ends[self.done]])

    def __len__(self) -> int:
        return self.ends[self.done]


_AS_IS, _VIEW, _VIEWS = 0, 1, 2  # how StepValues hands out a value


def _plan_joins(program: Program, rec: Record) -> tuple[dict[str, tuple[str, int]], set[str]]:
    """Concatenations that need no copy: a torch.cat whose inputs, laid out one after another
    in its output's block, are its output (the axis has only size-1 axes before it, e.g.
    channels at batch 1), each input an operand of its own that no other concatenation
    takes. Returns operand -> (the concatenation's output, byte offset in it) and the keys of
    those operators: they need no call, their producers write in place."""
    made = {
        o.name for r in program.run_order if r.key not in rec.views for o in r.binding.outputs if o.name in rec.shapes
    }
    joined: dict[str, tuple[str, int]] = {}
    joins: set[str] = set()
    for operator in program.run_order:
        b, layer = operator.binding, operator.layer
        if layer is None or not layer.concatenates or operator.key in rec.views or len(b.outputs) != 1 or not b.inputs:
            continue
        out = b.outputs[0].name
        names = [o.name for o in b.inputs]
        if out not in rec.shapes or len(set(names)) != len(names) or any(n not in made or n in joined for n in names):
            continue
        shape, dtype = rec.shapes[out]
        dim = getattr(layer, "dim", None)
        if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
            continue
        axis = dim % len(shape)
        parts = [rec.shapes[n] for n in names]
        if (
            _limits.elements(shape[:axis]) != 1
            or any(
                d != dtype or len(s) != len(shape) or s[:axis] + s[axis + 1 :] != shape[:axis] + shape[axis + 1 :]
                for s, d in parts
            )
            or sum(s[axis] for s, _ in parts) != shape[axis]
        ):
            continue
        offset = 0
        for n, (s, d) in zip(names, parts):
            joined[n] = (out, offset)
            offset += _limits.elements(s) * d.itemsize
        joins.add(operator.key)
    return joined, joins


def _check_join(program: Program, operator: RuntimeOperator, args: list[Any], out: np.ndarray) -> None:
    """At build: the block its inputs were written into is what the layer makes of them."""
    layer = operator.layer
    assert layer is not None  # record() refused operators with parameters computed at run time
    made = call_layer(operator, layer, args, [None], program.limits)[0]
    if not (
        isinstance(made, np.ndarray)
        and made.shape == out.shape
        and made.dtype == out.dtype
        and made.tobytes() == out.tobytes()
    ):
        raise NotPreparable(f"operator '{operator.name}': its inputs laid out in a row are not its output")


class StepArenas:
    """The arenas of one input signature (at most MAX_ARENAS), handed out one run at a time."""

    def __init__(self) -> None:
        self.arenas: list[StepArena] = []
        self.preparable = True
        self.lock = threading.Lock()

    def start(
        self, program: Program, inputs: list[np.ndarray], rec: Record | None
    ) -> tuple[Iterator[StepEvent], StepValues] | None:
        """A run and its values on a free arena (or a new one, if there is room), else None
        (the caller takes the per-operator path). Busy while the run's generator exists."""
        with self.lock:
            arena = next((a for a in self.arenas if a.free()), None)
            if arena is None:
                self.arenas = [a for a in self.arenas if a.baseline]  # drop the retired ones
            if arena is None and self.preparable and len(self.arenas) < MAX_ARENAS:
                arena = self._build(program, inputs, rec)
                if arena is not None:
                    arena.settle()
                    self.arenas.append(arena)
            if arena is None:
                return None
            run = arena.run(inputs)
            arena.running = weakref.ref(run)
            return run, arena.values

    def release(self) -> None:
        """Let go of every arena (runs that hold one keep it alive; it is never reused)."""
        with self.lock:
            self.arenas = []

    def _build(self, program: Program, inputs: list[np.ndarray], rec: Record | None) -> StepArena | None:
        used = sum(a.memory.nbytes for a in self.arenas)
        if self.arenas and used + self.arenas[0].memory.nbytes > MAX_ARENA_BYTES:
            return None  # another would be as big as the first: no room for it
        try:
            with np.errstate(all="ignore"), _limits.use(program.limits):  # the run after it warns
                set_engine_bufsize()
                rec = rec if rec is not None else record(program, inputs)
                return StepArena.build(program, inputs, rec, MAX_ARENA_BYTES - used)
        except NotPreparable:
            if not self.arenas:
                self.preparable = False
            return None
        except Exception:
            # A layer error: the interpreter's steps report it at its operator, after the
            # steps before it (the stepper shows them).
            self.preparable = False
            return None
