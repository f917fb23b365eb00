"""3-D (volumetric: video, medical) convolution and pooling over (N, C, D, H, W).

Plain and direct, not tuned like the 2-D kernels in conv.py/pool.py: a strided view of every
kernel tap (no copy), then one tensordot per group for the convolution and a max/mean over
the tap axes for pooling. Adaptive pooling walks the output cells with torch's bounds
(start = floor(i·n/o), end = ceil((i+1)·n/o)).

What pnnx writes (pnnx 20261020): nn.Conv3d with kernel_size/stride/padding/dilation
triples, groups, bias, padding_mode; F.max_pool3d / F.avg_pool3d with kernel_size, stride
(None: kernel_size), padding, dilation, ceil_mode, return_indices / count_include_pad,
divisor_override; F.adaptive_*_pool3d with output_size (0 or None: keep that size).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..graph import Operator
from .registry import Layer, register
from .windows import out_size


def _check_5d(layer: Layer, x: np.ndarray) -> None:
    if x.ndim != 5:
        raise layer.error(f"expected a 5-D (N, C, D, H, W) input, got shape {x.shape}")


def _grouped_weight(layer: Layer, layout: str, split: str) -> None:
    """What Conv3d and ConvTranspose3d read alike: the 5-D weight split into groups along
    dim 0 (`split` names that dim in messages), bias, kernel size and stride."""
    w = layer.weight("weight")
    assert w is not None
    if w.ndim != 5:
        raise layer.error(f"weight must be 5-D ({layout}), got shape {w.shape}")
    layer.groups = layer.int_param("groups", 1, low=1)
    if w.shape[0] % layer.groups:
        raise layer.error(f"{split} {w.shape[0]} is not divisible by groups={layer.groups}")
    layer.w = w.reshape(layer.groups, w.shape[0] // layer.groups, *w.shape[1:])
    layer.b = layer.bias_weight()
    layer.k = tuple(w.shape[2:])
    layer.s = layer.ints_param("stride", 3, 1, low=1)


def _taps(layer: Layer, xp: np.ndarray, k: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...]) -> np.ndarray:
    """(N, C, OD, OH, OW, kd, kh, kw) view of a padded input: every window, dilated and strided."""
    span = tuple(d[i] * (k[i] - 1) + 1 for i in range(3))
    if any(xp.shape[2 + i] < span[i] for i in range(3)):
        raise layer.error(f"the {k} kernel (dilation {d}) does not fit the padded input {xp.shape[2:]}")
    v = sliding_window_view(xp, span, axis=(2, 3, 4))
    return v[:, :, :: s[0], :: s[1], :: s[2], :: d[0], :: d[1], :: d[2]]


@register("nn.Conv3d")
class Conv3d(Layer):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        _grouped_weight(self, "out, in/groups, kd, kh, kw", "out_channels")  # w: (G, Og, Cg, k…)
        self.d = self.ints_param("dilation", 3, 1, low=1)
        padding = self.param("padding", 0)
        if isinstance(padding, str):
            raise self.error(f"padding={padding!r} is not supported for Conv3d (give the numbers)")
        self.p = self.ints_param("padding", 3, 0, low=0)
        if self.param("padding_mode", "zeros") != "zeros":
            raise self.error(f"padding_mode={self.param('padding_mode')!r} is not supported for Conv3d (zeros)")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        _check_5d(self, x)
        g, og, cg = self.w.shape[:3]
        if x.shape[1] != g * cg:
            raise self.error(f"input has {x.shape[1]} channels, the weight expects {g * cg}")
        xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in self.p))
        taps = _taps(self, xp, self.k, self.s, self.d)  # (N, C, OD, OH, OW, kd, kh, kw)
        n, _, od, oh, ow = taps.shape[:5]
        y = np.empty((n, g, og, od, oh, ow), np.result_type(x.dtype, self.w.dtype))
        for gi in range(g):
            part = taps[:, gi * cg : (gi + 1) * cg]
            # (N, Cg, OD, OH, OW, k…) · (Og, Cg, k…) over Cg and the taps -> (N, OD, OH, OW, Og)
            r = np.tensordot(part, self.w[gi], axes=([1, 5, 6, 7], [1, 2, 3, 4]))
            y[:, gi] = np.moveaxis(r, -1, 1)
        y = y.reshape(n, g * og, od, oh, ow)
        if self.b is not None:
            y += self.b.reshape(1, -1, 1, 1, 1)
        return [y]


@register("nn.ConvTranspose3d")
class ConvTranspose3d(Layer):
    """The gradient of Conv3d: every input voxel adds its weight block into the output at
    stride spacing (one tensordot per group and kernel tap), then padding is cut off.
    Output size (in − 1)·stride − 2·padding + dilation·(k − 1) + output_padding + 1."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        _grouped_weight(self, "in, out/groups, kd, kh, kw", "in_channels")  # w: (G, Cg, Og, k…)
        self.p = self.ints_param("padding", 3, 0, low=0)
        self.d = self.ints_param("dilation", 3, 1, low=1)
        self.op_ = self.ints_param("output_padding", 3, 0, low=0)
        if any(o >= max(s, d) for o, s, d in zip(self.op_, self.s, self.d)):
            raise self.error(f"output_padding {self.op_} must be smaller than stride {self.s} or dilation {self.d}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        _check_5d(self, x)
        g, cg, og = self.w.shape[:3]
        if x.shape[1] != g * cg:
            raise self.error(f"input has {x.shape[1]} channels, the weight expects {g * cg}")
        n, _, *size = x.shape
        full = [(size[i] - 1) * self.s[i] + self.d[i] * (self.k[i] - 1) + 1 + self.op_[i] for i in range(3)]
        want = [f - 2 * self.p[i] for i, f in enumerate(full)]
        if min(want) < 1:
            raise self.error(f"the output would be empty for input {tuple(size)} and padding {self.p}")
        self.check_size((n, g * og, *full))
        y = np.zeros((n, g, og, *full), np.result_type(x.dtype, self.w.dtype))
        for gi in range(g):
            xg = x[:, gi * cg : (gi + 1) * cg]
            for a in range(self.k[0]):
                for b in range(self.k[1]):
                    for c in range(self.k[2]):
                        # (N, Cg, D, H, W) · (Cg, Og) -> (N, D, H, W, Og), added at the tap's offset
                        contrib = np.tensordot(xg, self.w[gi, :, :, a, b, c], axes=([1], [0]))
                        o = (a * self.d[0], b * self.d[1], c * self.d[2])
                        y[:, gi, :, o[0] : o[0] + (size[0] - 1) * self.s[0] + 1 : self.s[0],
                          o[1] : o[1] + (size[1] - 1) * self.s[1] + 1 : self.s[1],
                          o[2] : o[2] + (size[2] - 1) * self.s[2] + 1 : self.s[2]] += np.moveaxis(contrib, -1, 1)
        y = y.reshape(n, g * og, *full)[:, :, self.p[0] : self.p[0] + want[0], self.p[1] : self.p[1] + want[1],
                                         self.p[2] : self.p[2] + want[2]]
        if self.b is not None:
            y = y + self.b.reshape(1, -1, 1, 1, 1)
        return [np.ascontiguousarray(y)]


class _Pool3d(Layer):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.k = self.ints_param("kernel_size", 3, low=1)
        stride = self.param("stride", None)
        self.s = self.k if stride is None or stride == [] else self.ints_param("stride", 3, low=1)
        self.p = self.ints_param("padding", 3, 0, low=0)
        self.d = self.ints_param("dilation", 3, 1, low=1)
        if any(2 * p > k for p, k in zip(self.p, self.k)):
            raise self.error(f"padding {self.p} must be at most half the kernel {self.k}")
        self.ceil = bool(self.param("ceil_mode", False))

    def padded(self, x: np.ndarray, fill: float) -> np.ndarray:
        """x padded with `fill`, plus ceil_mode's overhang (windows that start inside)."""
        extra = []
        for i in range(3):
            n = x.shape[2 + i]
            o = out_size(n, self.k[i], self.s[i], self.p[i], self.p[i], self.d[i], self.ceil)
            if o < 1:
                raise self.error(f"the {self.k} window does not fit the input {x.shape[2:]} with padding {self.p}")
            need = (o - 1) * self.s[i] + self.d[i] * (self.k[i] - 1) + 1
            extra.append(max(0, need - (n + 2 * self.p[i])))
        pads = ((0, 0), (0, 0)) + tuple((self.p[i], self.p[i] + extra[i]) for i in range(3))
        return np.pad(x, pads, constant_values=fill)


@register("nn.MaxPool3d", "F.max_pool3d")
class MaxPool3d(_Pool3d):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if self.param("return_indices", False) or len(op.outputs) > 1:
            raise self.error("return_indices=True is not supported for 3-D max pooling")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        _check_5d(self, x)
        low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        return [_taps(self, self.padded(x, low), self.k, self.s, self.d).max(axis=(5, 6, 7))]


@register("nn.AvgPool3d", "F.avg_pool3d")
class AvgPool3d(_Pool3d):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.include_pad = bool(self.param("count_include_pad", True))
        divisor = self.param("divisor_override", None)
        self.divisor = None if divisor is None else self.int_param("divisor_override", low=1)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        _check_5d(self, x)
        sums = _taps(self, self.padded(x, 0), self.k, self.s, self.d).sum(axis=(5, 6, 7))
        if self.divisor is not None:
            return [(sums / self.divisor).astype(x.dtype)]
        # Divisor per window: its taps inside the input (+ padding when counted, never the
        # ceil_mode overhang), as torch does.
        ones = np.ones((1, 1) + x.shape[2:], x.dtype)
        inside = np.pad(ones, ((0, 0), (0, 0)) + tuple((p, p) for p in self.p), constant_values=1 if self.include_pad else 0)
        extra = self.padded(ones, 0).shape[2:]
        inside = np.pad(inside, ((0, 0), (0, 0)) + tuple((0, e - n) for e, n in zip(extra, inside.shape[2:])))
        count = _taps(self, inside, self.k, self.s, self.d).sum(axis=(5, 6, 7))
        return [(sums / count).astype(x.dtype)]


class _Adaptive3d(Layer):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        size = self.param("output_size")
        size = size if isinstance(size, list) else [size] * 3
        if len(size) != 3 or any(s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0) for s in size):
            raise self.error(f"output_size must be 3 sizes (int >= 0 or None), got {self.param('output_size')!r}")
        self.size = tuple(s or 0 for s in size)

    def out_shape(self, x: np.ndarray) -> tuple[int, ...]:
        _check_5d(self, x)
        shape = x.shape[:2] + tuple(s or n for s, n in zip(self.size, x.shape[2:]))
        self.check_size(shape)
        return shape

    @staticmethod
    def cells(x: np.ndarray, out_shape: tuple[int, ...]):
        """((i, j, k), window slices) of every output cell, torch's adaptive bounds."""
        bounds = [[slice(i * n // m, -(-(i + 1) * n // m)) for i in range(m)] for n, m in zip(x.shape[2:], out_shape[2:])]
        for i, sd in enumerate(bounds[0]):
            for j, sh in enumerate(bounds[1]):
                for k, sw in enumerate(bounds[2]):
                    yield (i, j, k), (slice(None), slice(None), sd, sh, sw)

    def reduce(self, x: np.ndarray, fn) -> np.ndarray:
        shape = self.out_shape(x)
        y = np.empty(shape, x.dtype)
        for (i, j, k), win in self.cells(x, shape):
            y[:, :, i, j, k] = fn(x[win], axis=(2, 3, 4))
        return y


@register("nn.AdaptiveAvgPool3d", "F.adaptive_avg_pool3d")
class AdaptiveAvgPool3d(_Adaptive3d):
    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self.reduce(inputs[0], np.mean)]


@register("nn.AdaptiveMaxPool3d", "F.adaptive_max_pool3d")
class AdaptiveMaxPool3d(_Adaptive3d):
    """Values, and with a second output the int64 indices into each (D, H, W) volume
    (flattened), as torch's return_indices gives them."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if len(self.op.outputs) < 2:
            return [self.reduce(x, np.max)]
        y = self.reduce(x, np.max)
        flat = np.arange(int(np.prod(x.shape[2:])), dtype=np.int64).reshape((1, 1) + x.shape[2:])  # positions in a volume
        idx = np.empty(y.shape, np.int64)
        for (i, j, k), win in self.cells(x, y.shape):
            arg = x[win].reshape(x.shape[:2] + (-1,)).argmax(axis=2)
            idx[:, :, i, j, k] = flat[win].reshape(-1)[arg]
        return [y, idx]

