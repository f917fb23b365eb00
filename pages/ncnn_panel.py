"""The Forward page's "the deployed ncnn model" reference (issue 37): ncnn's own run of the ncnn
files pnnx wrote beside the model (or of the ncnn model itself), in a child under the app's
limits, aligned to our operands (kuiper_core/references/ncnn_deployed.py); per step ours vs ncnn
vs PyTorch, and why ncnn's answer differs (ncnn re-run per option: kuiper_core/explore/deployed.py).

compare_panel offers it and calls `panel`; the Forward page draws `step_line` beside the step and
`layer_table` under the error table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import compare, deployed, tensors
from kuiper_core.explore.messages import hide_server_paths
from kuiper_core.explore.upload_names import code_span, md_text
from kuiper_core.explore.upload_store import Kept
from kuiper_core.formats.base import installed
from kuiper_core.references.isolated import IsolatedRunError
from kuiper_core.references.ncnn_deployed import INSTALL, DeployedRun, deployed_files, deployed_references
from kuiper_core.explore.stepper import ForwardStepper
from pages import common
from pages import reference_sources as sources

STATE = "kx_ncnn_refs"  # {"key": (model, input digest), "run": DeployedRun}
ERROR = "fw_ncnn_error"  # ((model, input digest), the error) of the last failed run
ROWS = "fw_ncnn_rows"  # {"token", "torch", "rows": {id(event): (event, row)}}: computed once per step


def has_deployed(model: common.LoadedModel) -> bool:
    return deployed_files(model.opened) is not None


def offered(model: common.LoadedModel) -> bool:
    """The deployed model can be (or was) run by ncnn here."""
    return has_deployed(model) and installed("ncnn")


def missing_note(model: common.LoadedModel) -> str | None:
    """What would compute ncnn's values, when the model has a deployed model and ncnn is missing."""
    if has_deployed(model) and not installed("ncnn"):
        return f"`{model.name}`'s deployed ncnn model could be compared layer by layer here with: {INSTALL}."
    return None


def _key(model: common.LoadedModel, resolved: common.ResolvedInput) -> tuple[str, str]:
    return model.key, tensors.arrays_digest(resolved.arrays)


def current(model: common.LoadedModel, resolved: common.ResolvedInput) -> DeployedRun | None:
    """This session's ncnn run for this model and input, or the server's kept one (a reload)."""
    key = _key(model, resolved)
    state = st.session_state.get(STATE)
    if state is None or state["key"] != key:
        kept = common.kept_store().get(f"ncnn:{key[0]}:{key[1]}")
        if kept is None:
            return None
        state = st.session_state[STATE] = {"key": key, "run": kept.value}
    return state["run"]


def torch_refs(model: common.LoadedModel, resolved: common.ResolvedInput, run: DeployedRun) -> dict[str, np.ndarray]:
    """PyTorch's values of our operands: the session's, keyed by operand (the sample input's bundled
    tensors, references computed with PyTorch), else pnnx's code's beside the files, lined up through
    ncnn's blobs."""
    out = dict(run.torch)  # lined up by content through ncnn's blobs: the session's, keyed by operand, win
    framework = sources.computed_framework(model, resolved)
    if framework is not None and "PyTorch" in framework[0]:
        out.update(framework[1])
    out.update(sources.bundled_references(model, resolved) or {})
    return out


def _expected(model: common.LoadedModel, resolved: common.ResolvedInput) -> list[np.ndarray]:
    """PyTorch's outputs without the batch dim (a PNNX model's, at batch 1), when the session has them."""
    if model.graph is None or (model.opened is not None and model.opened.format == "ncnn"):
        return []
    known = {**(sources.bundled_references(model, resolved) or {})}
    framework = sources.computed_framework(model, resolved)
    if framework is not None and "PyTorch" in framework[0]:
        known.update(framework[1])
    outs = compare.output_operand_names(model.graph)
    ys = [np.asarray(known[o]) for o in outs if o in known]
    return [y[0] for y in ys] if len(ys) == len(outs) and all(y.ndim and y.shape[0] == 1 for y in ys) else []


def _compute(model: common.LoadedModel, resolved: common.ResolvedInput, stepper: ForwardStepper) -> None:
    assert model.opened is not None
    stored = st.session_state.get(common.UPLOAD_KEY)
    data = None
    if stored is not None and stored.digest == model.key and model.opened.format == "ncnn":
        data = (stored.files["param"] or b"", stored.files.get("bin"))  # an upload: ncnn reads files
    st.session_state.pop(ERROR, None)
    with st.spinner(f"Running ncnn on `{model.name}`'s deployed model, once per option…"):
        try:
            with limits.use(common.APP_LIMITS):  # the child's memory and time: the app's
                ours = dict(stepper.values) if stepper.outputs() is not None else _our_values(model, resolved)
                expected = _expected(model, resolved)
                run = deployed_references(model.opened, resolved.arrays, ours, data=data, expected=expected)
        except (KuiperError, MemoryError, IsolatedRunError) as e:
            st.session_state[ERROR] = (_key(model, resolved), e)
            return
        except Exception as e:  # an engine bug: said, never a traceback on the page
            st.session_state[ERROR] = (_key(model, resolved), f"internal error: {type(e).__name__}: {e}")
            return
    key = _key(model, resolved)
    st.session_state[STATE] = {"key": key, "run": run}
    held = (run.refs, run.torch, run.report.values, run.report.torch)
    nbytes = sum(int(a.nbytes) for d in held for a in d.values())
    common.kept_store().put(Kept(f"ncnn:{key[0]}:{key[1]}", run, nbytes))  # a reload finds it (issue 38)


def _our_values(model: common.LoadedModel, resolved: common.ResolvedInput) -> dict[str, Any]:
    from kuiper_core.references import engine_values

    assert model.opened is not None
    return engine_values(model.opened, resolved.arrays)


def panel(model: common.LoadedModel, resolved: common.ResolvedInput, stepper: ForwardStepper) -> None:
    """Compute ncnn's values, or say what they cover and why ncnn's answer differs."""
    run = current(model, resolved)
    if run is None:
        st.caption(
            f"ncnn runs `{model.name}`'s deployed model on this input in a separate process, every blob "
            "extracted, lined up with this model's operands, then once per ncnn option to say why it differs."
        )
        if st.button("Run the deployed model with ncnn", key="fw_ncnn", type="primary"):
            _compute(model, resolved, stepper)
            if ERROR not in st.session_state:
                st.rerun()
        failed = st.session_state.get(ERROR)
        if failed is not None and failed[0] == _key(model, resolved):  # (this model and input's)
            common.show_error(failed[1], title="ncnn could not run the deployed model")
        return
    report = run.report
    covered = run.computed - len(run.unmapped)
    level = st.success if not run.unmapped else st.warning
    level(
        f"ncnn {report.ncnn_version} computed {covered} of the {run.computed} operands this model computes "
        f"(weights stored as {report.weights})."
    )
    if run.unmapped:
        some = ", ".join(code_span(n) for n in run.unmapped[:20]) + (" …" if len(run.unmapped) > 20 else "")
        st.caption(f"Operands no ncnn blob is (fused into a layer, or computed another way by ncnn): {some}")
    st.markdown("**Why it differs**")
    for line in report.advice:
        st.info(md_text(hide_server_paths(line), limit=1000))
    rows = deployed.option_rows(report)
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    for note in report.notes:
        st.caption(md_text(hide_server_paths(note), limit=1000))  # ncnn's and the child's messages


def _active(model: common.LoadedModel, resolved: common.ResolvedInput, active: Any) -> DeployedRun | None:
    """The ncnn run, when the deployed model is the reference in use (`active`: ActiveReferences)."""
    from kuiper_core.explore import references

    return current(model, resolved) if active.token[:1] == (references.NCNN,) else None


def _rows(model: common.LoadedModel, resolved: common.ResolvedInput, run: DeployedRun, events: list[Any]) -> list[Any]:
    """The rows of `events`, each computed once per ncnn run and PyTorch reference set: a step
    then compares only the new operator (as compare.CheckCache does for the error table)."""
    framework = sources.computed_framework(model, resolved)
    token = (id(run), None if framework is None else id(framework[1]))
    cache = st.session_state.get(ROWS)
    if cache is None or cache["token"] != token:
        cache = st.session_state[ROWS] = {"token": token, "torch": torch_refs(model, resolved, run), "rows": {}}
    rows = []
    for e in events:
        hit = cache["rows"].get(id(e))
        if hit is None or hit[0] is not e:  # the event is kept with its row, so its id is never reused
            hit = cache["rows"][id(e)] = (e, deployed.operator_row(e, run.refs, cache["torch"], run.blobs))
        rows.append(hit[1])
    if len(cache["rows"]) > 2 * len(events) + 64:  # a reset made new events: drop the old
        live = {id(e) for e in events}
        cache["rows"] = {k: v for k, v in cache["rows"].items() if k in live}
    return rows


def step_line(model: common.LoadedModel, resolved: common.ResolvedInput, event: Any, active: Any) -> None:
    """Beside the step: this operator's output against ncnn's blob and PyTorch's value."""
    run = _active(model, resolved, active)
    if run is None or event is None:
        return
    st.caption(deployed.step_text(_rows(model, resolved, run, [event])[0]))


def layer_table(model: common.LoadedModel, resolved: common.ResolvedInput, events: list[Any], active: Any) -> None:
    """Every operator run so far: ours vs ncnn vs PyTorch (relative errors)."""
    run = _active(model, resolved, active)
    if run is None or not events:
        return
    st.subheader("Ours vs ncnn vs PyTorch, per operator")
    rows = _rows(model, resolved, run, events)
    if all(r[deployed.OURS_TORCH] is None for r in rows):
        st.caption(
            "No PyTorch values for this model and input (pnnx's NAME_pnnx.py with torch beside the files, the sample "
            "input's tensors, or references computed from the framework with PyTorch give them)."
        )
    numbers = {k: st.column_config.NumberColumn(format="%.3g") for k in deployed.ERROR_COLUMNS}
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=numbers)
