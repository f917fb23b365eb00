"""Stride2RowsConv (winograd_stride2.py): stride-2 convolutions as Winograd along the rows on
the input's column phases, checked against the reference convolution (conv_reference.py);
its Toom-Cook transforms against a direct correlation; the cost model's choice."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper_core.layers.conv_choice import ConvGeometry, stride2_tile
from kuiper_core.layers.kernel_costs import DEFAULT_COSTS, ChoiceInputs
from kuiper_core.layers.conv_reference import conv2d_reference
from kuiper_core.layers.winograd_stride2 import Stride2RowsConv, toom_cook, transform_weights_stride2
from layer_testing import assert_close
from test_conv_kernels import arrays, conv_layer, relu_of

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F32 = np.dtype(np.float32)


@pytest.mark.parametrize("m, r", [(2, 1), (2, 2), (4, 2), (7, 2), (4, 3), (4, 4), (6, 4), (3, 3)])
def test_toom_cook_is_a_correlation(m: int, r: int) -> None:
    bt, g, at = toom_cook(m, r)
    d, w = np.random.default_rng(m * 10 + r).standard_normal((2, m + r - 1))
    w = w[:r]
    direct = [sum(w[k] * d[i + k] for k in range(r)) for i in range(m)]
    np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), direct, rtol=1e-12, atol=1e-12)


@st.composite
def stride2_cases(draw):
    k = draw(st.sampled_from([3, 3, 4, 5, 6, 7]))
    m = draw(st.sampled_from([2, 4]))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, k - pads[0] - pads[1]), 17))
    w = draw(st.integers(max(1, k - pads[2] - pads[3]), 17))
    return dict(
        k=k,
        m=m,
        n=draw(st.integers(1, 3)),
        c=draw(st.integers(1, 6)),
        o=draw(st.integers(1, 6)),
        h=h,
        w=w,
        pads=pads,
        bias=draw(st.booleans()),
        relu=draw(st.booleans()),
        seed=draw(st.integers(0, 1000)),
    )


@SETTINGS
@given(case=stride2_cases())
def test_stride2_rows_matches_reference(case: dict) -> None:
    """k x k stride 2 (odd and even k, any padding, widths that are and are not whole tiles)."""
    k, m, n, c, o, h, w, pads = (case[key] for key in ("k", "m", "n", "c", "o", "h", "w", "pads"))
    x, wt, b = arrays(case["seed"], (n, c, h, w), (o, c, k, k), (o,))
    bias = b if case["bias"] else None
    kernel = Stride2RowsConv(transform_weights_stride2(wt, m), bias, m, k, x.shape, pads, F32, case["relu"])
    ref = relu_of(conv2d_reference(x, wt, bias, stride=(2, 2), pads=pads), case["relu"])
    y = np.full(ref.shape, np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        assert_close(y, ref, f"stride 2, {k}x{k}, m={m}")


@pytest.mark.parametrize("k, m, size", [(3, 4, (30, 29)), (7, 4, (40, 44)), (3, 2, (21, 28))])
def test_stride2_rows_in_bands_and_chunks(k: int, m: int, size: tuple[int, int]) -> None:
    """A batch of 5 in chunks of 2, 2 and 1, the last image in bands of output rows (both
    gather orders: tiles or rows innermost); a strided output; another kernel taking turns
    on the per-thread work buffer."""
    x, wt, b = arrays(k, (5, 4, *size), (5, 4, k, k), (5,))
    pads = (k // 2,) * 4
    u = transform_weights_stride2(wt, m)
    _, rows, bands = Stride2RowsConv(u, b, m, k, (1, 4, *size), pads, F32).sizes  # one image, one band
    costs = replace(DEFAULT_COSTS, rows_work_elements=2 * (rows + bands), stride2_band_elements=bands // 3)
    kernel = Stride2RowsConv(u, b, m, k, x.shape, pads, F32, relu=True, costs=costs)
    last = Stride2RowsConv(u, b, m, k, (1, 4, *size), pads, F32, costs=costs)
    assert kernel.chunk == 2 and kernel.band == kernel.out_hw[0] and 1 < last.band < last.out_hw[0]
    other = Stride2RowsConv(u, b, m, k, (1, 4, 9, 9), pads, F32)
    ref = np.maximum(conv2d_reference(x, wt, b, stride=(2, 2), pads=pads), 0)
    wide = np.full(ref.shape[:3] + (2 * ref.shape[3],), np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, wide[..., ::2])
        other.run(x[:1, :, :9, :9], np.empty((1, 5) + other.out_hw, np.float32))
        assert_close(wide[..., ::2], ref, "chunks and bands")
        assert np.isnan(wide[..., 1::2]).all()


def _tile(
    x_shape: tuple[int, int, int, int], o: int, kernel: tuple[int, int], out_hw: tuple[int, int], threads: int = 1, **kw
) -> int | None:
    geo = dict(stride=(2, 2), groups=1) | kw
    pads = (kernel[0] // 2,) * 4
    conv = ConvGeometry(o, kernel, geo["stride"], (1, 1), geo["groups"], "zeros", pads, out_hw)
    return stride2_tile(x_shape, conv, ChoiceInputs(DEFAULT_COSTS, threads))


def test_stride2_rows_is_chosen_where_it_wins() -> None:
    """With one BLAS thread: ResNet-18's 3x3 stride-2 convs of layers 2-3
    (bench/bench_convs.py); not its 256->512 conv on 14x14 (7 output columns: GEMMs too narrow),
    nor other geometries. Nothing with two BLAS threads (the count the call runs at: ChoiceInputs)."""
    # m = 2 only: m = 4 loses precision (conv_choice.STRIDE2_TILES, test_conv_precision.py),
    # and at m = 2 the 7x7 stem is left to im2col
    assert _tile((1, 3, 224, 224), 64, (7, 7), (112, 112)) is None
    assert _tile((1, 64, 56, 56), 128, (3, 3), (28, 28)) is not None
    assert _tile((1, 256, 14, 14), 512, (3, 3), (7, 7)) is None
    assert _tile((1, 64, 56, 56), 128, (3, 3), (56, 56), stride=(1, 1)) is None
    assert _tile((1, 64, 56, 56), 128, (3, 3), (28, 28), groups=2) is None
    assert _tile((1, 64, 56, 56), 128, (1, 1), (28, 28)) is None
    assert _tile((1, 3, 224, 224), 64, (7, 7), (112, 112), threads=2) is None
    assert _tile((4, 64, 56, 56), 128, (3, 3), (28, 28), threads=2) is None
    assert _tile((4, 64, 56, 56), 128, (3, 3), (28, 28), threads=1) is not None  # the same at one thread


def test_layer_picks_stride2_rows_and_matches_reference() -> None:
    x, wt, b = arrays(5, (2, 64, 56, 55), (128, 64, 3, 3), (128,))
    wt *= 1 / np.sqrt(9 * 64)
    layer = conv_layer(wt, b, x.shape, stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=1)
    assert isinstance(layer.kernels.kernel(x.shape, F32), Stride2RowsConv)
    (y,) = layer.forward([x], [None])
    assert_close(y, conv2d_reference(x, wt, b, stride=(2, 2), pads=(1, 1, 1, 1)), "layer, stride 2")


def test_winograd_kernels_let_go_of_a_replaced_work_buffer() -> None:
    """A kernel's cached work views would keep the per-thread work buffer alive after a
    bigger one replaced it (ResNet-18 at batch 4: +16 MB of peak with the stride-2 stem
    holding the first one); they are dropped then, and remade on the next call."""
    import weakref

    from kuiper_core.layers.windows import WORK, scratch
    from kuiper_core.layers.winograd import WinogradConv, transform_weights

    x, wt, b = arrays(6, (1, 4, 12, 13), (5, 4, 3, 3), (5,))
    kernels = [
        Stride2RowsConv(transform_weights_stride2(wt, 4), b, 4, 3, x.shape, (1, 1, 1, 1), F32),
        WinogradConv(transform_weights(wt, 2), b, 2, x.shape, (1, 1, 1, 1), F32),
    ]
    refs = [conv2d_reference(x, wt, b, stride=(2, 2), pads=(1, 1, 1, 1)), conv2d_reference(x, wt, b, pads=(1, 1, 1, 1))]
    for kernel, ref in zip(kernels, refs):
        y = np.empty(ref.shape, np.float32)
        kernel.run(x, y)
        old = weakref.ref(scratch(WORK, (1,), F32).base)
        assert kernel._cached is not None
        scratch(WORK, (old().size + 1,), F32)  # a bigger buffer replaces it
        assert kernel._cached is None and old() is None
        kernel.run(x, y)
        assert_close(y, ref, type(kernel).__name__)
