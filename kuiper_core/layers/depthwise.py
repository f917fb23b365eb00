"""Depthwise convolutions (groups = in = out channels) on small maps, computed channels last.

Im2col does a depthwise conv as C GEMMs of one row each, over columns gathered per channel:
on a small map (MobileNetV3's 576 channels of 3x3, 5x5 taps) that is 576 BLAS calls of a
few dozen multiply-adds and a gather whose contiguous runs are a few floats long. Here the
padded input is laid out (N, Hp, Wp, C), so that every tap of every output position is a
run of C contiguous floats:

    cols[n, i, j, t, c] = xp[n, i·sh + a·dh, j·sw + b·dw, c]     (t = a·KW + b)
    y[n, c, i, j]       = Σ_t cols[n, i, j, t, c] · w[c, t] (+ bias[c])

one strided copy, one multiply by the (T, C) weight, one reduction over the taps, and the
(small) result copied back to NCHW. On big maps with few channels the runs are short and
Im2col's whole-row copies win: `channels_last_wins` weighs the two (cost models below).

`conv_reference.conv2d_reference` is the definition this is tested against.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import clamp
from .conv_kernels import Pads
from .windows import WORK, batch_chunks, scratch

# Cost models (milliseconds, one thread), least-squares fits (relative error) over 356
# depthwise convs (N 1/4, C 16-576, maps 3-24, 3x3 and 5x5, stride 1 and 2) timed on this
# project's build machine (bench/README.md, "Depthwise convolutions"); each within ~10 % of
# the measured time on the median shape.
# Im2col on a depthwise conv: per channel and image (a BLAS call each), per column element
# (wide rows at stride 1: OH x Wp columns per tap), per gathered row of taps at stride > 1.
_IM2COL_CALL = 6.88e-5
_IM2COL_COLUMN = 1.68e-7
_IM2COL_ROW = 2.98e-6
_IM2COL_FIXED = 2.52e-3
# Channels last: per column element (copy, multiply, reduce), per contiguous run of C, per
# input element (the transposed copy into the padded buffer).
_LAST_COLUMN = 2.13e-7
_LAST_RUN = 1.6e-5
_LAST_INPUT = 4.49e-7
_LAST_FIXED = 4.7e-3
# Taken only when 10 % cheaper: over the fitted shapes the choice is then 1.6 % off the
# faster kernel on average (Im2col alone: 33 %), the worst pick 1.65x (a 16x16 map).
MARGIN = 0.9


def channels_last_wins(
    x_shape: tuple[int, int, int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    pads: Pads,
    out_hw: tuple[int, int],
) -> bool:
    """Whether DepthwiseChannelsLast beats Im2col for this depthwise convolution (zero padding).

    Only for 2-D maps, where the models were fitted: on 1-D ones (H = 1) im2col's rows are
    the whole signal and it won 5 of 6 measured convs (e.g. (512, 50), k = 5: 44 vs 64 us,
    where the models would have picked channels last)."""
    n, c, h, w = x_shape
    oh, ow = out_hw
    if min(oh, ow) < 2:
        return False
    taps = kernel[0] * kernel[1]
    wide = stride == (1, 1)  # Im2col's wide rows: OH x padded width columns per tap
    cols = oh * (w + pads[2] + pads[3]) if wide else oh * ow
    im2col = (
        _IM2COL_CALL * n * c
        + _IM2COL_COLUMN * n * c * (taps + 1) * cols
        + (0 if wide else _IM2COL_ROW * n * c * taps * oh)
        + _IM2COL_FIXED
    )
    last = (
        _LAST_COLUMN * n * oh * ow * taps * c
        + _LAST_RUN * n * oh * ow * taps
        + _LAST_INPUT * n * c * h * w
        + _LAST_FIXED
    )
    return last < MARGIN * im2col


class DepthwiseChannelsLast:
    """y = depthwise conv of x, channels last (module docstring); zero padding."""

    def __init__(
        self,
        weight: np.ndarray,
        bias: np.ndarray | None,
        kernel: tuple[int, int],
        stride: tuple[int, int],
        dilation: tuple[int, int],
        pads: Pads,
        x_shape: tuple[int, int, int, int],
        out_hw: tuple[int, int],
        dtype: np.dtype,
        relu: bool = False,
    ) -> None:
        """weight: (C, 1, KH, KW); bias: (C,) or None."""
        n, c, h, w = x_shape
        kh, kw = kernel
        self.relu = relu
        self.out_hw = out_hw
        self.taps = kh * kw
        self.w = np.ascontiguousarray(weight.reshape(c, self.taps).T, dtype=dtype)  # (T, C)
        self.bias = None if bias is None else bias.astype(dtype, copy=False)
        hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
        # The padded input and the result, both (N, ., ., C), are the kernel's own (zero
        # borders written once); the columns, the big array, come from the shared work buffer.
        self.padded = np.zeros((n, hp, wp, c), dtype)
        self.interior = self.padded[:, pads[0] : pads[0] + h, pads[2] : pads[2] + w]
        oh, ow = out_hw
        (sh, sw), (dh, dw), item = stride, dilation, self.padded.itemsize
        row, pix = wp * c * item, c * item
        self.tap_view = as_strided(
            self.padded,
            (n, oh, ow, kh, kw, c),
            (hp * row, sh * row, sw * pix, dh * row, dw * pix, item),
            writeable=False,
        )
        self.result = np.empty((n, oh, ow, c), dtype)
        self.per_item = oh * ow * self.taps * c
        self.parts = batch_chunks(n, self.per_item)
        self.dtype = dtype

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        np.copyto(self.interior, x.transpose(0, 2, 3, 1))
        oh, ow = self.out_hw
        for part in self.parts:
            m = part.stop - part.start
            cols = scratch(WORK, (m, oh, ow, self.taps, x.shape[1]), self.dtype)
            np.copyto(cols.reshape(self.tap_view[part].shape), self.tap_view[part])
            np.multiply(cols, self.w, out=cols)
            np.add.reduce(cols, axis=3, out=self.result[part])
        if self.bias is not None:
            self.result += self.bias
        if self.relu:
            clamp.maximum(self.result, self.dtype.type(0), out=self.result)
        np.copyto(y, self.result.transpose(0, 3, 1, 2))
