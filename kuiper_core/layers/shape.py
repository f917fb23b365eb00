"""Shape layers: reshape/view, flatten/unflatten, transpose/permute, squeeze/unsqueeze,
slice/select/narrow, expand, repeat, contiguous and dtype casts.

Most of them return NumPy views of their input (`returns_views = True`): no data moves,
consumers read the same memory. They never write into `out` (the runtime gives view
layers none) and never into their input.

Batch: the runtime lets dim 0 of the model inputs differ from the traced shapes. Ops with
a `dim` param follow naturally; the two that bake absolute sizes into their params adapt:
- Tensor.reshape/view: see `Reshape` (the batch rule).
- Tensor.expand: a size equal to the traced batch on the batch axis follows the input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operator
from .registry import Layer, register
from .torch_args import (
    INT_MAX,
    MAX_RANK,
    as_array,
    input_index,
    input_rank,
    normalize_axes,
    normalize_axis,
    torch_dtype,
)


def _traced_shape(op: Operator, index: int = 0) -> tuple[int, ...] | None:
    return op.inputs[index].static_shape if index < len(op.inputs) else None


def _check_sizes(layer: Layer, sizes: tuple[int, ...], key: str) -> None:
    """A target shape: non-negative sizes and at most one -1 (inferred)."""
    if sum(1 for s in sizes if s == -1) > 1 or any(s < -1 for s in sizes):
        raise layer.error(f"parameter '{key}' must hold sizes >= 0 and at most one -1, got {sizes}")


def axis_key(positions: dict[int, Any]) -> tuple[Any, ...]:
    """A NumPy basic-indexing key that puts `positions[d]` (an int or a slice) at axis d.

    Non-negative axes count from the front, negative ones from the back (after an
    Ellipsis), so the key works without knowing the rank, like pnnx's own Python.
    """
    front = [d for d in positions if d >= 0]
    back = [d for d in positions if d < 0]
    key: list[Any] = [slice(None)] * (max(front) + 1 if front else 0)
    for d in front:
        key[d] = positions[d]
    if back:
        tail: list[Any] = [slice(None)] * (-min(back))
        for d in back:
            tail[d] = positions[d]
        key += [Ellipsis] + tail
    return tuple(key)


# -- reshape --------------------------------------------------------------------------------
@register("Tensor.reshape", "Tensor.view")
class Reshape(Layer):
    """`shape=(…)`: the traced sizes (-1 at most once), or sizes computed at run time from
    the actual input (a `$shape` operand such as `[size(@0,0),-1]`).

    The batch rule. pnnx records the sizes seen while tracing, so `x.view(x.size(0), -1)`
    traced at batch 1 arrives as `shape=(1,256)`. When the input differs from the traced
    input only in dim 0 (batch B0 traced, B now) and shape[0] is a multiple of B0, the
    first target size is scaled by B/B0: (1,256) -> (4,256), and (24,5) traced at batch 2
    -> (48,5) at batch 4. Batch is the outermost axis, so this gives exactly the stacked
    results of B/B0 separate runs at the traced batch. Otherwise the shape is used as
    written (a -1 may still absorb the difference), and a mismatch is a clear error.
    A shape computed at run time already follows the input: no batch rule.
    """

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.shape: tuple[int, ...] = self.ints_param("shape")
        _check_sizes(self, self.shape, "shape")
        self.traced = None if "shape" in self.computed_params else _traced_shape(op)
        self._by_input: dict[tuple[int, ...], tuple[int, ...]] = {}

    def target(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape for an input of this shape (the batch rule above)."""
        shape, traced = self.shape, self.traced
        if traced is None or in_shape == traced or not shape or not traced or not in_shape:
            return shape
        b0, b = traced[0], in_shape[0]
        if (
            len(in_shape) == len(traced)
            and in_shape[1:] == traced[1:]
            and b0 > 0
            and shape[0] > 0
            and shape[0] % b0 == 0
        ):
            return (shape[0] // b0 * b,) + shape[1:]
        return shape

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        shape = self._by_input.get(x.shape)
        if shape is None:
            shape = self._by_input[x.shape] = self.target(x.shape)
        try:
            return [x.reshape(shape)]
        except ValueError:
            traced = f" (traced with input {self.traced})" if self.traced else ""
            raise self.error(f"cannot reshape an input of shape {x.shape} to {shape}{traced}") from None


@register("Tensor.reshape_as", "aten::view_as", "aten::reshape_as")
class ReshapeAs(Layer):
    """`x.reshape_as(other)` / `x.view_as(other)`: x in the shape of the second input
    (pnnx keeps view_as as TorchScript's `aten::view_as` at every optlevel; pnnx 20240226 also
    wrote reshape_as so)."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, other = inputs[0], inputs[1]
        if x.size != other.size:
            raise self.error(f"cannot reshape {x.shape} ({x.size} elements) as {other.shape} ({other.size} elements)")
        return [x.reshape(other.shape)]


@register("torch.flatten")
class Flatten(Layer):
    """Merge dims start_dim..end_dim (default 0..-1; pnnx writes nn.Flatten as torch.flatten
    with start_dim=1)."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.start = self.int_param("start_dim", 0)
        self.end = self.int_param("end_dim", -1)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim == 0:
            return [x.reshape(1)]
        s = normalize_axis(self, self.start, x.ndim)
        e = normalize_axis(self, self.end, x.ndim)
        if s > e:
            raise self.error(f"start_dim {self.start} comes after end_dim {self.end} for rank {x.ndim}")
        return [x.reshape(x.shape[:s] + (int(np.prod(x.shape[s : e + 1])),) + x.shape[e + 1 :])]


@register("Tensor.unflatten")
class Unflatten(Layer):
    """Split dim `dim` into `sizes` (one -1 allowed)."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim")
        self.sizes = self.ints_param("sizes")
        _check_sizes(self, self.sizes, "sizes")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        d = normalize_axis(self, self.dim, x.ndim)
        try:
            return [x.reshape(x.shape[:d] + self.sizes + x.shape[d + 1 :])]
        except ValueError:
            raise self.error(f"cannot unflatten dim {d} of size {x.shape[d]} into {self.sizes}") from None


@register("aten::unflatten")
class AtenUnflatten(Unflatten):
    """`x.unflatten(dim, sizes)` as pnnx wrote it before late 2025 (20250530): TorchScript's
    aten::unflatten with positional operands."""

    arg_names = ("input", "dim", "sizes")


# -- axis order -------------------------------------------------------------------------------
@register("torch.transpose")
class Transpose(Layer):
    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim0 = self.int_param("dim0")
        self.dim1 = self.int_param("dim1")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        return [np.swapaxes(x, normalize_axis(self, self.dim0, x.ndim), normalize_axis(self, self.dim1, x.ndim))]


@register("torch.t")
class T(Layer):
    """`torch.t(x)` / `x.t()`: a 2-D tensor transposed (0-D and 1-D as they are)."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim > 2:
            raise self.error(f"expects a tensor of rank 2 or less, got shape {x.shape}")
        return [x.T]


@register("Tensor.permute", "torch.permute")
class Permute(Layer):
    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dims = self.ints_param("dims")
        self._perm: dict[int, tuple[int, ...]] = {}
        rank = input_rank(op)
        if rank is not None:
            self._perm[rank] = self._check(rank)

    def _check(self, ndim: int) -> tuple[int, ...]:
        if len(self.dims) != ndim:
            raise self.error(f"dims {self.dims} must list all {ndim} axes of the input once")
        return normalize_axes(self, self.dims, ndim)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        perm = self._perm.get(x.ndim) or self._perm.setdefault(x.ndim, self._check(x.ndim))
        return [np.transpose(x, perm)]


# -- size-1 axes ----------------------------------------------------------------------------------
@register("torch.squeeze")
class Squeeze(Layer):
    """Drop size-1 axes: all of them (no `dim`), or those listed in `dim` that have size 1.

    Like PyTorch, it looks at the actual input: squeezing everything at batch 4 keeps the
    batch axis that a batch-1 trace would have dropped.
    """

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        dim = self.param("dim", None)
        self.dims = None if dim is None else self.ints_param("dim")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if self.dims is None:
            axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
        elif x.ndim == 0:
            return [x]
        else:
            axes = tuple(a for a in normalize_axes(self, self.dims, x.ndim) if x.shape[a] == 1)
        return [np.squeeze(x, axis=axes)] if axes else [x]


@register("torch.unsqueeze")
class Unsqueeze(Layer):
    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        return [np.expand_dims(x, normalize_axis(self, self.dim, x.ndim + 1))]


# -- indexing ---------------------------------------------------------------------------------------
def slice_key(layer: Layer) -> tuple[Any, ...]:
    """The indexing key of Tensor.slice's params (also Tensor.slice_copy's): `dim start end
    step [select]` or `dims starts ends steps selects` (see Slice)."""

    def optional(key: str) -> int | None:
        return layer.int_param(key) if layer.param(key, None) is not None else None

    if "dims" in layer.op.params:
        dims = layer.ints_param("dims")
        n = len(dims)

        def per_dim(key: str, default: list[int] | None = None) -> tuple[int, ...]:
            values = layer.ints_param(key) if default is None else layer.ints_param(key, default=default)
            if len(values) != n:
                raise layer.error(f"parameter '{key}' must have {n} entries (one per dim in {dims}), got {values}")
            return values

        starts, ends = per_dim("starts"), per_dim("ends")
        steps, selects = per_dim("steps", [1] * n), per_dim("selects", [INT_MAX] * n)
        items: list[tuple[int, int | None, int | None, int | None, int]] = list(zip(dims, starts, ends, steps, selects))
    else:
        select = optional("select")
        items = [
            (
                layer.int_param("dim"),
                optional("start"),
                optional("end"),
                optional("step"),
                INT_MAX if select is None else select,
            )
        ]
    dims_seen = [d for d, *_ in items]
    if len(set(dims_seen)) != len(dims_seen):
        raise layer.error(f"dims {tuple(dims_seen)} repeat an axis")
    if any(not -MAX_RANK <= d < MAX_RANK for d in dims_seen):
        raise layer.error(f"dims {tuple(dims_seen)} are out of range: a tensor has at most {MAX_RANK} axes")
    positions: dict[int, Any] = {}
    for d, start, end, step, select in items:
        if select != INT_MAX:
            positions[d] = select
            continue
        if step is not None and step < 1:
            raise layer.error(f"step on dim {d} must be >= 1, got {step}")
        positions[d] = slice(start, None if end is None or end >= INT_MAX else end, step)
    return axis_key(positions)


@register("Tensor.slice")
class Slice(Layer):
    """`x[…]` with steps >= 1 on one or more axes (basic indexing: the result is a view).

    pnnx writes either `dim start end step` (any of them may come from an operand, e.g.
    `$end=7` from `size(@0,1)`: the runtime resolves it into the param), or `dims starts
    ends steps selects` for several axes, where `selects[i] != INT_MAX` means "index axis
    i with that number" (the axis goes away; its start/end/step are placeholders).
    `end=INT_MAX` means "to the end". Axes are those of the input, negative ones counted
    from the back.
    """

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.key = slice_key(self)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        try:
            return [as_array(x[self.key])]
        except IndexError as e:
            raise self.error(f"cannot slice an input of shape {x.shape}: {e}") from None


@register("Tensor.select")
class Select(Layer):
    """`x.select(dim, index)` / `x[:, i]`: drops axis `dim` (a view). pnnx also writes an ONNX
    `Gather` of constant 1-D indices so: `index=(5,0,2)` takes those entries along `dim`
    (`torch.index_select`), and one index of a (1,) indices tensor is written `index=5` as a
    0-d one is: its declared output keeps the input's rank, and so does the answer."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", low=-MAX_RANK, high=MAX_RANK - 1)
        index = self.param("index")
        self.take: list[int] | None = None  # the entries a Gather takes, keeping the axis
        if isinstance(index, list) and index and all(isinstance(i, int) and not isinstance(i, bool) for i in index):
            self.take = index
        elif _keeps_rank(op):
            self.take = [self.int_param("index")]
        self.key = axis_key({self.dim: self.int_param("index")}) if self.take is None else ()

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        try:
            if self.take is None:
                return [as_array(x[self.key])]
            d = normalize_axis(self, self.dim, x.ndim)
            if not all(-x.shape[d] <= i < x.shape[d] for i in self.take):
                raise IndexError(f"index {self.take} is out of range for dim {d} of size {x.shape[d]}")
            return [np.take(x, self.take, axis=d)]
        except IndexError as e:
            raise self.error(f"cannot select from an input of shape {x.shape}: {e}") from None


def _keeps_rank(op: Operator) -> bool:
    """The output is declared with the input's rank (pnnx's Gather of a (1,) index)."""
    given, declared = op.inputs[0].shape if op.inputs else None, op.outputs[0].shape if op.outputs else None
    return given is not None and declared is not None and len(given) == len(declared)


@register("torch.narrow")
class Narrow(Layer):
    """`torch.narrow(x, dim, start, length)` = x[..., start:start+length, ...]."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim")
        self.start = self.int_param("start")
        self.length = self.int_param("length")
        if self.length < 0:
            raise self.error(f"length must be >= 0, got {self.length}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        d = normalize_axis(self, self.dim, x.ndim)
        start = self.start + x.shape[d] if self.start < 0 else self.start
        if not 0 <= start <= start + self.length <= x.shape[d]:
            raise self.error(
                f"start {self.start} + length {self.length} is out of range for dim {d} of size {x.shape[d]}"
            )
        return [x[axis_key({d: slice(start, start + self.length)})]]


# -- broadcasting copies ------------------------------------------------------------------------------
@register("Tensor.expand")
class Expand(Layer):
    """`x.expand(*sizes)`: a read-only broadcast view. -1 keeps the input's size; extra
    leading sizes add axes. `sizes` may be computed at run time (a `$sizes` operand such as
    `[size(@0,0),-1,-1]`).

    Batch: on the input's first axis, a traced size equal to the traced batch follows the
    actual batch (expand(2,3,4) traced on a (2,1,4) input gives (4,3,4) at batch 4)."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.sizes = self.ints_param("sizes")
        traced = None if "sizes" in self.computed_params else _traced_shape(op)
        self.traced_batch = traced[0] if traced else None
        self._by_input: dict[tuple[int, ...], tuple[int, ...]] = {}

    def target(self, sizes: tuple[int, ...], in_shape: tuple[int, ...]) -> tuple[int, ...]:
        lead = len(sizes) - len(in_shape)
        if lead < 0 or any(s < 0 for s in sizes[:lead]) or any(s < -1 for s in sizes):
            raise self.error(f"cannot expand an input of shape {in_shape} to {sizes}")
        shape = list(sizes[:lead])
        for i, (s, n) in enumerate(zip(sizes[lead:], in_shape)):
            if s == -1 or s == n:
                shape.append(n)
            elif n == 1:
                shape.append(s)
            elif i == 0 and s == self.traced_batch:
                shape.append(n)  # the batch rule
            else:
                raise self.error(f"cannot expand an input of shape {in_shape} to {sizes}")
        self.check_size(shape)  # a broadcast view costs nothing, but what reads it does
        return tuple(shape)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        shape = self._by_input.get(x.shape)
        if shape is None:
            shape = self._by_input[x.shape] = self.target(self.sizes, x.shape)
        return [np.broadcast_to(x, shape)]


@register("aten::broadcast_to")
class BroadcastTo(Expand):
    """`torch.broadcast_to(x, size)` (pnnx keeps TorchScript's aten::broadcast_to, with the
    size as a positional operand): expand's rules."""

    arg_names = ("self", "sizes")


@register("Tensor.expand_as")
class ExpandAs(Layer):
    """`x.expand_as(other)` (pnnx keeps it at optlevel 0/1): broadcast view to other's shape."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, other = inputs[0], inputs[1]
        try:
            return [np.broadcast_to(x, other.shape)]
        except ValueError:
            raise self.error(f"cannot expand an input of shape {x.shape} as {other.shape}") from None


@register("Tensor.repeat")
class Repeat(Layer):
    """`x.repeat(*sizes)`: tile; extra leading sizes add axes. One vectorised copy, written
    through an interleaved view (r0, n0, r1, n1, …) of the output."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.sizes = self.ints_param("sizes", high=self.size_limit)
        if any(r < 0 for r in self.sizes):
            raise self.error(f"repeat sizes must be >= 0, got {self.sizes}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        reps = self.sizes
        if len(reps) < x.ndim:
            raise self.error(f"{len(reps)} repeat sizes {reps} for an input of rank {x.ndim}: need at least {x.ndim}")
        dims = (1,) * (len(reps) - x.ndim) + x.shape
        shape = tuple(r * n for r, n in zip(reps, dims))
        y = out[0]
        if y is None or y.shape != shape or y.dtype != x.dtype or not y.flags.c_contiguous:
            self.check_size(shape)
            y = np.empty(shape, x.dtype)
        tiled = [v for pair in zip(reps, dims) for v in pair]
        single = [v for n in dims for v in (1, n)]
        y.reshape(tiled)[...] = x.reshape(single)
        return [y]


@register("torch.tile")
class Tile(Repeat):
    """`torch.tile(x, dims)`: repeat, with fewer dims than the input's rank meaning leading 1s."""

    def __init__(self, op: Operator) -> None:
        Layer.__init__(self, op)
        self.dims = self.ints_param("dims", high=self.size_limit)
        if any(r < 0 for r in self.dims):
            raise self.error(f"tile dims must be >= 0, got {self.dims}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        self.sizes = (1,) * max(0, inputs[0].ndim - len(self.dims)) + self.dims
        return super().forward(inputs, out)


@register("aten::tile")
class AtenTile(Tile):
    """torch.tile as pnnx 20240226 wrote it: TorchScript's aten::tile(self, dims)."""

    arg_names = ("input", "dims")


@register("torch.repeat_interleave")
class RepeatInterleave(Layer):
    """`torch.repeat_interleave(x, repeats, dim)`: each entry `repeats` times along dim (an
    int, or a 1-D tensor `$repeats` of counts); without dim, of the flattened input."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.repeats_input = input_index(op, "repeats")
        self.repeats = (
            None if self.repeats_input is not None else self.int_param("repeats", low=0, high=self.size_limit)
        )
        dim = self.param("dim", None)
        self.dim = None if dim is None else self.int_param("dim")

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return input_index(op, "repeats") is not None  # a tensor of counts: their sum

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        reps: Any = self.repeats if self.repeats_input is None else np.asarray(inputs[self.repeats_input])
        if self.dim is None:
            x, axis = x.reshape(-1), 0
        else:
            axis = normalize_axis(self, self.dim, max(x.ndim, 1))
        if isinstance(reps, np.ndarray) and (reps.dtype.kind not in "iu" or reps.ndim > 1 or (reps < 0).any()):
            raise self.error(f"repeats must be non-negative integers, got {reps.dtype} of shape {reps.shape}")
        try:
            return [np.repeat(x, reps, axis=axis)]
        except ValueError as e:
            raise self.error(f"cannot repeat an input of shape {x.shape} by {reps}: {e}") from None


@register("Tensor.contiguous")
class Contiguous(Layer):
    """A no-op for values (pnnx usually removes it): a C-contiguous array, a view if it is one."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.ascontiguousarray(inputs[0])]


# -- dtype casts ------------------------------------------------------------------------------------------
def _cast(x: np.ndarray, dtype: np.dtype, copy: bool = False) -> np.ndarray:
    # float -> int truncates toward zero like torch; NaN/inf casts are undefined in both,
    # so NumPy's "invalid value" warning is silenced rather than shown to the user.
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(dtype, copy=copy)


@register("Tensor.to")
class To(Layer):
    """`x.to(dtype)` / `x.float()` / `x.long()`: a cast; the input itself when the dtype is
    already right (unless `copy=True`)."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dtype = torch_dtype(self)
        self.copy = bool(self.param("copy", False))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])  # a number is a 0-d tensor (`torch.tensor(2.0).to(…)` at optlevel 0)
        if x.dtype.kind not in "biufc":  # an optlevel-0 operand may hold any constant
            raise self.error(f"expected a tensor or a number to convert, got {type(inputs[0]).__name__}")
        if self.dtype is None:
            return [x.copy() if self.copy else x]
        return [_cast(x, self.dtype, self.copy)]


@register("Tensor.type_as")
class TypeAs(Layer):
    """`x.type_as(other)`: x cast to other's dtype."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [_cast(inputs[0], inputs[1].dtype)]
