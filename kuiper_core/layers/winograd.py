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

Rounding: F(2,3)'s transforms are exact in binary; F(4,3)'s constants (1/6, 1/24) cost
about one more decimal digit than a direct float32 convolution (relative error ~1e-6 vs
~1e-7), well inside the project's 1e-4.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import parallel
from .windows import pad_spatial, scratch

# A batch runs in chunks of whole images: as few images as give the GEMMs this many tiles
# (columns), and never work buffers over WORK_BUDGET elements (4 MB of float32; six such
# buffers live per thread). Measured at batch 4, one thread: ResNet-18's 64-channel 56x56
# layer (196 tiles an image) 8.2 -> 7.2 ms one image at a time instead of two; its 256-channel
# 14x14 layer (49 tiles) 7.0 -> 6.2 ms four at a time instead of two.
MIN_TILES = 196
WORK_BUDGET = 1 << 20
# m -> (B^T, G, A^T) for interpolation points 0, ±1 (F(2,3)) and 0, ±1, ±2 (F(4,3)).
TRANSFORMS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    2: (
        np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
        np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),
    ),
    4: (
        np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64),
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


class WinogradConv:
    """One stride-1 3x3 convolution at one input shape: buffers and views made once.

    Batches run in chunks of `self.chunk` images (MIN_TILES, WORK_BUDGET)."""

    def __init__(
        self,
        u: np.ndarray,
        bias: np.ndarray | None,
        m: int,
        x_shape: tuple[int, int, int, int],
        pads: tuple[int, int, int, int],
        dtype: np.dtype,
        relu: bool = False,
    ) -> None:
        """relu: write max(conv + bias, 0), a following ReLU fused into the scatter."""
        bt, _, at = TRANSFORMS[m]
        t = m + 2
        batch, c, h, w = x_shape
        o = u.shape[1]
        oh, ow = h + pads[0] + pads[1] - 2, w + pads[2] + pads[3] - 2
        th, tw = -(-oh // m), -(-ow // m)  # tiles down and across (the last ones may overhang)
        fill = -(-MIN_TILES // (th * tw))  # images for MIN_TILES tiles
        self.chunk = n = max(1, min(batch, fill, WORK_BUDGET // (t * t * max(c, o) * th * tw)))
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
        # (top, left), zeros around, in a per-thread work buffer (a kernel owning one would
        # hold ~2 MB per layer at batch 4).
        self.tile_pads = (pads[0], th * m + 2 - h - pads[0], pads[2], tw * m + 2 - w - pads[2])
        self.tiles_shape = (t, t, c, n, th, tw)
        self.out_hw = (oh, ow)
        self.grid = (n, o, th * m, tw * m)
        self.exact = (oh, ow) == (th * m, tw * m)  # no overhanging tiles to crop

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        """y (N, O, OH, OW) = conv3x3(x (N, C, H, W)) + bias."""
        n = self.chunk
        if x.shape[0] == n:
            self._run(x, y)
            return
        for i in range(0, x.shape[0], n):
            part = slice(i, i + n)
            if x[part].shape[0] == n:
                self._run(x[part], y[part])
            else:  # the last, smaller chunk
                rest = WinogradConv(self.u, self.bias, self.m, x[part].shape, self.pads, self.dtype, self.relu)
                rest._run(x[part], y[part])

    def _run(self, x: np.ndarray, y: np.ndarray) -> None:
        m, t, c, o, tiles = self.m, self.t, self.c, self.o, self.tiles
        padded = pad_spatial(x, self.tile_pads, slot="winograd.pad")
        s = padded.strides
        # tiles[a, b, c, n, i, j] = padded[n, c, i*m + a, j*m + b]
        tile_view = as_strided(padded, self.tiles_shape, (s[2], s[3], s[1], s[0], m * s[2], m * s[3]), writeable=False)
        d = scratch("winograd.d", (t, t * c * tiles), self.dtype)
        parallel.copyto(d.reshape(self.tiles_shape), tile_view)
        # B^T d B: transform every tile's rows (a -> xi), then its columns (b -> nu).
        r = scratch("winograd.r", (t, t * c * tiles), self.dtype)
        np.matmul(self.bt, d, out=r)
        v = scratch("winograd.v", (t, t, c * tiles), self.dtype)
        np.matmul(self.bt, r.reshape(t, t, c * tiles), out=v)
        # One GEMM per transform point: (O x C) @ (C x tiles).
        mm = scratch("winograd.m", (t * t, o, tiles), self.dtype)
        np.matmul(self.u, v.reshape(t * t, c, tiles), out=mm)
        if self.bias is not None:
            np.add(mm[self.bias_point], self.bias, out=mm[self.bias_point])
        # A^T M A, rows then columns: (m, m, O, tiles) output blocks.
        r2 = scratch("winograd.r2", (m, t * o * tiles), self.dtype)
        np.matmul(self.at, mm.reshape(t, t * o * tiles), out=r2)
        blocks = scratch("winograd.y", (m, m, o * tiles), self.dtype)
        np.matmul(self.at, r2.reshape(m, t, o * tiles), out=blocks)
        blocks6 = blocks.reshape(m, m, o, *self.tiles_shape[3:])
        grid = y if self.exact else scratch("winograd.grid", self.grid, self.dtype)
        s = grid.strides
        # grid[n, o, i*m + a, j*m + b] = blocks[a, b, o, n, i, j], clipped (see above)
        dst = as_strided(grid, blocks6.shape, (s[2], s[3], s[1], s[0], m * s[2], m * s[3]))
        parallel.ufunc(np.clip, blocks6, self.low, self.high, out=dst)
        if not self.exact:
            parallel.copyto(y, grid[:, :, : self.out_hw[0], : self.out_hw[1]])
