"""Which fast kernel runs a convolution at an input shape: the chooser and its cost model, kept
apart from the kernels (conv_kernels.py, winograd.py, winograd_stride2.py, depthwise.py) and
from the layer (conv.py: the convolution's definition).

Each candidate's time is estimated from the shapes and the fitted per-operation costs of a
`KernelCosts` value (kernel_costs.py: each field says which bench fits it) and the cheapest
taken. The choice follows from the layer's geometry, the input shape, those costs and the BLAS
thread count the call runs at (`ChoiceInputs`), plus which weight layouts the layer already
holds when it is asked to keep to them (`reuse`). Not Winograd F(4,3) nor stride-2 m = 4:
their float32 error against float64 was over twice PyTorch's (tools/precision_convs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .conv_kernels import Pads
from .kernel_costs import ChoiceInputs, KernelCosts
from .winograd_stride2 import phase_points

Choice = tuple[str, int | str | None]  # (kind, Winograd tile or ROWS or None)

# winograd_tile's answer for F(2,3) along the rows only (WinogradRowsConv).
ROWS = "rows"
# The 2-D Winograd tiles and stride-2 tiles weighed (precision: module docstring).
WINOGRAD_TILES = (2,)
STRIDE2_TILES = (2,)
STRIDE2_KERNELS = (3, 4, 5, 6, 7)  # the square kernels Stride2RowsConv computes


def _cold(costs: KernelCosts, weights: int) -> float:
    """Reading the weights beyond what the cache keeps, once a call."""
    return costs.cold_weight * max(0, weights - costs.cached_weights)


def im2col_cost(costs: KernelCosts, n: int, c: int, o: int, oh: int, ow: int, taps: int) -> float:
    p = n * oh * ow
    weights = taps * c * o
    return (
        costs.gemm_mac * weights * p
        + costs.col_copy * taps * c * p
        + costs.gemm_weight * weights
        + _cold(costs, weights)
        + costs.call
    )


def winograd_cost(costs: KernelCosts, m: int, n: int, c: int, o: int, oh: int, ow: int) -> float:
    t = m + 2
    tiles = n * -(-oh // m) * -(-ow // m)
    return (
        costs.wino_mac * t * t * o * c * tiles
        + costs.wino_weight * t * t * o * c
        + _cold(costs, t * t * o * c)
        + costs.wino_in * tiles * c * t * t
        + costs.wino_out * tiles * o * m * m
        + costs.wino_fixed
    )


def winograd_rows_cost(costs: KernelCosts, n: int, c: int, o: int, oh: int, ow: int) -> float:
    """WinogradRowsConv: four GEMMs with K = 3C over N*OH*ceil(OW/2) columns; its input
    side is copies and flat adds (priced as im2col's column copies), its output side as
    WinogradConv's."""
    cols = n * oh * -(-ow // 2)
    u = 12 * o * c
    return (
        costs.rows_mac * 12 * o * c * cols
        + costs.wino_weight * u
        + _cold(costs, u)
        + costs.col_copy * (8 * c * n * (oh + 2) * -(-ow // 2) + 12 * c * cols)
        + costs.wino_out * o * n * oh * ow
        + costs.wino_fixed
    )


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


def winograd_tile(x_shape: tuple[int, int, int, int], geo: ConvGeometry, costs: KernelCosts) -> int | str | None:
    """m of the Winograd F(m, 3) that beats im2col for this convolution, ROWS for F(2,3)
    along the rows only, or None.

    A U bigger than costs.winograd_free_weights must be at most twice the weight and at most
    costs.winograd_max_weights (memory: ResNet-18's 512-channel layers then take F(2,3) along
    the rows, U 1.33x the weight, where the 2-D F(2,3)'s would be 1.8x)."""
    n, c = x_shape[:2]
    o = geo.out_channels
    if (geo.kernel, geo.stride, geo.dilation, geo.groups, geo.padding_mode) != ((3, 3), (1, 1), (1, 1), 1, "zeros"):
        return None
    if min(c, o) < costs.winograd_min_channels:
        return None
    raw = 9 * c * o
    sizes: dict[int | str, int] = {m: (m + 2) ** 2 * c * o for m in WINOGRAD_TILES}
    sizes[ROWS] = 12 * c * o
    estimates = {
        m: winograd_cost(costs, m, n, c, o, *geo.out_hw)
        if isinstance(m, int)
        else winograd_rows_cost(costs, n, c, o, *geo.out_hw)  # m is ROWS
        for m, u in sizes.items()
        if u <= costs.winograd_free_weights or (u <= 2 * raw and u <= costs.winograd_max_weights)
    }
    if not estimates:
        return None
    best = min(estimates, key=estimates.__getitem__)
    return best if estimates[best] < im2col_cost(costs, n, c, o, *geo.out_hw, 9) else None


def stride2_cost(costs: KernelCosts, m: int, k: int, n: int, c: int, o: int, oh: int, ow: int) -> float:
    """Stride2RowsConv's estimated time: the GEMMs, the gather and B^T (X and the even/odd
    operands), [A^T | ...] and the scatter, reading U."""
    ne, no = phase_points(m, k)
    shared = k // 2 == 1  # one odd tap (3x3): no odd transform, one U for its m points
    tw = -(-ow // m)
    cols = n * oh * tw
    kc = k * c
    span = max(2 * ne - 1, 2 * no)
    u = (ne + (1 if shared else no)) * o * kc
    weights = costs.wino_weight * u + _cold(costs, u)
    if shared:  # the gathered columns and B^T of the even ones
        return (
            costs.s2_mac * (ne + no) * o * kc * cols
            + costs.s2_in * (span + ne) * kc * cols
            + costs.s2_out * (ne + no + m) * o * cols
            + weights
            + costs.s2_fixed
        )
    # rows first: each input row's tiles and their transform, then the operands copied
    moved = (span + ne + no) * c * n * (2 * oh + k - 2) * tw + (ne + no) * kc * cols
    return (
        costs.s2r_mac * (ne + no) * o * kc * cols
        + costs.s2r_in * moved
        + costs.s2r_out * (ne + no + m) * o * cols
        + weights
        + costs.s2r_fixed
    )


def stride2_weights(m: int, k: int, c: int, o: int) -> int:
    """Elements of Stride2RowsConv's U."""
    ne, no = phase_points(m, k)
    return (ne + (1 if k // 2 == 1 else no)) * o * k * c


def stride2_tile(x_shape: tuple[int, int, int, int], geo: ConvGeometry, inputs: ChoiceInputs) -> int | None:
    """m of the Stride2RowsConv that beats im2col for this convolution, or None; only while
    the BLAS runs one thread (inputs.threads): with two, its small GEMMs thread worse than
    im2col's one big GEMM (measured in the model: ResNet-18 1-4 % slower at two threads).

    A U bigger than costs.winograd_free_weights must be at most 1.5x the weight (3x3: m = 2)
    and within winograd_tile's totals."""
    costs = inputs.costs
    n, c = x_shape[:2]
    k, o = geo.kernel[0], geo.out_channels
    if (
        (geo.stride, geo.dilation, geo.groups, geo.padding_mode) != ((2, 2), (1, 1), 1, "zeros")
        or geo.kernel != (k, k)
        or k not in STRIDE2_KERNELS
    ):
        return None
    min_width = costs.stride2_min_width if k == 3 else costs.stride2_rows_first_min_width
    if geo.out_hw[1] < min_width or inputs.threads > 1:
        return None
    raw = k * k * c * o
    estimates = {
        m: stride2_cost(costs, m, k, n, c, o, *geo.out_hw)
        for m in STRIDE2_TILES
        if (u := stride2_weights(m, k, c, o)) <= costs.winograd_free_weights
        or (2 * u <= 3 * raw and u <= costs.winograd_max_weights)
    }
    if not estimates:
        return None
    best = min(estimates, key=estimates.__getitem__)
    return best if estimates[best] < costs.stride2_margin * im2col_cost(costs, n, c, o, *geo.out_hw, k * k) else None


def depthwise_costs(x_shape: tuple[int, int, int, int], geo: ConvGeometry, costs: KernelCosts) -> tuple[float, float]:
    """(Im2col's, DepthwiseChannelsLast's) estimated time for a depthwise convolution."""
    n, c, h, w = x_shape
    oh, ow = geo.out_hw
    taps = geo.kernel[0] * geo.kernel[1]
    wide = geo.stride == (1, 1)  # Im2col's wide rows: OH x padded width columns per tap
    cols = oh * (w + geo.pads[2] + geo.pads[3]) if wide else oh * ow
    columns = n * c * (taps + 1) * cols
    spill = costs.dw_im2col_spill_factor if columns > costs.dw_im2col_spill_elements else 1.0
    im2col = (
        costs.dw_im2col_call * n * c
        + costs.dw_im2col_column * spill * columns
        + (0 if wide else costs.dw_im2col_row * n * c * taps * oh)
        + costs.dw_im2col_fixed
    )
    last = (
        costs.dw_last_column * n * oh * ow * taps * c
        + costs.dw_last_run * n * oh * ow * taps
        + costs.dw_last_input * n * c * h * w
        + costs.dw_last_fixed
    )
    return im2col, last


def channels_last_wins(x_shape: tuple[int, int, int, int], geo: ConvGeometry, costs: KernelCosts) -> bool:
    """Whether DepthwiseChannelsLast beats Im2col for this depthwise convolution (zero padding).

    Only for 2-D maps, where the models were fitted: on 1-D ones (H = 1) im2col's rows are
    the whole signal and won 5 of 6 measured convs."""
    if min(geo.out_hw) < 2:
        return False
    im2col, last = depthwise_costs(x_shape, geo, costs)
    return last < costs.dw_margin * im2col


def wide_rows_win(geo: ConvGeometry, costs: KernelCosts) -> bool:
    """Whether DepthwiseWideRows runs this depthwise convolution (zero padding): stride 1,
    small kernels, big maps (on smaller maps and 5x5 kernels channels last stays ahead)."""
    return (
        geo.stride == (1, 1)
        and geo.kernel[0] * geo.kernel[1] <= costs.wide_max_taps
        and geo.out_hw[0] * geo.out_hw[1] >= costs.wide_min_output
        and min(geo.out_hw) >= 2
    )


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
    x_shape: tuple[int, int, int, int],
    geo: ConvGeometry,
    inputs: ChoiceInputs,
    held: HeldLayouts = HeldLayouts(),
    reuse: bool = False,
) -> Choice:
    """("winograd", m or ROWS), ("stride2", m), ("depthwise", None), ("wide", None),
    ("pointwise", None) or ("im2col", None). `reuse`: keep to a Winograd U the layer already
    holds rather than transform its weight again for another tile (a split call's halves run
    at other heights, where the cost model would pick other layouts: ResNet-18 +11 MiB of U);
    a layer that holds none chooses freely."""
    c = x_shape[1]
    m = winograd_tile(x_shape, geo, inputs.costs)
    # reuse binds only a layer that holds a layout already (its weight may be let go of)
    reuse = reuse and held.any()
    if reuse and m is not None and m not in held.winograd:
        m = next(iter(held.winograd), None)
    if m is not None:
        return "winograd", m
    m2 = stride2_tile(x_shape, geo, inputs)
    if reuse and m2 is not None and m2 not in held.stride2:
        # another tile's U, where one is held (any tile computes the same convolution);
        # else im2col, which reads the weight again
        m2 = next(iter(held.stride2), None)
    if m2 is not None:
        return "stride2", m2
    if geo.groups == c == geo.out_channels and geo.padding_mode == "zeros":
        if wide_rows_win(geo, inputs.costs):
            return "wide", None
        if channels_last_wins(x_shape, geo, inputs.costs):
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
