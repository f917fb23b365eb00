"""What a traced detection model's post-processing leaves in a pnnx export (torchvision's SSD,
SSDlite, Faster R-CNN traced with torch.jit.trace; verified with pnnx 20261020):

- `torchvision::nms` (optlevel 0) / `pnnx.custom_op.torchvision.nms` (1, 2: `$arg_0` boxes,
  `$arg_1` scores, `arg_2` IoU threshold): the indices of the boxes kept, best score first.
- `torchvision::roi_align` / `pnnx.custom_op.torchvision.roi_align` (input, rois (K, 5),
  spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned): MultiScaleRoIAlign.
- (`aten::where` with one input, nonzero as a tuple, is in tensor_ops.py), `aten::scatter`
  (self, dim, index, src), `aten::log2` (LevelMapper), `aten::numel`, `aten::_shape_as_tensor`,
  `torch.empty` (0-d tensors filled next: the anchor strides).
- `prim::If`: pnnx writes a TorchScript `if` as one operator with its condition and outputs
  but **without its two branches** (its .param has no nested blocks, its Python writes
  `prim::If(v_310)`). What the branches compute is not in the file, so the If layer is a
  located error that says so. torchvision's batched_nms is such an `if` (`boxes.numel() == 0`,
  else the NMS with its IoU threshold): an SSD's or Faster R-CNN's traced post-processing does
  not survive the conversion; the network up to the head's outputs does.

No compiled torchvision op loads on this machine: `nms` follows torchvision's C++ CPU kernel
(csrc/ops/cpu/nms_kernel.cpp: areas, scores sorted descending, a box suppresses the later
ones whose IoU with it is > threshold, compared in double) and `roi_align` its CPU kernel
(roi_align_kernel.cpp: samples outside [-1, H] x [-1, W] give 0, then clamp, bilinear,
averaged over the sampling grid; an adaptive grid is ceil(roi size / pooled size)), which
for boxes inside the map is torchvision's Python fallback `_roi_align` (roi_align.py): the
tests check against that fallback and against NMS written in torch from the kernel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..graph import Operator, format_shape
from .registry import Layer, register
from .torch_args import declared_dtype, torch_dtype


def _pnnx_args(op: Operator, names: tuple[str, ...]) -> dict[str, Any]:
    """A custom op's `arg_N` params by their torchvision names (pnnx.custom_op.*)."""
    return {name: op.params[f"arg_{i}"] for i, name in enumerate(names) if f"arg_{i}" in op.params}


class _TorchvisionOp(Layer):
    """torchvision::X (positional TorchScript arguments) or pnnx.custom_op.torchvision.X
    (`$arg_0`… tensors, `arg_N=` params): the params read by their torchvision names."""

    names: tuple[str, ...] = ()
    tensors = 2  # leading tensor arguments

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if op.type.startswith("pnnx.custom_op."):
            self.args = _pnnx_args(op, self.names)
        else:
            self.args = {k: v for k, v in op.params.items() if k in self.names}
        missing = [n for n in self.names[self.tensors :] if n not in self.args]
        if missing:
            raise self.error(f"missing argument(s) {', '.join(missing)} (expected {', '.join(self.names)})")
        if len(op.inputs) != self.tensors:
            raise self.error(
                f"expected {self.tensors} tensor inputs ({', '.join(self.names[: self.tensors])}), got {len(op.inputs)}"
            )

    def number(self, key: str, kind: type = float) -> Any:
        value = self.args[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and not isinstance(value, int))
        ):
            raise self.error(f"argument '{key}' must be {'an int' if kind is int else 'a number'}, got {value!r}")
        return kind(value)


IOU_WORK = 50  # what one pair's IoU counts against max_operator_work: ~14 ns, ~50 multiply-adds' time


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Indices of the boxes kept, in decreasing score order (torchvision's CPU kernel)."""
    if boxes.shape[0] == 0:
        return np.zeros(0, np.int64)
    x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
    areas = (x2 - x1) * (y2 - y1)
    order = np.argsort(-scores, kind="stable")
    alive = np.ones(len(order), bool)
    keep = []
    for pos, i in enumerate(order):
        if not alive[pos]:
            continue
        keep.append(i)
        rest = order[pos + 1 :]
        w = np.maximum(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0)
        h = np.maximum(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0)
        inter = w * h
        with np.errstate(invalid="ignore", divide="ignore"):
            ovr = inter / (areas[i] + areas[rest] - inter)
        alive[pos + 1 :] &= ~(ovr.astype(np.float64) > iou_threshold)
    return np.asarray(keep, np.int64)


@register("torchvision::nms", "pnnx.custom_op.torchvision.nms")
class NMS(_TorchvisionOp):
    names = ("dets", "scores", "iou_threshold")
    arg_names = names

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return True  # how many boxes survive

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.threshold = self.number("iou_threshold")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        boxes, scores = (np.asarray(a) for a in inputs)
        if boxes.ndim != 2 or boxes.shape[1] != 4 or scores.shape != (boxes.shape[0],):
            raise self.error(f"expected boxes (N, 4) and scores (N,), got {boxes.shape} and {scores.shape}")
        if boxes.dtype.kind != "f" or scores.dtype.kind != "f":
            raise self.error(f"boxes and scores must be float tensors, got {boxes.dtype} and {scores.dtype}")
        n = boxes.shape[0]
        self.check_work(n * (n - 1) // 2 * IOU_WORK, f"non-maximum suppression of {n:,} boxes")
        return [nms(boxes, scores, self.threshold)]


def roi_grid(
    roi: np.ndarray, scale: float, ph: int, pw: int, sampling_ratio: int, aligned: bool
) -> tuple[float, float, float, float, int, int]:
    """A roi's (x0, y0, bin height, bin width, samples per bin down, across); the samples
    follow the roi's size unless `sampling_ratio` fixes them (a roi 1e9 wide: 1.4e8 per bin)."""
    offset = 0.5 if aligned else 0.0
    x0, y0, x1, y1 = (float(v) * scale - offset for v in roi[1:5])
    rw, rh = x1 - x0, y1 - y0
    if not aligned:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / ph)
    gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / pw)
    return x0, y0, rh / ph, rw / pw, gh, gw


def roi_align(
    x: np.ndarray, rois: np.ndarray, scale: float, ph: int, pw: int, sampling_ratio: int, aligned: bool
) -> np.ndarray:
    """(K, C, ph, pw): each roi's bins averaged over a grid of bilinear samples (the CPU kernel)."""
    _, channels, height, width = x.shape
    out = np.zeros((rois.shape[0], channels, ph, pw), np.float64)
    for k, roi in enumerate(rois.astype(np.float64)):
        b = int(roi[0])
        x0, y0, bh, bw, gh, gw = roi_grid(roi, scale, ph, pw, sampling_ratio, aligned)
        if gh <= 0 or gw <= 0:  # an empty grid: count is max(gh·gw, 1), the sum 0
            continue
        ys = y0 + np.arange(ph)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / gh  # (ph, gh)
        xs = x0 + np.arange(pw)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / gw  # (pw, gw)
        wy, iy = _taps(ys.ravel(), height)
        wx, ix = _taps(xs.ravel(), width)
        plane = x[b].astype(np.float64)  # (C, H, W)
        # sum over the 2x2 taps of w_y w_x v[y, x]: (C, ph·gh, pw·gw)
        val = sum(
            wy[a][:, None] * wx[c][None, :] * plane[:, iy[a][:, None], ix[c][None, :]]
            for a in range(2)
            for c in range(2)
        )
        out[k] = val.reshape(channels, ph, gh, pw, gw).sum(axis=(2, 4)) / max(gh * gw, 1)
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float32)


def _taps(pos: np.ndarray, size: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Bilinear weights and indices (low, high) along one axis; 0 weight outside [-1, size]."""
    outside = (pos < -1.0) | (pos > size)
    p = np.maximum(pos, 0.0)
    low = p.astype(np.int64)
    top = low >= size - 1
    low = np.where(top, size - 1, low)
    high = np.where(top, size - 1, low + 1)
    p = np.where(top, low.astype(np.float64), p)
    frac = p - low
    w_low, w_high = 1.0 - frac, frac
    w_low[outside] = 0.0
    w_high[outside] = 0.0
    return [w_low, w_high], [np.clip(low, 0, size - 1), np.clip(high, 0, size - 1)]


@register("torchvision::roi_align", "pnnx.custom_op.torchvision.roi_align")
class RoIAlign(_TorchvisionOp):
    names = ("input", "rois", "spatial_scale", "pooled_height", "pooled_width", "sampling_ratio", "aligned")
    arg_names = names

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.scale = self.number("spatial_scale")
        self.ph = self.number("pooled_height", int)
        self.pw = self.number("pooled_width", int)
        self.sampling = self.number("sampling_ratio", int)
        self.aligned = bool(self.args["aligned"])
        if self.ph < 1 or self.pw < 1:
            raise self.error(f"pooled size must be >= 1, got ({self.ph}, {self.pw})")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, rois = (np.asarray(a) for a in inputs)
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
            raise self.error(f"expected input (N, C, H, W) and rois (K, 5), got {x.shape} and {rois.shape}")
        if rois.shape[0] and not (0 <= rois[:, 0].min() and rois[:, 0].max() < x.shape[0]):
            raise self.error(
                f"roi batch indices must be in [0, {x.shape[0]}), got {rois[:, 0].min()}..{rois[:, 0].max()}"
            )
        self.check_size((rois.shape[0], x.shape[1], self.ph, self.pw))
        try:
            grids = [
                roi_grid(r, self.scale, self.ph, self.pw, self.sampling, self.aligned)[4:] for r in rois.astype(float)
            ]
        except (OverflowError, ValueError):  # an inf or NaN roi: its sample grid has no size
            raise self.error("a roi with an infinite or NaN coordinate has no sample grid") from None
        samples = [max(gh, 0) * max(gw, 0) * self.ph * self.pw for gh, gw in grids]
        self.check_size((x.shape[1], max(samples, default=0)), "one roi's samples")
        self.check_work(4 * x.shape[1] * sum(samples), f"aligning {rois.shape[0]:,} rois")
        return [roi_align(x, rois, self.scale, self.ph, self.pw, self.sampling, self.aligned)]


@register("aten::scatter")
class Scatter(Layer):
    """`self.scatter(dim, index, src)` (or a number `value`), functional: a copy of self with
    y[..., index[i], ...] = src[i] along dim (torchvision's _onnx_merge_levels)."""

    arg_names = ("self", "dim", "index", "src")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim")
        if self.param("reduce", None) is not None:
            raise self.error("scatter with reduce= is not supported (only replacing values)")
        self.src_is_value = len(op.inputs) == 2
        if len(op.inputs) not in (2, 3):
            raise self.error(f"expected inputs self, index and src (or a value param), got {len(op.inputs)}")
        if self.src_is_value:
            value = self.param("src", self.param("value", None))
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(f"a scatter without a src tensor needs a number value, got {value!r}")
            self.value = value

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index = np.asarray(inputs[0]), np.asarray(inputs[1])
        src = np.full(index.shape, self.value, x.dtype) if self.src_is_value else np.asarray(inputs[2])
        if index.ndim != x.ndim or (not self.src_is_value and src.ndim != x.ndim):
            raise self.error(f"self {x.shape}, index {index.shape} and src {src.shape} must have the same rank")
        dim = self.dim + x.ndim if self.dim < 0 else self.dim
        if not 0 <= dim < max(x.ndim, 1):
            raise self.error(f"dim {self.dim} is out of range for a {x.ndim}-D tensor")
        if any(i > s for i, s in zip(index.shape, x.shape)) or any(i > s for i, s in zip(index.shape, src.shape)):
            raise self.error(f"index {index.shape} may not be larger than self {x.shape} or src {src.shape}")
        if index.size and (index.min() < -x.shape[dim] or index.max() >= x.shape[dim]):
            raise self.error(f"index out of range for dim {dim} of size {x.shape[dim]}")
        y = np.array(x, copy=True)
        part = tuple(slice(0, n) for n in index.shape)
        np.put_along_axis(y[tuple(slice(None) if d == dim else part[d] for d in range(x.ndim))], index, src[part], dim)
        return [y]


@register("aten::log2")
class Log2(Layer):
    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        with np.errstate(divide="ignore", invalid="ignore"):
            return [np.log2(x if x.dtype.kind == "f" else x.astype(np.float32))]


@register("aten::numel")
class Numel(Layer):
    """The number of elements, as an int (a TorchScript number)."""

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        return [int(np.size(inputs[0]))]


@register("aten::_shape_as_tensor")
class ShapeAsTensor(Layer):
    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.asarray(np.shape(inputs[0]), np.int64)]


@register("torch.empty")
class Empty(Layer):
    """`torch.empty(size, dtype)`: uninitialised in torch, zeros here (torchvision fills it
    next: `torch.empty((), dtype=torch.int64).fill_(stride)`). size None is ()."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        size = self.param("size", None)
        self.size = () if size is None or size == [] else self.ints_param("size", low=0)
        self.check_size(self.size)
        self.dtype = torch_dtype(self) or declared_dtype(op) or np.dtype(np.float32)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.zeros(self.size, self.dtype)]


@register("prim::If")
class If(Layer):
    """A TorchScript `if` whose branches pnnx did not write: a located error (module docstring)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        source = getattr(op, "source", None) or op
        line = f" (line {source.line})" if getattr(source, "line", None) else ""
        outs = ", ".join(o.name + (f" {format_shape(o.shape)}" if o.shape is not None else "") for o in op.outputs)
        cond = op.inputs[0] if op.inputs else None
        made = (
            f" (operand {cond.name}, made by {cond.producer.name}: {cond.producer.type})"
            if cond and cond.producer
            else ""
        )
        raise self.error(
            f"a TorchScript `if`{line} exported without its branches: pnnx writes prim::If as one operator with "
            f"its condition{made} and outputs ({outs or 'none'}), but the .param format has no nested blocks, so "
            "what either branch computes is not in the file and nothing can run it. In torchvision's detection "
            "models this is batched_nms (`if boxes.numel() == 0`; the other branch holds torchvision::nms and its "
            "IoU threshold): export the network up to the head's outputs and do the post-processing outside, or "
            "call torchvision.ops.nms directly, which pnnx keeps as an operator"
        )

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        raise self.error("prim::If cannot run")  # (never made: __init__ raises)


__all__ = ["nms", "roi_align"]
