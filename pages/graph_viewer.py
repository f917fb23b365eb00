"""Every graph of the app (models, ASTs, walkthroughs) in one pan/zoom viewer.

Why a component: st.graphviz_chart scales a big graph down to the column (4 px text) and
its fullscreen cannot zoom, and it reports no clicks. `graph_viewer.js` (a small
st.components.v2 component, no iframe, no library) copies the SVG that st.graphviz_chart
renders next to it (or, above LAYOUT_HERE_NODES nodes, the SVG of explore/layout.py),
keeps node text at a readable size, pans and zooms (wheel, drag, buttons, fullscreen, an
overview map), paints the `Overlay` (current node, state colours, search marks, legend)
without a new layout, exports the drawing as shown (SVG, PNG) and reports clicks.

The interface pages rely on (kept stable; the classroom's quiz and presenter view use it):

- `show_graph(dot, key, overlay, height=, follow=, on_click=, export_name=)` draws `dot`.
  A new DOT is drawn as soon as Streamlit has laid it out: the copy follows the drawing by
  content, so a step that changes only a fill or a label of equal length is shown (DFS and
  Kahn walkthroughs draw their state into the DOT itself).
- `on_click(title)` runs as a widget callback, before the next run, with the `<title>` of
  the node clicked (a PNNX operator's name, a toy graph's node name) or of a module's
  folder/frame (`dot.parse_click` tells which). A click that drags is a pan, not a click.
  `clicked(key)` reads the last title inside a callback. Without `on_click` nothing is
  clickable (the cursor says so).
- `Overlay.highlight` gets the red border; with `follow=True` a highlight that changes and
  is out of view is centred (a node the user just clicked is not moved). `colors` fill
  nodes, `neutral=True` greys the others; `marks` ring nodes in blue; `legend`,
  `highlight_label`, `marks_label` and `note` make the legend under the box.
- For tests and automation the `.kx-view` element carries `data-highlight`, `data-nodes`,
  `data-scale`, `data-font-px` (node text size on screen), `data-in-view` and `data-syncs`
  (drawings copied), and the functions `kxCentre(title)`, `kxVisible(title)` and
  `kxExport("svg" | "png")` (a Promise of the file's text or data URL).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from collections.abc import Callable
from typing import Any

import streamlit as st

from kuiper_core.explore.dot import GraphView, parse_click
from kuiper_core.explore.layout import layout_svg
from kuiper_core.explore.modules import ancestors
from kuiper_core.explore.overlay import NEUTRAL, Overlay

_HERE = Path(__file__).resolve().parent
_JS = (_HERE / "graph_viewer.js").read_text()
_CSS = (_HERE / "graph_viewer.css").read_text()
_viewer = st.components.v2.component("kx_graph_viewer", js=_JS, css=_CSS, isolate_styles=False)

MIN_FONT_PX = 13  # node text is never drawn smaller at first (a projector at 1280x720)
LAYOUT_HERE_NODES = 300  # above this many nodes the layout is done in Python


SVG_SENT = "kxv_svg_sent"  # ids of the laid-out SVGs this session's browser holds (newest last)


def _svg_payload(dot: str) -> tuple[str, str | None]:
    """(id, SVG or None): a big graph's SVG (1.4 MB for deep1500 all open) goes to the browser
    once per session; later runs (a click, a step) send its id and graph_viewer.js draws the
    copy it keeps. If the browser lacks it after all, it says so (`missing`) and gets it."""
    svg_id = hashlib.blake2b(dot.encode(), digest_size=12).hexdigest()
    sent = st.session_state.setdefault(SVG_SENT, [])
    if svg_id in sent:
        return svg_id, None
    sent.append(svg_id)
    del sent[:-4]  # the browser keeps the 8 newest
    return svg_id, layout_svg(dot)


def _svg_missing() -> None:
    st.session_state[SVG_SENT] = []  # the next run sends the SVG again


def _new_drawing(key: str, dot: str) -> bool:
    """Whether an empty element goes before the chart this run. A changed DOT (the next
    step of a walkthrough) redrawn into the same chart makes Streamlit's d3-graphviz morph
    every old path into its new shape, sampling points along each (getPointAtLength: ~0.7 s
    a step of a 6-node graph on a busy machine, the walkthrough's main cost); moving the
    chart by one element at each new DOT makes React mount a fresh chart, drawn at once."""
    last = st.session_state.get(f"kxd-{key}")
    parity = last[1] if isinstance(last, tuple) else False
    digest = hashlib.blake2b(dot.encode(), digest_size=12).digest()
    if last is not None and last[0] != digest:
        parity = not parity
    st.session_state[f"kxd-{key}"] = (digest, parity)
    return parity


def clicked(key: str) -> str | None:
    """The node or cluster title last clicked in the viewer `key` (inside its callback)."""
    state = st.session_state.get(f"kxv-{key}") or {}
    value = state.get("clicked") if hasattr(state, "get") else None
    return value if isinstance(value, str) else None


def show_graph(
    dot: str,
    key: str,
    overlay: Overlay | None = None,
    *,
    height: int = 560,
    follow: bool = False,
    on_click: Callable[[str], None] | None = None,
    export_name: str | None = None,
    min_font_px: int = MIN_FONT_PX,
    frames: list[dict] | None = None,
    group: str | None = None,
    step: int = 0,
    link: str | None = None,
    additive: bool = False,
) -> None:
    """Draw `dot` in the viewer. on_click(title) runs as a callback (before the next run).

    height: the least height in px (the box grows with the window, and shrinks to keep its
    legend on screen); follow: centre the highlighted node when it changes and is out of
    view; export_name: the file name (without extension) of the SVG/PNG download;
    min_font_px: node text is never drawn smaller at first (a presenter view asks for more);
    frames, group, step: steps in the browser (pages/step_controls.py): frames[i] is drawn
    over `overlay` while group `group` is at step i (`step` until the controls say); with
    `additive`, frame i's colors are only what step i adds (a long run's fills stay small);
    link: viewers given the same name pan and zoom together (Passes' two graphs)."""
    ov = overlay or Overlay()

    def _clicked() -> None:
        title = clicked(key)
        if title is not None and on_click is not None:
            on_click(title)

    # A big graph is laid out here (explore/layout.py, ~0.3 s for 1,500 nodes) instead of by
    # Graphviz in the browser (5-15 s); frames of open modules need Graphviz's clusters.
    here = dot.count("[label=") > LAYOUT_HERE_NODES and "subgraph" not in dot
    svg_id, svg = _svg_payload(dot) if here else (None, None)
    with st.container(key=f"kxg-{key}"):
        if not here:
            if _new_drawing(key, dot):
                st.empty()  # see _new_drawing
            st.graphviz_chart(dot, width="content")
        _viewer(
            key=f"kxv-{key}",
            data={
                "highlight": ov.highlight,
                "colors": ov.colors,
                "neutral": ov.neutral,
                "neutral_color": NEUTRAL,
                "legend": [list(item) for item in ov.legend],
                "highlight_label": ov.highlight_label,
                "note": ov.note,
                "height": int(height),
                "follow": follow,
                "clickable": on_click is not None,
                "min_font_px": int(min_font_px),
                "svg_id": svg_id,
                "svg": svg,
                "marks": list(ov.marks),
                "marks_label": ov.marks_label,
                "export_name": export_name or key,
                "frames": frames,
                "group": group,
                "step": int(step),
                "additive": additive,
                "link": link,
            },
            on_clicked_change=_clicked,
            on_missing_change=_svg_missing,
        )


class ModuleState:
    """Which modules one viewer has open, per model (clicks open and close them).

    Until the first click the view's default applies (None); a click starts from what was
    drawn last, so nothing jumps."""

    def __init__(self, key: str, model_key: str) -> None:
        self.key, self.model_key = key, model_key

    def _get(self, suffix: str) -> Any:
        v = st.session_state.get(self.key + suffix)
        return v[1] if isinstance(v, tuple) and len(v) == 2 and v[0] == self.model_key else None

    def _set(self, suffix: str, value: Any) -> None:
        st.session_state[self.key + suffix] = (self.model_key, value)

    @property
    def expanded(self) -> set[str] | None:
        return self._get("_open")

    def remember(self, view: GraphView) -> None:
        """Call after drawing: clicks are resolved against this view."""
        self._set("_last", view)

    @property
    def last(self) -> GraphView | None:
        return self._get("_last")

    def click(self, title: str) -> str | None:
        """Open or close a module; return the operator name when an operator was clicked."""
        what, target = parse_click(title)
        if what == "operator":
            return target
        last = self.last
        opened = set(self.expanded if self.expanded is not None else (last.expanded if last else set()))
        if what == "open":
            opened.add(target)
        elif last is not None and last.tree is not None:  # closing a module closes what is inside it too
            inner = next((g for g in last.tree.walk() if g.id == target), None)
            opened -= {g.id for g in inner.walk()} if inner is not None else {target}
        self._set("_open", opened)
        return None

    def reveal(self, name: str) -> None:
        """Open the modules around operator `name` (a selection made outside the graph)."""
        last = self.last
        if last is None or last.tree is None or last.unit_of.get(name) == name:
            return
        opened = set(self.expanded if self.expanded is not None else last.expanded)
        self._set("_open", opened | {g.id for g in ancestors(last.tree, name)})

    def set_all(self, value: bool | None) -> None:
        """Open every module (True), close them all (False), or back to the default (None)."""
        last = self.last
        if value is None or last is None or last.tree is None:
            st.session_state.pop(self.key + "_open", None)
        else:
            self._set("_open", {g.id for g in last.tree.walk() if g.id} if value else set())
