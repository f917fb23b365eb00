"""Expressions: a pnnx.Expression as tokens, a tree, reverse Polish, and a stack machine.

Laid out for a projector (1280×720): the step controls, the tree and the stack with its
values share the first screen; tokens, reverse Polish, the trace and the result are tabs
below. The quiz asks for the next node the stack machine evaluates (a click on the tree or
a token), the stack value a call takes first, or the call a ')' closes; the presenter view
shows the tree and the stack alone in large type, keyboard only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core import expression as ex
from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import compare
from kuiper_core.explore import expression_view
from kuiper_core.explore.expression_quiz import KIND_LABELS, ExpressionQuiz
from kuiper_core.explore import tensors
from kuiper_core.explore import walk_frames
from kuiper_core.explore.overlay import Overlay
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.graph import shape_label
from pages import common, presenter
from pages import quiz_panel
from pages.graph_viewer import MIN_FONT_PX, show_graph
from pages.step_controls import group_of, step_controls, step_panel
from pages.tensor_panel import show_tensor

STEP = "expr_step"  # the stack-evaluation step on view (1-based)
TAB = "expr_tab"  # the detail tab open below the first screen (only it is drawn)
QUIZ = "kx_expr_quiz"  # quiz_panel state
DEFAULT_TEXT = "mul(add(@0,1.5),neg(@1))"

presenting = presenter.presenting("expressions")
beside_title = presenter.title("expressions", "Expressions", "expr_present")
if not presenting:
    st.caption(
        "PNNX folds elementwise arithmetic into `pnnx.Expression` operators: `@N` is the operator's N-th input "
        "(numbered from 0), calls nest. The engine parses the text into a tree, lists it in reverse Polish order "
        "(children before their call) and evaluates that with a stack. Keys: → / PageDown step, ← / PageUp back."
    )

model = common.current_model()
ops = expression_view.expression_operators(model.graph) if model is not None and model.graph is not None else []
by_name = {o.name: o for o in ops}
modes = (["From the model"] if ops else []) + ["Type one"]
if "expr_op" not in st.session_state and common.url_param("op") in by_name:
    st.session_state["expr_op"] = common.url_param("op")
if "expr_view" not in st.session_state and common.url_param("mode") in quiz_panel.MODES:
    st.session_state["expr_view"] = common.url_param("mode")
if "expr_quiz_kind" not in st.session_state and common.url_param("kind") in KIND_LABELS:  # (a reload keeps it)
    st.session_state["expr_quiz_kind"] = common.url_param("kind")
controls = presenter.controls()
c_mode, c_what = controls.columns([1, 4], vertical_alignment="center")
view_mode = beside_title.radio(
    "View",
    list(quiz_panel.MODES),
    horizontal=True,
    key="expr_view",
    format_func=quiz_panel.MODES.get,
    label_visibility="collapsed",
    help="Quiz: predict the next step",
)
mode = c_mode.radio("Expression", modes, key="expr_mode", label_visibility="collapsed")
op = None
if mode == "From the model":
    assert model is not None
    op = by_name[
        c_what.selectbox(
            f"pnnx.Expression operators of {model.name} ({len(ops)})",
            list(by_name),
            format_func=lambda n: f"{n}: {expression_view.expression_text(by_name[n])[:110]}",
            key="expr_op",
            label_visibility="collapsed",
        )
    ]
    text = expression_view.expression_text(op)
else:
    text = c_what.text_input(
        "Type an expression",
        DEFAULT_TEXT,
        key="expr_text",
        label_visibility="collapsed",
        placeholder="e.g. mul(add(@0,1.5),neg(@1))",
    )
    if not ops:
        c_what.caption("The current model has no pnnx.Expression: type one (@0, @1, … are small example tensors).")

try:
    # parsed first: it checks the length before anything is tokenized (a 9 MB paste: 71 s, 3 GB)
    ast = ex.parse(text, common.APP_LIMITS)  # `add(@0,@3000000)` would ask for 3 million example tensors
    expression_view.check_walkable(ast)
    token_rows = expression_view.token_rows(text)
except (KuiperError, MemoryError) as e:
    common.show_error(e, title="Cannot parse the expression")
    presenter.stop("expressions", presenting)

n_inputs = len(op.inputs) if op is not None else expression_view.max_operand_index(ast) + 1
labels = expression_view.operand_labels(op, n_inputs)


# -- the values to evaluate on ----------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=32)
def _operator_values(
    model_key: str,
    inputs_digest: str,
    op_name: str,
    operands: tuple[str, ...],
    output: str,
    _model: common.LoadedModel,
    _inputs: list[np.ndarray],
) -> tuple[list[np.ndarray], np.ndarray | None] | str:
    """An operator's input tensors and its layer's output for one model and input, run once per
    server (keyed by the model's hash and the input's digest): every session opening the same
    expression, a class following a teacher's link, shares them. An engine error comes back as
    its message."""
    assert _model.runtime is not None  # (called for a runnable model only)
    stepper = ForwardStepper(_model.runtime, _inputs)
    stepper.run_to(op_name)
    if stepper.error is not None:
        return stepper.error

    def kept(a: Any) -> Any:  # a copy (the runtime may reuse its buffers), read-only: shared by sessions
        if not isinstance(a, np.ndarray):
            return a
        a = a.copy()
        a.flags.writeable = False
        return a

    return [kept(stepper.values[n]) for n in operands], kept(stepper.values.get(output))


def _model_values() -> tuple[list[np.ndarray], np.ndarray | None, str]:
    """The operator's real input tensors (running the model up to it) and its layer's output."""
    assert model is not None and op is not None
    if not model.ok:
        rng = np.random.default_rng(0)
        shapes = [tuple(d if isinstance(d, int) else 1 for d in (o.shape or (2, 3))) for o in op.inputs]
        return (
            [rng.standard_normal(s).astype(np.float32) for s in shapes],
            None,
            ("seeded random tensors of the declared shapes (the model cannot run: " + (model.error or "") + ")"),
        )
    resolved = common.resolve_input(model)
    operands = tuple(o.name for o in op.inputs)  # by position: an operand may repeat
    with st.spinner(f"Running the model up to {op.name}…"):
        got = _operator_values(
            model.key,
            tensors.arrays_digest(resolved.arrays),
            op.name,
            operands,
            op.outputs[0].name,
            model,
            resolved.arrays,
        )
    if isinstance(got, str):
        raise KuiperError(got)
    values, layer_out = got
    return list(values), layer_out, f"the model's tensors for {resolved.description}"


try:
    if op is not None:
        values, layer_out, where = _model_values()
    else:
        values, layer_out, where = expression_view.example_inputs(n_inputs), None, "small example tensors"
    with limits.use(common.APP_LIMITS):
        trace = ex.evaluate_traced(ast, values)
except (KuiperError, MemoryError) as e:
    common.show_error(e, title="Cannot evaluate the expression")
    presenter.stop("expressions", presenting)

n_steps = len(trace.steps)
if st.session_state.get("expr_for") != (text, where):
    wanted = common.url_number("step") if "expr_for" not in st.session_state else None  # first visit: the link's
    st.session_state[STEP] = wanted if wanted is not None else n_steps
    st.session_state["expr_for"] = (text, where)  # a new expression opens on its finished evaluation
st.session_state[STEP] = max(1, min(st.session_state.get(STEP, n_steps), n_steps))
common.set_url(op=op.name if op is not None else None, step=st.session_state[STEP] if view_mode == "walk" else None)


def _move(to: int | None = None, by: int = 0) -> None:
    """Callbacks run before the script, so everything below shows the new step."""
    st.session_state[STEP] = max(1, min(n_steps, to if to is not None else st.session_state[STEP] + by))


def _reported(to: int) -> None:
    """The browser's position, once the user paused (the steps themselves never reach the
    server); the tabs below are drawn for it."""
    st.session_state[STEP] = max(1, min(n_steps, to))


step = st.session_state[STEP] - 1
current = trace.steps[step]


def _walk() -> None:
    # Steps in the browser: the tree's overlay, the sentence and the stack of every step go
    # once; Step / Back / keys move through them there. The tabs below follow the position
    # the browser reports when the user pauses.
    group = group_of("expr", text, where)
    step_controls("expr_steps", group, n_steps, step + 1, 0, _reported, prefix="expr", first=1)
    view = expression_view.ast_dot(ast, labels)
    graph_frames, panel_frames = walk_frames.expression_frames(view, trace, labels, where)
    tree_col, stack_col = st.columns([3, 2])
    with tree_col:
        colors, node = view.overlay_colors(trace, step)
        overlay = Overlay(
            highlight=node,
            colors=colors,
            neutral=True,
            legend=expression_view.STACK_LEGEND,
            highlight_label="this step",
            note="grey: not evaluated yet · #N: place in reverse Polish order",
        )
        show_graph(view.dot, "ast", overlay, height=340, follow=True, frames=graph_frames, group=group, step=step + 1)
        if view.shown < view.total:
            st.caption(f"Showing the top {view.shown} of {view.total} nodes.")
    with stack_col:
        step_panel("expr_panel", group, panel_frames, step + 1)

    # -- details below the first screen -----------------------------------------------------------------
    # Only the open tab is drawn (each step redraws this part; a tab's dataframes, tensor
    # pictures and Vega charts were most of the browser's work per step): a click on another
    # tab runs the page once to draw it.
    tabs = st.tabs(
        ["Result", "Stack values", "Trace", "Reverse Polish", "Tokens", "Inputs"], key=TAB, on_change="rerun"
    )
    if tabs[0].open:
        with tabs[0]:
            if step < n_steps - 1:
                st.caption(f"The result appears after the last step ({n_steps}).")
            else:
                result = trace.result
                if isinstance(result, np.ndarray):
                    if layer_out is not None and isinstance(layer_out, np.ndarray):
                        same = compare.compare(result, layer_out)
                        (st.success if same.status == compare.OK else st.error)(
                            "The stack machine and the engine's pnnx.Expression layer agree: " + same.text()
                            if same.status == compare.OK
                            else "The stack machine and the pnnx.Expression layer differ: " + same.text()
                        )
                    resolved_sample = model is not None and model.ok and common.resolve_input(model).is_sample
                    ref = (
                        model.operands.get(op.outputs[0].name)
                        if op is not None and model is not None and resolved_sample
                        else None
                    )
                    show_tensor(
                        result,
                        "expr_result",
                        ref=ref,
                        ref_source="PyTorch's tensor for this operand",
                        view_key="expr_view_result",
                    )
                else:
                    st.markdown(f"A Python `{type(result).__name__}`: `{result!r}`")
    if tabs[1].open:
        with tabs[1]:
            arrays = [
                (f"stack[{i}] {e.label}", e.value)
                for i, e in enumerate(reversed(current.stack))
                if isinstance(e.value, np.ndarray)
            ]
            if not arrays:
                st.caption("No tensor on the stack at this step.")
            else:
                pick = st.selectbox(
                    "Stack entry (top first)",
                    range(len(arrays)),
                    format_func=lambda i: arrays[i][0],
                    key="expr_stack_pick",
                )
                show_tensor(arrays[pick][1], f"expr_stack_{step}_{pick}", view_key="expr_view_stack")
    if tabs[2].open:
        with tabs[2]:
            rows = expression_view.trace_rows(trace, labels)
            st.dataframe(
                pd.DataFrame(rows[: step + 1]), hide_index=True, width="stretch", height=min(360, 38 + 35 * (step + 1))
            )
    if tabs[3].open:
        with tabs[3]:
            st.code(ex.rpn_text(ast), language=None, wrap_lines=True)
            rpn = expression_view.rpn_rows(ast, labels)
            st.dataframe(pd.DataFrame(rpn), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(rpn)))
    if tabs[4].open:
        with tabs[4]:
            st.markdown("**Canonical text**")
            st.code(ex.to_text(ast), language=None, wrap_lines=True)
            st.dataframe(
                pd.DataFrame(token_rows), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(token_rows))
            )
    if tabs[5].open:
        with tabs[5]:
            if op is not None:
                st.markdown("**Operands:** " + ", ".join(f"`@{i}` = `{lab}`" for i, lab in enumerate(labels)))
            for i, x in enumerate(values):
                if isinstance(x, np.ndarray):
                    st.markdown(f"`@{i}` ({x.dtype}, shape {shape_label(x.shape)})")
                    if x.size <= 64:
                        st.dataframe(
                            pd.DataFrame(x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)), hide_index=True
                        )


# -- the quiz ----------------------------------------------------------------------------------------
def _quiz_setup() -> tuple[ExpressionQuiz, list, dict]:
    z = ExpressionQuiz(text, ast, trace)
    kind = st.session_state.get("expr_quiz_kind", "next")
    return z, z.questions(kind), quiz_panel.quiz_state(QUIZ, (text, where, kind))


def _answer(pick: str) -> None:
    z, qs, qstate = _quiz_setup()
    quiz_panel.answer(qstate, z.judge, qs, pick)


def _pick_token(key: str) -> None:
    """A token pill: a node for 'next' questions (punctuation is no node), a token for 'close'."""
    value = st.session_state.get(key)
    if value is None:
        return
    z, qs, qstate = _quiz_setup()
    if qstate["about"][-1] == "next":
        node = z.node_of_token(int(value))
        if node is None:
            st.session_state["expr_quiz_note"] = (
                f"`{z.tokens[int(value)].text}` is punctuation, not a node of the tree."
            )
            return
        value = z.position[id(node)]
    _answer(str(value))


def _pick_value(key: str) -> None:
    value = st.session_state.get(key)
    if value is not None:
        _answer(str(value))


def _tree(
    z: ExpressionQuiz,
    shown: int | None,
    key: str,
    height: int,
    label: str,
    on_click: Callable[[str], None] | None = None,
    numbered: bool = False,
    mark: ex.Node | None = None,
    font_px: int | None = None,
) -> None:
    """The tree after stack step `shown` (-1: before the first; None: no state, `mark`ed
    node only); a quiz hides the RPN numbers; `font_px`: the least text size (a presenter's)."""
    view = expression_view.ast_dot(ast, labels, numbered=numbered)
    colors, node = view.overlay_colors(trace, shown) if shown is not None and shown >= 0 else ({}, None)
    if mark is not None:
        node = view.ids.get(id(mark))
    overlay = Overlay(
        highlight=node,
        colors=colors,
        neutral=True,
        legend=expression_view.STACK_LEGEND if shown is not None else [],
        highlight_label=label if node else None,
    )
    by_title = {title: z.position[i] for i, title in view.ids.items() if i in z.position}

    def clicked(title: str) -> None:
        if title in by_title and on_click is not None:
            on_click(str(by_title[title]))

    show_graph(
        view.dot,
        key,
        overlay,
        height=height,
        follow=True,
        on_click=clicked if on_click else None,
        min_font_px=font_px or MIN_FONT_PX,
    )


def _caret(z: ExpressionQuiz, token: int) -> str:
    t = z.tokens[token]
    return f"{text}\n{' ' * t.start}^ column {t.start + 1}"


def _quiz() -> None:
    st.radio(
        "Question",
        list(KIND_LABELS),
        format_func=KIND_LABELS.get,
        horizontal=True,
        key="expr_quiz_kind",
        label_visibility="collapsed",
    )
    z, qs, qstate = _quiz_setup()
    common.set_url(op=op.name if op is not None else None, mode="quiz", kind=qstate["about"][2])
    if not qs:
        st.info("This expression has no such step to predict (no call takes two or more arguments).")
        return
    index, q, verdict = quiz_panel.current(qstate, qs)
    kind = q.kind
    st.markdown(f"#### {q.prompt}")
    key = f"expr_quiz_pick_{kind}_{index}"
    if verdict is None:  # the choices span the page: a model's expression has many tokens
        if kind == "first":
            stack = trace.steps[q.shown].stack
            values = [("top: " if i == len(stack) - 1 else "") + e.describe() for i, e in enumerate(stack)]
            quiz_panel.choice(
                "Click the value on the stack (top first)", list(range(len(stack)))[::-1], values, key, _pick_value
            )
        else:
            hint = "Click the node in the tree, or its token:" if kind == "next" else "Click the call's name:"
            tokens = [
                t.text if len(z.tokens) <= quiz_panel.MAX_PILLS else f"column {t.start + 1}: {t.text}" for t in z.tokens
            ]
            quiz_panel.choice(hint, list(range(len(z.tokens))), tokens, key, _pick_token)
        note = st.session_state.pop("expr_quiz_note", None)
        if note:
            st.caption(note)
    left, right = st.columns([3, 2])
    with left:
        if kind == "close":
            st.code(_caret(z, q.step), language=None)
            if verdict is not None:  # the call it closes, in the tree
                _tree(z, None, "ast_quiz", 300, "the answer", mark=z.node_of_token(int(q.answer)))
        else:
            shown = q.step if verdict is not None else q.shown
            _tree(z, shown, "ast_quiz", 340, "the answer" if verdict else "last step", on_click=_answer)
    with right:
        if verdict is not None:
            quiz_panel.verdict_box(verdict)
            if kind != "close":
                st.markdown(f"**What the machine did:** step {q.step + 1}: {trace.steps[q.step].describe()}")
        quiz_panel.controls(qstate, qs, "expr_quiz")
        if quiz_panel.finished(qstate, qs):
            st.success(f"The end of the {KIND_LABELS[kind]} questions. {qstate['score'].text()}.")
        if kind != "close":
            st.markdown("**The stack** (top first)")
            at = q.step if verdict is not None else q.shown
            st.code(expression_view.stack_text(trace, at, labels, width=40) if at >= 0 else "(empty)", language=None)


# -- the presenter view ------------------------------------------------------------------------------
def _judge_setup() -> quiz_panel.QuizSetup:
    z, qs, qstate = _quiz_setup()
    return z.judge, qs, qstate


def _present_stack(at: int) -> None:
    rows = expression_view.stack_rows(trace, at, labels) if at >= 0 else []
    if not rows:
        presenter.state_line("Stack:", "(empty)")
    for r in rows[:7]:
        presenter.state_line("top ▸" if r[""] else "      ", f"{r['value of'][:36]} = {r['values'][:40]}")
    if len(rows) > 7:
        presenter.state_line("", f"… {len(rows) - 7} more below")


def _present() -> None:
    z = ExpressionQuiz(text, ast, trace)
    if view_mode == "quiz":
        presenter.begin("expressions", "expr_present_keys", *quiz_panel.presenter_keys(_judge_setup))
        z, qs, qstate = _quiz_setup()
        common.set_url(op=op.name if op is not None else None, mode="quiz", kind=qstate["about"][2])
        if not qs:
            presenter.message("This expression has no such step to predict.")
            return
        index, q, verdict = quiz_panel.current(qstate, qs)
        presenter.head(
            "Expressions: quiz",
            text[:80],
            f"question {index + 1} of {len(qs)}",
            keys="→ reveals the answer, then asks the next · drag: pan",
        )
        left, right = st.columns([3, 2])
        with left:
            if q.kind == "close":
                st.code(_caret(z, q.step), language=None)
            else:
                shown = q.step if verdict else q.shown
                label = "the answer" if verdict else "last step"
                _tree(z, shown, "ast_present", 540, label, font_px=presenter.GRAPH_FONT_PX)
        with right:
            presenter.message(f"**{q.prompt}**")
            if verdict is not None:  # the class's answer was spoken: explain the engine's
                presenter.message(z.judge(q, q.answer).why, small=True)
            if q.kind != "close":
                _present_stack(q.step if verdict is not None else q.shown)
        return
    presenter.begin("expressions", "expr_present_keys", lambda: _move(by=1), lambda: _move(by=-1))
    # The tree's text as large as Execution order's presenter graph (it stayed 13 px): a tree
    # wider than the box follows the step's node, and dragging pans to the rest.
    presenter.head("Expressions", text[:80], f"step {step + 1} of {n_steps}", keys="drag: pan")
    left, right = st.columns([3, 2])
    with left:
        _tree(z, step, "ast_present", 540, "this step", numbered=True, font_px=presenter.GRAPH_FONT_PX)
    with right:
        presenter.message(current.describe())
        _present_stack(step)


if presenting:
    _present()
elif view_mode == "quiz":
    _quiz()
else:
    _walk()
