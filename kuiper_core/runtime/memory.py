"""Output buffers: planned at build from the `#` shapes, shared by liveness.

An operand's buffer is needed from the step that produces it until the last step that
reads it. Two operands whose lifetimes do not overlap can share one buffer, so a deep
model needs a few buffers, not one per operand. Shape layers may return views of their
input: such an output and its input are one alias group, which lives as long as its
longest-lived member.

Operands that never get a planned buffer (out=None, the layer allocates):
- graph outputs and everything aliased with them (the caller keeps them after forward),
  unless `keep_outputs` (the prepared forward copies them out): then they get buffers of
  their own that nothing else reuses,
- outputs of view-returning layers (they own no memory),
- operands without a fully known static shape (`shapes` overrides the declared shapes and
  dtypes with the ones a run produced).

In place: `inplace` maps an operator to the input positions its output may overwrite (an
elementwise op). When such an input dies at that operator, has the output's shape and
dtype, and no other input of the operator aliases it, the output takes over its buffer
(ReLU on a convolution's output, a residual add into the branch's output).
"""

from __future__ import annotations

from collections.abc import Callable

from dataclasses import dataclass, field

import numpy as np

from .. import limits as _limits
from ..errors import LimitError
from ..graph import Operand, Operator, numpy_dtype

NEVER = 1 << 62  # lifetime end of graph outputs
# A declared shape needing more than this is not preallocated at build: a malformed (or
# hostile) `#` shape must not allocate gigabytes before anything runs.
MAX_PLANNED_BYTES = 1 << 31


@dataclass
class BufferPlan:
    """operand name -> (slot, shape, dtype); slots are byte buffers allocated once."""

    assignment: dict[str, tuple[int, tuple[int, ...], np.dtype]] = field(default_factory=dict)
    slot_bytes: list[int] = field(default_factory=list)
    last_use: dict[str, int] = field(default_factory=dict)  # operand -> step index of its last reader
    _slots: list[np.ndarray] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(self.slot_bytes)

    def check_size(self, limits: _limits.Limits | None = None) -> None:
        """Refuse a plan over max_planned_bytes (a LimitError)."""
        lim = (limits or _limits.current()).max_planned_bytes
        if self.total_bytes > lim:
            raise LimitError(
                f"the declared shapes need {self.total_bytes:,} bytes of output buffers "
                f"({len(self.slot_bytes)} shared buffers)",
                limit="max_planned_bytes",
                maximum=lim,
                value=self.total_bytes,
            )

    def allocate(
        self,
        limits: _limits.Limits | None = None,
        make: Callable[[int], np.ndarray] | None = None,
    ) -> None:
        """Allocate the slots, refusing (before allocating) a plan over max_planned_bytes.
        `make`: makes a slot's byte array instead of np.empty (split_forward.py: memory shared
        with a helper process)."""
        self.check_size(limits)
        new = make or (lambda n: np.empty(n, np.uint8))
        self._slots = [new(n) for n in self.slot_bytes]

    def allocated(self, limits: _limits.Limits | None = None) -> BufferPlan:
        """A copy of this plan with slots of its own (the plan itself stays unallocated)."""
        plan = BufferPlan(self.assignment, self.slot_bytes, self.last_use)
        plan.allocate(limits)
        return plan

    def buffer(self, operand: str) -> np.ndarray | None:
        a = self.assignment.get(operand)
        if a is None or not self._slots:
            return None
        slot, shape, dtype = a
        n = _limits.elements(shape) * dtype.itemsize
        return self._slots[slot][:n].view(dtype).reshape(shape)


def _find(parent: dict[str, str], x: str) -> str:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


ShapeDtype = tuple[tuple[int, ...], np.dtype]


def plan_buffers(
    order: list[Operator],
    view_ops: set[str],
    graph_outputs: set[str],
    *,
    shapes: dict[str, ShapeDtype] | None = None,
    inplace: dict[str, tuple[int, ...]] | None = None,
    keep_outputs: bool = False,
) -> BufferPlan:
    """Greedy slot assignment over lifetimes (order = execution order); see the module docstring."""
    produced: dict[str, int] = {}
    last: dict[str, int] = {}
    operands: dict[str, Operand] = {}
    parent: dict[str, str] = {}
    for step, op in enumerate(order):
        for o in op.inputs:
            last[o.name] = max(last.get(o.name, -1), step)
        for o in op.outputs:
            produced[o.name] = step
            last.setdefault(o.name, step)
            operands[o.name] = o
            parent.setdefault(o.name, o.name)
    for name in graph_outputs:
        last[name] = NEVER
    # Alias groups: a view's output joins every input of its operator.
    for op in order:
        if op.name in view_ops:
            for out in op.outputs:
                for inp in op.inputs:
                    if inp.name in parent:
                        parent[_find(parent, out.name)] = _find(parent, inp.name)
    group_end: dict[str, int] = {}
    for name in produced:
        root = _find(parent, name)
        group_end[root] = max(group_end.get(root, -1), last[name])

    def shape_dtype(o: Operand) -> ShapeDtype | None:
        if shapes is not None:
            return shapes.get(o.name)
        shape = o.static_shape
        return None if shape is None or o.dtype is None else (shape, numpy_dtype(o.dtype))

    plan = BufferPlan(last_use=dict(last))
    free: list[int] = []  # slots nobody holds now
    busy: list[tuple[int, int]] = []  # (end step of the holder's group, slot)
    for step, op in enumerate(order):
        # Slots whose group died before this step can be reused now (this step's inputs
        # are still alive: their lifetime ends at >= step).
        free += [slot for end, slot in busy if end < step]
        busy = [(end, slot) for end, slot in busy if end >= step]
        if op.name in view_ops:
            continue
        for k, out in enumerate(op.outputs):
            sd = shape_dtype(out)
            end = group_end[_find(parent, out.name)]
            if sd is None or (end >= NEVER and not keep_outputs):
                continue
            shape, dtype = sd
            nbytes = _limits.elements(shape) * dtype.itemsize
            if nbytes == 0 or nbytes > MAX_PLANNED_BYTES:
                continue
            if k == 0 and end < NEVER and inplace and op.name in inplace:
                slot = _take_over(op, inplace[op.name], step, sd, plan, parent, group_end, busy)
                if slot is not None:
                    plan.assignment[out.name] = (slot, shape, dtype)
                    busy.append((end, slot))
                    continue
            if end >= NEVER:  # a kept graph output: a slot of its own, never reused
                plan.assignment[out.name] = (len(plan.slot_bytes), shape, dtype)
                plan.slot_bytes.append(nbytes)
                continue
            # Best fit: the smallest free slot that is big enough; else grow the largest
            # free slot (slots are allocated once, after planning); else a new slot.
            fits = [s for s in free if plan.slot_bytes[s] >= nbytes]
            if fits:
                slot = min(fits, key=lambda s: plan.slot_bytes[s])
            elif free:
                slot = max(free, key=lambda s: plan.slot_bytes[s])
                plan.slot_bytes[slot] = nbytes
            else:
                slot = len(plan.slot_bytes)
                plan.slot_bytes.append(nbytes)
            if slot in free:
                free.remove(slot)
            plan.assignment[out.name] = (slot, shape, dtype)
            busy.append((end, slot))
    return plan


def _take_over(
    op: Operator,
    positions: tuple[int, ...],
    step: int,
    sd: ShapeDtype,
    plan: BufferPlan,
    parent: dict[str, str],
    group_end: dict[str, int],
    busy: list[tuple[int, int]],
) -> int | None:
    """The slot of an input the output may overwrite in place (removed from `busy`), or None."""
    roots = [_find(parent, o.name) if o.name in parent else o.name for o in op.inputs]  # constants: no group
    for k in positions:
        if k >= len(op.inputs):
            continue
        name = op.inputs[k].name
        a = plan.assignment.get(name)
        if a is None or (a[1], a[2]) != (tuple(sd[0]), sd[1]) or group_end.get(roots[k]) != step:
            continue
        if any(roots[j] == roots[k] and op.inputs[j].name != name for j in range(len(op.inputs))):
            continue  # another input is a view of it: overwriting would change what that reads
        slot = a[0]
        for i, (_, s) in enumerate(busy):
            if s == slot:
                del busy[i]
                return slot
    return None
