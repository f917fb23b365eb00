"""Operators in two halves on two cores (layers/halves.py; runtime/split_forward.py): split
convolutions against the reference convolution (every kernel kind, rows and channels, odd
sizes, stride 2, padding, dilation, a fused ReLU), split pools and activations against the
unsplit layer, the helper process (it runs the second half, an error there is raised here, a
helper that dies or never claims costs nothing but time), and the batch-1 forward at two
threads against PyTorch's outputs. Speed lives in bench/ (bench_halves.py)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuiper_core
from kuiper_core import threads
from kuiper_core.layers import kernel_costs
from kuiper_core.layers.kernel_costs import DEFAULT_COSTS, ChoiceInputs
from kuiper_core.layers.conv_reference import conv2d_reference
from kuiper_core.layers.halves import EVERY_CALL, input_rows, split_rows
from kuiper_core.runtime.helper_process import HelperProcess, Splits, Ticket, run_halves, shared_bytes
from kuiper_core.runtime.policy import split_refusal
from kuiper_core.runtime.split_forward import SplitForward
from conftest import ROOT, SAMPLES, max_err_ok
from layer_testing import assert_close, layer_of
from test_conv_kernels import arrays, conv_layer, relu_of
from test_layers_pool import pool_layer

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
F32 = np.dtype(np.float32)


# Costs under which the chooser takes the kernel a case is for (im2col priced out; the
# stride-2 kernel's widths let through); the kernels the others take by default.
TAKES = {
    "WinogradConv": replace(DEFAULT_COSTS, gemm_mac=1.0, rows_mac=1.0, winograd_min_channels=1),
    "WinogradRowsConv": replace(DEFAULT_COSTS, gemm_mac=1.0, wino_mac=1.0),
    "Stride2RowsConv": replace(DEFAULT_COSTS, gemm_mac=1.0, stride2_min_width=1, stride2_rows_first_min_width=1),
}


def _split_conv(way: str, **case) -> tuple[np.ndarray, np.ndarray, str]:
    """(the split layer's output, the reference's, its kernels) for one convolution case."""
    sizes = replace(EVERY_CALL, conv_channels_over_input=0.0 if way == "channels" else float("inf"))
    n, c, o, h, w, k, s, d, pads = (case[key] for key in ("n", "c", "o", "h", "w", "k", "stride", "dilation", "pads"))
    x, wt, b = arrays(case["seed"], (n, c, h, w), (o, c, k, k), (o,))
    wt *= 1 / np.sqrt(c * k * k)
    bias = b if case["bias"] else None
    layer = conv_layer(wt, bias, x.shape, stride=[s, s], padding=list(pads), dilation=[d, d], groups=1)
    ref = relu_of(
        conv2d_reference(x, wt, bias, stride=(s, s), pads=(pads[0], pads[0], pads[1], pads[1]), dilation=(d, d)),
        case["relu"],
    )
    y = np.full(ref.shape, np.nan, np.float32)
    made = Splits(shared=False, sizes=sizes)
    call = (layer.prepare_with_relu if case["relu"] else layer.prepare)([x], [y], split=made)
    assert call is not None
    for _ in range(2):
        call([x], [y])
    kinds = "" if not made.made else "/".join(type(half.func.__self__).__name__ for half in call.args[0].args[1:3])
    return y, ref, kinds


def run_split(prepare: Callable[..., Any], inputs: list, y: np.ndarray) -> np.ndarray:
    """y, written by the call `prepare(inputs, [y], split)` makes (asserted to be one split call),
    both halves run here."""
    splits = Splits(shared=False, sizes=EVERY_CALL)
    call = prepare(inputs, [y], split=splits)
    assert call is not None and splits.made == 1
    call(inputs, [y])
    return y


@st.composite
def conv_cases(draw):
    k = draw(st.sampled_from([1, 3, 3, 5, 7]))
    s = draw(st.sampled_from([1, 1, 2]))
    d = draw(st.sampled_from([1, 1, 2])) if s == 1 and k == 3 else 1
    keff = d * (k - 1) + 1
    pads = (draw(st.integers(0, k // 2)), draw(st.integers(0, k // 2)))
    return dict(
        k=k,
        stride=s,
        dilation=d,
        pads=pads,
        n=draw(st.integers(1, 2)),
        c=draw(st.sampled_from([3, 16, 20])),
        o=draw(st.sampled_from([2, 16, 17])),
        h=draw(st.integers(max(2 * s, keff - 2 * pads[0]) + s, 37)),
        w=draw(st.integers(max(1, keff - 2 * pads[1]), 37)),
        bias=draw(st.booleans()),
        relu=draw(st.booleans()),
        seed=draw(st.integers(0, 1000)),
    )


@pytest.mark.parametrize("way", ["rows", "channels"])
@SETTINGS
@given(case=conv_cases())
def test_split_conv_matches_reference(way: str, case: dict) -> None:
    """Whatever kernel the shape picks (Winograd F(2,3), stride-2 rows, im2col, 1x1),
    halved by rows (halo and padding per half, odd heights) or by output channels."""
    with kernel_costs.choosing(ChoiceInputs(DEFAULT_COSTS, threads=1)):  # stride-2 rows too
        y, ref, kinds = _split_conv(way, **case)
    assert kinds, "not split"
    assert_close(y, ref, f"{way} {kinds} {case}")


@pytest.mark.parametrize(
    "way, size, c, o, k, stride, kind",
    [
        ("rows", (29, 31), 32, 32, 3, 1, "WinogradConv"),  # F(2,3): split at a whole tile
        ("channels", (15, 14), 64, 48, 3, 1, "WinogradConv"),
        ("rows", (7, 9), 512, 256, 3, 1, "WinogradRowsConv"),
        ("channels", (7, 7), 512, 512, 3, 1, "WinogradRowsConv"),
        ("rows", (45, 46), 3, 16, 7, 2, "Stride2RowsConv"),  # the stem's rows-first path
        ("channels", (33, 30), 32, 64, 3, 2, "Stride2RowsConv"),
        ("rows", (12, 13), 24, 8, 1, 1, "Pointwise"),
        ("channels", (12, 13), 8, 24, 1, 2, "Im2col"),
    ],
)
def test_each_kernel_splits(way: str, size: tuple[int, int], c: int, o: int, k: int, stride: int, kind: str) -> None:
    """Each kernel the chooser can take, halved: the costs passed in make it take the case's."""
    case = dict(
        n=1,
        c=c,
        o=o,
        h=size[0],
        w=size[1],
        k=k,
        stride=stride,
        dilation=1,
        pads=(k // 2, k // 2),
        bias=True,
        relu=True,
        seed=k,
    )
    with kernel_costs.choosing(ChoiceInputs(TAKES.get(kind, DEFAULT_COSTS), threads=1)):
        y, ref, kinds = _split_conv(way, **case)
    assert kinds == f"{kind}/{kind}"
    assert_close(y, ref, f"{way} {kind}")


@pytest.mark.parametrize("groups", [1, 8])  # a dense conv, a depthwise one
def test_small_convs_and_depthwise_stay_whole(groups: int) -> None:
    x, wt, b = arrays(1, (1, 8, 8, 8), (8, 8 // groups, 3, 3), (8,))
    layer = conv_layer(wt, b, x.shape, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=groups)
    made = Splits(shared=False)
    call = layer.prepare([x], [np.empty((1, 8, 8, 8), np.float32)], split=made)
    assert call is not None and made.made == 0


@pytest.mark.parametrize(
    "op_type, params",
    [
        ("nn.MaxPool2d", dict(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1])),  # ResNet's
        ("nn.MaxPool2d", dict(kernel_size=[3, 3], stride=[2, 2], padding=[1, 0], ceil_mode=True)),
        ("nn.MaxPool2d", dict(kernel_size=[5, 5], stride=[1, 1], padding=[2, 2])),  # YOLOv5's SPPF
        ("nn.MaxPool2d", dict(kernel_size=[3, 2], stride=[1, 2], padding=[0, 0], dilation=[2, 1])),
        ("nn.AvgPool2d", dict(kernel_size=[2, 2], stride=[2, 2], padding=[0, 0])),
        ("nn.AvgPool2d", dict(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=False)),
        ("nn.AvgPool2d", dict(kernel_size=[3, 3], stride=[3, 3], padding=[1, 1], ceil_mode=True)),
    ],
)
@pytest.mark.parametrize("size", [(31, 30), (8, 9)])
def test_split_pool_matches_the_whole(op_type: str, params: dict, size: tuple[int, int]) -> None:
    """Top and bottom output rows, each from its input rows (halo, padding, ceil_mode's
    overhang, an average's divisors by position): the unsplit layer's values exactly."""
    layer = pool_layer(op_type, **params)
    x = np.random.default_rng(3).standard_normal((1, 13, *size)).astype(np.float32)
    (ref,) = layer.forward([x], [None])
    y = np.full_like(ref, np.nan)
    made = Splits(shared=False, sizes=EVERY_CALL)
    call = layer.prepare([x], [y], split=made)
    assert call is not None and made.made == 1
    for _ in range(2):
        call([x], [y])
        np.testing.assert_array_equal(y, ref)
    assert layer.prepare([x], [y]) is None  # not asked to split: forward


@pytest.mark.slow
def test_splittable_layers_take_a_split_request_and_none_knows_of_processes() -> None:
    """The capability is the layer's attribute (registry.Layer.splittable); who runs the halves
    is the runtime's (runtime/helper_process.py): no layer module imports thread or process
    machinery for it."""
    import ast
    import inspect

    from kuiper_core.layers import registry

    classes = {registry.layer_class(t) for t in registry.supported_types()}
    splittable = {cls for cls in classes if cls is not None and cls.splittable}
    assert {c.__name__ for c in splittable} >= {"Convolution", "MaxPool", "Linear", "BatchNorm", "LayerNorm", "Cat"}
    for cls in splittable:
        assert "split" in inspect.signature(cls.prepare).parameters, cls.__name__
    for path in (ROOT / "kuiper_core" / "layers").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            assert not {"multiprocessing", "mmap", "signal"} & {n.split(".")[0] for n in names + [module]}, path.name
            assert "runtime" not in module.split("."), f"{path.name} imports the runtime"


def test_split_rows_and_input_rows() -> None:
    assert split_rows(56, 4) == 28 and split_rows(28, 4) == 16 and split_rows(7) == 4 and split_rows(2, 4) == 1
    # 3x3 stride 1 pad 1 on 10 rows: output rows 5..9 read input rows 4..9 and one padded row below
    assert input_rows((5, 10), 10, 3, 1, 1) == ((4, 10), (0, 1))
    assert input_rows((0, 5), 10, 3, 1, 1) == ((0, 6), (1, 0))
    # 7x7 stride 2 pad 3 on 224 rows: output rows 56..111
    assert input_rows((56, 112), 224, 7, 2, 3) == ((109, 224), (0, 2))


def _shared(n: int) -> np.ndarray:
    return shared_bytes(8 * n).view(np.int64)


def _one_split(second: Callable[[], None]) -> tuple[Splits, Ticket]:
    """A Splits with one pair whose second half is `second`, and that pair's ticket."""
    splits = Splits()
    splits.pair(lambda: None, second)
    return splits, Ticket(splits, 0)


def test_the_helper_process_runs_the_second_half() -> None:
    seen = _shared(2)
    splits, ticket = _one_split(lambda: seen.__setitem__(1, os.getpid()))
    helper = HelperProcess(splits)
    try:

        def first() -> None:  # waits for the second half (else it may claim it itself)
            deadline = time.monotonic() + 10
            while seen[1] == 0 and time.monotonic() < deadline:
                pass
            seen[0] = os.getpid()

        for _ in range(3):
            seen[:] = 0
            run_halves(ticket, first, lambda: seen.__setitem__(1, os.getpid()))
            assert seen[0] == os.getpid() and seen[1] not in (0, os.getpid())  # both ran, the second there
    finally:
        helper.close()
    assert not helper.alive
    run_halves(ticket, lambda: None, lambda: seen.__setitem__(1, os.getpid()))  # closed: here
    assert seen[1] == os.getpid()


def test_an_error_in_the_helpers_half_is_raised_here() -> None:
    """The helper's failure is not lost: the caller runs the half again and raises its error."""
    ran = _shared(1)

    def fails() -> None:
        ran[0] += 1
        raise ValueError("half")

    splits, ticket = _one_split(fails)
    helper = HelperProcess(splits)
    try:
        with pytest.raises(ValueError, match="half"):
            run_halves(ticket, lambda: None, fails)
        assert helper.alive  # the helper goes on with the next half
    finally:
        helper.close()
    with pytest.raises(ValueError, match="first"):
        run_halves(ticket, lambda: (_ for _ in ()).throw(ValueError("first")), lambda: None)


def test_a_helper_that_dies_in_a_half_costs_only_time() -> None:
    """The helper ends in the middle of its half: the caller notices and runs the half."""
    out = _shared(1)
    parent = os.getpid()

    def second() -> None:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        out[0] = 7

    splits, ticket = _one_split(second)
    helper = HelperProcess(splits)
    run_halves(ticket, lambda: time.sleep(0.5), second)  # the helper claims the half meanwhile
    assert out[0] == 7 and not helper.alive


def test_the_caller_takes_a_half_the_helper_has_not_started() -> None:
    """A helper that is not there to claim (stopped: another job on its core) costs the caller
    nothing: it runs the second half itself."""
    seen = _shared(1)
    splits, ticket = _one_split(lambda: seen.__setitem__(0, os.getpid()))
    helper = HelperProcess(splits)
    os.kill(helper.pid, signal.SIGSTOP)
    try:
        run_halves(ticket, lambda: None, lambda: seen.__setitem__(0, os.getpid()))
        assert seen[0] == os.getpid()
    finally:
        os.kill(helper.pid, signal.SIGCONT)
        helper.close()


@pytest.mark.parametrize("op_type", ["nn.GELU", "nn.SiLU", "nn.Hardswish", "nn.ReLU"])
def test_split_activations_match_the_whole(op_type: str) -> None:
    """Two flat halves (odd sizes too) give the unsplit layer's values exactly."""
    from test_layers_activation import make_layer

    layer = make_layer(op_type)
    layer.cheap = False
    for shape in [(1, 65, 128), (1, 3, 101, 331)]:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 4
        (ref,) = layer.forward([x], [None])
        y = run_split(layer.prepare, [x], np.full_like(ref, np.nan))
        np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("relu", [False, True])
def test_split_expressions_match_the_whole(relu: bool) -> None:
    """A residual add in two flat halves, with the ReLU after it fused or not, and in place as
    the prepared forward runs it (the output is the first input): the unsplit values exactly."""
    layer = layer_of(
        "pnnx.Expression e 2 1 0 1 2 expr=add(@0,mul(@1,2.5)) #2=(1,5,7,9)f32", "#0=(1,5,7,9)f32", "#1=(1,5,7,9)f32"
    )
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((1, 5, 7, 9)).astype(np.float32) for _ in range(2))
    want = np.maximum(a + b * np.float32(2.5), 0) if relu else a + b * np.float32(2.5)
    x = a.copy()
    splits = Splits(shared=False, sizes=EVERY_CALL)
    call = (layer.prepare_with_relu if relu else layer.prepare)([x, b], [x], split=splits)
    assert call is not None and splits.made == 1
    call([x, b], [x])
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("relu", [False, True])
def test_split_expressions_over_views_and_broadcasts_match_the_whole(relu) -> None:
    """ConvNeXt's residual: a permuted view times a per-channel scale (1, C, 1, 1) plus a map, and
    a scalar operand: not flat, so halves of the first axis of more than one: the unsplit values."""
    layer = layer_of(
        "pnnx.Expression e 3 1 0 1 2 3 expr=add(@0,mul(mul(@1,@2),0.5)) #3=(1,6,7,9)f32",
        "#0=(1,6,7,9)f32",
        "#1=(1,6,7,9)f32",
        "#2=(1,6,1,1)f32",
    )
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 6, 7, 9)).astype(np.float32)
    view = rng.standard_normal((1, 7, 9, 6)).astype(np.float32).transpose(0, 3, 1, 2)  # not contiguous
    scale = rng.standard_normal((1, 6, 1, 1)).astype(np.float32)
    want = a + view * scale * np.float32(0.5)
    want = np.maximum(want, 0) if relu else want
    y = np.full_like(a, np.nan)
    splits = Splits(shared=False, sizes=EVERY_CALL)
    call = (layer.prepare_with_relu if relu else layer.prepare)([a, view, scale], [y], split=splits)
    assert call is not None and splits.made == 1
    call([a, view, scale], [y])
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "line, shape",
    [
        (
            "nn.LayerNorm ln 1 1 0 1 elementwise_affine=False eps=1e-05 normalized_shape=(64)",
            (1, 65, 64),
        ),
        ("nn.LayerNorm ln 1 1 0 1 elementwise_affine=False eps=1e-05 normalized_shape=(7,9)", (1, 5, 7, 9)),
        ("nn.RMSNorm rn 1 1 0 1 elementwise_affine=False eps=1e-06 normalized_shape=(48)", (3, 17, 48)),
        ("F.softmax sm 1 1 0 1 dim=-1", (1, 4, 65, 65)),
        ("nn.LogSoftmax ls 1 1 0 1 dim=2", (2, 3, 33)),
    ],
)
def test_split_rows_match_the_whole(line: str, shape: tuple[int, ...]) -> None:
    """Norms over trailing dims and softmax over the last dim in two halves of whole rows (odd
    row counts too): the unsplit layer's values, up to float32 rounding (their row sums are
    GEMVs, which OpenBLAS blocks by the number of rows)."""
    dims = ",".join(map(str, shape))
    layer = layer_of(f"{line} #1=({dims})f32", f"#0=({dims})f32")
    if hasattr(layer, "norm_shape"):  # an affine of random weights (the .param line has no .bin)
        rng = np.random.default_rng(5)
        layer.w, layer.b = (rng.standard_normal(layer.norm_shape).astype(np.float32) for _ in range(2))
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32) * 3
    (want,) = layer.forward([x], [None])
    y = run_split(layer.prepare, [x], np.full_like(want, np.nan))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6 * float(np.abs(want).max()))


def test_a_layernorm_over_a_permuted_view_splits_its_leading_axis() -> None:
    """ConvNeXt's LayerNorm reads a channels-last view of an NCHW map: its rows are not one
    flat run, so it splits along the first leading axis of more than one: the unsplit values."""
    layer = layer_of(
        "nn.LayerNorm ln 1 1 0 1 elementwise_affine=False eps=1e-06 normalized_shape=(24) #1=(1,7,9,24)f32",
        "#0=(1,7,9,24)f32",
    )
    rng = np.random.default_rng(6)
    layer.w, layer.b = (rng.standard_normal(layer.norm_shape).astype(np.float32) for _ in range(2))
    x = (rng.standard_normal((1, 24, 7, 9)).astype(np.float32) * 3).transpose(0, 2, 3, 1)
    (want,) = layer.forward([x], [None])
    y = run_split(layer.prepare, [x], np.full(x.shape, np.nan, np.float32))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6 * float(np.abs(want).max()))


@pytest.mark.parametrize("x_shape", [(1, 40), (1, 7, 9, 40), (5, 40)])
def test_a_linear_splits_its_rows_or_a_single_rows_features(x_shape) -> None:
    """A classifier's GEMV as two halves of the output features, a Linear of more rows (ConvNeXt's
    channels-last ones, odd counts too) as two halves of its rows (bias too): the unsplit values."""
    from kuiper_core.graph import Attribute, Graph
    from kuiper_core.layers.registry import create_layer

    rng = np.random.default_rng(7)
    w, bias = rng.standard_normal((33, 40)).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    g = Graph()
    op = g.add_operator(
        "nn.Linear", "fc", [g.add_operand("x")], [g.add_operand("y")], in_features=40, out_features=33, bias=True
    )
    op.attrs["weight"], op.attrs["bias"] = Attribute("f32", w.shape, w), Attribute("f32", bias.shape, bias)
    layer = create_layer(op)
    x = rng.standard_normal(x_shape).astype(np.float32)
    (want,) = layer.forward([x], [None])
    y = run_split(layer.prepare, [x], np.full_like(want, np.nan))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6 * float(np.abs(want).max()))


@pytest.mark.parametrize(
    "c, size, k, stride", [(144, (13, 12), 3, 1), (96, (24, 24), 5, 2), (32, (40, 37), 3, 1), (8, (64, 59), 3, 1)]
)
def test_depthwise_convs_split_by_rows(c: int, size: tuple[int, int], k: int, stride: int) -> None:
    """Depthwise convolutions (channels last, wide rows or im2col, as the shape picks) by
    output rows."""
    x, wt, b = arrays(c, (1, c, *size), (c, 1, k, k), (c,))
    layer = conv_layer(wt, b, x.shape, stride=[stride, stride], padding=[k // 2, k // 2], dilation=[1, 1], groups=c)
    ref = conv2d_reference(x, wt, b, stride=(stride, stride), pads=(k // 2,) * 4, groups=c)
    y = run_split(layer.prepare, [x], np.full(ref.shape, np.nan, np.float32))
    assert_close(y, ref, f"depthwise {c} {size} k{k} s{stride}")


def test_batchnorm_and_concat_split_match_the_whole() -> None:
    """BatchNorm by two halves of its channels, a channel concat by two halves of the output's
    elements (a cut inside an input): the unsplit values exactly."""
    rng = np.random.default_rng(9)
    from kuiper_core.graph import Attribute, Graph
    from kuiper_core.layers.registry import create_layer

    g = Graph()
    op = g.add_operator("nn.BatchNorm2d", "bn", [g.add_operand("x")], [g.add_operand("y")], num_features=7, eps=1e-5)
    for key in ("running_mean", "running_var"):
        op.attrs[key] = Attribute("f32", (7,), rng.random(7).astype(np.float32) + 0.5)
    bn = create_layer(op)
    bn.scale, bn.shift = rng.standard_normal(7).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    x = rng.standard_normal((1, 7, 5, 6)).astype(np.float32)
    (want,) = bn.forward([x], [None])
    y = run_split(bn.prepare, [x], np.full_like(want, np.nan))
    np.testing.assert_array_equal(y, want)
    cat = layer_of(
        "torch.cat cat 3 1 0 1 2 3 dim=1 #3=(1,9,4,5)f32", "#0=(1,2,4,5)f32", "#1=(1,3,4,5)f32", "#2=(1,4,4,5)f32"
    )
    parts = [rng.standard_normal((1, n, 4, 5)).astype(np.float32) for n in (2, 3, 4)]
    y = run_split(cat.prepare, parts, np.full((1, 9, 4, 5), np.nan, np.float32))
    np.testing.assert_array_equal(y, np.concatenate(parts, axis=1))


def test_split_is_refused_off_x86_64(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-off between the processes relies on x86's store order."""
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    with pytest.raises(kuiper_core.KuiperError, match="x86's store order"):
        kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param", executor="split")


@pytest.mark.slow
def test_no_helper_unless_asked_for() -> None:
    """A library never forks behind its caller: "auto" runs the whole forward at batch 1."""
    graph, x = kuiper_core.load(SAMPLES / "unet.pnnx.param"), np.load(SAMPLES / "unet.input.npy")
    for _ in range(3):
        graph.forward(x)
        assert graph.last_executor == "prepared"


@pytest.fixture
def two_threads() -> Iterator[None]:
    """The split executor is available here (its tests pass EVERY_CALL: every call that can split does)."""
    if not threads.blas_reachable():
        pytest.skip("the BLAS's thread count cannot be set here")
    if split_refusal() is not None:
        pytest.skip(f"no split executor here: {split_refusal()}")
    yield


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "unet", "yolov5s_mini"])
def test_split_forward_gives_pytorchs_outputs(two_threads: None, name: str) -> None:
    param = SAMPLES / f"{name}.pnnx.param"
    if not param.exists():
        pytest.skip(f"sample model {name} not exported")
    expected = np.load(SAMPLES / f"{name}.expected.npz")
    graph, x = (
        kuiper_core.load(param, executor="split", threads=2, split_sizes=EVERY_CALL),
        np.load(SAMPLES / f"{name}.input.npy"),
    )
    before = threads.blas_threads()
    outputs = [graph.forward(x)[0] for _ in range(3)]
    assert graph.last_executor == "split"
    assert threads.blas_threads() == before  # restored after each split run
    for y in outputs:
        assert max_err_ok(y, expected[expected.files[0]])[0]
        assert np.array_equal(y, outputs[0])  # the same bits every call
    # Against the whole forward: the split one runs the BLAS at one thread, which rounds otherwise
    # than two (YOLOv5's decoded boxes: 8.6e-6 of the largest between the whole forward at one
    # and at two threads; the split one 6.5e-6 from the one-thread whole, ResNet-18 1e-6): the
    # bound docs/limits.md states.
    whole = kuiper_core.load(param, threads=2).forward(x)[0]
    np.testing.assert_allclose(outputs[0], whole, rtol=0, atol=2e-5 * float(np.abs(whole).max()))


def test_a_split_transformer_gives_pytorchs_outputs(two_threads: None) -> None:
    """The tiny ViT's split forward, made whatever its timing and size (it stays whole at its
    size: ViT-B/16's are the calls these splits are for): its Linears by output features, its
    self-attention by heads then rows, its norms by rows (a half the helper process has not
    claimed runs here: these are small); against PyTorch's outputs."""

    param = SAMPLES / "vit_tiny.pnnx.param"
    if not param.exists():
        pytest.skip("sample model vit_tiny not exported")
    expected = np.load(SAMPLES / "vit_tiny.expected.npz")
    graph, x = kuiper_core.load(param), np.load(SAMPLES / "vit_tiny.input.npy")
    assert graph.program is not None
    with threads.using_blas_threads(1):
        split = SplitForward.make(graph.program, [x], sizes=EVERY_CALL)
    assert split is not None and split.helper is not None
    try:
        kinds = set(split.prepared.types[i] for i, c in enumerate(split.prepared.calls) if _is_split(c))
        assert {"nn.Linear", "nn.MultiheadAttention", "nn.LayerNorm", "nn.GELU"} <= kinds
        for _ in range(2):
            (y,) = split.run([x])
            assert max_err_ok(y, expected[expected.files[0]])[0]
    finally:
        split.close()


def _is_split(call: Any) -> bool:
    """A prepared call that runs in halves (halves_call's or self-attention's steps)."""
    while isinstance(call, partial):  # the bound call, around the layer's prepared one
        call = call.func
    return getattr(call, "__name__", "") in ("_run_pair", "_run_steps")


def test_a_forked_process_runs_the_whole_forward(two_threads: None) -> None:
    """multiprocessing's fork workers inherit a graph whose split forward's buffers are shared
    with its maker: the worker makes its own split forward, the maker keeps its own."""
    param = SAMPLES / "unet.pnnx.param"
    graph, x = kuiper_core.load(param, executor="split", split_sizes=EVERY_CALL), np.load(SAMPLES / "unet.input.npy")
    want = graph.forward(x)[0]
    assert graph.last_executor == "split"
    chosen = graph._executors[((x.shape, x.dtype.str),)].parallel
    assert isinstance(chosen, SplitForward) and chosen.owned()
    verdict = shared_bytes(8).view(np.int64)
    pid = os.fork()
    if pid == 0:  # the worker: its forwards must not touch the maker's buffers
        ok = 0
        try:
            ok = int(all(np.array_equal(graph.forward(x)[0], want) for _ in range(3)))
        finally:
            verdict[0] = 1 + ok
            os._exit(0)
    os.waitpid(pid, 0)
    assert verdict[0] == 2
    assert chosen.helper is not None and chosen.helper.alive  # the worker did not stop the maker's helper
    np.testing.assert_array_equal(graph.forward(x)[0], want)
