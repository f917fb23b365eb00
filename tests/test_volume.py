"""Conv3d and ConvTranspose3d (layers/volume.py: 3-D convolutions run as 2-D ones over
planes, on conv.py's tuned kernels) against the readable references in conv_reference.py,
over strides, paddings, dilations, groups and batches; the real pnnx cases of test_ops.py
check them against PyTorch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kuiper_core.errors import ModelError
from kuiper_core.graph import Attribute, Operand, Operator
from kuiper_core.layers.conv_reference import conv3d_reference, conv_transpose3d_reference
from kuiper_core.layers.registry import create_layer
from kuiper_core.layers.volume import adaptive_pool3d_reference, pool3d_reference


def _layer(op_type: str, weight: np.ndarray, bias: np.ndarray | None, in_shape: tuple[int, ...] | None, **params):
    attrs = {"weight": Attribute("f32", weight.shape, weight)}
    if bias is not None:
        attrs["bias"] = Attribute("f32", bias.shape, bias)
    op = Operator(
        op_type,
        "v",
        inputs=[Operand("x", in_shape)],
        outputs=[Operand("y")],
        params={"bias": bias is not None, **params},
        attrs=attrs,
    )
    return create_layer(op)


def _close(y: np.ndarray, ref: np.ndarray) -> None:
    assert y.shape == ref.shape and y.dtype == np.float32
    assert np.abs(y - ref).max() <= 1e-5 * max(1.0, float(np.abs(ref).max()))


CONV = [  # (N, C, D, H, W), O, kernel, stride, padding, dilation, groups
    ((1, 3, 6, 9, 8), 4, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),  # Winograd planes
    ((2, 4, 5, 7, 6), 6, (2, 3, 1), (2, 1, 2), (0, 1, 0), (1, 2, 1), 2),
    ((1, 8, 4, 10, 10), 8, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 8),  # depthwise
    ((3, 2, 7, 5, 9), 5, (3, 1, 3), (2, 2, 1), (1, 0, 2), (2, 1, 1), 1),
    ((1, 6, 3, 4, 5), 3, (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 3),  # pointwise planes
]


@pytest.mark.parametrize("shape, o, k, s, p, d, g", CONV)
@pytest.mark.parametrize("declared", [True, False])
def test_conv3d_matches_the_reference(shape, o, k, s, p, d, g, declared: bool) -> None:
    rng = np.random.default_rng(sum(shape) + o)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((o, shape[1] // g, *k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    layer = _layer(
        "nn.Conv3d",
        w,
        b,
        shape if declared else None,
        in_channels=shape[1],
        out_channels=o,
        kernel_size=list(k),
        stride=list(s),
        padding=list(p),
        dilation=list(d),
        groups=g,
    )
    ref = conv3d_reference(x, w, b, s, p, d, g)
    _close(layer.forward([x], [None])[0], ref)
    out = np.empty(ref.shape, np.float32)
    assert layer.forward([x], [out])[0] is out  # the runtime's buffer is written, not replaced
    _close(out, ref)


def test_conv3d_same_pads_each_axis_as_torch_does() -> None:
    """'same' with an even kernel: the extra element after, on every axis (depth here, the
    planes in conv.py)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 6, 7), dtype=np.float32)
    w = rng.standard_normal((3, 2, 2, 3, 4), dtype=np.float32)
    layer = _layer(
        "nn.Conv3d",
        w,
        None,
        None,
        kernel_size=[2, 3, 4],
        stride=[1, 1, 1],
        padding="same",
        dilation=[1, 1, 1],
        groups=1,
    )
    padded = np.pad(x, ((0, 0), (0, 0), (0, 1), (1, 1), (1, 2)))
    _close(layer.forward([x], [None])[0], conv3d_reference(padded, w))


TRANSPOSED = [  # (N, C, D, H, W), O, kernel, stride, padding, output_padding, dilation, groups
    ((2, 3, 2, 3, 4), 2, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1),
    ((1, 4, 3, 4, 5), 6, (3, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 0), (1, 1, 1), 2),
    ((1, 2, 3, 3, 2), 3, (2, 2, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0), (2, 2, 2), 1),
    ((2, 4, 4, 3, 3), 4, (3, 2, 3), (2, 1, 3), (1, 0, 2), (1, 0, 2), (1, 2, 1), 4),
]


@pytest.mark.parametrize("shape, o, k, s, p, op_, d, g", TRANSPOSED)
def test_conv_transpose3d_matches_the_reference(shape, o, k, s, p, op_, d, g) -> None:
    rng = np.random.default_rng(sum(shape) + o)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((shape[1], o // g, *k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    layer = _layer(
        "nn.ConvTranspose3d",
        w,
        b,
        shape,
        in_channels=shape[1],
        out_channels=o,
        kernel_size=list(k),
        stride=list(s),
        padding=list(p),
        output_padding=list(op_),
        dilation=list(d),
        groups=g,
    )
    _close(layer.forward([x], [None])[0], conv_transpose3d_reference(x, w, b, s, p, op_, d, g))


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_conv3d_padding_modes(mode: str, numpy_mode: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 2, 5, 6, 7), dtype=np.float32)
    w = rng.standard_normal((3, 2, 3, 3, 3), dtype=np.float32)
    for p in itertools.islice(itertools.product((0, 1, 2), repeat=3), 0, 27, 5):
        layer = _layer(
            "nn.Conv3d",
            w,
            None,
            None,
            kernel_size=[3, 3, 3],
            stride=[1, 2, 1],
            padding=list(p),
            dilation=[1, 1, 1],
            groups=1,
            padding_mode=mode,
        )
        padded = np.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p), mode=numpy_mode)
        _close(layer.forward([x], [None])[0], conv3d_reference(padded, w, stride=(1, 2, 1)))


def test_conv3d_errors_speak_in_three_dimensions() -> None:
    w = np.ones((4, 2, 3, 3, 3), np.float32)
    layer = _layer(
        "nn.Conv3d",
        w,
        None,
        None,
        kernel_size=[3, 3, 3],
        stride=[1, 1, 1],
        padding=[0, 0, 0],
        dilation=[1, 1, 1],
        groups=1,
    )
    with pytest.raises(ModelError, match=r"input has 3 channels, the weight expects 2"):
        layer.forward([np.ones((1, 3, 4, 4, 4), np.float32)], [None])
    for small in [(2, 4, 4), (4, 2, 4), (4, 4, 2)]:
        with pytest.raises(
            ModelError, match=rf"does not fit the padded input \({', '.join(map(str, small))}\)"
        ) as info:
            layer.forward([np.ones((1, 2, *small), np.float32)], [None])
        assert info.value.operator == "v"
    with pytest.raises(ModelError, match="padding='same' needs stride 1"):
        _layer("nn.Conv3d", w, None, None, kernel_size=[3, 3, 3], stride=[2, 1, 1], padding="same")
    with pytest.raises(ModelError, match="padding_mode must be one of"):
        _layer("nn.Conv3d", w, None, None, kernel_size=[3, 3, 3], padding=[1, 1, 1], padding_mode="mirror")
    with pytest.raises(ModelError, match="bias shape"):
        _layer("nn.Conv3d", w, np.ones(5, np.float32), None, kernel_size=[3, 3, 3], padding=[1, 1, 1])


POOLS = [  # kernel, stride, padding, dilation, ceil_mode
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False),
    ((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), True),
    ((3, 2, 3), (1, 2, 2), (1, 1, 0), (1, 1, 1), False),
    ((2, 3, 2), (3, 1, 2), (1, 0, 1), (1, 1, 1), True),
]


def _pool(op_type: str, k, s, p, d, ceil, **extra):
    params = {"kernel_size": list(k), "stride": list(s), "padding": list(p), "ceil_mode": ceil, **extra}
    if op_type.startswith("F.max"):
        params["dilation"] = list(d)
    return create_layer(Operator(op_type, "pool", inputs=[Operand("x")], outputs=[Operand("y")], params=params))


@pytest.mark.parametrize("k, s, p, d, ceil", POOLS + [((3, 2, 2), (2, 1, 2), (1, 1, 0), (2, 1, 2), True)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_max_pool3d_matches_the_reference(k, s, p, d, ceil, dtype) -> None:
    x = (np.random.default_rng(3).standard_normal((2, 3, 7, 8, 9)) * 100).astype(dtype)
    y = _pool("F.max_pool3d", k, s, p, d, ceil).forward([x], [None])[0]
    ref = pool3d_reference(x, "max", k, s, p, d, ceil)
    assert y.dtype == dtype and np.array_equal(y, ref)


@pytest.mark.parametrize("k, s, p, d, ceil", POOLS)
@pytest.mark.parametrize("include_pad, divisor", [(True, None), (False, None), (True, 5)])
def test_avg_pool3d_matches_the_reference(k, s, p, d, ceil, include_pad: bool, divisor: int | None) -> None:
    x = np.random.default_rng(4).standard_normal((2, 3, 7, 8, 9)).astype(np.float32)
    layer = _pool("F.avg_pool3d", k, s, p, d, ceil, count_include_pad=include_pad, divisor_override=divisor)
    _close(layer.forward([x], [None])[0], pool3d_reference(x, "avg", k, s, p, (1, 1, 1), ceil, include_pad, divisor))


@pytest.mark.parametrize("size", [(1, 1, 1), (2, 3, 4), (3, 4, 3), (7, None, 2), (5, 8, 9)])
@pytest.mark.parametrize("op_type, fn", [("F.adaptive_avg_pool3d", np.mean), ("F.adaptive_max_pool3d", np.max)])
def test_adaptive_pool3d_matches_the_cell_walk(size, op_type: str, fn) -> None:
    """Divisible (max: a max pool), uneven bins, a kept dim, bins of one."""
    x = np.random.default_rng(5).standard_normal((2, 3, 7, 8, 9)).astype(np.float32)
    layer = create_layer(
        Operator(op_type, "a", inputs=[Operand("x")], outputs=[Operand("y")], params={"output_size": list(size)})
    )
    shape = (2, 3) + tuple(s or n for s, n in zip(size, x.shape[2:]))
    _close(layer.forward([x], [None])[0], adaptive_pool3d_reference(x, shape, fn))


def test_a_huge_depth_padding_is_a_limit_error_before_anything_big() -> None:
    from kuiper_core.errors import LimitError

    w = np.ones((2, 2, 3, 1, 1), np.float32)
    layer = _layer(
        "nn.Conv3d",
        w,
        None,
        None,
        kernel_size=[3, 1, 1],
        stride=[100000, 1, 1],
        padding=[10**8, 0, 0],
        dilation=[1, 1, 1],
        groups=1,
    )
    with pytest.raises(LimitError, match="the padded input"):
        layer.forward([np.ones((1, 2, 4, 64, 64), np.float32)], [None])


def test_adaptive_max_with_many_bins_matches_the_cell_walk() -> None:
    """More bins than the input has along an axis (bins of one or two, overlapping: the
    gathered path, volume.BINS_LOOP_MAX), as the cell walk gives them; and 10^6 bins."""
    x = np.random.default_rng(6).standard_normal((1, 2, 7, 3, 5)).astype(np.float32)
    layer = create_layer(
        Operator(
            "F.adaptive_max_pool3d",
            "a",
            inputs=[Operand("x")],
            outputs=[Operand("y")],
            params={"output_size": [300, 2, 70]},
        )
    )
    _close(layer.forward([x], [None])[0], adaptive_pool3d_reference(x, (1, 2, 300, 2, 70), np.max))
    big = create_layer(
        Operator(
            "F.adaptive_max_pool3d",
            "a",
            inputs=[Operand("x")],
            outputs=[Operand("y")],
            params={"output_size": [10**6, 1, 1]},
        )
    )
    y = big.forward([x[:, :1, :2, :1, :1]], [None])[0][0, 0, :, 0, 0]
    half = 10**6 // 2  # bins before the middle see x[0], after it x[1]; the middle one both
    assert y.shape == (10**6,) and (y[:half] == x[0, 0, 0, 0, 0]).all() and (y[half + 1 :] == x[0, 0, 1, 0, 0]).all()
