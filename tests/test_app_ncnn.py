"""AppTest, issue 37: the deployed ncnn model in the app. An .ncnn.param and its .ncnn.bin
uploaded on Home (pnnx's exports in tests/data/ncnn, whose Input lines carry no shape: the page
asks for the blob's), clear errors for a missing or mismatched .bin, and the pages on it: the
Graph page with ncnn's params named, Execution order, Forward through every layer."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pandas as pd
import pytest
from conftest import DATA

from kuiper_core.formats import converter_available

pytest.importorskip("streamlit")
from apptest_helpers import (
    FORWARD,
    GRAPH,
    ORDER,
    app,
    as_shown,
    click,
    forward_go,
    forward_panel,
    no_exception,
    texts,
    upload_input,
)  # noqa: E402

NCNN = DATA / "ncnn"
DEBUG = DATA / "debug_models"
PARAM, BIN = NCNN / "digits_cnn.fp32.ncnn.param", NCNN / "digits_cnn.fp32.ncnn.bin"
LAYERS = [line.split()[1] for line in PARAM.read_text().splitlines()[2:]]  # in0, convrelu_0, …, softmax_0


def _upload(param=PARAM, binf=BIN, shape: str | None = "[1,8,8]"):
    at = app()
    at.file_uploader(key="home_param").upload(param.name, param.read_bytes()).run()
    if binf is not None:
        at.file_uploader(key="home_bin").upload(binf.name, binf.read_bytes()).run()
    if shape is not None:
        at.text_input(key="home_inputshape").input(shape).run()
    click(at, "home_load_upload")
    return at


def _errors(at) -> str:
    return " ".join(texts(at.error) + [c.value for c in at.code])


def test_a_bin_that_is_missing_or_not_the_params_is_said() -> None:
    missing = _errors(_upload(binf=None))
    assert "has weights but no digits_cnn.fp32.ncnn.bin was given" in missing, missing
    other = _errors(_upload(binf=NCNN / "tiny_mlp.fp32.ncnn.bin"))
    assert "is this the .bin written with this .param?" in other and "operator 'fcrelu_0'" in other, other
    no_shape = _upload(shape=None)
    assert "does not say its input blob's shape" in _errors(no_shape)
    assert not any("ncnn.param" in h.value for h in no_shape.header)  # nothing was opened
    wrong = _errors(_upload(shape="[1,8,8],[3]"))
    assert "does not fit the ncnn model's 1 input blob(s) (in0)" in wrong, wrong


@pytest.mark.slow
def test_an_uploaded_ncnn_model_opens_draws_orders_and_steps() -> None:
    at = _upload()
    assert any("Summary of `digits_cnn.fp32.ncnn.param`" in h.value for h in at.header), texts(at.header)
    upload_input(at, np.load(NCNN / "digits_cnn.input.npy"), "chw.npy")

    at.switch_page(GRAPH).run()
    no_exception(at)
    table = next(df.value for df in at.dataframe if "params" in df.value.columns)
    conv = table.set_index("layer").loc["convrelu_0"]
    assert "num_output=16 [0]" in conv["params"] and "activation_type=1 (ReLU) [9]" in conv["params"]
    assert "f32" in conv["weights"]

    at.switch_page(FORWARD).run()
    forward_go(at, 10**6)
    assert not at.error, texts(at.error)
    said = " ".join(m.value for m in at.markdown)
    assert "Operator 9 of 9:" in forward_panel(at) and "out0: shape 10, float32" in said, said
    y = at.session_state["kx_forward"].stepper.outputs()[0]  # PyTorch's answer, from the export
    with np.load(NCNN / "digits_cnn.expected.npz") as z:
        np.testing.assert_allclose(y, z["out0"].reshape(y.shape), rtol=1e-4, atol=1e-6)
    assert len(at.session_state["kx_forward"].stepper.events) == len(LAYERS) + 1 == 9  # + its pnnx.Output

    query = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    reloaded = app(None, FORWARD, query=query)  # the upload, its shape and its input survive a reload
    assert any("uploaded array chw.npy" in c.value for c in reloaded.caption), texts(reloaded.caption)
    assert json.dumps(query)  # (a plain link)

    at.switch_page(ORDER).run()
    at.selectbox(key="order_source").set_value("The loaded model").run()
    no_exception(at)
    at.session_state["kx_order"]["step"] = 10_000  # the browser's controls at the end of the walk
    at.run()
    assert set(at.dataframe[-1].value["node"]) >= set(LAYERS)


# -- the deployed model as the Forward page's reference ------------------------------------------------
needs_ncnn = pytest.mark.skipif(
    importlib.util.find_spec("ncnn") is None, reason="ncnn's own run needs pip install ncnn"
)


def _compared(at) -> pd.DataFrame:
    return next(df.value for df in at.dataframe if "ours vs ncnn" in df.value.columns)


@needs_ncnn
@pytest.mark.slow  # ncnn run per layer in the app: ~1.2 s
def test_an_uploaded_ncnn_model_is_compared_with_ncnn_itself_layer_by_layer() -> None:
    """The ncnn binding's own run of the uploaded files (fp16 weights): every blob, ours against it
    within 1e-5 (both widen the fp16 weights to fp32), and ncnn re-run per option says why."""
    at = _upload(param=NCNN / "digits_cnn.fp16.ncnn.param", binf=NCNN / "digits_cnn.fp16.ncnn.bin")
    at.switch_page(FORWARD).run()
    assert at.radio(key="fw_ref_choice").value == "ncnn"  # the first source offered for an ncnn model
    click(at, "fw_ncnn")
    assert any("computed 7 of the 7 operands" in s.value and "fp16" in s.value for s in at.success), texts(at.success)
    forward_go(at, 10**6)
    said = " ".join(texts(at.success))
    assert "9 of 9 operators run so far compared with ncnn (the deployed model): all 9 within tolerance" in said, said
    table = _compared(at)
    assert list(table["operator"]) == [*LAYERS, "output_out0"]
    assert table["ours vs ncnn"].max() < 1e-5 and table["ours vs ncnn"].notna().all()
    assert table["ours vs PyTorch"].isna().all()  # no PyTorch beside an upload: said, not made up
    assert any("No PyTorch values" in c.value for c in at.caption)
    options = next(df.value for df in at.dataframe if "ncnn run" in df.value.columns)
    assert {"use_fp16_storage", "use_bf16_storage", "ncnn defaults (this CPU)"} <= set(options["ncnn run"])
    bf16 = options.set_index("ncnn run").loc["use_bf16_storage"]
    assert bf16.iloc[0] > 1e-3 and bf16.iloc[1] == "convrelu_0"  # bf16 storage: the first conv leaves ncnn's
    assert any("use_bf16_storage=True moves the output" in as_shown(i.value) for i in at.info), texts(at.info)
    assert any(c.value.startswith("ncnn blob `out0`: ours vs ncnn") for c in at.caption)  # beside the step

    query = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    reloaded = app(None, FORWARD, query=query)  # a reload finds ncnn's run (kept as computed references are)
    assert any("computed 7 of the 7 operands" in s.value for s in reloaded.success), texts(reloaded.success)


def test_without_ncnn_the_page_says_what_would_compare_the_deployed_model(monkeypatch) -> None:
    from pages import ncnn_panel

    monkeypatch.setattr(ncnn_panel, "installed", lambda module: module != "ncnn")
    at = _upload()
    at.switch_page(FORWARD).run()
    no_exception(at)
    assert "ncnn" not in (
        at.radio(key="fw_ref_choice").options if any(r.key == "fw_ref_choice" for r in at.radio) else []
    )
    said = " ".join(texts(at.caption))
    assert "deployed ncnn model could be compared layer by layer here with: ncnn" in said and "pip install ncnn" in said


@pytest.mark.slow
@needs_ncnn
@pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch's column needs torch")
def test_a_converted_model_is_compared_with_its_deployed_ncnn_model_and_pytorch(tmp_path, monkeypatch) -> None:
    """An .onnx converted in the app: pnnx's ncnn files in the cache entry are offered; ncnn's blobs
    line up with our operands, and each operator shows ours vs ncnn vs the framework's values: ours
    within 1e-5 of the framework, ncnn (pnnx's default fp16 weights) further, which the sentence
    puts on the weight storage."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    at = app()
    at.file_uploader(key="home_param").upload("small_cnn.onnx", (DEBUG / "small_cnn.onnx").read_bytes()).run()
    click(at, "home_load_upload")
    at.switch_page(FORWARD).run()
    forward_go(at, 10**6)
    click(at, "fw_framework")
    at.radio(key="fw_ref_choice").set_value("ncnn").run()
    click(at, "fw_ncnn")
    no_exception(at)
    table = _compared(at)
    both = table.dropna(subset=["ours vs ncnn", "ours vs PyTorch"])
    assert len(both) >= 5, table  # the conv/relu/pool/linear blobs and the output
    assert both["ours vs PyTorch"].max() < 1e-5
    assert (both["ncnn vs PyTorch"].iloc[1:] > 1e-5).all()  # fp16 weights (the input row is exact)
    assert both["ncnn blob"].iloc[-1] == "out0"
    assert any("weights stored as fp16 by pnnx" in as_shown(i.value) for i in at.info), texts(at.info)
    options = next(df.value for df in at.dataframe if "ncnn run" in df.value.columns)
    assert "final error vs PyTorch" in options.columns  # measured against the framework's outputs


def test_a_path_on_the_server_opens_an_ncnn_model_with_the_shape_of_the_pnnx_files_beside(
    tmp_path, monkeypatch
) -> None:
    import shutil

    from conftest import SAMPLES

    for ext in ("param", "bin"):
        shutil.copy(NCNN / f"tiny_mlp.fp32.ncnn.{ext}", tmp_path / f"m.ncnn.{ext}")
    shutil.copy(NCNN / "tiny_mlp.fp32.ncnn.param", tmp_path / "alone.ncnn.param")
    shutil.copy(NCNN / "tiny_mlp.fp32.ncnn.bin", tmp_path / "alone.ncnn.bin")
    shutil.copy(SAMPLES / "tiny_mlp.pnnx.param", tmp_path / "m.pnnx.param")
    monkeypatch.setenv("KUIPER_SERVER_MODELS", str(tmp_path))
    at = app()
    at.text_input(key="home_path").set_value("alone.ncnn.param").run()
    click(at, "home_load_path")
    assert "no .pnnx.param is beside it" in " ".join(texts(at.error)), texts(at.error)
    at.text_input(key="home_path").set_value("m.ncnn.param").run()
    click(at, "home_load_path")
    assert any("Summary of `m.ncnn.param`" in h.value for h in at.header), texts(at.header)
    declared = at.session_state["kx_upload"].meta["inputshape"]
    pnnx_input = (tmp_path / "m.pnnx.param").read_text().splitlines()[2]
    assert f"#0=(1,{declared[1:-1]})f32" in pnnx_input  # the PNNX input's shape without its batch dim
    at.switch_page(FORWARD).run()
    forward_go(at, 10**6)
    assert not at.error and any("out0: shape" in m.value for m in at.markdown), texts(at.error)


@needs_ncnn
def test_ncnn_failing_on_the_deployed_model_is_said_not_a_traceback(monkeypatch) -> None:
    from kuiper_core.references import isolated

    def crash(*args, **kwargs):
        raise isolated.IsolatedRunError("ncnn was killed by signal 11 (memory limit 3072 MiB): Segmentation fault")

    monkeypatch.setattr(isolated, "run_ncnn", crash)  # as a SIGSEGV in the binding reaches the page
    at = _upload()
    at.switch_page(FORWARD).run()
    click(at, "fw_ncnn")
    said = _errors(at)
    assert "ncnn could not run the deployed model" in said and "signal 11" in said, said
