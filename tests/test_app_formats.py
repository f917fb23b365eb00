"""AppTest: the app's model loader (pages/common.py) opens every format through
kuiper_core.formats: an uploaded .onnx or TorchScript .pt is converted (cached on disk) and
runs; without the converter the loader's error says how to install it. (The Home page's own
upload widgets for these formats are the debugapp work's: this drives the loader directly.)"""

from __future__ import annotations

import pytest
from conftest import DATA

from kuiper_core.formats import converter_available

pytest.importorskip("streamlit")
from apptest_helpers import no_exception  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

USER = DATA / "user_models"
pytestmark = pytest.mark.slow  # AppTest runs and real conversions


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))


def _loader_script(path: str, name: str) -> None:
    """What the Home page does with an upload: pages.common.select_upload, then the page's model."""
    import streamlit as st

    from pages import common

    with open(path, "rb") as f:
        model = common.select_upload(name, f.read(), None)
    st.text(f"error: {model.error}" if model.error else f"ok: {model.opened.format}")
    current = common.current_model()
    st.text(f"current: {current.name if current else None}, runnable: {bool(current and current.ok)}")


def _load(name: str, data_path) -> list[str]:
    at = AppTest.from_function(_loader_script, default_timeout=120, args=(str(data_path), name)).run()
    no_exception(at)
    return [t.value for t in at.text]


@pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
@pytest.mark.parametrize(("name", "fmt"), [("lstm.onnx", "onnx"), ("lstm.pt", "torchscript")])
def test_an_uploaded_onnx_or_torchscript_model_converts_and_runs(name, fmt):
    assert _load(name, USER / name) == [f"ok: {fmt}", f"current: {name}, runnable: True"]


def test_without_the_converter_the_loader_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_PNNX", str(tmp_path / "nowhere"))
    shown = _load("model.onnx", USER / "lstm.onnx")
    assert shown[0].startswith("error: ") and "pip install --no-deps pnnx" in shown[0] and "Traceback" not in shown[0]
