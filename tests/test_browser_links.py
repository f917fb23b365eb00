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


# An uploaded model's own names (a `.param` name is any text without whitespace): the Graph
# page put an operator's name in its header as Markdown, a real link.
NAMED_LINK = "[Session_expired:_log_in_again](https://evil.example/login)"
NAMED_HTML = "b<img/src=x/onerror=alert(1)>"


def hostile_names_model() -> bytes:
    shape = "(1,4)f32"
    return (
        "7767517\n4 3\n"
        f"pnnx.Input in 0 1 0 #0={shape}\n"
        f"nn.ReLU {NAMED_LINK} 1 1 0 1 #0={shape} #1={shape}\n"
        f"nn.ReLU {NAMED_HTML} 1 1 1 2 #1={shape} #2={shape}\n"
        f"pnnx.Output out 1 0 2 #2={shape}\n"
    ).encode()


def test_an_operators_name_is_no_link_on_the_graph_page(page) -> None:
    from urllib.parse import parse_qs, urlparse

    page.goto(page.kx_url)
    wait_idle(page)
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text="model.pnnx.param")
    box.locator('input[type="file"]').set_input_files(
        files=[{"name": "m.pnnx.param", "mimeType": "application/octet-stream", "buffer": hostile_names_model()}]
    )
    box.get_by_text("m.pnnx.param").wait_for()
    wait_idle(page)
    page.get_by_role("button", name="Load uploaded model", exact=True).click()
    page.get_by_text("Summary of m.pnnx.param").wait_for()
    wait_idle(page)
    digest = parse_qs(urlparse(page.url).query)["upload"][0]
    page.goto(f"{page.kx_url}/graph?upload={digest}&op={quote(NAMED_LINK)}")  # a shared link to the operator
    wait_idle(page)
    heading = page.get_by_role("heading").filter(has_text="Session_expired")
    heading.wait_for()
    assert heading.inner_text().replace("\u2060", "") == NAMED_LINK  # the header: the name as written
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    assert not [h for h in hrefs if urlparse(h).hostname == "evil.example"], hrefs  # (the page's own URL holds it)
    assert page.locator("img[onerror]").count() == 0
    assert NAMED_HTML in page.locator('[data-testid="stMain"]').inner_text()  # the next operator's button, as text
    assert exception_boxes(page) == []
