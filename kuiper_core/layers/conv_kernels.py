"""Fast 2-D convolution kernels and the rule that picks one per input shape.

A kernel object ("plan") is made once per input shape and thread, holding whatever that
shape needs (padded-input buffer, column buffer, strided views); `run(x, y)` then does only
the arithmetic, writing y (N, O, OH, OW) for x (N, C, H, W).

- `Pointwise`: 1x1, stride 1, no padding: the input already is the GEMM's right operand.
- `Im2col`: everything else. The padded input's kernel taps are gathered by a strided view
  into a column buffer (G, Cg·KH·KW [+ a row of ones for the bias], OH·OW) and one
  (broadcast over groups) GEMM with the weight, laid out (G, Og, Cg·KH·KW [+ bias]) at
  build, writes the NCHW output. For stride 1 with few outputs per group (depthwise), the
  columns are whole padded rows (long contiguous copies) and the wrapped-around output
  columns are cropped: the copy is the cost there, not the GEMM. A batch of small images
  (ResNet's 7x7 layers at batch 4) is one GEMM over the columns of all images, not one
  per image: a (512, 4608) weight streamed once instead of 4 times (11.2 -> 8.8 ms). Big
  column buffers are filled and multiplied a band of output rows at a time, so that the
  columns stay in cache between the gather and the GEMM (ResNet's 7x7 stem: 3.6 -> 2.6 ms).
- `WinogradConv` (winograd.py): stride-1 3x3 convolutions, F(2,3): 2.25x fewer multiplications;
  `WinogradRowsConv`: F(2,3) along the rows only (1.5x fewer, a U of 1.33x the weight) for
  big layers whose 2-D U would take too much memory (ResNet-18's 512-channel 7x7 layers).
- `Stride2RowsConv` (winograd_stride2.py): stride-2 3x3/5x5/7x7 convolutions as Winograd
  along the rows on the input's even and odd columns (1.3-2x fewer multiplications).

Every kernel takes `relu`: it then writes max(conv, 0), a ReLU the prepared forward fused
into the convolution (runtime/prepared.py), applied while the output is in cache (per band,
in Winograd's scatter for free) instead of in a pass of its own.

Which kernel runs a convolution is conv_choice.py's business (its cost model: kernel_costs.py);
conv_reference.py holds the plain definitions every kernel here is tested against.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import clamp
from .kernel_costs import DEFAULT_COSTS, KernelCosts
from .windows import PADDED, RESULT, WORK, batch_chunks, pad_spatial, scratch, window_view

Pads = tuple[int, int, int, int]  # top, bottom, left, right

# Pointwise convolutions over more than twice this many input channels sum them in blocks of at
# most this many: one float32 accumulation over 480-1152 channels (EfficientNet's projections)
# had about twice PyTorch's rounding error, which the next squeeze-excitation blocks amplify on
# ill-conditioned inputs (docs/coverage.md). Blocks of 64 brought it to PyTorch's level but cost
# 25-38 % on every 1x1 conv over 128+ channels (partial sums written and reduced; ResNet-50
# 48.5 -> 55.4 ms, DenseNet-121 58.6 -> 67.4 at two threads); blocks of 256 keep the long sums
# (1024-2048 channels) blocked at a few % of that cost (bench/compare.py --suite outside). Measured error against
# float64 over the terms' magnitude (test_models_styles): at most 2.1 float32 eps with 256, 0.7
# with 64, 2.1 unblocked.
POINTWISE_BLOCK = 256
# Up to this many bytes of partial sums the blocks are one batched matmul and one sum (two calls);
# above, a loop over the blocks into a scratch buffer (its calls cost nothing next to the GEMMs).
POINTWISE_PARTIALS_MAX_BYTES = 4 << 20
# Pointwise convolutions of a 1x1 map with at most this many multiply-adds are summed in
# float64 and rounded once: squeeze-excitation's two 1x1 convolutions (global pool -> conv ->
# act -> conv -> sigmoid) give per-channel scales, whose rounding moves a whole channel of the
# block's output at once and which saturated sigmoids amplify on ill-conditioned inputs
# (docs/coverage.md); EfficientNet-B0's largest is 1152x48 (55K MACs, ~20 us in float64).
POINTWISE_FLOAT64_MAX_MACS = 1 << 16


def _channel_blocks(c: int) -> int:
    """How many equal blocks of <= POINTWISE_BLOCK channels to sum `c` in (1: one GEMM, up to two
    blocks' worth: each block costs calls and a pass over partial sums)."""
    if c <= 2 * POINTWISE_BLOCK:
        return 1
    first = -(-c // POINTWISE_BLOCK)
    for nb in range(first, 2 * first + 1):  # equal blocks of POINTWISE_BLOCK/2 .. POINTWISE_BLOCK
        if c % nb == 0:
            return nb
    return -(-c // POINTWISE_BLOCK)  # unequal: the loop's last block is shorter


class Pointwise:
    """1x1, stride 1, unpadded: y[n, g] = W[g] @ x[n, g] (+ bias); the channels summed in blocks
    (see POINTWISE_BLOCK)."""

    def __init__(
        self, w: np.ndarray, bias: np.ndarray | None, x_shape: tuple[int, int, int, int], relu: bool = False
    ) -> None:
        """w: (G, Og, Cg), e.g. a view of the layer's weight; bias: (G*Og,) or None."""
        self.relu = relu
        n, c, h, width = x_shape
        self.g, self.og, self.cg = w.shape
        self.w = w
        self.bias = None if bias is None else bias.reshape(self.g, self.og, 1)
        self.x_shape = (n, self.g, self.cg, h * width)
        self.y_shape = (n, self.g, self.og, h * width)
        # A tiny 1x1 map (POINTWISE_FLOAT64_MAX_MACS) in float64: the weight with the bias as a
        # last column (G, Og, Cg + 1), and buffers of its own (a plan is one thread's): the input
        # with a row of ones (N, G, Cg + 1, 1), the sums (N, G, Og, 1).
        self.wide: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if h * width == 1 and w.dtype == np.float32 and n * w.size <= POINTWISE_FLOAT64_MAX_MACS:
            bias_column = np.zeros((self.g, self.og, 1)) if self.bias is None else self.bias
            w64 = np.concatenate([w, bias_column], axis=2, dtype=np.float64)
            self.wide = (w64, np.ones((n, self.g, self.cg + 1, 1)), np.empty((n, self.g, self.og, 1)))
        nb = 1 if self.wide is not None else _channel_blocks(self.cg)
        self.nb = nb
        self.stacked: np.ndarray | None = None  # (G, nb, Og, blk): one batched matmul
        self.blocks: list[tuple[int, int, np.ndarray]] = []  # (start, stop, W block): the loop
        if nb > 1 and self.cg % nb == 0:
            blk = self.cg // nb
            partial_bytes = n * self.g * nb * self.og * h * width * w.itemsize
            if partial_bytes <= POINTWISE_PARTIALS_MAX_BYTES:
                self.stacked = np.ascontiguousarray(w.reshape(self.g, self.og, nb, blk).transpose(0, 2, 1, 3))
                self.split = (n, self.g, nb, blk, h * width)
        if nb > 1 and self.stacked is None:
            step = -(-self.cg // nb)
            self.blocks = [
                (a, min(a + step, self.cg), np.ascontiguousarray(w[..., a : a + step])) for a in range(0, self.cg, step)
            ]

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        y3 = y.reshape(self.y_shape)
        x4 = x.reshape(self.x_shape)
        if self.wide is not None:
            w64, x64, acc = self.wide
            np.copyto(x64[:, :, : self.cg], x4)
            np.matmul(w64, x64, out=acc)
            np.copyto(y3, acc, casting="same_kind")
            if self.relu:
                clamp.maximum(y3, y3.dtype.type(0), out=y3)
            return
        if self.stacked is not None:
            n, g, nb, _, hw = self.split
            parts = scratch("pointwise.part", (n, g, nb, self.og, hw), y3.dtype)
            np.matmul(self.stacked, x4.reshape(self.split), out=parts)
            np.add.reduce(parts, axis=2, out=y3)
        elif self.blocks:
            a, b, wb = self.blocks[0]
            np.matmul(wb, x4[:, :, a:b], out=y3)
            part = scratch("pointwise.part", self.y_shape, y3.dtype)
            for a, b, wb in self.blocks[1:]:
                np.matmul(wb, x4[:, :, a:b], out=part)
                y3 += part
        else:
            np.matmul(self.w, x4, out=y3)
        if self.bias is not None:
            y3 += self.bias
        if self.relu:
            clamp.maximum(y3, y3.dtype.type(0), out=y3)


class Im2col:
    """Column buffer + one GEMM; see the module docstring."""

    def __init__(
        self,
        wmat: np.ndarray,
        kernel: tuple[int, int],
        stride: tuple[int, int],
        dilation: tuple[int, int],
        pads: Pads,
        padding_mode: str,
        x_shape: tuple[int, int, int, int],
        out_hw: tuple[int, int],
        dtype: np.dtype,
        own_buffers: bool | None = None,
        bias_after: np.ndarray | None = None,
        relu: bool = False,
        costs: KernelCosts = DEFAULT_COSTS,
    ) -> None:
        """wmat: (G, Og, Cg·KH·KW), with the bias as an extra last column (added by the GEMM
        through a row of ones in the columns) or without, then `bias_after` (G*Og,) if any
        is added to the output (for big weights, where a copy with the column costs more
        memory than the extra pass over a small output costs time).
        own_buffers: None = when small (costs.im2col_own_buffers_bytes); needs padding_mode 'zeros'."""
        n, c, h, w = x_shape
        g, og = wmat.shape[0], wmat.shape[1]
        kh, kw = kernel
        self.k = c // g * kh * kw
        self.has_bias = wmat.shape[2] == self.k + 1
        self.wmat = wmat
        self.bias_after = None if bias_after is None else bias_after.reshape(g, og, 1)
        self.relu = relu
        self.kernel, self.stride, self.dilation, self.pads, self.mode = kernel, stride, dilation, pads, padding_mode
        self.out_hw = out_hw
        self.dtype = dtype
        self.g = g
        oh, ow = out_hw
        # Wide rows: stride 1, few outputs per group (costs.im2col_wide_max_out).
        self.wide = stride == (1, 1) and og <= costs.im2col_wide_max_out
        self.slack = (kw - 1) * dilation[1] if self.wide else 0
        hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
        self.cols_w = oh * wp if self.wide else oh * ow  # columns per item
        # Across the batch: columns laid out (G, K, N·OH·OW) for one GEMM, whose (G, Og,
        # N·OH·OW) result is then copied to the NCHW output.
        self.across = n > 1 and g == 1 and not self.wide and oh * ow <= costs.im2col_across_max_columns
        # Bands of output rows whose columns fit costs.im2col_band_elements (plain layout only).
        self.band = oh
        band_elements = costs.im2col_band_elements
        if not (self.wide or self.across) and g * (self.k + 1) * oh * ow > band_elements:
            self.band = max(1, band_elements // (g * (self.k + 1) * ow))
            self.cols_w = self.band * ow
        self.per_item = g * (self.k + 1) * self.cols_w + (g * og * oh * wp if self.wide else 0)
        self.per_item += g * og * oh * ow if self.across else 0
        nbytes = (n * (c * hp * wp + self.slack) + n * self.per_item) * dtype.itemsize
        own = nbytes <= costs.im2col_own_buffers_bytes if own_buffers is None else own_buffers
        self.own = own and padding_mode == "zeros" and self.band == oh
        if self.own:
            # Padded input with zero borders, columns with the ones row, and the strided
            # view between them, all made once: a call is two copies and a GEMM.
            flat = np.zeros(n * c * hp * wp + self.slack, dtype)
            self.padded = flat[: n * c * hp * wp].reshape(n, c, hp, wp)
            self.interior = self.padded[:, :, pads[0] : pads[0] + h, pads[2] : pads[2] + w]
            self.cols = np.empty(self._cols_shape(n), dtype)
            self._ones_row(self.cols)
            self.taps, self.cols_view = self._views(self.padded, self.cols)
            self.wide_out = np.empty((n, g, og, oh, wp), dtype) if self.wide else None
            self.across_out = np.empty((g, og, n * oh * ow), dtype) if self.across else None
            # One image, one group, wide rows: the GEMM as np.dot on 2-D views of the own
            # buffers (matmul's batched loop costs ~0.7 us more a call: deep1500's 8x8 convs).
            self.dot: tuple[np.ndarray, ...] | None = None
            if self.wide and n == 1 and g == 1 and self.wmat.flags.c_contiguous:
                wide_out = self.wide_out
                assert wide_out is not None
                product = wide_out.reshape(og, -1)
                self.dot = (self.wmat[0], self.cols.reshape(self.cols.shape[2], -1), product, wide_out)

    def _cols_shape(self, n: int) -> tuple[int, ...]:
        rows = self.k + self.has_bias
        return (self.g, rows, n * self.cols_w) if self.across else (n, self.g, rows, self.cols_w)

    def _ones_row(self, cols: np.ndarray) -> None:
        """The bias column's partner: a row of ones after the K columns rows."""
        if self.has_bias:
            if self.across:
                cols[:, self.k] = 1
            else:
                cols[:, :, self.k] = 1

    def _views(self, xp: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The kernel taps of the padded input, and the part of `cols` they are copied to."""
        n, c, hp, wp = xp.shape
        g, (kh, kw), (dh, dw) = self.g, self.kernel, self.dilation
        cg = c // g
        oh, ow = self.out_hw
        if self.wide:
            item = xp.itemsize
            taps = as_strided(
                xp,
                (n, g, cg, kh, kw, oh * wp),
                (c * hp * wp * item, cg * hp * wp * item, hp * wp * item, dh * wp * item, dw * item, item),
                writeable=False,
            )
        else:
            taps = window_view(xp, self.kernel, self.stride, self.dilation, self.out_hw).reshape(
                n, g, cg, kh, kw, oh, ow
            )
        if self.across:  # (G, K, N·P) seen as (N, G, Cg, KH, KW, OH, OW)
            per_k = np.reshape(cols[:, : self.k], (g, cg, kh, kw, n, oh, ow), copy=False)
            return taps, np.moveaxis(per_k, 4, 0)
        return taps, np.reshape(cols[:, :, : self.k], taps.shape, copy=False)

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        if self.own:
            np.copyto(self.interior, x)
            np.copyto(self.cols_view, self.taps)
            if self.dot is not None:
                w, cols, product, grid = self.dot  # product: grid (wide_out) as a matrix
                np.dot(w, cols, out=product)
                self._crop(y, grid)
            else:
                self._gemm(self.cols, y, self.wide_out if self.wide else self.across_out)
            return
        n = x.shape[0]
        # In bands: one image at a time, so that a band's columns stay within the budget.
        parts = [slice(i, i + 1) for i in range(n)] if self.band < self.out_hw[0] else batch_chunks(n, self.per_item)
        for part in parts:
            self._run_scratch(x[part], y[part])

    def _run_scratch(self, x: np.ndarray, y: np.ndarray) -> None:
        n = x.shape[0]
        xp = pad_spatial(x, self.pads, self.mode, slot=PADDED, slack=self.slack)
        cols = scratch(WORK, self._cols_shape(n), self.dtype)
        if self.band < self.out_hw[0]:
            self._run_bands(xp, cols, y)
            return
        taps, cols_view = self._views(xp, cols)
        np.copyto(cols_view, taps)
        self._ones_row(cols)
        work = None
        if self.wide:
            work = scratch(RESULT, (n, self.g, self.wmat.shape[1], self.out_hw[0], xp.shape[3]), self.dtype)
        elif self.across:
            work = scratch(RESULT, (self.g, self.wmat.shape[1], cols.shape[2]), self.dtype)
        self._gemm(cols, y, work)

    def _run_bands(self, xp: np.ndarray, cols: np.ndarray, y: np.ndarray) -> None:
        """Gather and multiply `self.band` output rows at a time into y (plain layout)."""
        n, g, og = y.shape[0], self.g, self.wmat.shape[1]
        oh, ow = self.out_hw
        taps = window_view(xp, self.kernel, self.stride, self.dilation, self.out_hw)
        taps = taps.reshape(n, g, xp.shape[1] // g, *self.kernel, oh, ow)
        for r0 in range(0, oh, self.band):
            rows = min(self.band, oh - r0)
            part = cols[..., : rows * ow]
            band_taps = taps[..., r0 : r0 + rows, :]
            np.copyto(np.reshape(part[:, :, : self.k], band_taps.shape, copy=False), band_taps)
            self._ones_row(part)
            y4 = np.reshape(y[:, :, r0 : r0 + rows], (n, g, og, rows * ow), copy=False)
            np.matmul(self.wmat, part, out=y4)
            self._finish(y4)

    def _gemm(self, cols: np.ndarray, y: np.ndarray, work: np.ndarray | None) -> None:
        """y = wmat @ cols (+ bias); `work`: the wide-rows grid or the across-batch result."""
        n, g, og = y.shape[0], self.g, self.wmat.shape[1]
        oh, ow = self.out_hw
        y4 = y.reshape(n, g, og, oh * ow)
        if self.across:
            assert work is not None
            np.matmul(self.wmat, cols, out=work)
            np.copyto(y4, work.reshape(g, og, n, oh * ow).transpose(2, 0, 1, 3))
        elif work is None:
            np.matmul(self.wmat, cols, out=y4)
        else:
            np.matmul(self.wmat, cols, out=work.reshape(n, g, og, -1))
            self._crop(y, work)
            return
        self._finish(y4)

    def _crop(self, y: np.ndarray, work: np.ndarray) -> None:
        """Wide rows: the GEMM computed on an OH x Wp grid; y is its columns that did not wrap
        around, with the bias and ReLU when they were not in the GEMM."""
        n, g, og = y.shape[0], self.g, self.wmat.shape[1]
        oh, ow = self.out_hw
        y5, kept = y.reshape(n, g, og, oh, ow), work[..., :ow]
        if self.relu and self.bias_after is None:  # the ReLU as the crop: one call less
            clamp.maximum(kept, y.dtype.type(0), out=y5)
            return
        if self.bias_after is not None:  # the bias as the crop
            np.add(kept, self.bias_after[..., None], out=y5)
            if self.relu:
                clamp.maximum(y5, y.dtype.type(0), out=y5)
            return
        np.copyto(y5, kept)

    def _finish(self, y4: np.ndarray) -> None:
        """The bias when it was not in the GEMM, and a fused ReLU."""
        if self.bias_after is not None:
            y4 += self.bias_after
        if self.relu:
            clamp.maximum(y4, y4.dtype.type(0), out=y4)


class ConvKernel(Protocol):
    def run(self, x: np.ndarray, y: np.ndarray) -> None: ...
