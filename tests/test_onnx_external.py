"""ONNX models that keep their weights in a separate file (external data: what
torch.onnx.export writes by default since torch 2.9, `model.onnx` + `model.onnx.data`), built
here with the onnx package (nothing committed): opened from a path (the file beside it), from
bytes with the data given (an upload), and refused with a clear message without it."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.errors import ConversionError
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats.base import installed
from kuiper_core.references.compare import compare

pytestmark = [
    pytest.mark.skipif(not installed("onnx"), reason="building ONNX models needs the onnx package"),
    pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed"),
]


def _model(folder, location: str = "tiny.onnx.data"):
    """Conv → Clip(0, 6) (ReLU6, as torchvision's MobileNet exports), weights in `location`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    lo = numpy_helper.from_array(np.array(0, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(6, np.float32), "hi")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="/conv/Conv"),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="/act/Clip"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [w, b, lo, hi],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "tiny.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location=location, size_threshold=0)
    return path


@pytest.mark.slow
def test_the_weights_beside_the_model_are_read_in(tmp_path) -> None:
    path = _model(tmp_path)
    assert (tmp_path / "tiny.onnx.data").stat().st_size > 400  # the weights are not in the .onnx
    m = open_model(path, cache_dir=tmp_path / "cache")
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    if installed("onnxruntime"):
        report = compare(m, [x], framework=["onnxruntime"])
        assert report.ok and len(report.rows) == report.computed, report.summary()
    y = m.build().forward(x)[0]
    assert y.shape == (1, 4, 8, 8) and 0 <= y.min() and y.max() <= 6 and y.max() > 0


@pytest.mark.slow  # the app on Home, an upload converted: ~1.8 s
def test_an_upload_without_its_data_file_says_which_file_to_give(tmp_path) -> None:
    path = _model(tmp_path)
    with pytest.raises(ConversionError, match=r"tiny\.onnx\.data .*give that file too"):
        open_model(path.read_bytes(), name="tiny.onnx", cache_dir=tmp_path / "cache")
    # given (the app's weights uploader), it opens
    m = open_model(
        path.read_bytes(), name="tiny.onnx", bin_path=(tmp_path / "tiny.onnx.data").read_bytes(), cache_dir=tmp_path
    )
    assert [op.type for op in m.graph.operators][1] == "nn.Conv2d"
    # a path whose data file is missing names it and the folder
    (tmp_path / "tiny.onnx.data").unlink()
    with pytest.raises(ConversionError, match=r"tiny\.onnx\.data, which is not beside it"):
        open_model(path, cache_dir=tmp_path / "cache")


def test_a_location_outside_the_models_folder_is_not_read(tmp_path) -> None:
    path = _model(tmp_path)
    import onnx

    model = onnx.load_model(str(path), load_external_data=False)
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = "../secret.data"
    onnx.save_model(model, str(path))
    with pytest.raises(ConversionError, match="only a file beside the model is read"):
        open_model(path, cache_dir=tmp_path / "cache")


@pytest.mark.slow
@pytest.mark.skipif(not installed("torch"), reason="pnnx's generated code runs with torch")
def test_pnnx_code_calling_torch_clamp_runs_in_the_guarded_namespace(tmp_path) -> None:
    """pnnx writes ONNX's Clip as torch.clamp(v, max=6.0, min=0.0), whose C code imports torch
    through the caller's builtins: every operand is captured (it failed with KeyError '__import__')."""
    m = open_model(_model(tmp_path), cache_dir=tmp_path / "cache")
    assert m.files.python is not None and "torch.clamp" in m.files.python.read_text()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    report = compare(m, [x], framework=["pnnx_py"])
    assert report.ok and len(report.rows) == report.computed, report.summary()
    assert not any("failed" in n for n in report.notes), report.notes


@pytest.mark.slow
def test_the_app_asks_for_the_data_file_and_opens_the_model_with_it(tmp_path, monkeypatch) -> None:
    """Home: an .onnx that keeps its weights apart offers a second uploader; without the file
    the error names it, with it the model converts and opens."""
    from apptest_helpers import app, no_exception, texts

    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    path = _model(tmp_path)
    at = app()
    at.file_uploader(key="home_param").upload("tiny.onnx", path.read_bytes()).run()
    no_exception(at)
    at.file_uploader(key="home_bin")  # the second uploader is there (KeyError otherwise)
    at.button(key="home_load_upload").click().run()
    said = " ".join(texts(at.error) + texts(at.markdown) + texts(at.code) + texts(at.caption))
    assert "could not be converted" in said and "tiny.onnx.data" in said and "give that file too" in said, said
    at.file_uploader(key="home_bin").upload("tiny.onnx.data", (tmp_path / "tiny.onnx.data").read_bytes()).run()
    at.button(key="home_load_upload").click().run()
    no_exception(at)
    assert "Summary of `tiny.onnx`" in " ".join(h.value for h in at.header)


@pytest.mark.slow  # the app on Home with a data file beside the model: ~1 s
def test_a_server_path_reads_the_data_file_beside_the_model(tmp_path, monkeypatch) -> None:
    from kuiper_core.explore import model_files as F

    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    path = _model(tmp_path)
    request = F.from_path(str(path), 10**8)
    assert request.kind == "onnx" and request.bin == (tmp_path / "tiny.onnx.data").read_bytes()
    F.convert_request(request, None, None)  # converts: the weights were found
