"""Reductions and clamp beyond test_ops.py: batch sizes other than the traced one,
two-output max/min, 0-d results and their dtypes, NaN handling, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper_core
from kuiper_core.errors import ModelError
from layer_testing import case_io, check_batch_stacking, layer_of

# Every exported reduce_ case whose reduction leaves dim 0 alone.
PER_SAMPLE = [
    "reduce_mean",
    "reduce_mean_keepdim",
    "reduce_mean_neg",
    "reduce_sum",
    "reduce_sum_keepdim",
    "reduce_sum_int",
    "reduce_prod",
    "reduce_prod_keepdim",
    "reduce_max_dim",
    "reduce_max_keepdim",
    "reduce_max_values",
    "reduce_max_indices",
    "reduce_min_dim",
    "reduce_min_keepdim",
    "reduce_amax",
    "reduce_amax_keepdim",
    "reduce_amin",
    "reduce_argmax",
    "reduce_argmax_keepdim",
    "reduce_argmin",
    "reduce_clamp",
    "reduce_clamp_min",
    "reduce_clamp_max",
    "reduce_clamp_method",
    "reduce_clip",
    "reduce_clamp_tensor",
    "reduce_clamp_repeated",
    "reduce_norm",
    "reduce_norm_p1",
    "reduce_norm_p3",
    "reduce_norm_fro",
    "reduce_norm_inf",
    "reduce_linalg_vector_norm",
    "reduce_std",
    "reduce_std_unbiased_false",
    "reduce_var",
    "reduce_var_correction",
    "reduce_logsumexp",
]


@pytest.mark.parametrize("case", PER_SAMPLE)
def test_batch_equals_stacked_runs(case: str) -> None:
    check_batch_stacking(case, 3)


@pytest.mark.parametrize(
    "case",
    ["reduce_mean_all", "reduce_sum_all", "reduce_max_all", "reduce_min_all", "reduce_argmax_all", "reduce_norm_all"],
)
def test_reductions_over_everything_give_pytorchs_dtype(case: str) -> None:
    """Their 0-d result has no `#` annotation, so the runtime cannot check its dtype."""
    path, ins, exp = case_io(case)
    g = kuiper_core.load(path / "model.pnnx.param")
    ys = g.forward(*ins)
    assert [y.dtype for y in ys] == [e.dtype for e in exp]
    zero_d = [ev.outputs for ev in g.steps(*ins) if ev.type.startswith("torch.")]
    for outputs in zero_d:
        for v in outputs.values():
            assert isinstance(v, np.ndarray) and v.shape == ()


def test_max_with_dim_gives_values_and_int64_indices() -> None:
    path, ins, (values, indices) = case_io("reduce_max_dim")
    g = kuiper_core.load(path / "model.pnnx.param")
    v, i = g.forward(*ins)
    assert v.dtype == np.float32 and i.dtype == np.int64
    assert np.array_equal(i, indices) and np.array_equal(v, values)


def test_clamp_keeps_nan_and_min_above_max_gives_max() -> None:
    layer = layer_of("torch.clamp c 1 1 0 1 max=0.5 min=1.0 $input=0 #0=(3)f32 #1=(3)f32", "#0=(3)f32")
    (y,) = layer.forward([np.array([np.nan, -2.0, 2.0], np.float32)], [None])
    assert y.dtype == np.float32
    assert np.isnan(y[0]) and y[1:].tolist() == [0.5, 0.5]  # torch.clamp semantics


def test_clamp_uses_out_when_given() -> None:
    layer = layer_of("torch.clamp c 1 1 0 1 max=None min=0.0 $input=0 #0=(3)f32 #1=(3)f32", "#0=(3)f32")
    out = np.empty(3, np.float32)
    (y,) = layer.forward([np.array([-1.0, 0.5, 2.0], np.float32)], [out])
    assert y is out and y.tolist() == [0.0, 0.5, 2.0]


def test_sum_of_float32_stays_float32() -> None:
    layer = layer_of("torch.sum s 1 1 0 1 dim=(1) keepdim=False $input=0 #0=(2,3)f32 #1=(2)f32", "#0=(2,3)f32")
    (y,) = layer.forward([np.ones((2, 3), np.float32)], [None])
    assert y.dtype == np.float32 and y.tolist() == [3.0, 3.0]


BAD = [
    ("torch.mean r 1 1 0 1 dim=(1,1) keepdim=False #0=(2,3)f32", "repeats an axis"),
    ("torch.sum r 1 1 0 1 dim=abc #0=(2,3)f32", "must be an int, a tuple of ints or None"),
    ("torch.norm r 1 1 0 1 dim=(1) keepdim=False p=nuc #0=(2,3)f32", "matrix norms like 'nuc' are not supported"),
    ("torch.max r 1 2 0 1 2 #0=(2,3)f32", "without dim it has one output, the graph declares 2"),
    ("torch.max r 1 3 0 1 2 3 dim=1 keepdim=False #0=(2,3)f32", "expected 1 output (values) or 2"),
    ("torch.argmax r 1 1 0 1 dim=(0,1) keepdim=False #0=(2,3)f32", "parameter 'dim' must be an int"),
    ("torch.clamp r 1 1 0 1 max=(1,2) min=None #0=(2,3)f32", "parameter 'max' must be a number or None"),
    ("torch.var r 1 1 0 1 dim=(1) keepdim=False unbiased=abc #0=(2,3)f32", "must be a bool or a number"),
]


@pytest.mark.parametrize("line, message", BAD, ids=[m for _, m in BAD])
def test_bad_params_are_named_at_build(line: str, message: str) -> None:
    with pytest.raises(ModelError, match="operator 'r'") as info:
        layer_of(line, "#0=(2,3)f32")
    assert message in str(info.value)


def test_dim_out_of_range_is_named_at_run() -> None:
    layer = layer_of("torch.mean r 1 1 0 1 dim=(3) keepdim=False #0=(2,3)f32", "#0=(2,3)f32")
    with pytest.raises(ModelError, match="operator 'r'.*dim 3 is out of range for a tensor of rank 2"):
        layer.forward([np.zeros((2, 3), np.float32)], [None])


def test_clamp_takes_an_infinite_bound_as_pnnx_writes_it() -> None:
    """ONNX `Clip(x, 1e-10, +inf)` (openwakeword's melspectrogram.onnx) becomes `max=inf`:
    the bare string pnnx writes for an infinity is the bound, not an error."""
    layer = layer_of("torch.clamp c 1 1 0 1 max=inf min=1.000000e-10 $input=0 #0=(3)f32 #1=(3)f32", "#0=(3)f32")
    (y,) = layer.forward([np.array([-1.0, 0.0, 3e38], np.float32)], [None])
    assert y.tolist() == np.float32([1e-10, 1e-10, 3e38]).tolist()
    layer = layer_of("torch.clamp c 1 1 0 1 max=2 min=-inf $input=0 #0=(2)i64 #1=(2)i64", "#0=(2)i64")
    (y,) = layer.forward([np.array([-(2**62), 5])], [None])
    assert y.dtype == np.int64 and y.tolist() == [-(2**62), 2]


def test_clamp_refuses_a_bound_that_is_not_a_number() -> None:
    with pytest.raises(ModelError, match="parameter 'max' must be a number"):
        layer_of("torch.clamp c 1 1 0 1 max=high min=0.0 $input=0 #0=(3)f32 #1=(3)f32", "#0=(3)f32")
