"""kuiper_core.explore.model_files: what Home opens from an upload or a server path."""

from __future__ import annotations

import pytest
from conftest import DATA, SAMPLES

from kuiper_core.errors import InputError, LimitError
from kuiper_core.explore import model_files as F

DEBUG = DATA / "debug_models"


def test_the_format_is_told_by_content_not_the_name() -> None:
    assert F.kind_of((DEBUG / "small_cnn.onnx").read_bytes(), "model.bin") == "onnx"
    assert F.kind_of((DEBUG / "small_cnn.pt").read_bytes(), "whatever") == "torchscript"
    assert F.kind_of((SAMPLES / "digits_cnn.pnnx.param").read_bytes(), "x.txt") == "pnnx"
    assert F.kind_of(b"not a model at all", "notes.txt") is None


def test_traced_torchscript_records_its_input_shapes() -> None:
    assert not F.asks_for_shape((DEBUG / "small_cnn.pt").read_bytes(), "small_cnn.pt")
    assert F.asks_for_shape((DEBUG / "small_cnn_untraced.pt").read_bytes(), "small_cnn_untraced.pt")
    assert not F.asks_for_shape((DEBUG / "small_cnn.onnx").read_bytes(), "small_cnn.onnx")


def test_the_shape_field_is_checked() -> None:
    assert F.shape_problem("[1,3,16,16]", required=True) is None
    assert F.shape_problem("[1,3,224,224],[1,10]i64", required=True) is None
    assert "needs its input shape" in (F.shape_problem(" ", required=True) or "")
    assert F.shape_problem("", required=False) is None
    assert "not a list of shapes" in (F.shape_problem("1,3,x", required=False) or "")


def test_a_server_path_opens_a_param_with_its_sibling_bin() -> None:
    request = F.from_path(str(SAMPLES / "digits_cnn.pnnx.param"), 1 << 30)
    assert request.kind == "pnnx" and request.bin == (SAMPLES / "digits_cnn.pnnx.bin").read_bytes()
    onnx = F.from_path(str(DEBUG / "small_cnn.onnx"), 1 << 30)
    assert onnx.kind == "onnx" and onnx.bin is None and onnx.name == "small_cnn.onnx"


@pytest.mark.parametrize(
    "path, says",
    [
        ("", "type the path"),
        ("/etc/passwd", "not a model file name"),
        (str(DEBUG / "missing.onnx"), "no such file"),
    ],
)
def test_a_bad_server_path_says_what_is_wrong(path: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        F.from_path(path, 1 << 30)


def test_a_server_path_is_read_within_the_upload_limit() -> None:
    with pytest.raises(LimitError):
        F.from_path(str(DEBUG / "small_cnn.onnx"), 1000)
