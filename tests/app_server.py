"""Run the Streamlit app on a free localhost port and drive it with Debian's Chromium.

Shared by the browser tests (tests/test_browser*.py) and bench/bench_app.py. Everything is bounded:
the server must answer its health check within `timeout` seconds, and it is always
terminated (then killed) on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} not installed"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed"
    return None


def skip_without_browser() -> None:
    """At a browser test module's top: skip the whole module where Chromium or Playwright is missing."""
    why = browser_missing()
    if why:
        import pytest

        pytest.skip(f"browser tests need Chromium and Playwright: {why}", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerURL(str):
    """The base URL, and the server's process id (`.pid`) for tests that measure it."""

    pid: int


@contextlib.contextmanager
def streamlit_server(
    timeout: float = 60.0, extra_args: tuple[str, ...] = (), launcher: list[str] | None = None
) -> Iterator[ServerURL]:
    """`streamlit run app.py` on a free port (with `extra_args`, e.g. config options); yields the
    base URL. `launcher` replaces `python -m streamlit` (bench/bench_app.py's timed server)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="kx_streamlit_", suffix=".log", delete=False)
    cmd = [
        *(launcher or [sys.executable, "-m", "streamlit"]),
        "run",
        str(ROOT / "app.py"),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        *extra_args,
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = ServerURL(f"http://127.0.0.1:{port}")
    url.pid = proc.pid
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}: {Path(log.name).read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not answer within {timeout:.0f} s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        if not os.environ.get("KUIPER_KEEP_SERVER_LOG"):  # keep it to read a failure's traceback
            os.unlink(log.name)


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 1300) -> Iterator[object]:
    """A Playwright page in headless Chromium with a fresh profile directory."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="kx_chromium_")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": width, "height": height},
            )
            try:
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(60_000)
                yield page
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def wait_for_app(page, timeout_ms: int = 60_000) -> None:
    """Until the script has finished running."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_function(f"() => {IDLE_JS}", timeout=timeout_ms)


# -- driving the app ----------------------------------------------------------------------------
# Test runs write screenshots to an ignored folder; `KUIPER_SCREENSHOTS=docs/screenshots pytest
# tests/test_browser.py` refreshes the README's pictures on purpose.
SCREENSHOTS = ROOT / os.environ.get("KUIPER_SCREENSHOTS", "tests/artifacts/screenshots")
GRAPH_SVG = '[data-testid="stGraphVizChart"] svg'  # a plain st.graphviz_chart
VIEW = ".kx-view"  # the graph viewer (pages/graph_viewer.js): its dataset says what it shows
VIEW_SVG = f"{VIEW} svg"  # the graph a user sees in the viewer


# Streamlit has finished the current script run: the app's root says so (the status widget
# alone is not enough: with toolbarMode "minimal" Streamlit 1.67 never draws it, so a first
# load's run, e.g. a spinner running the model, looked idle), no element still drawn as stale
# or as a skeleton.
IDLE_JS = """(document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState === 'notRunning'
           && !document.querySelector('[data-testid="stStatusWidget"]')
           && !document.querySelector('[data-testid="stSkeleton"]')
           && !document.querySelector('[data-stale="true"]'))"""


def wait_idle(page, timeout_ms: int = 90_000) -> None:
    """Until Streamlit has finished the current script run (IDLE_JS)."""
    page.wait_for_timeout(300)  # let a just-triggered rerun start
    page.wait_for_function(f"() => {IDLE_JS}", timeout=timeout_ms)


def goto_page(page, slug: str) -> None:
    """Follow the sidebar link (keeps the session, unlike page.goto)."""
    if slug == "home":  # the default page's link is the bare root URL
        page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Home / model").click()
    else:
        page.click(f'[data-testid="stSidebarNav"] a[href*="/{slug}"]')
        page.wait_for_url(f"**/{slug}**")
    wait_idle(page)


def pick_bundled_model(page, name: str) -> None:
    goto_page(page, "home")
    page.locator('[data-testid="stRadio"]').first.get_by_text(f"{name} — ", exact=False).click()
    page.get_by_text(f"Summary of {name}").wait_for(timeout=120_000)
    wait_idle(page)


def exception_boxes(page) -> list[str]:
    return [e.inner_text()[:500] for e in page.query_selector_all('[data-testid="stException"]')]


def svg_node_titles(page, view: int = 0) -> set[str]:
    return set(
        page.locator(VIEW)
        .nth(view)
        .evaluate("v => [...v.querySelectorAll('svg g.node > title')].map(t => t.textContent)")
    )


def current_highlight(page, view: int = 0) -> list[str]:
    """Titles of the nodes the viewer draws as current (the red border)."""
    return (
        page.locator(VIEW)
        .nth(view)
        .evaluate("v => [...v.querySelectorAll('svg g.node.kx-current > title')].map(t => t.textContent)")
    )


def wait_highlight(page, name: str, view: int = 0, timeout_ms: int = 30_000) -> None:
    page.wait_for_function(
        f"""() => {{ const v = document.querySelectorAll('{VIEW}')[{view}];
                     return v && [...v.querySelectorAll('svg g.node.kx-current > title')].some(t => t.textContent === {name!r}); }}""",
        timeout=timeout_ms,
    )


def click_node(page, title: str, view: int = 0, kind: str = "node") -> None:
    """Click, with the mouse, the node (or cluster label) titled `title` in a graph viewer.
    It must be visible inside the viewer's box, as a user would see it."""
    page.locator(VIEW).nth(view).scroll_into_view_if_needed()
    box = (
        page.locator(VIEW)
        .nth(view)
        .evaluate(
            f"""(v, title) => {{
            const g = [...v.querySelectorAll('svg g.{kind}')].find(g => g.querySelector(':scope > title').textContent === title);
            if (!g) return null;
            const target = g.querySelector('{"text" if kind == "cluster" else "path, polygon, ellipse"}');
            const at = () => {{ const r = target.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }};
            let [x, y] = at();
            if (!g.contains(document.elementFromPoint(x, y)) && v.kxCentre) {{  // hidden (legend, edge of the box): pan to it
                if ({str(kind == "node").lower()}) v.kxCentre(title);
                [x, y] = at();
            }}
            return {{x, y, hit: g.contains(document.elementFromPoint(x, y))}};
        }}""",
            title,
        )
    )
    assert box is not None, f"no {kind} titled {title!r} in the viewer"
    assert box["hit"], f"{title!r} cannot be reached with the mouse in the viewer"
    page.mouse.click(box["x"], box["y"])


def graph_render_seconds(page, model: str) -> tuple[float, int]:
    """Seconds from clicking the Graph link to the model's graph drawn in the browser
    (the first render for this session), and how many SVG nodes it has."""
    import time

    pick_bundled_model(page, model)
    t0 = time.perf_counter()
    page.click('[data-testid="stSidebarNav"] a[href*="/graph"]')
    page.wait_for_selector(f"{VIEW_SVG} g.node", timeout=120_000)
    seconds = time.perf_counter() - t0
    nodes = page.locator(f"{VIEW_SVG} g.node").count()
    wait_idle(page)
    return seconds, nodes


def wait_caught_up(page, timeout_ms: int = 90_000) -> None:
    """Until the server has drawn the step the browser shows (Forward steps in the browser and
    dims what the server drew for another step: pages/step_panel.js's `behind`) and is idle."""
    page.wait_for_function(f"() => !document.querySelector('.kx-behind') && {IDLE_JS}", timeout=timeout_ms)
    wait_idle(page, timeout_ms)
