"""Helpers shared by the AppTest files: start the app, read what the graph viewer shows."""

from __future__ import annotations

import base64
import json
import os
import re
import zlib
from typing import Any

from conftest import ROOT

from streamlit.components.v2 import manifest_scanner
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import app_test as app_test_module

TIMEOUT = 180

# AppTest resets PagesManager.uses_pages_directory before every run, so with a `pages/`
# folder each rerun after the first would execute the page file bare (Streamlit's legacy
# multipage mode) instead of app.py. The server sets it to False for good at its first
# st.navigation call; do the same here, so every AppTest run goes through app.py (its
# sidebar, URL and style) exactly as in the browser.
_pages_manager_init = PagesManager.__init__


def _navigation_mode_init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
    _pages_manager_init(self, *args, **kwargs)
    PagesManager.uses_pages_directory = False


PagesManager.__init__ = _navigation_mode_init  # type: ignore[method-assign]

# Each new AppTest's first run makes a BidiComponentManager that scans every installed
# distribution's metadata for component manifests (importlib.metadata, ~0.3 s with this venv's
# torch & co.: most of a fresh AppTest's run). The server scans once at start-up; the installed
# packages do not change during a test session, so the tests scan once too and reuse the list.
_scan_component_manifests = manifest_scanner.scan_component_manifests
_manifests: list[Any] | None = None


def _scan_once(max_workers: int | None = None) -> list[Any]:
    global _manifests
    if _manifests is None:
        _manifests = _scan_component_manifests(max_workers)
    return list(_manifests)


manifest_scanner.scan_component_manifests = _scan_once


# Each AppTest run makes a new ScriptCache, so app.py and the page were read, rewritten by
# Streamlit's "magic" (an AST pass) and compiled again on every run: about a third of a page
# run. The server keeps one ScriptCache for all sessions; the tests share one too, keyed also by
# the file's mtime and size so that a script written anew (from_function's temp file) is read again.
class _SessionScriptCache(ScriptCache):
    def __init__(self) -> None:
        super().__init__()
        self._versions: dict[str, tuple[int, int]] = {}

    def get_bytecode(self, script_path: str) -> Any:
        path = os.path.abspath(script_path)
        st = os.stat(path)
        with self._lock:
            if self._versions.get(path) != (st.st_mtime_ns, st.st_size):
                self._cache.pop(path, None)
                self._versions[path] = (st.st_mtime_ns, st.st_size)
        return super().get_bytecode(path)


_script_cache = _SessionScriptCache()
app_test_module.ScriptCache = lambda: _script_cache  # type: ignore[assignment]
HOME, GRAPH, ORDER, EXPR, FORWARD, PROFILE = (
    "pages/1_home.py",
    "pages/2_graph.py",
    "pages/3_order.py",
    "pages/4_expressions.py",
    "pages/5_forward.py",
    "pages/6_profile.py",
)


def app(model: str | None = None, page: str | None = None, query: dict[str, str] | None = None) -> AppTest:
    """The app on `model` (picked on Home) and `page`; `query`: the URL it is opened with."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    if query and page is not None and model is None:  # a link straight to a page
        at.switch_page(page)
        page = None
    at.run()
    if model is not None:
        at.radio(key="home_bundled").set_value(model).run()
    if page is not None:
        at.switch_page(page).run()
    no_exception(at)
    return at


def upload_input(at: AppTest, array: Any, name: str) -> AppTest:
    """Home: choose "an array file" as the input and upload `array` as the .npy `name`."""
    import io

    import numpy as np

    at.radio(key="home_input_kind").set_value("npy").run()
    buf = io.BytesIO()
    np.save(buf, array)
    at.file_uploader(key="home_npy").upload(name, buf.getvalue()).run()
    no_exception(at)
    return at


def as_shown(label: str) -> str:
    """A label or header as the page shows it: Markdown escapes (upload_names.md_text) and the
    invisible characters that keep labels apart and autolinks off taken out."""
    import re

    return re.sub(r"\\(.)", r"\1", label).replace("\u200b", "").replace("\u2060", "")


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def click(at: AppTest, key: str, times: int = 1) -> AppTest:
    for _ in range(times):
        at.button(key=key).click().run()
        no_exception(at)
    return at


def dots(at: AppTest) -> list[str]:
    return [el.proto.spec for el in at.get("graphviz_chart")]


def viewers(at: AppTest) -> list[dict[str, Any]]:
    """The overlay each graph viewer was given (highlight, colors, legend, …), in page order."""
    return [
        json.loads(el.proto.json) for el in at.get("bidi_component") if el.proto.component_name == "kx_graph_viewer"
    ]


def highlight(at: AppTest, i: int = 0) -> str | None:
    return viewers(at)[i]["highlight"]


def node_names(dot: str) -> set[str]:
    """Quoted ids that start a node statement (`"name" [label=…`), at any nesting depth."""
    return {m.group(1).replace('\\"', '"') for m in re.finditer(r'^\s*"((?:[^"\\]|\\.)*)" \[', dot, re.M)}


def operator_nodes(dot: str) -> set[str]:
    """Node ids that are operators (closed modules are 'group …' nodes)."""
    return {n for n in node_names(dot) if not n.startswith("group ")}


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def keyed(elements, prefix: str):
    """The one widget whose key starts with `prefix` (position widgets carry the position
    in their key: fw_pos_5, order_pos_4, fw_target_5)."""
    (found,) = [e for e in elements if e.key and e.key.startswith(prefix)]
    return found


# -- Step through Forward: its steps happen in the browser (pages/step_controls.js) ------------
def component_data(at: AppTest, name: str, i: int = 0) -> dict[str, Any]:
    """The data the i-th component `name` was given (kx_step_controls, kx_step_panel, …)."""
    return [json.loads(el.proto.json) for el in at.get("bidi_component") if el.proto.component_name == name][i]


def forward_controls(at: AppTest) -> dict[str, Any]:
    """Forward's step controls: step (the server's position), total, known (frames up to), seq."""
    return next(
        json.loads(el.proto.json)
        for el in at.get("bidi_component")
        if el.proto.component_name == "kx_step_controls" and json.loads(el.proto.json)["prefix"] == "fw"
    )


def forward_go(at: AppTest, position: int) -> AppTest:
    """The browser's controls reporting a position, as after a pause (or a step past the
    operators run, reported at once); a position past the end is the end (Run all)."""
    at.session_state["fw_pending"] = ("report", position)
    at.run()
    no_exception(at)
    return at


def forward_step(at: AppTest, times: int = 1) -> AppTest:
    for _ in range(times):
        forward_go(at, forward_controls(at)["step"] + 1)
    return at


def forward_back(at: AppTest) -> AppTest:
    return forward_go(at, max(0, forward_controls(at)["step"] - 1))


def forward_panel(at: AppTest) -> str:
    """The HTML Forward's step panel shows at the server's position."""
    panel = component_data(at, "kx_step_panel")
    frames = panel["frames"]
    if panel.get("packed"):  # sent deflated (pages/step_controls.py: a long run's frames)
        frames = json.loads(zlib.decompress(base64.b64decode(panel["packed"]["z"])))
    return frames[min(panel["step"], len(frames) - 1)]


def viewer_colors(at: AppTest, i: int = 0) -> dict[str, str]:
    """The fills viewer i shows at its step (frames with `additive` add to the ones before)."""
    v = viewers(at)[i]
    if not v.get("frames"):
        return v["colors"]
    upto = min(v["step"], len(v["frames"]) - 1)
    if not v.get("additive"):
        return v["frames"][upto].get("colors", v["colors"])
    colors = dict(v["colors"])
    for frame in v["frames"][: upto + 1]:
        colors.update(frame["colors"])
    return colors
