"""A convolution split into two independent halves that run on two threads (threads.run_pair).

OpenBLAS alone scales a conv poorly over two cores: the gathers, Winograd's transforms and
scatters run on one, and its batched small GEMMs (Winograd's 36 per call) split and join
36 times. A split conv instead gives each thread a whole conv of half the size, each with
OpenBLAS at one thread and its own per-thread work buffers (windows.scratch): nothing is
shared but the read-only input and disjoint parts of the output.

- A batch of an even size splits by images: each half is the same conv at half the batch.
- Otherwise by bands of output rows: a band's conv reads the input rows its outputs need
  (the kernel's halo overlaps the other band's), with zero padding only where the band
  meets the input's own edge. Winograd bands meet at a whole tile row (m output rows), so
  that both halves together compute exactly the whole conv's tiles.

Each half is a kernel of conv_kernels / winograd made for its own shape, by the layer, with
the algorithm chosen for the whole conv. With one BLAS thread the halves run one after the
other on the caller (the same arithmetic, so split and whole agree with the BLAS at any count).
Which convs split is decided where the kernel is made (conv.py: `worth_splitting`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..threads import blas_threads, run_pair
from .conv_kernels import ROWS, ConvKernel, Pads, im2col_cost, winograd_cost, winograd_rows_cost

Index = tuple[slice, ...]
# (kernel, the input's part it reads, the output's part it writes)
Half = tuple[ConvKernel, Index, Index]
# Makes a half's kernel: (input shape, its pads, its output size, its output channels) -> kernel.
MakeHalf = Callable[[tuple[int, int, int, int], Pads, tuple[int, int], slice], ConvKernel]

# A split pays off from about this many milliseconds of one-thread work (cost model of
# conv_kernels): below, the hand-off (~15-40 us with the GIL passed between the halves'
# calls) and two smaller GEMMs eat the gain (measured: see bench/README.md).
SPLIT_MIN_MS = 0.25


def row_band(h: int, kernel: int, stride: int, dilation: int, pad_top: int, out_rows: tuple[int, int]) -> tuple[int, int, int, int]:
    """(first input row, end input row, top pad, bottom pad) of the conv computing output
    rows [a, b) alone: the rows its windows read, clipped to the input, the rest padding."""
    a, b = out_rows
    first = a * stride - pad_top
    end = (b - 1) * stride - pad_top + (kernel - 1) * dilation + 1
    lo, hi = max(0, first), min(h, end)
    return lo, hi, lo - first, end - hi


class SplitConv:
    """Two halves of one convolution, run at once (see the module docstring)."""

    def __init__(self, halves: tuple[Half, Half]) -> None:
        self.halves = halves

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        (ka, xa, ya), (kb, xb, yb) = self.halves
        run_pair(lambda: ka.run(x[xa], y[ya]), lambda: kb.run(x[xb], y[yb]))


IMAGES, ROW_BANDS, CHANNELS = "images", "rows", "channels"


def split_conv(how: str, x_shape: tuple[int, int, int, int], pads: Pads, out_hw: tuple[int, int], out_channels: int,
               kernel_h: int, stride_h: int, dilation_h: int, align: int, make: MakeHalf) -> SplitConv | None:
    """The conv split in two halves `how` (IMAGES, ROW_BANDS at a multiple of `align`
    output rows, CHANNELS), or None when it has no two non-empty halves."""
    n, c, h, w = x_shape
    every = slice(None)
    if how == IMAGES:
        if n < 2:
            return None
        parts = (slice(0, n // 2), slice(n // 2, n))
        halves = [(make((p.stop - p.start, c, h, w), pads, out_hw, every), (p,), (p,)) for p in parts]
    elif how == CHANNELS:
        if out_channels < 2:
            return None
        parts = (slice(0, out_channels // 2), slice(out_channels // 2, out_channels))
        halves = [(make(x_shape, pads, out_hw, p), (), (every, p)) for p in parts]
    else:
        oh = out_hw[0]
        units = -(-oh // align)
        cut = min(oh, (units + 1) // 2 * align)
        if units < 2 or cut >= oh:
            return None
        halves = []
        for rows in ((0, cut), (cut, oh)):
            lo, hi, top, bottom = row_band(h, kernel_h, stride_h, dilation_h, pads[0], rows)
            if hi <= lo:  # a band of padding only
                return None
            k = make((n, c, hi - lo, w), (top, bottom, pads[2], pads[3]), (rows[1] - rows[0], out_hw[1]), every)
            halves.append((k, (every, every, slice(lo, hi)), (every, every, slice(*rows))))
    return SplitConv((halves[0], halves[1]))


def how_to_split(x_shape: tuple[int, int, int, int], out_channels: int, kernel: tuple[int, int], groups: int,
                 padding_mode: str, out_hw: tuple[int, int], m: int | str | None) -> str | None:
    """How a conv splits (IMAGES, ROW_BANDS, CHANNELS), or None when it runs whole: with the
    BLAS at one thread, or below SPLIT_MIN_MS."""
    n, c = x_shape[:2]
    if blas_threads() < 2:
        return None
    if m == ROWS:
        ms = winograd_rows_cost(n, c, out_channels, *out_hw)
    elif m is not None:
        ms = winograd_cost(m, n, c, out_channels, *out_hw)  # type: ignore[arg-type]
    else:
        ms = im2col_cost(n, c // groups, out_channels // groups, *out_hw, kernel[0] * kernel[1]) * groups
    if ms < SPLIT_MIN_MS:
        return None
    if n % 2 == 0:
        return IMAGES
    return ROW_BANDS if padding_mode == "zeros" else None
