"""The fast convolution kernels against the readable reference (conv_reference.py), over
random shapes, strides, paddings, dilations, groups and padding modes (hypothesis).

The reference itself is checked against PyTorch's outputs by the exported conv cases
(tests/test_ops.py) and by the torch sweeps in test_layers_conv.py; here every kernel
(Pointwise, Im2col with own or scratch buffers, wide rows or not, Winograd F(2,3)/F(4,3),
F(2,3) along the rows) must agree with it, and so must the kernel the layer picks. Each
kernel may also apply a ReLU the prepared forward fused into it (`relu=True`): then it
must agree with max(reference, 0).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper_core.graph import Attribute, Graph
from kuiper_core.layers.conv_choice import ROWS, ConvGeometry, winograd_tile
from kuiper_core.layers.conv_kernels import Im2col, Pointwise
from kuiper_core.layers.kernel_costs import DEFAULT_CHOICE, DEFAULT_COSTS
from kuiper_core.layers.conv_reference import conv2d_reference, conv_transpose2d_reference
from kuiper_core.layers.registry import create_layer
from kuiper_core.layers.windows import out_size
from kuiper_core.layers.winograd import WinogradConv, WinogradRowsConv, transform_weights, transform_weights_rows
from layer_testing import assert_close
from conftest import slow_cases

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def relu_of(ref: np.ndarray, relu: bool) -> np.ndarray:
    return np.maximum(ref, 0) if relu else ref


def weight_matrix(w: np.ndarray, b: np.ndarray | None, groups: int) -> np.ndarray:
    """The GEMM layout conv.py builds: (G, Og, Cg*KH*KW [+ bias])."""
    o = w.shape[0]
    wm = w.reshape(groups, o // groups, -1)
    return wm if b is None else np.concatenate([wm, b.reshape(groups, o // groups, 1)], axis=2)


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg, og = draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 5, 17]))  # 17 > 16: not "wide rows"
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    mode = draw(st.sampled_from(["zeros", "zeros", "reflect", "replicate", "circular"]))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    if mode == "reflect":  # torch: reflect padding must be smaller than the input
        pads = tuple(min(p, 1) for p in pads)
    h = draw(st.integers(max(2, dil[0] * (k[0] - 1) + 1 - pads[0] - pads[1]), 9))
    w = draw(st.integers(max(2, dil[1] * (k[1] - 1) + 1 - pads[2] - pads[3]), 9))
    n = draw(st.integers(1, 3))
    bias = draw(st.booleans())
    return dict(
        groups=groups,
        c=cg * groups,
        o=og * groups,
        k=k,
        stride=stride,
        dil=dil,
        mode=mode,
        pads=pads,
        x_shape=(n, cg * groups, h, w),
        bias=bias,
        relu=draw(st.booleans()),
        seed=draw(st.integers(0, 1000)),
    )


@pytest.mark.parametrize("own, bias_column", [(True, True), (False, True), (True, False)])
@SETTINGS
@given(case=conv_cases())
def test_im2col_matches_reference(own: bool, bias_column: bool, case: dict) -> None:
    n, c, h, w = case["x_shape"]
    x, wt, b = arrays(case["seed"], case["x_shape"], (case["o"], c // case["groups"]) + case["k"], (case["o"],))
    bias = b if case["bias"] else None
    p, k, s, d = case["pads"], case["k"], case["stride"], case["dil"]
    out_hw = (out_size(h, k[0], s[0], p[0], p[1], d[0]), out_size(w, k[1], s[1], p[2], p[3], d[1]))
    wmat = weight_matrix(wt, bias if bias_column else None, case["groups"])
    kernel = Im2col(
        wmat,
        k,
        s,
        d,
        p,
        case["mode"],
        case["x_shape"],
        out_hw,
        np.dtype(np.float32),
        own_buffers=own,
        bias_after=None if bias_column else bias,
        relu=case["relu"],
    )
    y = np.full((n, case["o"]) + out_hw, np.nan, np.float32)
    for _ in range(2):  # a second call reuses the buffers (zero borders, ones row)
        kernel.run(x, y)
        ref = conv2d_reference(x, wt, bias, s, p, d, case["groups"], case["mode"])
        assert_close(y, relu_of(ref, case["relu"]), str(case))
        x = x[::-1].copy()


@pytest.mark.parametrize("bias_column", [True, False])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=conv_cases())
def test_im2col_in_bands_of_rows_matches_reference(bias_column: bool, case: dict) -> None:
    """Every plain-layout Im2col done one output row at a time (costs.im2col_band_elements = 1)."""
    n, c, h, w = case["x_shape"]
    x, wt, b = arrays(case["seed"], case["x_shape"], (case["o"], c // case["groups"]) + case["k"], (case["o"],))
    bias = b if case["bias"] else None
    p, k, s, d = case["pads"], case["k"], case["stride"], case["dil"]
    out_hw = (out_size(h, k[0], s[0], p[0], p[1], d[0]), out_size(w, k[1], s[1], p[2], p[3], d[1]))
    kernel = Im2col(
        weight_matrix(wt, bias if bias_column else None, case["groups"]),
        k,
        s,
        d,
        p,
        case["mode"],
        case["x_shape"],
        out_hw,
        np.dtype(np.float32),
        bias_after=None if bias_column else bias,
        relu=case["relu"],
        costs=replace(DEFAULT_COSTS, im2col_band_elements=1),
    )
    assert kernel.band == 1 or kernel.wide or kernel.across
    y = np.full((n, case["o"]) + out_hw, np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        ref = conv2d_reference(x, wt, bias, s, p, d, case["groups"], case["mode"])
        assert_close(y, relu_of(ref, case["relu"]), str(case))
        x = x[::-1].copy()


@pytest.mark.parametrize("own, bias_column, relu", [(True, True, False), (False, True, True), (False, False, True)])
@pytest.mark.parametrize("stride", [1, 2])
def test_im2col_across_the_batch_matches_reference(own: bool, bias_column: bool, relu: bool, stride: int) -> None:
    """Small images of a batch: one GEMM over all their columns (Im2col.across)."""
    x, wt, b = arrays(7, (3, 6, 9, 8), (20, 6, 3, 3), (20,))
    out_hw = (out_size(9, 3, stride, 1, 1), out_size(8, 3, stride, 1, 1))
    kernel = Im2col(
        weight_matrix(wt, b if bias_column else None, 1),
        (3, 3),
        (stride, stride),
        (1, 1),
        (1, 1, 1, 1),
        "zeros",
        x.shape,
        out_hw,
        np.dtype(np.float32),
        own_buffers=own,
        bias_after=None if bias_column else b,
        relu=relu,
    )
    assert kernel.across
    y = np.full((3, 20) + out_hw, np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        ref = conv2d_reference(x, wt, b, (stride, stride), (1, 1, 1, 1))
        assert_close(y, relu_of(ref, relu), "across the batch")
        x = x[::-1].copy()


@SETTINGS
@given(
    n=st.integers(1, 3),
    groups=st.sampled_from([1, 2]),
    cg=st.integers(1, 5),
    og=st.integers(1, 5),
    h=st.integers(1, 6),
    w=st.integers(1, 6),
    bias=st.booleans(),
    relu=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_pointwise_matches_reference(n, groups, cg, og, h, w, bias, relu, seed) -> None:
    x, wt, b = arrays(seed, (n, cg * groups, h, w), (og * groups, cg, 1, 1), (og * groups,))
    kernel = Pointwise(weight_matrix(wt, None, groups), b if bias else None, x.shape, relu)
    y = np.empty((n, og * groups, h, w), np.float32)
    kernel.run(x, y)
    assert_close(y, relu_of(conv2d_reference(x, wt, b if bias else None, groups=groups), relu), "pointwise")


@pytest.mark.parametrize("m", [2, 4])
@SETTINGS
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 6),
    o=st.integers(1, 6),
    h=st.integers(1, 11),
    w=st.integers(1, 11),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    bias=st.booleans(),
    relu=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_winograd_matches_reference(m, n, c, o, h, w, pads, bias, relu, seed) -> None:
    if h + pads[0] + pads[1] < 3 or w + pads[2] + pads[3] < 3:
        return
    x, wt, b = arrays(seed, (n, c, h, w), (o, c, 3, 3), (o,))
    kernel = WinogradConv(transform_weights(wt, m), b if bias else None, m, x.shape, pads, np.dtype(np.float32), relu)
    ref = relu_of(conv2d_reference(x, wt, b if bias else None, pads=pads), relu)
    y = np.full(ref.shape, np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        assert_close(y, ref, f"F({m},3)")


@SETTINGS
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 6),
    o=st.integers(1, 6),
    h=st.integers(1, 11),
    w=st.integers(1, 11),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    bias=st.booleans(),
    relu=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_winograd_rows_matches_reference(n, c, o, h, w, pads, bias, relu, seed) -> None:
    """F(2,3) along the rows only (the kernel rows summed in the GEMM), odd and even widths."""
    if h + pads[0] + pads[1] < 3 or w + pads[2] + pads[3] < 3:
        return
    x, wt, b = arrays(seed, (n, c, h, w), (o, c, 3, 3), (o,))
    kernel = WinogradRowsConv(
        transform_weights_rows(wt), b if bias else None, x.shape, pads, np.dtype(np.float32), relu
    )
    ref = relu_of(conv2d_reference(x, wt, b if bias else None, pads=pads), relu)
    y = np.full(ref.shape, np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        assert_close(y, ref, "F(2,3) rows")


def test_winograd_rows_runs_big_batches_in_chunks() -> None:
    x, wt, b = arrays(4, (5, 4, 6, 7), (3, 4, 3, 3), (3,))
    one_image = sum(
        WinogradRowsConv(transform_weights_rows(wt), b, (1, 4, 6, 7), (1, 1, 1, 1), np.dtype(np.float32)).sizes
    )
    costs = replace(DEFAULT_COSTS, rows_work_elements=2 * one_image)
    kernel = WinogradRowsConv(
        transform_weights_rows(wt), b, x.shape, (1, 1, 1, 1), np.dtype(np.float32), relu=True, costs=costs
    )
    assert kernel.chunk == 2  # 5 images: 2 + 2 + 1
    y = np.empty((5, 3, 6, 7), np.float32)
    kernel.run(x, y)
    assert_close(y, np.maximum(conv2d_reference(x, wt, b, pads=(1, 1, 1, 1)), 0), "chunked rows")


@pytest.mark.parametrize("budget, min_tiles, chunk", [(1, 196, 1), (1 << 20, 8, 2)])
def test_winograd_runs_big_batches_in_chunks(budget: int, min_tiles: int, chunk: int) -> None:
    # 4 tiles an image: 2 images for 8
    costs = replace(DEFAULT_COSTS, winograd_work_elements=budget, winograd_min_tiles=min_tiles)
    x, wt, b = arrays(3, (5, 4, 6, 7), (3, 4, 3, 3), (3,))
    kernel = WinogradConv(
        transform_weights(wt, 4), b, 4, x.shape, (1, 1, 1, 1), np.dtype(np.float32), relu=True, costs=costs
    )
    assert kernel.chunk == chunk  # 5 images: chunks of 1, or 2 + 2 + 1
    y = np.empty((5, 3, 6, 7), np.float32)
    kernel.run(x, y)
    assert_close(y, np.maximum(conv2d_reference(x, wt, b, pads=(1, 1, 1, 1)), 0), "chunked")


def geometry(
    out_channels: int,
    out_hw: tuple[int, int],
    kernel: tuple[int, int] = (3, 3),
    stride: tuple[int, int] = (1, 1),
    groups: int = 1,
    pads: tuple[int, int, int, int] = (1, 1, 1, 1),
) -> ConvGeometry:
    """A zero-padded, undilated convolution's geometry as the chooser reads it."""
    return ConvGeometry(out_channels, kernel, stride, (1, 1), groups, "zeros", pads, out_hw)


def _tile(x_shape: tuple[int, int, int, int], o: int, out_hw: tuple[int, int], **kw) -> int | str | None:
    return winograd_tile(x_shape, geometry(o, out_hw, **kw), DEFAULT_COSTS)


def test_winograd_is_chosen_for_resnet_layers_only() -> None:
    # F(2,3) only: F(4,3) loses precision (conv_choice.WINOGRAD_TILES, test_conv_precision.py)
    assert _tile((1, 64, 56, 56), 64, (56, 56)) == 2
    assert _tile((1, 256, 14, 14), 256, (14, 14)) == 2  # U of F(4,3) is 2.25x bigger
    assert _tile((1, 8, 8, 8), 8, (8, 8)) is None  # transforms cost more
    assert _tile((1, 64, 56, 56), 64, (28, 28), stride=(2, 2)) is None
    # 512 channels: any 2-D U is too big to keep (16 MiB); F(2,3) along the rows (U 12 MiB)
    # at every batch: at batch 1 its GEMMs beat im2col's narrow one, which reads the whole
    # weight for 49 columns (bench/bench_convs.py --candidates measures it)
    assert _tile((1, 512, 7, 7), 512, (7, 7)) == ROWS
    assert _tile((4, 512, 7, 7), 512, (7, 7)) == ROWS
    assert _tile((1, 768, 7, 7), 768, (7, 7)) is None  # U 27 MiB
    # Where im2col stays (measured faster or even, one thread): 4x4 maps (YOLOv5's and
    # 512 channels), YOLOv5's 64-channel 8x8 convs
    assert _tile((1, 512, 4, 4), 512, (4, 4)) is None
    assert _tile((1, 128, 4, 4), 128, (4, 4)) is None
    assert _tile((1, 64, 8, 8), 64, (8, 8)) is None


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 4])
def test_layer_picks_winograd_rows_for_512_channels_and_matches_reference(batch: int) -> None:
    x, wt, b = arrays(9, (batch, 512, 7, 7), (512, 512, 3, 3), (512,))
    wt *= 1 / np.sqrt(9 * 512)
    layer = conv_layer(wt, b, x.shape, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    assert isinstance(layer.kernels.kernel(x.shape, np.dtype(np.float32)), WinogradRowsConv)
    (y,) = layer.forward([x], [None])
    assert_close(y, conv2d_reference(x, wt, b, pads=(1, 1, 1, 1)), "layer, rows")


def conv_layer(weight: np.ndarray, bias: np.ndarray | None, in_shape: tuple[int, ...] | None, **params) -> object:
    g = Graph()
    x = g.add_operand("x")
    x.shape, x.dtype = (list(in_shape) if in_shape else None), "f32"
    op = g.add_operator(
        "nn.Conv2d",
        "conv",
        [x],
        [g.add_operand("y")],
        in_channels=weight.shape[1] * params["groups"],
        out_channels=weight.shape[0],
        kernel_size=list(weight.shape[2:]),
        bias=bias is not None,
        padding_mode="zeros",
        **params,
    )
    op.attrs["weight"] = Attribute("f32", weight.shape, weight)
    if bias is not None:
        op.attrs["bias"] = Attribute("f32", bias.shape, bias)
    return create_layer(op)


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize("c, o, size", slow_cases([(48, 64, 32), (40, 48, 30), (64, 64, 17)], {(48, 64, 32)}))
def test_layer_picks_winograd_and_matches_reference(declared: bool, c: int, o: int, size: int) -> None:
    x, wt, b = arrays(c, (2, c, size, size + 1), (o, c, 3, 3), (o,))
    wt *= 1 / np.sqrt(9 * c)
    layer = conv_layer(wt, b, x.shape if declared else None, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    assert not layer.kernels.winograd_weights  # transformed when the kernel is made (the first run), not at build
    if declared:
        assert layer.kernel_name([x.shape]) == "Winograd F(2x2, 3x3)"  # decided from the shape alone
    (y,) = layer.forward([x], [None])
    assert layer.kernels.winograd_weights
    assert isinstance(layer.kernels.kernel(x.shape, np.dtype(np.float32)), WinogradConv)
    assert_close(y, conv2d_reference(x, wt, b, pads=(1, 1, 1, 1)), "layer")


@pytest.mark.parametrize(
    "kernel, stride, padding, output_padding, dilation",
    [
        ((3, 2), (2, 3), (1, 0), (1, 2), (1, 2)),  # overlapping taps: scatter-add
        ((2, 3), (2, 3), (0, 0), (0, 0), (1, 1)),  # taps tiling the output: copied into place
    ],
)
def test_transposed_conv_matches_reference(kernel, stride, padding, output_padding, dilation) -> None:
    x, wt, b = arrays(5, (2, 4, 5, 6), (4, 3) + kernel, (6,))
    g = Graph()
    op = g.add_operator(
        "nn.ConvTranspose2d",
        "convt",
        [g.add_operand("x")],
        [g.add_operand("y")],
        in_channels=4,
        out_channels=6,
        kernel_size=list(kernel),
        stride=list(stride),
        padding=list(padding),
        output_padding=list(output_padding),
        dilation=list(dilation),
        groups=2,
        bias=True,
    )
    op.attrs = {"weight": Attribute("f32", wt.shape, wt), "bias": Attribute("f32", b.shape, b)}
    (y,) = create_layer(op).forward([x], [None])
    ref = conv_transpose2d_reference(x, wt, b, stride, padding, output_padding, dilation, 2)
    assert_close(y, ref, "conv_transpose2d")


def test_padded_slack_is_zeros_even_in_a_reused_dirty_buffer() -> None:
    """The wide-rows GEMM reads `slack` elements past the padded input into columns it crops;
    leftovers of an earlier use (NaN, 1e38) there made NumPy warn about overflow in matmul."""
    from kuiper_core.layers.windows import pad_spatial, scratch

    scratch("test.pad", (4096,), np.dtype(np.float32))[:] = np.float32(3e38)
    x = np.ones((1, 2, 5, 5), np.float32)
    xp = pad_spatial(x, (1, 1, 1, 1), slot="test.pad", slack=4)
    flat = scratch("test.pad", (xp.size + 4,), np.dtype(np.float32))
    assert np.array_equal(flat[xp.size :], np.zeros(4, np.float32))
    assert xp.sum() == x.sum()


def test_winograd_writes_a_strided_output_and_shares_its_work_buffer() -> None:
    """Two kernels of different shapes take turns on the per-thread work buffer (their views
    are remade when it moves, the padded borders zeroed each call); the output may be a
    strided view (blocks_view's as_strided path)."""
    x1, w1, b1 = arrays(11, (1, 5, 8, 8), (6, 5, 3, 3), (6,))  # 8 x 8: exact tiles, written in place
    x2, w2, b2 = arrays(12, (2, 7, 20, 21), (4, 7, 3, 3), (4,))
    k1 = WinogradConv(transform_weights(w1, 4), b1, 4, x1.shape, (1, 1, 1, 1), np.dtype(np.float32))
    k2 = WinogradConv(transform_weights(w2, 2), b2, 2, x2.shape, (0, 1, 1, 0), np.dtype(np.float32))
    assert k1.exact and not k2.exact
    ref1 = conv2d_reference(x1, w1, b1, pads=(1, 1, 1, 1))
    ref2 = conv2d_reference(x2, w2, b2, pads=(0, 1, 1, 0))
    wide = np.full((1, 6, 8, 16), np.nan, np.float32)
    y2 = np.empty(ref2.shape, np.float32)
    for _ in range(2):
        k1.run(x1, wide[..., ::2])
        k2.run(x2, y2)
        assert_close(wide[..., ::2], ref1, "strided output")
        assert np.isnan(wide[..., 1::2]).all()
        assert_close(y2, ref2, "second shape")


def _padded_3x3_kernel(
    seed: int, x_shape: tuple[int, int, int, int], out_channels: int, relu: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, object]:
    """(x, weight, bias, the kernel the layer makes) for a 3x3 conv with padding 1."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    wt = rng.standard_normal((out_channels, x_shape[1], 3, 3)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32)
    layer = conv_layer(wt, b, x.shape, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)
    return x, wt, b, layer.kernels.make(x.shape, np.dtype(np.float32), DEFAULT_CHOICE, relu=relu)


@pytest.mark.parametrize("relu", [False, True])
def test_small_convs_carry_the_bias_in_one_2d_gemm(relu: bool) -> None:
    """deep1500's convs (8 -> 8 channels, 3x3 on 8x8): a weight this small takes the bias as
    a GEMM column (though it is bigger than the output map), and one image's wide rows run
    as np.dot on 2-D views; the values are the reference's, with and without a fused ReLU."""
    x, wt, b, kernel = _padded_3x3_kernel(11, (1, 8, 8, 8), 8, relu)
    assert isinstance(kernel, Im2col) and kernel.has_bias and kernel.bias_after is None and kernel.dot is not None
    ref = conv2d_reference(x, wt, b, stride=(1, 1), pads=(1, 1, 1, 1))
    for scale in (1.0, -2.0):  # a second call: nothing of the first is left
        y = np.full(ref.shape, np.nan, np.float32)
        kernel.run(x * scale, y)
        want = conv2d_reference(x * scale, wt, b, stride=(1, 1), pads=(1, 1, 1, 1))
        assert_close(y, np.maximum(want, 0) if relu else want, f"small conv relu={relu}")


@pytest.mark.parametrize("relu", [False, True])
def test_wide_rows_add_a_bias_left_out_of_the_gemm_as_the_crop(relu: bool) -> None:
    """A big weight over a small map keeps its bias out of the GEMM (no weight copy); wide
    rows (few outputs) then add it while cropping the grid, before a fused ReLU."""
    x, wt, b, kernel = _padded_3x3_kernel(12, (1, 512, 4, 5), 16, relu)
    assert isinstance(kernel, Im2col) and kernel.wide and kernel.bias_after is not None
    want = conv2d_reference(x, wt, b, stride=(1, 1), pads=(1, 1, 1, 1))
    y = np.full(want.shape, np.nan, np.float32)
    kernel.run(x, y)
    assert_close(y, np.maximum(want, 0) if relu else want, f"wide rows, bias after, relu={relu}")


@pytest.mark.parametrize("c, rows", [(150, False), (130, True), (70, True)])
def test_winograd_sums_channels_in_blocks(c: int, rows: bool) -> None:
    """Over CHANNEL_BLOCK channels the GEMMs sum in blocks (winograd.py; the precision this
    buys is tests/test_conv_precision.py): partial sums in the work buffer's own region, added
    block by block, at every batch chunk."""
    from kuiper_core.layers.winograd import ROWS_CHANNEL_BLOCK, channel_blocks

    x, wt, b = arrays(c, (3, c, 7, 6), (24, c, 3, 3), (24,))
    pads = (1, 1, 1, 1)
    if rows:
        kernel = WinogradRowsConv(transform_weights_rows(wt), b, x.shape, pads, np.dtype(np.float32), relu=True)
    else:
        kernel = WinogradConv(transform_weights(wt, 2), b, 2, x.shape, pads, np.dtype(np.float32), relu=True)
    assert len(kernel.blocks) > 1 and all(b.stop - b.start <= 3 * 64 for b in kernel.blocks)
    assert kernel.blocks == (channel_blocks(3 * c, 3, ROWS_CHANNEL_BLOCK) if rows else channel_blocks(c))
    y = np.full((3, 24, 7, 6), np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        assert_close(y, np.maximum(conv2d_reference(x, wt, b, pads=pads), 0), "blocks")
