"""In Chromium (issue 39): a conversion the real pnnx made and a wrapper then altered (a
convolution's padding turned to 'reflect', test_conversion_check.py) is said in the error colour
on Home, under the sidebar's model line and at the top of another page, and the link there opens
the Forward stepper at the operator where it first departs."""

from __future__ import annotations

import re

import pytest
from app_server import chromium_page, exception_boxes, goto_page, skip_without_browser, streamlit_server, wait_idle
from conftest import DATA

from kuiper_core.formats import base, converter_available

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed"),
    pytest.mark.skipif(not base.installed("onnxruntime"), reason="onnxruntime is not installed"),
]

skip_without_browser()

from test_conversion_check import _altering_converter  # noqa: E402

ERROR_BOX = '[data-testid="stAlertContentError"]'


def test_a_disagreeing_conversion_in_the_error_colour_and_its_link_to_the_forward_step(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))  # the server inherits both
    _altering_converter(tmp_path, monkeypatch, "padding")
    with streamlit_server(timeout=120) as url, chromium_page(width=1400, height=1000) as page:
        page.goto(url)
        page.get_by_text("Kuiper Explorer").first.wait_for()
        wait_idle(page)
        box = page.locator('[data-testid="stFileUploader"]').filter(has_text="model.pnnx.param")
        box.locator('input[type="file"]').set_input_files(
            files=[
                {
                    "name": "altered.onnx",
                    "mimeType": "application/octet-stream",
                    "buffer": (DATA / "conversion_check" / "probe.onnx").read_bytes(),
                }
            ]
        )
        box.get_by_text("altered.onnx").wait_for()
        wait_idle(page)
        page.get_by_role("button", name="Load uploaded model", exact=True).click()
        main = page.locator('[data-testid="stMain"]')
        main.locator(ERROR_BOX).filter(has_text="does not compute what the original does").wait_for(timeout=120_000)
        wait_idle(page)
        sidebar = page.locator('[data-testid="stSidebar"]')
        said = sidebar.locator(ERROR_BOX).first.inner_text()
        assert "DISAGREES with onnxruntime" in said and "conv2d_0" in said, said
        goto_page(page, "graph")
        top = main.locator(ERROR_BOX).first.inner_text()
        assert "does not compute what the original does" in top and "nn.Conv2d" in top, top
        main.get_by_role("link", name=re.compile("Step to conv2d_0, where it first departs")).click()
        page.wait_for_url("**/forward**step=2**")
        page.get_by_text(re.compile(r"^Operator 2 of 8: conv2d_0")).wait_for(timeout=60_000)
        assert sidebar.locator(ERROR_BOX).count() >= 1  # still said beside the stepper
        assert exception_boxes(page) == []
