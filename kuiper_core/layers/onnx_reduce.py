"""ONNX reductions pnnx keeps as ONNX nodes: ReduceMax, ReduceMin, ArgMax, ArgMin, TopK, with
ONNX's semantics (axes as a param, folded by pnnx, or an input; keepdims; noop_with_empty_axes;
select_last_index; TopK's k as a param (opset 1) or an input (10+)); _onnx.py says how pnnx
writes such a node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operator
from ._onnx import expect_inputs, inputs_constant, ints_of, onnx_axes, param_or_input, scalar_of
from .registry import Layer, register


def _empty_identity(x: np.ndarray, largest: bool) -> Any:
    """What ReduceMax (largest) / ReduceMin of no entries gives: -inf / +inf, or the dtype's
    smallest / largest integer."""
    if x.dtype.kind == "f":
        return -np.inf if largest else np.inf
    info = np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
    if info is None:
        return not largest  # bool: max of nothing is False
    return info.min if largest else info.max


@register("ReduceMax", "ReduceMin")
class ReduceMaxMin(Layer):
    """`ReduceMax/ReduceMin(data, axes; keepdims=1, noop_with_empty_axes=0)`: no axes reduce
    every axis, or none with noop_with_empty_axes=1."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.largest = op.type == "ReduceMax"
        self.keepdims = bool(self.int_param("keepdims", 1))
        self.noop = bool(self.int_param("noop_with_empty_axes", 0))
        expect_inputs(self, "data, axes", 1, 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        given = param_or_input(self, "axes", inputs, 1)
        axes = () if given is None else onnx_axes(self, ints_of(self, given, "axes"), max(x.ndim, 1))
        if not axes:
            if self.noop:
                return [x.copy()]
            axes = tuple(range(x.ndim))
        fn = np.max if self.largest else np.min
        initial = _empty_identity(x, self.largest)
        return [np.asarray(fn(x, axis=axes, keepdims=self.keepdims, initial=initial))]


@register("ArgMax", "ArgMin")
class ArgMaxMin(Layer):
    """`ArgMax/ArgMin(data; axis=0, keepdims=1, select_last_index=0)`: int64 indices of the
    first (or last) extreme entry along axis."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.fn = np.argmax if op.type == "ArgMax" else np.argmin
        self.axis = self.int_param("axis", 0)
        self.keepdims = bool(self.int_param("keepdims", 1))
        self.last = bool(self.int_param("select_last_index", 0))
        expect_inputs(self, "data", 1)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        axis = onnx_axes(self, (self.axis,), max(x.ndim, 1))[0]
        if x.shape[axis] == 0:
            raise self.error(f"cannot take the {self.op.type} of an empty axis {axis}, input {x.shape}")
        if self.last:
            index = x.shape[axis] - 1 - self.fn(np.flip(x, axis), axis=axis, keepdims=self.keepdims)
        else:
            index = self.fn(x, axis=axis, keepdims=self.keepdims)
        return [np.asarray(index, dtype=np.int64)]


@register("TopK")
class TopK(Layer):
    """`TopK(X, K; axis=-1, largest=1, sorted=1)` -> (values, int64 indices): the k largest (or
    smallest) entries along axis, in order, equal values by their index (a stable sort, as
    onnxruntime). K is a param (opset 1's `k=`) or a one-element input."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return "k" not in op.params and not inputs_constant(op)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.axis = self.int_param("axis", -1)
        self.largest = bool(self.int_param("largest", 1))
        expect_inputs(self, "X, K", 1, 2)
        if not 1 <= len(op.outputs) <= 2:
            raise self.error(f"expected 1 or 2 outputs (values, indices), got {len(op.outputs)}")
        # pnnx drops an unused output's `""`: a lone int64 output of a float input is the indices.
        lone = op.outputs[0].dtype if len(op.outputs) == 1 else None
        first = op.inputs[0].dtype if op.inputs else None
        self.only_indices = lone == "i64" and first is not None and first != "i64"

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        k_value = param_or_input(self, "k", inputs, 1)
        if k_value is None:
            raise self.error("missing K (neither a param nor an input)")
        k = int(scalar_of(self, k_value, "K"))
        if x.ndim == 0:
            raise self.error("TopK needs an input of rank >= 1, got a scalar")
        axis = onnx_axes(self, (self.axis,), max(x.ndim, 1))[0]
        if not 0 <= k <= x.shape[axis]:
            raise self.error(f"K={k} is outside 0..{x.shape[axis]} (the size of axis {axis})")
        key = -x if self.largest and x.dtype.kind != "u" else x
        if self.largest and x.dtype.kind == "u":
            key = np.iinfo(x.dtype).max - x
        order = np.argsort(key, axis=axis, kind="stable")
        index = np.take(order, np.arange(k), axis=axis)
        values = np.take_along_axis(x, index, axis=axis)
        if self.only_indices:
            return [index.astype(np.int64)]
        return [values, index.astype(np.int64)][: len(self.op.outputs)]
