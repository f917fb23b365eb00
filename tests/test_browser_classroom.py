"""The classroom in a real browser (Chromium at 1280×720, a projector): quizzes played by
clicking graph nodes, tree nodes, tokens and stack values, with the score and the feedback
checked; presenter views that fit the screen, show no control and step by keyboard only."""

from __future__ import annotations

import re

import pytest
from app_server import (
    SCREENSHOTS,
    VIEW,
    VIEW_SVG,
    skip_without_browser,
    chromium_page,
    click_node,
    exception_boxes,
    streamlit_server,
    wait_highlight,
    wait_idle,
)

from kuiper_core.explore import order_quiz as Q
from kuiper_core.explore import walkthrough as W

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

skip_without_browser()

PROJECTOR = {"width": 1280, "height": 720}
# What a presenter view must not show: every control a user could operate.
CONTROLS = "button, input, textarea, select, [role=slider], [role=combobox], [role=radiogroup], [role=checkbox]"


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page(**PROJECTOR) as p:
        p.kx_url = url  # type: ignore[attr-defined]
        yield p


def open_page(page, path: str, graph: bool = True) -> None:
    page.goto(page.kx_url + path)  # type: ignore[attr-defined]
    if graph:
        page.wait_for_selector(f"{VIEW_SVG} g.node")
    wait_idle(page)


def alert(page, kind: str) -> str:
    """The text of the quiz's verdict box ('error', 'warning' or 'success')."""
    box = page.locator(f'[data-testid="stAlertContent{kind.title()}"]').first
    box.wait_for()
    return box.inner_text()


def score(page) -> str:
    return page.locator('[data-testid="stMarkdown"]').filter(has_text=re.compile(r"^Score: ")).first.inner_text()


def button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def next_question(page) -> None:
    page.wait_for_function(  # the button of the run on screen only (a rerun's old copy may linger)
        "() => [...document.querySelectorAll('button')].filter(b => b.innerText.trim() === 'Next question').length === 1"
    )
    button(page, "Next question").click()
    wait_idle(page)


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


def visible_controls(page) -> list[str]:
    return page.evaluate(
        f"""() => [...document.querySelectorAll({CONTROLS!r})].filter(e => {{
            const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
            return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && e.offsetParent !== null;
        }}).map(e => e.tagName + ':' + (e.innerText || e.getAttribute('aria-label') || e.name || '').slice(0, 30))"""
    )


def on_screen(page, locator) -> bool:
    b = locator.bounding_box()
    return (
        b is not None
        and b["y"] >= 0
        and b["y"] + b["height"] <= PROJECTOR["height"]
        and b["x"] >= 0
        and (b["x"] + b["width"] <= PROJECTOR["width"])
    )


def test_order_quiz_by_clicking_nodes_keeps_score_and_says_why(page) -> None:
    open_page(page, "/order?graph=A+small+diamond&algo=kahn&mode=quiz")
    page.get_by_text("Which node does Kahn emit next?").wait_for()
    assert score(page) == "Score: no answers yet · question 1 of 5"
    click_node(page, "add")
    wait_idle(page)
    assert "add is not next: its in-degree is still 2 (left and right have not been emitted)" in alert(page, "error")
    assert score(page).startswith("Score: 0 of 1")
    wait_highlight(page, "input")  # the answer's step on the graph
    next_question(page)
    click_node(page, "right")  # ready, but the FIFO queue's front is left
    wait_idle(page)
    warning = alert(page, "warning")
    assert "Valid, but not this engine's choice" in warning and "left was enqueued before right" in warning
    page.keyboard.press("ArrowRight")  # the next question, by keyboard
    page.get_by_text("question 3 of 5").first.wait_for()
    wait_idle(page)
    click_node(page, "right")
    wait_idle(page)
    assert "right is at the front of the queue" in alert(page, "success")
    assert score(page).startswith("Score: 1 of 3")
    shot(page, "order_quiz.png")
    assert exception_boxes(page) == []


def test_order_quiz_dfs_played_to_the_end_by_clicks(page) -> None:
    w = W.walkthrough(W.PRESETS["KuiperInfer's worked example"], "dfs")
    answers = [q.answer for q in Q.questions(w, "visit")]
    open_page(page, "/order?graph=KuiperInfer%27s+worked+example&algo=dfs&mode=quiz")
    for i, node in enumerate(answers):
        page.get_by_text(f"question {i + 1} of {len(answers)}").first.wait_for()
        click_node(page, node)
        wait_idle(page)
        alert(page, "success")
        if i + 1 < len(answers):
            next_question(page)
    assert score(page).startswith(f"Score: {len(answers)} of {len(answers)} · {len(answers)} in a row")
    assert button(page, "Next question").is_disabled()
    assert exception_boxes(page) == []


def test_expression_quiz_by_tree_clicks_tokens_and_stack_values(page) -> None:
    open_page(page, "/expressions?mode=quiz")  # mul(add(@0,1.5),neg(@1)) on example tensors
    page.get_by_text("Which node does the stack machine evaluate next?").wait_for()
    titles = page.locator(VIEW).first.evaluate(
        "v => Object.fromEntries([...v.querySelectorAll('svg g.node')].map(g => "
        "[g.querySelector('text').textContent, g.querySelector(':scope > title').textContent]))"
    )
    click_node(page, titles["add"])  # a call before its arguments
    wait_idle(page)
    assert "its argument `@0` is not evaluated yet".replace("`", "") in alert(page, "error").replace("`", "")
    next_question(page)  # @0 is on the stack now: 1.5 is next
    page.locator('[data-testid="stButtonGroup"] button').filter(has_text=re.compile(r"^1\.5$")).click()  # a token
    wait_idle(page)
    assert "leftmost node not evaluated yet" in alert(page, "success")
    next_question(page)  # both arguments of add are on the stack
    click_node(page, titles["add"])
    wait_idle(page)
    assert "so the machine pops 2, applies add" in alert(page, "success")
    assert score(page).startswith("Score: 2 of 3")
    page.get_by_text("a call's first argument").click()
    wait_idle(page)
    page.get_by_text("Which value on the stack does").first.wait_for()
    page.locator('[data-testid="stButtonGroup"] button').filter(has_text="top: 1.5").click()  # a stack value
    wait_idle(page)
    assert "is argument 2 of" in alert(page, "error")
    page.get_by_text("what a ')' closes").click()
    wait_idle(page)
    page.locator('[data-testid="stButtonGroup"] button').filter(has_text=re.compile(r"^add$")).click()
    wait_idle(page)
    assert "innermost call still open at column 15" in alert(page, "success")
    shot(page, "expressions_quiz.png")
    assert exception_boxes(page) == []


def _check_presenter(page, message_class: str = ".kx-present-msg", min_px: float = 28) -> None:
    assert visible_controls(page) == [], visible_controls(page)
    assert page.locator('[data-testid="stSidebar"]').is_hidden()
    msg = page.locator(message_class).first
    assert on_screen(page, msg) and on_screen(page, page.locator(".kx-present-head"))
    for i in range(page.locator(VIEW).count()):
        assert on_screen(page, page.locator(VIEW).nth(i)), f"graph {i} is not on the screen"
    assert float(msg.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= min_px
    assert page.evaluate("() => document.scrollingElement.scrollHeight <= innerHeight + 1")
    main = "document.querySelector('[data-testid=\"stMain\"]')"
    assert page.evaluate(f"() => {main}.scrollHeight <= {main}.clientHeight + 1"), "the presenter view scrolls"


def test_order_presenter_fits_the_projector_and_steps_by_keyboard(page) -> None:
    open_page(page, "/order?graph=A+small+diamond&algo=kahn&step=7&present=1")
    page.get_by_text("step 7 of 16").wait_for()
    _check_presenter(page)
    assert page.locator(".kx-present-msg").first.inner_text() == "right now has in-degree 0: enqueue it."
    shot(page, "order_presenter.png")
    page.keyboard.press("ArrowRight")
    page.get_by_text("step 8 of 16").wait_for()
    wait_idle(page)
    assert page.locator(".kx-present-msg").first.inner_text() == "Dequeue left and append it to the order."
    wait_highlight(page, "left")
    page.keyboard.press("PageUp")
    page.get_by_text("step 7 of 16").wait_for()
    wait_idle(page)  # a key pressed mid-run may reach a listener being replaced
    page.keyboard.press("PageDown")
    page.get_by_text("step 8 of 16").wait_for()
    wait_idle(page)
    page.keyboard.press("Escape")
    button(page, "Step").wait_for()
    assert page.get_by_text("Step 8 of 16").count() >= 1  # the walkthrough is where the presenter left it


def test_order_side_by_side_presenter_fits(page) -> None:
    open_page(page, "/order?graph=KuiperInfer%27s+worked+example&algo=both&step=6&present=1")
    page.get_by_text("step 6 of 18").wait_for()
    assert page.locator(VIEW).count() == 2
    _check_presenter(page, ".kx-present-msg.kx-small", min_px=22)
    shot(page, "order_both_presenter.png")


def test_order_quiz_presenter_reveals_by_keyboard(page) -> None:
    open_page(page, "/order?graph=A+small+diamond&algo=kahn&mode=quiz&present=1")
    page.get_by_text("question 1 of 5").wait_for()
    _check_presenter(page)
    page.keyboard.press("ArrowRight")  # reveal
    page.get_by_text(re.compile(r"^input\. input is at the front of the queue")).wait_for()
    wait_idle(page)  # a key pressed mid-run may reach a listener being replaced
    page.keyboard.press("ArrowRight")  # the next question
    page.get_by_text("question 2 of 5").wait_for()
    wait_idle(page)  # a key pressed mid-run may reach a listener being replaced
    page.keyboard.press("ArrowRight")
    page.get_by_text(re.compile(r"left was enqueued first")).wait_for()
    shot(page, "order_quiz_presenter.png")
    page.keyboard.press("Escape")
    wait_idle(page)
    button(page, "Next question").wait_for()


def test_expressions_presenter_fits_the_projector_and_steps_by_keyboard(page) -> None:
    open_page(page, "/expressions?present=1&step=1")
    page.get_by_text("step 1 of 6").wait_for()
    _check_presenter(page)
    assert page.locator(".kx-present-msg").first.inner_text().startswith("push @0")
    page.keyboard.press("ArrowRight")
    page.get_by_text("step 2 of 6").wait_for()
    wait_idle(page)
    assert page.locator(".kx-present-msg").first.inner_text().startswith("push 1.5")
    shot(page, "expressions_presenter.png")
    page.keyboard.press("ArrowLeft")
    page.get_by_text("step 1 of 6").wait_for()
    wait_idle(page)  # a key pressed mid-run may reach a listener being replaced
    page.keyboard.press("Escape")
    button(page, "Step").wait_for()
    assert exception_boxes(page) == []


def _tree_state(page) -> dict:
    return page.locator(VIEW).first.evaluate(
        """v => ({text_px: +v.dataset.fontPx * +v.dataset.scale, highlight: v.dataset.highlight,
                 inside: v.kxVisible(v.dataset.highlight),
                 stack: [...document.querySelectorAll('.kx-present-state')].map(e => ({
                   over: e.scrollWidth - e.clientWidth, right: e.getBoundingClientRect().right})),
                 width: innerWidth})"""
    )


def test_expressions_presenter_on_a_big_tree_scales_pans_and_wraps(page) -> None:
    """expr_zoo's 30-node tree on a projector (issue 38 item 8): its text as large as Execution
    order's presenter graph (it stayed 13 px), the step's node inside the box at every step, a
    drag pans to the rest (the left branch was cut with no way to it) and the stack's long lines
    wrap on the screen (they ran off it)."""
    open_page(page, "/expressions?model=expr_zoo&present=1&step=24")
    page.get_by_text(re.compile(r"step 24 of \d+")).wait_for()
    _check_presenter(page)
    for step in range(24, 31):
        if step > 24:
            page.keyboard.press("ArrowRight")
            page.get_by_text(re.compile(rf"step {step} of \d+")).wait_for()
            wait_idle(page)
        page.wait_for_function(f"() => (v => v.kxVisible(v.dataset.highlight))(document.querySelector('{VIEW}'))")
        got = _tree_state(page)
        assert got["text_px"] >= 17.5 and got["inside"], (step, got)
        assert got["stack"] and all(s["over"] <= 1 and s["right"] <= got["width"] for s in got["stack"]), (step, got)
    node = f"{VIEW} .kx-stage svg g.node"
    before = page.locator(node).first.bounding_box()
    port = page.locator(f"{VIEW} .kx-port").bounding_box()
    page.mouse.move(port["x"] + 40, port["y"] + port["height"] - 40)
    page.mouse.down()
    page.mouse.move(port["x"] + 240, port["y"] + port["height"] - 40, steps=8)
    page.mouse.up()
    after = page.locator(node).first.bounding_box()
    assert after["x"] - before["x"] == pytest.approx(200, abs=3), (before, after)  # the tree pans with the drag
    assert exception_boxes(page) == []
