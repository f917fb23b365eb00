"""ONNX elementwise operators pnnx keeps as ONNX nodes, with ONNX's semantics (the operator's
page in the ONNX spec): Shrink."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operator
from ._onnx import expect_inputs
from .registry import Layer, register


@register("Shrink")
class Shrink(Layer):
    """`Shrink(input; bias=0, lambd=0.5)`: x + bias where x < -lambd, x - bias where x > lambd,
    0 between (towards zero); the input's dtype kept (integers computed in float and truncated,
    as onnxruntime does).
    Without bias pnnx writes it as F.hardshrink."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.bias = self.float_param("bias", 0.0)
        self.lambd = self.float_param("lambd", 0.5)
        expect_inputs(self, "input", 1)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        # onnxruntime computes integers in float and truncates (-6 + 1.5 is -4)
        v = x.astype(np.float64) if x.dtype.kind in "iu" else x
        bias = np.asarray(self.bias, v.dtype)
        y = np.where(v < -self.lambd, v + bias, np.where(v > self.lambd, v - bias, np.zeros((), v.dtype)))
        return [y.astype(x.dtype, copy=False)]
