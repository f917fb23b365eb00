"""Tensor ops beyond test_ops.py: batch sizes other than the traced one, multi-output
splitters (views, piece counts), factories at dynamic shapes, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper_core
from kuiper_core.errors import ModelError
from layer_testing import assert_close, case_io, check_batch_stacking, graph_of, layer_of


@pytest.mark.parametrize(
    "case, parts",
    [
        ("tensor_cat", 2),
        ("tensor_cat_neg", 3),
        # a constant folded at the traced batch meets batch-sized tokens (the cat batch rule)
        ("tensor_cat_cls_batch1", 4),
        ("tensor_cat_cls_batch2", 3),
        ("tensor_stack", 2),
        ("tensor_stack_neg", 2),
        ("tensor_chunk", 2),
        ("tensor_chunk_uneven", 3),
        ("tensor_chunk_method", 2),
        ("tensor_split_int", 2),
        ("tensor_split_list", 2),
        ("tensor_split_method", 2),
        ("tensor_tensor_split", 2),
        ("tensor_tensor_split_indices", 2),
        ("tensor_unbind", 3),
        ("tensor_where", 2),
        ("tensor_where_broadcast", 2),  # the (1,3,1) operand is shared, not batched
        ("tensor_where_scalar_other", 2),
        ("tensor_where_scalar_self", 2),
        ("tensor_where_scalars", 2),
        ("tensor_where_bool_cast", 2),
        ("tensor_where_same_operand", 2),
        ("tensor_gt", 2),
        ("tensor_lt_tensor", 2),
        ("tensor_ge", 2),
        ("tensor_le_int", 2),
        ("tensor_eq", 2),
        ("tensor_ne_tensor", 2),
        # factories from dynamic-shape exports: sizes come from `[size(@0,0),3]` operands
        ("tensor_zeros", 3),
        ("tensor_ones", 3),
        ("tensor_full", 3),
        ("tensor_ones_like", 3),
        ("tensor_zeros_like", 3),
        ("tensor_full_like", 3),
        ("tensor_new_zeros", 3),
        ("tensor_new_ones", 3),
    ],
)
def test_batch_equals_stacked_runs(case: str, parts: int) -> None:
    check_batch_stacking(case, parts)


def test_cat_along_the_batch_axis_is_not_tiled() -> None:
    g = graph_of(
        "pnnx.Input a 0 1 0 #0=(1,3)f32",
        "pnnx.Input b 0 1 1 #1=(1,3)f32",
        "torch.cat c 2 1 0 1 2 dim=0 #0=(1,3)f32 #1=(1,3)f32 #2=(2,3)f32",
        "pnnx.Output out 1 0 2",
    )
    x, y = np.zeros((4, 3), np.float32), np.ones((1, 3), np.float32)
    assert g.forward(x, y)[0].shape == (5, 3)


def test_cat_of_unrelated_batch_sizes_is_a_named_error() -> None:
    g = graph_of(
        "pnnx.Input a 0 1 0 #0=(2,3)f32",
        "pnnx.Input b 0 1 1 #1=(2,3)f32",
        "torch.cat c 2 1 0 1 2 dim=1 #0=(2,3)f32 #1=(2,3)f32 #2=(2,6)f32",
        "pnnx.Output out 1 0 2",
    )
    with pytest.raises(ModelError, match=r"operator 'c'.*cannot concatenate shapes \[\(4, 3\), \(3, 3\)\]"):
        g.forward(np.zeros((4, 3), np.float32), np.zeros((3, 3), np.float32))


def test_unbind_of_the_batch_axis_needs_the_traced_batch() -> None:
    path, ins, exp = case_io("tensor_unbind_batch")  # x.unbind(0) of a (3,4) input: 3 outputs
    g = kuiper_core.load(path / "model.pnnx.param")
    for y, ref in zip(g.forward(*ins), exp):
        assert_close(y, ref, "traced batch")
    with pytest.raises(ModelError, match="dim 0 has size 5, the graph declares 3 outputs"):
        g.forward(np.zeros((5, 4), np.float32))


def test_split_outputs_are_views_of_the_input() -> None:
    layer = layer_of(
        "torch.split r 1 3 0 1 2 3 dim=1 split_size_or_sections=(1,3,2) $tensor=0 #0=(2,6)f32 #1=(2,1)f32 #2=(2,3)f32 #3=(2,2)f32",
        "#0=(2,6)f32",
    )
    assert layer.returns_views
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    pieces = layer.forward([x], [None, None, None])
    assert [p.shape for p in pieces] == [(2, 1), (2, 3), (2, 2)]
    assert all(np.shares_memory(p, x) for p in pieces)
    assert np.array_equal(np.concatenate(pieces, axis=1), x)


def test_chunk_gives_fewer_pieces_than_chunks_like_pytorch() -> None:
    # torch.chunk(arange(5), 4) -> sizes [2, 2, 1]: three outputs, not four.
    layer = layer_of("torch.chunk r 1 3 0 1 2 3 chunks=4 dim=0 $input=0 #0=(5)f32", "#0=(5)f32")
    pieces = layer.forward([np.arange(5, dtype=np.float32)], [None] * 3)
    assert [p.tolist() for p in pieces] == [[0, 1], [2, 3], [4]]


def test_split_sections_that_do_not_add_up_are_named() -> None:
    layer = layer_of("torch.split r 1 2 0 1 2 dim=1 split_size_or_sections=(2,2) #0=(2,5)f32", "#0=(2,5)f32")
    with pytest.raises(ModelError, match=r"operator 'r'.*sections \(2, 2\) add up to 4, dim 1 has size 5"):
        layer.forward([np.zeros((2, 5), np.float32)], [None, None])


def test_piece_count_differing_from_the_graph_is_named() -> None:
    layer = layer_of("torch.chunk r 1 2 0 1 2 chunks=2 dim=0 #0=(4)f32", "#0=(4)f32")
    with pytest.raises(ModelError, match="gives 1 pieces, the graph declares 2 outputs"):
        layer.forward([np.zeros(1, np.float32)], [None, None])


def test_cat_writes_into_out_and_handles_repeated_inputs() -> None:
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(2,3)f32",
        "torch.cat c 3 1 0 0 0 1 dim=1 #0=(2,3)f32 #1=(2,9)f32",
        "pnnx.Output out 1 0 1",
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(g.forward(x)[0], np.concatenate([x, x, x], axis=1))
    layer = g.operators["c"].layer
    out = np.empty((2, 9), np.float32)
    assert layer.forward([x, x, x], [out])[0] is out


def test_where_with_two_scalars_is_float32() -> None:
    layer = layer_of("torch.where w 1 1 0 1 input=1.0 other=0.0 $condition=0 #0=(3)bool #1=(3)f32", "#0=(3)bool")
    (y,) = layer.forward([np.array([True, False, True])], [None])
    assert y.dtype == np.float32 and y.tolist() == [1.0, 0.0, 1.0]


def test_full_without_a_declared_dtype_follows_torch_defaults() -> None:
    # torch.full((2,), 3) is int64, torch.full((2,), 2.5) float32, torch.full((2,), True) bool.
    for value, dtype in (("3", np.int64), ("2.5", np.float32), ("True", np.bool_)):
        layer = layer_of(f"torch.full f 0 1 0 dtype=None fill_value={value} size=(2)")
        (y,) = layer.forward([], [None])
        assert y.dtype == dtype and y.shape == (2,)


BAD = [
    ("torch.chunk r 1 1 0 1 chunks=0 dim=0 #0=(4)f32", "chunks must be >= 1"),
    ("torch.split r 1 1 0 1 dim=0 split_size_or_sections=0 #0=(4)f32", "split_size_or_sections must be >= 1"),
    ("torch.split r 1 1 0 1 dim=0 #0=(4)f32", "missing parameter 'split_size_or_sections'"),
    ("torch.tensor_split r 1 1 0 1 dim=0 sections=0 #0=(4)f32", "sections must be >= 1"),
    ("torch.where r 2 1 0 0 1 $condition=0 $input=0 #0=(4)f32", "missing parameter 'other'"),
    ("torch.where r 1 1 0 1 input=1.0 other=abc $condition=0 #0=(4)f32", "parameter 'other' must be a number"),
    # pnnx 20261020 writes `pad[:, -3:] = True` (a traced key padding mask) as fill value=None
    ("Tensor.fill r 1 1 0 1 value=None $input=0 #0=(4)f32", "pnnx wrote None, having lost this constant"),
    ("torch.full r 1 1 0 1 size=(2) #0=(4)f32", "missing parameter 'fill_value'"),
    ("torch.zeros r 0 1 1 size=(2,-1)", "size must be >= 0"),
    ("torch.ones r 0 1 1 dtype=torch.float", "missing parameter 'size'"),
    ("torch.gt r 1 1 0 1 $input=0 #0=(4)f32", "missing parameter 'other'"),
]


@pytest.mark.parametrize("line, message", BAD, ids=[m for _, m in BAD])
def test_bad_params_are_named_at_build(line: str, message: str) -> None:
    with pytest.raises(ModelError, match="operator 'r'") as info:
        layer_of(line, "#0=(4)f32")  # factories leave this input unused
    assert message in str(info.value)


def test_an_onnx_gather_pnnx_keeps_runs_as_onnxruntime_does() -> None:
    """tests/data/onnx_cases/gather (tools/export_onnx_cases.py): Reshape + Gather with constant
    (1, C, 1, 1) indices, as torch.onnx.export's dynamo exporter writes convnext's view; pnnx
    keeps ONNX's Gather. The engine's output is onnxruntime's."""
    from conftest import DATA, max_err_ok

    case = DATA / "onnx_cases"
    m = kuiper_core.load(case / "gather.pnnx.param")
    assert "Gather" in [op.type for op in m.graph.operators]
    (y,) = m.forward(np.load(case / "gather.input.npy"))
    with np.load(case / "gather.expected.npz") as z:
        ok, err, bound = max_err_ok(y, z["out0"])
    assert ok, (err, bound)


def test_an_onnx_size_read_as_a_tensor_runs_at_every_width() -> None:
    """tests/data/onnx_cases/size_unsqueeze (tools/export_onnx_cases.py): ddddocr's OCR head in
    small (issue 34). pnnx keeps ONNX's Shape -> Gather of a dynamic width as `size(@0,0)`, an
    expression whose value torch.unsqueeze reads as its tensor (it was an AttributeError on a
    Python int), and the unsqueezed size goes into a reshape's list. At the width pnnx traced and
    at two others, run by every executor (calls 1-3 of one model), the output is onnxruntime's."""
    from conftest import DATA, max_err_ok

    case = DATA / "onnx_cases"
    m = kuiper_core.load(case / "size_unsqueeze.pnnx.param")
    assert [op.params.get("expr") for op in m.graph.operators if op.type == "pnnx.Expression"][0] == "size(@0,0)"
    with np.load(case / "size_unsqueeze.widths.npz") as z:
        runs = [(z[f"in{k}"], z[f"out{k}"]) for k in range(3)]
    for x, expected in runs * 2:
        (y,) = m.forward(x)
        ok, err, bound = max_err_ok(y, expected)
        assert ok, (x.shape, err, bound)
    last = list(m.steps(runs[1][0]))[-1]  # the step-by-step run (the app's Forward page)
    assert max_err_ok(next(iter(last.inputs.values())), runs[1][1])[0]
