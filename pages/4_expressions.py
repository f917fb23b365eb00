"""Expressions: a pnnx.Expression as tokens, a tree, reverse Polish, and a stack machine.

Laid out for a projector (1280×720): the step controls, the tree and the stack with its
values share the first screen; tokens, reverse Polish, the trace and the result are tabs
below.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core import expression as ex
from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import compare as C
from kuiper_core.explore import expression_view as V
from kuiper_core.explore import tensors as T
from kuiper_core.explore.overlay import Overlay
from kuiper_core.explore.stepper import ForwardStepper
from pages import common
from pages.graph_viewer import show_graph
from pages.keys import step_keys
from pages.tensor_panel import show_tensor

VALUES = "kx_expr_stepper"  # {"key": (model key, input digest), "stepper": ForwardStepper}
STEP = "expr_step"  # the stack-evaluation step on view (1-based)
DEFAULT_TEXT = "mul(add(@0,1.5),neg(@1))"

st.title("Expressions")
st.caption(
    "PNNX folds elementwise arithmetic into `pnnx.Expression` operators: `@N` is the operator's N-th input "
    "(numbered from 0), calls nest. The engine parses the text into a tree, lists it in reverse Polish order "
    "(children before their call) and evaluates that with a stack. Keys: → / PageDown step, ← / PageUp back."
)

model = common.current_model()
ops = V.expression_operators(model.graph) if model is not None and model.graph is not None else []
by_name = {o.name: o for o in ops}
modes = (["From the model"] if ops else []) + ["Type one"]
if "expr_op" not in st.session_state and common.url_param("op") in by_name:
    st.session_state["expr_op"] = common.url_param("op")
c_mode, c_what = st.columns([1, 4])
mode = c_mode.radio("Expression", modes, key="expr_mode", label_visibility="collapsed")
op = None
if mode == "From the model":
    assert model is not None
    op = by_name[
        c_what.selectbox(
            f"pnnx.Expression operators of {model.name} ({len(ops)})",
            list(by_name),
            format_func=lambda n: f"{n}: {V.expression_text(by_name[n])[:110]}",
            key="expr_op",
            label_visibility="collapsed",
        )
    ]
    text = V.expression_text(op)
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
    token_rows = V.token_rows(text)
    ast = ex.parse(text, common.APP_LIMITS)  # `add(@0,@3000000)` would ask for 3 million example tensors
except (KuiperError, MemoryError) as e:
    common.show_error(e, title="Cannot parse the expression")
    st.stop()

n_inputs = len(op.inputs) if op is not None else V.max_operand_index(ast) + 1
labels = V.operand_labels(op, n_inputs)


# -- the values to evaluate on ----------------------------------------------------------------------
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
    key = (model.key, T.arrays_digest(resolved.arrays))
    state = st.session_state.get(VALUES)
    if state is None or state["key"] != key:
        state = {"key": key, "stepper": ForwardStepper(model.runtime, resolved.arrays)}
        st.session_state[VALUES] = state
    stepper: ForwardStepper = state["stepper"]
    with st.spinner(f"Running the model up to {op.name}…"):
        stepper.run_to(op.name)
    if stepper.error is not None:
        raise KuiperError(stepper.error)
    values = [stepper.values[o.name] for o in op.inputs]  # by position: an operand may repeat
    return values, stepper.values.get(op.outputs[0].name), f"the model's tensors for {resolved.description}"


try:
    if op is not None:
        values, layer_out, where = _model_values()
    else:
        values, layer_out, where = V.example_inputs(n_inputs), None, "small example tensors"
    with limits.use(common.APP_LIMITS):
        trace = ex.evaluate_traced(ast, values)
except (KuiperError, MemoryError) as e:
    common.show_error(e, title="Cannot evaluate the expression")
    st.stop()

n_steps = len(trace.steps)
if st.session_state.get("expr_for") != (text, where):
    wanted = common.url_param("step")
    first_visit = "expr_for" not in st.session_state
    st.session_state[STEP] = int(wanted) if first_visit and wanted and wanted.isdigit() else n_steps
    st.session_state["expr_for"] = (text, where)  # a new expression opens on its finished evaluation
st.session_state[STEP] = max(1, min(st.session_state[STEP], n_steps))
common.set_url(op=op.name if op is not None else None, step=st.session_state[STEP])


def _move(to: int | None = None, by: int = 0) -> None:
    """Callbacks run before the script, so everything below shows the new step."""
    st.session_state[STEP] = max(1, min(n_steps, to if to is not None else st.session_state[STEP] + by))


step = st.session_state[STEP] - 1
b = st.columns([1, 1, 1, 1, 5])
b[0].button("Reset", key="expr_reset", width="stretch", on_click=_move, kwargs={"to": 1}, disabled=step == 0)
b[1].button("Back", key="expr_back", width="stretch", on_click=_move, kwargs={"by": -1}, disabled=step == 0)
b[2].button(
    "Step",
    key="expr_step_btn",
    width="stretch",
    on_click=_move,
    kwargs={"by": 1},
    disabled=step >= n_steps - 1,
    type="primary",
)
b[3].button(
    "End", key="expr_end", width="stretch", on_click=_move, kwargs={"to": n_steps}, disabled=step >= n_steps - 1
)
if n_steps > 1:
    b[4].slider("Step", 1, n_steps, key=STEP, label_visibility="collapsed")
step_keys("expr_keys", lambda: _move(by=1), lambda: _move(by=-1))
current = trace.steps[step]

tree_col, stack_col = st.columns([3, 2])
with tree_col:
    view = V.ast_dot(ast, labels)
    colors, node = view.overlay_colors(trace, step)
    overlay = Overlay(
        highlight=node,
        colors=colors,
        neutral=True,
        legend=V.STACK_LEGEND,
        highlight_label="this step",
        note="grey: not evaluated yet · #N: place in reverse Polish order",
    )
    show_graph(view.dot, "ast", overlay, height=340, follow=True)
    if view.shown < view.total:
        st.caption(f"Showing the top {view.shown} of {view.total} nodes.")
with stack_col:
    st.info(f"**Step {step + 1} of {n_steps}:** {current.describe()}")
    st.markdown("**The stack** (top first, with its values)")
    st.code(
        V.stack_text(trace, step, labels, width=40),
        language=None,
        wrap_lines=True,
        height=min(240, 40 + 44 * len(current.stack)),
    )
    st.caption(f"Evaluated on {where}.")

# -- details below the first screen -----------------------------------------------------------------
tabs = st.tabs(["Result", "Stack values", "Trace", "Reverse Polish", "Tokens", "Inputs"])
with tabs[0]:
    if step < n_steps - 1:
        st.caption(f"The result appears after the last step ({n_steps}).")
    else:
        result = trace.result
        if isinstance(result, np.ndarray):
            if layer_out is not None and isinstance(layer_out, np.ndarray):
                same = C.compare(result, layer_out)
                (st.success if same.status == C.OK else st.error)(
                    "The stack machine and the engine's pnnx.Expression layer agree: " + same.text()
                    if same.status == C.OK
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
            "Stack entry (top first)", range(len(arrays)), format_func=lambda i: arrays[i][0], key="expr_stack_pick"
        )
        show_tensor(arrays[pick][1], f"expr_stack_{step}_{pick}", view_key="expr_view_stack")
with tabs[2]:
    rows = V.trace_rows(trace, labels)
    st.dataframe(
        pd.DataFrame(rows[: step + 1]), hide_index=True, width="stretch", height=min(360, 38 + 35 * (step + 1))
    )
with tabs[3]:
    st.code(ex.rpn_text(ast), language=None, wrap_lines=True)
    rpn = V.rpn_rows(ast, labels)
    st.dataframe(pd.DataFrame(rpn), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(rpn)))
with tabs[4]:
    st.markdown("**Canonical text**")
    st.code(ex.to_text(ast), language=None, wrap_lines=True)
    st.dataframe(pd.DataFrame(token_rows), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(token_rows)))
with tabs[5]:
    if op is not None:
        st.markdown("**Operands:** " + ", ".join(f"`@{i}` = `{lab}`" for i, lab in enumerate(labels)))
    for i, x in enumerate(values):
        if isinstance(x, np.ndarray):
            st.markdown(f"`@{i}` ({x.dtype}, shape {'×'.join(map(str, x.shape))})")
            if x.size <= 64:
                st.dataframe(pd.DataFrame(x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)), hide_index=True)
