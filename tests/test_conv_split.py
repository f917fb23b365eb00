"""Convolutions split in two halves for two threads (layers/conv_split.py, threads.py).

Every way of splitting (by images, by bands of output rows, by output channels), over random
convs and every kernel kind (im2col, pointwise, Winograd F(2,3)/F(4,3), F(2,3) along the
rows), must agree with the readable reference (conv_reference.py), at two BLAS threads (the
halves on two threads) and at one (the halves one after the other). The thread count
follows the BLAS's own; a whole model with every conv split gives the committed PyTorch
outputs, and steps() the same values as forward().
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuiper_core
import kuiper_core.layers.conv as conv
from conftest import SAMPLES, max_err_ok
from kuiper_core import threads, two_threads
from kuiper_core.graph import Attribute, Graph
from kuiper_core.layers import conv_split
from kuiper_core.layers.conv_kernels import ROWS, Im2col, Pointwise
from kuiper_core.layers.conv_reference import conv2d_reference
from kuiper_core.layers.conv_split import CHANNELS, IMAGES, ROW_BANDS, SplitConv, how_to_split, row_band
from kuiper_core.layers.registry import create_layer
from kuiper_core.layers.winograd import WinogradConv, WinogradRowsConv
from layer_testing import assert_close



@pytest.fixture(params=[2, 1], ids=["2 threads", "1 thread"])
def blas_count(request: pytest.FixtureRequest):
    """The BLAS at 2 threads (halves on two threads) or 1 (one after the other), restored after."""
    if threads._blas is None:
        pytest.skip("NumPy's BLAS thread count is not reachable")
    saved = threads.blas_threads()
    threads.set_blas_threads(request.param)
    yield request.param
    threads.set_blas_threads(saved)


def conv_layer(weight: np.ndarray, bias: np.ndarray | None, groups: int, **params) -> conv.Convolution:
    g = Graph()
    op = g.add_operator("nn.Conv2d", "conv", [g.add_operand("x")], [g.add_operand("y")],
                        in_channels=weight.shape[1] * groups, out_channels=weight.shape[0],
                        kernel_size=list(weight.shape[2:]), bias=bias is not None, padding_mode="zeros", groups=groups,
                        **params)
    op.attrs["weight"] = Attribute("f32", weight.shape, weight)
    if bias is not None:
        op.attrs["bias"] = Attribute("f32", bias.shape, bias)
    return create_layer(op)  # type: ignore[return-value]


def split_kernel(monkeypatch: pytest.MonkeyPatch, layer: conv.Convolution, x: np.ndarray, how: str,
                 relu: bool = False, m: int | str | None = -1):
    """The layer's kernel for x made with the split forced `how` (and Winograd's m forced unless -1)."""
    monkeypatch.setattr(conv, "how_to_split", lambda *a: how)
    if m != -1:
        monkeypatch.setattr(conv, "winograd_tile", lambda *a: m)
    return layer._make_kernel(x.shape, np.dtype(np.float32), relu)


@st.composite
def split_cases(draw):
    how = draw(st.sampled_from([IMAGES, ROW_BANDS, CHANNELS]))
    groups = 1 if how == CHANNELS else draw(st.sampled_from([1, 1, 2, 3]))
    cg, og = draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 5, 17]))
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, dil[0] * (k[0] - 1) + 1 - pads[0] - pads[1]), 12))
    w = draw(st.integers(max(1, dil[1] * (k[1] - 1) + 1 - pads[2] - pads[3]), 9))
    return dict(how=how, groups=groups, c=cg * groups, o=og * groups, k=k, stride=stride, dil=dil, pads=pads,
                x_shape=(draw(st.integers(1, 4)), cg * groups, h, w), bias=draw(st.booleans()),
                relu=draw(st.booleans()), seed=draw(st.integers(0, 1000)))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=split_cases())
def test_split_im2col_and_pointwise_match_reference(monkeypatch: pytest.MonkeyPatch, blas_count: int, case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x_shape"]).astype(np.float32)
    wt = rng.standard_normal((case["o"], case["c"] // case["groups"]) + case["k"]).astype(np.float32)
    b = rng.standard_normal(case["o"]).astype(np.float32) if case["bias"] else None
    p = case["pads"]
    layer = conv_layer(wt, b, case["groups"], stride=list(case["stride"]), dilation=list(case["dil"]),
                       padding=[p[2], p[3], p[0], p[1]])  # F.pad order: left, right, top, bottom
    with monkeypatch.context() as mp:
        kernel = split_kernel(mp, layer, x, case["how"], case["relu"])
    ref = conv2d_reference(x, wt, b, case["stride"], p, case["dil"], case["groups"])
    ref = np.maximum(ref, 0) if case["relu"] else ref
    if isinstance(kernel, SplitConv):
        assert all(isinstance(k, (Im2col, Pointwise)) for k, _, _ in kernel.halves)
    elif case["how"] != ROW_BANDS:  # no two halves: one image or one channel (or a band of padding only)
        assert {IMAGES: x.shape[0], CHANNELS: ref.shape[1]}[case["how"]] == 1
    y = np.full(ref.shape, np.nan, np.float32)
    for _ in range(2):  # a second call reuses the halves' buffers
        kernel.run(x, y)
        assert_close(y, ref, str(case))


@pytest.mark.parametrize("m, n, size", [(4, 1, (14, 13)), (4, 1, (8, 8)), (2, 1, (7, 9)), (2, 3, (6, 5)),
                                        (ROWS, 1, (9, 7)), (ROWS, 2, (5, 6))])
@pytest.mark.parametrize("how", [IMAGES, ROW_BANDS, CHANNELS])
def test_split_winograd_matches_reference(monkeypatch: pytest.MonkeyPatch, blas_count: int, m: int | str, n: int,
                                          size: tuple[int, int], how: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, 16) + size).astype(np.float32)
    wt = (rng.standard_normal((18, 16, 3, 3)) / 12).astype(np.float32)
    b = rng.standard_normal(18).astype(np.float32)
    layer = conv_layer(wt, b, 1, stride=[1, 1], dilation=[1, 1], padding=[1, 1])
    kernel = split_kernel(monkeypatch, layer, x, how, relu=True, m=m)
    if how == IMAGES and n == 1:
        assert not isinstance(kernel, SplitConv)
        return
    assert isinstance(kernel, SplitConv)
    kind = WinogradRowsConv if m == ROWS else WinogradConv
    assert all(isinstance(k, kind) for k, _, _ in kernel.halves)
    if how == ROW_BANDS and m != ROWS:  # the bands meet at a whole tile row
        assert kernel.halves[1][2][2].start % m == 0
    ref = np.maximum(conv2d_reference(x, wt, b, pads=(1, 1, 1, 1)), 0)
    y = np.full(ref.shape, np.nan, np.float32)
    for _ in range(2):
        kernel.run(x, y)
        assert_close(y, ref, f"{how} m={m}")


@pytest.mark.parametrize("h, k, s, d, pad", [(9, 3, 1, 1, 1), (10, 3, 2, 1, 1), (7, 7, 2, 1, 3), (8, 2, 3, 2, 0), (5, 3, 1, 1, 4)])
def test_row_bands_read_what_their_outputs_need(h: int, k: int, s: int, d: int, pad: int) -> None:
    """Each band's own conv (its input rows, zero padded where it meets the input's edge)
    gives the whole conv's rows of that band."""
    oh = (h + 2 * pad - d * (k - 1) - 1) // s + 1
    x = np.random.default_rng(0).standard_normal((1, 2, h, 3)).astype(np.float32)
    wt = np.random.default_rng(1).standard_normal((3, 2, k, 1)).astype(np.float32)
    whole = conv2d_reference(x, wt, None, (s, 1), (pad, pad, 0, 0), (d, 1))
    for cut in range(1, oh):
        for rows in ((0, cut), (cut, oh)):
            lo, hi, top, bottom = row_band(h, k, s, d, pad, rows)
            if hi <= lo:
                continue
            band = conv2d_reference(x[:, :, lo:hi], wt, None, (s, 1), (top, bottom, 0, 0), (d, 1))
            np.testing.assert_array_equal(band, whole[:, :, rows[0] : rows[1]])


def test_how_to_split_follows_the_blas_thread_count(blas_count: int) -> None:
    k3 = dict(kernel=(3, 3), groups=1, padding_mode="zeros")
    cases = [  # (input, out channels, kernel args, output size, winograd m) -> at two threads
        (((1, 64, 56, 56), 64, k3, (56, 56), 4), ROW_BANDS),  # transforms cost more than its GEMM
        (((1, 3, 224, 224), 64, dict(k3, kernel=(7, 7)), (112, 112), None), ROW_BANDS),  # small weight
        (((1, 64, 56, 56), 128, k3, (28, 28), None), None),  # a GEMM: OpenBLAS's threads do as well
        (((1, 256, 14, 14), 256, k3, (14, 14), 2), None),  # mostly GEMM
        (((4, 64, 56, 56), 64, k3, (56, 56), 4), None),  # batches run whole
        (((1, 16, 8, 8), 16, k3, (8, 8), None), None),  # far below SPLIT_MIN_MS
        (((1, 64, 56, 56), 64, dict(k3, padding_mode="reflect"), (56, 56), None), None),  # bands pad with zeros
    ]
    for (x_shape, o, geo, out_hw, m), want in cases:
        got = how_to_split(x_shape, o, geo["kernel"], geo["groups"], geo["padding_mode"], out_hw, m)
        assert got == (want if blas_count >= 2 else None), (x_shape, o, geo)


def test_run_pair_uses_a_second_thread_with_the_blas_at_one(blas_count: int) -> None:
    seen: list[tuple[int, int]] = []

    def half() -> None:
        seen.append((threading.get_ident(), threads.blas_threads()))

    two_threads.run_pair(half, half)
    assert threads.blas_threads() == blas_count  # restored
    here = threading.get_ident()
    if blas_count >= 2:
        assert {ident for ident, _ in seen} - {here} and all(n == 1 for _, n in seen)
    else:
        assert [ident for ident, _ in seen] == [here, here]


def test_run_pair_passes_on_a_worker_error_and_keeps_working(blas_count: int) -> None:
    def fails() -> None:
        raise ValueError("half failed")

    done: list[int] = []
    with pytest.raises(ValueError, match="half failed"):
        two_threads.run_pair(fails, lambda: done.append(1))
    # two threads: the caller's half ran meanwhile; one: the error stopped the run before it
    assert done == ([1] if blas_count >= 2 else []) and threads.blas_threads() == blas_count
    two_threads.run_pair(lambda: done.append(2), lambda: done.append(3))
    assert sorted(done)[-2:] == [2, 3]


def test_model_with_every_conv_split_matches_pytorch_and_steps(monkeypatch: pytest.MonkeyPatch, blas_count: int) -> None:
    """ResNet-18 with every conv split (at two threads the halves run at once): forward gives
    the committed PyTorch output, and steps() the same values as forward."""
    monkeypatch.setattr(conv_split, "SPLIT_MIN_MS", 0.0)
    pairs: list[int] = []
    run_pair = conv_split.run_pair
    monkeypatch.setattr(conv_split, "run_pair", lambda a, b: (pairs.append(1), run_pair(a, b)))
    g = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")
    x = np.load(SAMPLES / "resnet18.input.npy")
    with np.load(SAMPLES / "resnet18.expected.npz") as z:
        expected = z["out0"]
    g.forward(x)
    (y,) = g.forward(x)  # the prepared forward
    assert bool(pairs) == (blas_count >= 2)
    ok, err, bound = max_err_ok(y, expected)
    assert ok, f"err {err:.3g} > {bound:.3g}"
    for _ in range(2):  # the per-operator walk, then an arena's flat run
        run = g.steps(x)
        for _ in run:
            pass
        np.testing.assert_array_equal(g.outputs_of(run.values)[0], y)
