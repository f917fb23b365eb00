"""Reductions (mean, sum, prod, amax/amin, max/min, argmax/argmin, norm, std/var,
logsumexp) and clamp.

pnnx writes `dim` as a tuple for most reductions (`dim=(1)`, `dim=(1,-1)`), as an int
for max/min/argmax/argmin/prod (`dim=1`), and leaves it out (or `None`) for a reduction
over everything, whose result is a 0-d array. `torch.max(x, dim)` and `torch.min(x, dim)`
are two-output operators (values, int64 indices); pnnx drops the indices output when
nothing uses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph import Operator
from .registry import Layer, register
from .torch_args import as_array, axes_param, declared_dtype, input_index, normalize_axes, normalize_axis, torch_dtype


class _Reduce(Layer):
    """A reduction over `dim` (all axes when absent) with `keepdim`.

    Subclasses implement `reduce(x, axes, keepdims)`; the result is cast to the declared
    output dtype (e.g. torch.sum of int64 stays int64; NumPy's float32 stays float32)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dims = axes_param(self, "dim")
        self.keepdim = bool(self.param("keepdim", False))
        self.dtype = declared_dtype(op)
        self.cast = torch_dtype(self) if "dtype" in op.params else None  # torch.sum(x, dtype=…)
        self._axes: dict[int, tuple[int, ...] | None] = {}

    def axes(self, ndim: int) -> tuple[int, ...] | None:
        axes = self._axes.get(ndim, ())
        if axes == ():
            axes = self._axes[ndim] = None if self.dims is None else normalize_axes(self, self.dims, ndim)
        return axes

    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        raise NotImplementedError

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if self.cast is not None:
            x = x.astype(self.cast, copy=False)
        y = as_array(self.reduce(x, self.axes(x.ndim), self.keepdim))
        if self.dtype is not None and y.dtype != self.dtype:
            y = y.astype(self.dtype)
        return [y]


@register("torch.mean")
class Mean(_Reduce):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        return np.mean(x, axis=axes, keepdims=keepdims)


@register("torch.sum")
class Sum(_Reduce):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        # torch sums bool/int to int64 (NumPy would keep int32 as int32 on some platforms)
        return np.sum(x, axis=axes, keepdims=keepdims, dtype=np.int64 if x.dtype.kind in "biu" else None)


@register("torch.prod")
class Prod(_Reduce):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        return np.prod(x, axis=axes, keepdims=keepdims, dtype=np.int64 if x.dtype.kind in "biu" else None)


@register("torch.amax")
class AMax(_Reduce):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        return np.max(x, axis=axes, keepdims=keepdims)


@register("torch.amin")
class AMin(_Reduce):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        return np.min(x, axis=axes, keepdims=keepdims)


@register("torch.logsumexp")
class LogSumExp(_Reduce):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        m = np.max(x, axis=axes, keepdims=True)
        m = np.where(np.isfinite(m), m, np.zeros((), x.dtype))  # all -inf rows stay -inf
        with np.errstate(divide="ignore"):
            y = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
        return y if keepdims else np.squeeze(y, axis=axes)


@register("torch.norm")
class Norm(_Reduce):
    """Vector p-norm over `dim` (pnnx writes p="fro" as p=2): p = 2, 1, inf, -inf, 0
    (count of non-zeros) or any other number."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        p = self.param("p", 2)
        if p == "fro":
            p = 2
        elif isinstance(p, str) and p.lstrip("+-") == "inf":
            p = -math.inf if p.startswith("-") else math.inf
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            raise self.error(
                f"parameter 'p' must be a number, inf, -inf or 'fro', got {p!r} (matrix norms like 'nuc' are not supported)"
            )
        self.p = float(p)

    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        return vector_norm(x, self.p, axes, keepdims)


def vector_norm(x: np.ndarray, p: float, axes: int | tuple[int, ...] | None, keepdims: bool) -> Any:
    """||x||_p over axes as torch.linalg.vector_norm, in x's dtype (also used by F.normalize)."""
    a = np.abs(x)
    if p == 2:
        return np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdims))
    if p == 1:
        return np.sum(a, axis=axes, keepdims=keepdims)
    if p == math.inf:
        return np.max(a, axis=axes, keepdims=keepdims)
    if p == -math.inf:
        return np.min(a, axis=axes, keepdims=keepdims)
    if p == 0:
        return np.sum(x != 0, axis=axes, keepdims=keepdims).astype(x.dtype)
    exp = np.asarray(p, x.dtype)
    return np.sum(a**exp, axis=axes, keepdims=keepdims) ** (np.asarray(1, x.dtype) / exp)


class _Moment(_Reduce):
    """std/var: `unbiased` (True/False, or 0/1 as pnnx prints `correction=`) or `correction`."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if "correction" in op.params:
            correction = self.param("correction")
        else:
            correction = self.param("unbiased", True)
        if correction is None:
            correction = 1
        if not isinstance(correction, (bool, int, float)):
            raise self.error(f"'unbiased'/'correction' must be a bool or a number, got {correction!r}")
        self.ddof = float(correction)


@register("torch.var")
class Var(_Moment):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.var(x, axis=axes, ddof=self.ddof, keepdims=keepdims)


@register("torch.std")
class Std(_Moment):
    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.std(x, axis=axes, ddof=self.ddof, keepdims=keepdims)


@register("aten::var_mean", "aten::std_mean")
class MomentAndMean(_Moment):
    """`torch.var_mean` / `torch.std_mean` (kept as TorchScript's, positional: self, dim,
    unbiased, keepdim): two outputs, the moment and the mean."""

    arg_names = ("self", "dim", "unbiased", "keepdim")

    def reduce(self, x: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        fn = np.std if self.type == "aten::std_mean" else np.var
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(x, axis=axes, ddof=self.ddof, keepdims=keepdims)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        (moment,) = super().forward(inputs, out)
        x = inputs[0]
        mean = as_array(np.mean(x, axis=self.axes(x.ndim), keepdims=self.keepdim)).astype(moment.dtype, copy=False)
        return [moment, mean][: len(self.op.outputs)]


# -- max/min with indices, argmax/argmin -----------------------------------------------------------------
class _ArgReduce(Layer):
    """Shared by max/min (values [+ indices]) and argmax/argmin: one `dim` (an int) or
    none (over everything, flattened like PyTorch)."""

    # NumPy's reductions, typed loosely: their stubs type axis=int with keepdims=True poorly.
    arg: Callable[..., Any] = staticmethod(np.argmax)
    full: Callable[..., Any] = staticmethod(np.max)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        dim = self.param("dim", None)
        self.dim = None if dim is None else self.int_param("dim")
        self.keepdim = bool(self.param("keepdim", False))

    def indices(self, x: np.ndarray) -> tuple[np.ndarray, int | None]:
        """int64 indices of the extreme along dim (keepdims form) and the normalised axis."""
        if self.dim is None:
            return as_array(self.arg(x)).astype(np.int64, copy=False), None
        d = normalize_axis(self, self.dim, max(x.ndim, 1))
        if x.ndim == 0:
            return np.zeros((), np.int64), None
        return self.arg(x, axis=d, keepdims=True).astype(np.int64, copy=False), d


class _MaxMin(_ArgReduce):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if len(op.inputs) != 1:
            raise self.error(
                f"expected one input (the two-input form is pnnx.Expression max/min), got {len(op.inputs)}"
            )
        if self.dim is None and len(op.outputs) != 1:
            raise self.error(f"without dim it has one output, the graph declares {len(op.outputs)}")
        if len(op.outputs) not in (1, 2):
            raise self.error(f"expected 1 output (values) or 2 (values, indices), got {len(op.outputs)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if self.dim is None:
            return [as_array(self.full(x))]
        if len(self.op.outputs) == 1:  # values only: no need for the indices
            d = normalize_axis(self, self.dim, max(x.ndim, 1))
            return [as_array(self.full(x, axis=d, keepdims=self.keepdim)) if x.ndim else x.copy()]
        idx, axis = self.indices(x)
        if axis is None:  # a 0-d input: itself, index 0 (a copy: this layer does not return views)
            return [x.copy(), idx]
        values = np.take_along_axis(x, idx, axis=axis)
        if not self.keepdim:
            values, idx = np.squeeze(values, axis=axis), np.squeeze(idx, axis=axis)
        return [values, idx]


@register("torch.max")
class Max(_MaxMin):
    pass


@register("torch.min")
class Min(_MaxMin):
    arg = staticmethod(np.argmin)
    full = staticmethod(np.min)


class _Arg(_ArgReduce):
    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        idx, d = self.indices(x)
        if d is None:  # over everything: 0-d, or all-ones shape with keepdim (PyTorch >= 2)
            return [idx.reshape((1,) * x.ndim) if self.keepdim else idx]
        return [idx if self.keepdim else np.squeeze(idx, axis=d)]


@register("torch.argmax")
class ArgMax(_Arg):
    pass


@register("torch.argmin")
class ArgMin(_Arg):
    arg = staticmethod(np.argmin)


@register("torch.topk")
class TopK(Layer):
    """`torch.topk(x, k, dim=-1, largest=True, sorted=True)`: (values, indices) of the k
    largest (or smallest) along `dim`, in order (also when sorted=False, which leaves the
    order to the implementation). NaN counts as the largest, as in PyTorch."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.k = self.int_param("k", low=0)
        self.dim = self.int_param("dim", -1)
        self.largest = bool(self.param("largest", True))
        if len(op.outputs) not in (1, 2):
            raise self.error(f"expected 2 outputs (values, indices), got {len(op.outputs)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        d = normalize_axis(self, self.dim, max(x.ndim, 1))
        if x.ndim == 0:
            x = x.reshape(1)
        if self.k > x.shape[d]:
            raise self.error(f"k={self.k} is more than the {x.shape[d]} entries of dim {self.dim}")
        order = np.argsort(x, axis=d, kind="stable")  # NaN sorts last: the largest
        if self.largest:
            order = np.flip(order, axis=d)
        idx = np.take(order, np.arange(self.k), axis=d).astype(np.int64, copy=False)
        values = np.take_along_axis(x, idx, axis=d)
        return [values, idx][: len(self.op.outputs)]


@register("aten::sort")
class Sort(Layer):
    """`torch.sort(x, dim=-1, descending=False)` (pnnx keeps TorchScript's aten::sort with
    positional dim and descending): (values, indices). Ties keep their order, ascending and
    descending (torch's CPU sort does so for these sizes); NaN counts as the largest."""

    arg_names = ("self", "dim", "descending")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", -1)
        self.descending = bool(self.param("descending", False))
        if len(op.outputs) not in (1, 2):
            raise self.error(f"expected 2 outputs (values, indices), got {len(op.outputs)}")

    def order(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """(int64 sorting indices along the axis, the axis) of a tensor of rank >= 1."""
        d = normalize_axis(self, self.dim, x.ndim)
        if self.descending:  # stable on the reversed axis, mapped back: ties keep their order
            n = x.shape[d]
            order = n - 1 - np.flip(np.argsort(np.flip(x, axis=d), axis=d, kind="stable"), axis=d)
        else:
            order = np.argsort(x, axis=d, kind="stable")
        return order.astype(np.int64, copy=False), d

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim == 0:
            return [x.copy(), np.zeros((), np.int64)][: len(self.op.outputs)]
        idx, d = self.order(x)
        return [np.take_along_axis(x, idx, axis=d), idx][: len(self.op.outputs)]


@register("aten::argsort")
class ArgSort(Sort):
    """`torch.argsort(x, dim, descending)`: sort's indices (the one output)."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        return [self.order(x)[0] if x.ndim else np.zeros((), np.int64)]


class _OrderStatistic(Layer):
    """The value at one rank along `dim` (values, int64 indices), keepdim as given."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", -1)
        self.keepdim = bool(self.param("keepdim", False))

    def rank(self, n: int) -> int:
        raise NotImplementedError

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim == 0:
            x = x.reshape(1)
        d = normalize_axis(self, self.dim, x.ndim)
        r = self.rank(x.shape[d])
        order = np.argsort(x, axis=d, kind="stable")  # NaN last
        idx = np.take(order, [r], axis=d).astype(np.int64)
        values = np.take_along_axis(x, idx, axis=d)
        if not self.keepdim:
            idx, values = idx.squeeze(d), values.squeeze(d)
        return [values, idx][: len(self.op.outputs)]


@register("aten::median")
class Median(_OrderStatistic):
    """`torch.median(x, dim, keepdim)`: the lower of the two middle values for an even count."""

    arg_names = ("self", "dim", "keepdim")

    def rank(self, n: int) -> int:
        if n == 0:
            raise self.error("median of an empty dim")
        return (n - 1) // 2


@register("aten::kthvalue")
class KthValue(_OrderStatistic):
    """`torch.kthvalue(x, k, dim, keepdim)`: the k-th smallest (k from 1)."""

    arg_names = ("self", "k", "dim", "keepdim")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.k = self.int_param("k", low=1)

    def rank(self, n: int) -> int:
        if self.k > n:
            raise self.error(f"k={self.k} is more than the {n} entries of dim {self.dim}")
        return self.k - 1


# -- clamp -----------------------------------------------------------------------------------------------------
@register("torch.clamp")
class Clamp(Layer):
    """`torch.clamp(x, min, max)` / `torch.clip`: bounds are numbers (`min=0.1`, `None` for
    none) or operands (`$min=1 $max=2`, broadcast). NaN stays NaN; min > max gives max."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.bounds: list[tuple[int | None, Any]] = []
        for key in ("min", "max"):
            idx = input_index(op, key)
            value = None if idx is not None else self.param(key, None)
            if value is not None:  # pnnx writes an infinite bound as the string 'inf' (ONNX Clip to +inf)
                value = self.number_param(key) if not isinstance(value, (bool, list, tuple)) else value
                if isinstance(value, (bool, list, tuple, str)):
                    raise self.error(f"parameter '{key}' must be a number or None, got {value!r}")
            self.bounds.append((idx, value))
        self.dtype = declared_dtype(op)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        lo, hi = (inputs[i] if i is not None else v for i, v in self.bounds)
        dtype = self.dtype or x.dtype
        if lo is None and hi is None:
            return [x.astype(dtype)]
        y = out[0]
        if y is not None and y.shape == np.broadcast_shapes(x.shape, np.shape(lo), np.shape(hi)) and y.dtype == dtype:
            return [np.clip(x, lo, hi, out=y, casting="unsafe")]
        r = np.clip(x, lo, hi)
        return [r if r.dtype == dtype else r.astype(dtype)]
