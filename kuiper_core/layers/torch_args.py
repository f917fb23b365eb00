"""The torch-style arguments that pnnx writes, read once at build time.

Shared by the shape, tensor and reduce layers: axis params (`dim=1`, `dim=(1,-1)`,
`dim=None`), torch dtype names (`dtype=torch.long`), and the dtype an operator declares
for its outputs (`#3=(2,3)i64`), which is what a layer must return.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operator, numpy_dtype
from ..torch_dtypes import TORCH_DTYPES
from .registry import Layer

INT_MAX = 2147483647  # pnnx's "to the end" / "no select" marker in Tensor.slice
MAX_RANK = 64  # NumPy's most dimensions (NPY_MAXDIMS): a larger axis number names no axis


def torch_dtype(layer: Layer, key: str = "dtype") -> np.dtype | None:
    """The NumPy dtype of a `dtype=torch.X` param; None when absent or `None`."""
    value = layer.param(key, None)
    if value is None:
        return None
    if isinstance(value, str) and value in TORCH_DTYPES:
        return TORCH_DTYPES[value]
    known = ", ".join(sorted(k for k in TORCH_DTYPES if k.count(".") == 1))
    raise layer.error(f"parameter '{key}' must be a torch dtype ({known}), got {value!r}")


def declared_dtype(op: Operator, index: int = 0) -> np.dtype | None:
    """The dtype the graph declares for output `index` (None when not annotated)."""
    if index >= len(op.outputs):
        return None
    name = op.outputs[index].dtype
    if name is None or name == "bf16":
        return None
    return numpy_dtype(name)


def axes_param(layer: Layer, key: str = "dim", default: Any = None) -> tuple[int, ...] | None:
    """`dim=1` / `dim=(1,-1)` -> a tuple of ints; absent or `dim=None` -> None (all axes)."""
    value = layer.param(key, default)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(set(value)) != len(value):
            raise layer.error(f"parameter '{key}' repeats an axis: {tuple(value)}")
        return tuple(value)
    raise layer.error(f"parameter '{key}' must be an int, a tuple of ints or None, got {value!r}")


def normalize_axis(layer: Layer, axis: int, ndim: int) -> int:
    """A possibly negative axis of an ndim-rank tensor -> 0..ndim-1, or a clear error."""
    if not -ndim <= axis < ndim:
        raise layer.error(f"dim {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def normalize_axes(layer: Layer, axes: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    out = tuple(normalize_axis(layer, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise layer.error(f"dims {axes} name the same axis twice for a tensor of rank {ndim}")
    return out


def input_rank(op: Operator, index: int = 0) -> int | None:
    """The rank of input `index` when its shape is annotated (even with `?` dims)."""
    shape = op.inputs[index].shape if index < len(op.inputs) else None
    return None if shape is None else len(shape)


def as_array(value: Any, dtype: np.dtype | None = None) -> np.ndarray:
    """NumPy scalars (0-d reductions, x[i] of a 1-D array) -> 0-d arrays; arrays as they are."""
    if isinstance(value, np.ndarray) and (dtype is None or value.dtype == dtype):
        return value
    return np.asarray(value, dtype=dtype)


def input_index(op: Operator, name: str) -> int | None:
    """The position of the input named `$name`, or None."""
    for i, n in enumerate(op.input_names):
        if n == name:
            return i
    return None
