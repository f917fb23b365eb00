"""What every ncnn layer shares: its params by name (schema.Params), its weights as float32,
ncnn's fused activations, and one error form naming the layer and the param."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from ...graph import Operator
from ...layers.activation import sigmoid
from ...layers.linear import matmul_shape
from ...layers.registry import Layer, register
from ..schema import ACTIVATIONS, Params

F32 = np.float32
L = TypeVar("L", bound=type[Layer])


def ncnn_layer(*types: str) -> Callable[[L], L]:
    """Register a layer class for ncnn types (`ncnn.Convolution`): the graph's op types."""
    return register(*(f"ncnn.{t}" for t in types))


class NcnnLayer(Layer):
    """A layer reading ncnn's numbered params by their names (`self.p.integer("num_output")`)."""

    n_inputs: int | None = 1  # None: any number

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.ncnn_type = op.type.removeprefix("ncnn.")
        self.p = Params(self.ncnn_type, {int(k): v for k, v in op.params.items()})  # type: ignore[misc]  # ncnn param values: ints, floats or arrays by key
        if self.n_inputs is not None and len(op.inputs) != self.n_inputs:
            raise self.error(f"expected {self.n_inputs} bottom blob(s), got {len(op.inputs)}")
        try:
            self.setup()
        except ValueError as e:
            raise self.error(str(e)) from None

    def setup(self) -> None:
        """Read params and weights (ValueError: a message naming the param)."""

    def w(self, name: str) -> np.ndarray:
        return np.asarray(self.weight(name), dtype=F32)

    def _check_product(self, a: np.ndarray, b: np.ndarray) -> None:
        """a @ b within max_operator_work (nothing said of shapes that do not multiply: matmul says it)."""
        shape = matmul_shape(a.shape, b.shape)
        if shape is not None:
            self.check_work(math.prod(shape) * a.shape[-1], f"multiplying {a.shape} by {b.shape}")


def activation(p: Params) -> Callable[[np.ndarray], np.ndarray] | None:
    """ncnn's fused activation (9=activation_type, 10=activation_params), or None."""
    kind, args = p.integer("activation_type"), p.numbers("activation_params")
    if kind not in ACTIVATIONS:
        raise ValueError(f"param 9 (activation_type) must be one of {sorted(ACTIVATIONS)}, got {kind}")
    if kind == 0:
        return None
    if kind == 1:
        slope = F32(args[0]) if args else F32(0)
        return (lambda y: np.maximum(y, 0, out=y)) if slope == 0 else (lambda y: np.where(y < 0, y * slope, y))
    if kind == 2:
        slope = F32(args[0] if args else 0)
        return lambda y: np.where(y < 0, y * slope, y)
    if kind == 3:
        lo, hi = (F32(args[0]), F32(args[1])) if len(args) >= 2 else (F32(-np.inf), F32(np.inf))
        return lambda y: np.clip(y, lo, hi, out=y)
    if kind == 4:
        return lambda y: sigmoid(y, y)
    if kind == 5:
        return mish
    alpha, beta = (F32(args[0]), F32(args[1])) if len(args) >= 2 else (F32(0.2), F32(0.5))
    return lambda y: hardswish(y, alpha, beta)


def mish(x: np.ndarray) -> np.ndarray:
    return (x * np.tanh(np.logaddexp(F32(0), x))).astype(F32)


def hardswish(x: np.ndarray, alpha: np.float32, beta: np.float32) -> np.ndarray:
    return x * np.clip(x * alpha + beta, F32(0), F32(1))


def axis_of(axis: int, ndim: int, what: str = "axis") -> int:
    """ncnn's axis (negative from the end) as a NumPy axis of a blob of `ndim` dims."""
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise ValueError(f"{what} {axis} is out of range for a blob of {ndim} dim(s)")
    return a
