"""Steps in the browser (issue 38): a walkthrough's controls and panel, as components.

`step_controls` draws Reset / Back / Step / End / Play, the speed, a slider and "Step N of M";
they (and → PageDown ← PageUp) move the position in the browser (step_controls.js), which
repaints the graph viewers given `frames=` and the `step_panel`s of the same group from frames
sent once. The server hears the position only when the user pauses (one absolute number,
so a burst is never merged or replayed), to keep its state and the URL for a reload.

No private Streamlit state is involved: a step is a plain component state value.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from kuiper_core.explore.links import link_int
from pages.player import DEFAULT, SPEEDS

_HERE = Path(__file__).resolve().parent
_CSS = (_HERE / "step_controls.css").read_text()
_controls = st.components.v2.component(
    "kx_step_controls", js=(_HERE / "step_controls.js").read_text(), css=_CSS, isolate_styles=False
)
_panel = st.components.v2.component("kx_step_panel", js=(_HERE / "step_panel.js").read_text(), isolate_styles=False)

REPORT_MS = 700  # the server hears the position once the user has paused this long


def group_of(*parts: object) -> str:
    """A short id for what is walked through (the frames of one walk belong to one group)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def step_controls(
    key: str,
    group: str,
    total: int,
    step: int,
    seq: int,
    on_step: Callable[[int], None],
    *,
    prefix: str,
    label_suffix: str = "",
    url_param: str | None = "step",
    report_ms: int | None = None,
    first: int = 0,
    known: int | None = None,
) -> None:
    """The controls of one walk of `total` steps, at `step`. `seq`: bump it whenever the
    server moves the position itself (the browser then takes `step`); on_step(n) runs (as a
    callback) with the browser's position once the user pauses, or at once for a step past
    `known` (the last step the browser has a frame for: Forward's operators not run yet)."""

    def _reported() -> None:
        value = (st.session_state.get(key) or {}).get("step")
        n = link_int(str(value)) if isinstance(value, int) and not isinstance(value, bool) else None
        if n is not None:
            on_step(max(first, min(n, total)))

    _controls(
        key=key,
        data={
            "group": group,
            "total": int(total),
            "step": int(step),
            "seq": int(seq),
            "prefix": prefix,
            "label_suffix": label_suffix,
            "url_param": url_param,
            "report_ms": REPORT_MS if report_ms is None else int(report_ms),
            "speeds": SPEEDS,
            "speed": DEFAULT,
            "first": int(first),
            "known": int(total if known is None else known),
        },
        on_step_change=_reported,
    )


PACK_ABOVE = 32_000  # bytes of frames' JSON above which they go deflated (Forward on deep1500: 0.9 MB -> 50 KB)
_packed: list[tuple[list[str], dict[str, str]]] = []  # the last frames packed (each a rerun sends again)


def _pack(frames: list[str]) -> dict[str, str] | None:
    """{"z": base64 of the zlib-deflated JSON, "id"} for frames above PACK_ABOVE, else None.
    step_panel.js inflates them once per id (DecompressionStream)."""
    for kept, packed in _packed:
        if kept is frames:  # the same list (the page caches it): packed once
            return packed
    text = json.dumps(frames)
    if len(text) <= PACK_ABOVE:
        return None
    body = text.encode()
    packed = {
        "z": base64.b64encode(zlib.compress(body, 6)).decode(),
        "id": hashlib.blake2b(body, digest_size=12).hexdigest(),
    }
    _packed.insert(0, (frames, packed))
    del _packed[8:]
    return packed


def step_panel(
    key: str, group: str, frames: list[str], step: int, *, beyond: str | None = None, behind: str | None = None
) -> None:
    """The panel of `group`: frames[step] (HTML made and escaped by kuiper_core.explore).
    beyond: the HTML for a step past the last frame ("{step}" is its number); behind: a CSS
    selector of what the server drew for `step`, dimmed while the browser shows another."""
    packed = _pack(frames)
    _panel(
        key=key,
        data={
            "group": group,
            "frames": None if packed else frames,
            "packed": packed,
            "step": int(step),
            "beyond": beyond,
            "behind": behind,
        },
    )


_URL_JS = """
export default function (component) {
  const { data } = component;
  const url = new URL(window.location.href);
  for (const [k, v] of Object.entries(data.params || {})) {
    if (v === null) url.searchParams.delete(k); else url.searchParams.set(k, String(v));
  }
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, "", url.href);
}
"""
_url = st.components.v2.component("kx_url_follow", js=_URL_JS, isolate_styles=False)


def url_follows(key: str, **params: int | str | None) -> None:
    """The address bar shows `params` once this run's page is drawn. Streamlit writes the
    query string when a run calls st.query_params, and after a burst of fragment runs an
    earlier run's write could land last (Forward showed operator 2 with ?step=1); this
    element is drawn with the page, so the last page drawn sets the URL it shows."""
    _url(key=key, data={"params": params})
