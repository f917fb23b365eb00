"""Helpers shared by the layers of ONNX operators that pnnx keeps as ONNX nodes (onnx_*.py,
spectral.py).

How pnnx writes such a node (verified with pnnx 20261020): the ONNX op type as the type
(`TopK`, `LSTM`), the ONNX attributes as params under their ONNX names (`axis=-1 largest=1`),
and the node's inputs positionally, without `$name`s. A constant input becomes a
`pnnx.Attribute` (a tensor) or an input-less `pnnx.Expression` (`expr=3`, a scalar, which
the engine hands over as a Python number); some constant inputs pnnx folds into params
instead (`Pad`'s `pads=(1,2,3,1)`, `ReduceMax`'s `axes=(1,3)`, `Resize`'s `scales=`/`sizes=`).
ONNX's omitted optional inputs (`""`) are dropped, not kept as placeholders: a layer whose
optional inputs sit between others (LSTM's `B, sequence_lens, initial_h`, STFT's `window,
frame_length`) tells them apart by rank and dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operand, Operator
from ._common import check_index
from .registry import Layer


def is_constant(o: Operand) -> bool:
    """True when the operand is a constant of the file (its value is known at build)."""
    p = o.producer
    return p is not None and (p.type == "pnnx.Attribute" or (p.type == "pnnx.Expression" and not p.inputs))


def inputs_constant(op: Operator, first: int = 1) -> bool:
    """True when every input from `first` on is a constant of the file."""
    return all(is_constant(o) for o in op.inputs[first:])


def ints_of(layer: Layer, value: Any, what: str) -> tuple[int, ...]:
    """An int, a list of ints or an integer tensor (a shape, pads, axes) as a tuple."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise layer.error(f"{what} must be integers (a scalar or 1-D), got {arr.dtype} of shape {arr.shape}")
    return tuple(int(v) for v in arr.reshape(-1))


def scalar_of(layer: Layer, value: Any, what: str) -> Any:
    """A scalar input (0-d or one element) as a NumPy scalar."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise layer.error(f"{what} must be a scalar, got shape {arr.shape}")
    return arr.reshape(())[()]


def onnx_axes(layer: Layer, axes: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """ONNX axes (each in [-ndim, ndim-1], none repeated) -> 0..ndim-1."""
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise layer.error(f"axis {a} is out of range for a tensor of rank {ndim}")
        out.append(a + ndim if a < 0 else a)
    if len(set(out)) != len(out):
        raise layer.error(f"axes {axes} name the same axis twice for a tensor of rank {ndim}")
    return tuple(out)


def param_or_input(layer: Layer, key: str, inputs: list[Any], index: int | None) -> Any:
    """The value of an ONNX input that pnnx may have folded into a param of the same name:
    the param when present, else input `index` (None: neither given)."""
    if key in layer.op.params and layer.op.params[key] is not None:
        return layer.op.params[key]
    if index is not None and index < len(inputs):
        return inputs[index]
    return None


def check_index_range(layer: Layer, index: np.ndarray, size: int, what: str) -> np.ndarray:
    """Integer indices in [-size, size-1] (ONNX's range) as intp, negatives wrapped."""
    index = check_index(layer, index, size, what).astype(np.intp)
    return np.where(index < 0, index + size, index)


def expect_inputs(layer: Layer, names: str, low: int, high: int | None = None) -> None:
    """An error at build unless the operator has `low` to `high` (default: exactly `low`)
    inputs; `names` lists them as ONNX does (`"input, shape"`)."""
    n, high = len(layer.op.inputs), low if high is None else high
    if not low <= n <= high:
        want = str(low) if low == high else f"{low} to {high}"
        raise layer.error(f"expected {want} input(s) ({names}), got {n}")
