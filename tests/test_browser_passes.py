"""The Passes page in a real browser (Chromium + Playwright): both graphs render as SVG in
the pan/zoom viewer, the left one with the operators the passes removed, the right one
without them."""

from __future__ import annotations

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
