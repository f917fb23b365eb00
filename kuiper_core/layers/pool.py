"""Pooling: max / average (nn.* and F.*, 1-D and 2-D) and their adaptive forms.

Every pooling works on (P, H, W) planes (all leading dims flattened; 1-D is H = 1).
Max and average pooling are separable: reduce the kernel's columns into a (P, Hp, OW)
buffer, then its rows into the output, one vectorised pass per kernel tap. Padding
(plus ceil_mode's overhang) is -inf for max and 0 for average; the average's divisor is a
per-position map built once per input size. Adaptive average pooling is two small
matmuls with averaging matrices; adaptive max gathers windows through index tables.

What pnnx writes (pnnx 20261020): kernel_size, stride (None when F.* got none: it means
kernel_size), padding, dilation, ceil_mode, return_indices for max; count_include_pad,
divisor_override (2-D only) for avg; output_size for adaptive, with 0 where torch had
None (keep the input size). F.adaptive_max_pool1d/2d always come with return_indices=True
and two outputs (values, int64 indices), even when the model ignores the indices.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..errors import short
from ..graph import Operator
from ..limits import PYTHON_STEP_WORK
from .halves import SplitRequest, halves_call, input_rows, split_rows
from .registry import Layer, Prepared, register
from .windows import PADDED, WORK, out_size, output_buffer, pad_spatial, scratch, window_view


def _lowest(dtype: np.dtype) -> float | int:
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


class _Pool(Layer):
    """Shared reading of 1-D/2-D params and the (P, H, W) view of the input."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dims = 1 if op.type.endswith("1d") else 2
        # Per-shape tables (divisors, averaging matrices, window positions): each subclass its own keys
        self._cache: dict[tuple[Any, ...], Any] = {}

    def _pair(self, key: str, default: object, fill: int) -> tuple[int, int]:
        v = self.ints_param(key, self.dims, default=default, high=self.size_limit)
        if min(v) < 0:
            raise self.error(f"{key} must be >= 0, got {v}")
        return (fill, v[0]) if self.dims == 1 else (v[0], v[1])

    def _planes(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        """x as (1, P, H, W) and its leading dims."""
        if x.ndim < self.dims + 1:
            raise self.error(f"expected at least {self.dims + 1}-D input (C, *spatial), got shape {x.shape}")
        lead = x.shape[: -self.dims]
        hw = (1,) + x.shape[-1:] if self.dims == 1 else x.shape[-2:]
        return x.reshape((1, -1) + hw), lead

    def _out_shape(self, lead: tuple[int, ...], oh: int, ow: int) -> tuple[int, ...]:
        return lead + ((ow,) if self.dims == 1 else (oh, ow))

    def _indices_outputs(self) -> tuple[bool, bool]:
        """(return_indices, as one tuple output): max pools with indices come as two outputs,
        or (nn.AdaptiveMaxPool2d) as one tuple output that a prim::TupleUnpack splits."""
        return_indices = self.param("return_indices", False)
        if not isinstance(return_indices, bool):
            raise self.error(f"return_indices must be True or False, got {short(str(return_indices))}")
        n = len(self.op.outputs)
        if n == 2 and return_indices:
            return True, False
        if n == 1:
            # a (values, indices) tuple: only prim:: ops (TupleUnpack, ...) and the graph output take one
            readers = [
                c for c in self.op.outputs[0].consumers if not c.type.startswith("prim::") and c.type != "pnnx.Output"
            ]
            if return_indices and readers:
                raise self.error(
                    f"return_indices=True makes one (values, indices) tuple, but operator "
                    f"'{readers[0].name}' ({readers[0].type}) reads it as a tensor"
                )
            return return_indices, return_indices
        raise self.error(f"return_indices={return_indices} cannot give {n} outputs")

    as_tuple: bool  # set by the subclasses' __init__ from _indices_outputs()

    def _with_indices(self, y: np.ndarray, idx: np.ndarray) -> list:
        return [(y, idx)] if self.as_tuple else [y, idx]


# Padded input planes pooled at a time, in elements (4 MB of float32).
POOL_CHUNK = 1 << 20
# Below this many padded elements a strided pool goes `_reduce_small` (strided views, fewer
# calls) rather than `_reduce` (a copy per row phase): 2x2 stride-2 pools break even on
# (1, 32, 32, 32) (22 us), (1, 16, 8, 8) 9 vs 15 us. Without a row stride `_reduce` makes
# no more calls and wins at any size (YOLOv5's 5x5 stride-1 pools on 4x4 maps 44 vs 26 us).
POOL_FLAT_MIN = 1 << 15


class _WindowPool(_Pool):
    """Kernel/stride/padding pooling (max and average)."""

    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.kernel = self._pair("kernel_size", None, 1)
        stride = self.param("stride", None)
        self.stride = self.kernel if stride is None or stride == [] else self._pair("stride", None, 1)
        self.padding = self._pair("padding", 0, 0)
        self.dilation = self._pair("dilation", 1, 1)
        self.ceil_mode = bool(self.param("ceil_mode", False))
        if min(self.kernel + self.stride + self.dilation) < 1:
            raise self.error(
                f"kernel_size, stride and dilation must be >= 1, got {self.kernel}, {self.stride}, {self.dilation}"
            )
        for p, k in zip(self.padding, self.kernel):
            if p > k // 2:
                raise self.error(f"padding {self.padding} must be at most half of kernel_size {self.kernel}")

    def prepare(self, inputs: list[Any], out: list[np.ndarray], split: SplitRequest | None = None) -> Prepared | None:
        """Asked to split: a big 2-D pool at batch 1 as its top and bottom output rows (rows,
        as the convolutions around it split: each half reads the rows the one before wrote);
        else None (forward)."""
        x, y = inputs[0], out[0]
        if split is None or getattr(self, "return_indices", False) or self.dims != 2 or x.ndim != 4:
            return None
        pads, (oh, ow) = self._geometry(x.shape[0] * x.shape[1], *x.shape[2:])
        taps = split.sizes.pass_cost * self.kernel[0] * self.kernel[1] * y.size
        if x.shape[0] != 1 or oh < 2 or taps < 2 * split.sizes.min_half_work:
            return None
        keff = self.dilation[0] * (self.kernel[0] - 1) + 1
        cut = split_rows(oh)
        halves = []
        for r0, r1 in ((0, cut), (cut, oh)):
            (lo, hi), (top, bottom) = input_rows((r0, r1), x.shape[2], keff, self.stride[0], pads[0])
            halves.append(partial(self._rows, x[:, :, lo:hi], y, (top, bottom) + pads[2:], slice(r0, r1), x.shape[2:]))
        return halves_call(split, halves[0], halves[1], inputs, out)

    def _rows(
        self, x: np.ndarray, y: np.ndarray, pads: tuple[int, int, int, int], rows: slice, hw: tuple[int, int]
    ) -> None:
        """Output rows `rows` of y (1, P, OH, OW) from x (1, P, h, W), the input rows they read
        padded by `pads`; `hw`: the whole input's size."""
        raise NotImplementedError

    def _geometry(self, planes: int, h: int, w: int) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
        """Pads (top, bottom + overhang, left, right + overhang) and the output size of pooling
        `planes` (h, w) maps, once the reads of every window are within max_operator_work."""
        oh, ow = (
            out_size(n, k, s, p, p, d, self.ceil_mode)
            for n, k, s, p, d in zip((h, w), self.kernel, self.stride, self.padding, self.dilation)
        )
        if oh < 1 or ow < 1:
            raise self.error(f"kernel {self.kernel} does not fit the padded input {(h, w)}")
        steps = (self.kernel[0] + self.kernel[1] + self.stride[0]) * PYTHON_STEP_WORK  # taps and row phases (_reduce)
        work = planes * oh * ow * self.kernel[0] * self.kernel[1] + steps
        self.check_work(work, f"{self.kernel} windows over {(h, w)}")
        (ph, pw), (sh, sw), (dh, dw), (kh, kw) = self.padding, self.stride, self.dilation, self.kernel
        need_h = (oh - 1) * sh + dh * (kh - 1) + 1
        need_w = (ow - 1) * sw + dw * (kw - 1) + 1
        pads = (ph, max(ph, need_h - h - ph), pw, max(pw, need_w - w - pw))
        return pads, (oh, ow)

    def _pool(
        self,
        x: np.ndarray,
        pads: tuple[int, int, int, int],
        out_hw: tuple[int, int],
        y: np.ndarray,
        combine: np.ufunc,
        fill: float = 0.0,
    ) -> None:
        """y (1, P, OH, OW) = combine over the windows of x (1, P, H, W) padded with `fill`, a
        chunk of planes at a time: the work buffers stay small (in cache)."""
        p, hp, wp = x.shape[1], x.shape[2] + pads[0] + pads[1], x.shape[3] + pads[2] + pads[3]
        if self.stride[0] > 1 and p * hp * wp < POOL_FLAT_MIN:
            self._reduce_small(pad_spatial(x, pads, value=fill, slot=PADDED), out_hw, y, combine)
            return
        step = max(1, POOL_CHUNK // (hp * wp))
        for a in range(0, p, step):
            self._reduce(x[0, a : a + step], pads, out_hw, y[0, a : a + step], combine, x.dtype.type(fill))

    def _reduce_small(self, xp: np.ndarray, out_hw: tuple[int, int], y: np.ndarray, combine: np.ufunc) -> None:
        """y (1, P, OH, OW) = combine over the kernel taps of xp (1, P, Hp, Wp), columns then rows,
        on strided views: fewer calls than `_reduce`, for inputs too small for its flat calls to pay."""
        (oh, ow), (sh, sw), (dh, dw), (kh, kw) = out_hw, self.stride, self.dilation, self.kernel
        rows = scratch(WORK, xp.shape[:3] + (ow,), xp.dtype)
        np.copyto(rows, xp[..., 0 : (ow - 1) * sw + 1 : sw])
        for j in range(1, kw):
            combine(rows, xp[..., j * dw : j * dw + (ow - 1) * sw + 1 : sw], out=rows)
        np.copyto(y, rows[:, :, 0 : (oh - 1) * sh + 1 : sh])
        for i in range(1, kh):
            combine(y, rows[:, :, i * dh : i * dh + (oh - 1) * sh + 1 : sh], out=y)

    def _reduce(
        self,
        x: np.ndarray,
        pads: tuple[int, int, int, int],
        out_hw: tuple[int, int],
        y: np.ndarray,
        combine: np.ufunc,
        fill: np.generic,
    ) -> None:
        """y (P, OH, OW) = combine over the kernel taps of x (P, H, W) padded: rows, then columns.

        NumPy's binary ufuncs run ~3x slower on arrays whose rows are not contiguous with each
        other (strided or cropped views: 100 vs 34 us for 400k float32), copies do not. So every
        combine here is one call on flat contiguous arrays, a tap a flat offset ("wide rows":
        outputs past a row's end wrap into the next row and are cropped at the end). The row
        stride is taken by splitting the padded copy into phases (phase f holds padded rows
        f, f + s, f + 2s, ...: row tap i*d is phase (i*d) % s at row offset (i*d) // s); the
        column stride by combining at every column and cropping with that stride (cheaper than
        splitting columns into phases: a strided copy of the rows and one of the output).
        """
        (oh, ow), (sh, sw), (dh, dw), (kh, kw) = out_hw, self.stride, self.dilation, self.kernel
        p, h, w = x.shape
        top, _, left, _ = pads
        hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
        # 1. The padded input as sh row phases (sh, P, HQ, Wp): padded row f + sh*q is [f, :, q].
        hq = -(-hp // sh)
        phases = scratch(PADDED, (sh, p, hq, wp), x.dtype)
        for f in range(sh):
            dst = phases[f]
            q0 = max(0, -(-(top - f) // sh))  # the first q whose padded row is an input row
            q1 = max(q0, min(hq, -(-(top + h - f) // sh)))
            for band, cols in (
                (slice(0, q0), slice(0, wp)),
                (slice(q1, hq), slice(0, wp)),
                (slice(q0, q1), slice(0, left)),
                (slice(q0, q1), slice(left + w, wp)),
            ):
                if band.stop > band.start and cols.stop > cols.start:  # a call costs ~1 us: small pools
                    dst[:, band, cols] = fill
            r0 = f + sh * q0 - top
            np.copyto(dst[:, q0:q1, left : left + w], x[:, r0 : r0 + sh * (q1 - q0) : sh])
        # 2. Rows: rows[P, o, :] = combine over i of padded row o*sh + i*dh (o < OH are real).
        if kh == 1:
            rows, wide_slot = phases[0], WORK
        else:
            rows, wide_slot = scratch(WORK, (p, hq, wp), x.dtype), PADDED  # the phases are read by then
            taps = [((i * dh) % sh, (i * dh) // sh * wp) for i in range(kh)]
            _combine_taps(phases.reshape(sh, -1), taps, rows.reshape(-1)[: p * hq * wp - taps[-1][1]], combine)
        # 3. Columns at every column (a tap is a flat offset), then 4. the strided crop.
        if kw == 1:
            wide = rows
        else:
            wide = scratch(wide_slot, (p, hq, wp), x.dtype)
            last = ((p - 1) * hq + oh - 1) * wp + (ow - 1) * sw + 1  # one past the last real output
            _combine_taps(rows.reshape(1, -1), [(0, j * dw) for j in range(kw)], wide.reshape(-1)[:last], combine)
        np.copyto(y, wide[:, :oh, 0 : (ow - 1) * sw + 1 : sw])


def _combine_taps(src: np.ndarray, taps: list[tuple[int, int]], out: np.ndarray, combine: np.ufunc) -> None:
    """out[t] = combine over the taps (phase, offset) of src[phase, t + offset]; all flat."""
    n = out.size
    (f0, o0), rest = taps[0], taps[1:]
    if not rest:
        np.copyto(out, src[f0, o0 : o0 + n])
        return
    f1, o1 = rest[0]
    combine(src[f0, o0 : o0 + n], src[f1, o1 : o1 + n], out=out)
    for f, o in rest[1:]:
        combine(out, src[f, o : o + n], out=out)


def window_pool_reference(
    xp: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out_hw: tuple[int, int],
    combine: np.ufunc,
) -> np.ndarray:
    """The readable definition `_WindowPool._reduce` is tested against: combine over every
    window of the padded xp (N, C, Hp, Wp), (N, C, OH, OW)."""
    return combine.reduce(window_view(xp, kernel, stride, dilation, out_hw), axis=(2, 3))


@register("nn.MaxPool1d", "nn.MaxPool2d", "F.max_pool1d", "F.max_pool2d")
class MaxPool(_WindowPool):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.return_indices, self.as_tuple = self._indices_outputs()

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, lead = self._planes(inputs[0])
        _, p, h, w = x.shape
        pads, (oh, ow) = self._geometry(p, h, w)
        shape = self._out_shape(lead, oh, ow)
        y = output_buffer(out[:1], shape, x.dtype)
        if not self.return_indices:
            self._pool(x, pads, (oh, ow), y.reshape(1, p, oh, ow), np.maximum, _lowest(x.dtype))
            return [y]
        xp = pad_spatial(x, pads, value=_lowest(x.dtype), slot=PADDED)
        # Indices: gather every window, argmax, and map to flat h*W + w input positions.
        self.check_size((p, self.kernel[0] * self.kernel[1], oh, ow), "the windows gathered for the indices")
        taps = window_view(xp, self.kernel, self.stride, self.dilation, (oh, ow)).reshape(p, -1, oh, ow)
        pos = np.full((1, 1) + xp.shape[2:], -1, np.int64)
        pos[0, 0, pads[0] : pads[0] + h, pads[2] : pads[2] + w] = np.arange(h * w).reshape(h, w)
        pos_taps = window_view(pos, self.kernel, self.stride, self.dilation, (oh, ow)).reshape(1, -1, oh, ow)
        best = taps.argmax(axis=1)[:, None]
        y.reshape(p, oh, ow)[...] = np.take_along_axis(taps, best, axis=1)[:, 0]
        idx = np.take_along_axis(np.broadcast_to(pos_taps, taps.shape), best, axis=1)[:, 0]
        return self._with_indices(y, idx.reshape(shape))

    def _rows(
        self, x: np.ndarray, y: np.ndarray, pads: tuple[int, int, int, int], rows: slice, hw: tuple[int, int]
    ) -> None:
        out = y[:, :, rows]
        self._pool(x, pads, out.shape[2:], out, np.maximum, _lowest(x.dtype))


@register("nn.AvgPool1d", "nn.AvgPool2d", "F.avg_pool1d", "F.avg_pool2d")
class AvgPool(_WindowPool):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if self.dilation != (1, 1):
            raise self.error(f"average pooling has no dilation, got {self.dilation}")
        self.count_include_pad = bool(self.param("count_include_pad", True))
        override = self.param("divisor_override", None)
        if override is not None and (isinstance(override, bool) or not isinstance(override, int) or override == 0):
            raise self.error(f"divisor_override must be a non-zero int or None, got {override!r}")
        self.divisor_override = override

    def _scale(self, h: int, w: int, out_hw: tuple[int, int], dtype: np.dtype) -> np.ndarray:
        """1 / divisor at every output position, (OH, OW), as torch counts the window."""
        key = (h, w, np.dtype(dtype).str)
        scale = self._cache.get(key)
        if scale is None:
            if self.divisor_override is not None:
                scale = np.full(out_hw, 1.0 / self.divisor_override, dtype)
            else:
                counts = []
                for n, o, k, s, p in zip((h, w), out_hw, self.kernel, self.stride, self.padding):
                    start = np.arange(o) * s - p
                    end = np.minimum(start + k, n + p)
                    if not self.count_include_pad:
                        start, end = np.maximum(start, 0), np.minimum(end, n)
                    counts.append(end - start)
                scale = (1.0 / np.outer(counts[0], counts[1])).astype(dtype)
            self._cache[key] = scale
        return scale

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, lead = self._planes(inputs[0])
        _, p, h, w = x.shape
        pads, (oh, ow) = self._geometry(p, h, w)
        y = output_buffer(out, self._out_shape(lead, oh, ow), x.dtype)
        y4 = y.reshape(1, p, oh, ow)
        self._pool(x, pads, (oh, ow), y4, np.add)
        y4 *= self._scale(h, w, (oh, ow), x.dtype)
        return [y]

    def _rows(
        self, x: np.ndarray, y: np.ndarray, pads: tuple[int, int, int, int], rows: slice, hw: tuple[int, int]
    ) -> None:
        out = y[:, :, rows]
        self._pool(x, pads, out.shape[2:], out, np.add)
        out *= self._scale(*hw, y.shape[2:], x.dtype)[rows]  # the whole input's divisors


def adaptive_bounds(n: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive windows along one axis: [floor(i*n/o), ceil((i+1)*n/o))."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


class _AdaptivePool(_Pool):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        size = self.param("output_size")
        if not isinstance(size, list):
            size = [size] * self.dims
        if len(size) == 1 and self.dims == 2:
            size = size * 2
        if len(size) != self.dims or any(
            s is not None and (isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= self.size_limit)
            for s in size
        ):
            raise self.error(
                f"output_size must be {self.dims} int(s) from 0 to {self.size_limit:,} or None, got {self.param('output_size')!r}"
            )
        # 0 / None: keep that input dim.
        self.output_size = (0, size[0] or 0) if self.dims == 1 else (size[0] or 0, size[1] or 0)

    def _out_hw(self, h: int, w: int) -> tuple[int, int]:
        oh, ow = self.output_size
        return (oh or h, ow or w) if self.dims == 2 else (1, ow or w)


# Up to this many elements a plane's average is one float32 GEMV (its sum) divided by the size;
# above, row sums by a GEMV added in float64 (see AdaptiveAvgPool.forward).
GLOBAL_POOL_GEMV_MAX = 64


@register("nn.AdaptiveAvgPool1d", "nn.AdaptiveAvgPool2d", "F.adaptive_avg_pool1d", "F.adaptive_avg_pool2d")
class AdaptiveAvgPool(_AdaptivePool):
    def _uniform(self, n: int, dtype: np.dtype, value: float) -> np.ndarray:
        key = ("uniform", n, np.dtype(dtype).str, value)
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = np.full(n, value, dtype)
        return v

    def _matrices(self, h: int, w: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """Averaging matrices (OH, H) and (W, OW): out = Ah @ x @ Aw."""
        key = (h, w, np.dtype(dtype).str)
        mats = self._cache.get(key)
        if mats is None:
            oh, ow = self._out_hw(h, w)
            self.check_size((oh, h), "an averaging matrix")
            self.check_size((w, ow), "an averaging matrix")
            pair = []
            for n, o in ((h, oh), (w, ow)):
                start, end = adaptive_bounds(n, o)
                j = np.arange(n)
                inside = (j[None, :] >= start[:, None]) & (j[None, :] < end[:, None])
                pair.append((inside / (end - start)[:, None]).astype(dtype))
            mats = (pair[0], np.ascontiguousarray(pair[1].T))
            self._cache[key] = mats
        return mats

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, lead = self._planes(inputs[0])
        _, p, h, w = x.shape
        oh, ow = self._out_hw(h, w)
        y = output_buffer(out, self._out_shape(lead, oh, ow), x.dtype)
        if (oh, ow) == (1, 1):  # global average pooling: sums by a GEMV
            # (MobileNetV3's SE blocks: 1-2 us against np.mean's 5-14: its pairwise sum per row).
            # Not a GEMV by a rounded 1/size: that rounding scales every channel alike, and a
            # long float32 sum was up to 2x PyTorch's error; a squeeze-excitation's pooled value
            # scales a whole channel, which EfficientNet's saturated sigmoids amplify
            # (docs/coverage.md). Small planes: the float32 sum divided by the size (PyTorch's
            # mean); bigger ones: row sums added in float64, divided once (+1-3 us).
            if h * w == 0:  # the mean of nothing: NaN, as torch
                y.fill(np.nan)
                return [y]
            if h * w <= GLOBAL_POOL_GEMV_MAX:
                np.matmul(x.reshape(p, h * w), self._uniform(h * w, x.dtype, 1.0), out=y.reshape(p))
                np.divide(y, h * w, out=y, casting="same_kind")
                return [y]
            sums = np.matmul(x.reshape(p * h, w), self._uniform(w, x.dtype, 1.0)).reshape(p, h)
            np.divide(sums.sum(axis=1, dtype=np.float64), h * w, out=y.reshape(p), casting="same_kind")
            return [y]
        self.check_size((p, h, ow), "the rows averaged")
        self.check_work(p * (h * w * ow + oh * h * ow), f"averaging {(h, w)} maps to {(oh, ow)}")
        ah, aw = self._matrices(h, w, x.dtype)
        rows = np.matmul(x.reshape(p * h, w), aw).reshape(p, h, ow)
        np.matmul(ah, rows, out=y.reshape(p, oh, ow))
        return [y]


@register("nn.AdaptiveMaxPool1d", "nn.AdaptiveMaxPool2d", "F.adaptive_max_pool1d", "F.adaptive_max_pool2d")
class AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.return_indices, self.as_tuple = self._indices_outputs()

    def _positions(self, h: int, w: int) -> np.ndarray:
        """(OH, OW, KHmax·KWmax) flat input positions h*W + w of each window; short windows
        repeat their last position (harmless for max, and argmax still finds the first)."""
        pos = self._cache.get((h, w))
        if pos is None:
            oh, ow = self._out_hw(h, w)
            axes = []
            for n, o in ((h, oh), (w, ow)):
                self.check_size((o,), "the output")
                start, end = adaptive_bounds(n, o)
                k = int((end - start).max())
                self.check_size((o, k), "the window table")
                axes.append(np.minimum(start[:, None] + np.arange(k), end[:, None] - 1))
            ih, iw = axes
            self.check_size((oh, ow, ih.shape[1] * iw.shape[1]), "the window table")
            pos = (ih[:, None, :, None] * w + iw[None, :, None, :]).reshape(oh, ow, -1)
            self._cache[(h, w)] = pos
        return pos

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, lead = self._planes(inputs[0])
        _, p, h, w = x.shape
        oh, ow = self._out_hw(h, w)
        shape = self._out_shape(lead, oh, ow)
        pos = self._positions(h, w)
        self.check_size((p,) + pos.shape, "the gathered windows")
        windows = x.reshape(p, h * w)[:, pos]  # (P, OH, OW, K)
        y = output_buffer(out[:1], shape, x.dtype)
        if not self.return_indices:
            np.max(windows, axis=3, out=y.reshape(p, oh, ow))
            return [y]
        best = windows.argmax(axis=3)[..., None]
        y.reshape(p, oh, ow)[...] = np.take_along_axis(windows, best, axis=3)[..., 0]
        idx = np.take_along_axis(np.broadcast_to(pos, windows.shape), best, axis=3)[..., 0]
        return self._with_indices(y, idx.reshape(shape))
