"""Issue 35 in Chromium: a link whose `model=` or `upload=` value holds Markdown puts no link
in the page (it put "Session expired: log in again" as a real link in Home's warning box)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from app_server import chromium_page, exception_boxes, skip_without_browser, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

skip_without_browser()

PHISH = "x[Session expired: log in again](https://evil.example/login)"


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page() as p:
        p.kx_url = url
        yield p


@pytest.mark.parametrize(("slug", "key"), [("", "model"), ("", "upload"), ("forward", "model"), ("forward", "upload")])
def test_a_markdown_link_in_a_link_value_is_no_link_on_the_page(page, slug: str, key: str) -> None:
    page.goto(f"{page.kx_url}/{slug}?{key}={quote(PHISH)}")
    wait_idle(page)
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    assert not [h for h in hrefs if "evil.example" in h], hrefs
    assert "Session expired" not in page.inner_text("body")
    assert exception_boxes(page) == []
