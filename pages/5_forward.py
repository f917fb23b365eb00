"""Step through Forward: run the model one operator at a time and look at every tensor.

Steps in the browser (issue 38): every operator the stepper has run is a frame (the graph's
highlight and fills, the panel: status line, tensor summaries, comparison; built by
kuiper_core/explore/forward_frames.py) sent with the page, and Reset / Back / Step / End /
Play, the slider and → ← PageDown PageUp move through them in the browser
(pages/step_controls.js) with no server run. The server hears the position when the user
pauses, and only then draws what it must compute for that step: the tensor's picture, the
error table. A step past the last operator run is reported at once: the server runs it, then
runs ahead (RUN_AHEAD_SECONDS) so the next steps are frames too.

State flow: the Go-to picker, a click on a graph node, "go to the first failure" and a link
record where to go (callbacks, before the page is drawn; a new `seq` makes the browser take
the position); the page applies it first and then draws from the stepper's new position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core.errors import ShapeError
from kuiper_core.explore import compare, forward_frames
from kuiper_core.explore import tensors
from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.overlay import RAN, Overlay, state_overlay
from kuiper_core.explore.profile import event_kernel
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.explore.upload_names import code_span, md_text
from kuiper_core.graph import shape_label
from kuiper_core.runtime import RuntimeGraph
from pages import common, compare_panel, ncnn_panel
from pages.graph_viewer import ModuleState, show_graph
from pages.step_controls import group_of, step_controls, step_panel
from pages.tensor_panel import chart, show_tensor

PENDING = "fw_pending"  # ("go", position), ("name", operator) or ("report", position)
STATE = "fw_state"  # {"stepper", "seq": server moves, "checks": CheckCache, "panels": (key, run, frames)}
FAILED = forward_frames.FAILED
# After the server runs the operator a step asked for, it runs on for this long, the view
# staying put, so the next steps are frames the browser already has. Not the whole forward
# at once: a ResNet-18's steps take 3-12 s on a loaded 2-core server (one operator: 0.1 s).
RUN_AHEAD_SECONDS = 0.3
WAIT = '<div class="kx-s-box kx-s-info">Operator {step}: the server is running it…</div>'  # no frame yet
DRAWING = '<div class="kx-s-box kx-s-info">The server is drawing this step…</div>'  # (over MAX_OPERATORS)

st.title("Step through Forward")
model = common.require_model()
assert model.runtime is not None and model.graph is not None
runtime: RuntimeGraph = model.runtime  # declared: the callbacks below see it narrowed
resolved = common.resolve_input(model)
names = [r.name for r in runtime.order]
position_of = {n: i + 1 for i, n in enumerate(names)}

stepper: ForwardStepper = common.forward_stepper(model, resolved.arrays)  # shared with the IR page
state: dict[str, Any] = st.session_state.get(STATE) or {}
if state.get("stepper") is not stepper:  # a new stepper (model or input changed)
    state = {"stepper": stepper, "seq": 0}
    st.session_state[STATE] = state
    wanted = common.url_number("step", high=len(names))  # a reload or a shared link
    if wanted is not None and stepper.cursor < 0:
        st.session_state[PENDING] = ("go", wanted)
group = group_of("forward", model.key, tensors.arrays_digest(resolved.arrays))

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
    """The server moves the position: the browser's controls take it (a new seq)."""
    st.session_state[PENDING] = ("go", position)
    state["seq"] = state.get("seq", 0) + 1


def _reported(position: int) -> None:
    """The browser's position, once the user paused or stepped past what has run. A move the
    server made in the same rerun (a pick, a click: callbacks run in no set order) wins: the
    browser's report was sent before it saw that move."""
    if (st.session_state.get(PENDING) or ("",))[0] != "go":
        st.session_state[PENDING] = ("report", position)


# The picker is a new widget at each position (its key holds it): only the one drawn at the
# current position is the user's (an older one's value can arrive after a move).
def _on_target(widget: str, drawn_at: int) -> None:
    name = st.session_state.get(widget)
    if name is not None and drawn_at == stepper.cursor + 1:
        _go(position_of[name])


modules = ModuleState("fw_modules", model.key)


def _on_click(title: str) -> None:
    name = modules.click(title)
    if name in position_of:
        _go(position_of[name])


# -- apply what the callbacks asked for, then draw ---------------------------------------------
def _apply_pending(slot: Any) -> None:
    pending = st.session_state.pop(PENDING, None)
    if pending is None:
        return
    where = position_of.get(pending[1], 0) if pending[0] == "name" else int(pending[1])
    target = max(0, min(len(names), where))
    ran = len(stepper.events)
    if target > ran + 20:  # a long run: show progress
        bar = slot.progress(0.0, text="Running…")

        def _progress(i: int, n: int) -> None:
            if i % max(1, n // 100) == 0 or i == n:
                bar.progress(i / n, text=f"Running… {i} / {n}")

        stepper.go_to(target, _progress)
        bar.empty()
    else:
        stepper.go_to(target)
    if len(stepper.events) > ran and len(names) <= forward_frames.MAX_OPERATORS:
        stepper.run_ahead(RUN_AHEAD_SECONDS)


def _panels(checks: list[compare.OperatorCheck], token: Any, onnx_nodes: dict[str, str]) -> list[str]:
    """The panel frame of every step run so far: the frames of the operators run since the last
    call are added (the server runs ahead a little at a time), all made again when the
    references or the run changed."""
    events = stepper.events
    key = (token, refs_source, id(events[0]) if events else None)
    cached = state.get("panels")
    if cached is None or cached[0] != key or cached[1] > len(events):
        cached = state["panels"] = (key, 0, [])
    _, done, frames = cached

    def make(new: list, start: bool) -> list[str]:
        return forward_frames.panel_frames(
            new,
            names,
            kernel_of=lambda e: event_kernel(runtime, e),
            checks=checks,
            ref_source=refs_source,
            onnx_nodes=onnx_nodes,
            start=start,
        )

    if done < len(events) or not frames:
        frames = (frames or make([], True)) + make(events[done:], False)  # a new list: the browser's copy is another
        state["panels"] = (key, len(events), frames)
    return frames


def _body() -> None:
    global refs, refs_source
    active = compare_panel.active_references(model, resolved)
    refs, refs_source = active.refs, active.source
    _apply_pending(st.empty())  # always present, so the elements below keep their places
    event = stepper.current
    pos = stepper.cursor + 1
    stopped = stepper.error is not None
    total = len(stepper.events) if stopped else len(names)  # past a failure there is nothing to show
    browser = len(names) <= forward_frames.MAX_OPERATORS  # frames for the steps run so far
    common.set_url(step=pos or None)
    common.write_url()

    step_controls(
        "fw_steps",
        group,
        total,
        pos,
        state.get("seq", 0),
        _reported,
        prefix="fw",
        known=len(stepper.events) if browser else -1,
    )
    pick, link = st.columns([5, 1])
    pick.selectbox(
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
    if event is not None and link.button(
        "Details in Graph", key="fw_to_graph", width="stretch", help="its params and weights on the Graph page"
    ):
        st.session_state["graph_selected"] = (model.key, event.name)
        st.switch_page("pages/2_graph.py")

    failure = stepper.failure
    if stopped:
        _show_failure(failure)
    checks = state.setdefault("checks", compare.CheckCache()).checks(stepper.events, refs, active.token) if refs else []
    if browser:
        panels = _panels(checks, active.token, active.onnx_nodes)
    else:  # only the step on view (a model this big steps on the server)
        one = forward_frames.panel_frames(
            stepper.events[pos - 1 : pos] if pos else [],
            names,
            kernel_of=lambda e: event_kernel(runtime, e),
            checks=checks,
            ref_source=refs_source,
            onnx_nodes=active.onnx_nodes,
        )
        panels = one[:1] + [DRAWING] * (pos - 1) + one[1:]
    left, right = st.columns([1, 1])
    with left:
        _graph_panel(pos, checks, failure, browser)
    with right:
        step_panel(
            "fw_panel",
            group,
            panels,
            pos,
            beyond=WAIT,
            behind=".st-key-fw_tensor, [class*='st-key-fw_target_']",  # the server's, for its step
        )
        with st.container(key="fw_tensor"):
            ncnn_panel.step_line(model, resolved, event, active)  # ours vs ncnn vs PyTorch, when ncnn is the reference
            _tensors_panel(event, checks[event.index] if event is not None and event.index < len(checks) else None)
    _errors_panel(checks, pos, active.onnx_nodes)
    ncnn_panel.layer_table(model, resolved, stepper.events[:pos], active)  # up to the step on view
    if pos == len(names):  # (the server may have run to the end ahead of the view)
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


def _graph_panel(pos: int, checks: list[compare.OperatorCheck], failure: BaseException | None, browser: bool) -> None:
    """The graph at `pos`; with `browser`, the frame of every step run so far goes along."""
    failed_op = getattr(failure, "operator", None)
    current = names[pos - 1] if pos else None
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
    events = stepper.events if browser else stepper.events[:pos]
    if mode == "categories":
        overlay = Overlay(legend=view.legend(), highlight_label="current step")
        fills, priority = None, []
    else:
        if mode == "errors":
            fills, legend = forward_frames.error_colors(checks), list(compare.ERROR_LEGEND)
            note = "grey: not compared (no reference, or not run yet)"
        else:
            fills, legend, note = forward_frames.progress_colors(events), [("run", RAN)], "grey: not run yet"
        if failed_op is not None:
            legend.append(("stopped here", FAILED))
        overlay = state_overlay({}, legend, note=note)
        priority = [c for _, c in legend]
    # Fills up to the step on view: a step colours what has run by then (Back uncolours).
    frames = forward_frames.graph_frames(events, view.unit_of, fills, priority, failed_op)
    if not browser:
        frames = frames[: pos + 1]
    overlay.highlight = frames[min(pos, len(frames) - 1)]["highlight"]
    show_graph(
        view.dot,
        "forward",
        overlay,
        height=520,
        follow=True,
        on_click=_on_click,
        frames=frames,
        group=group,
        step=pos,
        additive=True,
    )


def _tensors_panel(event: Any, check: compare.OperatorCheck | None) -> None:
    """What the server draws for the step the user stopped at: one tensor's picture (the
    summaries of all of them are in the step's panel, drawn in the browser)."""
    if event is None:
        st.caption("The current operator's inputs and outputs show here.")
        return
    items = forward_frames.tensor_items(event)
    labels = model.meta.get("labels")
    # One tensor at a time (drawing every tab would make each step slow); the output first.
    names_ = [label for label, _, _ in items]
    pick = st.segmented_control(
        "Tensor",
        names_,
        default=_worst_output(items, check) or names_[-1],
        format_func=md_text,  # "out %name": the model's own operand names
        key=f"fw_tensor_{event.index}",
        required=True,
        label_visibility="collapsed",
    )
    label, name, a = items[names_.index(pick)]
    st.markdown(
        f"{code_span(name)}: shape `{shape_label(a.shape) if a.ndim else 'scalar'}`, `{a.dtype}`, {a.size:,} values"
    )
    ref = refs.get(name) if label.startswith("out") else None
    show_tensor(
        a,
        f"fw_{event.index}_{label}",
        ref=ref,
        ref_source=refs_source,
        view_key="fw_view",
        labels=labels if labels and a.size == len(labels) else None,
        stats=False,
    )


def _worst_output(items: list[tuple[str, str, np.ndarray]], check: compare.OperatorCheck | None) -> str | None:
    """The label of the output that made the operator fail (what its red node means), if any."""
    if check is None or not check.failed:
        return None
    worst = check.worst
    return next(
        (label for label, name, _ in items if label.startswith("out") and check.outputs.get(name) is worst), None
    )


def _errors_panel(every: list[compare.OperatorCheck], pos: int, onnx_nodes: dict[str, str]) -> None:
    """The operators up to the step on view; the first failure among all those run (the
    server may have run ahead of the view)."""
    if not refs:
        return
    checks = every[:pos]
    st.subheader("Error against the reference, per operator")
    summary = compare.summarize(checks)
    level, sentence = compare.verdict(summary, refs_source)
    getattr(st, level)(sentence)
    bad = compare.first_bad(every)
    if bad is not None:
        st.button(
            f"Go to the first failure: {md_text(bad.name)} (operator {bad.index + 1})",
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


# A report or a click inside the fragment re-runs only it (fast).
st.fragment(_body)()
# Outside the fragment: nothing in it changes with the step (its Save and Download read the
# stepper when clicked), so a Step no longer sends and redraws its uploader, radio, expander
# and buttons (about a quarter off a ResNet-18 step: bench/bench_app.py, docs/app_latency.md).
compare_panel.compare_section(model, resolved, stepper, compare_panel.active_references(model, resolved))
