"""ncnn's Pooling: max/avg windows with its padding modes, global and adaptive pooling."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...layers.pool import adaptive_bounds
from ...limits import PYTHON_STEP_WORK
from .base import F32, NcnnLayer, ncnn_layer

MAX, AVG = 0, 1
FULL, VALID, SAME_UPPER, SAME_LOWER = 0, 1, 2, 3


@ncnn_layer("Pooling")
class Pooling(NcnnLayer):
    """0=pooling_type (0 max, 1 avg) 1/11=kernel 2/12=stride 3/14/13/15=pads 4=global_pooling
    5=pad_mode (0 full: the pads and a tail so the last window fits (ceil); 1 valid: the pads
    only; 2/3 SAME upper/lower: computed pads)
    6=avgpool_count_include_pad 7=adaptive_pooling 8/18=out_w/out_h. Global pooling gives a
    1-D blob of the channels (ncnn's shape rule), not (c, 1, 1)."""

    def setup(self) -> None:
        p = self.p
        self.kind = p.integer("pooling_type")
        if self.kind not in (MAX, AVG):
            raise ValueError(f"param 0 (pooling_type) must be 0 (max) or 1 (avg), got {self.kind}")
        self.kernel = (p.integer("kernel_h"), p.integer("kernel_w"))
        self.stride = (p.integer("stride_h"), p.integer("stride_w"))
        self.pads = (p.integer("pad_top"), p.integer("pad_bottom"), p.integer("pad_left"), p.integer("pad_right"))
        self.global_ = bool(p.integer("global_pooling"))
        self.adaptive = bool(p.integer("adaptive_pooling"))
        self.out_size = (p.integer("out_h"), p.integer("out_w"))
        self.mode = p.integer("pad_mode")
        self.include_pad = bool(p.integer("avgpool_count_include_pad"))
        if not (self.global_ or self.adaptive) and (min(self.kernel) < 1 or min(self.stride) < 1):
            raise ValueError(f"kernel and stride must be >= 1, got {self.kernel}, {self.stride}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        if x.ndim != 3:
            raise self.error(f"expected a (c, h, w) blob, got shape {x.shape}")
        reduce = np.max if self.kind == MAX else np.mean
        if self.global_:
            return [reduce(x, axis=(1, 2)).astype(F32)]
        if self.adaptive:
            return [self._adaptive(x, reduce)]
        return [self._windows(x)]

    def _adaptive(self, x: np.ndarray, reduce: object) -> np.ndarray:
        c, h, w = x.shape
        oh, ow = (d if d > 0 else n for d, n in zip(self.out_size, (h, w)))
        self.check_size((c, oh, ow))
        # one Python step per output position below (~5 us: the time of ~20,000 multiply-adds)
        self.check_work(oh * ow * PYTHON_STEP_WORK + c * h * w, f"adaptive pooling of {(h, w)} to {(oh, ow)}")
        (r0, r1), (c0, c1) = adaptive_bounds(h, oh), adaptive_bounds(w, ow)
        y = np.empty((c, oh, ow), F32)
        for i in range(oh):
            for j in range(ow):
                y[:, i, j] = reduce(x[:, r0[i] : r1[i], c0[j] : c1[j]], axis=(1, 2))  # type: ignore[operator]  # np.max or np.mean, passed as an object
        return y

    def _windows(self, x: np.ndarray) -> np.ndarray:
        c, h, w = x.shape
        (kh, kw), (sh, sw) = self.kernel, self.stride
        top, bottom, left, right = self.pads
        if self.mode == VALID:  # the pads as given, no tail: the last partial window dropped
            pass
        elif self.mode in (SAME_UPPER, SAME_LOWER):
            ph = max(kh + (h - 1) // sh * sh - h, 0)
            pw = max(kw + (w - 1) // sw * sw - w, 0)
            top, left = (ph // 2, pw // 2) if self.mode == SAME_UPPER else (ph - ph // 2, pw - pw // 2)
            bottom, right = ph - top, pw - left
        elif self.mode == FULL:  # the tail padded so the last window fits (ceil mode)
            tail_h, tail_w = (h + top + bottom - kh) % sh, (w + left + right - kw) % sw
            bottom += sh - tail_h if tail_h else 0
            right += sw - tail_w if tail_w else 0
        else:
            raise self.error(f"param 5 (pad_mode) must be 0..3, got {self.mode}")
        if h + top + bottom < kh or w + left + right < kw:
            raise self.error(f"the {kh}x{kw} window is larger than the padded blob ({h}, {w})")
        hp, wp = h + top + bottom, w + left + right
        self.check_size((c, hp, wp), "the padded blob")
        self.check_work(c * ((hp - kh) // sh + 1) * ((wp - kw) // sw + 1) * kh * kw, f"{kh}x{kw} windows over {(h, w)}")
        fill = -np.finfo(F32).max if self.kind == MAX else 0
        padded = np.pad(x, ((0, 0), (top, bottom), (left, right)), constant_values=fill)
        win = sliding_window_view(padded, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
        if self.kind == MAX:
            return win.max(axis=(3, 4))
        total = win.sum(axis=(3, 4), dtype=F32)
        if self.mode not in (FULL, VALID):  # ncnn counts SAME's computed padding in the divisor, always
            return total / F32(kh * kw)
        # the tail padding (full mode) never counts; the pads as given count with
        # avgpool_count_include_pad only
        inside = np.zeros(padded.shape[1:], F32)
        if self.include_pad:
            inside[: padded.shape[1] - (bottom - self.pads[1]), : padded.shape[2] - (right - self.pads[3])] = 1
        else:
            inside[top : top + h, left : left + w] = 1
        area = sliding_window_view(inside, (kh, kw))[::sh, ::sw].sum(axis=(2, 3))
        return total / np.maximum(area, F32(1))
