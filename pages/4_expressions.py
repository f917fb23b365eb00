"""Expressions: a pnnx.Expression as tokens, a tree, reverse Polish, and a stack machine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core import expression as ex
from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import expression_view as V
from kuiper_core.explore import tensors as T
from kuiper_core.explore.stepper import ForwardStepper
from pages import common

VALUES = "kx_expr_stepper"  # {"key": (model key, input digest), "stepper": ForwardStepper}
STEP = "expr_step"  # the stack-evaluation step on view (1-based)
DEFAULT_TEXT = "mul(add(@0,1.5),neg(@1))"

st.title("Expressions")
st.caption(
    "PNNX folds elementwise arithmetic into `pnnx.Expression` operators whose `expr` is a small language: "
    "`@N` is the operator's N-th input, calls nest. The engine tokenizes the text, parses it into a tree, "
    "lists the tree in reverse Polish order (children before their call) and evaluates it with a stack."
)

model = common.current_model()
ops = V.expression_operators(model.graph) if model is not None and model.graph is not None else []
modes = (["From the model"] if ops else []) + ["Type one"]
mode = st.radio("Expression", modes, horizontal=True, key="expr_mode")
if not ops:
    st.caption("The current model has no pnnx.Expression: type one (@0, @1, … are small example tensors).")

op = None
if mode == "From the model":
    assert model is not None
    by_name = {o.name: o for o in ops}  # options are names: widgets copy their options
    op = by_name[
        st.selectbox(
            f"pnnx.Expression operators of {model.name} ({len(ops)})",
            list(by_name),
            format_func=lambda n: f"{n}: {V.expression_text(by_name[n])[:90]}",
            key="expr_op",
        )
    ]
    text = V.expression_text(op)
    st.code(text, language=None, wrap_lines=True)
else:
    text = st.text_input("Type an expression", DEFAULT_TEXT, key="expr_text")

# -- tokens and tree ----------------------------------------------------------------------------------
try:
    token_rows = V.token_rows(text)
    ast = ex.parse(text, common.APP_LIMITS)  # `add(@0,@3000000)` would ask for 3 million example tensors
except KuiperError as e:
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
        return [rng.standard_normal(s).astype(np.float32) for s in shapes], None, (
            "seeded random tensors of the declared shapes (the model cannot run: " + (model.error or "") + ")"
        )
    inputs = common.current_input(model)
    key = (model.key, T.arrays_digest(inputs))
    state = st.session_state.get(VALUES)
    if state is None or state["key"] != key:
        state = {"key": key, "stepper": ForwardStepper(model.runtime, inputs)}
        st.session_state[VALUES] = state
    stepper: ForwardStepper = state["stepper"]
    with st.spinner(f"Running the model up to {op.name}…"):
        stepper.run_to(op.name)
    if stepper.error is not None:
        raise KuiperError(stepper.error)
    values = [stepper.values[o.name] for o in op.inputs]  # by position: an operand may repeat
    return values, stepper.values.get(op.outputs[0].name), f"the model's tensors for {common.input_description()}"


try:
    if op is not None:
        values, layer_out, where = _model_values()
    else:
        values, layer_out, where = V.example_inputs(n_inputs), None, "small example tensors"
    with limits.use(common.APP_LIMITS):
        trace = ex.evaluate_traced(ast, values)
except KuiperError as e:
    common.show_error(e, title="Cannot evaluate the expression")
    trace = None

n_steps = len(trace.steps) if trace is not None else 0
if STEP not in st.session_state or st.session_state.get("expr_for") != (text, where if trace else None):
    st.session_state[STEP] = n_steps  # a new expression shows its finished evaluation
    st.session_state["expr_for"] = (text, where if trace else None)
st.session_state[STEP] = max(1, min(st.session_state[STEP], max(n_steps, 1)))
step = st.session_state[STEP] - 1

left, right = st.columns([2, 3])
with left:
    st.markdown("**Canonical text**")
    st.code(ex.to_text(ast), language=None, wrap_lines=True)
    st.markdown("**Tokens**")
    st.dataframe(pd.DataFrame(token_rows), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(token_rows)))
    st.markdown("**Reverse Polish order**")
    st.code(ex.rpn_text(ast), language=None, wrap_lines=True)
    rpn = V.rpn_rows(ast, labels)
    st.dataframe(pd.DataFrame(rpn), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(rpn)))
with right:
    st.markdown("**Abstract syntax tree** (each node numbered by its place in reverse Polish order)")
    if trace is not None:
        view = V.ast_dot(ast, labels, current=trace.steps[step].node, done=V.evaluated_nodes(trace, step))
    else:
        view = V.ast_dot(ast, labels)
    if view.shown < view.total:
        st.caption(f"Showing the top {view.shown} of {view.total} nodes.")
    st.graphviz_chart(view.dot, width="stretch" if view.shown > 12 else "content")  # small trees stay small
    st.caption("Red border: the current stack step. Green: already evaluated.")

if op is not None:
    st.markdown("**Operands:** " + ", ".join(f"`@{i}` = `{lab}`" for i, lab in enumerate(labels)))

# -- the stack machine ---------------------------------------------------------------------------------
st.subheader("Stack evaluation")
if trace is None:
    st.stop()
st.caption(f"Evaluated on {where}.")
if op is None and values:
    with st.expander(f"The example inputs @0 … @{len(values) - 1}"):
        for i, x in enumerate(values):
            st.markdown(f"`@{i}` ({x.dtype}, shape {x.shape})")
            st.dataframe(pd.DataFrame(x), hide_index=True)


def _move(to: int | None = None, by: int = 0) -> None:
    """Button callbacks run before the script, so the tree above already shows the new step."""
    st.session_state[STEP] = max(1, min(n_steps, to if to is not None else st.session_state[STEP] + by))


b = st.columns([1, 1, 1, 1, 4])
b[0].button("Reset", key="expr_reset", width="stretch", on_click=_move, kwargs={"to": 1})
b[1].button("Back", key="expr_back", width="stretch", on_click=_move, kwargs={"by": -1})
b[2].button("Step", key="expr_step_btn", width="stretch", on_click=_move, kwargs={"by": 1})
b[3].button("End", key="expr_end", width="stretch", on_click=_move, kwargs={"to": n_steps})
if n_steps > 1:
    b[4].slider("Step", 1, n_steps, key=STEP, label_visibility="collapsed")
step = st.session_state[STEP] - 1
current = trace.steps[step]

s1, s2 = st.columns([3, 2])
with s1:
    st.info(f"**Step {step + 1} of {n_steps}:** {current.describe()}")
    rows = V.trace_rows(trace, labels)
    st.dataframe(pd.DataFrame(rows[: step + 1]), hide_index=True, width="stretch", height=min(360, 38 + 35 * (step + 1)))
with s2:
    st.markdown("**The stack** (top first)")
    st.code("\n".join(V.stack_at(trace, step, labels)), language=None, wrap_lines=True)

# -- the result ------------------------------------------------------------------------------------------
if step == n_steps - 1:
    st.subheader("Result")
    result = trace.result
    info = V.result_rows(result)
    if isinstance(result, np.ndarray):
        s = T.tensor_stats(result)
        st.markdown(
            f"A `{s['dtype']}` tensor of shape `{s['shape']}`: min {s['min']:.6g}, max {s['max']:.6g}, "
            f"mean {s['mean']:.6g}" if s["min"] is not None else f"A `{s['dtype']}` tensor of shape `{s['shape']}`"
        )
        if result.size <= 64:
            st.dataframe(pd.DataFrame(result.reshape(-1, result.shape[-1]) if result.ndim else result.reshape(1, 1)))
        if layer_out is not None and isinstance(layer_out, np.ndarray):
            err = T.max_abs_error(result, layer_out)
            (st.success if err <= T.tolerance(layer_out) else st.error)(
                f"The stack machine and the engine's pnnx.Expression layer agree: max |difference| {err:.3g}."
                if err <= T.tolerance(layer_out)
                else f"The stack machine and the pnnx.Expression layer differ: max |difference| {err:.3g}."
            )
        spec = st.session_state.get(common.INPUT_KEY) or {"kind": "sample"}
        if op is not None and model is not None and spec.get("kind") == "sample":
            ref = model.operands.get(op.outputs[0].name)
            if ref is not None:
                err = T.max_abs_error(result, ref)
                (st.success if err <= T.tolerance(ref) else st.error)(
                    f"Against PyTorch's tensor for this operand: max |error| {err:.3g} (tolerance {T.tolerance(ref):.3g})."
                )
        st.download_button("Download .npy", T.npy_bytes(result), file_name="expression_result.npy", key="expr_dl")
    else:
        st.markdown(f"A Python `{info['kind']}`: `{info.get('value')}`")
