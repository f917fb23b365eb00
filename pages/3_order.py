"""Execution order: the reverse-topological DFS and Kahn's algorithm as walkthroughs, a quiz
and a presenter view.

Each run is a list of observed events; the page shows one step. Buttons, the slider, the
keyboard and Play only change the step in callbacks (before drawing), so every button is
drawn for the step on screen. "Both side by side" advances DFS and Kahn together. The quiz
stops before a step and asks for the node it is about (a click on the graph, or a pick from
the list); the presenter view shows the step alone in large type, keyboard only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import pandas as pd
import streamlit as st

from kuiper_core.errors import KuiperError
from kuiper_core.explore import order_quiz
from kuiper_core.explore import walk_frames, walkthrough
from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.order_state import state_at
from kuiper_core.explore.overlay import roll_up, state_overlay
from kuiper_core.graph import Graph
from pages import common, presenter
from pages import quiz_panel
from pages.graph_viewer import MIN_FONT_PX, ModuleState, show_graph
from pages.step_controls import group_of, step_controls, step_panel

STATE = "kx_order"  # {"key": ..., "step": int (0 = before the first event), "seq": server moves}
MODEL_SOURCE = "The loaded model"
TYPED_SOURCE = "Type your own graph"
QUIZ = "kx_order_quiz"  # quiz_panel state: the question on screen, the verdict, the score
ALGORITHMS = {"dfs": "DFS (KuiperInfer)", "kahn": "Kahn", "both": "both side by side"}

presenting = presenter.presenting("order")
beside_title = presenter.title("order", "Execution order", "order_present")
if not presenting:
    st.caption(
        "The engine orders the operators so each runs after the ones it reads. KuiperInfer (its graph-building "
        "article) uses a depth-first search: a node joins an output list once all its successors are done, and the "
        "reversed list is the order. Kahn's algorithm repeatedly takes a node whose in-degree is zero."
    )


@st.cache_resource(show_spinner="Tracing the order…", max_entries=16)
def _model_walkthrough(key: str, algorithm: str, _graph: Graph) -> walkthrough.Walkthrough:
    return walkthrough.model_walkthrough(_graph, algorithm)


def _names(items: Iterable[str], empty: str = "(empty)", limit: int = 40) -> str:
    """Space-separated names; long lists keep their most recent `limit` (the end matters)."""
    if not items:
        return empty
    items = list(items)
    head = f"… {len(items) - limit:,} earlier  " if len(items) > limit else ""
    return head + "  ".join(items[-limit:])


# -- what to walk through ----------------------------------------------------------------
model = common.current_model()
sources = list(walkthrough.PRESETS) + [TYPED_SOURCE]
if model is not None and model.graph is not None:
    sources.append(MODEL_SOURCE)
if "order_source" not in st.session_state and common.url_param("graph") in sources:
    st.session_state["order_source"] = common.url_param("graph")
if "order_algorithm" not in st.session_state and common.url_param("algo") in ALGORITHMS:
    st.session_state["order_algorithm"] = common.url_param("algo")
if "order_mode" not in st.session_state and common.url_param("mode") in quiz_panel.MODES:
    st.session_state["order_mode"] = common.url_param("mode")
for _alg, _kinds in order_quiz.KINDS.items():  # the quiz's question kind (a reload keeps it)
    if f"order_quiz_kind_{_alg}" not in st.session_state and common.url_param("kind") in _kinds:
        st.session_state[f"order_quiz_kind_{_alg}"] = common.url_param("kind")
controls = presenter.controls()
# Three columns, the third for a typed graph's text: the drawing stays above the fold at 720 px.
c1, c2, c3 = controls.columns([3, 3, 4])


def _source_label(s: str) -> str:
    if s == MODEL_SOURCE and model is not None and model.graph is not None:
        return f"{s} ({model.name}, {len(model.graph.operators)} operators)"
    return s


source = c1.selectbox("Graph", sources, key="order_source", format_func=_source_label)
mode = beside_title.radio(
    "Mode",
    list(quiz_panel.MODES),
    horizontal=True,
    key="order_mode",
    format_func=quiz_panel.MODES.get,
    label_visibility="collapsed",
    help="Quiz: predict the next step",
)
algorithm = c2.radio("Algorithm", list(ALGORITHMS), horizontal=True, key="order_algorithm", format_func=ALGORITHMS.get)
if mode == "quiz" and algorithm == "both":
    c3.caption("The quiz asks about one algorithm at a time: DFS here (pick Kahn for Kahn's).")
algorithms = (
    ["dfs", "kahn"] if algorithm == "both" and mode == "walk" else ["dfs" if algorithm == "both" else algorithm]
)

if source == TYPED_SOURCE:
    text = c3.text_area(
        "Your graph, one edge chain per line",
        walkthrough.edges_text(walkthrough.PRESETS["A small diamond"]),
        height=110,
        key="order_typed",
        help="e.g. `a -> b -> c` or `b -> d, e`; names: letters, digits, _ . : (Ctrl+Enter applies)",
    )
    try:
        typed = walkthrough.parse_edges(text)
    except (KuiperError, MemoryError) as e:
        common.show_error(e, title="Cannot read the graph")
        presenter.stop("order", presenting)
    walks = [walkthrough.walkthrough(typed, a) for a in algorithms]
    ident = hashlib.sha1(text.encode()).hexdigest()[:12]
elif source == MODEL_SOURCE:
    assert model is not None and model.graph is not None
    walks = [_model_walkthrough(model.key, a, model.graph) for a in algorithms]
    ident = model.key
else:
    walks = [walkthrough.walkthrough(walkthrough.PRESETS[source], a) for a in algorithms]
    ident = source

key = (source, algorithm, ident)
state: dict[str, Any] = st.session_state.get(STATE) or {}
if state.get("key") != key:
    wanted = None if state else common.url_number("step")  # a link's step, on a new session only
    state = {"key": key, "step": wanted or 0, "seq": 0}
    st.session_state[STATE] = state
total = max(len(w) for w in walks)  # steps are numbered 1..total; 0 is before the first
state["step"] = max(0, min(total, state["step"]))
state.pop("moved", None)  # (set by this rerun's callbacks, which ran before this line)


# -- callbacks ------------------------------------------------------------------------------
def _move(to: int) -> None:
    """The server moves the position (a click on a node): the browser's controls take it."""
    state["step"] = max(0, min(total, to))
    state["seq"] = state.get("seq", 0) + 1
    state["moved"] = True


def _reported(to: int) -> None:
    """The browser's position, once the user paused (steps themselves never reach the server).
    A move the server made in the same rerun wins (callbacks run in no set order; the browser
    sent this before it saw the move)."""
    if not state.get("moved"):
        state["step"] = max(0, min(total, to))


model_modules = ModuleState("order_modules", model.key) if model is not None else None


# -- the quiz's state -------------------------------------------------------------------------
def _quiz_setup() -> tuple[walkthrough.Walkthrough, list[order_quiz.Question], dict]:
    w = walks[0]
    kinds = order_quiz.KINDS[w.algorithm]
    kind = st.session_state.get(f"order_quiz_kind_{w.algorithm}", next(iter(kinds)))
    qs = order_quiz.questions(w, kind if kind in kinds else next(iter(kinds)))
    return w, qs, quiz_panel.quiz_state(QUIZ, (source, w.algorithm, ident, kind))


def _answer(name: str) -> None:
    w, qs, qstate = _quiz_setup()
    quiz_panel.answer(qstate, lambda q, p: order_quiz.judge(w, q, p), qs, name)


def _on_click(title: str) -> None:
    """A click on a node answers the quiz, or jumps to the first step about it (modules
    open and close)."""
    name = model_modules.click(title) if model_modules is not None and source == MODEL_SOURCE else title
    if name is None:
        return
    if mode == "quiz":
        _answer(name)
        return
    first = walkthrough.step_of_node(walks[0], name)
    if first is not None:
        _move(first + 1)


# -- one walkthrough at one step ---------------------------------------------------------------
def _graph(
    w: walkthrough.Walkthrough,
    step: int,
    slot: str,
    height: int,
    highlight_label: str = "current step",
    group: str | None = None,
) -> None:
    """The graph after `step` events (0: before the first); with `group`, every step's
    frame goes along and the browser moves through them (a toy graph's walk)."""
    event = w.state(step - 1) if step > 0 else None
    current = event.node if event is not None else None
    colors = walkthrough.node_colors(w, step - 1 if step > 0 else None)
    if source == MODEL_SOURCE and model is not None and model.graph is not None:
        assert model_modules is not None
        view = graph_view(model.graph, show=[current], expanded=model_modules.expanded, edge_labels=False)
        model_modules.remember(view)
        colors = roll_up(colors, view.unit_of, [c for _, c in w.legend])
        overlay = state_overlay(
            colors, w.legend, highlight=view.node_for(current), highlight_label=highlight_label, note=""
        )
        font = presenter.GRAPH_FONT_PX if presenting else MIN_FONT_PX
        show_graph(view.dot, f"order_{slot}", overlay, height=height, follow=True, on_click=_on_click, min_font_px=font)
    else:
        # The toy DOT carries the state colours; the overlay repeats them so a repaint shows them too.
        overlay = state_overlay(colors, w.legend, highlight=current, highlight_label=highlight_label, note="")
        if group is None:
            show_graph(
                walkthrough.toy_dot(w, step - 1 if step > 0 else None),
                f"order_{slot}",
                overlay,
                height=height,
                on_click=_on_click,
            )
        else:  # one drawing, every step's frame painted on it in the browser
            frames = walk_frames.graph_frames(w, highlight_label)
            show_graph(
                walk_frames.base_dot(w),
                f"order_{slot}",
                overlay,
                height=height,
                on_click=_on_click,
                frames=frames,
                group=group,
                step=min(step, len(w)),
            )


def _state_panel(w: walkthrough.Walkthrough, step: int, compact: bool) -> None:
    if step == 0:
        st.info("Press **Step** (or →) to start, or **Play** to watch it run.")
        return
    shown = min(step, len(w))
    head = f"**Step {shown} of {len(w)}:** {w.message(shown - 1)}"
    (st.error if w.state(shown - 1).kind == "cycle" else st.info)(head)
    _state_lists(w, shown - 1, compact)


def _state_lists(w: walkthrough.Walkthrough, i: int, compact: bool) -> None:
    """The algorithm's lists after event i (-1: before the first)."""
    event = state_at(w.trace, i)
    if w.algorithm == "dfs":
        st.markdown("**Call stack** (bottom → top)")
        st.code(_names(event.stack), language=None, wrap_lines=True)
        if not compact:
            st.markdown("**Visited set**")
            st.code(_names(event.visited), language=None, wrap_lines=True)
        if event.kind == "reverse":
            st.markdown("**Output list** (in finishing order)")
            st.code(_names(state_at(w.trace, i - 1).output), language=None, wrap_lines=True)
            st.markdown("**Reversed: the execution order**")
        else:
            st.markdown("**Output list** (a node is appended when all its successors are done)")
        st.code(_names(event.output), language=None, wrap_lines=True)
    else:
        st.markdown("**Queue** (front first)")
        st.code(_names(event.queue), language=None, wrap_lines=True)
        st.markdown("**Order so far**")
        st.code(_names(event.output), language=None, wrap_lines=True)
        if len(w.nodes) <= 200 and not compact and i >= 0:
            st.markdown("**In-degree table**")
            st.dataframe(
                pd.DataFrame(walkthrough.indegree_rows(w, i)),
                hide_index=True,
                width="stretch",
                height=min(300, 38 + 35 * len(w.nodes)),
            )


def _lesson(w: walkthrough.Walkthrough) -> None:
    if w.error is not None:
        st.error(
            f"**The lesson:** {w.error}. Each node on a cycle waits for another node on it, so no node of the "
            "cycle can ever run first: the engine refuses such a graph with a CycleError."
        )
    else:
        st.success(f"Done: {len(w.order or [])} nodes in execution order.")
        st.dataframe(
            pd.DataFrame(walkthrough.order_rows(w)),
            hide_index=True,
            width="stretch",
            height=min(320, 38 + 35 * len(w.nodes)),
        )


def _walkthrough() -> None:
    step = state["step"]
    common.set_url(graph=source if source != TYPED_SOURCE else None, algo=algorithm, step=step or None)
    common.write_url()
    # A toy graph's walk steps in the browser from frames sent once; the loaded model's (its
    # frames would be megabytes) reports each position at once and the server draws it.
    toy = source != MODEL_SOURCE
    group = group_of(key) if toy else None
    step_controls(
        "order_steps",
        group_of(key),
        total,
        step,
        state.get("seq", 0),
        _reported,
        prefix="order",
        label_suffix=" (the numbers count each algorithm’s own events)" if len(walks) > 1 else "",
        report_ms=None if toy else 0,
    )
    both = len(walks) > 1 and all(w.order for w in walks) and walks[0].order != walks[1].order
    end_note = (
        "Both orders are valid: every operator comes after the ones it reads. They differ because DFS "
        "finishes a branch before starting the next, while Kahn takes nodes in the order they become ready."
        if both
        else ""
    )
    if len(walks) == 1:
        left, right = st.columns([3, 2])
        with left:
            _graph(walks[0], step, "one", 520, group=group)
        with right:
            if toy:
                step_panel("order_panel_one", group_of(key), walk_frames.panel_frames(walks[0], total), step)
            else:
                _state_panel(walks[0], step, compact=False)
        if not toy and step >= total:
            _lesson(walks[0])
        return
    cols = st.columns(2)
    for col, w in zip(cols, walks):
        with col:
            st.markdown(
                f"**{'Reverse-topological DFS (KuiperInfer)' if w.algorithm == 'dfs' else 'Kahn’s algorithm'}**"
            )
            _graph(w, min(step, len(w)), w.algorithm, 400, group=group)
            if toy:
                note = end_note if w.algorithm == "kahn" else ""
                step_panel(
                    f"order_panel_{w.algorithm}", group_of(key), walk_frames.panel_frames(w, total, True, note), step
                )
            else:
                _state_panel(w, step, compact=True)
    if not toy and step >= total:
        cols = st.columns(2)
        for col, w in zip(cols, walks):
            with col:
                _lesson(w)
        if end_note:
            st.info(end_note)


# -- the quiz ------------------------------------------------------------------------------------
def _steps_text(w: walkthrough.Walkthrough, first: int, last: int) -> str:
    """Events first..last (inclusive) as a numbered list of their sentences (at most 12)."""
    idx = list(range(max(0, first), last + 1))
    lines = [f"{i + 1}. {w.message(i)}" for i in idx[-12:]]
    return ("…\n" if len(idx) > 12 else "") + "\n".join(lines)


def _pick_widget(w: walkthrough.Walkthrough, index: int) -> None:
    """Besides clicking the graph: the nodes as pills (a small graph) or a list (a model)."""

    def _picked(key: str) -> None:
        value = st.session_state.get(key)
        if value is not None:
            _answer(w.nodes[value])

    key = f"order_quiz_pick_{index}"
    label = "Or pick it here" if len(w.nodes) <= quiz_panel.MAX_PILLS else "Or pick it from the list"
    quiz_panel.choice(label, list(range(len(w.nodes))), w.nodes, key, _picked)


def _quiz() -> None:
    w = walks[0]
    kinds = order_quiz.KINDS[w.algorithm]
    if len(kinds) > 1:
        st.radio(
            "Ask for",
            list(kinds),
            format_func=order_quiz.KIND_LABELS.get,
            horizontal=True,
            key=f"order_quiz_kind_{w.algorithm}",
        )
    w, qs, qstate = _quiz_setup()
    common.set_url(
        graph=source if source != TYPED_SOURCE else None, algo=w.algorithm, mode="quiz", kind=qstate["about"][3]
    )
    if not qs:
        st.info("This graph has no such step to predict (a cycle stops the algorithm first).")
        return
    index, q, verdict = quiz_panel.current(qstate, qs)
    shown = q.step if verdict is not None else q.shown  # answered: show the step that answers it
    left, right = st.columns([3, 2])
    with left:
        _graph(w, shown + 1, "quiz", 520, highlight_label="the answer" if verdict is not None else "last step")
    with right:
        st.markdown(f"#### {q.prompt}")
        if verdict is None:
            st.caption("Click the node in the graph.")
            _pick_widget(w, index)
            before = qs[index - 1].step if index > 0 else -1
            if q.shown > before:
                st.markdown("**Since the last question**")
                st.markdown(_steps_text(w, before + 1, q.shown))
        else:
            quiz_panel.verdict_box(verdict)
            st.markdown("**What the engine did**")
            st.markdown(_steps_text(w, q.shown + 1, q.step))
        quiz_panel.controls(qstate, qs, "order_quiz")
        if quiz_panel.finished(qstate, qs):
            st.success(f"The end of the {order_quiz.KIND_LABELS[q.kind]} questions. {qstate['score'].text()}.")
        _state_lists(w, shown, compact=True)


# -- the presenter view ------------------------------------------------------------------------------
def _judge_setup() -> quiz_panel.QuizSetup:
    w, qs, qstate = _quiz_setup()
    return (lambda q, p: order_quiz.judge(w, q, p)), qs, qstate


def _present() -> None:
    title = source if source != MODEL_SOURCE or model is None else model.name
    if mode == "quiz":
        presenter.begin("order", "order_present_keys", *quiz_panel.presenter_keys(_judge_setup))
        w, qs, qstate = _quiz_setup()
        common.set_url(graph=source if source != TYPED_SOURCE else None, algo=w.algorithm, mode="quiz")
        if not qs:
            presenter.message("This graph has no such step to predict.")
            return
        index, q, verdict = quiz_panel.current(qstate, qs)
        shown = q.step if verdict is not None else q.shown
        presenter.head(
            "Execution order: quiz",
            title,
            ALGORITHMS[w.algorithm],
            f"question {index + 1} of {len(qs)}",
            keys="→ reveals the answer, then asks the next",
        )
        left, right = st.columns([3, 2])
        with left:
            _graph(w, shown + 1, "present", 540, highlight_label="the answer" if verdict else "last step")
        with right:
            presenter.message(f"**{q.prompt}**")
            if verdict is not None:  # the class's answer was spoken: explain the engine's
                reveal = order_quiz.judge(w, q, q.answer)
                presenter.message(f"**{q.answer}.** {reveal.why} {reveal.tie_rule or ''}", small=True)
            _present_state(w, shown)
        return
    presenter.begin("order", "order_present_keys", lambda: _move(state["step"] + 1), lambda: _move(state["step"] - 1))
    step = state["step"]
    common.set_url(graph=source if source != TYPED_SOURCE else None, algo=algorithm, step=step or None)
    presenter.head("Execution order", title, ALGORITHMS[algorithm], f"step {step} of {total}")
    if len(walks) == 1:
        left, right = st.columns([3, 2])
        with left:
            _graph(walks[0], step, "present", 540)
        with right:
            _present_step(walks[0], step, small=False)
    else:  # the sentences first: the graphs below may grow to the bottom of the window
        for col, w in zip(st.columns(2), walks):
            with col:
                _present_step(w, step, small=True)
        for col, w in zip(st.columns(2), walks):
            with col:
                _graph(w, min(step, len(w)), f"present_{w.algorithm}", 440)


def _present_step(w: walkthrough.Walkthrough, step: int, small: bool) -> None:
    if step == 0:
        presenter.message("Press → to start.", small=small)
        return
    shown = min(step, len(w))
    presenter.message(w.message(shown - 1), small=small)
    _present_state(w, shown - 1)


def _present_state(w: walkthrough.Walkthrough, i: int) -> None:
    state_ = state_at(w.trace, i)
    if w.algorithm == "dfs":
        presenter.state_line("Call stack:", _names(state_.stack, limit=8))
        presenter.state_line("Output list:", _names(state_.output, limit=8))
    else:
        presenter.state_line("Queue:", _names(state_.queue, limit=8))
        presenter.state_line("Order so far:", _names(state_.output, limit=8))


if presenting:
    _present()
elif mode == "quiz":
    _quiz()
else:
    # A reported position re-runs only this fragment.
    st.fragment(_walkthrough)()
