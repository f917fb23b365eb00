"""Spatial rearrangements of 2-D maps: F.unfold (im2col) and F.fold (col2im), and the
spatial transformer pair F.affine_grid + F.grid_sample.

pnnx writes each with its torch arguments (`kernel_size=(2,2) stride=(2,2)`, `size=(1,3,6,6)`,
`mode=bilinear padding_mode=zeros align_corners=False`), as operands at optlevel 0/1 (the
runtime resolves those). Only 4-D inputs (N, C, H, W) are supported, as pnnx converts them.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..graph import Operator
from ..limits import PYTHON_STEP_WORK
from .registry import Layer, register
from .torch_args import input_index
from .windows import out_size


class _Windows(Layer):
    """kernel_size, dilation, padding, stride (ints or pairs) of unfold / fold."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.k = self.ints_param("kernel_size", 2, low=1)
        self.d = self.ints_param("dilation", 2, 1, low=1)
        self.p = self.ints_param("padding", 2, 0, low=0)
        self.s = self.ints_param("stride", 2, 1, low=1)

    def grid(self, h: int, w: int) -> tuple[int, int]:
        """Windows along H and W of an (h, w) map (before padding)."""
        oh = out_size(h, self.k[0], self.s[0], self.p[0], self.p[0], self.d[0])
        ow = out_size(w, self.k[1], self.s[1], self.p[1], self.p[1], self.d[1])
        if oh < 1 or ow < 1:
            raise self.error(f"no {self.k} window fits a {h}x{w} map with padding {self.p}")
        return oh, ow

    def work(self, columns: tuple[int, ...]) -> int:
        """Every column element copied, and a Python step per kernel tap (taps below: an
        (8192, 8192) kernel was 67 million steps)."""
        return math.prod(columns) + self.k[0] * self.k[1] * PYTHON_STEP_WORK

    def taps(self, oh: int, ow: int):
        """(i, j, rows, cols): every kernel tap and the padded-map slices it reads."""
        for i in range(self.k[0]):
            for j in range(self.k[1]):
                r0, c0 = i * self.d[0], j * self.d[1]
                yield (
                    i,
                    j,
                    slice(r0, r0 + self.s[0] * (oh - 1) + 1, self.s[0]),
                    slice(c0, c0 + self.s[1] * (ow - 1) + 1, self.s[1]),
                )


@register("F.unfold", "nn.Unfold")
class Unfold(_Windows):
    """(N, C, H, W) -> (N, C*kh*kw, L): every window as a column, channel-major."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim != 4:
            raise self.error(f"expected a 4-D (N, C, H, W) input, got shape {x.shape}")
        n, c, h, w = x.shape
        oh, ow = self.grid(h, w)
        shape = (n, c, self.k[0], self.k[1], oh, ow)
        # before the padded copy: a (64, 64) unfold of an 8192x8192 view asked for 1 TiB
        self.check_size(shape, "the columns")
        self.check_work(self.work(shape), f"a {self.k} unfold of {x.shape}")
        xp = np.pad(x, ((0, 0), (0, 0), (self.p[0], self.p[0]), (self.p[1], self.p[1])))
        cols = np.empty(shape, x.dtype)
        for i, j, rows, cs in self.taps(oh, ow):
            cols[:, :, i, j] = xp[:, :, rows, cs]
        return [cols.reshape(n, c * self.k[0] * self.k[1], oh * ow)]


@register("F.fold", "nn.Fold")
class Fold(_Windows):
    """(N, C*kh*kw, L) -> (N, C, H, W): the columns summed back into the map (overlaps add)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.size = self.ints_param("output_size", 2, low=1)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        kk = self.k[0] * self.k[1]
        h, w = self.size
        oh, ow = self.grid(h, w)
        if x.ndim != 3 or x.shape[1] % kk or x.shape[2] != oh * ow:
            raise self.error(f"expected (N, C*{kk}, {oh * ow}) columns for a {h}x{w} output, got shape {x.shape}")
        n, c = x.shape[0], x.shape[1] // kk
        cols = x.reshape(n, c, self.k[0], self.k[1], oh, ow)
        self.check_size((n, c, h + 2 * self.p[0], w + 2 * self.p[1]), "the padded output")
        self.check_work(self.work(cols.shape), f"a {self.k} fold into {(h, w)}")
        y = np.zeros((n, c, h + 2 * self.p[0], w + 2 * self.p[1]), x.dtype)
        for i, j, rows, cs in self.taps(oh, ow):
            y[:, :, rows, cs] += cols[:, :, i, j]
        return [y[:, :, self.p[0] : self.p[0] + h, self.p[1] : self.p[1] + w]]


def _base(n: int, align_corners: bool) -> np.ndarray:
    """Normalised pixel-centre coordinates in [-1, 1] along an axis of n pixels."""
    if n == 1:
        return np.zeros(1)
    ramp = np.linspace(-1.0, 1.0, n)
    return ramp if align_corners else ramp * (n - 1) / n


@register("F.affine_grid")
class AffineGrid(Layer):
    """theta (N, 2, 3) -> a sampling grid (N, H, W, 2) of (x, y) for `size` (N, C, H, W).
    The batch follows theta (pnnx bakes the traced N into `size`)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        size = self.ints_param("size", low=1)
        if len(size) != 4:
            raise self.error(f"only 2-D grids: size must be (N, C, H, W), got {size}")
        self.h, self.w = size[2], size[3]
        self.align = bool(self.param("align_corners", False))
        xs, ys = _base(self.w, self.align), _base(self.h, self.align)
        # (H*W, 3) homogeneous coordinates (x, y, 1), row-major over (H, W), in float64.
        self.points = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], 1.0), -1).reshape(-1, 3)
        self.theta = input_index(op, "theta") or 0

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        theta = inputs[self.theta]
        if theta.ndim != 3 or theta.shape[1:] != (2, 3):
            raise self.error(f"theta must be (N, 2, 3), got shape {theta.shape}")
        grid = np.einsum("pk,njk->npj", self.points, theta.astype(np.float64))
        return [grid.reshape(theta.shape[0], self.h, self.w, 2).astype(theta.dtype)]


@register("F.grid_sample")
class GridSample(Layer):
    """Samples (N, C, H, W) at grid (N, Ho, Wo, 2) points (x, y in [-1, 1]): bilinear or
    nearest, padding zeros or border, align_corners as given."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        # ONNX GridSample from opset 20 says "linear" (and "cubic"), which pnnx copies into
        # F.grid_sample's mode as it is (torch.onnx.export's default exporter writes opset 20+)
        mode = self.param("mode", "bilinear")
        self.mode = "bilinear" if mode == "linear" else mode
        self.padding = self.param("padding_mode", "zeros")
        if self.mode not in ("bilinear", "nearest"):
            raise self.error(f"mode {self.mode!r} is not supported (bilinear, nearest)")
        if self.padding not in ("zeros", "border"):
            raise self.error(f"padding_mode {self.padding!r} is not supported (zeros, border)")
        self.align = bool(self.param("align_corners", False))
        self.source = input_index(op, "input") or 0
        grid = input_index(op, "grid")
        self.grid = 1 - self.source if grid is None else grid

    def _pixel(self, coord: np.ndarray, n: int) -> np.ndarray:
        """Normalised coordinates -> pixel coordinates (torch's unnormalize, then border clip)."""
        p = (coord + 1) / 2 * (n - 1) if self.align else ((coord + 1) * n - 1) / 2
        return np.clip(p, 0, n - 1) if self.padding == "border" else p

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, grid = inputs[self.source], inputs[self.grid]
        if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
            raise self.error(f"expected input (N, C, H, W) and grid (N, Ho, Wo, 2), got {x.shape} and {grid.shape}")
        n, c, h, w = x.shape
        px = self._pixel(grid[..., 0].astype(np.float64), w)  # (N, Ho, Wo)
        py = self._pixel(grid[..., 1].astype(np.float64), h)
        batch = np.arange(n)[:, None, None]

        def tap(iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
            """x at integer pixels (N, Ho, Wo) -> (N, Ho, Wo, C), zero outside the map."""
            inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
            v = x[batch, :, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]
            return v * inside[..., None]

        if self.mode == "nearest":
            y = tap(np.rint(py).astype(np.intp), np.rint(px).astype(np.intp))
        else:
            x0, y0 = np.floor(px).astype(np.intp), np.floor(py).astype(np.intp)
            fx, fy = (px - x0)[..., None], (py - y0)[..., None]
            y = (
                tap(y0, x0) * ((1 - fx) * (1 - fy))
                + tap(y0, x0 + 1) * (fx * (1 - fy))
                + tap(y0 + 1, x0) * ((1 - fx) * fy)
                + tap(y0 + 1, x0 + 1) * (fx * fy)
            )
        return [np.ascontiguousarray(np.moveaxis(y, -1, 1)).astype(x.dtype)]


@register("nn.LPPool2d", "F.lp_pool2d")
class LPPool2d(Layer):
    """(sum over each window of x^p)^(1/p), as torch computes it: an average of x^p times
    the window size (so a ceil_mode edge window's sum is scaled up to the full size), with
    sign(s)·relu(|s|) before the root."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        p = self.param("norm_type")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or p == 0:
            raise self.error(f"norm_type must be a non-zero number, got {p!r}")
        self.p = float(p)
        self.k = self.ints_param("kernel_size", 2, low=1)
        stride = self.param("stride", None)
        self.s = self.k if stride is None or stride == [] else self.ints_param("stride", 2, low=1)
        self.ceil = bool(self.param("ceil_mode", False))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim not in (3, 4):
            raise self.error(f"expected a (N, C, H, W) or (C, H, W) input, got shape {x.shape}")
        h, w = x.shape[-2:]
        oh = out_size(h, self.k[0], self.s[0], 0, 0, 1, self.ceil)
        ow = out_size(w, self.k[1], self.s[1], 0, 0, 1, self.ceil)
        if oh < 1 or ow < 1:
            raise self.error(f"the {self.k} window does not fit a {h}x{w} input")
        self.check_work(x.size // (h * w) * oh * ow * self.k[0] * self.k[1], f"{self.k} windows over {(h, w)}")
        # ceil_mode's last windows run past the edge: pad with zeros, which add nothing to the sum
        ph, pw = (oh - 1) * self.s[0] + self.k[0] - h, (ow - 1) * self.s[1] + self.k[1] - w
        xp = np.pad(x.astype(np.float64) ** self.p, [(0, 0)] * (x.ndim - 2) + [(0, max(0, ph)), (0, max(0, pw))])
        win = sliding_window_view(xp, self.k, axis=(-2, -1))[..., :: self.s[0], :: self.s[1], :, :][..., :oh, :ow, :, :]
        sums = win.sum(axis=(-2, -1))
        if ph > 0 or pw > 0:  # torch averages over the taps inside, then scales by the full window
            inside = np.pad(np.ones((h, w)), [(0, max(0, ph)), (0, max(0, pw))])
            count = sliding_window_view(inside, self.k)[:: self.s[0], :: self.s[1]][:oh, :ow].sum(axis=(-2, -1))
            sums = sums * (self.k[0] * self.k[1] / count)
        return [(np.sign(sums) * np.maximum(np.abs(sums), 0) ** (1.0 / self.p)).astype(x.dtype)]
