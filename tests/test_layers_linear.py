"""Matrix-product layers beyond the op corpus: batch stacking of the linear_ cases whose
dim 0 is a batch, clear errors for shapes that do not fit, buffers, FLOPs, and torch.matmul's
rank/broadcast rules against torch (needs torch; skipped without it)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import OPS
from kuiper_core.errors import KuiperError, ModelError
from kuiper_core.graph import Attribute, Graph
from kuiper_core.layers.registry import create_layer
from layer_testing import assert_close, check_batch_stacking

# Cases whose first input's dim 0 is not a batch the outputs stack along (linear_addmm adds row 0 of its input).
NOT_BATCHABLE = {
    "linear_addmm",
    "linear_1d_input",
    "linear_matmul_1d_1d",
    "linear_matmul_1d_2d",
    "linear_matmul_1d_nd",
    "linear_matmul_2d_nd",
}
CASES = sorted(p.name for p in OPS.glob("linear_*") if p.name not in NOT_BATCHABLE)


@pytest.mark.parametrize("case", CASES)
def test_batch_stacking(case: str) -> None:
    check_batch_stacking(case)


def make_layer(op_type: str, n_inputs: int, names: list[str] | None = None, weights: dict | None = None, **params):
    g = Graph()
    op = g.add_operator(
        op_type, "mm", [g.add_operand(f"in{i}") for i in range(n_inputs)], [g.add_operand("out")], **params
    )
    if names is not None:
        op.input_names = names
    for key, data in (weights or {}).items():
        op.attrs[key] = Attribute("f32", data.shape, data)
    return create_layer(op)


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_linear_checks_weights_and_input() -> None:
    with pytest.raises(ModelError, match=r"weight shape \(4, 5\): expected \(out_features, in_features\) = \(5, 4\)"):
        make_layer("nn.Linear", 1, weights={"weight": f32(4, 5)}, in_features=4, out_features=5, bias=False)
    with pytest.raises(ModelError, match=r"bias shape \(3,\)"):
        make_layer(
            "nn.Linear", 1, weights={"weight": f32(4, 5), "bias": f32(3)}, in_features=5, out_features=4, bias=True
        )
    layer = make_layer("nn.Linear", 1, weights={"weight": f32(4, 5)}, in_features=5, out_features=4, bias=False)
    with pytest.raises(KuiperError, match="last dim must be in_features = 5"):
        layer.forward([f32(2, 6)], [None])
    assert layer.flops([(2, 3, 5)], [(2, 3, 4)]) == 2 * 3 * 4 * 5


def test_linear_writes_the_buffer() -> None:
    w, b = f32(4, 5), f32(4)
    layer = make_layer("nn.Linear", 1, weights={"weight": w, "bias": b}, in_features=5, out_features=4, bias=True)
    x = f32(2, 3, 5)
    buf = np.empty((2, 3, 4), np.float32)
    (y,) = layer.forward([x], [buf])
    assert y is buf and y.dtype == np.float32
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, 5), (1, 1, 5), (2, 3, 5), (40000, 5)])  # one row: W @ x; many: expanded bias
def test_linear_prepared_matches_forward(shape: tuple[int, ...], bias: bool) -> None:
    w, b = f32(4, 5), f32(4)
    layer = make_layer(
        "nn.Linear",
        1,
        weights={"weight": w, "bias": b} if bias else {"weight": w},
        in_features=5,
        out_features=4,
        bias=bias,
    )
    x = f32(*shape)
    expected = layer.forward([x], [None])[0]
    y = np.full(expected.shape, np.nan, np.float32)
    f = layer.prepare([x], [y])
    assert f is not None
    f([x], [y])
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, x @ w.T + (b if bias else 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "op_type, shapes, message",
    [
        ("torch.matmul", [(3, 5), (4, 2)], r"cannot multiply shapes \(3, 5\) and \(4, 2\)"),
        ("torch.matmul", [(2, 3, 5), (3, 5, 2)], "cannot multiply"),
        ("torch.mm", [(2, 3, 5), (5, 2)], "cannot multiply"),
        ("torch.bmm", [(2, 3, 5), (3, 5, 2)], "cannot multiply"),
    ],
)
def test_products_reject_shapes_that_do_not_fit(op_type: str, shapes, message: str) -> None:
    names = ["input", "other"] if op_type == "torch.matmul" else ["input", "mat2"]
    layer = make_layer(op_type, 2, names)
    with pytest.raises(ModelError, match=message):
        layer.forward([f32(*s) for s in shapes], [None])


def test_missing_named_input() -> None:
    with pytest.raises(ModelError, match=r"missing input \$mat2"):
        make_layer("torch.bmm", 2, ["input", "other"])


def test_matmul_rank_rules_match_torch() -> None:
    torch = pytest.importorskip("torch")
    shapes = [(5,), (3, 5), (2, 3, 5), (2, 1, 3, 5), (1, 3, 5)]
    others = [(5,), (5, 4), (2, 5, 4), (4, 1, 5, 4), (1, 5, 4)]
    layer = make_layer("torch.matmul", 2, ["input", "other"])
    for i, (a_shape, b_shape) in enumerate(itertools.product(shapes, others)):
        a, b = f32(*a_shape, seed=i), f32(*b_shape, seed=100 + i)
        try:
            ref = torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        except RuntimeError:
            with pytest.raises(ModelError):
                layer.forward([a, b], [None])
            continue
        (y,) = layer.forward([a, b], [None])
        assert isinstance(y, np.ndarray) and y.dtype == np.float32
        assert_close(y, ref, f"matmul {a_shape} @ {b_shape}")
        # and into a preallocated buffer (not for the 0-d result)
        if ref.ndim:
            buf = np.empty(ref.shape, np.float32)
            (y2,) = layer.forward([a, b], [buf])
            assert y2 is buf
            assert_close(y2, ref, f"matmul {a_shape} @ {b_shape} into a buffer")


def test_addmm_beta_zero_ignores_nan_input() -> None:
    layer = make_layer("torch.addmm", 3, ["input", "mat1", "mat2"], alpha=2.0, beta=0)
    a, b = f32(3, 5), f32(5, 4)
    (y,) = layer.forward([np.full((3, 4), np.nan, np.float32), a, b], [None])
    np.testing.assert_allclose(y, 2 * (a @ b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "op_type, shapes",
    [
        ("torch.matmul", [(1, 4, 65, 16), (1, 4, 16, 65)]),
        ("torch.matmul", [(2, 3, 5), (5, 4)]),  # N-D @ 2-D: one flattened GEMM
        ("torch.matmul", [(3, 5), (2, 5, 4)]),
        ("torch.mm", [(3, 5), (5, 4)]),
        ("torch.bmm", [(2, 3, 5), (2, 5, 4)]),
    ],
)
def test_products_prepared_match_forward(op_type: str, shapes: list[tuple[int, ...]]) -> None:
    layer = make_layer(op_type, 2)
    a, b = f32(*shapes[0], seed=1), f32(*shapes[1], seed=2)
    expected = layer.forward([a, b], [None])[0]
    y = np.full(expected.shape, np.nan, np.float32)
    f = layer.prepare([a, b], [y])
    assert f is not None
    f([a, b], [y])
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)


def test_addmm_is_not_prepared_as_a_plain_product() -> None:
    layer = make_layer("torch.addmm", 3, alpha=1, beta=1)
    assert layer.prepare([f32(3, 4), f32(3, 5), f32(5, 4)], [np.empty((3, 4), np.float32)]) is None
