"""Which fast kernel runs a convolution at an input shape: the chooser beside the kernels
(conv_kernels.py, winograd.py, winograd_stride2.py, depthwise.py), kept out of the layer so
that conv.py reads as the convolution's definition.

The choice follows from the layer's geometry and the input shape alone (the cost models that
weigh the candidates live with the kernels), plus which weight layouts the layer already holds
when it is asked to keep to them (`reuse`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .conv_kernels import ROWS, Pads, stride2_tile, winograd_tile
from .depthwise import channels_last_wins, wide_rows_win

Choice = tuple[str, int | str | None]  # (kind, Winograd tile or ROWS or None)


@dataclass(frozen=True)
class ConvGeometry:
    """What the choice reads of a convolution at one input size."""

    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    padding_mode: str
    pads: Pads
    out_hw: tuple[int, int]


@dataclass(frozen=True)
class HeldLayouts:
    """The weight layouts a layer holds: its Winograd U per tile and stride-2 U per tile (in the
    order they were made) and whether it holds the GEMM's weight matrix."""

    winograd: Sequence[int | str] = ()
    stride2: Sequence[int] = ()
    matrix: bool = False

    def any(self) -> bool:
        return bool(self.winograd or self.stride2 or self.matrix)


def choose_kernel(
    x_shape: tuple[int, int, int, int], geo: ConvGeometry, held: HeldLayouts = HeldLayouts(), reuse: bool = False
) -> Choice:
    """("winograd", m or ROWS), ("stride2", m), ("depthwise", None), ("wide", None),
    ("pointwise", None) or ("im2col", None). `reuse`: keep to a Winograd U the layer already
    holds rather than transform its weight again for another tile (a split call's halves run
    at other heights, where the cost model would pick other layouts: ResNet-18 +11 MiB of U);
    a layer that holds none chooses freely."""
    c = x_shape[1]
    dims = (geo.out_channels, geo.kernel, geo.stride, geo.dilation, geo.groups, geo.padding_mode, geo.out_hw)
    m = winograd_tile(x_shape, *dims)
    # reuse binds only a layer that holds a layout already (its weight may be let go of)
    reuse = reuse and held.any()
    if reuse and m is not None and m not in held.winograd:
        m = next(iter(held.winograd), None)
    if m is not None:
        return "winograd", m
    m2 = stride2_tile(x_shape, *dims)
    if reuse and m2 is not None and m2 not in held.stride2:
        # another tile's U, where one is held (any tile computes the same convolution);
        # else im2col, which reads the weight again
        m2 = next(iter(held.stride2), None)
    if m2 is not None:
        return "stride2", m2
    if geo.groups == c == geo.out_channels and geo.padding_mode == "zeros":
        if wide_rows_win(geo.kernel, geo.stride, geo.out_hw):
            return "wide", None
        if channels_last_wins(x_shape, geo.kernel, geo.stride, geo.pads, geo.out_hw):
            return "depthwise", None
    if geo.kernel == (1, 1) and geo.stride == (1, 1) and not any(geo.pads):
        return "pointwise", None
    return "im2col", None


def kernel_label(choice: Choice) -> str:
    """What the app calls a choice ("Winograd F(4x4, 3x3)", "im2col + GEMM", …)."""
    kind, m = choice
    if kind == "winograd":
        return "Winograd F(2, 3) along the rows" if m == ROWS else f"Winograd F({m}x{m}, 3x3)"
    return {
        "stride2": f"Winograd along the rows, stride 2 (m={m})",
        "depthwise": "depthwise, channels last",
        "wide": "depthwise, wide rows",
        "pointwise": "1x1: one GEMM",
        "im2col": "im2col + GEMM",
    }[kind]
