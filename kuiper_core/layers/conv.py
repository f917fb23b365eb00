"""Convolutions: nn.Conv1d/2d, F.conv1d/2d, nn.ConvTranspose1d/2d, F.conv_transpose1d/2d.

Everything is computed as 2-D over (N, C, H, W); 1-D convolutions are the H = 1 case.

This module is the layers' definition: it reads and checks the params and weights (at build),
works out the padding and output sizes, and holds the plain reference forward
(conv_reference.py, the definition every fast kernel is tested against). The fast side is
apart, as ncnn keeps x86/convolution_x86.cpp beside convolution.cpp: an nn.Conv*'s `kernels`
(conv_factory.ConvKernels) make the kernel conv_choice.py chooses per input shape (im2col
GEMM, plain GEMM for pointwise convs, Winograd (winograd.py, winograd_stride2.py), depthwise
(depthwise.py)) with the costs the runtime passes (kernel_costs.py).

Transposed convolution is the GEMM the other way (weight^T @ input gives every tap's
contribution) followed by a scatter-add of the KH·KW taps onto the output (col2im).

What pnnx writes (pnnx 20261020): nn.* convs carry in/out_channels, kernel_size, stride,
padding, dilation, groups, bias, padding_mode (Conv only) and @weight/@bias; F.conv2d with a
parameter weight becomes nn.Conv2d. F.* convs get the weight (and bias) as inputs
($input, $weight, $bias), with `bias=None` when there is none. padding is an int tuple,
`same`/`valid`, the F.pad-order 4-tuple (left, right, top, bottom) for an asymmetric
'same' with a non-zero padding_mode, and `()` for an asymmetric 'same' Conv1d.
"""

from __future__ import annotations

import numpy as np

from ..graph import Operator
from ..limits import PYTHON_STEP_WORK
from .conv_factory import ConvKernels, given_weight_kernel
from .conv_kernels import Pads
from .conv_reference import conv2d_reference
from .halves import SplitRequest
from .registry import Layer, Prepared, register
from .windows import batch_chunks, out_size, output_buffer, same_padding, scratch

PaddingSpec = str | Pads  # "same" or explicit pads

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvBase(Layer):
    """Params shared by every convolution; 1-D params are lifted to 2-D with H = 1."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dims = 1 if op.type.endswith("1d") else 2
        self.functional = op.type.startswith("F.")
        self.stride = self._pair("stride")
        self.dilation = self._pair("dilation")
        self.groups = self.int_param("groups", 1, high=self.size_limit)
        if self.groups < 1:
            raise self.error(f"groups must be >= 1, got {self.groups}")
        if min(self.stride + self.dilation) < 1:
            raise self.error(f"stride and dilation must be >= 1, got stride={self.stride} dilation={self.dilation}")

    def _pair(self, key: str, default: int = 1, required: bool = False) -> tuple[int, int]:
        """(H, W) values; a 1-D param gets `default` as the H entry (1 for sizes, 0 for pads)."""
        high = self.size_limit  # every pair is a size: kernel, stride, dilation, padding
        v = (
            self.ints_param(key, self.dims, high=high)
            if required
            else self.ints_param(key, self.dims, default=default, high=high)
        )
        return (default, v[0]) if self.dims == 1 else (v[0], v[1])

    def lift_shape(self, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
        """A declared (possibly unbatched, possibly 1-D) input shape as (N, C, H, W)."""
        lifted = (1,) * (self.dims + 2 - len(shape)) + tuple(shape)
        n, c, h, w = lifted if self.dims == 2 else lifted[:2] + (1,) + lifted[2:]
        return n, c, h, w

    def lift(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        """x as (N, C, H, W) and the output shape prefix to restore: unbatched and 1-D inputs."""
        if x.ndim == self.dims + 1:  # unbatched, as torch allows
            x = x[None]
            unbatched = True
        elif x.ndim == self.dims + 2:
            unbatched = False
        else:
            want = "(N, C, L) or (C, L)" if self.dims == 1 else "(N, C, H, W) or (C, H, W)"
            raise self.error(f"expected input of shape {want}, got {x.shape}")
        if self.dims == 1:
            x = x[:, :, None, :]
        return x, (() if unbatched else (x.shape[0],))

    def _input_positions(self) -> tuple[int, int | None]:
        """Where F.conv*'s weight and bias are among the inputs ($weight, $bias)."""
        names = self.op.input_names
        n = len(self.op.inputs)
        w = names.index("weight") if "weight" in names else 1
        b = names.index("bias") if "bias" in names else (2 if n > 2 else None)
        if n < 2 or w >= n or (b is not None and b >= n):
            raise self.error(f"expected inputs (input, weight[, bias]), got {n} input(s)")
        return w, b

    def _read_weights(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """nn.*: the checked (weight, bias). F.*: None, after locating the weight inputs and
        checking the weight's declared shape when there is one. Sets `self.kernel`."""
        checked = self._check_weights()
        if checked is None:
            return None
        return self.weight("weight"), checked[2]

    def _check_weights(self) -> tuple[tuple[int, ...], np.dtype, np.ndarray | None] | None:
        """nn.*: the weight's shape and dtype (its data is not read: a kernel reads it when it is
        made) and the checked bias. F.*: None, as _read_weights. Sets `self.kernel`."""
        self.kernel: tuple[int, int] | None = None
        if self.functional:
            self.w_index, self.b_index = self._input_positions()
            shape = self.op.inputs[self.w_index].static_shape
            if shape is not None:
                self._check_weight_shape(shape, None, None)
            return None
        attr = self.op.attrs.get("weight")
        if attr is None or not attr.available:
            raise self.error("missing weight '@weight'")
        bias = self.bias_weight()
        self.in_channels, out_channels = self.int_param("in_channels"), self.int_param("out_channels")
        self._check_weight_shape(tuple(attr.shape), self.in_channels, out_channels)
        ks = self._pair("kernel_size", required=True)
        if ks != self.kernel:
            raise self.error(f"kernel_size={ks} but the weight's kernel is {self.kernel}")
        self._check_bias(bias, out_channels)
        return tuple(attr.shape), attr.array_dtype, bias

    def _check_weight_shape(self, shape: tuple[int, ...], in_ch: int | None, out_ch: int | None) -> tuple[int, int]:
        """Checks a weight's shape against the channels; sets and returns `self.kernel` (KH, KW)."""
        raise NotImplementedError

    def kernel_hw(self) -> tuple[int, int]:
        """(KH, KW) of a conv whose weight shape is known (nn.*: from build; F.*: once checked)."""
        if self.kernel is None:
            raise self.error("the weight's shape is not known yet (F.conv* without a declared weight)")
        return self.kernel

    def _check_bias(self, bias: np.ndarray | None, channels: int) -> None:
        if bias is not None and bias.shape != (channels,):
            raise self.error(f"bias shape {bias.shape} does not match out_channels: expected ({channels},)")

    def out_shape(self, prefix: tuple[int, ...], channels: int, oh: int, ow: int) -> tuple[int, ...]:
        return prefix + ((channels, ow) if self.dims == 1 else (channels, oh, ow))


@register("nn.Conv1d", "nn.Conv2d", "F.conv1d", "F.conv2d")
class Convolution(_ConvBase):
    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.padding_mode = str(self.param("padding_mode", "zeros"))
        if self.padding_mode not in _PADDING_MODES:
            raise self.error(f"padding_mode must be one of {', '.join(_PADDING_MODES)}, got {self.padding_mode!r}")
        self.padding = self._padding_spec()
        self._geometry_cache: dict[tuple[int, ...], tuple[Pads, tuple[int, int]]] = {}
        if self.padding == "same" and self.stride != (1, 1):
            raise self.error(f"padding='same' needs stride 1, got {self.stride}")

        # nn.* weights (F.* convs get theirs as inputs: None here). Only their shapes are read
        # now: the kernels lay the weight out when first made (conv_factory.py) and ask the
        # graph for it then, so a lazily read .bin is not read at load.
        checked = self._check_weights()
        self._weight_attr = None if checked is None else op.attrs["weight"]
        self.bias_data = None if checked is None else checked[2]
        self.out_channels = 0 if checked is None else checked[0][0]
        self.weight_dtype = None if checked is None else checked[1]
        # nn.*: the fast kernels and the weight layouts they read (conv_factory.py)
        self.kernels = None if checked is None else ConvKernels(self)

    @property
    def weight_data(self) -> np.ndarray | None:
        """nn.*: the weight (from the graph: read again if it was let go of); F.*: None."""
        return None if self._weight_attr is None else self._weight_attr.data

    def module_weight(self) -> np.ndarray:
        """nn.*'s weight, for the kernels that lay it out (F.* convs have none: their weight is an input)."""
        weight = self.weight_data
        assert weight is not None, "F.conv* runs im2col on the weight it is given"
        return weight

    def _padding_spec(self) -> PaddingSpec:
        p = self.param("padding", 0)
        if p == "same" or p == []:  # pnnx writes () for an asymmetric 'same' Conv1d
            return "same"
        if p == "valid":
            return (0, 0, 0, 0)
        if isinstance(p, str):
            raise self.error(f"padding must be ints, 'same' or 'valid', got {p!r}")
        v = self.ints_param("padding", high=self.size_limit)
        if any(q < 0 for q in v):
            raise self.error(f"padding must be >= 0, got {v}")
        if self.dims == 1 and len(v) in (1, 2):
            return (0, 0, v[0], v[-1])
        if self.dims == 2 and len(v) == 1:
            return (v[0], v[0], v[0], v[0])
        if self.dims == 2 and len(v) == 2:
            return (v[0], v[0], v[1], v[1])
        if self.dims == 2 and len(v) == 4:  # F.pad order: left, right, top, bottom
            return (v[2], v[3], v[0], v[1])
        raise self.error(f"cannot read padding={tuple(v)} for a {self.dims}-D convolution")

    def _check_weight_shape(self, shape: tuple[int, ...], in_ch: int | None, out_ch: int | None) -> tuple[int, int]:
        g = self.groups
        if len(shape) != self.dims + 2:
            raise self.error(f"weight must be {self.dims + 2}-D (out, in/groups, *kernel), got shape {shape}")
        if out_ch is not None and shape[0] != out_ch:
            raise self.error(f"weight shape {shape}: expected out_channels={out_ch} as dim 0")
        if shape[0] % g:
            raise self.error(f"weight shape {shape}: out_channels {shape[0]} not divisible by groups={g}")
        if in_ch is not None and (in_ch % g or shape[1] != in_ch // g):
            raise self.error(
                f"weight shape {shape}: expected in_channels/groups = {in_ch}/{g} as dim 1"
                if in_ch % g == 0
                else f"in_channels={in_ch} is not divisible by groups={g}"
            )
        kernel = (1, shape[2]) if self.dims == 1 else (shape[2], shape[3])
        if min(kernel) < 1:
            raise self.error(f"weight shape {shape} has an empty kernel")
        self.kernel = kernel
        return kernel

    def weight_matrix(self, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """(G, Og, Cg·KH·KW [+1]): the GEMM's left operand, bias as the extra last column."""
        g = self.groups
        out_ch = weight.shape[0]
        wm = weight.reshape(g, out_ch // g, -1)
        if bias is None:
            return np.ascontiguousarray(wm)
        self._check_bias(bias, out_ch)
        return np.concatenate([wm, bias.astype(weight.dtype).reshape(g, out_ch // g, 1)], axis=2)

    def geometry(
        self, h: int, w: int, kernel: tuple[int, int], pads_of_half: Pads | None = None
    ) -> tuple[Pads, tuple[int, int]]:
        """The pads and output (OH, OW) at an input size, cached; `pads_of_half`: the pads of
        one half of the rows (conv_factory.ConvKernels.split_call) instead of the layer's."""
        key = (h, w) + kernel + (pads_of_half or ())
        geo = self._geometry_cache.get(key)
        if geo is None:
            if pads_of_half is not None:
                pads = pads_of_half
            elif isinstance(self.padding, str):  # "same"
                pads = same_padding(kernel[0], self.dilation[0]) + same_padding(kernel[1], self.dilation[1])
            else:
                pads = self.padding
            oh = out_size(h, kernel[0], self.stride[0], pads[0], pads[1], self.dilation[0])
            ow = out_size(w, kernel[1], self.stride[1], pads[2], pads[3], self.dilation[1])
            if oh < 1 or ow < 1:
                raise self.error(
                    f"kernel {kernel[1] if self.dims == 1 else kernel} (dilation {self.dilation}) is larger than "
                    f"the padded input {(h, w)[2 - self.dims :]}"
                )
            geo = (pads, (oh, ow))
            self._geometry_cache[key] = geo
        return geo

    def kernel_name(self, inputs: list[tuple[int, ...]]) -> str:
        if self.kernels is None or not inputs or len(inputs[0]) not in (self.dims + 1, self.dims + 2):
            return "im2col + GEMM"  # F.conv*: weights arrive as inputs, laid out per call
        return self.kernels.kernel_name(self.lift_shape(inputs[0]))

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        return None if self.kernels is None else self.kernels.prepare(inputs, out, False, split)

    def prepare_with_relu(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        return None if self.kernels is None else self.kernels.prepare(inputs, out, True, split)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x4, prefix = self.lift(inputs[0])
        n = x4.shape[0]
        if self.kernels is None:  # F.conv*: weights arrive as inputs, laid out per call
            weight = inputs[self.w_index]
            bias = inputs[self.b_index] if self.b_index is not None else None
            kernel_hw = self._check_weight_shape(weight.shape, x4.shape[1], None)
            wmat = self.weight_matrix(weight, bias)
            dtype = np.result_type(x4.dtype, wmat.dtype)
            pads, (oh, ow) = self.geometry(x4.shape[2], x4.shape[3], kernel_hw)
            kernel = given_weight_kernel(self, wmat.astype(dtype, copy=False), pads, x4.shape, (oh, ow), dtype)
            o = wmat.shape[0] * wmat.shape[1]
        else:
            dtype = np.result_type(x4.dtype, self.weight_dtype)
            kernel = self.kernels.kernel(x4.shape, dtype)
            pads, (oh, ow) = self.geometry(x4.shape[2], x4.shape[3], self.kernel_hw())
            o = self.out_channels
        y = output_buffer(out, self.out_shape(prefix, o, oh, ow), dtype)
        kernel.run(x4 if x4.dtype == dtype else x4.astype(dtype), y.reshape(n, o, oh, ow))
        return [y]

    def reference(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        """The convolution as written on the blackboard (conv_reference.conv2d_reference, in
        float64), whatever kernel forward would choose."""
        x4, prefix = self.lift(inputs[0])
        if self.weight_dtype is None:  # F.conv*: the weight and bias are inputs
            weight = inputs[self.w_index]
            bias = inputs[self.b_index] if self.b_index is not None else None
        else:
            weight, bias = self.module_weight(), self.bias_data
        o, cg, kh, kw = self.lift_shape(weight.shape)  # 1-D: (O, C/groups, 1, K)
        weight = weight.reshape(o, cg, kh, kw)
        dtype = np.result_type(x4.dtype, weight.dtype)
        pads, (oh, ow) = self.geometry(x4.shape[2], x4.shape[3], (kh, kw))
        y = conv2d_reference(x4, weight, bias, self.stride, pads, self.dilation, self.groups, self.padding_mode)
        result = output_buffer(out, self.out_shape(prefix, o, oh, ow), dtype)
        result[...] = y.reshape(result.shape)
        return [result]

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        if self.kernel is None:  # F.conv* without a declared weight shape
            return 0
        cg = inputs[0][-self.dims - 1] // self.groups
        return int(np.prod(outputs[0])) * cg * self.kernel[0] * self.kernel[1]


@register("nn.ConvTranspose1d", "nn.ConvTranspose2d", "F.conv_transpose1d", "F.conv_transpose2d")
class TransposedConvolution(_ConvBase):
    def kernel_name(self, inputs: list[tuple[int, ...]]) -> str:
        return "GEMM + col2im (scatter-add of the taps)"

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        pad = self._pair("padding", 0)
        self.pads: tuple[int, int] = pad
        self._geometry_cache: dict[tuple[int, ...], tuple[tuple[int, int], tuple[int, int]]] = {}
        self.output_padding = self._pair("output_padding", 0)
        if min(pad + self.output_padding) < 0:
            raise self.error(f"padding and output_padding must be >= 0, got {pad}, {self.output_padding}")
        for op_, s, d in zip(self.output_padding, self.stride, self.dilation):
            if op_ >= max(s, d):
                raise self.error(
                    f"output_padding {self.output_padding} must be smaller than stride {self.stride} or dilation {self.dilation}"
                )
        weights = self._read_weights()
        self.wmat = None if weights is None else self._weight_matrix(weights[0])
        self.bias = None if weights is None else weights[1]

    def _check_weight_shape(self, shape: tuple[int, ...], in_ch: int | None, out_ch: int | None) -> tuple[int, int]:
        g = self.groups
        if len(shape) != self.dims + 2:
            raise self.error(f"weight must be {self.dims + 2}-D (in, out/groups, *kernel), got shape {shape}")
        if in_ch is not None and shape[0] != in_ch:
            raise self.error(f"weight shape {shape}: expected in_channels={in_ch} as dim 0")
        if shape[0] % g:
            raise self.error(f"weight shape {shape}: in_channels {shape[0]} not divisible by groups={g}")
        if out_ch is not None and (out_ch % g or shape[1] != out_ch // g):
            raise self.error(f"weight shape {shape}: expected out_channels/groups = {out_ch}/{g} as dim 1")
        kernel = (1, shape[2]) if self.dims == 1 else (shape[2], shape[3])
        if min(kernel) < 1:
            raise self.error(f"weight shape {shape} has an empty kernel")
        self.kernel = kernel
        return kernel

    def _weight_matrix(self, weight: np.ndarray) -> np.ndarray:
        """(G, Og·KH·KW, Cg): maps one group's input channels to every output tap."""
        g = self.groups
        return np.ascontiguousarray(weight.reshape(g, weight.shape[0] // g, -1).transpose(0, 2, 1))

    def _geometry(self, h: int, w: int, kernel: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
        key = (h, w) + kernel
        geo = self._geometry_cache.get(key)
        if geo is None:
            size = [
                (n - 1) * s - 2 * p + d * (k - 1) + op_ + 1
                for n, s, p, d, k, op_ in zip(
                    (h, w), self.stride, self.pads, self.dilation, kernel, self.output_padding
                )
            ]
            if min(size) < 0:  # torch allows an empty (size 0) output, not a negative one
                raise self.error(
                    f"the output size {tuple(size)} is negative: input {(h, w)}, padding {self.pads}, kernel {kernel}"
                )
            geo = (self.pads, (size[0], size[1]))
            self._geometry_cache[key] = geo
        return geo

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x4, prefix = self.lift(inputs[0])
        if self.wmat is None:
            weight = inputs[self.w_index]
            bias = inputs[self.b_index] if self.b_index is not None else None
            self._check_weight_shape(weight.shape, x4.shape[1], None)
            wmat = self._weight_matrix(weight)
            self._check_bias(bias, weight.shape[1] * self.groups)
        else:
            wmat, bias = self.wmat, self.bias
        kernel = self.kernel
        assert kernel is not None
        n, c, h, w = x4.shape
        g = wmat.shape[0]
        if c != g * wmat.shape[2]:
            raise self.error(f"input has {c} channels, the weight expects {g * wmat.shape[2]}")
        og = wmat.shape[1] // (kernel[0] * kernel[1])
        taps = kernel[0] * kernel[1] * PYTHON_STEP_WORK  # a Python step a tap (conv_transpose2d_gemm)
        self.check_work(x4.size * wmat.shape[1] + taps, f"a {kernel} transposed convolution of {x4.shape}")
        (pt, pl), (oh, ow) = self._geometry(h, w, kernel)
        dtype = np.result_type(x4.dtype, wmat.dtype)
        y = output_buffer(out, self.out_shape(prefix, g * og, oh, ow), dtype)
        y4 = y.reshape(n, g * og, oh, ow)
        for part in batch_chunks(n, g * wmat.shape[1] * h * w):
            conv_transpose2d_gemm(x4[part], wmat, kernel, self.stride, self.dilation, (pt, pl), y4[part])
        if bias is not None:
            y4 += bias.reshape(-1, 1, 1)
        return [y]

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        if self.kernel is None:
            return 0
        og = outputs[0][-self.dims - 1] // self.groups
        return int(np.prod(inputs[0])) * og * self.kernel[0] * self.kernel[1]


def conv_transpose2d_gemm(
    x: np.ndarray,
    wmat: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    pads: tuple[int, int],
    y: np.ndarray,
) -> None:
    """y (N, O, OH, OW) = transposed conv of x (N, C, H, W) with wmat (G, Og·KH·KW, Cg), no bias."""
    n, c, h, w = x.shape
    g = wmat.shape[0]
    kh, kw = kernel
    oh, ow = y.shape[2:]
    pt, pl = pads
    # Every tap's contribution: (N, G, Og·KH·KW, H·W) -> (N, O, KH, KW, H, W).
    cols = scratch("convT.cols", (n, g, wmat.shape[1], h * w), y.dtype)
    np.matmul(wmat, x.reshape(n, g, c // g, h * w), out=cols)
    taps = cols.reshape(n, y.shape[1], kh, kw, h, w)

    sh, sw = stride
    dh, dw = dilation
    if (sh, sw) == kernel and (dh, dw) == (1, 1) and pads == (0, 0) and (oh, ow) == (h * sh, w * sw):
        # Taps that tile the output without overlap (UNet's 2x2 stride-2 up-sampling): every
        # output pixel is one tap of one input pixel, so each tap is copied to its place
        # (3x faster than zeroing and adding; one 6-D transposing copy is slower still).
        for i in range(kh):
            for j in range(kw):
                y[:, :, i::sh, j::sw] = taps[:, :, i, j]
        return
    # Scatter-add the taps on a canvas covering every position they reach, then crop.
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, pt + oh)
    full_w = max((w - 1) * sw + dw * (kw - 1) + 1, pl + ow)
    direct = pt == pl == 0 and (full_h, full_w) == (oh, ow)
    canvas = y if direct else scratch("convT.canvas", (n, y.shape[1], full_h, full_w), y.dtype)
    canvas[...] = 0
    for i in range(kh):
        for j in range(kw):
            canvas[:, :, i * dh : i * dh + (h - 1) * sh + 1 : sh, j * dw : j * dw + (w - 1) * sw + 1 : sw] += taps[
                :, :, i, j
            ]
    if not direct:
        y[...] = canvas[:, :, pt : pt + oh, pl : pl + ow]
