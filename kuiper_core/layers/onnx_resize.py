"""ONNX's Resize where pnnx keeps it as an ONNX node (the modes torch's interpolate cannot say:
pytorch_half_pixel / half_pixel_symmetric / tf_crop_and_resize coordinates, nearest rounding
modes, cubic with its own coefficient, exclude_outside, antialias, a size computed at run
time...). layers/resize.py is torch's F.interpolate; this is the ONNX spec's Resize.

Per resized axis, each output position x maps to a source coordinate by the
coordinate_transformation_mode, then:
- nearest: the source entry nearest_mode picks (round_prefer_floor / round_prefer_ceil /
  floor / ceil), clamped into the axis;
- linear and cubic: a weighted sum of the n source entries nearest to it, weights
  K((tap - coordinate)·s) of the triangle (linear) or Keys' cubic kernel (cubic_coeff_a),
  s = min(scale, 1) with antialias (the kernel widened when shrinking, weights normalised),
  else 1; taps outside the axis read its edge entry (or weigh 0 with exclude_outside).
tf_crop_and_resize puts extrapolation_value where the coordinate leaves the axis.

Where pnnx folded a constant roi / scales / sizes it writes them as params (`scales=(1.0,1.0,
2.0,2.0)`); otherwise they are inputs, omitted ones dropped: a float vector 2·k long is roi,
k long scales, an integer vector sizes. pnnx may also hand over the tensor a `Shape` was
taken of instead of the sizes (it drops the Shape node): a tensor of the input's rank gives
its shape as the sizes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..graph import Operator
from ._onnx import expect_inputs, ints_of, onnx_axes
from .registry import Layer, register

_COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
)
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _triangle(t: np.ndarray, a: float) -> np.ndarray:
    return np.clip(1 - np.abs(t), 0, 1)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient a (ONNX's cubic_coeff_a)."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


class _Sizes:
    """Per axis of the input: output size, scale and roi (start, end)."""

    def __init__(self, out: list[int], scale: list[float], roi: list[tuple[float, float]]) -> None:
        self.out, self.scale, self.roi = out, scale, roi


@register("Resize")
class OnnxResize(Layer):
    """`Resize(X, roi, scales, sizes; mode, coordinate_transformation_mode, nearest_mode,
    cubic_coeff_a, exclude_outside, extrapolation_value, antialias, axes,
    keep_aspect_ratio_policy)`, the ONNX spec's Resize (opsets 10-19)."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        # Sizes or scales given as a run-time input (not folded into params by pnnx).
        return "sizes" not in op.params and "scales" not in op.params and len(op.inputs) > 1

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.mode = self._choice("mode", ("nearest", "linear", "cubic"), "nearest")
        self.coordinates = self._choice("coordinate_transformation_mode", _COORDINATE_MODES, "half_pixel")
        self.nearest_mode = self._choice("nearest_mode", _NEAREST_MODES, "round_prefer_floor")
        self.policy = self._choice("keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"), "stretch")
        self.a = self.float_param("cubic_coeff_a", -0.75)
        self.exclude_outside = bool(self.int_param("exclude_outside", 0))
        self.extrapolation = self.float_param("extrapolation_value", 0.0)
        self.antialias = bool(self.int_param("antialias", 0)) and self.mode != "nearest"
        axes = self.param("axes", None)
        self.axes = None if axes is None else ints_of(self, axes, "axes")
        expect_inputs(self, "X, roi, scales, sizes", 1, 4)

    def _choice(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.param(key, default)
        if value not in allowed:
            raise self.error(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
        return str(value)

    # -- sizes ------------------------------------------------------------------------------
    def _given(self, inputs: list[Any], rank: int) -> tuple[Any, Any, Any]:
        """roi, scales, sizes: params where pnnx folded them, else inputs told apart."""
        given: list[Any] = [self.op.params.get(k) for k in ("roi", "scales", "sizes")]
        roi, scales, sizes = (v if v not in (None, []) else None for v in given)
        for v in inputs[1:]:
            arr = np.asarray(v)
            if arr.ndim != 1 and arr.ndim == rank:
                sizes = arr.shape  # the tensor pnnx passes in place of Shape(tensor)
            elif arr.ndim == 1 and arr.dtype.kind in "iu":
                sizes = arr
            elif arr.ndim == 1 and arr.dtype.kind == "f" and arr.size:
                k = rank if self.axes is None else len(self.axes)
                if arr.size == 2 * k and roi is None and scales is None:
                    roi = arr  # roi comes before scales in ONNX's order
                else:
                    scales = arr
            elif arr.size == 0:
                continue
            else:
                raise self.error(f"cannot tell which of roi, scales, sizes an input of shape {arr.shape} is")
        return roi, scales, sizes

    def _sizes(self, shape: tuple[int, ...], inputs: list[Any]) -> _Sizes:
        rank = len(shape)
        axes = tuple(range(rank)) if self.axes is None else onnx_axes(self, self.axes, rank)
        roi, scales, sizes = self._given(inputs, rank)
        out, scale = list(shape), [1.0] * rank
        if sizes is not None:
            wanted = ints_of(self, sizes, "sizes")
            if len(wanted) != len(axes) or min(wanted, default=1) < 0:
                raise self.error(f"sizes must be {len(axes)} sizes >= 0, got {wanted}")
            ratios = [w / shape[a] if shape[a] else 1.0 for w, a in zip(wanted, axes)]
            if self.policy != "stretch":
                s = min(ratios) if self.policy == "not_larger" else max(ratios)
                ratios = [s] * len(axes)
                wanted = tuple(int(math.floor(s * shape[a] + 0.5)) for a in axes)
            for w, r, a in zip(wanted, ratios, axes):
                out[a], scale[a] = w, r
        elif scales is not None:
            given = [float(v) for v in np.asarray(scales, np.float64).reshape(-1)]
            if len(given) != len(axes) or min(given) <= 0:
                raise self.error(f"scales must be {len(axes)} numbers > 0, got {given}")
            for s, a in zip(given, axes):
                out[a], scale[a] = int(math.floor(shape[a] * s)), s
        else:
            raise self.error("neither scales nor sizes given")
        bounds = [(0.0, 1.0)] * rank
        if roi is not None and self.coordinates == "tf_crop_and_resize":
            ends = [float(v) for v in np.asarray(roi, np.float64).reshape(-1)]
            if len(ends) != 2 * len(axes):
                raise self.error(f"roi must have 2 x {len(axes)} entries (starts, then ends), got {len(ends)}")
            for k, a in enumerate(axes):
                bounds[a] = (ends[k], ends[k + len(axes)])
        self.check_size(tuple(out))
        return _Sizes(out, scale, bounds)

    # -- one axis ---------------------------------------------------------------------------
    def source_coordinates(self, n_in: int, n_out: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
        """The source coordinate of every output position along one axis (ONNX's formulas;
        the output length in them is scale · n_in, as the spec's reference has it, except
        align_corners: onnxruntime, like torch's align_corners=True that exporters write as it,
        divides by the whole output size, n_out - 1; at scale 0.6 of 6 rows the reference's
        3.6 - 1 would move every coordinate)."""
        x = np.arange(n_out, dtype=np.float64)
        length = scale * n_in
        mode = self.coordinates
        if mode == "half_pixel":
            return (x + 0.5) / scale - 0.5
        if mode == "half_pixel_symmetric":
            offset = n_in / 2 * (1 - n_out / length)
            return offset + (x + 0.5) / scale - 0.5
        if mode == "pytorch_half_pixel":
            return (x + 0.5) / scale - 0.5 if length > 1 else np.full(n_out, -0.5)
        if mode == "align_corners":
            return x * (n_in - 1) / (n_out - 1) if n_out != 1 else np.zeros(n_out)
        if mode == "asymmetric":
            return x / scale
        if mode == "tf_half_pixel_for_nn":
            return (x + 0.5) / scale
        start, end = roi  # tf_crop_and_resize
        if length == 1:
            return np.full(n_out, (end - start) * (n_in - 1) / 2 + start * (n_in - 1))
        return start * (n_in - 1) + x * (end - start) * (n_in - 1) / (length - 1)

    def nearest_index(self, coords: np.ndarray, n_in: int) -> np.ndarray:
        mode = self.nearest_mode
        if mode == "round_prefer_floor":
            index = np.ceil(coords - 0.5)
        elif mode == "round_prefer_ceil":
            index = np.floor(coords + 0.5)
        elif mode == "floor":
            index = np.floor(coords)
        else:
            index = np.ceil(coords)
        return np.clip(index, 0, n_in - 1).astype(np.intp)

    def taps(self, coords: np.ndarray, n_in: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """(index, weight), each (n_out, n): the source entries each output sums."""
        kernel, radius = (_triangle, 1) if self.mode == "linear" else (_cubic, 2)
        s = min(scale, 1.0) if self.antialias else 1.0
        start = math.floor(-radius / s) + 1
        n = 2 - 2 * start
        base = np.floor(coords)
        base = np.where(base == coords, base - 1, base)  # an exact coordinate: the window left of it
        index = base[:, None] + np.arange(start, start + n)[None, :]
        weight = kernel((index - coords[:, None]) * s, self.a)
        if self.antialias:
            weight = weight / weight.sum(axis=1, keepdims=True)
        if self.exclude_outside:
            weight = np.where((index < 0) | (index >= n_in), 0.0, weight)
            total = weight.sum(axis=1, keepdims=True)
            weight = weight / np.where(total == 0, 1.0, total)
        return np.clip(index, 0, n_in - 1).astype(np.intp), weight

    def resize_axis(self, x: np.ndarray, axis: int, n_out: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
        n_in = x.shape[axis]
        if n_in == 0 and n_out > 0:
            raise self.error(f"cannot resize an empty axis {axis} (input {x.shape}) to {n_out}")
        coords = self.source_coordinates(n_in, n_out, scale, roi)
        if self.mode == "nearest":
            y = np.take(x, self.nearest_index(coords, n_in), axis=axis)
        else:
            index, weight = self.taps(coords, n_in, scale)
            picked = np.take(x, index, axis=axis)  # axis -> (n_out, n)
            w = weight.reshape((1,) * axis + weight.shape + (1,) * (x.ndim - axis - 1))
            y = (picked * w).sum(axis=axis + 1)  # float64: cast once, after the last axis
        if self.coordinates == "tf_crop_and_resize":
            outside = (coords < 0) | (coords > n_in - 1)
            mask = outside.reshape((1,) * axis + (n_out,) + (1,) * (x.ndim - axis - 1))
            y = np.where(mask, self.extrapolation, y)
        return y

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        sizes = self._sizes(x.shape, inputs)
        if tuple(sizes.out) == x.shape and self.coordinates != "tf_crop_and_resize":
            return [x.copy()]  # onnxruntime copies when no axis changes length, whatever the scales say
        y = x
        for axis in range(x.ndim):
            if sizes.out[axis] != x.shape[axis] or sizes.scale[axis] != 1.0 or self.coordinates == "tf_crop_and_resize":
                y = self.resize_axis(y, axis, sizes.out[axis], sizes.scale[axis], sizes.roi[axis])
        if y.dtype != x.dtype and x.dtype.kind in "iu":  # integer images: truncated, as onnxruntime does
            info = np.iinfo(x.dtype)
            y = np.clip(np.trunc(y + np.copysign(1e-9, y)), info.min, info.max)
        return [np.ascontiguousarray(y, dtype=x.dtype)]
