"""Every graph of the app (models, ASTs, walkthroughs) in one pan/zoom viewer.

Why a component: st.graphviz_chart scales a big graph down to the column (4 px text) and
its fullscreen cannot zoom, and it reports no clicks. `graph_viewer.js` (a small
st.components.v2 component, no iframe, no library) clones the SVG that st.graphviz_chart
renders next to it, keeps node text at a readable size, pans and zooms (wheel, drag,
buttons, fullscreen), paints the `Overlay` (current node, state colours, legend) without
a new layout, and reports the node or cluster clicked.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable

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
) -> None:
    """Draw `dot` in the viewer. on_click(title) runs as a callback (before the next run).

    height: the least height in px (the box grows with the window, and shrinks to keep its
    legend on screen); follow: centre the highlighted node when it changes and is out of
    view; export_name: the file name (without extension) of the SVG/PNG download."""
    ov = overlay or Overlay()

    def _clicked() -> None:
        title = clicked(key)
        if title is not None and on_click is not None:
            on_click(title)

    # A big graph is laid out here (explore/layout.py, ~0.3 s for 1,500 nodes) instead of by
    # Graphviz in the browser (5-15 s); frames of open modules need Graphviz's clusters.
    here = dot.count("[label=") > LAYOUT_HERE_NODES and "subgraph" not in dot
    with st.container(key=f"kxg-{key}"):
        if not here:
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
                "min_font_px": MIN_FONT_PX,
                "svg": layout_svg(dot) if here else None,
                "marks": list(ov.marks),
                "marks_label": ov.marks_label,
                "export_name": export_name or key,
            },
            on_clicked_change=_clicked,
        )


class ModuleState:
    """Which modules one viewer has open, per model (clicks open and close them).

    Until the first click the view's default applies (None); a click starts from what was
    drawn last, so nothing jumps."""

    def __init__(self, key: str, model_key: str) -> None:
        self.key, self.model_key = key, model_key

    def _get(self, suffix: str):
        v = st.session_state.get(self.key + suffix)
        return v[1] if isinstance(v, tuple) and len(v) == 2 and v[0] == self.model_key else None

    def _set(self, suffix: str, value) -> None:
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
