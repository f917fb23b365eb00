"""AppTest, issue 37: the deployed ncnn model in the app. An .ncnn.param and its .ncnn.bin
uploaded on Home (pnnx's exports in tests/data/ncnn, whose Input lines carry no shape: the page
asks for the blob's), clear errors for a missing or mismatched .bin, and the pages on it: the
Graph page with ncnn's params named, Execution order, Forward through every layer."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from conftest import DATA

pytest.importorskip("streamlit")
from apptest_helpers import FORWARD, GRAPH, ORDER, app, click, no_exception, texts  # noqa: E402

NCNN = DATA / "ncnn"
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
    x = np.load(NCNN / "digits_cnn.input.npy")
    at.radio(key="home_input_kind").set_value("npy").run()
    buf = io.BytesIO()
    np.save(buf, x)
    at.file_uploader(key="home_npy").upload("chw.npy", buf.getvalue()).run()
    no_exception(at)

    at.switch_page(GRAPH).run()
    no_exception(at)
    table = next(df.value for df in at.dataframe if "params" in df.value.columns)
    conv = table.set_index("layer").loc["convrelu_0"]
    assert "num_output=16 [0]" in conv["params"] and "activation_type=1 (ReLU) [9]" in conv["params"]
    assert "f32" in conv["weights"]

    at.switch_page(FORWARD).run()
    click(at, "fw_run_all")
    assert not at.error, texts(at.error)
    said = " ".join(m.value for m in at.markdown)
    assert "Operator 9 of 9" in said and "out0: shape 10, float32" in said, said
    y = at.session_state["kx_forward"]["stepper"].outputs()[0]  # PyTorch's answer, from the export
    with np.load(NCNN / "digits_cnn.expected.npz") as z:
        np.testing.assert_allclose(y, z["out0"].reshape(y.shape), rtol=1e-4, atol=1e-6)
    assert len(at.session_state["kx_forward"]["stepper"].events) == len(LAYERS) + 1 == 9  # + its pnnx.Output

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
