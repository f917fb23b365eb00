"""What a Forward Step and a first visit cost the browser (issue 23), checked in Chromium.

- A big feature map is one picture (PNG), not a Vega chart of one mark per cell: a 56x56
  slice was 3,136 marks and ~0.15 s of the browser at each step.
- A Step reruns only the stepping fragment: the "Compare with" section (uploader, choices,
  Save / Download) is not sent again, yet its buttons follow the first step and Reset.
- What is shown still agrees with the step: the status line, the highlighted node, the
  tensor's picture.
- A burst of Step or Back clicks, or of → / ← / PageDown / PageUp presses, makes one step per
  event, and the page drawn at the end agrees with the position: the browser reports the
  events as a list (pages/keys.py), which Streamlit cannot merge as it merges triggers.
- Home's first load draws its two small tables as Markdown: no data grid (~1.5 MB of
  JavaScript fetched and parsed before the page settled).
"""

from __future__ import annotations

import base64
import re

import pytest
from app_server import (
    VIEW,
    chromium_page,
    current_highlight,
    exception_boxes,
    skip_without_browser,
    streamlit_server,
    wait_caught_up,
    wait_highlight,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

skip_without_browser()


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page(1280, 720) as p:
        p.kx_url = url  # type: ignore[attr-defined]
        yield p


def button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def step_to(page, k: int, n: int, name: str) -> None:
    """Step, and wait until the server has drawn that step (after the pause it waits for)."""
    button(page, "Step").click()
    page.get_by_text(re.compile(rf"^Operator {k} of {n}: {re.escape(name)}")).wait_for()
    wait_highlight(page, name)
    wait_caught_up(page)


def sent_elements(frames: list[bytes]) -> list[tuple[str, str]]:
    """(element type, a text it carries) of each delta the server sent."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    out = []
    for f in frames:
        m = ForwardMsg()
        m.ParseFromString(f)
        if m.WhichOneof("type") == "delta" and m.delta.WhichOneof("type") == "new_element":
            el = m.delta.new_element
            kind = el.WhichOneof("type") or "?"
            body = getattr(el, kind)
            out.append((kind, getattr(body, "body", "") or getattr(body, "label", "") or getattr(body, "spec", "")))
    return out


def test_a_resnet18_step_sends_the_step_only_and_draws_its_map_as_a_picture(page) -> None:
    page.goto(page.kx_url + "/forward?model=resnet18")  # type: ignore[attr-defined]
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node", timeout=120_000)
    wait_idle(page)
    step_to(page, 1, 51, "pnnx_input_0")
    step_to(page, 2, 51, "convbn2d_0")
    frames: list[bytes] = []
    cdp = page.context.new_cdp_session(page)
    cdp.on(
        "Network.webSocketFrameReceived",
        lambda ev: (
            frames.append(base64.b64decode(ev["response"]["payloadData"]))
            if ev["response"].get("opcode") == 2
            else None
        ),
    )
    cdp.send("Network.enable")
    try:
        step_to(page, 3, 51, "relu")
    finally:
        cdp.send("Network.disable")
        cdp.detach()
    sent = sent_elements(frames)
    kinds = [k for k, _ in sent]
    assert (
        "file_uploader" not in kinds and "radio" in kinds
    )  # the compare section stays; the colour radio is the step's
    assert not any(k == "heading" and "Compare with" in t for k, t in sent)
    assert not any(k == "vega_lite_chart" and '"rect"' in t for k, t in sent), "a map drawn as a chart"
    assert sum(len(f) for f in frames) < 120_000, f"{sum(len(f) for f in frames)} bytes for one step"
    # what is on screen is the step's: the status line, the node, the picture of relu's output
    assert current_highlight(page) == ["relu"]
    pic = page.locator('[data-testid="stImage"]').filter(has_text="colour bar")
    assert pic.count() == 1
    caption = pic.first.inner_text()
    assert "rows: dim 2 (H=112)" in caption and "columns: dim 3 (W=112)" in caption
    lo = float(re.search(r"colour bar: (\S+) \(bottom\)", caption).group(1))
    assert lo >= 0.0  # a ReLU's output: no negative block mean
    width = pic.locator("img").evaluate("i => i.naturalWidth")
    assert 0 < width <= 400
    assert page.get_by_role("heading", name="Compare with").count() == 1
    assert exception_boxes(page) == []


def test_compare_buttons_work_before_and_after_the_first_step(page) -> None:
    """Save / Download sit outside the stepping fragment and are never disabled (enabling them
    at the first step took a whole-page rerun from inside the fragment): before a step Save
    says there is nothing to save; after it, it saves."""
    page.goto(page.kx_url + "/forward?model=digits_cnn")  # type: ignore[attr-defined]
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node", timeout=120_000)
    wait_idle(page)
    if not button(page, "Reset").is_disabled():
        button(page, "Reset").click()
        wait_idle(page)
    save = button(page, "Save this run to compare with later")
    save.click()
    page.get_by_text(re.compile(r"^Nothing has run yet: press Step")).first.wait_for()
    wait_idle(page)
    step_to(page, 1, 12, "pnnx_input_0")
    save.click()
    page.get_by_text(re.compile(r"^Saved 'run \d+")).first.wait_for()
    assert not page.get_by_role("button", name="Download every tensor computed so far (.npz)").is_disabled()
    assert exception_boxes(page) == []


def test_home_first_load_draws_its_tables_without_the_data_grid(page) -> None:
    from conftest import SAMPLES

    from kuiper_core.explore.summary import model_summary
    from kuiper_core.pnnx import read_param

    page.goto(page.kx_url + "/?model=digits_cnn")  # type: ignore[attr-defined]
    page.get_by_text("Summary of digits_cnn").wait_for(timeout=120_000)
    wait_idle(page)
    loaded = page.evaluate("() => performance.getEntriesByType('resource').map(r => r.name.split('/').pop())")
    assert not [f for f in loaded if f.startswith("DataFrame.")], "the data grid was loaded for Home"
    tables = page.locator('[data-testid="stMarkdown"] table').evaluate_all(
        "ts => ts.map(t => [...t.querySelectorAll('tr')].map(r => [...r.children].map(c => c.innerText.trim())))"
    )
    summary = model_summary(read_param(SAMPLES / "digits_cnn.pnnx.param"))
    io, types = tables
    assert [row[:2] for row in io[1:]] == [["input", s.name] for s in summary.inputs] + [
        ["output", s.name] for s in summary.outputs
    ]
    assert {row[0]: int(row[2]) for row in types[1:]} == dict(summary.by_type)
    assert exception_boxes(page) == []


def test_a_burst_of_clicks_makes_one_step_per_click(page) -> None:
    """Five Step clicks in one go on a new session of ResNet-18 (its first step is the
    slowest: Streamlit merged the triggers that arrived meanwhile), then three Backs."""
    from conftest import SAMPLES

    import kuiper_core

    names = [r.name for r in kuiper_core.load(SAMPLES / "resnet18.pnnx.param").order]
    page.goto(page.kx_url + "/forward?model=resnet18")  # type: ignore[attr-defined]
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node", timeout=120_000)
    wait_idle(page)
    burst = (
        "n => { const b = document.querySelector('.st-key-fw_step button'); for (let i = 0; i < n; i++) b.click(); }"
    )
    page.evaluate(burst, 5)
    page.get_by_text(re.compile(rf"^Operator 5 of 51: {re.escape(names[4])}")).wait_for(timeout=60_000)
    wait_highlight(page, names[4])
    wait_idle(page)
    page.wait_for_timeout(1000)  # nothing more is coming
    wait_idle(page)
    assert page.get_by_text(re.compile(rf"^Operator 5 of 51: {re.escape(names[4])}")).count() == 1
    page.evaluate(burst.replace("fw_step", "fw_back"), 3)
    page.get_by_text(re.compile(rf"^Operator 2 of 51: {re.escape(names[1])}")).wait_for(timeout=60_000)
    wait_highlight(page, names[1])
    wait_idle(page)
    assert current_highlight(page) == [names[1]]
    page.wait_for_function("() => location.search.includes('step=2')", timeout=10_000)
    assert exception_boxes(page) == []


WALKS = [
    ("/order?graph=KuiperInfer%27s+worked+example&algo=kahn", "order_step", "order_back", "order_reset"),
    ("/expressions?model=expr_zoo", "expr_step", "expr_back", "expr_reset"),
]
AT = (  # the walkthrough's step on screen ("Step k of n"), -1 if none
    "() => { const e = [...document.querySelectorAll('p, strong')].find(e => /^Step \\d+ of \\d+/.test(e.textContent));"
    " return e ? +e.textContent.match(/^Step (\\d+)/)[1] : -1; }"
)


def open_walkthrough(page, link: str, step: str, reset: str) -> int:
    """Open a walkthrough where Step is enabled; its step on screen."""
    page.goto(page.kx_url + link)  # type: ignore[attr-defined]
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node", timeout=120_000)
    wait_idle(page)
    if page.locator(f".st-key-{step} button").is_disabled():  # opened at its last step (expr_zoo)
        page.locator(f".st-key-{reset} button").click()
        page.wait_for_function(f"() => !document.querySelector('.st-key-{step} button').disabled", timeout=30_000)
        wait_idle(page)
    first = page.evaluate(AT)
    assert first >= 0
    return first


@pytest.mark.parametrize("link, step, back, reset", WALKS)
def test_a_burst_of_walkthrough_clicks_makes_one_step_per_click(
    page, link: str, step: str, back: str, reset: str
) -> None:
    first = open_walkthrough(page, link, step, reset)
    burst = "([key, n]) => { const b = document.querySelector('.st-key-' + key + ' button'); for (let i = 0; i < n; i++) b.click(); }"
    page.evaluate(burst, [step, 3])
    page.wait_for_function(f"() => ({AT})() === {first + 3}", timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(800)
    wait_idle(page)
    assert page.evaluate(AT) == first + 3
    page.evaluate(burst, [back, 2])
    page.wait_for_function(f"() => ({AT})() === {first + 1}", timeout=60_000)
    wait_idle(page)
    assert exception_boxes(page) == []


def press_burst(page, keys: list[str]) -> None:
    """Press the keys one after another without waiting for the app (a real keyboard's events)."""
    page.locator("h1").first.click()  # the focus off any field (the keys are ignored there)
    for k in keys:
        page.keyboard.press(k)


def test_a_burst_of_step_keys_on_forward_makes_one_step_per_key(page) -> None:
    """5 × → then 2 × ← on ResNet-18 (no wait in between): exactly 3 steps on, and the status
    line, the highlighted node, the URL and the tensor shown are those of that operator."""
    from conftest import SAMPLES

    import kuiper_core
    from kuiper_core.graph import shape_label

    order = kuiper_core.load(SAMPLES / "resnet18.pnnx.param").order
    names = [r.name for r in order]
    page.goto(page.kx_url + "/forward?model=resnet18")  # type: ignore[attr-defined]
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node", timeout=120_000)
    wait_idle(page)
    if not button(page, "Reset").is_disabled():  # an earlier test stepped this session's stepper
        button(page, "Reset").click()
        page.get_by_text(re.compile(r"^Before the first operator")).first.wait_for()
        wait_caught_up(page)
    press_burst(page, ["ArrowRight"] * 5)
    press_burst(page, ["ArrowLeft"] * 2)
    k = 3
    page.get_by_text(re.compile(rf"^Operator {k} of 51: {re.escape(names[k - 1])}")).wait_for(timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(1000)  # nothing more is coming
    wait_idle(page)
    status = page.get_by_text(re.compile(r"^Operator \d+ of 51: "))
    assert status.count() == 1 and status.first.inner_text().startswith(f"Operator {k} of 51: {names[k - 1]}")
    assert current_highlight(page) == [names[k - 1]]
    page.wait_for_function(f"() => location.search.includes('step={k}')", timeout=10_000)
    wait_caught_up(page)
    # the tensor view the server drew once the keys paused: that operator's output
    shown = (
        page.locator('.st-key-fw_tensor [data-testid="stMarkdown"]')
        .filter(has_text=re.compile(r"^\S+: shape "))
        .first.inner_text()
    )
    output = order[k - 1].op.outputs[0]  # the tensor panel shows operator k's output first
    assert shown.startswith(f"{output.name}: shape {shape_label(output.shape)}"), shown
    press_burst(page, ["PageDown", "PageDown", "PageUp"])
    page.get_by_text(re.compile(rf"^Operator {k + 1} of 51: {re.escape(names[k])}")).wait_for(timeout=60_000)
    wait_highlight(page, names[k])
    wait_idle(page)
    assert current_highlight(page) == [names[k]]
    assert exception_boxes(page) == []


@pytest.mark.parametrize("link, step, back, reset", WALKS)
def test_a_burst_of_step_keys_on_a_walkthrough_makes_one_step_per_key(
    page, link: str, step: str, back: str, reset: str
) -> None:
    """4 × → then 2 × PageUp without waiting: exactly 2 steps on; the node drawn as current is
    the one a single slow Step to that position draws."""
    first = open_walkthrough(page, link, step, reset)
    press_burst(page, ["ArrowRight"] * 4 + ["PageUp"] * 2)
    page.wait_for_function(f"() => ({AT})() === {first + 2}", timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(800)  # nothing more is coming
    wait_idle(page)
    assert page.evaluate(AT) == first + 2
    after_burst = current_highlight(page)
    # The walk steps in the browser and writes the address bar itself: no race with a rerun's
    # query-param update (which once in 4 runs left an earlier step in the URL).
    page.wait_for_function(f"() => location.search.includes('step={first + 2}')", timeout=10_000)
    button(page, "Back").click()
    page.wait_for_function(f"() => ({AT})() === {first + 1}", timeout=60_000)
    wait_idle(page)
    button(page, "Step").click()
    page.wait_for_function(f"() => ({AT})() === {first + 2}", timeout=60_000)
    wait_idle(page)
    assert current_highlight(page) == after_burst
    assert exception_boxes(page) == []
