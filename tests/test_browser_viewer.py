"""The graph viewer in Chromium (Playwright): what the user sees agrees with what the page
says, at every step, on a projector (1280×720) and a 1080p screen.

- Passes: after switching "Start from", the pass picker and the change list under it name
  the same pass.
- Big graphs: deep1500's "Open all modules" lands on readable nodes, Fit says what it
  leaves out, the overview map moves the view; search and the operator picker select and
  centre in the whole graph.
- Export: SVG and PNG of the drawing as shown (colours, selection, legend).
- A projector and a 1080p screen: legends on screen, the toolbar never over a node, edge
  labels at 13 px, a typed graph above the fold, the box using a tall screen.
- Execution order: at every step of DFS and Kahn on every preset and on a typed graph,
  the colours, labels and current node of the *visible* drawing match the engine's trace
  (stack, visited, queue, in-degrees, order so far), also in fullscreen.
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
import time
import xml.etree.ElementTree as ET
from urllib.parse import quote_plus

import pytest
from app_server import (
    VIEW,
    skip_without_browser,
    chromium_page,
    exception_boxes,
    goto_page,
    pick_bundled_model,
    streamlit_server,
    wait_idle,
)

from conftest import SAMPLES

from kuiper_core.explore import walkthrough as W
from kuiper_core.pnnx import read_param

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]

skip_without_browser()

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
    out.labels[t] = [...g.querySelectorAll('text')].map(x => x.textContent).filter(x => x !== '');  // (an empty line shows nothing)
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
    page.get_by_role("combobox", name="Graph").click()
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


# -- big graphs: open all, Fit, the map, finding an operator ------------------------------------------
OPEN_ALL_BUDGET_S = 8.0  # the bench's target is 2 s on a quiet machine; this machine is shared


def _data(page, view: int = 0) -> dict:
    return page.locator(VIEW).nth(view).evaluate("v => ({...v.dataset})")


def _visible(page, title: str, view: int = 0) -> bool:
    return page.locator(VIEW).nth(view).evaluate("(v, t) => v.kxVisible(t)", title)


def _open_app(page, model: str, slug: str) -> None:
    page.goto(page.kx_url)
    wait_idle(page)
    pick_bundled_model(page, model)
    goto_page(page, slug)
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")


@pytest.mark.parametrize("size", [PROJECTOR, HD], ids=["720p", "1080p"])
def test_deep1500_open_all_lands_on_readable_nodes_fit_says_what_is_left_out(page, size: dict) -> None:
    with viewport(page, size):
        _open_app(page, "deep1500", "graph")
        page.get_by_role("button", name="Modules").click()
        t0 = time.perf_counter()
        page.get_by_role("button", name="Open all modules").click()
        page.wait_for_function(f"() => +document.querySelector('{VIEW}').dataset.nodes > 1500", timeout=60_000)
        page.wait_for_function(f"() => +document.querySelector('{VIEW}').dataset.inView > 0")
        seconds = time.perf_counter() - t0
        page.keyboard.press("Escape")
        wait_idle(page)
        d = _data(page)
        assert seconds <= OPEN_ALL_BUDGET_S, f"open all took {seconds:.1f} s"
        assert float(d["fontPx"]) >= 12.5 and int(d["inView"]) >= 3, d  # readable nodes, not an empty box
        assert _visible(page, "pnnx_input_0")  # where the graph starts, centred
        # the overview map, with the visible part outlined
        assert page.locator(f"{VIEW} .kx-map").is_visible()
        assert page.locator(f"{VIEW} .kx-map-view").bounding_box()["height"] >= 2
        # Fit shows the whole graph, as an overview, and says so (it used to stop at 7-px text)
        page.locator(f"{VIEW} .kx-tools button[data-act=fit]").click()
        page.wait_for_function(f"() => +document.querySelector('{VIEW}').dataset.inView === 1502")
        d = _data(page)
        assert float(d["fontPx"]) < 7, d
        assert "overview of all 1,502 nodes" in page.locator(f"{VIEW} .kx-msg").inner_text()
        # dragging the map's frame down to its end shows the end of the graph, at the same scale
        box = page.locator(f"{VIEW} .kx-map img").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] + 40, steps=4)
        page.mouse.up()
        assert _data(page)["scale"] == d["scale"]
        page.wait_for_function(f"() => document.querySelector('{VIEW}').kxVisible('pnnx_output_0')", timeout=5_000)
        assert exception_boxes(page) == []


def test_a_big_drawing_is_sent_once_per_session(page) -> None:
    """deep1500 all open is a 1.4 MB SVG: a click sends its id, not the SVG again; a viewer
    that lost its copy asks for it and draws it."""
    received: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda p: received.append(len(p))))
    _open_app(page, "deep1500", "graph")  # (a new websocket: the listener sees it)
    page.get_by_role("button", name="Modules").click()
    page.get_by_role("button", name="Open all modules").click()
    page.wait_for_function(f"() => +document.querySelector('{VIEW}').dataset.nodes > 1500", timeout=60_000)
    page.keyboard.press("Escape")
    wait_idle(page)
    assert sum(received) > 1_000_000
    received.clear()
    page.locator(VIEW).first.evaluate("v => v.kxCentre('relu')")
    page.locator(f"{VIEW} .kx-stage svg g.node").filter(has=page.locator("title:text-is('relu')")).first.click()
    page.get_by_role("heading", name="relu").wait_for()
    wait_idle(page)
    assert sum(received) < 300_000 and int(_data(page)["nodes"]) == 1502
    page.evaluate("() => window.__kxSvgs.clear()")  # as if the copy were lost
    goto_page(page, "profile")
    goto_page(page, "graph")
    page.wait_for_function(
        f"() => (v => v && +v.dataset.nodes === 1502)(document.querySelector('{VIEW}'))", timeout=60_000
    )
    assert exception_boxes(page) == []


def pick_operator(page, name: str) -> None:
    """Choose `name` in the Graph page's "Operator details" picker, until the viewer selects it."""
    picker = page.get_by_role("combobox", name="Operator details")
    picker.click()
    picker.fill(name)
    page.get_by_role("option", name=name, exact=True).click()
    wait_idle(page)
    page.wait_for_function(f"() => document.querySelector('{VIEW}').dataset.highlight === {name!r}")


@pytest.mark.parametrize("size", [PROJECTOR, HD], ids=["720p", "1080p"])
def test_search_and_picker_select_and_centre_in_the_whole_graph(page, size: dict) -> None:
    with viewport(page, size):
        _open_app(page, "deep1500", "graph")
        before = int(_data(page)["nodes"])
        search = page.get_by_role("textbox", name="Find an operator (name or type)")
        search.fill("fc")
        search.press("Enter")
        wait_idle(page)
        page.wait_for_function(f"() => document.querySelector('{VIEW}').dataset.highlight === 'fc'")
        page.wait_for_function(f"() => document.querySelector('{VIEW}').kxVisible('fc')", timeout=30_000)
        assert int(_data(page)["nodes"]) >= before  # the graph around it stays (not a filtered row)
        page.get_by_role("heading", name="fc").wait_for()
        # the picker: an operator far from the view is selected and centred too
        pick_operator(page, "stem")
        page.wait_for_function(f"() => document.querySelector('{VIEW}').kxVisible('stem')", timeout=30_000)
        assert exception_boxes(page) == []


@pytest.mark.parametrize("model, at", [("yolov5s_mini", 150), ("deep1500", 1200)])
def test_a_deep_link_shows_its_operator_inside_the_box(page, model: str, at: int) -> None:
    """A link to an operator far down a big graph: the node is inside the box on screen (the
    DOM's own rectangles: kxVisible), at 1280x720; search and links centred on stale
    geometry (257 px above the box on yolov5s_mini, 3,275 px on deep1500: issue 38)."""
    from conftest import SAMPLES

    from kuiper_core.pnnx import read_param

    name = read_param(SAMPLES / f"{model}.pnnx.param").operators[at].name
    page.goto(f"{page.kx_url}/graph?model={model}&op={quote_plus(name)}")
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node", timeout=120_000)
    wait_idle(page)
    page.wait_for_function(f"() => document.querySelector('{VIEW}').dataset.highlight === {name!r}", timeout=60_000)
    page.wait_for_function(f"(t) => document.querySelector('{VIEW}').kxVisible(t)", arg=name, timeout=30_000)
    inside = page.locator(VIEW).first.evaluate(
        """(v, t) => { const g = [...v.querySelectorAll('svg g.node')].find(g => g.querySelector('title').textContent === t);
           const r = g.getBoundingClientRect(), p = v.querySelector('.kx-port').getBoundingClientRect();
           return r.top >= p.top && r.bottom <= p.bottom && r.left >= p.left && r.right <= p.right && r.bottom <= innerHeight; }""",
        name,
    )
    assert inside
    page.locator(f"{VIEW} .kx-tools button[data-act=fit]").click()  # Fit: every node, an overview
    page.wait_for_function(f"() => (v => +v.dataset.inView === +v.dataset.nodes)(document.querySelector('{VIEW}'))")
    assert exception_boxes(page) == []


# -- export: what the viewer shows, as SVG and PNG ------------------------------------------------------
def test_export_svg_and_png_are_the_drawing_on_screen(page, tmp_path) -> None:
    _open_app(page, "resnet18", "graph")
    names = {op.name for op in read_param(SAMPLES / "resnet18.pnnx.param").operators}
    pick_operator(page, "fc")
    with page.expect_download() as dl:
        page.locator(f"{VIEW} .kx-tools button[data-act=svg]").click()
    path = tmp_path / "g.svg"
    dl.value.save_as(path)
    assert dl.value.suggested_filename == "resnet18-graph.svg"
    root = ET.fromstring(path.read_text())
    ns = {"s": "http://www.w3.org/2000/svg"}
    nodes = {
        g.find("s:title", ns).text: g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"
    }
    assert set(nodes) == names
    fc_shape = next(e for e in nodes["fc"].iter() if e.tag.split("}")[1] in ("path", "polygon"))
    assert fc_shape.get("stroke") == "#d62728"  # the selection as drawn
    assert "selected" in path.read_text()  # the legend
    with page.expect_download() as dl:
        page.locator(f"{VIEW} .kx-tools button[data-act=png]").click()
    png = tmp_path / "g.png"
    dl.value.save_as(png)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert width > 100 and height > 1000  # the whole graph, not the box


def test_export_a_walkthrough_step(page, tmp_path) -> None:
    page.goto(f"{page.kx_url}/order?graph={quote_plus('A small diamond')}&algo=kahn&step=5")
    wait_idle(page)
    w = W.walkthrough(W.PRESETS["A small diamond"], "kahn")
    want = expected_state(w, 5)
    wait_drawn(page, want, "step 5")
    svg = page.locator(VIEW).first.evaluate("v => v.kxExport('svg')")
    root = ET.fromstring(svg.split("?>", 1)[1])
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        if g.get("class") == "node":
            title = g.find("{http://www.w3.org/2000/svg}title").text
            shape = next(e for e in g.iter() if e.tag.split("}")[1] in ("path", "polygon"))
            assert shape.get("fill").lower() == want["fill"][title], title
    # the legend is whole: every chip inside the exported drawing (it was cut at the graph's width)
    view_box = [float(v) for v in root.get("viewBox").split()]
    right = max(float(r.get("x")) + float(r.get("width")) for r in root.iter("{http://www.w3.org/2000/svg}rect"))
    assert right <= view_box[0] + view_box[2] + 0.5, (right, view_box)


def test_a_tall_graph_exports_a_readable_png(page) -> None:
    """deep1500's whole PNG was 18 x 16,000 px: the PNG is the part in view (and says so);
    the SVG keeps the whole graph."""
    import base64
    import io

    from PIL import Image

    _open_app(page, "deep1500", "graph")
    page.get_by_role("button", name="Modules").click()
    page.get_by_role("button", name="Open all modules").click()  # 1,502 nodes in one column
    page.wait_for_function(f"() => +document.querySelector('{VIEW}').dataset.nodes > 1500", timeout=60_000)
    page.keyboard.press("Escape")
    wait_idle(page)
    png = page.locator(VIEW).first.evaluate("v => v.kxExport('png')")
    img = Image.open(io.BytesIO(base64.b64decode(png.split(",", 1)[1])))
    assert _data(page)["pngPart"] == "view" and "part in view" in page.locator(f"{VIEW} .kx-msg").inner_text()
    assert img.width >= 200 and img.height <= 4 * img.width + 400, img.size
    svg = page.locator(VIEW).first.evaluate("v => v.kxExport('svg')")
    assert svg.count('class="node"') >= int(_data(page)["nodes"])


# -- a projector (1280x720) and a 1080p screen ------------------------------------------------------------
def _boxes(page, view: int = 0) -> dict:
    return (
        page.locator(VIEW)
        .nth(view)
        .evaluate(
            """v => { const r = e => { const b = e.getBoundingClientRect(); return {top: b.top, bottom: b.bottom}; };
                  return {bar: r(v.querySelector('.kx-bar')), port: r(v.querySelector('.kx-port')),
                          legend: r(v.parentElement.querySelector('.kx-legend')), box: r(v)}; }"""
        )
    )


def test_projector_graph_forward_and_typed_graph_fit_the_screen(page) -> None:
    with viewport(page, PROJECTOR):
        _open_app(page, "resnet18", "graph")
        b = _boxes(page)
        assert b["legend"]["bottom"] <= 720 and b["bar"]["bottom"] <= b["port"]["top"] + 1  # toolbar never over nodes
        k = float(_data(page)["scale"])
        edge_pt = float(page.locator(f"{VIEW} .kx-stage svg g.edge text").first.get_attribute("font-size"))
        assert edge_pt * 4 / 3 * k >= 12.9  # edge shape labels at >= 13 px
        goto_page(page, "forward")
        for _ in range(3):
            page.get_by_role("button", name="Step", exact=True).click()
            wait_idle(page)
        b = _boxes(page)
        assert b["legend"]["bottom"] <= 720
        current = page.locator(f"{VIEW} .kx-stage svg g.node.kx-current").bounding_box()
        assert current["y"] >= b["port"]["top"] - 1  # the current node is not under the toolbar
        page.goto(f"{page.kx_url}/order?algo=kahn")
        wait_idle(page)
        page.get_by_role("combobox", name="Graph").click()
        page.get_by_role("option", name="Type your own graph").click()
        wait_idle(page)
        page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
        b = _boxes(page)
        assert b["box"]["top"] < 720 - 250 and b["legend"]["bottom"] <= 720, b  # the typed graph above the fold
        assert exception_boxes(page) == []


def test_1080p_graph_box_uses_the_height(page) -> None:
    with viewport(page, HD):
        _open_app(page, "resnet18", "graph")
        b = _boxes(page)
        assert b["legend"]["bottom"] >= 1080 - 60, b  # no third of the screen left empty
        assert b["legend"]["bottom"] <= 1080


# The first picture of the current tensor (a channel mosaic, a chart) in Forward's tensor panel.
_FORWARD_FOLD_JS = """() => {
  const r = e => { const b = e.getBoundingClientRect(); return {top: b.top, bottom: b.bottom}; };
  const v = document.querySelector('.kx-view'), cur = v.querySelector('svg g.node.kx-current');
  const pic = document.querySelector('.st-key-fw_tensor :is([data-testid="stImage"] img, [data-testid="stVegaLiteChart"])');
  const caption = document.querySelector('.st-key-fw_caption');
  return {port: r(v.querySelector('.kx-port')), legend: r(v.parentElement.querySelector('.kx-legend')),
          current: cur ? r(cur) : null, picture: pic ? r(pic) : null, scrolled: document.querySelector(
          '[data-testid="stMain"]')?.scrollTop || window.scrollY, caption: caption ? caption.offsetHeight : null};
}"""


@pytest.mark.parametrize("step", [5, 50], ids=["conv-channels", "fc-vector"])
def test_projector_forward_graph_and_tensor_above_the_fold(page, step: int) -> None:
    """At 1280x720 Forward's graph box (with its legend) and the current tensor's picture are
    both on screen without scrolling (issue 38: the box was 195 px and the tensor began below
    the fold); a 1080p screen keeps the caption the short layout hides."""
    with viewport(page, PROJECTOR):
        page.goto(f"{page.kx_url}/forward?model=resnet18&step={step}")
        page.wait_for_selector(f"{VIEW} .kx-stage svg g.node.kx-current", timeout=120_000)
        wait_idle(page)
        page.wait_for_timeout(500)  # the viewer fits its box to the window after the run
        got = page.evaluate(_FORWARD_FOLD_JS)
        assert got["scrolled"] == 0, got
        assert got["port"]["bottom"] - got["port"]["top"] >= 300, got  # a graph, not a strip
        assert got["legend"]["bottom"] <= 720, got
        cur, port = got["current"], got["port"]
        assert cur["top"] >= port["top"] - 1 and cur["bottom"] <= port["bottom"] + 1, got
        assert got["picture"] is not None and got["picture"]["bottom"] <= 720, got
        assert got["caption"] == 0, got  # hidden on a short screen
        assert exception_boxes(page) == []
    with viewport(page, HD):
        page.wait_for_timeout(300)
        assert page.evaluate(_FORWARD_FOLD_JS)["caption"] > 0


def test_slash_finds_by_shape_and_parameter(page) -> None:
    """`/` puts the cursor in the search; a shape or a parameter finds operators (issue 38)."""
    _open_app(page, "resnet18", "graph")
    wait_idle(page)
    page.locator("h1").first.click()  # the focus on the page, not a field
    page.keyboard.press("/")
    box = page.get_by_role("textbox", name="Find an operator (name or type)")
    page.wait_for_function("() => document.activeElement && document.activeElement.closest('.st-key-graph_search')")
    page.keyboard.type("weight=1000x512")
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelector('{VIEW}')?.dataset.highlight === 'fc'", timeout=30_000)
    wait_idle(page)
    page.wait_for_function(f"() => document.querySelector('{VIEW}')?.kxVisible('fc')", timeout=30_000)
    assert box.input_value() == "weight=1000x512" and exception_boxes(page) == []
