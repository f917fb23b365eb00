"""Step through Forward: run the model one operator at a time and look at every tensor.

State flow: every button, the slider, the "Go to" picker, a click on a graph node and the
keyboard only record what to do (callbacks, before the page is drawn); the page applies
it first and then draws every widget from the stepper's new position, so no button is
ever one click out of date.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core.errors import ShapeError
from kuiper_core.explore import compare
from kuiper_core.explore import tensors
from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.overlay import RAN, Overlay, roll_up, state_overlay
from kuiper_core.explore.profile import event_kernel
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.graph import shape_label
from kuiper_core.runtime import RuntimeGraph
from pages import common, compare_panel, ncnn_panel
from pages.graph_viewer import ModuleState, show_graph
from pages.keys import step_keys
from pages.step_controls import url_follows
from pages.player import current_speed, run_fragment, speed_picker, steps_due, sync_timer
from pages.tensor_panel import chart, show_tensor

PENDING = "fw_pending"  # ("go", position) or ("name", operator), from a callback or another page
PLAYING = "fw_playing"  # (stepper id, bool)
MAX_TENSORS = 8  # tensors shown per operator (torch.cat may read dozens)
FAILED = "#7a0000"

st.title("Step through Forward")
model = common.require_model()
assert model.runtime is not None and model.graph is not None
runtime: RuntimeGraph = model.runtime  # declared: the callbacks below see it narrowed
resolved = common.resolve_input(model)
names = [r.name for r in runtime.order]
position_of = {n: i + 1 for i, n in enumerate(names)}

stepper: ForwardStepper = common.forward_stepper(model, resolved.arrays)  # shared with the IR page
state: dict[str, Any] = st.session_state.get(PLAYING) or {}
if state.get("stepper") is not stepper:  # a new stepper (model or input changed)
    state = {"stepper": stepper, "playing": False}
    st.session_state[PLAYING] = state
    wanted = common.url_number("step", high=len(names))  # a reload or a shared link
    if wanted is not None and stepper.cursor < 0:
        st.session_state[PENDING] = ("go", wanted)

st.html(Path(__file__).with_name("forward_projector.css"))  # a projector's 1280x720: see the file
st.container(key="fw_caption").caption(
    f"`{model.name}`: {len(names)} operators in execution order, input: {resolved.description}. "
    "Step runs the next operator; Back only moves the view (results are kept). "
    "Keys: → or PageDown steps, ← or PageUp goes back. Click a node to go to it."
)


# Read in _body (each fragment run reads what the session holds now); the "Compare with"
# section that changes them is drawn outside the fragment, so a choice or an upload reruns
# the whole page.
refs: dict[str, np.ndarray] = {}
refs_source = ""


# -- callbacks ----------------------------------------------------------------------------------
def _go(position: int) -> None:
    st.session_state[PENDING] = ("go", position)
    state["playing"] = False


def _step() -> None:
    stepper.step()


def _back() -> None:
    stepper.back()
    state["playing"] = False


def _reset() -> None:
    stepper.reset()
    state["playing"] = False


# The slider and the picker are new widgets at each position (their key holds it). A rerun
# the browser started before it had drawn the newest position (Play's timer) sends an older
# widget's value back; only the widget drawn at the current position is the user's.
def _on_slider(widget: str, drawn_at: int) -> None:
    if drawn_at == stepper.cursor + 1:
        _go(int(st.session_state[widget]))


def _on_target(widget: str, drawn_at: int) -> None:
    name = st.session_state.get(widget)
    if name is not None and drawn_at == stepper.cursor + 1:
        _go(position_of[name])


modules = ModuleState("fw_modules", model.key)


def _on_click(title: str) -> None:
    name = modules.click(title)
    if name in position_of:
        _go(position_of[name])


def _play(on: bool) -> None:
    state["playing"] = on


# -- apply what the callbacks asked for, then draw ---------------------------------------------
def _apply_pending(slot: Any) -> None:
    pending = st.session_state.pop(PENDING, None)
    if pending is None:
        return
    where = position_of.get(pending[1], 0) if pending[0] == "name" else int(pending[1])
    target = max(0, min(len(names), where))
    if target > len(stepper.events) + 20:  # a long run: show progress
        bar = slot.progress(0.0, text="Running…")

        def _progress(i: int, n: int) -> None:
            if i % max(1, n // 100) == 0 or i == n:
                bar.progress(i / n, text=f"Running… {i} / {n}")

        stepper.go_to(target, _progress)
        bar.empty()
    else:
        stepper.go_to(target)


def _body() -> None:
    global refs, refs_source
    active = compare_panel.active_references(model, resolved)
    refs, refs_source = active.refs, active.source
    sync_timer(state, current_speed("fw_speed"))
    if state["playing"]:
        for _ in range(steps_due(state, current_speed("fw_speed"))):
            if stepper.step() is None:
                break
        if stepper.cursor + 1 >= len(names) or stepper.error is not None:
            state["playing"] = False
            st.rerun(scope="app")
    _apply_pending(st.empty())  # always present, so the elements below keep their places
    at_end = stepper.cursor + 1 >= len(names) or (
        stepper.error is not None and stepper.cursor + 1 >= len(stepper.events)
    )
    event = stepper.current
    pos = stepper.cursor + 1  # the slider and the picker show it (new widgets per position)
    common.set_url(step=stepper.cursor + 1 if stepper.cursor >= 0 else None)
    common.write_url()
    url_follows("fw_url", step=stepper.cursor + 1 if stepper.cursor >= 0 else None)

    b = st.columns([1, 1, 1, 1.2, 1.1, 1.4, 4.2])
    b[0].button(
        "Reset", key="fw_reset", width="stretch", on_click=_reset, disabled=stepper.cursor < 0 and not stepper.events
    )
    b[1].button("Back", key="fw_back", width="stretch", on_click=_back, disabled=stepper.cursor < 0)
    b[2].button("Step", key="fw_step", width="stretch", on_click=_step, disabled=at_end, type="primary")
    b[3].button("Run all", key="fw_run_all", width="stretch", on_click=_go, args=(len(names),), disabled=at_end)
    if state["playing"]:
        b[4].button("Pause", key="fw_pause", width="stretch", on_click=_play, args=(False,))
    else:
        b[4].button("Play", key="fw_play", width="stretch", on_click=_play, args=(True,), disabled=at_end)
    with b[5]:
        speed_picker("fw_speed")
    b[6].selectbox(
        "Go to operator",
        names,
        index=None if event is None else pos - 1,
        format_func=lambda n: f"{position_of[n]}. {n} ({runtime.operators[n].type})",
        key=f"fw_target_{pos}",
        on_change=_on_target,
        args=(f"fw_target_{pos}", pos),
        placeholder="go to an operator (or click it in the graph)",
        label_visibility="collapsed",
    )
    st.slider(
        "Position in the execution order",
        0,
        len(names),
        pos,
        key=f"fw_pos_{pos}",
        on_change=_on_slider,
        args=(f"fw_pos_{pos}", pos),
        label_visibility="collapsed",
        help="0 = before the first operator",
    )
    step_keys("fw_keys", _step, _back, buttons={"fw_step": _step, "fw_back": _back})  # none merged

    failure = stepper.failure
    if stepper.error is not None:
        _show_failure(failure)

    if event is None:
        st.info(
            f"Nothing has run yet. The first operator is **{names[0]}**: press **Step** (or →)."
            + ("" if refs else " To check each operator, choose references under **Compare with**, below the graph.")
        )
    else:
        line, link = st.columns([5, 1])
        how = event_kernel(runtime, event)  # e.g. a conv's kernel: Winograd F(4x4, 3x3)
        line.markdown(
            f"**Operator {event.index + 1} of {len(names)}: `{event.name}`** ({event.type}"
            + (f", {how}" if how else "")
            + f"), {event.seconds * 1e3:.3f} ms"
            + (
                f" · ONNX node `{active.onnx_nodes[event.name].replace('`', chr(39))}`"
                if event.name in active.onnx_nodes
                else ""
            )
            + (f" · next: `{stepper.next_name}`" if stepper.next_name else " · the last operator")
        )
        if link.button(
            "Details in Graph", key="fw_to_graph", width="stretch", help="its params and weights on the Graph page"
        ):
            st.session_state["graph_selected"] = (model.key, event.name)
            st.switch_page("pages/2_graph.py")
        ncnn_panel.step_line(model, resolved, event, active)  # ours vs ncnn vs PyTorch, when ncnn is the reference
    checks = state.setdefault("checks", compare.CheckCache()).checks(stepper.events, refs, active.token) if refs else []
    left, right = st.columns([1, 1])
    with left:
        _graph_panel(event.name if event is not None else None, checks, failure)
    with right.container(key="fw_tensor"):
        _tensors_panel(event, checks[event.index] if event is not None and event.index < len(checks) else None)
    _errors_panel(checks, active.onnx_nodes)
    ncnn_panel.layer_table(model, resolved, stepper.events, active)
    _outputs()


def _show_failure(failure: BaseException | None) -> None:
    op = getattr(failure, "operator", None)
    title = f"Forward stopped at operator {position_of.get(op, '?')}: `{op}`" if op else "Forward stopped"
    common.show_error(stepper.error or "", title=title + f" ({type(failure).__name__})")
    if isinstance(failure, ShapeError):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "operand": failure.operand,
                        "the .param declares": failure.declared,
                        "the layer produced": failure.produced,
                    }
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    if op in position_of:
        st.caption("The operator is marked dark red in the graph.")


def _graph_panel(current: str | None, checks: list[compare.OperatorCheck], failure: BaseException | None) -> None:
    failed_op = getattr(failure, "operator", None)
    modes = (["errors"] if refs else []) + ["progress", "categories"]
    if st.session_state.get("fw_color_mode") not in modes:  # references gone: back to the default
        st.session_state.pop("fw_color_mode", None)
    mode = st.radio(
        "Colour nodes by",
        modes,
        horizontal=True,
        key="fw_color_mode",
        label_visibility="collapsed",
        format_func={"errors": "error vs reference", "progress": "run so far", "categories": "operator category"}.get,
    )
    assert model.graph is not None  # (checked at the top)
    view = graph_view(model.graph, show=[current, failed_op], expanded=modules.expanded)
    modules.remember(view)
    if mode == "categories":
        overlay = Overlay(highlight=view.node_for(current), legend=view.legend(), highlight_label="current step")
    else:
        if mode == "errors":
            colors, legend = compare.error_colors(checks), list(compare.ERROR_LEGEND)
            note = "grey: not compared (no reference, or not run yet)"
        else:
            colors = {e.name: RAN for e in stepper.events}
            legend, note = [("run", RAN)], "grey: not run yet"
        if failed_op is not None:
            colors[failed_op] = FAILED
            legend.append(("stopped here", FAILED))
        colors = roll_up(colors, view.unit_of, [c for _, c in legend])
        overlay = state_overlay(colors, legend, highlight=view.node_for(current), note=note)
    if failed_op is not None and current is None:
        overlay.highlight = view.node_for(failed_op)
    show_graph(view.dot, "forward", overlay, height=520, follow=True, on_click=_on_click)


def _tensors_panel(event: Any, check: compare.OperatorCheck | None) -> None:
    if event is None:
        st.caption("The current operator's inputs and outputs show here.")
        return
    items: list[tuple[str, str, np.ndarray]] = []
    for direction, values in (("in", event.inputs), ("out", event.outputs)):
        for name, value in values.items():
            arrays = tensors.as_arrays(value)
            for i, a in enumerate(arrays):
                suffix = f"[{i}]" if len(arrays) > 1 else ""
                items.append((f"{direction} %{name}{suffix}", name + (f"_{i}" if suffix else ""), a))
    if event.type == "pnnx.Input":
        st.caption("pnnx.Input passes the model's input through.")
    if len(items) > MAX_TENSORS:
        st.caption(f"{len(items)} tensors: showing the first {MAX_TENSORS - 1} and the output.")
        items = items[: MAX_TENSORS - 1] + [items[-1]]
    labels = model.meta.get("labels")
    # One tensor at a time (drawing every tab would make each step slow); the output first.
    names_ = [label for label, _, _ in items]
    pick = st.segmented_control(
        "Tensor",
        names_,
        default=_worst_output(items, check) or names_[-1],
        key=f"fw_tensor_{event.index}",
        required=True,
        label_visibility="collapsed",
    )
    label, name, a = items[names_.index(pick)]
    st.markdown(f"`{name}`: shape `{shape_label(a.shape) if a.ndim else 'scalar'}`, `{a.dtype}`, {a.size:,} values")
    ref = refs.get(name) if label.startswith("out") else None
    show_tensor(
        a,
        f"fw_{event.index}_{label}",
        ref=ref,
        ref_source=refs_source,
        view_key="fw_view",
        labels=labels if labels and a.size == len(labels) else None,
    )


def _worst_output(items: list[tuple[str, str, np.ndarray]], check: compare.OperatorCheck | None) -> str | None:
    """The label of the output that made the operator fail (what its red node means), if any."""
    if check is None or not check.failed:
        return None
    worst = check.worst
    return next(
        (label for label, name, _ in items if label.startswith("out") and check.outputs.get(name) is worst), None
    )


def _errors_panel(checks: list[compare.OperatorCheck], onnx_nodes: dict[str, str]) -> None:
    if not refs:
        return
    st.subheader("Error against the reference, per operator")
    summary = compare.summarize(checks)
    level, sentence = compare.verdict(summary, refs_source)
    getattr(st, level)(sentence)
    bad = compare.first_bad(checks)
    if bad is not None:
        st.button(
            f"Go to the first failure: {bad.name} (operator {bad.index + 1})",
            key="fw_show_bad",
            on_click=_go,
            args=(bad.index + 1,),
        )
    if not checks:
        return
    rows = compare.check_rows(checks, onnx_nodes)
    compared = [r for r in rows if r["status"] != compare.NO_REF]
    if compared:
        chart(_error_plot(compared))
    table = pd.DataFrame(rows)
    if not table["detail"].astype(bool).any():
        table = table.drop(columns=["detail"])
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        height=min(400, 38 + 35 * len(rows)),
        column_config={
            "#": st.column_config.NumberColumn(width="small"),
            "max |error|": st.column_config.NumberColumn(format="%.3g"),
            "tolerance": st.column_config.NumberColumn(format="%.3g"),
            "error / tolerance": st.column_config.NumberColumn(format="%.3g"),
        },
    )
    st.download_button(
        "Download the error table (.csv)",
        compare.rows_csv(rows),
        file_name=f"{model.name}.errors.csv",
        mime="text/csv",
        key="fw_dl_csv",
    )


def _error_plot(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """error / tolerance along the execution order (log scale; above 1 fails; shape
    mismatches drawn at the top)."""
    df = pd.DataFrame(
        {
            "n": [r["#"] for r in rows],
            "operator": [r["operator"] for r in rows],
            "type": [r["type"] for r in rows],
            "status": [r["status"] for r in rows],
            "err": [r["max |error|"] for r in rows],
            "tol": [r["tolerance"] for r in rows],
            "ratio": [r["error / tolerance"] for r in rows],
        }
    )
    top = max(10.0, float(df["ratio"].max(skipna=True) or 1) * 2)
    df["y"] = df["ratio"].fillna(top).clip(lower=1e-6)
    x = {"field": "n", "type": "quantitative", "axis": {"title": "operator (execution order)", "format": "d"}}
    y = {
        "field": "y",
        "type": "quantitative",
        "scale": {"type": "log"},
        "axis": {"title": "max |error| / tolerance", "format": ".4~g"},
    }
    states = [compare.OK, compare.OVER, compare.SHAPE]
    spec = {
        "height": 220,
        "layer": [
            {"mark": {"type": "line", "color": "#bbbbbb"}, "encoding": {"x": x, "y": y}},
            {
                "mark": {"type": "circle", "size": 60, "stroke": "#555", "strokeWidth": 0.5},
                "encoding": {
                    "x": x,
                    "y": y,
                    "color": {
                        "field": "status",
                        "type": "nominal",
                        "scale": {"domain": states, "range": [compare.ERROR_COLORS[k] for k in states]},
                        "legend": {"orient": "top", "title": None},
                    },
                    "tooltip": [
                        {"field": "n", "title": "#"},
                        {"field": "operator"},
                        {"field": "type"},
                        {"field": "status"},
                        {"field": "err", "title": "max |error|", "format": ".3g"},
                        {"field": "tol", "title": "tolerance", "format": ".3g"},
                    ],
                },
            },
            {"mark": {"type": "rule", "color": "#d62728", "strokeDash": [4, 3]}, "encoding": {"y": {"datum": 1}}},
        ],
    }
    return df, spec


def _outputs() -> None:
    outputs = stepper.outputs()
    if outputs is None:
        return
    st.subheader("Outputs")
    labels = model.meta.get("labels")
    for i, y in enumerate(outputs):
        s = tensors.tensor_stats(y)
        line = (
            f"out{i}: shape {shape_label(s['shape'])}, {s['dtype']}, min {s['min']:.6g}, max {s['max']:.6g}"
            if s["min"] is not None
            else f"out{i}: shape {s['shape']}"
        )
        if labels and y.ndim == 2 and y.shape[-1] == len(labels):
            line += f" · top class: **{labels[int(np.argmax(y[0]))]}**"
        st.markdown(line)


# Play re-runs only this fragment on a timer; clicks inside it re-run only it too (fast).
run_fragment(_body, state, current_speed("fw_speed"))
# Outside the fragment: nothing in it changes with the step (its Save and Download read the
# stepper when clicked), so a Step no longer sends and redraws its uploader, radio, expander
# and buttons (about a quarter off a ResNet-18 step: bench/bench_app.py, docs/app_latency.md).
compare_panel.compare_section(model, resolved, stepper, compare_panel.active_references(model, resolved))
