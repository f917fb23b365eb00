"""Execution order: the reverse-topological DFS (or Kahn) as a walkthrough, step by step."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kuiper_core.explore import walkthrough as W
from kuiper_core.explore.dot import graph_dot
from kuiper_core.graph import Graph
from pages import common

STATE = "kx_order"  # {"key": (source, algorithm, model key), "step": int, "playing": bool}
MODEL_SOURCE = "The loaded model"
BIG = 60  # above this many operators the model graph is drawn around the current node
PLAY_SECONDS = 0.9

st.title("Execution order")
st.caption(
    "Before it runs anything the engine orders the operators so that every operator runs after the ones it "
    "reads. Kuiper does it like seed 004: a depth-first search from each node without predecessors appends a "
    "node to an output list once all its successors are done; the reversed list is the execution order. "
    "Kahn's algorithm is the other classic choice: repeatedly run a node whose in-degree is zero."
)


@st.cache_resource(show_spinner="Tracing the order…", max_entries=16)
def _model_walkthrough(key: str, algorithm: str, _graph: Graph) -> W.Walkthrough:
    return W.model_walkthrough(_graph, algorithm)


def _chips(items: list[tuple[str, str]], current: str) -> str:
    """The legend as coloured chips; the last chip shows the current-step border."""
    chip = 'border-radius:4px;padding:1px 6px;margin-right:6px;font-size:0.85em'
    html = [f'<span style="background:{c};border:1px solid #888;{chip}">{label}</span>' for label, c in items]
    html.append(f'<span style="border:3px solid {current};{chip}">current step</span>')
    return " ".join(html)


def _names(items, empty: str = "(empty)", limit: int = 40) -> str:
    """Space-separated names; long lists keep their most recent `limit` (the end matters)."""
    if not items:
        return empty
    items = list(items)
    head = f"… {len(items) - limit:,} earlier  " if len(items) > limit else ""
    return head + "  ".join(items[-limit:])


# -- what to walk through ----------------------------------------------------------------
model = common.current_model()
sources = list(W.PRESETS)
if model is not None and model.graph is not None:
    sources.append(MODEL_SOURCE)
c1, c2 = st.columns([3, 2])
source = c1.selectbox(
    "Graph",
    sources,
    key="order_source",
    format_func=lambda s: f"{s} ({model.name}, {len(model.graph.operators)} operators)" if s == MODEL_SOURCE else s,
)
algorithm = c2.radio(
    "Algorithm", ["dfs", "kahn"], horizontal=True, key="order_algorithm",
    format_func=lambda a: {"dfs": "Reverse-topological DFS (Kuiper)", "kahn": "Kahn's algorithm"}[a],
)

if source == MODEL_SOURCE:
    assert model is not None and model.graph is not None
    w = _model_walkthrough(model.key, algorithm, model.graph)
    key = (source, algorithm, model.key)
else:
    w = W.walkthrough(W.PRESETS[source], algorithm)
    key = (source, algorithm, None)

state = st.session_state.get(STATE)
if state is None or state.get("key") != key:
    state = {"key": key, "step": -1, "playing": False}
    st.session_state[STATE] = state
last = len(w.events) - 1


def _controls() -> None:
    b = st.columns([1, 1, 1, 1, 1.3, 3])
    if b[0].button("Reset", key="order_reset", width="stretch"):
        state.update(step=-1, playing=False)
    if b[1].button("Back", key="order_back", width="stretch", disabled=state["step"] < 0):
        state["step"] = max(-1, state["step"] - 1)
        state["playing"] = False
    if b[2].button("Step", key="order_step", width="stretch", disabled=state["step"] >= last):
        state["step"] = min(last, state["step"] + 1)
    if state["playing"]:
        if b[3].button("Pause", key="order_pause", width="stretch"):
            state["playing"] = False
            st.rerun()
    elif b[3].button("Play", key="order_play", width="stretch", disabled=state["step"] >= last):
        state["playing"] = True
        st.rerun()  # the page re-creates the fragment with a timer
    if b[4].button("Jump to end", key="order_end", width="stretch"):
        state.update(step=last, playing=False)
    b[5].markdown(f"**Step {state['step'] + 1} of {len(w.events)}**")


def _graph(step: int) -> None:
    event = w.events[step] if step >= 0 else None
    if source == MODEL_SOURCE and model is not None and model.graph is not None:
        colors = {}
        if step >= 0:
            blank = W.COLORS["not visited"]
            colors = {n: c for n, c in W.node_colors(w, step).items() if c != blank}
        current = event.node if event is not None else None
        big = len(model.graph.operators) > BIG
        dot = graph_dot(
            model.graph,
            highlight=current,
            node_colors=colors,
            focus=current if big and current else None,
            hops=3,
            edge_labels=False,
        )
        st.caption("Operators not visited yet keep their category colour.")
        if big:
            st.caption(
                f"{len(model.graph.operators)} operators: the graph shows 3 hops around the current operator "
                "(an overview before the first step)."
            )
    else:
        dot = W.toy_dot(w, step if step >= 0 else None)
    # Natural size: stretched to the column, five toy nodes would fill the screen.
    st.graphviz_chart(dot, width="content")
    st.markdown(_chips(w.legend, W.CURRENT_BORDER), unsafe_allow_html=True)


def _state_panel(step: int) -> None:
    if step < 0:
        st.info("Press **Step** to start, or **Play** to watch it run.")
        return
    event = w.events[step]
    if event.kind == "cycle":
        st.error(f"**Step {step + 1}:** {event.message}")
    else:
        st.info(f"**Step {step + 1}:** {event.message}")
    if algorithm == "dfs":
        st.markdown("**Call stack** (bottom → top)")
        st.code(_names(event.stack), language=None, wrap_lines=True)
        st.markdown("**Visited set**")
        st.code(_names(event.visited), language=None, wrap_lines=True)
        if event.kind == "reverse":
            before = w.events[step - 1].output if step > 0 else ()
            st.markdown("**Output list** (in finishing order)")
            st.code(_names(before), language=None, wrap_lines=True)
            st.markdown("**Reversed: the execution order**")
            st.code(_names(event.output), language=None, wrap_lines=True)
        else:
            st.markdown("**Output list** (a node is appended when all its successors are done)")
            st.code(_names(event.output), language=None, wrap_lines=True)
    else:
        st.markdown("**Queue** (front first)")
        st.code(_names(event.queue), language=None, wrap_lines=True)
        st.markdown("**Order so far**")
        st.code(_names(event.output), language=None, wrap_lines=True)
        if len(w.nodes) <= 200:
            st.markdown("**In-degree table**")
            st.dataframe(pd.DataFrame(W.indegree_rows(w, step)), hide_index=True, width="stretch", height=min(400, 38 + 35 * len(w.nodes)))


def _walkthrough() -> None:
    if state["playing"]:
        if state["step"] < last:
            state["step"] += 1
        if state["step"] >= last:
            state["playing"] = False
            st.rerun()  # a full run drops the fragment's timer
    _controls()
    step = state["step"]
    left, right = st.columns([3, 2])
    with left:
        _graph(step)
    with right:
        _state_panel(step)
    if step == last:
        if w.error is not None:
            st.error(
                f"**The lesson:** {w.error}. Each node on a cycle waits for another node on it, so no "
                "operator of the cycle can ever run first: the engine refuses such a graph with a CycleError."
            )
        else:
            st.success(f"Done: {len(w.order or [])} nodes in execution order.")
            st.dataframe(pd.DataFrame(W.order_rows(w)), hide_index=True, width="stretch")


# Play re-runs only this fragment on a timer; the buttons are inside it so a click is quick too.
st.fragment(run_every=PLAY_SECONDS if state["playing"] else None)(_walkthrough)()
