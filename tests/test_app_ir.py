"""AppTest: the IR page on every bundled model, its highlight tied to the Forward stepper, and
the edit-and-run flow with located errors (never a traceback)."""

from __future__ import annotations

import json
import re

import pytest
import apptest_helpers as helpers
from conftest import ROOT, SAMPLES, slow_cases

import kuiper_core

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

MODELS = list(json.loads((SAMPLES / "models.json").read_text()))
IR, FORWARD = "pages/7_ir.py", "pages/5_forward.py"


def app(model: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    if model is not None:
        at.radio(key="home_bundled").set_value(model).run()
    at.switch_page(IR).run()
    no_exception(at)
    return at


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def ir_blocks(at: AppTest) -> list[str]:
    """The st.html blocks of IR text (the text tab first, then the three-ways tab)."""
    return [h.proto.body for h in at.get("html") if 'class="kx-ir"' in h.proto.body]


def highlighted(at: AppTest) -> set[str]:
    return {op for body in ir_blocks(at) for op in re.findall(r'class="kx-ir-current" data-op="([^"]+)"', body)}


@pytest.mark.parametrize(
    "name", slow_cases(MODELS, {"deep1500", "mobilenetv3", "resnet18", "tiny_mlp", "yolov5s_mini"})
)
def test_page_renders_every_model_in_all_three_ways(name: str) -> None:
    at = app(name)
    ops = [op.name for op in kuiper_core.pnnx.read_param(SAMPLES / f"{name}.pnnx.param").operators]
    text_block = ir_blocks(at)[0]
    shown = set(re.findall(r" @([\w.]+) \(", text_block))
    assert shown <= set(ops) and shown, "the text tab shows the model's operations"
    if len(ops) + 2 <= 80:
        assert shown == set(ops)
    for way in ("Dataflow", "Let-bound (A-normal form)", "Nested"):
        at.radio(key="ir_way").set_value(way).run()
        no_exception(at)
    assert any("The full tree has" in c.value for c in at.caption)


@pytest.mark.slow
def test_highlight_follows_the_shared_forward_cursor() -> None:
    at = app("digits_cnn")
    assert highlighted(at) == set()
    order = [r.name for r in kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param").order]
    at.button(key="ir_step").click().run()
    at.button(key="ir_step").click().run()
    no_exception(at)
    assert highlighted(at) == {order[1]}
    at.button(key="ir_back").click().run()
    assert highlighted(at) == {order[0]}
    # The Forward page sees the same cursor, and stepping there moves it here.
    at.switch_page(FORWARD).run()
    assert helpers.highlight(at) == order[0] and f"Operator 1 of 12: {order[0]}</b>" in helpers.forward_panel(at)
    helpers.forward_step(at)
    at.switch_page(IR).run()
    no_exception(at)
    assert highlighted(at) == {order[1]}


@pytest.mark.slow
def test_buttons_are_drawn_for_the_cursor_they_moved_and_the_url_keeps_it() -> None:
    """Step and Back act before the buttons are drawn: Step is disabled by the click that
    reaches the last operator, not the one after; the URL carries the step."""
    at = helpers.app("tiny_mlp", IR)  # through app.py's navigation, which writes the URL
    total = len(kuiper_core.load(SAMPLES / "tiny_mlp.pnnx.param").order)
    assert at.button(key="ir_back").disabled and not at.button(key="ir_step").disabled
    at.button(key="ir_step").click().run()
    assert not at.button(key="ir_back").disabled  # the first click, not the second
    for _ in range(total - 1):
        at.button(key="ir_step").click().run()
    no_exception(at)
    assert at.button(key="ir_step").disabled
    assert at.query_params["step"] in (str(total), [str(total)])
    at.button(key="ir_back").click().run()
    assert not at.button(key="ir_step").disabled and at.query_params["step"] in (str(total - 1), [str(total - 1)])


def test_edit_with_a_mistake_shows_the_caret_not_a_traceback() -> None:
    at = app("digits_cnn")
    area = at.text_area[0]
    area.set_value(area.value.replace("stride:(Array)[(Int32)2,(Int32)2]}", "stride:(Array)[(Int32)2,(Int32)2}")).run()
    at.button(key="ir_run").click().run()
    no_exception(at)
    message = next(c.value for c in at.code if "error:" in c.value)
    head, source, caret = message.split("\n")[:3]
    assert re.match(r"edited\.kir:\d+:\d+: error: expected ',' or '\]' in the array", head)
    # The caret sits under the culprit; a long line is shown as a window around it, so the
    # caret stays on screen (explore/messages.py).
    assert source[caret.index("^")] == "}"


def test_edit_and_rerun_reports_the_difference() -> None:
    at = app("digits_cnn")
    at.button(key="ir_run").click().run()  # unchanged: same answer as the loaded model
    no_exception(at)
    table = at.dataframe[0].value
    assert table["max |Δ| vs the model as loaded"].tolist() == ["0"]
    area = at.text_area[0]
    area.set_value(area.value.replace('"nn.ReLU" @relu ', '"nn.Sigmoid" @relu ', 1)).run()
    at.button(key="ir_run").click().run()
    no_exception(at)
    table = at.dataframe[0].value
    assert float(table["max |Δ| vs the model as loaded"][0]) > 1e-3
    assert any("nn.Sigmoid" in c.value for c in at.code)  # the diff
    at.button(key="ir_restore").click().run()
    assert "nn.Sigmoid" not in at.text_area[0].value


def test_tokens_of_the_current_line() -> None:
    at = app("digits_cnn")
    at.button(key="ir_step").click().run()
    at.button(key="ir_step").click().run()
    tokens = [d.value for d in at.dataframe if "kind" in d.value.columns][0]
    assert '"nn.Conv2d"' in tokens["text"].tolist() and "body" in tokens["kind"].tolist()


def test_a_shared_link_opens_the_step() -> None:
    at = helpers.app(None, IR, query={"model": "tiny_mlp", "step": "3"})
    order = [r.name for r in kuiper_core.load(SAMPLES / "tiny_mlp.pnnx.param").order]
    assert highlighted(at) == {order[2]}
    at.button(key="ir_reset").click().run()  # the old step in the URL does not come back
    assert highlighted(at) == set() and "step" not in at.query_params
