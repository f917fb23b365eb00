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

from ..threads import blas_threads
from ..two_threads import run_pair
from .conv_kernels import (_GEMM_MAC, _ROWS_MAC, _WINO_MAC, ROWS, ConvKernel, Pads, im2col_cost, winograd_cost,
                           winograd_rows_cost)

Index = tuple[slice, ...]
# (kernel, the input's part it reads, the output's part it writes)
Half = tuple[ConvKernel, Index, Index]
# Makes a half's kernel: (input shape, its pads, its output size, its output channels) -> kernel.
MakeHalf = Callable[[tuple[int, int, int, int], Pads, tuple[int, int], slice], ConvKernel]

# Which convs split (2 threads, batch 1; measured whole vs split, bench/README.md): those
# of at least SPLIT_MIN_MS of one-thread work (cost model of conv_kernels; below, the
# hand-off and two smaller GEMMs eat the gain), whose GEMM is at most GEMM_SHARE_MAX of it
# (OpenBLAS's two threads do as well on a GEMM: ResNet-18's stride-2 3x3 and 256-channel
# convs lost 1.5-2x split), or whose weight is small (SMALL_WEIGHTS: a GEMM OpenBLAS splits
# poorly, the 7x7 stem's 64 x 147). Batches run whole: split by images, ResNet-18 at batch
# 4 lost 1.0-1.5x.
SPLIT_MIN_MS = 0.3
GEMM_SHARE_MAX = 0.5
SMALL_WEIGHTS = 1 << 14


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
    """How a conv splits (ROW_BANDS), or None when it runs whole: with the BLAS at one thread,
    below SPLIT_MIN_MS, or where the GEMM is most of the work (see GEMM_SHARE_MAX)."""
    n, c = x_shape[:2]
    if blas_threads() < 2 or n != 1 or padding_mode != "zeros":
        return None
    o = out_channels
    oh, ow = out_hw
    if m == ROWS:
        total = winograd_rows_cost(n, c, o, oh, ow)
        gemm = _ROWS_MAC * 12 * o * c * n * oh * -(-ow // 2)
    elif m is not None:
        t = int(m) + 2
        total = winograd_cost(int(m), n, c, o, oh, ow)
        gemm = _WINO_MAC * t * t * o * c * n * -(-oh // int(m)) * -(-ow // int(m))
    else:
        taps = kernel[0] * kernel[1]
        total = im2col_cost(n, c // groups, o // groups, oh, ow, taps) * groups
        gemm = _GEMM_MAC * taps * (c // groups) * o * n * oh * ow
        if o * (c // groups) * taps <= SMALL_WEIGHTS:
            gemm = 0.0
    if total < SPLIT_MIN_MS or gemm > GEMM_SHARE_MAX * total:
        return None
    return ROW_BANDS
