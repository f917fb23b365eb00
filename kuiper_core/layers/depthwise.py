"""Depthwise convolutions (groups = in = out channels): channels last on small maps, as wide
rows of taps on big ones.

Im2col does a depthwise conv as C GEMMs of one row each, over columns gathered per channel:
on a small map (MobileNetV3's 576 channels of 3x3, 5x5 taps) that is 576 BLAS calls of a
few dozen multiply-adds and a gather whose contiguous runs are a few floats long. Here the
padded input is laid out (N, Hp, Wp, C), so that every tap of every output position is a
run of C contiguous floats:

    cols[n, i, j, t, c] = xp[n, i·sh + a·dh, j·sw + b·dw, c]     (t = a·KW + b)
    y[n, c, i, j]       = Σ_t cols[n, i, j, t, c] · w[c, t] (+ bias[c])

one einsum over the taps of that strided view (no columns copied) with the (KH, KW, C)
weight, and the (small) result copied back to NCHW. On big maps with few channels the runs
are short and Im2col's whole-row copies win: conv_choice.channels_last_wins weighs the two
(with the costs of kernel_costs.py).

On big maps at stride 1 (MobileNetV2's and EfficientNet's 112x112 and 56x56 3x3 convs)
`DepthwiseWideRows` wins over both: each channel's padded map, flat, read at each tap's
offset gives that tap's products for every output position at once, over "wide" rows of
the padded width (the last KW - 1 columns of each are thrown away at the end):

    wide[c, i * Wp + j] = sum_t xp[c, i * Wp + j + a * dh * Wp + b * dw] * w[c, t]

2 KH KW - 1 NumPy passes over a few channels at a time, whose contiguous runs are whole
maps: no columns copied, no transposes.

`conv_reference.conv2d_reference` is the definition this is tested against.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import clamp
from .conv_kernels import Pads
from .kernel_costs import DEFAULT_COSTS, KernelCosts


class Geometry(NamedTuple):
    """A depthwise convolution's shapes, as the layer worked them out (zero padding)."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: Pads
    x_shape: tuple[int, int, int, int]
    out_hw: tuple[int, int]


class DepthwiseChannelsLast:
    """y = depthwise conv of x, channels last (module docstring); zero padding."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None, geo: Geometry, dtype: np.dtype, relu: bool) -> None:
        """weight: (C, 1, KH, KW); bias: (C,) or None."""
        kernel, stride, dilation, pads, x_shape, out_hw = geo
        n, c, h, w = x_shape
        kh, kw = kernel
        self.relu = relu
        self.out_hw = out_hw
        self.w = np.ascontiguousarray(weight.reshape(c, kh, kw).transpose(1, 2, 0), dtype=dtype)  # (KH, KW, C)
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
        self.dtype = dtype

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        np.copyto(self.interior, x.transpose(0, 2, 3, 1))
        # The taps read where they lie (no columns copied): einsum's loop over (a, b) with the C
        # channels innermost, the same sums in the same order as a reduction over copied
        # columns, ~2x faster (MobileNetV3's 240 x 6x6 5x5 conv 56 -> 30 us, one thread).
        np.einsum("npqabc,abc->npqc", self.tap_view, self.w, out=self.result)
        if self.bias is not None:
            self.result += self.bias
        if self.relu:
            clamp.maximum(self.result, self.dtype.type(0), out=self.result)
        np.copyto(y, self.result.transpose(0, 3, 1, 2))


class DepthwiseWideRows:
    """y = depthwise conv of x at stride 1 over wide rows (module docstring); zero padding."""

    def __init__(
        self,
        weight: np.ndarray,
        bias: np.ndarray | None,
        geo: Geometry,
        dtype: np.dtype,
        relu: bool,
        costs: KernelCosts = DEFAULT_COSTS,
    ) -> None:
        """weight: (C, 1, KH, KW); bias: (C,) or None; channels in blocks whose wide rows fit
        costs.wide_block_elements (a block's rows and products stay in L2)."""
        kernel, stride, (dh, dw), pads, x_shape, out_hw = geo
        assert stride == (1, 1), "wide rows are for stride 1"
        n, c, h, w = x_shape
        kh, kw = kernel
        oh = out_hw[0]
        hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
        self.relu, self.dtype, self.out_hw = relu, dtype, out_hw
        self.w = weight.reshape(c, kh * kw, 1).astype(dtype)  # per channel and tap, broadcast over a row
        self.bias = None if bias is None else bias.reshape(c, 1, 1).astype(dtype)
        # One zero row more than the padding needs: the last tap's wide row reads KW - 1
        # elements past the padded map's end.
        padded = np.zeros((n, c, hp + 1, wp), dtype)
        self.interior = padded[:, :, pads[0] : pads[0] + h, pads[2] : pads[2] + w]
        self.flat = padded.reshape(n, c, -1)
        self.offsets = [a * dh * wp + b * dw for a in range(kh) for b in range(kw)]
        self.wide_len, self.wp = oh * wp, wp
        block = max(1, min(c, costs.wide_block_elements // self.wide_len))
        self.blocks = [(c0, min(c, c0 + block)) for c0 in range(0, c, block)]
        self.acc = np.empty((block, self.wide_len), dtype)
        self.products = np.empty((block, self.wide_len), dtype)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        np.copyto(self.interior, x)
        oh, ow = self.out_hw
        length = self.wide_len
        for i in range(x.shape[0]):
            flat = self.flat[i]
            for c0, c1 in self.blocks:
                acc, products, w = self.acc[: c1 - c0], self.products[: c1 - c0], self.w[c0:c1]
                for t, offset in enumerate(self.offsets):
                    taps = flat[c0:c1, offset : offset + length]
                    if t == 0:
                        np.multiply(taps, w[:, 0], out=acc)
                    else:
                        np.multiply(taps, w[:, t], out=products)
                        acc += products
                # The columns that did not wrap around, with the bias added as they are kept.
                kept, block_out = acc.reshape(c1 - c0, oh, self.wp)[:, :, :ow], y[i, c0:c1]
                if self.bias is None:
                    np.copyto(block_out, kept)
                else:
                    np.add(kept, self.bias[c0:c1], out=block_out)
                if self.relu:
                    clamp.maximum(block_out, self.dtype.type(0), out=block_out)
