"""AppTest: a converted model's verdict (issue 39) on Home and under every page's model line:
a conversion the real pnnx made and a wrapper then altered (test_conversion_check.py) is shown in
the error colour, with a way to the Forward step where it first departs; an honest one agrees."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

from kuiper_core.formats import base, converter_available

pytest.importorskip("streamlit")
from apptest_helpers import (  # noqa: E402
    EXPR,
    FORWARD,
    GRAPH,
    HOME,
    ORDER,
    PROFILE,
    app,
    forward_panel,
    no_exception,
    upload_input,
)

PAGES = [HOME, GRAPH, ORDER, EXPR, FORWARD, PROFILE, "pages/7_ir.py", "pages/8_passes.py", "pages/9_class.py"]
from test_conversion_check import _altering_converter  # noqa: E402

PROBE = DATA / "conversion_check" / "probe.onnx"
X = DATA / "conversion_check" / "probe.input.npy"
pytestmark = [
    pytest.mark.slow,  # AppTest runs, real conversions, onnxruntime
    pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed"),
    pytest.mark.skipif(not base.installed("onnxruntime"), reason="onnxruntime is not installed"),
]


@pytest.fixture(autouse=True)
def _private_conversion_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))


def _upload(at, path=PROBE, name=None):
    at.file_uploader(key="home_param").upload(name or path.name, path.read_bytes()).run()
    at.button(key="home_load_upload").click().run()
    no_exception(at)
    return at


def test_a_disagreeing_conversion_is_shown_in_the_error_colour_with_a_way_to_where_it_departs(tmp_path, monkeypatch):
    _altering_converter(tmp_path, monkeypatch, "padding")
    at = _upload(app(), name="altered.onnx")  # the server keeps loaded uploads by content and name
    errors = " ".join(e.value for e in at.error)
    assert "does not compute what the original does" in errors and "DISAGREES with onnxruntime" in errors, errors
    assert sum("DISAGREES" in e.value for e in at.sidebar.error) >= 1  # the model line, on every page
    links = [el for el in at.get("page_link") if "first departs" in el.proto.label]
    assert links and links[0].proto.query_string == "step=2"  # conv2d_0, step 2 (after pnnx.Input)
    for page in PAGES[1:]:  # every page that shows the model: its model line and its top, in the error colour
        at.switch_page(page).run()
        no_exception(at)
        assert any("DISAGREES" in e.value for e in at.sidebar.error), page
        assert any("does not compute what the original does" in e.value for e in at.main.error), page
        steps = {el.proto.query_string for el in at.get("page_link") if "first departs" in el.proto.label}
        assert steps == {"step=2"}, (page, steps)
    at.switch_page(PAGES[0]).run()
    at.button(key="home_verdict_to_forward").click().run()
    no_exception(at)
    assert "Operator 2 of 8:" in forward_panel(at), forward_panel(at)
    assert sum("DISAGREES" in e.value for e in at.sidebar.error) >= 1  # still said on the Forward page
    at.switch_page(PAGES[0]).run()  # the link's own way in: ?step=2 on the Forward page
    at.query_params["step"] = "2"
    at.switch_page(FORWARD).run()
    assert "Operator 2 of 8:" in forward_panel(at), forward_panel(at)
    # a reload (the URL names the model): the verdict comes back with it, no framework runs again
    from kuiper_core.references import isolated

    spawned: list[str] = []  # (an error raised there would be caught as the framework failing)
    monkeypatch.setattr(isolated, "_spawn", lambda what, *a, **k: spawned.append(what))
    query = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    reloaded = app(None, GRAPH, query=query)
    assert any("DISAGREES" in e.value for e in reloaded.sidebar.error), [e.value for e in reloaded.error]
    assert any("does not compute what the original does" in e.value for e in reloaded.main.error)
    assert spawned == []


def test_an_honest_conversion_says_it_agrees():
    at = _upload(app())
    assert any("conversion checked: agrees with onnxruntime" in s.value for s in at.success)
    assert any("agrees with onnxruntime" in c.value for c in at.sidebar.caption)
    assert not at.error
    for page in PAGES[1:]:
        at.switch_page(page).run()
        assert any("agrees with onnxruntime" in c.value for c in at.sidebar.caption), page
        assert not any("DISAGREES" in e.value for e in at.error), page
    # the user's own input: the conversion is checked on it too, and the pages say so
    at.switch_page(HOME).run()
    assert not any("(on your input)" in c.value for c in at.sidebar.caption)
    upload_input(at, np.load(X), "mine.npy")
    said = [c.value for c in at.sidebar.caption]
    assert any("agrees with onnxruntime" in c and "(on your input)" in c for c in said), said
    at.switch_page(FORWARD).run()
    assert any("(on your input)" in c.value for c in at.sidebar.caption)


def test_an_input_of_another_shape_converts_the_upload_again_at_that_shape():
    import io

    import numpy as np

    at = _upload(app(), DATA / "conversion_check" / "dynamic.onnx")  # dynamic batch, height, width
    x = np.random.default_rng(1).standard_normal((3, 2, 5, 7)).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, x)
    at.radio(key="home_input_kind").set_value("npy").run()
    at.file_uploader(key="home_npy").upload("batch3.npy", buf.getvalue()).run()
    no_exception(at)
    said = " ".join(c.value for c in at.caption)
    assert "inputshape [3,2,5,7]" in said, said
    assert any("uploaded array batch3.npy" in c.value for c in at.sidebar.caption)
    assert not at.error, [e.value for e in at.error]
