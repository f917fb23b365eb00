"""AppTest: Home opens your own model in any format (issue 22): ONNX and TorchScript converted
by the real pnnx converter (skipped without it), input shapes asked for TorchScript, a clear
message without the converter, a path on the server; references computed from the model's
own framework (skipped without torch / onnxruntime) compare every operator."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from conftest import DATA

from kuiper_core.formats import converter_available

pytest.importorskip("streamlit")
from apptest_helpers import FORWARD, app, click, forward_go, forward_panel, no_exception, texts, upload_input  # noqa: E402

DEBUG = DATA / "debug_models"  # tools/export_debug_fixtures.py
needs_converter = pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")


@pytest.fixture(autouse=True)
def _private_conversion_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))  # every test converts for real


def _choose(at, path, name: str | None = None):
    at.file_uploader(key="home_param").upload(name or path.name, path.read_bytes()).run()
    no_exception(at)
    return at


def _load(at):
    at.button(key="home_load_upload").click().run()
    no_exception(at)
    return at


def _summary(at) -> str:
    return " ".join(h.value for h in at.header)


@pytest.mark.slow
@needs_converter
def test_an_onnx_model_is_converted_and_its_files_offered() -> None:
    at = _choose(app(), DEBUG / "small_cnn.onnx")
    assert any("read from the ONNX file" in c.value for c in at.caption)
    _load(at)
    assert "Summary of `small_cnn.onnx`" in _summary(at), _summary(at)
    assert any("converted from onnx by pnnx" in c.value for c in at.caption)
    labels = [d.proto.label for d in at.get("download_button")]
    assert "Download small_cnn.pnnx.param" in labels and "Download small_cnn.pnnx.bin" in labels
    assert any("pnnx" in c.value for c in at.code)  # the converter's log


@pytest.mark.slow
@needs_converter
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None and importlib.util.find_spec("onnxruntime") is None,
    reason="computing references needs torch or onnxruntime",
)
def test_references_from_the_framework_compare_every_operator_of_an_onnx_model() -> None:
    at = _load(_choose(app(), DEBUG / "small_cnn.onnx"))
    at.session_state["kx_input"] = {"kind": "npy", "seed": 0}
    at.session_state["kx_input_arrays"] = {"npy": (np.load(DEBUG / "small_cnn.input.npy"), "input.npy")}
    at.switch_page(FORWARD).run()
    assert at.radio(key="fw_ref_choice").value == "framework"
    forward_go(at, 10**6)  # a finished run first: its values are given to the ONNX mapping
    click(at, "fw_framework")
    said = " ".join(texts(at.success))
    # one count of operands, and every operator compared: the output node too (issue 38)
    assert "a reference for every one of the 9 operands this model computes." in said, said
    assert "11 of 11 operators run so far compared" in said and "all 11 within tolerance" in said, said
    assert "no reference" not in said, said
    assert at.radio(key="fw_color_mode").value == "errors"
    # the .onnx's own node names, beside pnnx's, in the details and the error table
    table = at.dataframe[-1].value
    assert dict(zip(table["operator"], table["ONNX node"]))["conv2d_0"] == "/conv1/Conv", table
    assert table.set_index("operator").loc["out0", "status"] == "within tolerance", table
    assert table.set_index("operator").loc["out0", "ONNX node"] == "/fc/Gemm", table
    assert "ONNX node <code>/fc/Gemm</code>" in forward_panel(at), forward_panel(at)


@pytest.mark.slow
@needs_converter
def test_a_traced_torchscript_model_needs_no_shape_and_an_untraced_one_asks_for_it() -> None:
    at = _load(_choose(app(), DEBUG / "small_cnn.pt"))
    assert "Summary of `small_cnn.pt`" in _summary(at), texts(at.error)
    at = _choose(app(), DEBUG / "small_cnn_untraced.pt")
    assert at.text_input(key="home_inputshape").value == "[1,3,224,224]"  # prefilled, to be checked
    at.text_input(key="home_inputshape").set_value("1,3,x").run()
    assert any("is not a list of shapes" in e.value for e in at.error)
    at.text_input(key="home_inputshape").set_value("[1,3,16,16]").run()
    _load(at)
    assert "Summary of `small_cnn_untraced.pt`" in _summary(at), texts(at.error)
    assert any("inputshape [1,3,16,16]" in c.value for c in at.caption)


@pytest.mark.slow
@needs_converter
def test_a_converter_failure_quotes_the_converter() -> None:
    at = _choose(app(), DEBUG / "small_cnn_untraced.pt")
    at.text_input(key="home_inputshape").set_value("[1,5,16,16]").run()  # 5 channels into a 3-channel conv
    _load(at)
    assert any("could not be converted" in e.value for e in at.error), texts(at.error)
    message = " ".join(c.value for c in at.code)
    assert "expected input[1, 5, 16, 16] to have 3 channels" in message and "last lines" in message, message
    assert "Summary of `digits_cnn`" in _summary(at)  # the session's model did not change


@pytest.mark.slow
def test_without_the_converter_one_message_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setenv("KUIPER_PNNX", "/nonexistent/pnnx")
    at = _choose(app(), DEBUG / "small_cnn.onnx")
    warnings = texts(at.warning)
    assert len(warnings) == 1 and "pip install --no-deps pnnx" in warnings[0], warnings
    assert at.button(key="home_load_upload").disabled


@pytest.mark.slow
def test_a_path_on_the_server_opens_a_pnnx_model_with_its_weights(monkeypatch) -> None:
    """Only with KUIPER_SERVER_MODELS, and only files inside that folder: any other path, an
    existing one (/etc/passwd, a file beside the folder through `..`) or not, gets the same
    message, which says nothing of whether it exists (issue 35)."""
    monkeypatch.setenv("KUIPER_SERVER_MODELS", str(DEBUG))
    at = app()
    at.text_input(key="home_path").set_value("small_cnn.pnnx.param").run()
    at.button(key="home_load_path").click().run()
    no_exception(at)
    assert "Summary of `small_cnn.pnnx.param`" in _summary(at)
    said = []
    for path in ("/etc/passwd", "/etc/no-such-file.onnx", "../user_models/lstm.onnx", str(DEBUG / "missing.onnx")):
        at.text_input(key="home_path").set_value(path).run()
        at.button(key="home_load_path").click().run()
        no_exception(at)
        said.append([c.value for c in at.code if "cannot open" in c.value][0].split(":", 1)[1])
    assert len(set(said)) == 1 and "models folder" in said[0], said


def test_no_path_on_the_server_by_default(monkeypatch) -> None:
    monkeypatch.delenv("KUIPER_SERVER_MODELS", raising=False)
    at = app()
    assert not [t for t in at.text_input if t.key == "home_path"]


@pytest.mark.slow
@needs_converter
def test_a_converted_model_survives_a_reload() -> None:
    at = _load(_choose(app(), DEBUG / "small_cnn.onnx"))
    value = at.query_params.get("upload")
    digest = value[0] if isinstance(value, list) else value
    assert digest
    reloaded = app(None, FORWARD, query={"upload": digest})
    no_exception(reloaded)
    assert any("`small_cnn.onnx`: 11 operators" in c.value for c in reloaded.caption)
    assert not reloaded.warning


@pytest.mark.slow
def test_a_textual_ir_model_opens_with_its_weights() -> None:
    import kuiper_core
    from conftest import SAMPLES

    text = kuiper_core.print_ir(kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param").graph)
    at = app()
    at.file_uploader(key="home_param").upload("digits.kir", text.encode()).run()
    at.file_uploader(key="home_bin").upload("digits.pnnx.bin", (SAMPLES / "digits_cnn.pnnx.bin").read_bytes()).run()
    _load(at)
    assert "Summary of `digits.kir`" in _summary(at), texts(at.error)
    at.switch_page(FORWARD).run()
    forward_go(at, 10**6)
    assert "Operator 12 of 12:" in forward_panel(at)


@pytest.mark.slow
@needs_converter
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="computing references needs torch")
@pytest.mark.parametrize("file", ["mobilenet_v2.onnx", "shufflenet.pt"])
def test_a_model_nobody_here_wrote_is_compared_operator_by_operator(file: str) -> None:
    """torchvision's MobileNetV2 as .onnx and ShuffleNetV2 as TorchScript (tests/data/user_models,
    made by the formats work): uploaded, converted, references computed, every operator that
    makes a tensor compared and within tolerance, with no file made by hand."""
    users = DATA / "user_models"
    at = _load(_choose(app(), users / file))
    stem = file.rsplit(".", 1)[0]
    at.session_state["kx_input"] = {"kind": "npy", "seed": 0}
    at.session_state["kx_input_arrays"] = {"npy": (np.load(users / f"{stem}.input.npy"), "input.npy")}
    at.switch_page(FORWARD).run()
    click(at, "fw_framework")
    forward_go(at, 10**6)
    said = " ".join(texts(at.success))
    match = re.search(r"(\d+) of (\d+) operators run so far compared with .*: all \1 within tolerance", said)
    # every operator (pnnx.Output: the output it passes on), give or take pnnx.Input where only onnxruntime maps
    assert match and int(match.group(1)) >= int(match.group(2)) - 2, said


@pytest.mark.slow
def test_the_server_path_field_can_be_turned_off(monkeypatch) -> None:
    monkeypatch.setenv("KUIPER_SERVER_MODELS", str(DEBUG))
    monkeypatch.setenv("KUIPER_APP_NO_PATHS", "1")
    at = app()
    assert not [t for t in at.text_input if t.key == "home_path"]


@pytest.mark.slow
@needs_converter
def test_without_torch_or_onnxruntime_the_page_says_what_would_compute_references(monkeypatch) -> None:
    import kuiper_core.formats.base as base
    from pages import ncnn_panel

    monkeypatch.setattr(base, "installed", lambda module: False)
    monkeypatch.setattr(ncnn_panel, "installed", lambda module: False)  # (the deployed model's runner)
    at = _load(_choose(app(), DEBUG / "small_cnn.onnx", "nothing_installed.onnx"))
    at.switch_page(FORWARD).run()
    no_exception(at)
    assert not [r for r in at.radio if r.key == "fw_ref_choice"]  # only a reference file is offered
    said = " ".join(c.value for c in at.caption)
    assert "could be computed here with: torch, to run pnnx's generated code; onnxruntime and onnx" in said, said


@needs_converter
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="computing references needs onnxruntime")
def test_a_reload_keeps_the_uploaded_input_and_the_computed_references() -> None:
    """Issue 38 item 5: after uploading a model and an input and computing references, a reload
    (a new session on the URL) runs on the same input with the same references; a link whose
    input the server no longer has says so instead of quietly running on another input."""
    at = upload_input(
        _load(_choose(app(), DEBUG / "small_cnn.onnx")), np.load(DEBUG / "small_cnn.input.npy"), "input.npy"
    )
    at.switch_page(FORWARD).run()
    forward_go(at, 10**6)
    if any(b.key == "fw_framework" for b in at.button):  # (an earlier test's, for this model and input, are kept)
        click(at, "fw_framework")
    assert "11 of 11 operators run so far compared" in " ".join(texts(at.success))
    query = {
        k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k]
        for k in ("upload", "input")
    }
    assert query["input"], query

    reloaded = app(None, FORWARD, query={**query, "step": "11"})
    assert any("input: uploaded array input.npy" in c.value for c in reloaded.caption), texts(reloaded.caption)
    said = " ".join(texts(reloaded.success))
    # PyTorch joins onnxruntime where torch is installed (CI's venv has none)
    assert re.search(r"11 of 11 operators run so far compared with (PyTorch and )?onnxruntime", said), said
    assert reloaded.radio(key="fw_ref_choice").value == "framework"
    assert not reloaded.warning, texts(reloaded.warning)

    gone = app(None, FORWARD, query={**query, "input": "0123456789abcdef"})
    warned = " ".join(texts(gone.warning))
    assert "The link's input" in warned and "no longer on this server" in warned, warned
    assert not any("uploaded array" in c.value for c in gone.caption)
