"""Activation layers beyond the op corpus: accuracy of GELU's erfc, extreme inputs, dtype
and buffer contract, parameter validation.

References are the standard library's math.erfc and (for extreme inputs) PyTorch itself,
skipped when torch is not installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kuiper_core.errors import ModelError
from kuiper_core.graph import Attribute, Graph
from kuiper_core.layers.activation import erfc_nonneg, gelu_reference, silu_reference
from kuiper_core.layers.registry import create_layer

EXTREMES = np.array(
    [-1e30, -1e4, -100.0, -88.0, -20.0, -5.0, -1e-30, 0.0, 1e-30, 5.0, 20.0, 88.0, 100.0, 1e4, 1e30], np.float32
)


def make_layer(op_type: str, in_shape: tuple | None = None, **params):
    g = Graph()
    a, b = g.add_operand("in"), g.add_operand("out")
    a.shape = in_shape
    op = g.add_operator(op_type, "op", [a], [b], **params)
    return create_layer(op)


def test_erfc_relative_error_below_1_2e_7() -> None:
    z = np.linspace(0.0, 9.0, 9001)
    ref = np.array([math.erfc(v) for v in z])
    got = erfc_nonneg(z.copy())
    assert np.max(np.abs(got - ref) / ref) < 1.2e-7


def exact_gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x) in float64 from math.erfc, without cancellation in the negative tail."""
    return np.array([0.5 * float(v) * math.erfc(-float(v) / math.sqrt(2.0)) for v in x.ravel()]).reshape(x.shape)


def test_gelu_reference_is_accurate_to_float32_including_the_tail() -> None:
    # torch computes 0.5*x*(1+erf(x/sqrt2)), which cancels for x << 0; the reference uses erfc.
    x = np.linspace(-12.0, 12.0, 48001).astype(np.float32)
    exact = exact_gelu(x)
    y = np.empty_like(x)
    gelu_reference(x, y)
    normal = np.abs(exact) > np.finfo(np.float32).tiny
    rel = np.abs(y.astype(np.float64) - exact)[normal] / np.abs(exact[normal])
    assert rel.max() < 2e-7  # a few float32 ulps everywhere


def gelu_inputs() -> np.ndarray:
    """A dense grid where GELU's outputs are normal floats, and float32 values over the whole
    range (random bit patterns of both signs, every exponent)."""
    bits = np.random.default_rng(0).integers(0, 0xFF000000, 20000, dtype=np.uint64).astype(np.uint32)
    wide = bits.view(np.float32)
    wide = wide[np.isfinite(wide)]
    return np.concatenate([np.linspace(-13.5, 13.5, 54001, dtype=np.float32), wide, EXTREMES])


def test_gelu_float32_error_bound_against_the_exact_value() -> None:
    # The float32 path's error comes from the float32 rounding of log Phi(x) (about -x^2/2)
    # and its exp: relative <= 4.5e-7 * (1 + x^2/2) (2.3e-7 measured), ~7e-7 for |x| <= 3.
    # PyTorch's float32 GELU reaches 100 % relative error for x < -3 (1 + erf(x/sqrt2) cancels).
    x = gelu_inputs()
    exact = exact_gelu(x)
    y = make_layer("nn.GELU").forward([x], [None])[0]
    assert y.dtype == np.float32
    x64, err = x.astype(np.float64), np.abs(y.astype(np.float64) - exact)
    # Below float32's normal range (|y| < 1.2e-38) Phi's subnormal value keeps fewer digits,
    # and x times it: a float32 step (2^-149) times 2 + |x|.
    subnormal = 2.0**-149 * (2.0 + np.abs(x64))
    assert np.all(err <= 4.5e-7 * (1.0 + x64**2 / 2) * np.abs(exact) + subnormal)
    bulk = np.abs(x64) <= 3
    assert np.all(err[bulk] <= 7.5e-7 * np.abs(exact[bulk]) + subnormal[bulk])


def test_gelu_float32_matches_its_reference() -> None:
    x = (np.random.default_rng(1).standard_normal((3, 7000)) * 3).astype(np.float32)
    ref = np.empty(x.shape, np.float64)
    gelu_reference(x, ref)
    y = make_layer("nn.GELU").forward([x], [None])[0]
    assert np.all(np.abs(y - ref) <= 5e-7 * (1.0 + x.astype(np.float64) ** 2 / 2) * np.abs(ref) + 1e-44)


def test_gelu_nan_and_infinities() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = make_layer("nn.GELU").forward([x], [None])[0]
    np.testing.assert_array_equal(
        y, np.array([np.nan, np.inf, 0.0, 3e38, 0.0], np.float32)
    )  # the limits (torch: NaN for +-inf)


def test_gelu_in_place_non_contiguous_and_float64() -> None:
    layer = make_layer("nn.GELU")
    x = (np.random.default_rng(2).standard_normal((40, 1000)) * 4).astype(np.float32)
    expected = layer.forward([x], [None])[0]
    y = x.copy()
    layer.compute(y, y)  # in place (the runtime may run it so)
    np.testing.assert_array_equal(y, expected)
    strided = layer.forward([x[:, ::2]], [None])[0]  # other blocks: BLAS may sum in another order
    np.testing.assert_allclose(strided, expected[:, ::2], rtol=3e-7, atol=1e-44)
    x64 = x.astype(np.float64)[:3]
    ref = np.empty_like(x64)
    gelu_reference(x64, ref)
    np.testing.assert_array_equal(layer.forward([x64], [None])[0], ref)


@pytest.mark.parametrize("shape", [(1, 65, 128), (3, 7001), (0, 4)])  # one block, three, none
def test_gelu_prepared_matches_forward(shape: tuple[int, ...]) -> None:
    layer = make_layer("nn.GELU")
    x = (np.random.default_rng(4).standard_normal(shape) * 3).astype(np.float32)
    expected = layer.forward([x], [None])[0]
    y = np.full(shape, np.nan, np.float32)
    f = layer.prepare([x], [y])
    assert f is not None
    f([x], [y])
    np.testing.assert_array_equal(y, expected)


def test_silu_matches_its_reference_to_float32_rounding() -> None:
    x = np.concatenate([EXTREMES, np.linspace(-30, 30, 60001, dtype=np.float32)]).reshape(1, -1)
    y = make_layer("nn.SiLU").forward([x], [None])[0]
    exact = silu_reference(x)
    assert y.dtype == np.float32
    # float32 rounding of 1 + tanh(x/2), times |x/2| <= ~9 where it is not exactly 0: 6e-7
    assert np.all(np.abs(y - exact) <= 7e-7 * np.maximum(1.0, np.abs(exact)))


ELEMENTWISE = [
    ("nn.ReLU", {}, "relu"),
    ("nn.ReLU6", {}, "relu6"),
    ("nn.LeakyReLU", {"negative_slope": 0.2}, lambda F, x: F.leaky_relu(x, 0.2)),
    ("nn.LeakyReLU", {"negative_slope": 3.0}, lambda F, x: F.leaky_relu(x, 3.0)),
    ("nn.RReLU", {"lower": 0.1, "upper": 0.3}, lambda F, x: F.leaky_relu(x, 0.2)),
    ("nn.ELU", {"alpha": 0.7}, lambda F, x: F.elu(x, 0.7)),
    ("nn.SELU", {}, "selu"),
    ("nn.CELU", {"alpha": 1.5}, lambda F, x: F.celu(x, 1.5)),
    ("nn.GELU", {}, "gelu"),
    ("nn.GELU", {"approximate": "tanh"}, lambda F, x: F.gelu(x, approximate="tanh")),
    ("nn.SiLU", {}, "silu"),
    ("nn.Mish", {}, "mish"),
    ("nn.Sigmoid", {}, "sigmoid"),
    ("nn.Tanh", {}, "tanh"),
    ("nn.Hardtanh", {"min_val": -2, "max_val": 3}, lambda F, x: F.hardtanh(x, -2.0, 3.0)),
    ("nn.Hardswish", {}, "hardswish"),
    ("nn.Hardsigmoid", {}, "hardsigmoid"),
    ("nn.Softplus", {"beta": 1.0, "threshold": 20.0}, "softplus"),
    ("nn.Softplus", {"beta": 0.5, "threshold": 100.0}, lambda F, x: F.softplus(x, 0.5, 100.0)),
    ("nn.LogSigmoid", {}, "logsigmoid"),
    ("nn.Softsign", {}, "softsign"),
    ("nn.Tanhshrink", {}, "tanhshrink"),
    ("nn.Softshrink", {"lambd": 0.5}, "softshrink"),
    ("nn.Hardshrink", {"lambd": 0.5}, "hardshrink"),
    ("nn.Threshold", {"threshold": 0.5, "value": -2.0}, lambda F, x: F.threshold(x, 0.5, -2.0)),
]


@pytest.mark.parametrize("op_type, params, ref", ELEMENTWISE, ids=[f"{t}{p}" for t, p, _ in ELEMENTWISE])
def test_extreme_inputs_match_torch_without_warnings(op_type: str, params: dict, ref) -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    fn = getattr(F, ref) if isinstance(ref, str) else (lambda x: ref(F, x))
    x = np.concatenate([EXTREMES, np.linspace(-8, 8, 1601, dtype=np.float32)]).reshape(2, -1)
    layer = make_layer(op_type, x.shape, **params)
    out = np.full(x.shape, np.nan, np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no overflow / invalid warnings reach the user
        y = layer.forward([x], [out])[0]
    assert y is out and y.dtype == np.float32
    expected = fn(torch.from_numpy(x)).numpy()
    assert np.array_equal(np.isnan(y), np.isnan(expected))
    both = np.isfinite(expected)
    assert np.array_equal(y[~both], expected[~both])  # same infinities
    bound = 1e-6 * np.maximum(1.0, np.abs(expected[both]))
    assert np.all(np.abs(y[both].astype(np.float64) - expected[both]) <= bound)


@pytest.mark.parametrize("op_type", ["nn.Softmax", "nn.LogSoftmax", "nn.Softmin"])
def test_softmax_family_is_numerically_stable(op_type: str) -> None:
    torch = pytest.importorskip("torch")
    x = np.array(
        [[1e30, -1e30, 0.0, 88.0], [-1e4, -1e4 + 1, -1e4 + 2, -3e38], [100.0, 100.0, 100.0, 100.0]], np.float32
    )
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = make_layer(op_type, x.shape, dim=1).forward([x], [None])[0]
    fn = {
        "nn.Softmax": torch.softmax,
        "nn.LogSoftmax": torch.log_softmax,
        "nn.Softmin": lambda t, dim: torch.softmax(-t, dim),
    }[op_type]
    ref = fn(torch.from_numpy(x), dim=1).numpy()
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(y), finite)
    np.testing.assert_allclose(y[finite], ref[finite], rtol=1e-6, atol=1e-7)


def test_softmax_without_dim_uses_torchs_legacy_choice() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    y = make_layer("nn.Softmax", x.shape).forward([x], [None])[0]
    np.testing.assert_allclose(y.sum(axis=0), 1.0, rtol=1e-6)  # rank 3 -> dim 0


def test_prelu_per_channel_any_batch_and_rank() -> None:
    g = Graph()
    a, b = g.add_operand("in"), g.add_operand("out")
    op = g.add_operator("nn.PReLU", "p", [a], [b], num_parameters=3)
    w = np.array([0.1, -0.5, 2.0], np.float32)
    op.attrs["weight"] = Attribute("f32", (3,), w)
    layer = create_layer(op)
    for shape in [(5, 3), (4, 3, 7), (2, 3, 2, 2)]:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        y = layer.forward([x], [None])[0]
        slope = w.reshape((-1,) + (1,) * (x.ndim - 2))
        assert y.dtype == np.float32
        np.testing.assert_array_equal(y, np.where(x > 0, x, (x * slope).astype(np.float32)))


def test_dropout_passes_the_input_through() -> None:
    x = np.ones((2, 3), np.float32)
    for t in ("nn.Dropout", "F.dropout", "F.dropoutnd", "nn.Dropout2d"):
        layer = make_layer(t, x.shape)
        assert layer.returns_views
        assert layer.forward([x], [None])[0] is x


@pytest.mark.parametrize(
    "op_type, shape, params, message",
    [
        ("nn.Hardtanh", None, {"min_val": 2.0, "max_val": 1.0}, "min_val <= max_val"),
        ("nn.Hardtanh", None, {"min_val": "a", "max_val": 1.0}, "must be a number"),
        ("nn.GELU", None, {"approximate": "sigmoid"}, "approximate='none' or 'tanh'"),
        ("nn.CELU", None, {"alpha": 0.0}, "non-zero alpha"),
        ("nn.Softplus", None, {"beta": 0}, "non-zero beta"),
        ("nn.Softmax", (2, 3), {"dim": 2}, "out of range"),
        ("nn.LogSoftmax", (2, 3), {"dim": "x"}, "must be an int"),
        ("nn.GLU", (2, 3), {"dim": 1}, "even size"),
        ("nn.Softshrink", None, {"lambd": -1.0}, "lambd >= 0"),
        ("nn.Softmax2d", (2, 3), {}, "3-D or 4-D"),
    ],
)
def test_bad_params_are_model_errors(op_type: str, shape, params: dict, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        layer = make_layer(op_type, shape, **params)
        layer.forward([np.zeros(shape or (2, 2), np.float32)], [None])


def test_prelu_checks_weight_and_channels_at_build() -> None:
    g = Graph()
    a, b = g.add_operand("in"), g.add_operand("out")
    a.shape = (1, 4, 5, 5)
    op = g.add_operator("nn.PReLU", "p", [a], [b], num_parameters=3)
    op.attrs["weight"] = Attribute("f32", (3,), np.ones(3, np.float32))
    with pytest.raises(ModelError, match="3 channels in dim 1"):
        create_layer(op)
    op.params["num_parameters"] = 2
    with pytest.raises(ModelError, match="num_parameters=2"):
        create_layer(op)


@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rows_match_the_reference(dtype: type, scale: float) -> None:
    """The last-axis fast path (no shift up to a max of 80 (scale 1), else one shift for all
    rows (scale 30); row sums by BLAS) against
    softmax_reference: random rows, rows far below the others (redone with their own max),
    huge and tiny scores, rows masked with -inf (an all -inf row is NaN in both, as in torch)."""
    from kuiper_core.layers.activation import SOFTMAX_SPREAD, softmax, softmax_reference

    rng = np.random.default_rng(7)
    x = (rng.standard_normal((2, 4, 65, 65)) * scale).astype(dtype)
    x[0, 0, :, 5:] = -np.inf
    x[0, 1, 3] = -np.inf
    x[1, 3, :9] -= 50  # rows whose max is far below the global one
    fast, ref, inplace = np.empty_like(x), np.empty_like(x), x.copy()
    with np.errstate(invalid="ignore"):  # -inf - -inf in the all -inf row
        softmax(x, fast, 3)
        softmax_reference(x, ref, 3)
        softmax(inplace, inplace, 3)  # in place: the reference path
    assert fast.dtype == dtype
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(ref))
    ok = ~np.isnan(ref)
    # Both round x - shift; the shifts differ by at most SOFTMAX_SPREAD (module docstring).
    u = np.finfo(dtype).eps / 2
    spread = (np.max(x, axis=3, keepdims=True) - np.where(np.isfinite(x), x, 0))[ok]
    bound = (2 * np.abs(spread) + 2 * SOFTMAX_SPREAD + 8) * u * np.abs(ref[ok]) + np.finfo(dtype).tiny
    assert np.all(np.abs(fast[ok] - ref[ok]) <= bound)
    np.testing.assert_array_equal(inplace[ok], ref[ok])
    huge = x.copy()
    huge[1, 2, 7, 9] = 1e30  # a global max this large: the reference path
    softmax(np.nan_to_num(huge, neginf=-1e4), fast, 3)
    np.testing.assert_allclose(fast[1, 2, 7], np.eye(65, dtype=dtype)[9])


@pytest.mark.parametrize(
    "op_type", ["nn.ReLU", "nn.Hardswish", "nn.Hardsigmoid", "nn.SiLU", "nn.GELU", "nn.Sigmoid", "nn.ReLU6"]
)
def test_inplace_safe_layers_give_the_same_values_in_place(op_type: str) -> None:
    """Layers the runtime may run in place (inplace_safe) compute the same values when y is x."""
    layer = make_layer(op_type)
    assert layer.overwritable_inputs() == (0,)
    x = (np.random.default_rng(6).standard_normal((2, 8, 5, 5)) * 4).astype(np.float32)
    expected = layer.forward([x], [None])[0]
    y = x.copy()
    layer.compute(y, y)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_makes_no_subnormal_probabilities(dtype: type, scale: float) -> None:
    """Swin's shifted windows add -100 to masked scores: their probabilities (~e^-100) would be
    float32 subnormals, which the CPU computes 10-25x slower. The fast path makes every
    probability under e times the smallest normal number 0 (off by less than that from the
    float64 value) and leaves the others as the reference's; float64 the same at its scale."""
    from kuiper_core.layers.activation import softmax

    tiny = np.finfo(dtype).tiny
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((2, 3, 49, 49)) * scale).astype(dtype)
    far = 100.0 if dtype == np.float32 else 800.0  # past exp's normal range: -87 / -708
    x[:, 1, :20, 25:] -= far  # a shifted window's mask
    x[1, 2, 5] -= far / 2  # a row far below the others, masked in part too
    x[1, 2, 5, :10] -= far
    fast = np.empty_like(x)
    softmax(x, fast, 3)
    exact = np.exp(x.astype(np.longdouble) - x.max(axis=3, keepdims=True))
    exact /= exact.sum(axis=3, keepdims=True)
    assert np.all((fast == 0) | (fast >= tiny))  # no subnormal
    assert np.count_nonzero(fast == 0) >= 2 * 20 * 24
    made_zero = (fast == 0) & (exact > 0)
    assert np.all(exact[made_zero] < np.e * tiny)
    kept = fast > 0
    err = np.abs(fast[kept] - exact[kept]) / exact[kept]
    assert err.max() < 1e3 * np.finfo(dtype).eps  # the shifts' rounding (see the test above)


def test_small_softmax_is_the_reference_exactly() -> None:
    """Under SOFTMAX_FAST_MIN_ELEMENTS the reference's plain calls run (cheaper there)."""
    from kuiper_core.layers.activation import SOFTMAX_FAST_MIN_ELEMENTS, softmax, softmax_reference

    x = (np.random.default_rng(3).standard_normal((3, 10)) * 5).astype(np.float32)
    assert x.size < SOFTMAX_FAST_MIN_ELEMENTS
    fast, ref = np.empty_like(x), np.empty_like(x)
    softmax(x, fast, 1)
    softmax_reference(x, ref, 1)
    np.testing.assert_array_equal(fast, ref)


@pytest.mark.parametrize("op_type", ["nn.SiLU", "nn.Sigmoid", "nn.Hardswish", "nn.Mish", "nn.Tanh", "nn.ELU"])
def test_big_maps_run_in_blocks_with_the_same_values(op_type: str) -> None:
    """Prepared calls of multi-pass activations run over flat blocks (Elementwise.BLOCK): the
    same values as one whole call, also in place and at a size that is not a multiple."""
    layer = make_layer(op_type)
    shape = (1, 7, 97, 101)  # 68,579 elements: three blocks of 22,860 (the last one short)
    x = (np.random.default_rng(7).standard_normal(shape) * 6).astype(np.float32)
    assert len(layer.blocks(x.size)) == 3
    expected = layer.forward([x], [None])[0]
    y = np.full(shape, np.nan, np.float32)
    f = layer.prepare([x], [y])
    assert f is not None and f.func.__name__ == "_compute_blocks"
    f([x], [y])
    np.testing.assert_array_equal(y, expected)
    if layer.overwritable_inputs():
        z = x.copy()
        f([z], [z])
        np.testing.assert_array_equal(z, expected)
