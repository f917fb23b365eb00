"""ONNX tensor operators pnnx keeps as ONNX nodes: Expand, Tile, Where, Range, NonZero, OneHot,
Clip, CumSum, Trilu, Slice, Einsum, Pad — each with ONNX's semantics (the operator's page in the ONNX spec),
reading its arguments from params where pnnx folded them and from inputs otherwise (_onnx.py
says how pnnx writes such a node).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import short
from ..graph import Operator
from ._onnx import expect_inputs, inputs_constant, ints_of, onnx_axes, param_or_input, scalar_of
from .linear import einsum_work
from .registry import Layer, register


class _ShapeFromInputs(Layer):
    """An operator whose output shape is read from its inputs' values (a shape, repeats,
    a count): fixed when those are constants of the file, else it follows the values."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return not inputs_constant(op)


@register("Expand")
class Expand(_ShapeFromInputs):
    """`Expand(input, shape)`: input broadcast with `shape` both ways (a 1 in `shape` keeps
    the input's size; numpy's broadcasting rule)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "input, shape", 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, shape = np.asarray(inputs[0]), ints_of(self, inputs[1], "shape")
        try:
            target = np.broadcast_shapes(x.shape, shape)
        except ValueError:
            raise self.error(f"cannot expand an input of shape {x.shape} to {shape}") from None
        self.check_size(target)
        return [np.array(np.broadcast_to(x, target))]


@register("Tile")
class Tile(_ShapeFromInputs):
    """`Tile(input, repeats)`: one repeat count per input dim."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "input, repeats", 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, reps = np.asarray(inputs[0]), ints_of(self, inputs[1], "repeats")
        if len(reps) != x.ndim or any(r < 0 for r in reps):
            raise self.error(f"repeats must be {x.ndim} counts >= 0 (one per input dim), got {reps}")
        self.check_size(tuple(n * r for n, r in zip(x.shape, reps)))
        return [np.tile(x, reps)]


@register("Where")
class Where(Layer):
    """`Where(condition, X, Y)`, broadcasting all three."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "condition, X, Y", 3)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        cond, x, y = (np.asarray(v) for v in inputs)
        if cond.dtype != np.bool_:
            raise self.error(f"condition must be bool, got {cond.dtype}")
        try:
            return [np.where(cond, x, y)]
        except ValueError:
            raise self.error(f"shapes {cond.shape}, {x.shape}, {y.shape} do not broadcast") from None


@register("Range")
class Range(_ShapeFromInputs):
    """`Range(start, limit, delta)`: start + i·delta for i < max(ceil((limit - start) / delta), 0),
    in start's dtype."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return not inputs_constant(op, 0)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "start, limit, delta", 3)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        start, limit, delta = (scalar_of(self, v, n) for v, n in zip(inputs, ("start", "limit", "delta")))
        if delta == 0:
            raise self.error("delta must not be 0")
        n = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
        self.check_size((n,))
        dtype = np.asarray(start).dtype
        return [(np.asarray(start) + np.arange(n, dtype=dtype) * np.asarray(delta)).astype(dtype)]


@register("NonZero")
class NonZero(Layer):
    """`NonZero(X)`: the indices of the non-zero entries, (rank, count) int64, row-major order."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "X", 1)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if x.ndim == 0:  # a scalar: ONNX gives (1, count) as for a one-element vector
            x = x.reshape(1)
        return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


@register("OneHot")
class OneHot(_ShapeFromInputs):
    """`OneHot(indices, depth, values=[off, on], axis=-1)`: a new axis of `depth` entries;
    negative indices count from depth, and indices outside [-depth, depth-1] give all-off."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.axis = self.int_param("axis", -1)
        expect_inputs(self, "indices, depth, values", 3)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        indices, values = np.asarray(inputs[0]), np.asarray(inputs[2])
        depth = int(scalar_of(self, inputs[1], "depth"))
        if depth < 1 or values.size != 2:
            raise self.error(f"expected depth >= 1 and 2 values (off, on), got depth {depth}, {values.size} values")
        axis = onnx_axes(self, (self.axis,), indices.ndim + 1)[0]
        self.check_size(indices.shape + (depth,))
        ids = indices.astype(np.int64)
        ids = np.where(ids < 0, ids + depth, ids)
        hot = np.expand_dims(ids, axis) == np.arange(depth).reshape(
            [depth if d == axis else 1 for d in range(ids.ndim + 1)]
        )
        off, on = values.reshape(-1)
        return [np.where(hot, on, off).astype(values.dtype)]


@register("Clip")
class Clip(Layer):
    """`Clip(input, min, max)` with bounds as tensors (opset 11+) or params (`min=`/`max=`,
    opset 6). pnnx drops an omitted min (`""`) from the inputs: with two inputs the second is
    min, as ONNX's position says; a `Clip(x, "", max)` whose max is not a constant is written
    the same way by pnnx and cannot be told apart (docs/coverage.md)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "input, min, max", 1, 3)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        lo = param_or_input(self, "min", inputs, 1)
        hi = param_or_input(self, "max", inputs, 2)
        y = x.copy()
        if lo is not None:
            np.maximum(y, np.asarray(scalar_of(self, lo, "min"), x.dtype), out=y)
        if hi is not None:
            np.minimum(y, np.asarray(scalar_of(self, hi, "max"), x.dtype), out=y)
        return [y]


@register("CumSum")
class CumSum(Layer):
    """`CumSum(x, axis; exclusive, reverse)`: the running sum along axis; exclusive leaves the
    current entry out (the first is 0), reverse sums from the end."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.exclusive = bool(self.int_param("exclusive", 0))
        self.reverse = bool(self.int_param("reverse", 0))
        expect_inputs(self, "x, axis", 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = onnx_axes(self, ints_of(self, inputs[1], "axis")[:1], max(x.ndim, 1))[0]
        v = np.flip(x, axis) if self.reverse else x
        y = np.cumsum(v, axis=axis, dtype=x.dtype)
        if self.exclusive:
            y = np.concatenate([np.zeros_like(np.take(y, [0], axis)), np.delete(y, -1, axis)], axis)
        return [np.ascontiguousarray(np.flip(y, axis) if self.reverse else y)]


@register("Trilu")
class Trilu(Layer):
    """`Trilu(input, k=0; upper=1)`: the upper (`torch.triu(x, k)`) or lower (`torch.tril`)
    triangle of the last two dims from the k-th diagonal, zeros elsewhere (torch.onnx.export's
    tril/triu, which pnnx keeps as the ONNX node)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.upper = bool(self.int_param("upper", 1, low=0, high=1))
        expect_inputs(self, "input, k", 1, 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if x.ndim < 2:
            raise self.error(f"expected a tensor of rank 2 or more, got shape {x.shape}")
        k = ints_of(self, inputs[1], "k") if len(inputs) > 1 else (0,)
        if len(k) != 1:
            raise self.error(f"k must be one integer, got {k}")
        return [np.triu(x, k[0]) if self.upper else np.tril(x, k[0])]


@register("Slice")
class Slice(Layer):
    """`Slice(data, starts, ends, axes, steps)`: data[start:end:step] along each axis (axes
    default 0.., steps 1), with ONNX's clamping: a negative start or end counts from the back,
    then both are clamped to [0, dim] (to [-1, dim - 1] with a negative step, where -1 is
    before the first entry). pnnx keeps it on a 1-D input (torch.roll's flattened export),
    with the constant arguments folded into params; the others follow data as inputs, in
    ONNX's order."""

    NAMES = ("starts", "ends", "axes", "steps")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        folded = sum(1 for k in self.NAMES if op.params.get(k) is not None)
        expect_inputs(self, "data, then starts, ends, axes, steps not folded into params", 1, 5 - folded)

    def _arguments(self, inputs: list[Any]) -> dict[str, tuple[int, ...] | None]:
        rest, found = list(inputs[1:]), {}
        for k in self.NAMES:
            value = self.op.params.get(k)
            if value is None and rest:
                value = rest.pop(0)
            found[k] = None if value is None else ints_of(self, value, k)
        return found

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        args = self._arguments(inputs)
        starts, ends = args["starts"], args["ends"]
        if starts is None or ends is None:
            raise self.error("starts and ends must be given")
        axes = onnx_axes(self, args["axes"] or tuple(range(len(starts))), x.ndim)
        steps = args["steps"] or (1,) * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
            raise self.error(f"starts {starts}, ends {ends}, axes {axes}, steps {steps}: one per axis, steps not 0")
        key: list[Any] = [slice(None)] * x.ndim
        for start, end, axis, step in zip(starts, ends, axes, steps):
            n = x.shape[axis]
            start, end = (v + n if v < 0 else v for v in (start, end))
            low, high = (0, n) if step > 0 else (-1, n - 1)
            start, end = min(max(start, low), high), min(max(end, low), high)
            key[axis] = slice(start, None if end < 0 else end, step)
        return [np.ascontiguousarray(x[tuple(key)])]


@register("Einsum")
class Einsum(Layer):
    """`Einsum(inputs...; equation)`: numpy's einsum, whose notation ONNX's is."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        equation = self.param("equation")
        if not isinstance(equation, str):
            raise self.error(f"parameter 'equation' must be text, got {equation!r}")
        self.equation = equation.replace(" ", "")
        expect_inputs(self, "one per term of the equation", 1, 64)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        self.check_work(einsum_work(self.equation, [np.shape(v) for v in inputs]), f"einsum {short(self.equation)!r}")
        try:
            return [np.asarray(np.einsum(self.equation, *inputs, optimize=len(inputs) > 2))]
        except ValueError as e:
            shapes = ", ".join(str(np.shape(v)) for v in inputs)
            raise self.error(f"equation {self.equation!r} does not fit inputs {shapes}: {e}") from None


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


@register("Pad")
class Pad(Layer):
    """`Pad(data, pads, constant_value, axes; mode)`: pads = begins of every padded axis, then
    their ends; negative pads crop. pnnx folds constant pads / value into params (`pads=`,
    `value=`), keeps the rest as inputs in ONNX's order, omitted ones dropped: an integer 1-D
    input after pads is the axes, anything else the value."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return "pads" not in op.params and not inputs_constant(op)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        mode = self.param("mode", "constant")
        if mode not in _PAD_MODES:
            raise self.error(f"mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
        self.mode: Any = mode  # one of np.pad's modes (checked above)
        expect_inputs(self, "data, pads, constant_value, axes", 1, 4)

    def _arguments(self, inputs: list[Any], x: np.ndarray) -> tuple[tuple[int, ...], Any, tuple[int, ...] | None]:
        rest = list(inputs[1:])
        pads = self.op.params.get("pads")
        if pads is None:
            if not rest:
                raise self.error("missing pads (neither a param nor an input)")
            pads = rest.pop(0)
        value: Any = self.op.params.get("value")
        axes: Any = self.op.params.get("axes")
        for v in rest:
            arr = np.asarray(v)
            is_axes = arr.ndim == 1 and arr.dtype.kind in "iu" and (x.dtype.kind not in "iu" or value is not None)
            if is_axes and axes is None:
                axes = arr
            elif value is None:
                value = v
            else:
                raise self.error(f"expected at most pads, constant_value and axes, got {len(inputs)} inputs")
        pads_t = ints_of(self, pads, "pads")
        axes_t = None if axes is None else onnx_axes(self, ints_of(self, axes, "axes"), x.ndim)
        return pads_t, value, axes_t

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        pads, value, axes = self._arguments(inputs, x)
        axes = tuple(range(x.ndim)) if axes is None else axes
        if len(pads) != 2 * len(axes):
            raise self.error(f"pads must have 2 x {len(axes)} entries (begins, then ends), got {len(pads)}")
        widths = [(0, 0)] * x.ndim
        for k, a in enumerate(axes):
            widths[a] = (pads[k], pads[k + len(axes)])
        # Negative pads crop first; the rest pads.
        crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for (b, e), n in zip(widths, x.shape))
        x = x[crop]
        grow = [(max(b, 0), max(e, 0)) for b, e in widths]
        self.check_size(tuple(n + b + e for n, (b, e) in zip(x.shape, grow)))
        if self.mode == "constant":
            fill = 0 if value is None else scalar_of(self, value, "constant_value")
            return [np.pad(x, grow, mode="constant", constant_values=np.asarray(fill, x.dtype))]
        if self.mode == "reflect" and any((b or e) and n < 2 for n, (b, e) in zip(x.shape, grow)):
            raise self.error(f"reflect padding needs at least 2 entries on each padded axis, input {x.shape}")
        if any((b or e) and n == 0 for n, (b, e) in zip(x.shape, grow)):
            raise self.error(f"{self.mode} padding of an empty axis, input {x.shape}")
        return [np.pad(x, grow, mode=self.mode)]
