"""3-D (volumetric: video, medical) convolution and pooling over (N, C, D, H, W).

Each runs on the 2-D layers (conv.py's and pool.py's tuned kernels) over the (H, W) planes:
Conv3d as one 2-D convolution whose input channels are (channel, depth tap) pairs,
ConvTranspose3d as one 2-D transposed convolution whose output channels are, then a
scatter-add along the depth; max and average pooling as a 2-D pool of every plane, then the
depth taps combined (boxes are separable); adaptive pooling likewise, with torch's bins
(start = floor(i·n/o), end = ceil((i+1)·n/o)). The readable definitions they are tested
against: conv3d_reference / conv_transpose3d_reference (conv_reference.py),
pool3d_reference and adaptive_pool3d_reference (the cell walk) here.

What pnnx writes (pnnx 20261020): nn.Conv3d with kernel_size/stride/padding/dilation
triples, groups, bias, padding_mode (padding as 6 ints in F.pad order for an asymmetric
'same' with a padding_mode); F.max_pool3d / F.avg_pool3d with kernel_size, stride
(None: kernel_size), padding, dilation, ceil_mode, return_indices / count_include_pad,
divisor_override; F.adaptive_*_pool3d with output_size (0 or None: keep that size).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from ..graph import Attribute, Operand, Operator, dtype_name
from .pool import adaptive_bounds
from .registry import Layer, create_layer, register
from .windows import out_size, output_buffer, same_padding


def _check_5d(layer: Layer, x: np.ndarray) -> None:
    if x.ndim != 5:
        raise layer.error(f"expected a 5-D (N, C, D, H, W) input, got shape {x.shape}")


def _grouped_weight(
    layer: Layer, layout: str, split: str
) -> tuple[np.ndarray, np.ndarray | None, tuple[int, ...], tuple[int, ...]]:
    """What Conv3d and ConvTranspose3d read alike: the 5-D weight split into groups along
    dim 0 (`split` names that dim in messages), bias, kernel size and stride."""
    w = layer.weight("weight")
    assert w is not None
    if w.ndim != 5:
        raise layer.error(f"weight must be 5-D ({layout}), got shape {w.shape}")
    groups = layer.int_param("groups", 1, low=1)
    if w.shape[0] % groups:
        raise layer.error(f"{split} {w.shape[0]} is not divisible by groups={groups}")
    b = layer.bias_weight()
    out_channels = w.shape[0] if split == "out_channels" else w.shape[1] * groups
    if b is not None and b.shape != (out_channels,):
        raise layer.error(f"bias shape {b.shape} does not match the {out_channels} output channels")
    grouped = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
    return grouped, b, tuple(w.shape[2:]), layer.ints_param("stride", 3, 1, low=1)


_DEPTH_PAD_MODES: dict[str, Literal["constant", "reflect", "edge", "wrap"]] = {
    "zeros": "constant",
    "reflect": "reflect",
    "replicate": "edge",
    "circular": "wrap",
}


def _plane(
    op: Operator,
    op_type: str,
    weight: np.ndarray,
    bias: np.ndarray | None,
    params: dict,
    in_shape: tuple[int, ...] | None,
) -> Layer:
    """The 2-D layer (conv.py's, with its tuned kernels) a 3-D one runs its planes on: a
    convolution of its own, not in the graph, over the 4-D weight and declared input shape."""
    attrs = {"weight": Attribute(dtype_name(weight.dtype), weight.shape, weight)}
    if bias is not None:
        attrs["bias"] = Attribute(dtype_name(bias.dtype), bias.shape, bias)
    return create_layer(
        Operator(
            op_type,
            f"{op.name}.planes",
            inputs=[Operand("planes", in_shape)],
            outputs=[Operand("y")],
            params={**params, "bias": bias is not None},
            attrs=attrs,
        )
    )


@register("nn.Conv3d")
class Conv3d(Layer):
    """A 3-D convolution as one 2-D convolution over planes: the kd depth taps of each input
    channel become kd input channels of a 2-D convolution with the weight viewed as
    (O, Cg·kd, kh, kw) (a view: channel c's taps are contiguous, so groups stay groups),
    run on every output depth as an image (N·OD of them), and the output put back in NCDHW
    order. So Conv3d gets conv.py's tuned kernels (Winograd, im2col in bands, grouped
    GEMMs): 0.4-0.9x PyTorch's time on one thread where one tensordot per group took
    1.1-1.8x (a depthwise one 30x, now 4.3x; bench/bench_volume.py). `conv3d_reference`
    (conv_reference.py) is the readable definition it is tested against. Padding: numbers,
    'same' (stride 1) or 'valid', in any padding_mode: the depth is padded here, the planes by
    the 2-D layer."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        # w: (G, Og, Cg, k…)
        self.w, self.b, self.k, self.s = _grouped_weight(self, "out, in/groups, kd, kh, kw", "out_channels")
        self.d = self.ints_param("dilation", 3, 1, low=1)
        self.mode = str(self.param("padding_mode", "zeros"))
        if self.mode not in _DEPTH_PAD_MODES:
            raise self.error(f"padding_mode must be one of {', '.join(_DEPTH_PAD_MODES)}, got {self.mode!r}")
        padding = self.param("padding", 0)
        # (before, after) per axis D, H, W; the planes get H and W in a form conv.py reads
        plane_padding: object
        if padding == "same":
            if self.s != (1, 1, 1):
                raise self.error(f"padding='same' needs stride 1, got {self.s}")
            self.pads = tuple(same_padding(k, d) for k, d in zip(self.k, self.d))
            plane_padding = "same"
        elif padding == "valid":
            self.pads, plane_padding = ((0, 0),) * 3, [0, 0]
        else:
            p = self.ints_param("padding", None, 0, low=0, high=self.size_limit)
            if len(p) == 6:  # F.pad order (W, H, D pairs): pnnx's asymmetric 'same' with a padding_mode
                self.pads, plane_padding = ((p[4], p[5]), (p[2], p[3]), (p[0], p[1])), list(p[:4])
            elif len(p) in (1, 3):
                p = p * 3 if len(p) == 1 else p
                self.pads, plane_padding = tuple((q, q) for q in p), [p[1], p[2]]
            else:
                raise self.error(f"padding must be 1, 3 or 6 ints, 'same' or 'valid', got {p}")
        g, og, cg, kd, kh, kw = self.w.shape
        declared = op.inputs[0].static_shape if op.inputs else None
        planes = None
        if declared is not None and len(declared) == 5:
            planes = (declared[0] * max(1, self._out_depth(declared[2])), declared[1] * kd, declared[3], declared[4])
        params = {
            "in_channels": g * cg * kd,
            "out_channels": g * og,
            "kernel_size": [kh, kw],
            "stride": list(self.s[1:]),
            "padding": plane_padding,
            "dilation": list(self.d[1:]),
            "groups": g,
            "padding_mode": self.mode,
        }
        # w is contiguous (O, Cg, kd, kh, kw): (O, Cg·kd, kh, kw) is a view of it
        self.plane = _plane(op, "nn.Conv2d", self.w.reshape(g * og, cg * kd, kh, kw), self.b, params, planes)

    def _out_depth(self, depth: int) -> int:
        return out_size(depth, self.k[0], self.s[0], *self.pads[0], self.d[0])

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        _check_5d(self, x)
        g, og, cg, kd = self.w.shape[:4]
        n, c, depth, h, w = x.shape
        if c != g * cg:
            raise self.error(f"input has {c} channels, the weight expects {g * cg}")
        od = self._out_depth(depth)
        if (
            min(
                od,
                *(
                    out_size(x.shape[3 + i], self.k[1 + i], self.s[1 + i], *self.pads[1 + i], self.d[1 + i])
                    for i in range(2)
                ),
            )
            < 1
        ):
            padded = tuple(size + sum(p) for size, p in zip(x.shape[2:], self.pads))
            raise self.error(f"the {self.k} kernel (dilation {self.d}) does not fit the padded input {padded}")
        self.check_size((n, c, depth + sum(self.pads[0]), h, w), "the padded input")
        self.check_size((n * od, c * kd, h, w), "the planes")
        if any(self.pads[0]):
            pads = ((0, 0), (0, 0), self.pads[0], (0, 0), (0, 0))
            x = np.pad(x, pads, mode=_DEPTH_PAD_MODES[self.mode])
        # planes[n·OD + i, c·kd + a] = x[n, c, i·stride + a·dilation]: a strided view, copied once
        sn, sc, sd, sh, sw = x.strides
        taps = as_strided(x, (n, od, c, kd, h, w), (sn, sd * self.s[0], sc, sd * self.d[0], sh, sw), writeable=False)
        y2 = self.plane.forward([taps.reshape(n * od, c * kd, h, w)], [None])[0]
        _, o, oh, ow = y2.shape
        y = output_buffer(out, (n, o, od, oh, ow), y2.dtype)
        np.copyto(y, y2.reshape(n, od, o, oh, ow).transpose(0, 2, 1, 3, 4))
        return [y]


@register("F.conv3d")
class FunctionalConv3d(Layer):
    """`F.conv3d(input, weight, bias)`: the weight (and bias) arrive as inputs ($weight,
    $bias). pnnx writes it for a subclass of nn.Conv3d (torchvision's Conv3DSimple in r3d_18)
    at optlevel 0/1, the weight a pnnx.Attribute. Runs as Conv3d over the arrays given, made
    again only when they are other arrays (an attribute is the same array every run)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        names, n = op.input_names, len(op.inputs)
        self.w_index = names.index("weight") if "weight" in names else 1
        self.b_index = names.index("bias") if "bias" in names else (2 if n > 2 else None)
        if n < 2 or self.w_index >= n or (self.b_index is not None and self.b_index >= n):
            raise self.error(f"expected inputs (input, weight[, bias]), got {n} input(s)")
        shape = op.inputs[self.w_index].shape
        if shape is not None and len(shape) != 5:
            raise self.error(f"weight must be 5-D (out, in/groups, kd, kh, kw), got shape {tuple(shape)}")
        self._made: tuple[np.ndarray, np.ndarray | None, Conv3d] | None = None

    def _conv(self, weight: np.ndarray, bias: np.ndarray | None) -> Conv3d:
        made = self._made
        if made is not None and made[0] is weight and made[1] is bias:
            return made[2]
        attrs = {"weight": Attribute(dtype_name(weight.dtype), weight.shape, weight)}
        if bias is not None:
            attrs["bias"] = Attribute(dtype_name(bias.dtype), bias.shape, bias)
        params = {k: v for k, v in self.op.params.items() if k in ("stride", "padding", "dilation", "groups")}
        conv = Conv3d(
            Operator(
                self.type,
                self.name,
                inputs=[self.op.inputs[0]],
                outputs=list(self.op.outputs),
                params={**params, "bias": bias is not None},
                attrs=attrs,
            )
        )
        self._made = (weight, bias, conv)
        return conv

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        weight = np.asarray(inputs[self.w_index])
        bias = None if self.b_index is None else np.asarray(inputs[self.b_index])
        if weight.ndim != 5:
            raise self.error(f"weight must be 5-D (out, in/groups, kd, kh, kw), got shape {weight.shape}")
        return self._conv(weight, bias).forward([inputs[0]], out)


@register("nn.ConvTranspose3d")
class ConvTranspose3d(Layer):
    """The gradient of Conv3d, as one 2-D transposed convolution over planes: each (output
    channel, depth tap) pair is an output channel of a 2-D ConvTranspose (the weight viewed
    as (C, Og·kd, kh, kw)) run on every input depth as an image; each depth tap's planes are
    then added at its depth (stride and dilation apart) and the depth padding cut off.
    Output size (in − 1)·stride − 2·padding + dilation·(k − 1) + output_padding + 1.
    `conv_transpose3d_reference` (conv_reference.py) is the readable definition."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        # w: (G, Cg, Og, k…)
        self.w, self.b, self.k, self.s = _grouped_weight(self, "in, out/groups, kd, kh, kw", "in_channels")
        self.p = self.ints_param("padding", 3, 0, low=0)
        self.d = self.ints_param("dilation", 3, 1, low=1)
        self.op_ = self.ints_param("output_padding", 3, 0, low=0)
        if any(o >= max(s, d) for o, s, d in zip(self.op_, self.s, self.d)):
            raise self.error(f"output_padding {self.op_} must be smaller than stride {self.s} or dilation {self.d}")
        g, cg, og, kd, kh, kw = self.w.shape
        declared = op.inputs[0].static_shape if op.inputs else None
        planes = None
        if declared is not None and len(declared) == 5:
            planes = (declared[0] * declared[2], declared[1], declared[3], declared[4])
        params = {
            "in_channels": g * cg,
            "out_channels": g * og * kd,
            "kernel_size": [kh, kw],
            "stride": list(self.s[1:]),
            "padding": list(self.p[1:]),
            "output_padding": list(self.op_[1:]),
            "dilation": list(self.d[1:]),
            "groups": g,
        }
        self.plane = _plane(op, "nn.ConvTranspose2d", self.w.reshape(g * cg, og * kd, kh, kw), None, params, planes)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        _check_5d(self, x)
        g, cg, og, kd = self.w.shape[:4]
        n, c, depth, h, w = x.shape
        if c != g * cg:
            raise self.error(f"input has {c} channels, the weight expects {g * cg}")
        s, d, p = self.s[0], self.d[0], self.p[0]
        full = (depth - 1) * s + d * (kd - 1) + 1 + self.op_[0]
        if full - 2 * p < 1:
            raise self.error(f"the output would be empty for input {x.shape[2:]} and padding {self.p}")
        planes = np.ascontiguousarray(x.transpose(0, 2, 1, 3, 4)).reshape(n * depth, c, h, w)
        self.check_size((n * depth, g * og * kd) + planes.shape[2:], "the planes")
        y2 = self.plane.forward([planes], [None])[0]  # (N·D, G·Og·kd, OH, OW)
        oh, ow = y2.shape[2:]
        self.check_size((n, g * og, full, oh, ow))
        taps = y2.reshape(n, depth, g * og, kd, oh, ow)
        canvas = np.zeros((n, g * og, full, oh, ow), y2.dtype)
        for a in range(kd):  # depth tap a of input depth i lands at i·stride + a·dilation
            canvas[:, :, a * d : a * d + (depth - 1) * s + 1 : s] += taps[:, :, :, a].transpose(0, 2, 1, 3, 4)
        y = output_buffer(out, (n, g * og, full - 2 * p, oh, ow), y2.dtype)
        np.copyto(y, canvas[:, :, p : full - p])
        if self.b is not None:
            y += self.b.reshape(1, -1, 1, 1, 1)
        return [y]


def pool3d_reference(
    x: np.ndarray,
    kind: str,
    kernel: tuple[int, int, int],
    stride: tuple[int, int, int],
    padding: tuple[int, int, int] = (0, 0, 0),
    dilation: tuple[int, int, int] = (1, 1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor: int | None = None,
) -> np.ndarray:
    """3-D max ('max') or average ('avg') pooling as torch defines it, over a strided view of
    every box: readable and slow (the layers below are tested against it)."""
    sizes = [
        out_size(x.shape[2 + i], kernel[i], stride[i], padding[i], padding[i], dilation[i], ceil_mode) for i in range(3)
    ]
    # Padding, plus ceil_mode's overhang: windows that start inside may reach past the end.
    extra = [
        max(0, (o - 1) * s + d * (k - 1) + 1 - n - 2 * p)
        for o, s, d, k, n, p in zip(sizes, stride, dilation, kernel, x.shape[2:], padding)
    ]
    pads = ((0, 0), (0, 0)) + tuple((p, p + e) for p, e in zip(padding, extra))
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    boxes = lambda a: sliding_window_view(  # noqa: E731  (N, C, OD, OH, OW, kd, kh, kw)
        a, tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel)), axis=(2, 3, 4)
    )[:, :, :: stride[0], :: stride[1], :: stride[2], :: dilation[0], :: dilation[1], :: dilation[2]]
    if kind == "max":
        return boxes(np.pad(x, pads, constant_values=low)).max(axis=(5, 6, 7))
    sums = boxes(np.pad(x.astype(np.float64), pads)).sum(axis=(5, 6, 7))
    if divisor is not None:
        return (sums / divisor).astype(x.dtype)
    # Divisor per box: its taps inside the input (+ the padding when counted, never the overhang).
    inside = np.pad(
        np.ones((1, 1) + x.shape[2:]),
        ((0, 0), (0, 0)) + tuple((p, p) for p in padding),
        constant_values=1 if count_include_pad else 0,
    )
    inside = np.pad(inside, ((0, 0), (0, 0)) + tuple((0, e) for e in extra))
    return (sums / boxes(inside).sum(axis=(5, 6, 7))).astype(x.dtype)


class _Pool3d(Layer):
    """Max and average pooling over boxes are separable: a 2-D pool (pool.py's tuned kernels)
    of every (H, W) plane, the input viewed as (N, C·D, H, W) with no copy, then the depth
    taps of the pooled planes combined (max, or the sum over torch's per-axis counts: a box's
    count is the product of its per-axis counts). 5-9x faster than max/sum over a strided
    view of every box (bench/bench_volume.py); `pool3d_reference` is that definition, kept for the
    tests."""

    plane_type = ""

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
        params = {
            "kernel_size": list(self.k[1:]),
            "stride": list(self.s[1:]),
            "padding": list(self.p[1:]),
            "ceil_mode": self.ceil,
            **self.plane_params(op),
        }
        self.plane = create_layer(
            Operator(self.plane_type, f"{op.name}.planes", inputs=[Operand("x")], outputs=[Operand("y")], params=params)
        )

    def plane_params(self, op: Operator) -> dict:
        return {}

    def out_sizes(self, x: np.ndarray) -> list[int]:
        sizes = [
            out_size(x.shape[2 + i], self.k[i], self.s[i], self.p[i], self.p[i], self.d[i], self.ceil) for i in range(3)
        ]
        if min(sizes) < 1:
            raise self.error(f"the {self.k} window does not fit the input {x.shape[2:]} with padding {self.p}")
        return sizes

    def pooled_planes(self, x: np.ndarray) -> np.ndarray:
        """The 2-D pool of every plane: (N, C, D, OH, OW)."""
        n, c, depth, h, w = x.shape
        y = self.plane.forward([np.ascontiguousarray(x).reshape(n, c * depth, h, w)], [None])[0]
        return y.reshape(n, c, depth, *y.shape[2:])

    def combine_depth_taps(
        self, x: np.ndarray, out: list[np.ndarray | None], combine: np.ufunc, fill: float
    ) -> np.ndarray:
        """The 2-D pool of every plane, then its depth taps combined (np.maximum, np.add) into
        (N, C, OD, OH, OW): the planes padded with `fill` along the depth (and ceil_mode's
        overhang past the end)."""
        _check_5d(self, x)
        od = self.out_sizes(x)[0]
        planes = self.pooled_planes(x)
        k, s, p, d = self.k[0], self.s[0], self.p[0], self.d[0]
        back = max(p, (od - 1) * s + d * (k - 1) + 1 - planes.shape[2] - p)
        if p or back:
            planes = np.pad(planes, ((0, 0), (0, 0), (p, back), (0, 0), (0, 0)), constant_values=fill)
        taps = [planes[:, :, a * d : a * d + (od - 1) * s + 1 : s] for a in range(k)]
        y = output_buffer(out, taps[0].shape, x.dtype)
        np.copyto(y, taps[0])
        for t in taps[1:]:
            combine(y, t, out=y)
        return y


@register("nn.MaxPool3d", "F.max_pool3d")
class MaxPool3d(_Pool3d):
    plane_type = "F.max_pool2d"

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if self.param("return_indices", False) or len(op.outputs) > 1:
            raise self.error("return_indices=True is not supported for 3-D max pooling")

    def plane_params(self, op: Operator) -> dict:
        return {"dilation": list(self.d[1:])}

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        return [self.combine_depth_taps(x, out, np.maximum, low)]


@register("nn.AvgPool3d", "F.avg_pool3d")
class AvgPool3d(_Pool3d):
    plane_type = "F.avg_pool2d"

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.include_pad = bool(self.param("count_include_pad", True))
        divisor = self.param("divisor_override", None)
        self.divisor = None if divisor is None else self.int_param("divisor_override", low=1)

    def plane_params(self, op: Operator) -> dict:
        # With a divisor_override the planes' sums: the divisor is applied once, at the end.
        return {
            "count_include_pad": bool(op.params.get("count_include_pad", True)),
            "divisor_override": None if op.params.get("divisor_override") is None else 1,
        }

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        y = self.combine_depth_taps(x, out, np.add, 0)
        if self.divisor is not None:
            y /= y.dtype.type(self.divisor)
            return [y]
        # torch's count along the depth (the planes are already divided by theirs)
        od = y.shape[2]
        start = np.arange(od) * self.s[0] - self.p[0]
        depth = x.shape[2]
        end = np.minimum(start + self.k[0], depth + self.p[0])
        if not self.include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, depth)
        y /= (end - start).astype(y.dtype).reshape(1, 1, od, 1, 1)
        return [y]


def _cells(x: np.ndarray, out_shape: tuple[int, ...]):
    """((i, j, k), window slices) of every output cell, torch's adaptive bounds."""
    bounds = [[slice(i * n // m, -(-(i + 1) * n // m)) for i in range(m)] for n, m in zip(x.shape[2:], out_shape[2:])]
    for i, sd in enumerate(bounds[0]):
        for j, sh in enumerate(bounds[1]):
            for k, sw in enumerate(bounds[2]):
                yield (i, j, k), (slice(None), slice(None), sd, sh, sw)


def adaptive_pool3d_reference(x: np.ndarray, out_shape: tuple[int, ...], fn) -> np.ndarray:
    """Adaptive 3-D pooling cell by cell (`fn`: np.mean or np.max): readable and slow."""
    y = np.empty(out_shape, x.dtype)
    for (i, j, k), win in _cells(x, out_shape):
        y[:, :, i, j, k] = fn(x[win], axis=(2, 3, 4))
    return y


class _Adaptive3d(Layer):
    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        size = self.param("output_size")
        size = size if isinstance(size, list) else [size] * 3
        if len(size) != 3 or any(
            s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0) for s in size
        ):
            raise self.error(f"output_size must be 3 sizes (int >= 0 or None), got {self.param('output_size')!r}")
        self.size = tuple(s or 0 for s in size)

    def out_shape(self, x: np.ndarray) -> tuple[int, ...]:
        _check_5d(self, x)
        shape = x.shape[:2] + tuple(s or n for s, n in zip(self.size, x.shape[2:]))
        self.check_size(shape)
        return shape


@register("nn.AdaptiveAvgPool3d", "F.adaptive_avg_pool3d")
class AdaptiveAvgPool3d(_Adaptive3d):
    """Adaptive windows are boxes too: pool.py's 2-D adaptive average of every plane (the
    input viewed as (N, C·D, H, W); two small GEMMs), then an averaging matrix along the depth
    (the cell walk, now `adaptive_pool3d_reference`, took 12x PyTorch's time for an
    (8, 28, 28) output; bench/bench_volume.py)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.plane = create_layer(
            Operator(
                "F.adaptive_avg_pool2d",
                f"{op.name}.planes",
                inputs=[Operand("x")],
                outputs=[Operand("y")],
                params={"output_size": [s or None for s in self.size[1:]]},
            )
        )

    def pooled_planes(self, x: np.ndarray) -> np.ndarray:
        """The 2-D adaptive average of every plane: (N, C, D, OH, OW)."""
        n, c, depth, h, w = x.shape
        y = self.plane.forward([np.ascontiguousarray(x).reshape(n, c * depth, h, w)], [None])[0]
        return y.reshape(n, c, depth, *y.shape[2:])

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        shape = self.out_shape(x)
        if x.dtype.kind != "f":  # torch has no integer average pooling; NumPy's mean is float64
            return [adaptive_pool3d_reference(x, shape, np.mean)]
        n, c, depth = x.shape[:3]
        y = output_buffer(out, shape, x.dtype)
        if shape[2:] == (1, 1, 1):  # global average pooling (video classifiers' head)
            # A GEMV by 1/size: 0.15 ms for (64, 16·56·56), np.mean 0.43 (its pairwise sum)
            volume = int(np.prod(x.shape[2:]))
            np.matmul(
                np.ascontiguousarray(x).reshape(n * c, volume),
                np.full(volume, 1 / volume, x.dtype),
                out=y.reshape(n * c),
            )
            return [y]
        od = shape[2]
        self.check_size((od, depth), "an averaging matrix")
        start, end = adaptive_bounds(depth, od)
        j = np.arange(depth)
        average = (((j >= start[:, None]) & (j < end[:, None])) / (end - start)[:, None]).astype(x.dtype)  # (OD, D)
        np.matmul(average, self.pooled_planes(x).reshape(n * c, depth, -1), out=y.reshape(n * c, od, -1))
        return [y]


# Up to this many bins along an axis, adaptive max loops over them; beyond, it gathers each
# bin's (then few) positions at once: an output of 1e6 along an axis of 2 was a 1e6-step loop.
BINS_LOOP_MAX = 64


def _max_over_bins(x: np.ndarray, axis: int, o: int) -> np.ndarray:
    """x with `axis` reduced to its o adaptive bins by max (torch's bounds)."""
    if x.shape[axis] == o:
        return x
    start, end = adaptive_bounds(x.shape[axis], o)
    if o > BINS_LOOP_MAX:
        k = int((end - start).max())  # short bins repeat their last position: harmless for max
        positions = np.minimum(start[:, None] + np.arange(k), end[:, None] - 1)  # (o, k)
        return np.take(x, positions, axis=axis).max(axis=axis + 1)
    y = np.empty(x.shape[:axis] + (o,) + x.shape[axis + 1 :], x.dtype)
    lead = (slice(None),) * axis
    for i, (a, b) in enumerate(zip(start, end)):
        np.max(x[lead + (slice(a, b),)], axis=axis, out=y[lead + (i,)])
    return y


@register("nn.AdaptiveMaxPool3d", "F.adaptive_max_pool3d")
class AdaptiveMaxPool3d(_Adaptive3d):
    """Values, and with a second output the int64 indices into each (D, H, W) volume
    (flattened), as torch's return_indices gives them (cell by cell). The values alone: a box's
    max is the max over its bins one axis at a time, each a loop over that axis's bins only
    (adaptive bins may overlap by one). D first: over a leading axis a bin's max is an
    elementwise maximum of whole planes; W first, a strided inner loop of a few elements,
    took 17 ms against 1.8 for (16, 56, 56) -> (4, 7, 7)."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        shape = self.out_shape(x)
        if len(self.op.outputs) < 2:
            y = x
            for axis in (2, 3, 4):
                y = _max_over_bins(y, axis, shape[axis])
            return [y]
        y = adaptive_pool3d_reference(x, shape, np.max)
        flat = np.arange(int(np.prod(x.shape[2:])), dtype=np.int64).reshape(
            (1, 1) + x.shape[2:]
        )  # positions in a volume
        idx = np.empty(y.shape, np.int64)
        for (i, j, k), win in _cells(x, y.shape):
            arg = x[win].reshape(x.shape[:2] + (-1,)).argmax(axis=2)
            idx[:, :, i, j, k] = flat[win].reshape(-1)[arg]
        return [y, idx]
