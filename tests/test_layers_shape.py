"""Shape layers beyond test_ops.py: batch sizes other than the traced one (the reshape
batch rule), views instead of copies, dynamic ($operand) arguments at other shapes, dtypes,
and clear errors for bad params."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper_core
from kuiper_core.errors import ModelError, UnsupportedOperatorError
from layer_testing import assert_close, case_io, check_batch_stacking, graph_of, layer_of


# -- batch > 1 ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "case, parts",
    [
        ("shape_view_batch1_flat", 4),  # shape=(1,36) traced at batch 1 -> (4,36)
        ("shape_reshape_batchdim", 2),  # shape=(2,60) traced at batch 2 -> (4,60)
        ("shape_view_minus1", 3),  # shape=(24,5) traced at batch 2 -> (72,5)
        ("shape_reshape", 2),  # shape=(2,3,20)
        ("shape_view", 2),
        ("shape_flatten", 3),
        ("shape_flatten_mid", 2),
        ("shape_nn_flatten", 2),
        ("shape_transpose", 2),
        ("shape_permute_torch", 2),
        ("shape_squeeze_dim", 2),
        ("shape_squeeze_tuple", 2),
        ("shape_unsqueeze_neg", 2),
        ("shape_unflatten", 2),
        ("shape_slice_multi", 2),
        ("shape_select_slice_multi", 2),
        ("shape_slice_ellipsis", 2),
        ("shape_select_neg", 3),
        ("shape_narrow", 2),
        ("shape_expand", 2),  # sizes=(2,3,4) traced at batch 2 -> (4,3,4)
        ("shape_expand_minus1", 2),
        ("shape_repeat", 2),
        ("shape_to_int", 2),
        ("shape_float", 2),
        ("shape_dyn_reshape", 3),  # shape=(-1,12,1) from a dynamic-shape export
    ],
)
def test_batch_equals_stacked_runs(case: str, parts: int) -> None:
    check_batch_stacking(case, parts)


def test_batch_rule_with_a_hard_coded_head() -> None:
    """x.view(1, 36) -> Linear traced at batch 1: at batch 4 every sample gets its own row."""
    try:
        check_batch_stacking("shape_view_batch1", 4)
    except UnsupportedOperatorError as e:  # nn.Linear lives in another layer family
        pytest.skip(str(e))


def test_permute_moving_the_batch_axis_stacks_along_its_new_place() -> None:
    check_batch_stacking("shape_permute_method", 2, out_axes=[1])  # dims=(3,0,2,1)


def test_reshape_that_cannot_follow_the_batch_is_a_clear_error() -> None:
    # (2,3,4) -> (3,8): shape[0]=3 is not a multiple of the traced batch 2, and no -1.
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(2,3,4)f32",
        "Tensor.reshape r 1 1 0 1 shape=(3,8) #0=(2,3,4)f32 #1=(3,8)f32",
        "pnnx.Output out 1 0 1",
    )
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert np.array_equal(g.forward(x)[0], x.reshape(3, 8))
    with pytest.raises(
        ModelError, match=r"operator 'r'.*cannot reshape an input of shape \(4, 3, 4\) to \(3, 8\).*traced"
    ):
        g.forward(np.zeros((4, 3, 4), np.float32))


def test_dynamic_slice_end_follows_the_operand() -> None:
    """x[:, :y.size(1)] with y narrower than when exported: the end comes from $end."""
    path, (x, y), (exp,) = case_io("shape_dyn_slice_end")
    g = kuiper_core.load(path / "model.pnnx.param")
    assert_close(g.forward(x, y)[0], exp, "traced shapes")
    (out,) = g.forward(x, y[:, :2])
    assert_close(out, exp[:, :2], "y of width 2")


def test_dynamic_select_index_follows_the_operand() -> None:
    path, (x, y), (exp,) = case_io("shape_dyn_select")  # x[:, y.size(1) - 1] * 3
    g = kuiper_core.load(path / "model.pnnx.param")
    assert_close(g.forward(x, y)[0], exp, "traced shapes")
    x_wider = np.concatenate([x, x[:, :1]], axis=1)  # (1, 5, 6): dim 1 is dynamic
    assert_close(g.forward(x_wider, y[:, :1])[0], x[:, 0] * 3, "index 0")


def test_dynamic_expand_takes_sizes_from_the_operand() -> None:
    path, (x, y), (exp,) = case_io("shape_dyn_expand")  # (x*2).expand(y.size(0), -1, -1)
    g = kuiper_core.load(path / "model.pnnx.param")
    (out,) = g.forward(x, np.zeros((5, 3), np.float32))
    assert out.shape == (5, 3, 4)
    assert_close(out, np.broadcast_to(exp[:1], (5, 3, 4)), "5 copies of PyTorch's row")


# -- views, never copies; `out` ignored -----------------------------------------------------------
VIEW_OPS = [
    ("Tensor.reshape r 1 1 0 1 shape=(6,4) #0=(2,3,4)f32 #1=(6,4)f32", "#0=(2,3,4)f32"),
    ("Tensor.view r 1 1 0 1 shape=(2,12) #0=(2,3,4)f32 #1=(2,12)f32", "#0=(2,3,4)f32"),
    ("torch.flatten r 1 1 0 1 end_dim=-1 start_dim=1 #0=(2,3,4)f32 #1=(2,12)f32", "#0=(2,3,4)f32"),
    ("torch.transpose r 1 1 0 1 dim0=1 dim1=2 #0=(2,3,4)f32 #1=(2,4,3)f32", "#0=(2,3,4)f32"),
    ("Tensor.permute r 1 1 0 1 dims=(2,0,1) #0=(2,3,4)f32 #1=(4,2,3)f32", "#0=(2,3,4)f32"),
    ("torch.unsqueeze r 1 1 0 1 dim=1 #0=(2,3,4)f32 #1=(2,1,3,4)f32", "#0=(2,3,4)f32"),
    ("Tensor.slice r 1 1 0 1 dim=2 end=3 start=1 step=1 #0=(2,3,4)f32 #1=(2,3,2)f32", "#0=(2,3,4)f32"),
    ("Tensor.select r 1 1 0 1 dim=1 index=2 #0=(2,3,4)f32 #1=(2,4)f32", "#0=(2,3,4)f32"),
    ("torch.narrow r 1 1 0 1 dim=2 length=2 start=1 #0=(2,3,4)f32 #1=(2,3,2)f32", "#0=(2,3,4)f32"),
    ("Tensor.expand r 1 1 0 1 sizes=(5,2,3,4) #0=(2,3,4)f32 #1=(5,2,3,4)f32", "#0=(2,3,4)f32"),
    ("Tensor.to r 1 1 0 1 copy=False dtype=torch.float #0=(2,3,4)f32 #1=(2,3,4)f32", "#0=(2,3,4)f32"),
    ("Tensor.contiguous r 1 1 0 1 #0=(2,3,4)f32 #1=(2,3,4)f32", "#0=(2,3,4)f32"),
]


@pytest.mark.parametrize("line, shape", VIEW_OPS, ids=[l.split()[0] for l, _ in VIEW_OPS])
def test_view_ops_share_memory_and_leave_out_alone(line: str, shape: str) -> None:
    layer = layer_of(line, shape)
    assert layer.returns_views
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    before = x.copy()
    decoy = np.full(tuple(layer.op.outputs[0].static_shape), -7, np.float32)
    (y,) = layer.forward([x], [decoy])
    assert np.shares_memory(y, x), "expected a view of the input"
    assert (decoy == -7).all(), "a view layer must not write into `out`"
    assert np.array_equal(x, before)


def test_to_with_another_dtype_copies_and_truncates_like_torch() -> None:
    layer = layer_of("Tensor.to r 1 1 0 1 copy=False dtype=torch.long #0=(4)f32 #1=(4)i64", "#0=(4)f32")
    (y,) = layer.forward([np.array([1.7, -1.7, 0.2, -0.2], np.float32)], [None])
    assert y.dtype == np.int64 and y.tolist() == [1, -1, 0, 0]


def test_repeat_writes_into_out_when_it_fits() -> None:
    layer = layer_of("Tensor.repeat r 1 1 0 1 sizes=(2,1,3) #0=(2,3)f32 #1=(2,2,9)f32", "#0=(2,3)f32")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.empty((2, 2, 9), np.float32)
    (y,) = layer.forward([x], [out])
    assert y is out
    assert np.array_equal(y, np.tile(x, (2, 1, 3)))


def test_select_of_a_vector_is_a_0d_array() -> None:
    layer = layer_of("Tensor.select r 1 1 0 1 dim=0 index=-1 #0=(3)f32 #1=()f32", "#0=(3)f32")
    (y,) = layer.forward([np.array([1, 2, 3], np.float32)], [None])
    assert isinstance(y, np.ndarray) and y.shape == () and y.dtype == np.float32 and y == 3


# -- clear errors at build ------------------------------------------------------------------------
BAD = [
    ("Tensor.reshape r 1 1 0 1 shape=(-1,-1) #0=(2,3)f32", "at most one -1"),
    ("Tensor.reshape r 1 1 0 1 #0=(2,3)f32", "missing parameter 'shape'"),
    ("Tensor.permute r 1 1 0 1 dims=(0,1) #0=(2,3,4)f32", "must list all 3 axes"),
    ("Tensor.permute r 1 1 0 1 dims=(0,1,1) #0=(2,3,4)f32", "same axis twice"),
    ("Tensor.slice r 1 1 0 1 dim=1 end=3 start=0 step=0 #0=(2,3)f32", "step on dim 1 must be >= 1"),
    (
        "Tensor.slice r 1 1 0 1 dims=(1,1) ends=(1,2) selects=(2147483647,2147483647) starts=(0,0) steps=(1,1) #0=(2,3)f32",
        "repeat an axis",
    ),
    ("Tensor.slice r 1 1 0 1 dims=(0,1) ends=(1) starts=(0,0) #0=(2,3)f32", "'ends' must have 2 entries"),
    ("Tensor.select r 1 1 0 1 dim=1 #0=(2,3)f32", "missing parameter 'index'"),
    ("Tensor.to r 1 1 0 1 dtype=torch.quint8 #0=(2,3)f32", "must be a torch dtype"),
    ("Tensor.repeat r 1 1 0 1 sizes=(1,-2) #0=(2,3)f32", "repeat sizes must be >= 0"),
    ("Tensor.unflatten r 1 1 0 1 dim=1 sizes=(-1,-1) #0=(2,6)f32", "at most one -1"),
    ("torch.transpose r 1 1 0 1 dim0=1 #0=(2,3)f32", "missing parameter 'dim1'"),
]


@pytest.mark.parametrize("line, message", BAD, ids=[m for _, m in BAD])
def test_bad_params_are_named_at_build(line: str, message: str) -> None:
    with pytest.raises(ModelError, match="operator 'r'") as info:
        layer_of(line, "#0=" + line.split("#0=")[1].split()[0])
    assert message in str(info.value)


BAD_AT_RUN = [
    ("torch.transpose r 1 1 0 1 dim0=1 dim1=3 #0=(2,3)f32", "dim 3 is out of range for a tensor of rank 2"),
    ("Tensor.expand r 1 1 0 1 sizes=(2,5) #0=(2,3)f32", r"cannot expand an input of shape \(2, 3\) to \(2, 5\)"),
    ("Tensor.repeat r 1 1 0 1 sizes=(2) #0=(2,3)f32", "need at least 2"),
    ("Tensor.select r 1 1 0 1 dim=1 index=5 #0=(2,3)f32", r"cannot select from an input of shape \(2, 3\)"),
    ("torch.narrow r 1 1 0 1 dim=1 length=3 start=2 #0=(2,3)f32", "out of range for dim 1 of size 3"),
    ("Tensor.reshape r 1 1 0 1 shape=(4,2) #0=(2,3)f32", r"cannot reshape an input of shape \(2, 3\) to \(4, 2\)"),
]


@pytest.mark.parametrize("line, message", BAD_AT_RUN, ids=[m for _, m in BAD_AT_RUN])
def test_impossible_shapes_are_named_errors(line: str, message: str) -> None:
    layer = layer_of(line, "#0=(2,3)f32")
    with pytest.raises(ModelError, match=message):
        layer.forward([np.zeros((2, 3), np.float32)], [None])
