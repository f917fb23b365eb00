"""AppTest: an .onnx whose `If` branches on a small integer input (silero-vad's `sr`) opens in
the app when Home's field gives its value: converted for it (formats/onnx_given.py), checked
against onnxruntime at it; without it, the error says which field to fill."""

from __future__ import annotations

import pytest

from kuiper_core.formats import converter_available

pytest.importorskip("streamlit")
pytest.importorskip("onnxruntime")
from apptest_helpers import app, no_exception, texts  # noqa: E402
from test_onnx_given import _rate_if  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # real conversions
    pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed"),
]


@pytest.fixture(autouse=True)
def _private_conversion_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))


def _load(at, values: str):
    at.text_input(key="home_values").set_value(values).run()
    at.button(key="home_load_upload").click().run()
    no_exception(at)
    return at


def test_the_value_given_on_home_converts_the_model_for_it() -> None:
    at = app()
    at.file_uploader(key="home_param").upload("vad.onnx", _rate_if()).run()
    no_exception(at)
    _load(at, "")  # no value: says what to give, and where
    assert any("could not be converted" in e.value for e in at.error), texts(at.error)
    assert any("Values of integer inputs" in i.value and "sr=16000" in i.value for i in at.info), texts(at.info)
    _load(at, "rate=8000")  # no such input: the inputs named
    said = " ".join(c.value for c in at.code)
    assert "'rate', which is no input of the model (its inputs: 'x', 'sr')" in said, said
    at.text_input(key="home_values").set_value("sr=8k").run()  # does not read: the field says where
    assert any("column 5: expected ','" in e.value for e in at.error), texts(at.error)
    assert any(c.value == "sr=8k\n    ^" for c in at.code), texts(at.code)
    at.text_input(key="home_inputshape").set_value("[1,8],[]i64").run()  # the shapes too (a 0-d input: [])
    _load(at, "sr=8000")
    assert "Summary of `vad.onnx`" in " ".join(h.value for h in at.header)
    captions = " ".join(c.value for c in at.caption)
    assert "'sr' = 8000" in captions and "inputshape [1,8],[]i64" in captions, captions
    assert "agrees with onnxruntime" in " ".join(m.value for m in [*at.caption, *at.markdown, *at.success]), captions
