"""Winograd F(m x m, 3 x 3) convolution for stride-1 3x3 convolutions (Lavin & Gray, 2016).

A 3x3 convolution computes each m x m block of outputs from a (m+2) x (m+2) tile d of the
input. Winograd's minimal filtering does it as

    Y = A^T [ U ⊙ (B^T d B) ] A,    U = G g G^T  (g: one 3x3 kernel)

so per tile and channel pair it needs (m+2)^2 multiplications instead of 9 m^2: 2.25x fewer
for F(2,3) (4x4 tiles) and 4x fewer for F(4,3) (6x6 tiles). Summed over input channels, the
elementwise products become (m+2)^2 independent GEMMs, U[k] (O x C) @ V[k] (C x tiles), which
is where the time goes; the transforms are small GEMMs over all tiles at once.

- At build: U = G g G^T for every (out, in) channel pair, laid out (t*t, O, C) for the
  batched GEMM (one GEMM in the weight's dtype).
- Per call (`WinogradConv.run`): zero-pad the input into a work buffer whose size is a
  whole number of tiles; gather the overlapping tiles (one strided copy); B^T d B as two small
  GEMMs (rows, then columns of every tile); the batched GEMM; the bias added to one
  transform point (below); A^T M A as two small GEMMs; scatter the m x m blocks into the
  output, through np.clip: the scatter applies a fused ReLU for free, and even as an
  identity clip it is faster than np.copyto into the strided output (91 vs 151 us on
  ResNet-18's 64-channel layer; NumPy picks a better loop order for the ufunc).

The bias: A^T's column for the point x = 1 is all ones (it evaluates the output polynomial
there), so adding b to that one point of M adds b to every output of the tile. That is a
pass over 1/(m+2)^2 of M instead of one over the output.

Rounding: F(2,3)'s transforms are exact in binary, but each output sums nine transform
points, so the error of the GEMMs' float32 sums reaches it about three times over: summed
over hundreds of channels at once, that was 2-2.7x PyTorch float32's error against float64
(tools/precision_convs.py; issue 34). The GEMMs therefore sum the channels in blocks of at
most CHANNEL_BLOCK (ROWS_CHANNEL_BLOCK along the rows), partial sums added: 1.0-1.6x
PyTorch's. F(4,3)'s constants (1/6, 1/24, points ±2) cost 5-35x PyTorch's error, blocks or
not; conv_choice.winograd_tile does not take it (its transforms are kept, tested, for
reference).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .kernel_costs import DEFAULT_COSTS, KernelCosts
from .windows import WORK, hold_scratch, scratch

# A batch runs in chunks of whole images: as few images as give the GEMMs
# costs.winograd_min_tiles tiles (columns), and never work buffers over
# costs.winograd_work_elements (six such buffers live per thread): bench/bench_convs.py
# --batch 4 --threads 1 on ResNet-18's shapes measures both ends (big maps one image at a
# time, small ones several).
# Weight elements transformed at a time by transform_weights_rows.
TRANSFORM_BLOCK = 1 << 16
# The GEMMs sum at most this many channels (WinogradRowsConv: GEMM rows, 3 per channel) into
# one float32 partial sum (see the module docstring). Measured RMS error against float64 over
# PyTorch float32's, F(2,3), 4x4 and 8x8 maps, 256-1024 channels: 2.1-2.7 in one sum, 1.6-2.0
# in blocks of 128, 1.3-1.6 in blocks of 64, 1.1-1.3 in blocks of 32.
CHANNEL_BLOCK = 64
# WinogradRowsConv's K runs over (kernel row, channel): 3 GEMM rows a channel. Its largest single
# error against PyTorch's on 256-1024 channels (4x4 maps): 1.3-2.0x in blocks of 64 channels,
# 1.0-1.3x in blocks of 32 (RMS 1.4-1.65 -> 1.1-1.3), within the timing noise on ResNet-18's
# 512-channel 7x7 layer.
ROWS_CHANNEL_BLOCK = 32


def channel_blocks(k: int, per_channel: int = 1, channels: int | None = None) -> list[slice]:
    """The GEMM's K (`per_channel` rows a channel) as equal slices of at most `channels`
    (CHANNEL_BLOCK) channels' rows (one slice up to that)."""
    block = (CHANNEL_BLOCK if channels is None else channels) * per_channel
    n = -(-k // block)
    step = -(-k // n)
    return [slice(a, min(a + step, k)) for a in range(0, k, step)]


# m -> (B^T, G, A^T) for interpolation points 0, ±1 (F(2,3)) and 0, ±1, ±2 (F(4,3)).
TRANSFORMS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    2: (
        np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
        np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),
    ),
    4: (
        np.array(
            [
                [4, 0, -5, 0, 1, 0],
                [0, -4, -4, 1, 1, 0],
                [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0],
                [0, 2, -1, -2, 1, 0],
                [0, 4, 0, -5, 0, 1],
            ],
            np.float64,
        ),
        np.array(
            [
                [1 / 4, 0, 0],
                [-1 / 6, -1 / 6, -1 / 6],
                [-1 / 6, 1 / 6, -1 / 6],
                [1 / 24, 1 / 12, 1 / 6],
                [1 / 24, -1 / 12, 1 / 6],
                [0, 0, 1],
            ],
            np.float64,
        ),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], np.float64),
    ),
}


def transform_weights(weight: np.ndarray, m: int) -> np.ndarray:
    """U = G g G^T for every (out, in) pair of a (O, C, 3, 3) weight, as (t*t, O, C).

    One GEMM: kron(G, G) (t*t x 9) times the weights as 9 x (O*C) columns gives U already
    in the batched GEMM's (t*t, O, C) layout. The columns are copied contiguous first:
    NumPy's matmul does not hand a transposed view to BLAS (40x slower on ResNet-18)."""
    _, g, _ = TRANSFORMS[m]
    o, c = weight.shape[:2]
    gg = np.kron(g, g).astype(weight.dtype)
    columns = np.ascontiguousarray(weight.reshape(o * c, 9).T)
    return np.matmul(gg, columns).reshape((m + 2) ** 2, o, c)


class _WorkKernel:
    """What the Winograd kernels share: a batch run in chunks of `chunk` images (the last,
    smaller one by a kernel made for it), and the per-thread work buffer seen as the
    kernel's arrays, made again only when the buffer moved (making them on every call cost
    20-45 us, 10-15 % of UNet's convolutions); dropped when a bigger buffer replaces it."""

    chunk: int
    sizes: tuple[int, ...]
    dtype: np.dtype
    # (address of the work buffer, the views of it): one attribute, read and written whole, since
    # one kernel serves every thread (app sessions share a model) and each thread has its own
    # buffer: two attributes let a thread return the views another thread had just made.
    _cached: tuple[int, Any] | None = None

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        """y (N, O, OH, OW) = conv3x3(x (N, C, H, W)) + bias."""
        n = self.chunk
        if x.shape[0] == n:
            self._run(x, y)
            return
        for i in range(0, x.shape[0], n):
            part = slice(i, i + n)
            kernel = self if x[part].shape[0] == n else self._for_shape(x[part].shape)
            kernel._run(x[part], y[part])

    def _work(self) -> Any:
        flat = scratch(WORK, (sum(self.sizes),), self.dtype)
        address = flat.__array_interface__["data"][0]
        cached = self._cached
        if cached is None or cached[0] != address:
            cached = (address, self._make_views(flat))
            self._cached = cached
            hold_scratch(WORK, self.dtype, self)
        return cached[1]

    def release_scratch(self) -> None:
        """The work buffer was replaced by a bigger one: drop the views of the old one."""
        self._cached = None

    def _for_shape(self, x_shape: tuple[int, int, int, int]) -> _WorkKernel:
        raise NotImplementedError

    def _make_views(self, flat: np.ndarray) -> object:
        raise NotImplementedError

    def _run(self, x: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError


def padded_parts(padded: np.ndarray, top: int, left: int, h: int, w: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The (N, C, H, W) interior of a padded buffer at (top, left) and its four borders (other
    kernels share the buffer: the borders are zeroed on every call)."""
    interior = padded[:, :, top : top + h, left : left + w]
    borders = [
        padded[:, :, :top],
        padded[:, :, top + h :],
        padded[:, :, top : top + h, :left],
        padded[:, :, top : top + h, left + w :],
    ]
    return interior, borders


class WinogradConv(_WorkKernel):
    """One stride-1 3x3 convolution at one input shape: buffers and views made once.

    Batches run in chunks of `self.chunk` images (costs.winograd_min_tiles, winograd_work_elements)."""

    def __init__(
        self,
        u: np.ndarray,
        bias: np.ndarray | None,
        m: int,
        x_shape: tuple[int, int, int, int],
        pads: tuple[int, int, int, int],
        dtype: np.dtype,
        relu: bool = False,
        costs: KernelCosts = DEFAULT_COSTS,
    ) -> None:
        """relu: write max(conv + bias, 0), a following ReLU fused into the scatter."""
        bt, _, at = TRANSFORMS[m]
        t = m + 2
        batch, c, h, w = x_shape
        o = u.shape[1]
        oh, ow = h + pads[0] + pads[1] - 2, w + pads[2] + pads[3] - 2
        th, tw = -(-oh // m), -(-ow // m)  # tiles down and across (the last ones may overhang)
        fill = -(-costs.winograd_min_tiles // (th * tw))  # images for that many tiles
        self.chunk = n = max(1, min(batch, fill, costs.winograd_work_elements // (t * t * max(c, o) * th * tw)))
        self.m, self.t, self.o, self.c = m, t, o, c
        self.tiles = n * th * tw
        self.u = u
        self.bt = bt.astype(dtype)
        self.at = at.astype(dtype)
        self.bias = None if bias is None else bias.astype(dtype).reshape(o, 1)
        one = int(np.flatnonzero((at == 1).all(axis=0))[0])  # the point x = 1 (see above)
        self.bias_point = one * t + one
        self.relu = relu
        self.low = dtype.type(0 if relu else -np.inf)
        self.high = dtype.type(np.inf)
        self.pads = pads
        self.dtype = dtype
        # The zero-padded input covers every tile (the last ones overhang the output): x at
        # (top, left), zeros around.
        self.padded_shape = (n, c, th * m + 2, tw * m + 2)
        self.at_input = (slice(pads[0], pads[0] + h), slice(pads[2], pads[2] + w))
        self.tiles_shape = (t, t, c, n, th, tw)
        self.out_hw = (oh, ow)
        self.grid = (n, o, th * m, tw * m)
        self.exact = (oh, ow) == (th * m, tw * m)  # no overhanging tiles to crop
        # Work memory: the padded input, then two regions the passes write in turn (each
        # reads the other): A holds the tiles d, then V, then the half-transformed output
        # (and the uncropped grid); B holds B^T d, then M, then the output blocks. One
        # per-thread buffer (a kernel owning one would hold ~2 MB per layer at batch 4).
        self.blocks = channel_blocks(c)
        self.u_blocks = [u[:, :, b] for b in self.blocks]  # views: (t*t, O, block)
        self.sizes = (
            math.prod(self.padded_shape),
            max(t * t * c, m * t * o) * self.tiles,
            t * t * max(c, o) * self.tiles,
            t * t * o * self.tiles if len(self.blocks) > 1 else 0,  # a block's partial sums
        )

    def _for_shape(self, x_shape: tuple[int, int, int, int]) -> WinogradConv:
        return WinogradConv(self.u, self.bias, self.m, x_shape, self.pads, self.dtype, self.relu)

    def _make_views(self, flat: np.ndarray) -> _Work:
        return _Work(self, flat)

    def _run(self, x: np.ndarray, y: np.ndarray) -> None:
        w: _Work = self._work()
        for border in w.borders:
            border.fill(0)
        np.copyto(w.interior, x)
        np.copyto(w.d6, w.tile_view)
        # B^T d B: transform every tile's rows (a -> xi), then its columns (b -> nu).
        np.matmul(self.bt, w.d, out=w.r)
        np.matmul(self.bt, w.r3, out=w.v)
        # One GEMM per transform point: (O x C) @ (C x tiles), in blocks of channels.
        sum_blocks(self.u_blocks, w.v_blocks, w.mm, w.part)
        if self.bias is not None:
            np.add(w.mm_bias, self.bias, out=w.mm_bias)
        # A^T M A, rows then columns: (m, m, O, tiles) output blocks.
        np.matmul(self.at, w.mm2, out=w.r2)
        np.matmul(self.at, w.r23, out=w.blocks)
        # grid[n, o, i*m + a, j*m + b] = blocks[a, b, o, n, i, j], clipped (see above)
        dst = blocks_view(y if self.exact else w.grid, self.m)
        np.clip(w.blocks6, self.low, self.high, out=dst)
        if not self.exact:
            np.copyto(y, w.grid[:, :, : self.out_hw[0], : self.out_hw[1]])


def sum_blocks(u_blocks: list[np.ndarray], v_blocks: list[np.ndarray], out: np.ndarray, part: np.ndarray) -> None:
    """out = sum over the blocks of u_block @ v_block (batched GEMMs), added block by block."""
    np.matmul(u_blocks[0], v_blocks[0], out=out)
    for u, v in zip(u_blocks[1:], v_blocks[1:]):
        np.matmul(u, v, out=part)
        np.add(out, part, out=out)


def blocks_view(grid: np.ndarray, m: int) -> np.ndarray:
    """grid (N, O, TH*m, TW*m) seen as (m, m, O, N, TH, TW) blocks: [a, b, o, n, i, j] is
    grid[n, o, i*m + a, j*m + b]."""
    n, o, gh, gw = grid.shape
    if grid.flags.c_contiguous:  # a reshape: cheaper to make than as_strided
        return grid.reshape(n, o, gh // m, m, gw // m, m).transpose(3, 5, 1, 0, 2, 4)
    s = grid.strides
    return as_strided(grid, (m, m, o, n, gh // m, gw // m), (s[2], s[3], s[1], s[0], m * s[2], m * s[3]))


class _Work:
    """A WinogradConv's arrays in one flat work buffer (see WinogradConv.sizes)."""

    def __init__(self, k: WinogradConv, flat: np.ndarray) -> None:
        m, t, c, o, tiles = k.m, k.t, k.c, k.o, k.tiles
        p_size, a_size, b_size, _ = k.sizes
        padded = flat[:p_size].reshape(k.padded_shape)
        a, b = flat[p_size : p_size + a_size], flat[p_size + a_size : p_size + a_size + b_size]
        rows, cols = k.at_input
        self.interior, self.borders = padded_parts(
            padded, rows.start, cols.start, rows.stop - rows.start, cols.stop - cols.start
        )
        s = padded.strides
        # tiles[a, b, c, n, i, j] = padded[n, c, i*m + a, j*m + b]
        self.tile_view = as_strided(
            padded, k.tiles_shape, (s[2], s[3], s[1], s[0], m * s[2], m * s[3]), writeable=False
        )
        size = t * t * c * tiles
        self.d = a[:size].reshape(t, t * c * tiles)
        self.d6 = self.d.reshape(k.tiles_shape)
        self.r = b[:size].reshape(t, t * c * tiles)
        self.r3 = self.r.reshape(t, t, c * tiles)
        self.v = a[:size].reshape(t, t, c * tiles)
        self.v3 = self.v.reshape(t * t, c, tiles)
        self.v_blocks = [self.v3[:, block] for block in k.blocks]
        self.mm = b[: t * t * o * tiles].reshape(t * t, o, tiles)
        # a block's partial sums (in one block, none: mm itself stands in, never written)
        self.part = flat[p_size + a_size + b_size :].reshape(-1, o, tiles) if len(k.blocks) > 1 else self.mm
        self.mm_bias = self.mm[k.bias_point]
        self.mm2 = self.mm.reshape(t, t * o * tiles)
        self.r2 = a[: m * t * o * tiles].reshape(m, t * o * tiles)
        self.r23 = self.r2.reshape(m, t, o * tiles)
        self.blocks = b[: m * m * o * tiles].reshape(m, m, o * tiles)
        self.blocks6 = self.blocks.reshape(m, m, o, *k.tiles_shape[3:])
        self.grid = a[: math.prod(k.grid)].reshape(k.grid)  # after r2 is read


# -- F(2,3) along the rows only -----------------------------------------------------------
# For layers whose 2-D U is too big to keep (ResNet-18's 512-channel 7x7 layers: F(2,3)'s U
# is 16.8 MB a layer), Winograd along the width alone: each kernel row is a 1-D 3-tap filter
# done as F(2,3) (4 multiplications per 2 outputs instead of 6), and the three kernel rows
# are summed by the GEMM itself (its K runs over (kernel row, channel)). U is (4, O, 3C):
# 12 O C elements, 1.33x the weight; multiplications 2/3 of a direct convolution's.


def transform_weights_rows(weight: np.ndarray) -> np.ndarray:
    """U[β, o, a*C + c] = Σ_b G[β, b] g[o, c, a, b] for a (O, C, 3, 3) weight: (4, O, 3C)."""
    _, g, _ = TRANSFORMS[2]
    o, c = weight.shape[:2]
    u = np.empty((4, o, 3 * c), weight.dtype)
    # In blocks of output channels: a whole transposed copy of the weight (9 MiB for 512
    # channels) would stay in malloc's heap after it is freed.
    step = max(1, TRANSFORM_BLOCK // (9 * c))
    for o0 in range(0, o, step):
        block = weight[o0 : o0 + step]
        taps = np.ascontiguousarray(block.transpose(3, 0, 2, 1)).reshape(3, -1)  # [b, (o, a, c)]
        np.matmul(g.astype(weight.dtype), taps, out=u[:, o0 : o0 + step].reshape(4, -1))
    return u


class WinogradRowsConv(_WorkKernel):
    """One stride-1 3x3 convolution as F(2,3) along the rows (see above), at one input shape.

    Per call: the zero-padded input; its 4-wide column windows at every second column
    (one strided copy), transformed by B^T (four flat adds); each kernel row's view of
    them (rows a .. a + OH) copied under the next as the GEMM's K rows; four GEMMs
    (O x 3C) @ (3C x N*OH*TW), one per transform point; A^T (one small GEMM); the two
    output columns of every tile scattered into the output (a fused ReLU in the clip).
    The bias is added at the point x = 1 as in WinogradConv."""

    m = 2

    def __init__(
        self,
        u: np.ndarray,
        bias: np.ndarray | None,
        x_shape: tuple[int, int, int, int],
        pads: tuple[int, int, int, int],
        dtype: np.dtype,
        relu: bool = False,
        costs: KernelCosts = DEFAULT_COSTS,
    ) -> None:
        """A batch runs in chunks of images whose work arrays fit costs.rows_work_elements."""
        batch, c, h, w = x_shape
        self.u, self.o, self.c = u, u.shape[1], c
        self.bias = None if bias is None else bias.astype(dtype).reshape(-1, 1)
        self.relu = relu
        self.low, self.high = dtype.type(0 if relu else -np.inf), dtype.type(np.inf)
        self.pads, self.dtype = pads, dtype
        self.at = TRANSFORMS[2][2].astype(dtype)
        self.out_hw = oh, ow = h + pads[0] + pads[1] - 2, w + pads[2] + pads[3] - 2
        self.tw = tw = -(-ow // 2)  # tiles across (the last may overhang)
        per_image = [
            c * (oh + 2) * (2 * tw + 2),
            4 * c * (oh + 2) * tw,
            4 * c * (oh + 2) * tw,
            12 * c * oh * tw,
            4 * self.o * oh * tw,
            2 * self.o * oh * tw,
        ]
        self.blocks = channel_blocks(3 * c, 3, ROWS_CHANNEL_BLOCK)  # over the GEMM's K = 3C rows
        self.u_blocks = [u[:, :, b] for b in self.blocks]
        if len(self.blocks) > 1:
            per_image.append(4 * self.o * oh * tw)  # a block's partial sums
        self.chunk = n = max(1, min(batch, costs.rows_work_elements // sum(per_image)))
        self.x_shape = (n, c, h, w)
        self.padded_shape = (n, c, oh + 2, 2 * tw + 2)
        self.sizes = tuple(n * size for size in per_image)

    def _for_shape(self, x_shape: tuple[int, int, int, int]) -> WinogradRowsConv:
        return WinogradRowsConv(self.u, self.bias, x_shape, self.pads, self.dtype, self.relu)

    def _make_views(self, flat: np.ndarray) -> _RowsWork:
        return _RowsWork(self, flat)

    def _run(self, x: np.ndarray, y: np.ndarray) -> None:
        v: _RowsWork = self._work()
        for border in v.borders:
            border.fill(0)
        np.copyto(v.interior, x)
        np.copyto(v.d, v.taps)  # d[b, c, n, r, j] = padded[n, c, r, 2j + b]
        d0, d1, d2, d3 = v.d
        s0, s1, s2, s3 = v.s  # B^T d at the points 0, 1, -1, infinity: flat adds
        np.subtract(d0, d2, out=s0)
        np.add(d1, d2, out=s1)
        np.subtract(d2, d1, out=s2)
        np.subtract(d1, d3, out=s3)
        for a in range(3):  # kernel row a reads the rows a .. a + OH
            np.copyto(v.k_rows[:, a], v.s[:, :, :, a : a + self.out_hw[0]])
        sum_blocks(self.u_blocks, v.k_blocks, v.mm, v.part)
        if self.bias is not None:
            np.add(v.mm[1], self.bias, out=v.mm[1])
        np.matmul(self.at, v.mm.reshape(4, -1), out=v.z.reshape(2, -1))
        yt = y.transpose(1, 0, 2, 3)
        for e in range(2):  # y[n, o, h, 2j + e] = z[e, o, n, h, j], clipped (WinogradConv's scatter)
            dst = yt[..., e::2]
            np.clip(v.z[e, ..., : dst.shape[-1]], self.low, self.high, out=dst)


class _RowsWork:
    """A WinogradRowsConv's arrays in one flat work buffer (see WinogradRowsConv.sizes)."""

    def __init__(self, k: WinogradRowsConv, flat: np.ndarray) -> None:
        n, c, hp, _ = k.padded_shape
        (oh, _), tw, o = k.out_hw, k.tw, k.o
        parts, start = [], 0
        for size in k.sizes:
            parts.append(flat[start : start + size])
            start += size
        padded = parts[0].reshape(k.padded_shape)
        self.interior, self.borders = padded_parts(padded, k.pads[0], k.pads[2], *k.x_shape[2:])
        s = padded.strides
        self.taps = as_strided(padded, (4, c, n, hp, tw), (s[3], s[1], s[0], s[2], 2 * s[3]), writeable=False)
        self.d = parts[1].reshape(4, c, n, hp, tw)
        self.s = parts[2].reshape(4, c, n, hp, tw)
        self.k = parts[3].reshape(4, 3 * c, n * oh * tw)
        self.k_rows = parts[3].reshape(4, 3, c, n, oh, tw)
        self.k_blocks = [self.k[:, block] for block in k.blocks]
        self.mm = parts[4].reshape(4, o, n * oh * tw)
        self.z = parts[5].reshape(2, o, n, oh, tw)
        self.part = parts[6].reshape(4, o, n * oh * tw) if len(parts) > 6 else self.mm  # as in _Work
