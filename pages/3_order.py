"""Execution order: the reverse-topological DFS and Kahn's algorithm as walkthroughs.

Each run is a list of recorded events; the page shows one step. Buttons, the slider, the
keyboard and Play only change the step in callbacks (before drawing), so every button is
drawn for the step on screen. "Both side by side" advances DFS and Kahn together.
"""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from kuiper_core.errors import KuiperError
from kuiper_core.explore import walkthrough as W
from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.overlay import roll_up, state_overlay
from kuiper_core.graph import Graph
from pages import common
from pages.graph_viewer import ModuleState, show_graph
from pages.keys import step_keys
from pages.player import current_speed, run_fragment, speed_picker, steps_due, sync_timer

STATE = "kx_order"  # {"key": ..., "step": int (0 = before the first event), "playing": bool}
MODEL_SOURCE = "The loaded model"
TYPED_SOURCE = "Type your own graph"
ALGORITHMS = {"dfs": "DFS (KuiperInfer)", "kahn": "Kahn", "both": "both side by side"}

st.title("Execution order")
st.caption(
    "The engine orders the operators so each runs after the ones it reads. KuiperInfer (its graph-building "
    "article) uses a depth-first search: a node joins an output list once all its successors are done, and the "
    "reversed list is the order. Kahn's algorithm repeatedly takes a node whose in-degree is zero."
)


@st.cache_resource(show_spinner="Tracing the order…", max_entries=16)
def _model_walkthrough(key: str, algorithm: str, _graph: Graph) -> W.Walkthrough:
    return W.model_walkthrough(_graph, algorithm)


def _names(items, empty: str = "(empty)", limit: int = 40) -> str:
    """Space-separated names; long lists keep their most recent `limit` (the end matters)."""
    if not items:
        return empty
    items = list(items)
    head = f"… {len(items) - limit:,} earlier  " if len(items) > limit else ""
    return head + "  ".join(items[-limit:])


# -- what to walk through ----------------------------------------------------------------
model = common.current_model()
sources = list(W.PRESETS) + [TYPED_SOURCE]
if model is not None and model.graph is not None:
    sources.append(MODEL_SOURCE)
if "order_source" not in st.session_state and common.url_param("graph") in sources:
    st.session_state["order_source"] = common.url_param("graph")
if "order_algorithm" not in st.session_state and common.url_param("algo") in ALGORITHMS:
    st.session_state["order_algorithm"] = common.url_param("algo")
c1, c2, c3 = st.columns([3, 3, 4])  # c3: a typed graph's text, beside the pickers (the graph stays above the fold)
source = c1.selectbox(
    "Graph",
    sources,
    key="order_source",
    format_func=lambda s: f"{s} ({model.name}, {len(model.graph.operators)} operators)" if s == MODEL_SOURCE else s,
)
algorithm = c2.radio("Algorithm", list(ALGORITHMS), horizontal=True, key="order_algorithm", format_func=ALGORITHMS.get)
algorithms = ["dfs", "kahn"] if algorithm == "both" else [algorithm]

if source == TYPED_SOURCE:
    text = c3.text_area(
        "Your graph, one edge chain per line",
        W.edges_text(W.PRESETS["A small diamond"]),
        height=110,
        key="order_typed",
        help="e.g. `a -> b -> c` or `b -> d, e`; names: letters, digits, _ . : (Ctrl+Enter applies)",
    )
    try:
        typed = W.parse_edges(text)
    except KuiperError as e:
        common.show_error(e, title="Cannot read the graph")
        st.stop()
    walks = [W.walkthrough(typed, a) for a in algorithms]
    ident = hashlib.sha1(text.encode()).hexdigest()[:12]
elif source == MODEL_SOURCE:
    assert model is not None and model.graph is not None
    walks = [_model_walkthrough(model.key, a, model.graph) for a in algorithms]
    ident = model.key
else:
    walks = [W.walkthrough(W.PRESETS[source], a) for a in algorithms]
    ident = source

key = (source, algorithm, ident)
state = st.session_state.get(STATE)
if state is None or state.get("key") != key:
    wanted = common.url_param("step")
    state = {"key": key, "step": int(wanted) if wanted and wanted.isdigit() and state is None else 0, "playing": False}
    st.session_state[STATE] = state
total = max(len(w.events) for w in walks)  # steps are numbered 1..total; 0 is before the first
state["step"] = max(0, min(total, state["step"]))


# -- callbacks ------------------------------------------------------------------------------
def _move(to: int | None = None, by: int = 0, play: bool = False) -> None:
    state["step"] = max(0, min(total, state["step"] + by if to is None else to))
    state["playing"] = play and state["step"] < total


def _on_slider(widget: str, drawn_at: int) -> None:
    """The slider is a new widget at each step (its key holds it); a rerun Play's timer
    started before the browser had drawn the newest step sends an older slider's value
    back, which is not the user's: only the slider drawn at the current step counts."""
    if drawn_at == state["step"]:
        _move(to=int(st.session_state[widget]))


def _play(on: bool) -> None:
    state["playing"] = on and state["step"] < total


model_modules = ModuleState("order_modules", model.key) if model is not None else None


def _on_click(title: str) -> None:
    """A click on a node jumps to the first step about it (modules open and close)."""
    name = model_modules.click(title) if model_modules is not None and source == MODEL_SOURCE else title
    if name is None:
        return
    first = W.step_of_node(walks[0], name)
    if first is not None:
        _move(to=first + 1)


# -- one walkthrough at one step ---------------------------------------------------------------
def _graph(w: W.Walkthrough, step: int, slot: str, height: int) -> None:
    event = w.events[step - 1] if step > 0 else None
    if source == MODEL_SOURCE and model is not None and model.graph is not None:
        current = event.node if event is not None else None
        assert model_modules is not None
        view = graph_view(model.graph, show=[current], expanded=model_modules.expanded, edge_labels=False)
        model_modules.remember(view)
        colors = W.node_colors(w, step - 1) if step > 0 else {n: W.COLORS["not visited"] for n in w.nodes}
        colors = roll_up(colors, view.unit_of, [c for _, c in w.legend])
        overlay = state_overlay(colors, w.legend, highlight=view.node_for(current), note="")
        show_graph(view.dot, f"order_{slot}", overlay, height=height, follow=True, on_click=_on_click)
    else:
        dot = W.toy_dot(w, step - 1 if step > 0 else None)
        overlay = state_overlay({}, w.legend, highlight=event.node if event is not None else None, note="")
        overlay.neutral = False  # the toy graph carries its state colours itself
        show_graph(dot, f"order_{slot}", overlay, height=height, on_click=_on_click)


def _state_panel(w: W.Walkthrough, step: int, compact: bool) -> None:
    if step == 0:
        st.info("Press **Step** (or →) to start, or **Play** to watch it run.")
        return
    shown = min(step, len(w.events))
    event = w.events[shown - 1]
    head = f"**Step {shown} of {len(w.events)}:** {event.message}"
    (st.error if event.kind == "cycle" else st.info)(head)
    if w.algorithm == "dfs":
        st.markdown("**Call stack** (bottom → top)")
        st.code(_names(event.stack), language=None, wrap_lines=True)
        if not compact:
            st.markdown("**Visited set**")
            st.code(_names(event.visited), language=None, wrap_lines=True)
        if event.kind == "reverse":
            before = w.events[shown - 2].output if shown > 1 else ()
            st.markdown("**Output list** (in finishing order)")
            st.code(_names(before), language=None, wrap_lines=True)
            st.markdown("**Reversed: the execution order**")
        else:
            st.markdown("**Output list** (a node is appended when all its successors are done)")
        st.code(_names(event.output), language=None, wrap_lines=True)
    else:
        st.markdown("**Queue** (front first)")
        st.code(_names(event.queue), language=None, wrap_lines=True)
        st.markdown("**Order so far**")
        st.code(_names(event.output), language=None, wrap_lines=True)
        if len(w.nodes) <= 200 and not compact:
            st.markdown("**In-degree table**")
            st.dataframe(
                pd.DataFrame(W.indegree_rows(w, shown - 1)),
                hide_index=True,
                width="stretch",
                height=min(300, 38 + 35 * len(w.nodes)),
            )


def _lesson(w: W.Walkthrough) -> None:
    if w.error is not None:
        st.error(
            f"**The lesson:** {w.error}. Each node on a cycle waits for another node on it, so no node of the "
            "cycle can ever run first: the engine refuses such a graph with a CycleError."
        )
    else:
        st.success(f"Done: {len(w.order or [])} nodes in execution order.")
        st.dataframe(
            pd.DataFrame(W.order_rows(w)), hide_index=True, width="stretch", height=min(320, 38 + 35 * len(w.nodes))
        )


def _walkthrough() -> None:
    speed = current_speed("order_speed")
    sync_timer(state, speed)
    if state["playing"]:
        state["step"] = min(total, state["step"] + steps_due(state, speed))
        if state["step"] >= total:
            state["playing"] = False
            st.rerun(scope="app")  # a full run drops the fragment's timer
    step = state["step"]
    common.set_url(graph=source if source != TYPED_SOURCE else None, algo=algorithm, step=step or None)
    common.write_url()

    b = st.columns([1, 1, 1, 1, 1, 1.3, 5])
    b[0].button("Reset", key="order_reset", width="stretch", on_click=_move, kwargs={"to": 0}, disabled=step == 0)
    b[1].button("Back", key="order_back", width="stretch", on_click=_move, kwargs={"by": -1}, disabled=step == 0)
    b[2].button(
        "Step",
        key="order_step",
        width="stretch",
        on_click=_move,
        kwargs={"by": 1},
        disabled=step >= total,
        type="primary",
    )
    b[3].button("End", key="order_end", width="stretch", on_click=_move, kwargs={"to": total}, disabled=step >= total)
    if state["playing"]:
        b[4].button("Pause", key="order_pause", width="stretch", on_click=_play, args=(False,))
    else:
        b[4].button("Play", key="order_play", width="stretch", on_click=_play, args=(True,), disabled=step >= total)
    with b[5]:
        speed_picker("order_speed")
    b[6].slider(
        f"Step (of {total})",
        0,
        total,
        step,
        key=f"order_pos_{step}",
        on_change=_on_slider,
        args=(f"order_pos_{step}", step),
        label_visibility="collapsed",
    )
    step_keys("order_keys", lambda: _move(by=1), lambda: _move(by=-1))
    st.markdown(
        f"**Step {step} of {total}**" + (" (the numbers count each algorithm's own events)" if len(walks) > 1 else "")
    )

    if len(walks) == 1:
        left, right = st.columns([3, 2])
        with left:
            _graph(walks[0], step, "one", 520)
        with right:
            _state_panel(walks[0], step, compact=False)
        if step >= total:
            _lesson(walks[0])
        return
    cols = st.columns(2)
    for col, w in zip(cols, walks):
        with col:
            st.markdown(
                f"**{'Reverse-topological DFS (KuiperInfer)' if w.algorithm == 'dfs' else 'Kahn’s algorithm'}**"
            )
            _graph(w, min(step, len(w.events)), w.algorithm, 400)
            _state_panel(w, step, compact=True)
    if step >= total:
        cols = st.columns(2)
        for col, w in zip(cols, walks):
            with col:
                _lesson(w)
        if all(w.order for w in walks) and walks[0].order != walks[1].order:
            st.info(
                "Both orders are valid: every operator comes after the ones it reads. They differ because DFS "
                "finishes a branch before starting the next, while Kahn takes nodes in the order they become ready."
            )


# Play re-runs only this fragment on a timer; the buttons are inside it so a click is quick too.
run_fragment(_walkthrough, state, current_speed("order_speed"))
