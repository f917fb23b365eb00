"""formats/onnx_resize.py: Resize variants pnnx 20261020 would rewrite to F.interpolate with a
different answer are kept as ONNX Resize nodes (an identity roi); those it rewrites exactly are
left alone. End to end: the ONNX file → keep_lossy_resizes → the real pnnx → the engine, against
onnxruntime on the original file (docs/coverage.md has the table these rows come from)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from kuiper_core.formats import converter_available
from kuiper_core.formats.base import installed
from kuiper_core.formats.onnx_resize import keep_lossy_resizes
from onnx_op_testing import Case, check, check_model, model_of, resize_case, resize_to_shape_of
from test_onnx_ops import RESIZE_LINE

needs_onnx = pytest.mark.skipif(
    not (installed("onnx") and installed("onnxruntime")), reason="needs onnx and onnxruntime"
)
converted = pytest.mark.skipif(
    not (installed("onnx") and installed("onnxruntime") and converter_available()),
    reason="needs onnx, onnxruntime and pnnx",
)
R = np.random.default_rng(1)


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


X = f32(1, 2, 4, 4)
X9 = f32(1, 2, 9, 9)

# Rewritten by pnnx with torch's semantics: off onnxruntime by the amount noted (max abs error
# on these inputs, converted without the step). test_onnx_ops.RESIZE_LINE's cases (half_pixel_symmetric
# at scales, tf_half_pixel_for_nn, ...) are converted end to end below too.
LOSSY = {
    "nearest_default_4_to_7": resize_case(X, sizes=[1, 2, 7, 7], mode="nearest"),  # 2.7
    "nearest_default_9_to_4": resize_case(X9, sizes=[1, 2, 4, 4], mode="nearest"),  # 4.5
    "nearest_default_scales_1_75": resize_case(X, scales=[1, 1, 1.75, 1.75], mode="nearest"),  # 3.4
    "nearest_default_6_to_2": resize_case(f32(1, 2, 6, 6), sizes=[1, 2, 2, 2], mode="nearest"),  # 1.8
    "nearest_align_corners_3_to_9": resize_case(
        f32(1, 2, 3, 3), sizes=[1, 2, 9, 9], mode="nearest", coordinate_transformation_mode="align_corners"
    ),  # 2.0
    "nearest_half_pixel_floor_x2": resize_case(X, sizes=[1, 2, 8, 8], mode="nearest", nearest_mode="floor"),  # 3.7
    "nearest_pytorch_half_pixel_4_to_7": resize_case(
        X, sizes=[1, 2, 7, 7], mode="nearest", coordinate_transformation_mode="pytorch_half_pixel"
    ),  # 2.9
    "linear_asymmetric_x2": resize_case(
        X, sizes=[1, 2, 8, 8], mode="linear", coordinate_transformation_mode="asymmetric"
    ),  # 0.75
    "linear_pytorch_half_pixel_to_1": resize_case(
        X, sizes=[1, 2, 4, 1], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"
    ),  # 1.3
    "linear_antialias_9_to_4": resize_case(X9, sizes=[1, 2, 4, 4], mode="linear", antialias=1, opset=18),  # 1.2
    "cubic_a_minus_half": resize_case(X, sizes=[1, 2, 7, 7], mode="cubic", cubic_coeff_a=-0.5),  # 0.2
    "cubic_exclude_outside": resize_case(X, sizes=[1, 2, 7, 7], mode="cubic", exclude_outside=1),  # 0.12
    "cubic_asymmetric": resize_case(
        X, sizes=[1, 2, 7, 7], mode="cubic", coordinate_transformation_mode="asymmetric"
    ),  # 1.1
    "cubic_antialias_9_to_4": resize_case(X9, sizes=[1, 2, 4, 4], mode="cubic", antialias=1, opset=18),  # 1.2
}

# Rewritten by pnnx with the same answer: left to pnnx's F.interpolate.
EXACT = {
    "nearest_default_x2": resize_case(X, sizes=[1, 2, 8, 8], mode="nearest"),
    "nearest_default_8_to_4": resize_case(f32(1, 2, 8, 8), sizes=[1, 2, 4, 4], mode="nearest"),
    "nearest_asymmetric_floor_4_to_7": resize_case(
        X, sizes=[1, 2, 7, 7], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    ),
    "nearest_asymmetric_floor_scales_1_5": resize_case(
        X,
        scales=[1, 1, 1.5, 1.5],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    ),
    "nearest_asymmetric_floor_scales_0_6": resize_case(
        f32(1, 2, 7, 7),
        scales=[1, 1, 0.6, 0.6],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    ),  # 3/0.6 lands on 5 only as pnnx writes the scale (0.6, not float32's 0.6000000238)
    "linear_half_pixel_9_to_4": resize_case(X9, sizes=[1, 2, 4, 4], mode="linear"),
    "linear_align_corners_4_to_7": resize_case(
        X, sizes=[1, 2, 7, 7], mode="linear", coordinate_transformation_mode="align_corners"
    ),
    "linear_pytorch_half_pixel_4_to_7": resize_case(
        X, sizes=[1, 2, 7, 7], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"
    ),
    "linear_antialias_up": resize_case(X, sizes=[1, 2, 7, 7], mode="linear", antialias=1, opset=18),
    "cubic_half_pixel_4_to_7": resize_case(X, sizes=[1, 2, 7, 7], mode="cubic"),
    "cubic_align_corners_scales_2": resize_case(
        X, scales=[1, 1, 2, 2], mode="cubic", coordinate_transformation_mode="align_corners"
    ),
}


def _within(c: Case, kept: str) -> Case:
    """The case checked within 1e-5 of onnxruntime, pnnx's conversion holding a `kept`."""
    c = copy.copy(c)
    c.kept, c.rel = kept, 1e-5
    return c


@pytest.mark.slow
@converted
@pytest.mark.parametrize("name", LOSSY)
def test_a_lossy_variant_is_kept_and_gives_onnxruntimes_answer(name: str, tmp_path) -> None:
    check(_within(LOSSY[name], "Resize"), tmp_path, keep_lossy_resizes)


@pytest.mark.slow
@converted
@pytest.mark.parametrize("name", RESIZE_LINE)
def test_the_variants_pnnx_rewrote_when_alone_now_convert_end_to_end(name: str, tmp_path, monkeypatch) -> None:
    """test_onnx_ops.py could check these only as a hand-written kept line: pnnx rewrote them.
    Those the step keeps run as Resize, the one it leaves (a same-shape copy) as pnnx's
    F.interpolate."""
    model, _ = model_of(RESIZE_LINE[name])
    kept = "Resize" if keep_lossy_resizes(model) else "F.interpolate"
    check(_within(RESIZE_LINE[name], kept), tmp_path, keep_lossy_resizes)


@pytest.mark.slow
@converted
@pytest.mark.parametrize("name", EXACT)
def test_an_exact_variant_is_left_to_pnnx_and_gives_onnxruntimes_answer(name: str, tmp_path, monkeypatch) -> None:
    """pnnx's own F.interpolate, as it wrote it, gives onnxruntime's answer (the table's claim)."""
    check(_within(EXACT[name], "F.interpolate"), tmp_path, keep_lossy_resizes)


@needs_onnx
@pytest.mark.parametrize("name", EXACT)
def test_an_exact_variant_is_left_alone(name: str) -> None:
    model, _ = model_of(EXACT[name])
    before = model.SerializeToString()
    assert keep_lossy_resizes(model) == []
    assert model.SerializeToString() == before


@needs_onnx
@pytest.mark.parametrize("name", LOSSY)
def test_the_kept_form_means_what_the_original_meant(name: str) -> None:
    """The identity roi is ignored by ONNX outside tf_crop_and_resize: onnxruntime (which also
    runs inside pnnx) gives the original's outputs, bit for bit."""
    import onnxruntime as ort

    model, feeds = model_of(LOSSY[name])
    original = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    notes = keep_lossy_resizes(model)
    assert len(notes) == 1 and "kept as an ONNX node" in notes[0], notes
    resize = next(n for n in model.graph.node if n.op_type == "Resize")
    roi = next(i for i in model.graph.initializer if i.name == resize.input[1])
    assert list(roi.float_data or np.frombuffer(roi.raw_data, np.float32)) == [0.0] * 4 + [1.0] * 4
    kept = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(kept[0], original[0])


@pytest.mark.slow
@converted
def test_a_resize_to_a_size_computed_at_run_time_is_kept(tmp_path) -> None:
    """Sizes from Shape(z) with z's dims dynamic: pnnx's dynamic pattern would write an
    F.interpolate of a run-time size (asymmetric linear read as half_pixel); kept, the Resize
    layer takes z's shape."""
    model = resize_to_shape_of(X, mode="linear", coordinate_transformation_mode="asymmetric")
    check_model(model, {"x": X, "z": f32(1, 2, 6, 5)}, "Resize", tmp_path, 1e-5, keep_lossy_resizes)


@needs_onnx
@pytest.mark.parametrize(("name", "changed"), [("nearest_default_4_to_7", True), ("linear_half_pixel_9_to_4", False)])
def test_a_dynamic_batch_is_judged_by_the_spatial_sizes(name: str, changed: bool) -> None:
    """Files usually leave N dynamic: the decision needs only the spatial sizes."""
    model, _ = model_of({**LOSSY, **EXACT}[name])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    assert bool(keep_lossy_resizes(model)) == changed


@needs_onnx
def test_an_unknown_spatial_size_keeps_the_node() -> None:
    """Sizes constant but the image's size unknown: the rewrite cannot be judged, so it is kept."""
    model, _ = model_of(EXACT["linear_half_pixel_9_to_4"])
    model.graph.input[0].type.tensor_type.shape.dim[3].dim_param = "W"
    (note,) = keep_lossy_resizes(model)
    assert "spatial size unknown" in note


@needs_onnx
def test_a_resize_too_large_to_compare_keeps_the_node() -> None:
    """The probe has the node's output size: past PROBE_ELEMENTS the node is kept, not probed."""
    model, _ = model_of(resize_case(X, sizes=[1, 2, 2048, 1024], mode="linear"))
    (note,) = keep_lossy_resizes(model)
    assert "too large to compare" in note


@needs_onnx
def test_sizes_from_a_constant_node_are_read() -> None:
    """Exporters write sizes as a Constant node as often as an initializer."""
    from onnx import helper, numpy_helper

    model, _ = model_of(LOSSY["nearest_default_4_to_7"])
    sizes = model.graph.initializer.pop()
    model.graph.node.insert(
        0,
        helper.make_node(
            "Constant", [], [sizes.name], value=numpy_helper.from_array(numpy_helper.to_array(sizes), sizes.name)
        ),
    )
    (note,) = keep_lossy_resizes(model)
    assert "off ONNX's on a probe" in note
