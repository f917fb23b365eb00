"""Steps in the browser (issue 38), in Chromium: an Execution order walk moves through the
frames it was sent with no request to the server per step; the URL, the controls, the panel
and the graph agree at every step; the Reset-then-burst sequences that froze the page end on
the right step 50 of 50 times; the current node is inside the box at 1280x720 on every step
of every toy graph, measured on the real DOM."""

from __future__ import annotations

import random
from urllib.parse import parse_qs, urlparse

import pytest
from app_server import chromium_page, exception_boxes, skip_without_browser, streamlit_server, wait_idle

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


def test_forward_reset_then_burst_never_freezes(page) -> None:
    """Forward still steps on the server (each step runs an operator): a Reset and a burst of
    clicks and keys, 50 times, ends on the right operator with the URL agreeing, and no
    "Connection error" dialog (issue 38: it froze 3 of 6 times by keys, 1 of 6 by clicks,
    when a fragment run was stopped early through Streamlit's private request state)."""
    page.goto(page.kx_url + "/forward?model=digits_cnn")
    page.locator(".kx-view").wait_for(timeout=120_000)
    wait_idle(page)
    total = 12
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
        page.get_by_text(f"Operator {want} of {total}:").first.wait_for(timeout=60_000)
        wait_idle(page)
        page.wait_for_timeout(300)
        wait_idle(page)
        assert page.get_by_text(f"Operator {want} of {total}:").count() >= 1, (i, burst)
        assert url_step(page) == want, (i, burst, page.url)
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
