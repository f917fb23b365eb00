"""Presenter view: a walkthrough alone on a projector, in large type, driven by the keyboard.

A page that presents draws no button: this module hides Streamlit's sidebar and header, the
graph viewer's buttons and the page's own choices (drawn in `controls()`, a container kept
but hidden, so what was chosen stays chosen), and maps → / PageDown and ← / PageUp (what presentation
clickers send) to the page's steps and Esc to leaving. `?present=1` in a link opens a page
presenting. The flag lives in session state under the page's name, not in a widget, so it
survives runs that draw no toggle.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from pages import common
from pages.keys import STEP_KEYS, keyboard

_FLAG = "kx_presenting"  # {page name: True} for the pages presenting in this session

_CSS = """<style>
section[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl'], header[data-testid='stHeader'],
[data-testid='stToolbar'], [data-testid='stDecoration'] { display: none !important; }
[data-testid='stMainBlockContainer'] { padding: 0.6rem 1.4rem 0.2rem !important; max-width: 100% !important; }
[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] { gap: 0.35rem; }
.kx-tools, .kx-hint, .kx-bar, .kx-map, [class*='st-key-kx-controls'] { display: none !important; }
.kx-present-head { font-size: 20px; color: #444; margin: 0; display: flex; justify-content: space-between;
  align-items: baseline; gap: 1rem; }
.kx-present-keys { font-size: 14px; color: #666; white-space: nowrap; }
.kx-present-head b { color: #111; }
.kx-present-msg { font-size: 30px; line-height: 1.3; margin: 0.2rem 0 0.8rem; }
.kx-present-msg.kx-small { font-size: 23px; }
.kx-present-state { font-size: 23px; line-height: 1.35; margin: 0.15rem 0; }
.kx-present-state code { font-size: 23px; white-space: pre-wrap; overflow-wrap: anywhere; }  /* long values wrap */
</style>"""
KEYS = "→ / PageDown: next · ← / PageUp: back · Esc: leave"
GRAPH_FONT_PX = 18  # a model's graph is drawn at least this large (the viewer's default: 13 px)


def presenting(page: str) -> bool:
    """Whether `page` presents now (a link with ?present=1 starts presenting)."""
    flags = st.session_state.setdefault(_FLAG, {})
    if page not in flags and common.url_param("present") == "1":
        flags[page] = True
    on = bool(flags.get(page))
    common.set_url(present=1 if on else None)
    return on


def _set(page: str, on: bool) -> None:
    st.session_state.setdefault(_FLAG, {})[page] = on


def title(page: str, text: str, key: str) -> DeltaGenerator:
    """The page's title, the button that starts presenting, and between them a slot the page
    fills (returned): one row, hidden while presenting with the page's other choices."""
    left, mid, right = controls("-title").columns([3, 2, 1.1], vertical_alignment="center")
    left.title(text)
    right.button(
        "Present",
        key=key,
        icon=":material/slideshow:",
        on_click=_set,
        args=(page, True),
        width="stretch",
        help="Large type for a projector, no controls: → / PageDown step, ← / PageUp back, Esc leaves.",
    )
    return mid


def begin(page: str, key: str, forward: Callable[[], None], back: Callable[[], None]) -> None:
    """Hide the app's chrome and listen to the keys (call once, early, while presenting)."""
    st.html(_CSS)
    actions = {k: forward if d > 0 else back for k, d in STEP_KEYS.items()}
    actions["Escape"] = lambda: _set(page, False)
    keyboard(key, actions)


def controls(part: str = "") -> DeltaGenerator:
    """A container for a page's choices (graph, algorithm, expression, the step buttons):
    hidden while presenting. `part` tells several apart."""
    return st.container(key=f"kx-controls{part}")


def stop(page: str, presenting_now: bool) -> None:
    """st.stop() after an error; while presenting, Esc and a button still lead back to the
    page (its choices, where the mistake is to be fixed, are hidden while presenting)."""
    if presenting_now:
        keyboard(f"{page}_present_stop_keys", {"Escape": lambda: _set(page, False)})
        st.button("Leave the presenter view", key=f"{page}_present_leave", on_click=_set, args=(page, False))
    st.stop()


def head(*parts: str, keys: str = "") -> None:
    """One small line: what is shown (the first part in bold), and on its right the keys.
    Nothing goes below the graph: the viewer may grow its box to the bottom of the window."""
    first, *rest = parts
    text = f"<b>{html.escape(first)}</b>" + "".join(f" · {html.escape(p)}" for p in rest)
    hint = html.escape(keys + (" · " if keys else "") + KEYS)
    st.html(f"<p class='kx-present-head'><span>{text}</span><span class='kx-present-keys'>{hint}</span></p>")


def message(text: str, *, small: bool = False) -> None:
    """The sentence of the step, large. `text` may use **bold** and `code` (escaped first)."""
    st.html(f"<div class='kx-present-msg{' kx-small' if small else ''}'>{_inline(text)}</div>")


def state_line(label: str, value: str) -> None:
    st.html(f"<div class='kx-present-state'><b>{html.escape(label)}</b> <code>{html.escape(value)}</code></div>")


def _inline(text: str) -> str:
    """Escape, then render **bold** and `code` (all the markup the sentences use)."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
