"""Normalisation layers beyond the op corpus: other batch sizes and shapes than declared,
ill-conditioned inputs, the buffer contract, and parameter validation.

References come from PyTorch (skipped when torch is not installed).
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.errors import ModelError
from kuiper_core.graph import Attribute, Graph
from kuiper_core.layers.registry import create_layer


def make_layer(op_type: str, in_shape: tuple | None, weights: dict | None = None, **params):
    g = Graph()
    a, b = g.add_operand("in"), g.add_operand("out")
    a.shape = in_shape
    op = g.add_operator(op_type, "op", [a], [b], **params)
    for key, value in (weights or {}).items():
        value = np.asarray(value, np.float32)
        op.attrs[key] = Attribute("f32", tuple(value.shape), value)
    return create_layer(op)


def run(layer, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return layer.forward([x], [out])[0]


def rand(*shape: int, seed: int = 0, loc: float = 0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 2 + loc).astype(np.float32)


def test_batchnorm_folds_at_build_and_runs_any_batch() -> None:
    torch = pytest.importorskip("torch")
    bn = torch.nn.BatchNorm2d(4, eps=1e-3).eval()
    with torch.no_grad():
        for p in (bn.weight, bn.bias, bn.running_mean):
            p.copy_(torch.randn(4))
        bn.running_var.copy_(torch.rand(4) + 0.1)
    w = {k: v.detach().numpy() for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    layer = make_layer("nn.BatchNorm2d", (2, 4, 5, 6), w, num_features=4, eps=1e-3, affine=True)
    assert layer.scale.dtype == np.float32 and layer.scale.shape == (4,)  # folded once
    for shape in [(2, 4, 5, 6), (7, 4, 3, 1)]:
        x = rand(*shape)
        out = np.empty(shape, np.float32)
        y = run(layer, x, out)
        assert y is out
        np.testing.assert_allclose(y, bn(torch.from_numpy(x)).detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("loc", [0.0, 1e3])
def test_layernorm_groupnorm_instancenorm_match_torch(loc: float) -> None:
    torch = pytest.importorskip("torch")
    x = rand(3, 6, 4, 5, loc=loc)  # a large mean must not cost precision
    cases = [
        (
            "nn.LayerNorm",
            torch.nn.LayerNorm((4, 5)),
            {"normalized_shape": [4, 5], "eps": 1e-5, "elementwise_affine": True},
        ),
        ("nn.GroupNorm", torch.nn.GroupNorm(3, 6), {"num_groups": 3, "num_channels": 6, "eps": 1e-5, "affine": True}),
        (
            "nn.InstanceNorm2d",
            torch.nn.InstanceNorm2d(6, affine=True),
            {"num_features": 6, "eps": 1e-5, "affine": True, "track_running_stats": False},
        ),
        (
            "nn.RMSNorm",
            torch.nn.RMSNorm(5, eps=1e-6),
            {"normalized_shape": [5], "eps": 1e-6, "elementwise_affine": True},
        ),
    ]
    for op_type, module, params in cases:
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.rand_like(p) + 0.5)
        w = {k: v.detach().numpy() for k, v in module.state_dict().items()}
        layer = make_layer(op_type, (2, 6, 4, 5), w, **params)  # declared batch 2, run with 3
        # torch in float64 as the reference: float32 torch is itself off by ~5e-5 at loc=1e3.
        ref = module.double()(torch.from_numpy(x).double()).detach().numpy()
        np.testing.assert_allclose(run(layer, x), ref, atol=2e-5 * max(1.0, float(np.abs(ref).max())), err_msg=op_type)


def test_instancenorm_unbatched_and_tracked_stats() -> None:
    torch = pytest.importorskip("torch")
    m = torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True).eval()
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(3))
        m.running_var.copy_(torch.rand(3) + 0.5)
        m.weight.copy_(torch.rand(3) + 0.5)
    w = {k: v.detach().numpy() for k, v in m.state_dict().items() if k != "num_batches_tracked"}
    layer = make_layer("nn.InstanceNorm1d", None, w, num_features=3, eps=1e-5, affine=True, track_running_stats=True)
    for shape in [(2, 3, 7), (3, 7)]:  # batched and unbatched
        x = rand(*shape)
        np.testing.assert_allclose(run(layer, x), m(torch.from_numpy(x)).detach().numpy(), atol=1e-5)


def test_local_response_norm_matches_torch_for_even_and_odd_sizes() -> None:
    torch = pytest.importorskip("torch")
    x = rand(2, 7, 3, 4)
    for size in (1, 2, 3, 4, 9):
        layer = make_layer("nn.LocalResponseNorm", x.shape, size=size, alpha=0.1, beta=0.75, k=1.0)
        ref = torch.nn.functional.local_response_norm(torch.from_numpy(x), size, 0.1, 0.75, 1.0).numpy()
        np.testing.assert_allclose(run(layer, x), ref, rtol=1e-5, atol=1e-6)


def test_functional_norms_read_tensor_inputs() -> None:
    torch = pytest.importorskip("torch")
    g = Graph()
    names = ["x", "m", "v", "w", "b"]
    ops = [g.add_operand(n) for n in names]
    y = g.add_operand("y")
    op = g.add_operator("F.batch_norm", "bn", ops, [y], eps=1e-3)
    op.input_names = ["input", "running_mean", "running_var", "weight", "bias"]
    layer = create_layer(op)
    x = rand(2, 3, 4)
    m, v, w, b = rand(3, seed=1), np.abs(rand(3, seed=2)) + 0.1, rand(3, seed=3), rand(3, seed=4)
    got = layer.forward([x, m, v, w, b], [None])[0]
    t = [torch.from_numpy(a) for a in (x, m, v, w, b)]
    ref = torch.nn.functional.batch_norm(t[0], t[1], t[2], t[3], t[4], False, 0.1, 1e-3).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize(
    "op_type, shape, weights, params, message",
    [
        (
            "nn.BatchNorm2d",
            (1, 4, 2, 2),
            {"running_mean": np.zeros(3), "running_var": np.ones(3)},
            {"num_features": 4},
            "4 entries",
        ),
        (
            "nn.BatchNorm2d",
            (1, 3, 2, 2),
            {"running_mean": np.zeros(4), "running_var": np.ones(4)},
            {"num_features": 4},
            "4 channels",
        ),
        ("nn.BatchNorm1d", (1, 4), {"running_var": np.ones(4)}, {"num_features": 4}, "missing weight '@running_mean'"),
        (
            "nn.BatchNorm1d",
            (1, 4),
            {"running_mean": np.zeros(4), "running_var": np.ones(4)},
            {"num_features": 4, "affine": True},
            "affine=True",
        ),
        ("nn.GroupNorm", (1, 6, 2, 2), {}, {"num_groups": 4}, "do not split"),
        ("nn.GroupNorm", (1, 6, 2, 2), {}, {"num_groups": 0}, "num_groups >= 1"),
        ("nn.LayerNorm", (1, 4, 5), {}, {"normalized_shape": [4]}, "ending in dims"),
        ("nn.LayerNorm", (1, 4, 5), {"weight": np.ones(4)}, {"normalized_shape": [5]}, "@weight of shape"),
        ("nn.LayerNorm", (1, 4, 5), {}, {"normalized_shape": [5], "eps": "small"}, "must be a number"),
        ("nn.InstanceNorm2d", (1, 4, 5), {}, {"num_features": 3}, "expected 3 channels"),
        ("nn.InstanceNorm2d", (4, 5), {}, {"num_features": 4}, "4-D"),
        ("nn.LocalResponseNorm", (4, 5), {}, {"size": 3}, "rank >= 3"),
        ("F.layer_norm", (1, 4, 5), {}, {"normalized_shape": [5], "weight": 3}, "input tensor"),
    ],
)
def test_bad_models_are_model_errors(op_type, shape, weights, params, message) -> None:
    with pytest.raises(ModelError, match=message):
        make_layer(op_type, shape, weights, **params)


@pytest.mark.parametrize("shape", [(1, 65, 64), (300, 256, 8)])  # small: weights expanded; big: broadcast
@pytest.mark.parametrize("op_type", ["nn.LayerNorm", "nn.RMSNorm"])
def test_trailing_norm_prepared_matches_forward(op_type: str, shape: tuple[int, ...]) -> None:
    size = shape[-1]
    w, b = rand(size, seed=1), rand(size, seed=2)
    weights = {"weight": w, "bias": b} if op_type == "nn.LayerNorm" else {"weight": w}
    layer = make_layer(op_type, shape, weights, normalized_shape=[size], eps=1e-5, elementwise_affine=True)
    x = rand(*shape, loc=1e3)
    expected = run(layer, x)
    y = np.full(shape, np.nan, np.float32)
    f = layer.prepare([x], [y])
    assert f is not None
    f([x], [y])
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("scale", [1e18, 1e19, 1e20])
def test_layernorm_on_huge_values_gives_pytorchs_answer_without_warnings(scale: float) -> None:
    """Issue 35: rows of ±scale over 6 elements. PyTorch 2.13's layer_norm sums the squared
    deviations and divides by n: 6e36 normalises to ±1, 6e38 and (1e20)^2 pass float32's range,
    the variance is inf and the row normalises to 0 (the output is the bias). The engine gave
    ±1 at 1e19 and a RuntimeWarning at 1e20; it computes as torch does, silently."""
    import warnings

    x = np.where(np.arange(2 * 3 * 6).reshape(2, 3, 6) % 2, scale, -scale).astype(np.float32)
    w, b = rand(6, seed=1), rand(6, seed=2)
    layer = make_layer("nn.LayerNorm", x.shape, {"weight": w, "bias": b}, normalized_shape=[6], eps=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = run(layer, x)
    expected = np.broadcast_to(b, x.shape) if scale > 1e18 else np.sign(x) * w + b
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    torch = pytest.importorskip("torch")
    ln = torch.nn.LayerNorm(6)
    with torch.no_grad():
        ln.weight.copy_(torch.from_numpy(w))
        ln.bias.copy_(torch.from_numpy(b))
        np.testing.assert_allclose(y, ln(torch.from_numpy(x)).numpy(), rtol=1e-6, atol=1e-6)
