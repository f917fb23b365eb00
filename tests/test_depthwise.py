"""Depthwise convolutions computed channels last or as wide rows (layers/depthwise.py)
against the readable reference, and the rules that pick them over im2col.

The reference is checked against PyTorch's outputs by the exported conv cases and the
bundled MobileNetV3 (whose 5x5 depthwise layers on 3x3 and 6x6 maps take this kernel)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper_core.layers.conv_kernels import Im2col
from kuiper_core.layers.conv_reference import conv2d_reference
from kuiper_core.layers.conv_choice import ConvGeometry, channels_last_wins, wide_rows_win
from kuiper_core.layers.depthwise import DepthwiseChannelsLast, DepthwiseWideRows, Geometry
from kuiper_core.layers.kernel_costs import DEFAULT_CHOICE, DEFAULT_COSTS, KernelCosts
from kuiper_core.layers.windows import out_size
from layer_testing import assert_close
from test_conv_kernels import conv_layer


@st.composite
def depthwise_cases(draw):
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, dil[0] * (k[0] - 1) + 1 - pads[0] - pads[1]), 12))
    w = draw(st.integers(max(1, dil[1] * (k[1] - 1) + 1 - pads[2] - pads[3]), 12))
    return dict(
        x_shape=(draw(st.integers(1, 3)), draw(st.integers(1, 40)), h, w),
        k=k,
        stride=stride,
        dil=dil,
        pads=pads,
        bias=draw(st.booleans()),
        relu=draw(st.booleans()),
        dtype=draw(st.sampled_from([np.float32, np.float64])),
        seed=draw(st.integers(0, 1000)),
    )


def run_kernel(case: dict, wide: bool = False, costs: KernelCosts = DEFAULT_COSTS) -> tuple[np.ndarray, np.ndarray]:
    """(the kernel's output, the reference's) for a case; `wide`: DepthwiseWideRows (stride 1)
    with `costs`' channel blocks."""
    rng = np.random.default_rng(case["seed"])
    n, c, h, w = case["x_shape"]
    dtype = np.dtype(case["dtype"])
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((c, 1, *case["k"])).astype(dtype)
    b = rng.standard_normal(c).astype(dtype) if case["bias"] else None
    pads, stride, dil = case["pads"], case["stride"], case["dil"]
    out_hw = (
        out_size(h, case["k"][0], stride[0], pads[0], pads[1], dil[0]),
        out_size(w, case["k"][1], stride[1], pads[2], pads[3], dil[1]),
    )
    geo = Geometry(case["k"], stride, dil, pads, x.shape, out_hw)
    kernel = (
        DepthwiseWideRows(wt, b, geo, dtype, case["relu"], costs)
        if wide
        else DepthwiseChannelsLast(wt, b, geo, dtype, case["relu"])
    )
    y = np.full((n, c, *out_hw), np.nan, dtype)
    kernel.run(x, y)
    kernel.run(x * 2, y)  # a second call reuses the buffers: nothing of the first is left
    ref = conv2d_reference(x * 2, wt, b, stride=stride, pads=pads, dilation=dil, groups=c)
    return y, np.maximum(ref, 0) if case["relu"] else ref


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depthwise_cases())
def test_channels_last_matches_reference(case: dict) -> None:
    y, ref = run_kernel(case)
    assert y.dtype == np.dtype(case["dtype"])
    assert_close(y, ref, f"depthwise {case}")


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depthwise_cases(), st.integers(1, 40))
def test_wide_rows_match_reference(case: dict, block: int) -> None:
    case["stride"] = (1, 1)
    # channel blocks of any size, the last one short
    costs = replace(DEFAULT_COSTS, wide_block_elements=block * case["x_shape"][3] * 3)
    y, ref = run_kernel(case, wide=True, costs=costs)
    assert y.dtype == np.dtype(case["dtype"])
    assert_close(y, ref, f"depthwise wide rows {case}")


# MobileNetV2's and EfficientNet-B0's depthwise convs on big maps (one thread, 2026-11-27,
# against the faster of the others): wide rows from 28x28 outputs, 3x3, stride 1.
BIG_MAP_DEPTHWISE = [
    ((3, 3), (1, 1), (112, 112), True),  # (32, 112x112): 1.08 vs im2col's 1.94 ms
    ((3, 3), (1, 1), (56, 56), True),  # (144, 56x56): 1.77 vs channels last's 2.06 ms
    ((3, 3), (1, 1), (28, 28), True),  # (192, 28x28): 0.50 vs channels last's 0.56 ms (bufsize 2048)
    ((3, 3), (1, 1), (24, 24), False),  # (72, 24x24): channels last 0.17 vs 0.21 ms
    ((5, 5), (1, 1), (56, 56), False),  # (144, 56x56) 5x5: channels last 2.76 vs 3.08 ms
    ((3, 3), (2, 2), (56, 56), False),  # (96, 112x112) stride 2: im2col 2.15 vs 2.42 ms
]


def depthwise(
    kernel: tuple[int, int], stride: tuple[int, int], pads: tuple[int, ...], out_hw: tuple[int, int], c: int = 1
) -> ConvGeometry:
    """A depthwise convolution's geometry as the chooser reads it."""
    return ConvGeometry(c, kernel, stride, (1, 1), c, "zeros", pads, out_hw)  # type: ignore[arg-type]


@pytest.mark.parametrize("kernel, stride, out_hw, expected", BIG_MAP_DEPTHWISE)
def test_wide_rows_are_chosen_for_big_maps(kernel, stride, out_hw, expected) -> None:
    assert wide_rows_win(depthwise(kernel, stride, (0, 0, 0, 0), out_hw), DEFAULT_COSTS) == expected


# Big maps with more taps, where im2col's columns spill out of L2 (one thread, 2026-11-27):
# channels last, not im2col. (x_shape, kernel, stride, pads, out_hw)
SPILLING_IM2COL = [
    ((1, 96, 56, 56), (7, 7), (1, 1), (3, 3, 3, 3), (56, 56)),  # ConvNeXt-T stage 1: 3.3 vs 9.1-10.1 ms
    ((1, 144, 56, 56), (5, 5), (1, 1), (2, 2, 2, 2), (56, 56)),  # 2.8 vs 6.4-7.0 ms
    ((1, 144, 56, 56), (3, 3), (2, 2), (1, 1, 1, 1), (28, 28)),  # EfficientNet-B0: 0.75 vs 0.97 ms
]


@pytest.mark.parametrize("x_shape, kernel, stride, pads, out_hw", SPILLING_IM2COL)
def test_channels_last_beats_im2col_whose_columns_spill(x_shape, kernel, stride, pads, out_hw) -> None:
    assert channels_last_wins(x_shape, depthwise(kernel, stride, pads, out_hw, x_shape[1]), DEFAULT_COSTS)


def test_layer_picks_wide_rows_on_a_big_map_and_matches_reference() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 24, 60, 57)).astype(np.float32)
    wt = rng.standard_normal((24, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    layer = conv_layer(wt, b, x.shape, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=24)
    assert isinstance(layer.kernels.kernel(x.shape, np.dtype(np.float32)), DepthwiseWideRows)
    assert layer.kernel_name([x.shape]) == "depthwise, wide rows"
    (y,) = layer.forward([x], [None])
    assert_close(y, conv2d_reference(x, wt, b, stride=(1, 1), pads=(1, 1, 1, 1), groups=24), "layer")
    out = np.empty_like(y)
    layer.prepare_with_relu([x], [out])([x], [out])
    assert_close(out, np.maximum(y, 0), "layer with ReLU")


# MobileNetV3's depthwise convs (1 thread; channels last as einsum over the strided taps;
# bench/bench_convs.py --param measures them): (x_shape, kernel, stride, pads,
# out_hw, channels last?)
MOBILENET_DEPTHWISE = [
    ((1, 576, 3, 3), (5, 5), (1, 1), (2, 2, 2, 2), (3, 3), True),  # 21 vs 147 us
    ((1, 240, 6, 6), (5, 5), (1, 1), (2, 2, 2, 2), (6, 6), True),  # 35 vs 119 us
    ((1, 288, 6, 6), (5, 5), (2, 2), (2, 2, 2, 2), (3, 3), True),  # 15 vs 111 us
    ((1, 96, 12, 12), (5, 5), (2, 2), (2, 2, 2, 2), (6, 6), True),  # 25 vs 77 us
    ((1, 16, 48, 48), (3, 3), (1, 1), (1, 1, 1, 1), (48, 48), False),  # im2col's whole rows: 98 vs 340 us
    ((1, 72, 24, 24), (3, 3), (1, 1), (1, 1, 1, 1), (24, 24), False),  # 134 vs 140 us: a tie
    ((1, 128, 12, 12), (3, 3), (1, 1), (1, 1, 1, 1), (12, 12), True),  # a miss: 55 vs im2col's 46 us
    ((1, 512, 1, 50), (1, 5), (1, 1), (0, 0, 2, 2), (1, 50), False),  # 1-D: im2col 44 vs 64 us
]


@pytest.mark.parametrize("x_shape, kernel, stride, pads, out_hw, expected", MOBILENET_DEPTHWISE)
def test_channels_last_is_chosen_for_small_maps_with_many_channels(
    x_shape, kernel, stride, pads, out_hw, expected
) -> None:
    assert channels_last_wins(x_shape, depthwise(kernel, stride, pads, out_hw, x_shape[1]), DEFAULT_COSTS) == expected


@pytest.mark.parametrize("x_shape, kernel, stride, pads, out_hw, expected", MOBILENET_DEPTHWISE[::3])
def test_layer_picks_the_depthwise_kernel_and_matches_reference(
    x_shape, kernel, stride, pads, out_hw, expected
) -> None:
    rng = np.random.default_rng(1)
    c = x_shape[1]
    x = rng.standard_normal(x_shape).astype(np.float32)
    wt = rng.standard_normal((c, 1, *kernel)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    layer = conv_layer(wt, b, x.shape, stride=list(stride), padding=[pads[0], pads[2]], dilation=[1, 1], groups=c)
    picked = layer.kernels.kernel(x.shape, np.dtype(np.float32))
    assert isinstance(picked, DepthwiseChannelsLast if expected else Im2col)
    (y,) = layer.forward([x], [None])
    assert_close(y, conv2d_reference(x, wt, b, stride=stride, pads=pads, groups=c), "layer")
    # A fused ReLU (the prepared forward's) as well
    out = np.empty_like(y)
    layer.prepare_with_relu([x], [out])([x], [out])
    assert_close(out, np.maximum(y, 0), "layer with ReLU")


def test_other_padding_modes_and_grouped_convs_stay_im2col() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 576, 3, 3)).astype(np.float32)
    wt = rng.standard_normal((576, 1, 5, 5)).astype(np.float32)
    layer = conv_layer(wt, None, x.shape, stride=[1, 1], padding=[2, 2], dilation=[1, 1], groups=576)
    layer.padding_mode = "reflect"
    assert isinstance(layer.kernels.make(x.shape, np.dtype(np.float32), DEFAULT_CHOICE), Im2col)
    # two input channels per group: not depthwise
    wt2 = rng.standard_normal((288, 2, 5, 5)).astype(np.float32)
    layer2 = conv_layer(wt2, None, x.shape, stride=[1, 1], padding=[2, 2], dilation=[1, 1], groups=288)
    assert isinstance(layer2.kernels.kernel(x.shape, np.dtype(np.float32)), Im2col)
