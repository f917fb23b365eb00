"""Steps in the browser (issue 38), in Chromium: an Execution order walk and Forward move
through the frames they were sent with no request to the server per step; the URL, the
controls, the panel and the graph agree at every step; the Reset-then-burst sequences that froze the page end on
the right step 50 of 50 times; the current node is inside the box at 1280x720 on every step
of every toy graph, measured on the real DOM."""

from __future__ import annotations

import random
import re
from urllib.parse import parse_qs, urlparse

import pytest
from app_server import (
    chromium_page,
    click_node,
    exception_boxes,
    skip_without_browser,
    streamlit_server,
    wait_caught_up,
    wait_idle,
)

from kuiper_core.explore import walkthrough as W

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

skip_without_browser()

PROJECTOR = {"width": 1280, "height": 720}
STEPS = ".kx-steps"


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page(**PROJECTOR) as p:
        p.kx_url = url  # type: ignore[attr-defined]
        p.kx_sent = []  # type: ignore[attr-defined]  # websocket frames the browser sent
        p.on("websocket", lambda ws: ws.on("framesent", lambda payload: p.kx_sent.append(payload)))
        yield p


def open_walk(page, graph: str, algo: str, step: int | None = None) -> None:
    q = f"/order?graph={graph.replace(' ', '+').replace(chr(39), '%27')}&algo={algo}" + (
        f"&step={step}" if step else ""
    )
    page.goto(page.kx_url + q)
    page.locator(STEPS).wait_for(timeout=120_000)
    wait_idle(page)
    page.wait_for_function("() => document.querySelector('.kx-view')?.dataset.nodes > 0")


def url_step(page) -> int:
    return int(parse_qs(urlparse(page.url).query).get("step", ["0"])[0])


def on_screen(page) -> dict:
    """What the page shows now, read from the DOM: the controls' step, each viewer's current
    node and whether it lies inside its box, each panel's head, the URL's step."""
    got = page.evaluate(
        """() => {
        const views = [...document.querySelectorAll('.kx-view')].map(v => {
          const g = v.querySelector('svg g.node.kx-current');
          let inside = null;
          if (g) {
            const r = g.getBoundingClientRect(), p = v.querySelector('.kx-port').getBoundingClientRect();
            inside = r.left >= p.left - 1 && r.right <= p.right + 1 && r.top >= p.top - 1 && r.bottom <= p.bottom + 1
                     && r.bottom <= window.innerHeight;
          }
          return {current: g ? g.querySelector('title').textContent : null, inside};
        });
        return {step: +document.querySelector('.kx-steps').dataset.step,
                where: document.querySelector('.kx-steps-where').innerText,
                views, panels: [...document.querySelectorAll('.kx-panel')].map(p => p.innerText.split('\\n')[0])};
    }"""
    )
    got["url"] = url_step(page)
    return got


def expected(walks: list[W.Walkthrough], step: int) -> tuple[list[str | None], list[str]]:
    currents, heads = [], []
    for w in walks:
        s = min(step, len(w))
        currents.append(w.state(s - 1).node if s else None)
        heads.append(f"Step {s} of {len(w)}:" if s else "Press Step")
    return currents, heads


def check(page, walks: list[W.Walkthrough], step: int) -> None:
    got = on_screen(page)
    currents, heads = expected(walks, step)
    assert got["step"] == step and got["url"] == step, got
    assert got["where"].startswith(f"Step {step} of {max(len(w) for w in walks)}"), got
    assert [v["current"] for v in got["views"]] == currents, got
    assert all(p.startswith(h) for p, h in zip(got["panels"], heads)), got
    assert all(v["inside"] in (True, None) for v in got["views"]), got


def click(page, act: str) -> None:
    page.locator(f".st-key-order_{act} button").click()


def test_every_step_is_drawn_in_the_browser_with_no_request(page) -> None:
    walk = W.walkthrough(W.PRESETS["A small diamond"], "kahn")
    open_walk(page, "A small diamond", "kahn")
    page.wait_for_timeout(1000)
    page.kx_sent.clear()
    for step in range(1, len(walk) + 1):
        (click(page, "step") if step % 2 else page.keyboard.press("ArrowRight"))
        check(page, [walk], step)  # drawn at once: nothing was waited for
    assert page.locator(".st-key-order_step button").is_disabled()
    sent_while_stepping = len(page.kx_sent)
    page.wait_for_timeout(1500)  # the pause: the server hears the position once
    wait_idle(page)
    assert sent_while_stepping == 0 and 1 <= len(page.kx_sent) <= 2, (sent_while_stepping, len(page.kx_sent))
    check(page, [walk], len(walk))
    assert not exception_boxes(page)
    page.reload()  # the server kept the position (and the URL has it)
    page.locator(STEPS).wait_for()
    wait_idle(page)
    check(page, [walk], len(walk))


@pytest.mark.parametrize("graph", list(W.PRESETS))
@pytest.mark.parametrize("algo", ["dfs", "kahn", "both"])
def test_the_current_node_is_in_view_at_every_step(page, graph: str, algo: str) -> None:
    walks = [W.walkthrough(W.PRESETS[graph], a) for a in (["dfs", "kahn"] if algo == "both" else [algo])]
    open_walk(page, graph, algo)
    for step in range(1, max(len(w) for w in walks) + 1):
        page.keyboard.press("ArrowRight")
        check(page, walks, step)


def test_reset_then_burst_ends_on_the_right_step_50_of_50(page) -> None:
    """The sequences that froze the server-stepped page (issue 38 item 1): step a while,
    Reset, then a clicker held down or fast clicks; every time the page, the URL and the
    panel end on the right step, and the page stays usable."""
    walk = W.walkthrough(W.PRESETS["KuiperInfer's worked example"], "kahn")
    total = len(walk)
    open_walk(page, "KuiperInfer's worked example", "kahn")
    rng = random.Random(38)
    for i in range(50):
        for _ in range(rng.randint(1, 5)):
            page.keyboard.press("ArrowRight")
        click(page, "reset")
        burst = rng.randint(3, 12)
        for j in range(burst):
            if rng.random() < 0.5:
                page.keyboard.press("PageDown")
            else:
                click(page, "step")
        at = min(total, burst)
        check(page, [walk], at)
        if i % 10 == 9:  # now and then let the report reach the server and come back
            page.wait_for_timeout(1200)
            wait_idle(page)
            check(page, [walk], at)
            assert not exception_boxes(page) and not page.locator('[role="dialog"]').count()
    assert not exception_boxes(page)


# -- Step through Forward ------------------------------------------------------------------------
# Counts the script runs the page starts: the app root's data-test-script-state turning "running".
COUNT_RUNS_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (window.__kxRunWatch) window.__kxRunWatch.disconnect();
  window.__kxRuns = 0;
  window.__kxRunWatch = new MutationObserver(() => { if (app.dataset.testScriptState === 'running') window.__kxRuns++; });
  window.__kxRunWatch.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def forward_shown(page) -> dict:
    """Forward's step as the browser shows it: the controls, the panel's status line and the
    output rows of its summary table, the highlighted node, the URL."""
    got = page.evaluate(
        """() => ({step: +document.querySelector('.kx-steps').dataset.step,
                  status: document.querySelector('.kx-panel .kx-fw-status')?.innerText || '',
                  panel: document.querySelector('.kx-panel').innerText,
                  outputs: [...document.querySelectorAll('.kx-panel .kx-fw-tensors tbody tr')]
                      .map(r => [...r.cells].map(c => c.innerText)).filter(c => c[0].startsWith('out ')),
                  current: [...document.querySelectorAll('.kx-view svg g.node.kx-current > title')].map(t => t.textContent),
                  behind: !!document.querySelector('.st-key-fw_tensor.kx-behind')})"""
    )
    got["url"] = url_step(page)
    return got


def open_forward(page, model: str) -> list:
    """Forward on `model` with every operator run (the first Step runs them: the server runs
    ahead), back at step 0; the runtime's order."""
    import kuiper_core
    from conftest import SAMPLES

    order = kuiper_core.load(SAMPLES / f"{model}.pnnx.param").order
    page.goto(page.kx_url + f"/forward?model={model}")
    page.locator(STEPS).wait_for(timeout=120_000)
    wait_idle(page)
    page.wait_for_function("() => document.querySelector('.kx-view')?.dataset.nodes > 0")
    page.locator(".st-key-fw_step button").click()
    page.wait_for_function(
        f"() => +document.querySelector('.kx-steps input[type=range]').max === {len(order)} && "
        f"document.querySelector('.kx-panel .kx-fw-status')",
        timeout=60_000,
    )
    wait_caught_up(page)
    return order


def test_forward_steps_in_the_browser_with_no_script_run(page) -> None:
    """Keys and clicks move Forward's panel, the highlighted node and the URL at once, with no
    script run and nothing sent to the server in between; after the pause the server draws
    the tensor view of the step the browser shows, and a reload opens it."""
    from kuiper_core.graph import shape_label

    order = open_forward(page, "digits_cnn")
    total = len(order)
    page.locator(".st-key-fw_reset button").click()
    page.wait_for_timeout(1200)
    wait_caught_up(page)
    page.evaluate(COUNT_RUNS_JS)
    page.kx_sent.clear()
    moves = ["ArrowRight", "click:step", "PageDown", "click:step", "ArrowLeft", "PageUp", "ArrowRight", "click:back"]
    moves += ["click:end", "click:back", "ArrowLeft", "click:step"]
    at = 0
    for move in moves:
        if move.startswith("click:"):
            page.locator(f".st-key-fw_{move[6:]} button").click()
        else:
            page.keyboard.press(move)
        act = move.removeprefix("click:")
        at = {
            "step": at + 1,
            "ArrowRight": at + 1,
            "PageDown": at + 1,
            "back": at - 1,
            "ArrowLeft": at - 1,
            "PageUp": at - 1,
            "end": total,
        }[act]
        got = forward_shown(page)  # drawn at once: nothing was waited for
        rop = order[at - 1]
        assert got["step"] == at and got["url"] == at, (move, got)
        assert got["status"].startswith(f"Operator {at} of {total}: {rop.name} ({rop.type}"), (move, got)
        assert got["current"] == [rop.name], (move, got)
        out = rop.op.outputs[0] if rop.op.outputs else None
        if out is not None:
            assert got["outputs"][0][:3] == [f"out %{out.name}", shape_label(out.shape), "float32"], (move, got)
        assert got["behind"], "the server's tensor view is marked as another step's"
    assert page.evaluate("() => window.__kxRuns") == 0 and len(page.kx_sent) == 0, (
        page.evaluate("() => window.__kxRuns"),
        len(page.kx_sent),
    )
    page.wait_for_timeout(1500)  # the pause: the server hears the position once and draws its tensor
    wait_caught_up(page)
    assert page.evaluate("() => window.__kxRuns") == 1 and 1 <= len(page.kx_sent) <= 2
    got = forward_shown(page)
    name = order[at - 1].op.outputs[0].name
    assert got["step"] == at and not got["behind"]
    drawn = page.locator('.st-key-fw_tensor [data-testid="stMarkdown"]').filter(has_text=re.compile(r"^\S+: shape "))
    assert drawn.first.inner_text().startswith(f"{name}: shape {got['outputs'][0][1]}"), drawn.first.inner_text()
    picker = page.get_by_role("combobox", name="Go to operator").input_value()
    assert picker.startswith(f"{at}. {order[at - 1].name} "), picker
    page.reload()
    page.locator(STEPS).wait_for()
    wait_caught_up(page)
    got = forward_shown(page)
    assert got["step"] == at and got["url"] == at and got["current"] == [order[at - 1].name]
    assert not exception_boxes(page)


def test_forward_click_and_go_to_move_the_browser(page) -> None:
    """A click on a node and the Go-to picker are the server's moves: the browser takes them."""
    order = open_forward(page, "digits_cnn")
    target = order[6].name
    page.locator(".kx-view .kx-tools button[data-act=fit]").click()
    click_node(page, target)
    page.wait_for_function("() => +document.querySelector('.kx-steps').dataset.step === 7", timeout=30_000)
    wait_caught_up(page)
    got = forward_shown(page)
    assert got["current"] == [target] and got["url"] == 7 and got["status"].startswith(f"Operator 7 of 12: {target}")
    page.keyboard.press("ArrowRight")  # and steps on from there in the browser
    assert forward_shown(page)["status"].startswith(f"Operator 8 of 12: {order[7].name}")
    # Operator 8 had not run: the server runs it and draws a new picker (one picked while it
    # is still the old position's does not count: pages/5_forward.py, _on_target).
    wait_caught_up(page)
    picker = page.get_by_role("combobox", name="Go to operator")
    picker.click()
    picker.fill(order[2].name)
    page.keyboard.press("Enter")
    page.wait_for_function("() => +document.querySelector('.kx-steps').dataset.step === 3", timeout=30_000)
    wait_caught_up(page)
    assert forward_shown(page)["current"] == [order[2].name]
    assert not exception_boxes(page)


def test_forward_reset_then_burst_never_freezes(page) -> None:
    """A Reset and a burst of clicks and keys, 50 times, ends on the right operator with the
    URL agreeing, and no "Connection error" dialog (issue 38: the server-stepped page froze
    3 of 6 times by keys, 1 of 6 by clicks); now and then the server catches up and agrees."""
    order = open_forward(page, "digits_cnn")
    total = len(order)
    rng = random.Random(35)
    for i in range(50):
        page.locator(".st-key-fw_reset button").click() if page.locator(
            ".st-key-fw_reset button"
        ).is_enabled() else None
        burst = rng.randint(2, 6)
        for _ in range(burst):
            if rng.random() < 0.5:
                page.keyboard.press("ArrowRight")
            else:
                page.locator(".st-key-fw_step button").click(no_wait_after=True)
        want = min(total, burst)
        got = forward_shown(page)
        assert got["status"].startswith(f"Operator {want} of {total}:") and got["url"] == want, (i, burst, got)
        if i % 10 == 9:
            page.wait_for_timeout(1000)
            wait_caught_up(page)
            got = forward_shown(page)
            assert got["step"] == want and got["url"] == want and not got["behind"], (i, got)
            assert page.get_by_role("combobox", name="Go to operator").input_value().startswith(f"{want}. ")
        assert not page.locator('[role="dialog"]').count() and not exception_boxes(page), i


def test_no_request_leaves_the_server(page) -> None:
    """A classroom network may have no Internet: every request the page makes (the favicon
    was fetched from a font CDN) goes to the app's own server or is inline data."""
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    open_walk(page, "A small diamond", "dfs")
    page.keyboard.press("ArrowRight")
    icon = page.evaluate("() => document.querySelector(\"link[rel='shortcut icon']\")?.href || ''")
    assert icon.startswith(("data:", page.kx_url)), icon
    outside = [u for u in requested if not u.startswith((page.kx_url, "data:", "blob:", "ws://127.0.0.1"))]
    assert outside == [], outside
