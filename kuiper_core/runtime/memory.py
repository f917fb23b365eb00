"""Output buffers: planned at build from the `#` shapes, shared by liveness.

An operand's buffer is needed from the step that produces it until the last step that
reads it. Two operands whose lifetimes do not overlap can share one buffer, so a deep
model needs a few buffers, not one per operand. Shape layers may return views of their
input: such an output and its input are one alias group, which lives as long as its
longest-lived member.

Operands that never get a planned buffer (out=None, the layer allocates):
- graph outputs and everything aliased with them (the caller keeps them after forward),
- outputs of view-returning layers (they own no memory),
- operands without a fully known static shape.
"""

from __future__ import annotations

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

    def allocate(self, limits: _limits.Limits | None = None) -> None:
        """Allocate the slots, refusing (before allocating) a plan over max_planned_bytes."""
        lim = (limits or _limits.current()).max_planned_bytes
        if self.total_bytes > lim:
            raise LimitError(
                f"the declared shapes need {self.total_bytes:,} bytes of output buffers "
                f"({len(self.slot_bytes)} shared buffers)",
                limit="max_planned_bytes",
                maximum=lim,
                value=self.total_bytes,
            )
        self._slots = [np.empty(n, np.uint8) for n in self.slot_bytes]

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


def plan_buffers(order: list[Operator], view_ops: set[str], graph_outputs: set[str]) -> BufferPlan:
    """Greedy slot assignment over lifetimes (order = execution order)."""
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
        for out in op.outputs:
            shape = out.static_shape
            end = group_end[_find(parent, out.name)]
            if shape is None or out.dtype is None or end >= NEVER:
                continue
            dtype = numpy_dtype(out.dtype)
            nbytes = _limits.elements(shape) * dtype.itemsize
            if nbytes == 0 or nbytes > MAX_PLANNED_BYTES:
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
