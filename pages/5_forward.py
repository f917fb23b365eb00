"""Step through Forward: run the model one operator at a time and look at every tensor."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core.errors import KuiperError
from kuiper_core.explore import tensors as T
from kuiper_core.explore.dot import graph_dot
from kuiper_core.explore.stepper import ForwardStepper
from pages import common

FOCUS_ABOVE = 40  # bigger models are drawn around the current operator
MAX_TENSORS = 8
NOT_RUN = "#ffffff"  # tensors shown per operator (torch.cat may read dozens)

st.title("Step through Forward")
model = common.require_model()
graph = model.runtime
assert graph is not None and model.graph is not None
inputs = common.current_input(model)


stepper: ForwardStepper = common.forward_stepper(model, inputs)  # shared with the IR page
names = [r.name for r in graph.order]
st.caption(
    f"`{model.name}`: {len(names)} operators in execution order, input: {common.input_description()}. "
    "Step runs the next operator; Back only moves the view (results are kept)."
)


# -- reference tensors ------------------------------------------------------------------------
def _references() -> tuple[dict[str, np.ndarray], str]:
    uploaded = st.session_state.get(common.REFS_KEY)
    if uploaded is not None:
        return T.references_for(model.graph, uploaded), "uploaded .npz"
    spec = st.session_state.get(common.INPUT_KEY) or {"kind": "sample"}
    if spec.get("kind", "sample") != "sample" or model.sample_input is None:
        return {}, ""
    npz: dict[str, np.ndarray] = {f"out{i}": y for i, y in enumerate(model.expected)}
    npz.update(model.operands)
    return T.references_for(model.graph, npz), "PyTorch, for the sample input"


with st.expander("Reference tensors (.npz)"):
    st.caption(
        "Upload an .npz of reference tensors keyed by operand name (or out0, out1, … for the outputs) to "
        "see each operator's error. Bundled models carry PyTorch's tensors for their sample input."
    )
    ref_file = st.file_uploader("Reference .npz", type=["npz"], key="forward_refs")
    if ref_file is not None:
        try:
            common.set_uploaded_references(ref_file.getvalue())
        except KuiperError as e:
            common.show_error(e, title="Cannot read the reference file")
refs, refs_source = _references()

# -- controls ------------------------------------------------------------------------------------
b = st.columns([1, 1, 1, 3, 1.2, 1.2])
if b[0].button("Reset", key="fw_reset", width="stretch"):
    stepper.reset()
if b[1].button("Back", key="fw_back", width="stretch", disabled=stepper.cursor < 0):
    stepper.back()
if b[2].button("Step", key="fw_step", width="stretch", disabled=stepper.cursor + 1 >= len(names)):
    stepper.step()
target = b[3].selectbox(
    "Run to operator",
    names,
    index=min(stepper.cursor + 1, len(names) - 1),
    format_func=lambda n: f"{names.index(n) + 1}. {n} ({graph.operators[n].type})",
    key="fw_target",
    label_visibility="collapsed",
)
run_to = b[4].button("Run to", key="fw_run_to", width="stretch")
run_all = b[5].button("Run all", key="fw_run_all", width="stretch", type="primary")
if run_to or run_all:
    bar = st.progress(0.0, text="Running…")

    def _progress(i: int, n: int) -> None:
        if i % max(1, n // 100) == 0 or i == n:
            bar.progress(i / n, text=f"Running… {i} / {n}")

    if run_all:
        stepper.run_all(_progress)
    else:
        stepper.run_to(target, _progress)
    bar.empty()

if stepper.error is not None:
    common.show_error(stepper.error, title=f"Forward stopped after {len(stepper.events)} operator(s)")

event = stepper.current
rows = T.error_table(stepper.events, refs) if refs else []
first_bad = T.first_bad(rows)

# -- status line ----------------------------------------------------------------------------------
if event is None:
    st.info(f"Nothing has run yet. The first operator is **{names[0]}**: press **Step**.")
else:
    st.markdown(
        f"**Operator {event.index + 1} of {len(names)}: `{event.name}`** ({event.type}), "
        f"{event.seconds * 1e3:.3f} ms"
        + (f" · next: `{stepper.next_name}`" if stepper.next_name else " · the last operator")
    )


# -- the graph ------------------------------------------------------------------------------------
def _graph_panel() -> None:
    big = len(names) > FOCUS_ABOVE
    c1, c2 = st.columns(2)
    by_error = c1.toggle("Colour by error", value=bool(refs), disabled=not refs, key="fw_color_error")
    whole = c2.toggle("Whole graph", value=not big, key="fw_whole") if big else True
    colors = None
    if by_error and rows:  # operators not run yet are white, so green always means "checked"
        done = {e.name for e in stepper.events}
        colors = {n: NOT_RUN for n in names if n not in done} | T.error_colors(rows)
    current = event.name if event is not None else None
    dot = graph_dot(
        model.graph,
        highlight=current,
        node_colors=colors,
        focus=None if whole or current is None else current,
        hops=3,
        edge_labels=True,
    )
    st.graphviz_chart(dot, width="content")
    if colors:
        legend = [("ok", "within tolerance"), ("bad", "over tolerance"), ("first bad", "first over tolerance")]
        st.markdown(
            " ".join(
                f'<span style="background:{T.ERROR_COLORS[k]};border:1px solid #888;border-radius:4px;'
                f'padding:1px 6px;margin-right:6px;font-size:0.85em">{label}</span>'
                for k, label in legend
            )
            + f' <span style="background:{NOT_RUN};border:1px solid #888;border-radius:4px;padding:1px 6px;'
            'font-size:0.85em">not run yet</span> (no reference: category colour)',
            unsafe_allow_html=True,
        )


# -- one tensor --------------------------------------------------------------------------------
def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _tensor(label: str, name: str, a: np.ndarray, ref: np.ndarray | None, widget_key: str) -> None:
    s = T.tensor_stats(a)
    st.markdown(f"`{name}`: shape `{'×'.join(map(str, s['shape'])) or 'scalar'}`, `{s['dtype']}`, {s['size']:,} values")
    cols = ["min", "max", "mean", "std", "nan", "inf"]
    st.dataframe(pd.DataFrame([{k: _fmt(s[k]) for k in cols}]), hide_index=True, width="stretch")
    if s["nan"] or s["inf"]:
        st.warning(f"{s['nan']} NaN and {s['inf']} Inf values")
    if ref is not None:
        err, tol = T.max_abs_error(a, ref), T.tolerance(ref)
        (st.success if err <= tol else st.error)(
            f"max |error| vs {refs_source}: {err:.3g} (tolerance {tol:.3g})"
        )
    hist = pd.DataFrame(T.histogram_table(a))
    if len(hist):
        chart = (
            alt.Chart(hist)
            .mark_bar()
            .encode(
                x=alt.X("start:Q", bin="binned", title="value"),
                x2="end:Q",
                y=alt.Y("count:Q", title="count"),
                tooltip=["start", "end", "count"],
            )
            .properties(height=160)
        )
        st.altair_chart(chart, width="stretch")
    kind = T.view_kind(a)
    if kind == "channels":
        batch = 0
        if a.shape[0] > 1:
            batch = st.number_input("batch item", 0, a.shape[0] - 1, 0, key=f"{widget_key}_batch")
        mosaic, shown = T.channel_grid(a, batch=int(batch))
        more = f" (first {len(shown)} of {a.shape[1]})" if len(shown) < a.shape[1] else ""
        st.image(mosaic, caption=f"channels{more} of item {batch}, each on its own scale (viridis; magenta = NaN/Inf)")
    elif kind == "image":
        st.image(T.image_2d(a), caption="as an image (viridis, dark = low, yellow = high)")
    st.download_button(
        "Download .npy", T.npy_bytes(a), file_name=f"{name}.npy", mime="application/octet-stream", key=f"{widget_key}_dl"
    )


def _tensors_panel() -> None:
    if event is None:
        st.caption("The current operator's inputs and outputs show here.")
        return
    items: list[tuple[str, str, np.ndarray]] = []
    for direction, values in (("in", event.inputs), ("out", event.outputs)):
        for name, value in values.items():
            arrays = T.as_arrays(value)
            for i, a in enumerate(arrays):
                suffix = f"[{i}]" if len(arrays) > 1 else ""
                items.append((f"{direction} %{name}{suffix}", name + (f"_{i}" if suffix else ""), a))
    if event.type == "pnnx.Input":
        st.caption("pnnx.Input passes the model's input through.")
    if len(items) > MAX_TENSORS:
        st.caption(f"{len(items)} tensors: showing the first {MAX_TENSORS - 1} and the output.")
        items = items[: MAX_TENSORS - 1] + [items[-1]]
    tabs = st.tabs([label for label, _, _ in items])
    for tab, (label, name, a) in zip(tabs, items):
        with tab:
            ref = refs.get(name) if label.startswith("out") else None
            _tensor(label, name, a, ref, f"fw_{event.index}_{label}")


left, right = st.columns([1, 1])
with left:
    _graph_panel()
with right:
    _tensors_panel()

# -- errors and results ------------------------------------------------------------------------------
if refs:
    st.subheader("Error against the reference, per operator")
    if not rows:
        st.caption(f"References: {refs_source}. Run operators to compare.")
    else:
        if first_bad is None:
            st.success(f"All {len(rows)} operators run so far are within tolerance of {refs_source}.")
        else:
            st.error(f"The first operator over tolerance is **{first_bad}**.")
            if st.button(f"Show {first_bad}", key="fw_show_bad"):
                stepper.run_to(first_bad)
                st.rerun()
        table = pd.DataFrame(rows)
        st.dataframe(table, hide_index=True, width="stretch", height=min(400, 38 + 35 * len(rows)))
elif model.operands or model.expected:
    st.caption("Per-operator errors are shown for the sample input (the bundled references are PyTorch's for it).")

outputs = stepper.outputs()
if outputs is not None:
    st.subheader("Outputs")
    for i, y in enumerate(outputs):
        s = T.tensor_stats(y)
        line = f"out{i}: shape {s['shape']}, {s['dtype']}, min {_fmt(s['min'])}, max {_fmt(s['max'])}"
        labels = model.meta.get("labels")
        if labels and y.ndim == 2 and y.shape[-1] == len(labels):
            line += f" · top class: **{labels[int(np.argmax(y[0]))]}**"
        st.markdown(line)
