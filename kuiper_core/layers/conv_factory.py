"""A convolution layer's fast side: the kernel conv_choice.py chooses for an input shape, made
from the weight laid out the way that kernel reads it, and a call halved for the split
executor. conv.py holds the layer's definition (params, weights, shapes, the plain reference)
and asks a `ConvKernels` of its own for kernels.

Weight layouts are made once, when the first kernel that reads them is made (the first run at
an input shape): the GEMM matrix with its bias column, Winograd's U per tile, the stride-2
kernel's U. Only those layouts are kept: the weight itself is asked of the layer when a kernel
needs it, so the graph may let go of it (Attribute.release). A kernel (buffers, views) is made
once per input shape, thread and choice inputs (kernel_costs.ChoiceInputs).
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any, Protocol

import numpy as np

from ..errors import ModelError
from ..limits import PYTHON_STEP_WORK
from . import kernel_costs
from .conv_choice import Choice, ConvGeometry, HeldLayouts, choose_kernel, kernel_label
from .conv_kernels import ConvKernel, Im2col, Pads, Pointwise
from .depthwise import DepthwiseChannelsLast, DepthwiseWideRows, Geometry
from .halves import SplitRequest, halves_call, input_rows, split_rows
from .kernel_costs import ChoiceInputs
from .registry import Prepared
from .winograd import WinogradConv, WinogradRowsConv, transform_weights, transform_weights_rows
from .winograd_stride2 import Stride2RowsConv, transform_weights_stride2


class ConvDefinition(Protocol):
    """What the kernels read of a convolution's definition (layers/conv.Convolution): named
    here so the factory does not import the layer that imports it."""

    in_channels: int
    out_channels: int
    groups: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding_mode: str
    bias_data: np.ndarray | None
    weight_dtype: np.dtype | None

    def module_weight(self) -> np.ndarray: ...
    def weight_matrix(self, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray: ...
    def kernel_hw(self) -> tuple[int, int]: ...
    def geometry(
        self, h: int, w: int, kernel: tuple[int, int], pads_of_half: Pads | None = None
    ) -> tuple[Pads, tuple[int, int]]: ...
    def out_shape(self, prefix: tuple[int, ...], channels: int, oh: int, ow: int) -> tuple[int, ...]: ...
    def lift(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]: ...
    def check_size(self, shape: Any, what: str = "the output") -> int: ...
    def check_work(self, n: int, what: str) -> int: ...
    def error(self, message: str) -> ModelError: ...


# Choice inputs a thread keeps kernels for at once (a graph's count and the one-thread halves').
MAX_CHOICES = 4


class ConvKernels:
    """The kernels of one nn.Conv* layer (`conv`: its definition) and the weight layouts they read."""

    def __init__(self, conv: ConvDefinition) -> None:
        self.conv = conv
        self.matrix: np.ndarray | None = None  # (G, Og, Cg·KH·KW + 1): the weight with its bias column
        self.winograd_weights: dict[int | str, np.ndarray] = {}  # m -> U (t*t, O, C); ROWS -> (4, O, 3C)
        self.stride2_weights: dict[int, np.ndarray] = {}  # m -> the stride-2 rows kernel's U
        self._local = threading.local()  # this thread's kernels by choice inputs, then input shape

    def gemm_weights(self, bias_column: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """The im2col/pointwise GEMM's left operand (G, Og, Cg·KH·KW) and the bias left to add
        after it: with `bias_column`, the bias rides in the GEMM as an extra column (a copy
        of the weight, made once); else the matrix is a view of the weight itself."""
        conv = self.conv
        if not bias_column or conv.bias_data is None:
            weight = conv.module_weight()
            return weight.reshape(conv.groups, weight.shape[0] // conv.groups, -1), conv.bias_data
        if self.matrix is None:  # the weight is read only to make it (it may have been let go of)
            self.matrix = conv.weight_matrix(conv.module_weight(), conv.bias_data)
        return self.matrix, None

    def kernel(self, x_shape: tuple[int, int, int, int], dtype: np.dtype) -> ConvKernel:
        """This thread's kernel for an input shape under the running call's choice inputs, made
        on first use."""
        inputs = kernel_costs.current()
        by_choice: dict | None = getattr(self._local, "by_choice", None)
        if by_choice is None or (inputs not in by_choice and len(by_choice) >= MAX_CHOICES):
            by_choice = self._local.by_choice = {}
        plans = by_choice.setdefault(inputs, {})
        key = x_shape + (dtype.str,)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = self.make(x_shape, dtype, inputs)
        return plan

    def choose(self, x_shape: tuple[int, int, int, int], inputs: ChoiceInputs, reuse: bool = False) -> Choice:
        """Which kernel runs this input shape (conv_choice.choose_kernel); `reuse`: keep to the
        weight layouts held."""
        conv = self.conv
        kernel = conv.kernel_hw()
        pads, out_hw = conv.geometry(x_shape[2], x_shape[3], kernel)
        geo = ConvGeometry(
            conv.out_channels, kernel, conv.stride, conv.dilation, conv.groups, conv.padding_mode, pads, out_hw
        )
        held = HeldLayouts(tuple(self.winograd_weights), tuple(self.stride2_weights), self.matrix is not None)
        return choose_kernel(x_shape, geo, inputs, held, reuse)

    def kernel_name(self, x_shape: tuple[int, int, int, int]) -> str:
        """What the app calls the kernel this shape runs under the current choice inputs."""
        return kernel_label(self.choose(x_shape, kernel_costs.current()))

    def make(
        self,
        x_shape: tuple[int, int, int, int],
        dtype: np.dtype,
        inputs: ChoiceInputs,
        relu: bool = False,
        given: tuple[Pads, Choice] | None = None,
        channels: slice = slice(None),
        reuse: bool = False,
    ) -> ConvKernel:
        """A kernel of its own (buffers the caller owns). relu: it also applies a ReLU fused
        into it (prepare_with_relu). given: the pads and the kernel, chosen by the caller (a
        half of the rows: `split_call`; a bench timing each candidate); channels: the output channels it computes (groups
        == 1: their rows of U, of the GEMM's weight matrix and of the bias, all views); reuse:
        keep to the weight layouts held (prepared for the split executor)."""
        conv = self.conv
        kernel_hw = conv.kernel_hw()
        n, c, h, w = x_shape
        if c != conv.in_channels:
            raise conv.error(f"input has {c} channels, expected in_channels={conv.in_channels}")
        pads, out_hw = conv.geometry(h, w, kernel_hw, given[0] if given else None)
        # Before any kernel allocates its buffers (Winograd's padded input was 95 GiB for padding=20000)
        conv.check_size((n, c, h + pads[0] + pads[1], w + pads[2] + pads[3]), "the padded input")
        conv.check_size((n, conv.out_channels) + tuple(out_hw))
        taps = kernel_hw[0] * kernel_hw[1]  # each a Python step of some kernels (depthwise, im2col's copies)
        work = n * conv.out_channels * out_hw[0] * out_hw[1] * (c // conv.groups) * taps + taps * PYTHON_STEP_WORK
        conv.check_work(work, f"a {kernel_hw} convolution of {x_shape}")
        kind, m = given[1] if given else self.choose(x_shape, inputs, reuse)
        costs = inputs.costs
        bias = None if conv.bias_data is None else conv.bias_data[channels]
        if kind == "winograd":  # m: the tile, or ROWS
            assert m is not None
            u = self.winograd_weights.get(m)
            if u is None:
                weight = conv.module_weight()
                u = transform_weights(weight, m) if isinstance(m, int) else transform_weights_rows(weight)
                self.winograd_weights[m] = u
            u = u[:, channels].astype(dtype, copy=False)
            if isinstance(m, int):
                return WinogradConv(u, bias, m, x_shape, pads, dtype, relu, costs)
            return WinogradRowsConv(u, bias, x_shape, pads, dtype, relu, costs)
        if kind == "stride2":
            assert isinstance(m, int)
            if m not in self.stride2_weights:
                self.stride2_weights[m] = transform_weights_stride2(conv.module_weight(), m)
            u = self.stride2_weights[m][:, channels].astype(dtype, copy=False)
            return Stride2RowsConv(u, bias, m, kernel_hw[0], x_shape, pads, dtype, relu, costs)
        if kind in ("depthwise", "wide"):
            geo = Geometry(kernel_hw, conv.stride, conv.dilation, pads, x_shape, out_hw)
            if kind == "depthwise":
                return DepthwiseChannelsLast(conv.module_weight(), conv.bias_data, geo, dtype, relu)
            return DepthwiseWideRows(conv.module_weight(), conv.bias_data, geo, dtype, relu, costs)
        if kind == "pointwise":
            wmat, _ = self.gemm_weights(bias_column=False)  # the bias after the GEMM: `bias`
            return Pointwise(wmat[:, channels].astype(dtype, copy=False), bias, x_shape, relu)
        # The bias as a GEMM column saves a pass over the output; worth a weight copy only
        # while the weight is smaller than the output (not for ResNet's 512-channel convs),
        # or small anyway (deep1500's 8x8 convs: one NumPy call less).
        k = c // conv.groups * kernel_hw[0] * kernel_hw[1]
        # (with reuse, the matrix with its bias column where it is held: the weight itself may
        # have been let go of, and reading it again is what reuse avoids)
        held = reuse and self.matrix is not None
        wmat, after = self.gemm_weights(
            bias_column=held or k < out_hw[0] * out_hw[1] or conv.out_channels * (k + 1) <= costs.bias_column_max_weight
        )
        return Im2col(
            wmat[:, channels].astype(dtype, copy=False),
            kernel_hw,
            conv.stride,
            conv.dilation,
            pads,
            conv.padding_mode,
            x_shape,
            out_hw,
            dtype,
            bias_after=None if after is None else bias,
            relu=relu,
            costs=costs,
        )

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], relu: bool, split: SplitRequest | None
    ) -> Prepared | None:
        """The layer's prepared call (registry.Layer.prepare) on these arrays, halved where
        `split` asks and the work is big enough; None where the arrays do not fit."""
        conv = self.conv
        if conv.weight_dtype is None:
            return None
        x4, prefix = conv.lift(inputs[0])
        dtype = np.result_type(x4.dtype, conv.weight_dtype)
        pads, (oh, ow) = conv.geometry(x4.shape[2], x4.shape[3], conv.kernel_hw())
        o = conv.out_channels
        y = out[0]
        if x4.dtype != dtype or y.dtype != dtype or y.shape != conv.out_shape(prefix, o, oh, ow):
            return None
        choice = kernel_costs.current()
        if split is not None:
            halves = self.split_call(split, choice, inputs, out, x4.shape, dtype, relu, pads, (oh, ow))
            if halves is not None:
                return halves
        # A kernel of its own (not this thread's cached one): the caller owns its buffers.
        kernel = self.make(x4.shape, dtype, choice, relu, reuse=split is not None)
        return partial(_run_kernel, kernel, x4.shape, (x4.shape[0], o, oh, ow))

    def split_call(
        self,
        split: SplitRequest,
        choice_inputs: ChoiceInputs,
        inputs: list[np.ndarray],
        out: list[np.ndarray],
        x_shape: tuple[int, int, int, int],
        dtype: np.dtype,
        relu: bool,
        pads: Pads,
        out_hw: tuple[int, int],
    ) -> Prepared | None:
        """The call as two kernels on two cores (halves.py), the kernel the whole shape chose
        for both; None where a half is too little work (split.sizes). Two ways to halve:

        - output channels (groups == 1), where the weights outweigh the input (conv_channels_over_input:
          ResNet-18 from layer 2 on): each half reads half the weights and does the whole
          input side (gather, transform) again;
        - output rows, elsewhere: each half reads the input rows its rows need (a halo of
          kernel rows both read) with its own zero padding, split at a whole Winograd tile."""
        conv = self.conv
        n, c, h, w = x_shape
        (oh, ow), (kh, kw), o = out_hw, conv.kernel_hw(), conv.out_channels
        weights = o * c // conv.groups * kh * kw
        # A grouped convolution's multiply-adds are dearer (per-channel passes, short GEMMs).
        sizes = split.sizes
        worth = 1 if conv.groups == 1 else sizes.grouped_mac_worth
        if conv.padding_mode != "zeros" or worth * weights * oh * ow * n < 2 * sizes.min_half_work:
            return None
        choice = self.choose(x_shape, choice_inputs, reuse=True)
        make = partial(self.make, dtype=dtype, inputs=choice_inputs, relu=relu, reuse=True)
        halves: list[tuple[slice, tuple[slice, ...], ConvKernel]] = []  # input rows, output part, kernel
        if conv.groups == 1 and o >= 2 and weights > sizes.conv_channels_over_input * n * c * h * w:
            for chans in (slice(0, o // 2), slice(o // 2, o)):
                halves.append((slice(None), (slice(None), chans), make(x_shape, given=(pads, choice), channels=chans)))
        elif oh >= 2:
            unit = choice[1] if choice[0] == "winograd" and isinstance(choice[1], int) else 1
            cut, keff = split_rows(oh, unit), conv.dilation[0] * (kh - 1) + 1
            for r0, r1 in ((0, cut), (cut, oh)):
                (lo, hi), (top, bottom) = input_rows((r0, r1), h, keff, conv.stride[0], pads[0])
                kernel = make((n, c, hi - lo, w), given=((top, bottom) + pads[2:], choice))
                halves.append((slice(lo, hi), (slice(None), slice(None), slice(r0, r1)), kernel))
        else:
            return None
        # Bound once: asked to split, the arrays are the split forward's fixed buffers.
        x, y = inputs[0].reshape(x_shape), out[0].reshape((n, o, oh, ow))
        first, second = (partial(k.run, x[:, :, rows], y[part]) for rows, part, k in halves)
        return halves_call(split, first, second, inputs, out)


def given_weight_kernel(
    conv: ConvDefinition,
    wmat: np.ndarray,
    pads: Pads,
    x_shape: tuple[int, int, int, int],
    out_hw: tuple[int, int],
    dtype: np.dtype,
) -> ConvKernel:
    """F.conv*'s kernel: im2col on the weight matrix the call was given (laid out per call)."""
    kernel_hw = conv.kernel_hw()
    taps = kernel_hw[0] * kernel_hw[1] * PYTHON_STEP_WORK
    conv.check_work(x_shape[0] * out_hw[0] * out_hw[1] * wmat.size + taps, f"a {kernel_hw} convolution of {x_shape}")
    costs = kernel_costs.current().costs
    return Im2col(
        wmat, kernel_hw, conv.stride, conv.dilation, pads, conv.padding_mode, x_shape, out_hw, dtype, costs=costs
    )


def _run_kernel(
    kernel: ConvKernel,
    x_shape: tuple[int, ...],
    y_shape: tuple[int, ...],
    inputs: list[np.ndarray],
    out: list[np.ndarray],
) -> None:
    kernel.run(inputs[0].reshape(x_shape), out[0].reshape(y_shape))


__all__ = ["ConvKernels", "given_weight_kernel"]
