"""Pooling layers beyond the op corpus: batch stacking of every pool_ case, clear errors,
the tuple form of max-with-indices, and sweeps against torch over random kernels, strides,
paddings, dilations, ceil_mode and adaptive sizes (needs torch; skipped without it)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from conftest import OPS
from kuiper_core.errors import ModelError
from kuiper_core.graph import Graph
from kuiper_core.layers.registry import create_layer
from layer_testing import assert_close, case_io, check_batch_stacking

NOT_BATCHABLE = {"pool_max2d_unbatched"}
CASES = sorted(p.name for p in OPS.glob("pool_*") if p.name not in NOT_BATCHABLE)


@pytest.mark.parametrize("case", CASES)
def test_batch_stacking(case: str) -> None:
    check_batch_stacking(case)


def pool_layer(op_type: str, n_outputs: int = 1, **params):
    g = Graph()
    op = g.add_operator(
        op_type, "pool", [g.add_operand("in")], [g.add_operand(f"out{i}") for i in range(n_outputs)], **params
    )
    return create_layer(op)


def x32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_tuple_form_of_indices() -> None:
    """nn.AdaptiveMaxPool2d(return_indices=True) is one tuple output that prim::TupleUnpack splits."""
    _, (x,), (values, indices) = case_io("pool_adaptive_max2d_indices")
    layer = pool_layer("nn.AdaptiveMaxPool2d", output_size=[4, 3], return_indices=True)
    ((y, i),) = layer.forward([x], [None])
    assert_close(y, values, "values")
    assert i.dtype == np.int64
    np.testing.assert_array_equal(i, indices)


@pytest.mark.parametrize(
    "op_type, params, message",
    [
        ("nn.MaxPool2d", dict(kernel_size=[3, 3], stride=[1, 1], padding=[2, 2]), "at most half of kernel_size"),
        ("nn.MaxPool2d", dict(kernel_size=[0, 3]), "must be >= 1"),
        ("nn.AvgPool2d", dict(kernel_size=[2, 2], divisor_override=0), "divisor_override"),
        ("nn.AdaptiveAvgPool2d", dict(output_size=[2, -1]), "output_size"),
        ("nn.AdaptiveAvgPool2d", dict(), "missing parameter 'output_size'"),
    ],
)
def test_bad_params(op_type: str, params: dict, message: str) -> None:
    with pytest.raises(ModelError, match="operator 'pool'") as e:
        pool_layer(op_type, **params)
    assert message in str(e.value)


def test_indices_need_two_outputs_or_a_tuple() -> None:
    with pytest.raises(ModelError, match="return_indices=False cannot give 2 outputs"):
        pool_layer("nn.MaxPool2d", n_outputs=2, kernel_size=[2, 2], return_indices=False)


def test_kernel_larger_than_input() -> None:
    layer = pool_layer("nn.MaxPool2d", kernel_size=[5, 5], stride=[1, 1], padding=[0, 0])
    with pytest.raises(ModelError, match="does not fit"):
        layer.forward([x32(1, 2, 3, 8)], [None])


def test_max_pool_keeps_nan_and_writes_the_buffer() -> None:
    x = x32(1, 2, 6, 6)
    x[0, 1, 2, 3] = np.nan
    layer = pool_layer("nn.MaxPool2d", kernel_size=[2, 2], stride=[2, 2], padding=[0, 0])
    buf = np.empty((1, 2, 3, 3), np.float32)
    (y,) = layer.forward([x], [buf])
    assert y is buf
    assert np.isnan(y[0, 1, 1, 1]) and np.isnan(y).sum() == 1


# -- sweeps against torch ----------------------------------------------------------------------


@pytest.mark.slow
def test_window_pool_sweep_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = random.Random(3)
    checked = 0
    for _ in range(400):
        dims = rng.choice([1, 2])
        kind = rng.choice(["max", "avg"])
        k = [rng.randint(1, 4) for _ in range(dims)]
        s = [rng.randint(1, 3) for _ in range(dims)]
        p = [rng.randint(0, kk // 2) for kk in k]
        d = [rng.randint(1, 2) for _ in range(dims)] if kind == "max" else [1] * dims
        ceil = rng.random() < 0.5
        shape = (rng.randint(1, 2), rng.randint(1, 3)) + tuple(rng.randint(1, 12) for _ in range(dims))
        x = x32(*shape, seed=checked)
        if kind == "max":
            params = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil, return_indices=False)
            call = lambda t: getattr(F, f"max_pool{dims}d")(t, k, s, p, d, ceil_mode=ceil)  # noqa: E731
        else:
            cip = rng.random() < 0.5
            extra = dict(divisor_override=rng.randint(1, 5)) if dims == 2 and rng.random() < 0.3 else {}
            params = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=cip, **extra)
            call = lambda t: getattr(F, f"avg_pool{dims}d")(t, k, s, p, ceil, cip, **extra)  # noqa: E731
        layer = pool_layer(f"nn.{kind.capitalize()}Pool{dims}d", **params)
        try:
            ref = call(torch.from_numpy(x)).numpy()
        except RuntimeError:  # the output would be empty: torch refuses, and so must we
            with pytest.raises(ModelError):
                layer.forward([x], [None])
            continue
        (y,) = layer.forward([x], [None])
        assert_close(y, ref, f"{kind}pool{dims}d {params} x{shape}")
        checked += 1
    assert checked > 300


@pytest.mark.slow
def test_adaptive_pool_sweep_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = random.Random(5)
    for i in range(200):
        dims = rng.choice([1, 2])
        shape = (rng.randint(1, 2), rng.randint(1, 3)) + tuple(rng.randint(1, 13) for _ in range(dims))
        out = [rng.randint(1, 15) for _ in range(dims)]
        x = x32(*shape, seed=i)
        kind = rng.choice(["avg", "max"])
        fn = getattr(F, f"adaptive_{kind}_pool{dims}d")
        if kind == "max":
            ref, ref_idx = (t.numpy() for t in fn(torch.from_numpy(x), out, return_indices=True))
            layer = pool_layer(f"F.adaptive_max_pool{dims}d", n_outputs=2, output_size=out, return_indices=True)
            y, idx = layer.forward([x], [None, None])
            np.testing.assert_array_equal(idx, ref_idx)
        else:
            ref = fn(torch.from_numpy(x), out).numpy()
            (y,) = pool_layer(f"nn.AdaptiveAvgPool{dims}d", output_size=out).forward([x], [None])
        assert_close(y, ref, f"adaptive {kind} {out} x{shape}")


@pytest.mark.parametrize("flat_min", [0, 1 << 30])
def test_window_pool_matches_its_reference(monkeypatch: pytest.MonkeyPatch, flat_min: int) -> None:
    """Both pooling paths (the phase/flat-offset `_reduce` for any size, `_reduce_small`'s
    strided views for every strided pool) against the readable reference (combine over a
    strided view of every window): max exactly (NaN too), average to rounding. Runs without
    torch; strides up to 3 make row phases, dilation their offsets."""
    import kuiper_core.layers.pool as pool
    from kuiper_core.layers.pool import window_pool_reference
    from kuiper_core.layers.windows import pad_spatial

    monkeypatch.setattr(pool, "POOL_FLAT_MIN", flat_min)

    rng = random.Random(5)
    for case in range(300):
        kind = rng.choice(["max", "avg"])
        k = [rng.randint(1, 5) for _ in range(2)]
        s = [rng.randint(1, 3) for _ in range(2)]
        p = [rng.randint(0, kk // 2) for kk in k]
        d = [rng.randint(1, 3) for _ in range(2)] if kind == "max" else [1, 1]
        ceil = rng.random() < 0.3
        shape = (rng.randint(1, 2), rng.randint(1, 5), rng.randint(1, 14), rng.randint(1, 14))
        x = x32(*shape, seed=case)
        if rng.random() < 0.2:
            x.reshape(-1)[rng.randrange(x.size)] = np.nan
        params = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil)
        if kind == "max":
            params.update(dilation=d, return_indices=False)
        layer = pool_layer(f"nn.{kind.capitalize()}Pool2d", **params)
        try:
            pads, out_hw = layer._geometry(shape[0] * shape[1], *shape[2:])
        except ModelError:
            continue
        combine, fill = (np.maximum, -np.inf) if kind == "max" else (np.add, 0.0)
        xp = pad_spatial(x, pads, value=fill).copy()
        ref = window_pool_reference(xp, tuple(k), tuple(s), tuple(d), out_hw, combine)
        (y,) = layer.forward([x], [None])
        where = f"{kind} {params} x{shape}"
        if kind == "max":
            np.testing.assert_array_equal(y, ref, err_msg=where)
        else:
            ref = ref * layer._scale(*shape[2:], out_hw, x.dtype)
            np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6, err_msg=where)
