"""What a fresh audit in Chromium found after the viewer and classroom branches met in `main`
(issue 23): each test here would have caught one finding.

- Kahn's legend said white meant "in-degree above 0" while the step's narration and the
  node's own label said its in-degree had just dropped to 0.
- A page's first load by link looked settled while its script still ran (Streamlit 1.67
  draws no status widget with toolbarMode "minimal"): the app's root says when a run ends.
- Expressions draws only the open tab below the first screen: the others still open.
"""

from __future__ import annotations

import re
from urllib.parse import quote_plus

import pytest
from app_server import VIEW, chromium_page, exception_boxes, skip_without_browser, streamlit_server, wait_idle

from kuiper_core.explore import walkthrough as W

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

skip_without_browser()

PROJECTOR = {"width": 1280, "height": 720}

# Each node of the visible drawing: its fill and the lines of its label; each legend chip: its
# text and colour (as the viewer wrote them).
DRAWN = """v => ({
  nodes: [...v.querySelectorAll('.kx-stage svg g.node')].map(g => ({
    fill: (g.querySelector('path, polygon, ellipse').getAttribute('fill') || '').toLowerCase(),
    label: [...g.querySelectorAll('text')].map(t => t.textContent)})),
  chips: [...v.closest('.kx-wrap').querySelectorAll('.kx-legend .kx-chip')].map(c => ({
    text: c.textContent, bg: (c.getAttribute('style').match(/background:(#[0-9a-fA-F]{6})/) || [, ''])[1].toLowerCase()}))
})"""


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page(**PROJECTOR) as p:
        p.kx_url = url  # type: ignore[attr-defined]
        yield p


@pytest.mark.parametrize("preset", list(W.PRESETS))
def test_kahn_legend_never_contradicts_a_drawn_in_degree(page, preset: str) -> None:
    w = W.walkthrough(W.PRESETS[preset], "kahn")
    page.goto(f"{page.kx_url}/order?graph={quote_plus(preset)}&algo=kahn")
    wait_idle(page)
    for step in range(1, len(w.events) + 1):
        page.get_by_role("button", name="Step", exact=True).click()
        page.get_by_text(f"Step {step} of {len(w.events)}", exact=True).wait_for()
        wait_idle(page)
        drawn = page.locator(VIEW).first.evaluate(DRAWN)
        meaning = {c["bg"]: c["text"] for c in drawn["chips"] if c["bg"]}
        for node in drawn["nodes"]:
            degree = next((int(m.group(1)) for t in node["label"] if (m := re.fullmatch(r"in-degree (\d+)", t))), None)
            said = meaning.get(node["fill"], "")
            if degree == 0:
                assert "above 0" not in said, f"step {step}: {node['label']} drawn as '{said}'"
            if "queue" in said and "not" not in said:
                assert degree == 0, f"step {step}: {node['label']} drawn as '{said}'"
    assert exception_boxes(page) == []


def test_a_first_load_by_link_is_idle_only_when_its_script_has_run(page) -> None:
    """The Expressions page of a model runs the model up to the operator (a spinner) on a
    first visit: wait_idle must not return before the tree is drawn."""
    page.goto(f"{page.kx_url}/expressions?model=resnet18")
    wait_idle(page)
    assert page.locator(f"{VIEW} .kx-stage svg g.node").count() > 0
    assert page.get_by_text("Running the model up to").count() == 0


def test_expressions_draws_the_open_tab_only_and_the_others_still_open(page) -> None:
    page.goto(f"{page.kx_url}/expressions?model=digits_cnn")
    wait_idle(page)
    assert page.get_by_text("@0 1.5 add @1 neg mul").count() == 0  # Reverse Polish: not drawn while closed
    page.get_by_role("tab", name="Reverse Polish").click()
    page.get_by_text("@0 1.5 add @1 neg mul").first.wait_for()
    wait_idle(page)
    page.get_by_role("tab", name="Tokens").click()
    page.get_by_text("Canonical text").wait_for()
    wait_idle(page)
    page.get_by_role("button", name="Back", exact=True).click()  # a step keeps the open tab
    wait_idle(page)
    assert page.get_by_text("Canonical text").is_visible()
    assert exception_boxes(page) == []


def test_forward_hooks_snippet_is_drawn_when_its_expander_opens(page) -> None:
    """The Python snippet (highlighted: ~0.5 s of the browser at each load of the Forward
    page) is drawn only once its expander is opened, and then at once."""
    page.goto(f"{page.kx_url}/forward?model=digits_cnn")
    wait_idle(page)
    snippet = page.locator('[data-testid="stCode"]').filter(has_text="register_forward_hook")
    assert snippet.count() == 0
    page.get_by_text("Make a reference file from your PyTorch model (forward hooks)").click()
    snippet.first.wait_for()
    wait_idle(page)
    page.get_by_role("button", name="Step", exact=True).click()  # a step keeps it open
    wait_idle(page)
    assert snippet.first.is_visible()
    assert exception_boxes(page) == []


@pytest.mark.parametrize("model", ["resnet18", "deep1500"])
def test_presenter_draws_the_loaded_model_in_large_type(page, model: str) -> None:
    """Large type in the presenter view includes the graph: a model's nodes were drawn at the
    page's 13 px on a projector while the sentence beside them was 30 px."""
    page.goto(f"{page.kx_url}/order?graph=The+loaded+model&algo=kahn&step=3&present=1&model={model}")
    wait_idle(page)
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
    data = page.locator(VIEW).first.evaluate("v => ({...v.dataset})")
    assert float(data["fontPx"]) >= 18 and int(data["inView"]) >= 3, data
    assert page.locator(f"{VIEW} g.node.kx-current").count() == 1  # the step's node, in view
    assert page.locator(VIEW).first.evaluate("v => v.kxVisible(v.dataset.highlight)")
