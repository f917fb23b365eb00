"""Stride-2 convolutions with fewer multiplications: Winograd along the rows on the input's
column phases (3x3 below; any k x k likewise, with F(m, ceil(k/2)) on the even columns and
F(m, floor(k/2)) on the odd ones).

Along a row, a stride-2 3-tap filter w0, w1, w2 reads the columns 2j, 2j+1, 2j+2 for output
j: the even columns E (E[k] = x[2k]) meet (w0, w2) as a stride-1 2-tap filter, the odd ones
O (O[k] = x[2k+1]) meet w1 alone:

    y[j] = w0 E[j] + w2 E[j+1] + w1 O[j]

The 2-tap part is done as Winograd F(m, 2) (m + 1 multiplications per m outputs), the
1-tap part directly (m): 2m + 1 instead of 3m (1.33x fewer for m = 4; the 7x7 stem's
m = 4: 13 instead of 28, 2.15x fewer).
The three kernel rows are summed by the GEMM, as in winograd.WinogradRowsConv (its K runs
over (kernel row, channel): 3C). So one output tile of m columns takes the 2m + 1 input
columns 2tm .. 2tm + 2m, and per tile:

    z = [A^T | I] [U_even ⊙ B^T d_even ; U_odd d_odd]     (m + 1 + m points)

Unlike a 2-D Winograd over all four phases ((2m+1)^2 points, 9x9 transforms for m = 4:
measured slower than im2col by bench/bench_convs.py --candidates), the transforms here are 1-D and only the
even columns are transformed.

The transform matrices come from `toom_cook` (interpolation points 0, ±1, ±2, ±1/2, ...
and infinity), exact (rational arithmetic), made once per (m, r).
"""

from __future__ import annotations

import math
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .kernel_costs import DEFAULT_COSTS, KernelCosts
from .winograd import _WorkKernel, padded_parts

if TYPE_CHECKING:
    from fractions import Fraction

# Interpolation points in the order they are taken (F(m, r) uses the first m + r - 2, plus
# infinity), as (numerator, denominator): fractions (2 ms to import) only when a transform
# is first made.
POINTS = ((0, 1), (1, 1), (-1, 1), (2, 1), (-2, 1), (1, 2), (-1, 2), (3, 1), (-3, 1))


@cache
def toom_cook(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of Winograd F(m, r): y[i] = Σ_k g[k] d[i + k] (i < m) equals
    A^T [(G g) ⊙ (B^T d)] for d of m + r - 1 samples; points POINTS[:m + r - 2] and infinity.

    A^T evaluates the output polynomial at the points (its column for infinity picks the top
    coefficient), G the filter's, and B^T is the solution of the resulting exact linear
    system, found in rational arithmetic (no rounding; asserted)."""
    from fractions import Fraction

    n = m + r - 1
    pts = [Fraction(*p) for p in POINTS[: n - 1]]
    at = [[p**i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = []
    for j, p in enumerate(pts):
        f = math.prod((p - q for k, q in enumerate(pts) if k != j), start=Fraction(1))
        g.append([p**k / f for k in range(r)])
    g.append([Fraction(int(k == r - 1)) for k in range(r)])
    # Σ_j A^T[i, j] G[j, k] B^T[j, s] = [s == i + k] for all i, k, s: for each s a square-or-
    # taller system in B^T[:, s], solved exactly on n independent equations.
    phi = [[at[i][j] * g[j][k] for j in range(n)] for i in range(m) for k in range(r)]
    rows = _independent_rows(phi, n)
    bt = [[Fraction(0)] * n for _ in range(n)]
    for s in range(n):
        rhs = [Fraction(int(s == i + k)) for i in range(m) for k in range(r)]
        sol = _solve([phi[q] for q in rows], [rhs[q] for q in rows])
        for j in range(n):
            bt[j][s] = sol[j]
        for q, row in enumerate(phi):  # every equation holds, not only the ones solved
            assert sum(a * b for a, b in zip(row, sol)) == rhs[q]
    out = (np.array(bt, np.float64), np.array(g, np.float64), np.array(at, np.float64))
    for a in out:  # cached: shared by every caller
        a.setflags(write=False)
    return out


def _independent_rows(a: list[list[Fraction]], n: int) -> list[int]:
    chosen: list[int] = []
    basis: list[list[Fraction]] = []
    for q, row in enumerate(a):
        v = list(row)
        for b in basis:  # reduce against the basis (each b has a leading 1 at its pivot)
            piv = next(i for i, x in enumerate(b) if x != 0)
            if v[piv] != 0:
                v = [x - v[piv] * y for x, y in zip(v, b)]
        lead = next((i for i, x in enumerate(v) if x != 0), None)
        if lead is not None:
            basis.append([x / v[lead] for x in v])
            chosen.append(q)
            if len(chosen) == n:
                return chosen
    raise ValueError("singular Toom-Cook system")


def _solve(a: list[list[Fraction]], b: list[Fraction]) -> list[Fraction]:
    """Gauss-Jordan elimination on an n x n rational system."""
    n = len(a)
    aug = [list(row) + [rhs] for row, rhs in zip(a, b)]
    for col in range(n):
        piv = next(i for i in range(col, n) if aug[i][col] != 0)
        aug[col], aug[piv] = aug[piv], aug[col]
        aug[col] = [x / aug[col][col] for x in aug[col]]
        for i in range(n):
            if i != col and aug[i][col] != 0:
                aug[i] = [x - aug[i][col] * y for x, y in zip(aug[i], aug[col])]
    return [row[n] for row in aug]


def phase_points(m: int, k: int) -> tuple[int, int]:
    """Transform points of the even and the odd columns for m outputs of a k-tap stride-2
    filter: F(m, ceil(k/2)) on the even ones, F(m, floor(k/2)) on the odd ones (m points
    and no transform for a single odd tap)."""
    return m + (k + 1) // 2 - 1, m + k // 2 - 1


def transform_weights_stride2(weight: np.ndarray, m: int) -> np.ndarray:
    """U (P, O, k·C) for a (O, C, k, k) weight: the even taps' points (U[β, o, a*C + c] =
    Σ_q G_even[β, q] w[o, c, a, 2q]), then the odd taps' (G_odd on w[..., 2q + 1]; for a
    single odd tap its plain weights once: all its m products use them)."""
    o, c, k = weight.shape[:3]
    taps = np.ascontiguousarray(weight.transpose(3, 0, 2, 1)).reshape(k, o * k * c)  # [b, (o, a, c)]
    even = np.matmul(toom_cook(m, (k + 1) // 2)[1].astype(weight.dtype), taps[0::2])
    odd = taps[1::2] if k // 2 == 1 else np.matmul(toom_cook(m, k // 2)[1].astype(weight.dtype), taps[1::2])
    return np.concatenate([even, odd]).reshape(-1, o, k * c)


class Stride2RowsConv(_WorkKernel):
    """One k x k stride-2 convolution as Winograd along the rows on the even and the odd
    columns (module docstring), at one input shape.

    Per call (a batch in chunks of images): the zero-padded input; the GEMMs' operands
    K[β, (a, c), (n, i, t)] = (B^T d)[β] of tile t's columns in input row 2i + a; one GEMM
    (O x kC) @ (kC x N·rows·TW) per transform point β; [A_even^T | A_odd^T] over all the
    points' results (one small GEMM); the m output columns of every tile scattered into
    the output (a fused ReLU in the clip, as WinogradConv). Big images go in bands of
    output rows (costs.stride2_band_elements). The bias is added at the even columns' point x = 1, whose
    A^T column is all ones. K is made one of two ways:

    - 3x3 (one odd tap, no odd transform): the k kernel rows' tile columns gathered in one
      strided copy, X[s, a, c, cols] = padded[n, c, 2i + a, 2tm + s], then B^T over the
      even s; the odd s are the odd GEMMs' operands as they are.
    - k > 3 ("rows first"): B^T of every padded row's tiles once, T[β, c, n, r, t], then K
      copied from T's rows 2i + a: the k-fold copy of the kernel rows comes after the
      transform (the 7x7 stem: 0.54 -> 0.30 ms of its 2.4)."""

    def __init__(
        self,
        u: np.ndarray,
        bias: np.ndarray | None,
        m: int,
        k: int,
        x_shape: tuple[int, int, int, int],
        pads: tuple[int, int, int, int],
        dtype: np.dtype,
        relu: bool = False,
        costs: KernelCosts = DEFAULT_COSTS,
    ) -> None:
        """u: transform_weights_stride2(weight, m)."""
        batch, c, h, w = x_shape
        self.m, self.k, self.u, self.o, self.c = m, k, u, u.shape[1], c
        self.ne, self.no = ne, no = phase_points(m, k)
        bt_even, _, at_even = toom_cook(m, (k + 1) // 2)
        self.bt_even = bt_even.astype(dtype)
        self.odd_shared = k // 2 == 1  # one odd tap: no transform, one U for its m points
        if self.odd_shared:
            self.bt_odd, at_odd = None, np.eye(m)
        else:
            bt_odd, _, at_odd = toom_cook(m, k // 2)
            self.bt_odd = bt_odd.astype(dtype)
        self.rows_first = not self.odd_shared
        self.u_even, self.u_odd = u[:ne], (u[ne] if self.odd_shared else u[ne:])
        self.at_full = np.concatenate([at_even, at_odd], axis=1).astype(dtype)  # [A_even^T | A_odd^T]
        self.bias = None if bias is None else bias.astype(dtype).reshape(-1, 1)
        self.bias_point = 1  # POINTS[1] = 1
        self.relu = relu
        self.low, self.high = dtype.type(0 if relu else -np.inf), dtype.type(np.inf)
        self.pads, self.dtype = pads, dtype
        self.out_hw = oh, ow = (h + pads[0] + pads[1] - k) // 2 + 1, (w + pads[2] + pads[3] - k) // 2 + 1
        self.tw = tw = -(-ow // m)
        self.exact = tw * m == ow
        self.span = span = max(2 * ne - 1, 2 * no)  # input columns a tile reads
        hp, wp = 2 * oh + k - 2, 2 * (tw - 1) * m + span  # rows and columns the tiles read
        kc = k * c
        # Work elements per output row and image: the GEMMs' operands (3x3: the gathered
        # columns and the even ones' transform), their results and the output blocks; rows
        # first, per input row and image: the tiles and their transform.
        operands = (ne + no) * kc if self.rows_first else (span + ne) * kc
        per_row = tw * (operands + (ne + no + m) * self.o)
        per_input_row = tw * (span + ne + no) * c if self.rows_first else 0
        # Whole images up to costs.rows_work_elements, in chunks of equal size (a last chunk of
        # one image narrows the GEMMs and reads U again); an image bigger than
        # costs.stride2_band_elements in bands of output rows.
        most = max(1, min(batch, costs.rows_work_elements // (per_row * oh + per_input_row * hp)))
        self.chunk = n = -(-batch // -(-batch // most))
        self.band = oh if n > 1 else min(oh, max(1, costs.stride2_band_elements // per_row))
        self.x_shape = (n, c, h, w)
        self.padded_shape = (n, c, hp, wp)
        self.sizes = (n * c * hp * wp, n * per_input_row * hp, n * per_row * self.band)

    def _for_shape(self, x_shape: tuple[int, int, int, int]) -> Stride2RowsConv:
        return Stride2RowsConv(self.u, self.bias, self.m, self.k, x_shape, self.pads, self.dtype, self.relu)

    def _make_views(self, flat: np.ndarray) -> _Stride2Work:
        return _Stride2Work(self, flat)

    def _run(self, x: np.ndarray, y: np.ndarray) -> None:
        w: _Stride2Work = self._work()
        for border in w.borders:
            border.fill(0)
        np.copyto(w.interior, w.crop(x))
        if self.rows_first:  # B^T of every input row's tiles, even and odd columns
            assert self.bt_odd is not None  # rows_first: the odd taps have a transform of their own
            np.copyto(w.d, w.taps)
            np.matmul(self.bt_even, w.d_even, out=w.t_even)
            np.matmul(self.bt_odd, w.d_odd, out=w.t_odd)
        for r0, v in w.bands:
            self._band(v, y[:, :, r0 : r0 + v.rows])

    def _band(self, v: _BandViews, y: np.ndarray) -> None:
        m, ne = self.m, self.ne
        np.copyto(v.x, v.taps)
        if not self.rows_first:
            np.matmul(self.bt_even, v.x_even, out=v.k_even)  # B^T d of the even columns
        np.matmul(self.u_even, v.k_even3, out=v.mm[:ne])
        np.matmul(self.u_odd, v.k_odd3, out=v.mm[ne:])
        if self.bias is not None:
            np.add(v.mm[self.bias_point], self.bias, out=v.mm[self.bias_point])
        np.matmul(self.at_full, v.mm.reshape(len(v.mm), -1), out=v.z.reshape(m, -1))
        # y[n, o, i, t*m + e] = z[e, o, n, t, i] (or z[e, o, n, i, t]), clipped (a fused ReLU)
        if self.exact:
            np.clip(v.z, self.low, self.high, out=v.blocks(y))
            return
        for e in range(m):
            dst = v.column_blocks(y, e)
            np.clip(
                v.z[e, :, :, : dst.shape[2]] if v.tiles_outer else v.z[e, ..., : dst.shape[3]],
                self.low,
                self.high,
                out=dst,
            )


class _Stride2Work:
    """A Stride2RowsConv's padded input, its rows' transforms (rows first) and its bands'
    arrays in one flat work buffer."""

    def __init__(self, kn: Stride2RowsConv, flat: np.ndarray) -> None:
        n, c, hp, wp = kn.padded_shape
        padded = flat[: kn.sizes[0]].reshape(kn.padded_shape)
        top, left = kn.pads[0], kn.pads[2]
        # The input rows/columns past the last tile's reach are never read: not copied.
        h, w = min(kn.x_shape[2], hp - top), min(kn.x_shape[3], wp - left)
        self.interior, self.borders = padded_parts(padded, top, left, h, w)
        self.crop = lambda x: x[:, :, :h, :w]
        rows = flat[kn.sizes[0] : kn.sizes[0] + kn.sizes[1]]
        work = flat[kn.sizes[0] + kn.sizes[1] :]
        oh, tw, m = kn.out_hw[0], kn.tw, kn.m
        source = padded
        if kn.rows_first:
            s = padded.strides
            # taps[s, c, n, r, t] = padded[n, c, r, 2tm + s]
            self.taps = as_strided(
                padded, (kn.span, c, n, hp, tw), (s[3], s[1], s[0], s[2], 2 * m * s[3]), writeable=False
            )
            d_size = kn.span * c * n * hp * tw
            self.d = rows[:d_size].reshape(kn.span, c, n, hp, tw)
            d2 = rows[:d_size].reshape(kn.span, -1)
            self.d_even, self.d_odd = d2[0::2][: kn.ne], d2[1::2][: kn.no]
            transformed = rows[d_size:].reshape(kn.ne + kn.no, c, n, hp, tw)  # T[β, c, n, r, t]
            self.t_even = transformed[: kn.ne].reshape(kn.ne, -1)
            self.t_odd = transformed[kn.ne :].reshape(kn.no, -1)
            source = transformed
        self.bands = [(r0, _BandViews(kn, source, 2 * r0, work, min(kn.band, oh - r0))) for r0 in range(0, oh, kn.band)]


class _BandViews:
    """One band's arrays: `rows` output rows, from input row `first` of `source` (the padded
    input; rows first, its rows' transforms T). The gather's innermost axis is the longer of
    the tiles across and the rows (long runs copy faster: with runs of 7 tiles instead of 28
    rows, ResNet-18's 64->128 gather took 0.21 instead of 0.12 ms); rows first, the tiles
    (T's contiguous runs)."""

    def __init__(self, kn: Stride2RowsConv, source: np.ndarray, first: int, work: np.ndarray, rows: int) -> None:
        c, n = kn.c, kn.padded_shape[0]
        tw, o, m, k, ne, no = kn.tw, kn.o, kn.m, kn.k, kn.ne, kn.no
        self.rows, self.m = rows, m
        cols = n * rows * tw
        kc = k * c
        points = ne + no if kn.rows_first else kn.span
        parts, start = [], 0
        for size in (points * kc * cols, 0 if kn.rows_first else ne * kc * cols, (ne + no) * o * cols, m * o * cols):
            parts.append(work[start : start + size])
            start += size
        if kn.rows_first:
            self.tiles_outer = False
            s = source.strides  # T[β, c, n, r, t]
            # taps[β, a, c, n, i, t] = T[β, c, n, first + 2i + a, t]
            self.taps = as_strided(
                source[:, :, :, first:],
                (points, k, c, n, rows, tw),
                (s[0], s[3], s[1], s[2], 2 * s[3], s[4]),
                writeable=False,
            )
            self.x = parts[0].reshape(points, k, c, n, rows, tw)
            operands = parts[0].reshape(points, kc, cols)
            self.k_even3, self.k_odd3 = operands[:ne], operands[ne:]
        else:
            self.tiles_outer = rows >= tw  # (t, i) order of the columns, else (i, t)
            padded = source[:, :, first:]
            s = padded.strides
            inner = (
                ((tw, rows), (2 * m * s[3], 2 * s[2])) if self.tiles_outer else ((rows, tw), (2 * s[2], 2 * m * s[3]))
            )
            # taps[s, a, c, n, (t, i) or (i, t)] = padded[n, c, 2i + a, 2tm + s]
            self.taps = as_strided(
                padded, (points, k, c, n, *inner[0]), (s[3], s[2], s[1], s[0], *inner[1]), writeable=False
            )
            self.x = parts[0].reshape(points, k, c, n, *inner[0])
            x2 = parts[0].reshape(points, kc * cols)
            self.x_even = x2[0::2][:ne]  # (ne, kC·cols), rows 2 apart
            self.k_even = parts[1].reshape(ne, kc * cols)
            self.k_even3 = self.k_even.reshape(ne, kc, cols)
            self.k_odd3 = parts[0].reshape(points, kc, cols)[1::2][:no]  # the odd columns as they are
        self.mm = parts[2].reshape(ne + no, o, cols)
        self.z = parts[3].reshape(m, o, n, *((tw, rows) if self.tiles_outer else (rows, tw)))

    def blocks(self, y: np.ndarray) -> np.ndarray:
        """y (N, O, rows, TW*m) seen as z's (m, O, N, ...) layout."""
        s = y.strides
        tiles, rows = (self.m * s[3], s[2])
        return as_strided(
            y, self.z.shape, (s[3], s[1], s[0], tiles, rows) if self.tiles_outer else (s[3], s[1], s[0], rows, tiles)
        )

    def column_blocks(self, y: np.ndarray, e: int) -> np.ndarray:
        """The output columns e, e + m, ... in z[e]'s (O, N, ...) order."""
        part = y[..., e :: self.m].transpose(1, 0, 2, 3)  # (O, N, rows, tiles)
        return part.transpose(0, 1, 3, 2) if self.tiles_outer else part
