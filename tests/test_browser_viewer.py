"""The graph viewer in Chromium (Playwright): what the user sees agrees with what the page
says, at every step, on a projector (1280×720) and a 1080p screen.

- Passes: after switching "Start from", the pass picker and the change list under it name
  the same pass.
- Execution order: at every step of DFS and Kahn on every preset and on a typed graph,
  the colours, labels and current node of the *visible* drawing match the engine's trace
  (stack, visited, queue, in-degrees, order so far), also in fullscreen.
"""

from __future__ import annotations

import contextlib
import json
import re
from urllib.parse import quote_plus

import pytest
from app_server import (
    VIEW,
    browser_missing,
    chromium_page,
    exception_boxes,
    goto_page,
    pick_bundled_model,
    streamlit_server,
    wait_idle,
)

from kuiper_core.explore import walkthrough as W

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]

_why = browser_missing()
if _why:
    pytest.skip(f"browser tests need Chromium and Playwright: {_why}", allow_module_level=True)

PROJECTOR = {"width": 1280, "height": 720}
HD = {"width": 1920, "height": 1080}
TYPED = "a -> b, c\nb -> d\nc -> d -> e\nx -> c"

# Fill colours the walkthrough's legend promises, by what the engine's trace says of a node.
WHITE, STACK, DONE, QUEUED, CYCLE = (
    W.COLORS["not visited"],
    W.COLORS["on the call stack"],
    W.COLORS["visited, finished (in the output list)"],
    W.COLORS["in the queue"],
    W.COLORS["on the cycle"],
)


@pytest.fixture(scope="module")
def server():
    with streamlit_server(timeout=120) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with chromium_page(**PROJECTOR) as p:
        p.kx_url = server  # type: ignore[attr-defined]
        yield p


@contextlib.contextmanager
def viewport(page, size: dict):
    old = page.viewport_size
    page.set_viewport_size(size)
    try:
        yield
    finally:
        page.set_viewport_size(old)


def expected_state(w: W.Walkthrough, step: int) -> dict:
    """What the drawing must show after `step` (0 = before the first event), from the trace."""
    if step == 0:
        return {"fill": {n: WHITE for n in w.nodes}, "labels": {n: [n] for n in w.nodes}, "current": None}
    e = w.events[step - 1]
    fill = {n: WHITE for n in w.nodes}
    labels = {n: [n] for n in w.nodes}
    if w.algorithm == "dfs":
        for n in e.visited:
            fill[n] = DONE if n not in e.stack else STACK
        for n in e.stack:
            fill[n] = STACK
        if e.kind == "reverse":  # the last step numbers the nodes in execution order
            labels = {n: [f"{i + 1}. {n}"] for i, n in enumerate(e.output)}
    else:
        for n in e.queue:
            fill[n] = QUEUED
        for n in e.output:
            fill[n] = DONE
        for n, d in e.indegree.items():
            labels[n] = [n, f"in-degree {d}"]
    if e.kind == "cycle":
        for n in w.cycle or ():
            fill[n] = CYCLE
    return {"fill": fill, "labels": labels, "current": e.node}


# The visible drawing (the copy in the viewer, not Streamlit's hidden source) as the same dict.
VISIBLE = """v => {
  const out = {fill: {}, labels: {}, current: null};
  for (const g of v.querySelectorAll('.kx-stage svg g.node')) {
    const t = g.querySelector(':scope > title').textContent;
    out.fill[t] = (g.querySelector('path, polygon, ellipse').getAttribute('fill') || '').toLowerCase();
    out.labels[t] = [...g.querySelectorAll('text')].map(x => x.textContent);
    if (g.classList.contains('kx-current')) out.current = t;
  }
  return out;
}"""


def wait_drawn(page, want: dict, what: str) -> None:
    """Until the viewer shows `want`; on timeout, fail with the difference."""
    js = f"""() => {{ const v = document.querySelector('{VIEW}'); if (!v) return false;
        const got = ({VISIBLE})(v), want = {json.dumps(want)};
        return JSON.stringify(got.fill) === JSON.stringify(Object.fromEntries(Object.keys(got.fill).map(k => [k, want.fill[k]])))
            && Object.keys(want.fill).every(k => k in got.fill)
            && Object.keys(want.labels).every(k => JSON.stringify(got.labels[k]) === JSON.stringify(want.labels[k]))
            && got.current === want.current; }}"""
    try:
        page.wait_for_function(js, timeout=15_000)
    except Exception:
        got = page.locator(VIEW).first.evaluate(VISIBLE)
        diff = {
            n: {"drawn": (got["fill"].get(n), got["labels"].get(n)), "trace": (want["fill"][n], want["labels"][n])}
            for n in want["fill"]
            if got["fill"].get(n) != want["fill"][n] or got["labels"].get(n) != want["labels"][n]
        }
        cur = (got["current"], want["current"])
        pytest.fail(f"{what}: the drawing contradicts the trace: {diff or ''} current (drawn, trace) {cur}")


def walk_every_step(page, w: W.Walkthrough, what: str, fullscreen_at: int | None = None) -> None:
    wait_drawn(page, expected_state(w, 0), f"{what} before the first step")
    for step in range(1, len(w.events) + 1):
        if fullscreen_at is not None and step == fullscreen_at:
            page.locator(f"{VIEW} .kx-tools button[data-act=full]").click()
            page.wait_for_function("() => document.fullscreenElement !== null")
        if page.evaluate("() => document.fullscreenElement !== null"):
            page.keyboard.press("ArrowRight")  # a clicker's key: the only control in fullscreen
        else:
            page.get_by_role("button", name="Step", exact=True).click()
        wait_drawn(page, expected_state(w, step), f"{what}, step {step}")
    if fullscreen_at is not None:
        page.evaluate("() => document.exitFullscreen()")
        page.wait_for_function("() => document.fullscreenElement === null")


@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
@pytest.mark.parametrize("preset", list(W.PRESETS))
def test_walkthrough_drawing_follows_every_step(page, preset: str, algorithm: str) -> None:
    page.goto(f"{page.kx_url}/order?graph={quote_plus(preset)}&algo={algorithm}")
    wait_idle(page)
    w = W.walkthrough(W.PRESETS[preset], algorithm)
    fullscreen = 3 if preset == "A small diamond" else None  # the later steps in fullscreen
    walk_every_step(page, w, f"{preset}, {algorithm}", fullscreen_at=fullscreen)
    assert exception_boxes(page) == []


@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
def test_walkthrough_on_a_typed_graph_follows_every_step(page, algorithm: str) -> None:
    page.goto(f"{page.kx_url}/order?algo={algorithm}")
    wait_idle(page)
    page.get_by_role("combobox").first.click()  # the "Graph" picker
    page.get_by_role("option", name="Type your own graph").click()
    wait_idle(page)
    area = page.locator("textarea").first
    area.fill(TYPED)
    area.press("Control+Enter")
    wait_idle(page)
    w = W.walkthrough(W.parse_edges(TYPED), algorithm)
    walk_every_step(page, w, f"typed graph, {algorithm}")
    assert exception_boxes(page) == []


# -- Passes: the pass picker and what is shown under it are the same pass ---------------------------
def _picked_and_shown(page) -> tuple[str, str]:
    pick = page.locator('[data-testid="stSelectbox"]').filter(has_text="What a pass did").locator("input")
    summary = page.locator('[data-testid="stExpander"]').filter(has_text="change(s) recorded by").first
    picked = pick.input_value().split(". ", 1)[1]
    shown = re.search(r"recorded by (\S+)", summary.locator("summary").inner_text()).group(1)
    return picked, shown


def test_passes_picker_agrees_with_the_changes_after_switching_start(page) -> None:
    page.goto(page.kx_url)
    wait_idle(page)
    pick_bundled_model(page, "resnet18")
    goto_page(page, "passes")
    starts = page.locator('[data-testid="stRadio"]').filter(has_text="Start from")
    labels = starts.locator("label").all_inner_texts()
    assert len(labels) >= 3
    for label in labels + labels[:1]:  # every start, then back to the first
        starts.get_by_text(label, exact=True).click()
        wait_idle(page)
        picked, shown = _picked_and_shown(page)
        assert picked == shown, f"start {label!r}: the picker says {picked}, the changes are {shown}'s"
        diff = page.locator('[data-testid="stCode"]').filter(has_text="--- before").first
        assert f"before {shown}" in diff.inner_text()[:300]  # the diff is that pass's too
    assert exception_boxes(page) == []
