"""The Passes page in a real browser (Chromium + Playwright): both graphs render as SVG in
the pan/zoom viewer, the left one with the operators the passes removed, the right one
without them."""

from __future__ import annotations

import re

import pytest
from app_server import (
    GRAPH_SVG,
    SCREENSHOTS,
    skip_without_browser,
    chromium_page,
    exception_boxes,
    goto_page,
    streamlit_server,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

skip_without_browser()


def svg_titles(page, index: int) -> set[str]:
    """Node titles of the index-th graph on the page."""
    return set(
        page.eval_on_selector_all(
            GRAPH_SVG, f"svgs => Array.from(svgs[{index}].querySelectorAll('g.node > title')).map(t => t.textContent)"
        )
    )


def test_passes_page_renders_both_graphs():
    with streamlit_server(timeout=120) as url, chromium_page() as page:
        page.goto(url)
        page.get_by_text("Kuiper Explorer").first.wait_for()
        wait_idle(page)
        goto_page(page, "passes")
        page.get_by_text("Graph passes").first.wait_for()
        page.get_by_text("Pass zoo (every pass has work)").click()
        wait_idle(page)
        # until both graphs are the zoo's (the seed preset's graphs are drawn first)
        page.wait_for_function(
            f"""() => {{ const s = document.querySelectorAll('{GRAPH_SVG}');
                 const t = i => Array.from(s[i].querySelectorAll('g.node > title')).map(x => x.textContent);
                 return s.length >= 2 && t(0).includes('bn1') && t(1).includes('conv1'); }}""",
            timeout=60_000,
        )
        before, after = svg_titles(page, 0), svg_titles(page, 1)
        assert {"bn1", "bn2", "bn3", "drop", "conv1"} <= before
        assert "conv1" in after and not ({"bn1", "bn2", "bn3", "drop"} & after)
        assert len(after) < len(before)
        # both drawn in the pan/zoom viewer, with the colours' legend under each
        assert page.locator(".kx-view svg").count() >= 2
        page.get_by_text("removed by the passes").first.wait_for()
        page.get_by_text("added by the passes").first.wait_for()
        page.get_by_text("The optimised model computes the same outputs.").wait_for()
        assert exception_boxes(page) == []
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "passes.png"), full_page=False)  # the top: metrics and both graphs


def test_passes_panes_pan_together_and_next_change_walks_the_changes():
    """Issue 38 item 10: a zoom or a drag in one graph moves the other the same way, and "Next
    change" rings and centres each change in turn where it is drawn."""
    from kuiper_core.explore import passes_view as pv
    from conftest import SAMPLES

    _, graph = pv.load_preset(SAMPLES / "passes", "pass_zoo")
    before = {op.name for op in graph.operators}
    with streamlit_server(timeout=120) as url, chromium_page(1280, 720) as page:
        page.goto(url + "/passes")
        page.get_by_text("Graph passes").first.wait_for()
        wait_idle(page)
        page.get_by_text("Pass zoo (every pass has work)").click()
        wait_idle(page)
        page.locator(".kx-view .kx-stage svg g.node").first.wait_for()
        page.wait_for_timeout(800)
        view = lambda i: page.locator(".kx-view").nth(i)  # noqa: E731
        # the scale, and the port's centre as a fraction of the drawing (the graphs differ in size)
        where = """v => { const p = v.querySelector('.kx-port').getBoundingClientRect(),
                               g = v.querySelector('.kx-stage svg').getBoundingClientRect();
                          return [+v.dataset.scale, (p.left + p.width / 2 - g.left) / g.width,
                                  (p.top + p.height / 2 - g.top) / g.height]; }"""
        start = view(1).evaluate(where)
        view(0).evaluate("v => v.scrollIntoView({block: 'center'})")  # (below the fold at 720 px)
        page.wait_for_timeout(300)
        box = view(0).locator(".kx-port").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.wheel(0, -300)  # zoom in on the left graph
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] / 2 + 120, box["y"] + box["height"] / 2 + 60, steps=6)
        page.mouse.up()
        page.wait_for_timeout(300)
        left, right = view(0).evaluate(where), view(1).evaluate(where)
        assert right != start and right[0] == pytest.approx(left[0], rel=1e-3), (start, left, right)
        assert right[1:] == pytest.approx(left[1:], abs=0.01), (left, right)  # the same part of each graph
        seen = []
        for i in range(3):
            page.get_by_role("button", name="Next change").click()
            line = page.get_by_text(re.compile(rf"^Change {i + 1} of \d+: "))
            line.wait_for()
            wait_idle(page)
            name = line.locator("code").inner_text()
            seen.append(name)
            side = 0 if name in before else 1  # a new operator is drawn on the right only
            page.wait_for_function(
                "([i, t]) => (v => v.dataset.highlight === t && v.kxVisible(t))(document.querySelectorAll('.kx-view')[i])",
                arg=[side, name],
                timeout=30_000,
            )
        assert len(set(seen)) == 3, seen
        assert exception_boxes(page) == []
