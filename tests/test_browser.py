"""End to end in a real browser: Debian's Chromium driven by Playwright against
`streamlit run app.py` on a free localhost port.

One browser session walks the app like a new user: Home, the graph of the default model
(its SVG has the model's nodes), choosing an operator moves the highlight, Step on the
Forward page moves it along the execution order, every page renders without an exception
box, and the 1,500-operator model's graph page renders within the 3 s budget. Screenshots
go to tests/artifacts/screenshots/ (KUIPER_SCREENSHOTS=docs/screenshots refreshes the README's).
"""

from __future__ import annotations

import json

import pytest
from app_server import (
    GRAPH_SVG,
    SCREENSHOTS,
    browser_missing,
    chromium_page,
    current_highlight,
    exception_boxes,
    goto_page,
    graph_render_seconds,
    pick_bundled_model,
    streamlit_server,
    svg_node_titles,
    wait_idle,
)
from conftest import SAMPLES

from kuiper_core.pnnx import read_param

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

_why = browser_missing()
if _why:
    pytest.skip(f"browser tests need Chromium and Playwright: {_why}", allow_module_level=True)

GRAPH_BUDGET_S = 3.0
MODELS = list(json.loads((SAMPLES / "models.json").read_text()))


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page() as p:
        p.goto(url)
        p.get_by_text("Kuiper Explorer").first.wait_for()
        wait_idle(p)
        p.kx_url = url  # type: ignore[attr-defined]
        yield p


def ops_of(name: str) -> list[str]:
    return [op.name for op in read_param(SAMPLES / f"{name}.pnnx.param").operators]


def test_home(page) -> None:
    page.get_by_text("Operators by type").wait_for()
    assert exception_boxes(page) == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "home.png"), full_page=True)


def test_graph_svg_has_the_models_nodes_and_the_highlight_follows_the_choice(page) -> None:
    pick_bundled_model(page, "digits_cnn")
    goto_page(page, "graph")
    page.wait_for_selector(f"{GRAPH_SVG} g.node")
    assert svg_node_titles(page) - {"kx legend"} == set(ops_of("digits_cnn"))
    assert current_highlight(page) == []
    target = next(op.name for op in read_param(SAMPLES / "digits_cnn.pnnx.param").operators if op.type == "nn.Conv2d")
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Operator details")
    box.click()
    page.keyboard.type(target)
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('{GRAPH_SVG} g.node.kx-current title')]
                 .some(t => t.textContent === {target!r})""",
        timeout=30_000,
    )
    wait_idle(page)
    assert current_highlight(page) == [target]
    page.get_by_text("Weights", exact=True).wait_for()
    assert exception_boxes(page) == []
    page.screenshot(path=str(SCREENSHOTS / "graph.png"), full_page=True)


def test_step_moves_the_highlight_on_the_forward_page(page) -> None:
    goto_page(page, "forward")
    step = page.get_by_role("button", name="Step", exact=True)
    step.wait_for()
    order = []
    for _ in range(3):
        step.click()
        wait_idle(page)
        page.wait_for_selector(f"{GRAPH_SVG} g.node.kx-current")
        order.append(current_highlight(page))
    assert all(len(h) == 1 for h in order), order
    names = [h[0] for h in order]
    assert len(set(names)) == 3, f"Step did not move the highlight: {names}"
    assert set(names) <= set(ops_of("digits_cnn"))
    assert exception_boxes(page) == []
    page.screenshot(path=str(SCREENSHOTS / "forward.png"), full_page=True)


@pytest.mark.parametrize("slug, shot", [("order", "order.png"), ("expressions", "expressions.png"), ("profile", "profile.png")])
def test_other_pages_render_without_exceptions(page, slug: str, shot: str) -> None:
    if slug == "expressions":
        pick_bundled_model(page, "expr_zoo")  # the model with the interesting expressions
    goto_page(page, slug)
    page.wait_for_timeout(500)
    wait_idle(page)
    assert exception_boxes(page) == []
    page.screenshot(path=str(SCREENSHOTS / shot), full_page=True)


@pytest.mark.parametrize("name", [m for m in MODELS if m != "deep1500"])
def test_every_bundled_graph_renders_in_the_browser(page, name: str) -> None:
    """viz.js accepts the DOT of every bundled model: all its operators are SVG nodes."""
    pick_bundled_model(page, name)
    goto_page(page, "graph")
    page.wait_for_function(
        f"() => document.querySelectorAll('{GRAPH_SVG} g.node').length >= {len(ops_of(name))}", timeout=120_000
    )
    assert svg_node_titles(page) - {"kx legend"} == set(ops_of(name))
    assert exception_boxes(page) == []


def test_deep1500_graph_first_render_within_budget(page) -> None:
    seconds, nodes = graph_render_seconds(page, "deep1500")
    print(f"deep1500 graph page first render: {seconds:.2f} s, {nodes} SVG nodes")
    assert nodes > 10
    assert exception_boxes(page) == []
    page.screenshot(path=str(SCREENSHOTS / "graph_deep1500.png"), full_page=False)
    assert seconds <= GRAPH_BUDGET_S, f"graph page took {seconds:.2f} s (budget {GRAPH_BUDGET_S} s)"


def test_ir_page_highlight_follows_step_and_an_edit_shows_the_caret(page) -> None:
    """IR page: Step moves the highlighted line; a broken edit shows the located error."""
    from kuiper_core import ir, load

    pick_bundled_model(page, "digits_cnn")
    goto_page(page, "ir")
    page.get_by_role("button", name="Reset", exact=True).click()  # the Forward test above moved the shared cursor
    wait_idle(page)
    step = page.get_by_role("button", name="Step", exact=True)
    order = [r.name for r in load(SAMPLES / "digits_cnn.pnnx.param").order]
    seen = []
    for _ in range(2):
        step.click()
        wait_idle(page)
        page.wait_for_selector(".kx-ir-current")
        seen.append(set(page.eval_on_selector_all(".kx-ir-current", "es => es.map(e => e.dataset.op)")))
    assert seen == [{order[0]}, {order[1]}], seen  # the text and the three-ways tab mark the same operator
    page.screenshot(path=str(SCREENSHOTS / "ir.png"), full_page=False)
    page.get_by_role("tab", name="Edit and run").click()
    text = ir.print_graph(read_param(SAMPLES / "digits_cnn.pnnx.param"))
    broken = text.replace("($input=%5)", "($input=%55)")
    area = page.locator('[data-testid="stTextArea"] textarea')
    area.fill(broken)
    area.press("Control+Enter")
    wait_idle(page)
    page.get_by_role("button", name="Parse and run").click()
    page.get_by_text("The edited text cannot run").wait_for(timeout=60_000)
    wait_idle(page)
    message = page.locator('[data-testid="stCode"]').filter(has_text="error:").first.inner_text()
    assert "use of undefined value %55" in message and "^^^" in message, message
    assert exception_boxes(page) == []
    page.screenshot(path=str(SCREENSHOTS / "ir_edit.png"), full_page=True)
