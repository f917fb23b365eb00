"""The Forward page's "Compare with" section: which references are in use, and the run's tensors.

References come from PyTorch for a bundled model's sample input, from an uploaded .npz (keyed
by operand number, output, operator name or module path), or from a run saved in this session
(another input, the model before `kuiper opt`). What is in use is read from the session before
the page draws (`active_references`); the widgets at the bottom (`compare_section`) only store
choices through callbacks. kuiper_core.explore.references does the matching.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import references
from kuiper_core.explore import tensors
from kuiper_core.references import framework_references
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.explore.messages import hide_server_paths
from kuiper_core.explore.upload_names import code_span, md_text
from kuiper_core.explore.upload_store import Kept
from kuiper_core.references.hooks import hook_snippet
from pages import common, ncnn_panel
from pages import reference_sources as sources

CHOICE = "kx_ref_choice"  # the chosen source; survives page changes (a widget's state does not)
RUNS = "kx_saved_runs"  # [SavedRun], shared by every model of the session (before/after `kuiper opt`)
TOKEN = "fw_refs_token"  # the references last seen: new ones switch the graph to the error view
ERROR = "fw_refs_error"
MAX_RUNS, MAX_RUN_BYTES = 4, 256 * 2**20  # saved runs per session, oldest dropped first


def saved_runs() -> list[references.SavedRun]:
    return list(st.session_state.get(RUNS) or [])


def _uploaded() -> tuple[str, dict[str, np.ndarray]] | None:
    arrays = st.session_state.get(common.REFS_KEY)
    return None if arrays is None else (st.session_state.get(common.REFS_NAME_KEY) or "references", arrays)


def _framework_offered(model: common.LoadedModel) -> bool:
    """References can be computed from the model's own framework (torch, onnxruntime) here."""
    return model.opened is not None and model.opened.references.available


def _ncnn(model: common.LoadedModel, resolved: common.ResolvedInput) -> dict[str, np.ndarray] | None:
    if not ncnn_panel.has_deployed(model):  # (most models: no input digest taken for nothing)
        return None
    run = ncnn_panel.current(model, resolved)
    return None if run is None else run.refs


def _choice(options: list[str], computed: bool = False) -> str:
    """The chosen source; by default an upload when there is one, else references computed
    from the framework, else the first offered."""
    chosen = st.session_state.get(CHOICE)
    if chosen in options:
        return chosen
    if st.session_state.get(common.REFS_KEY) is not None:
        return references.UPLOADED
    if computed and references.FRAMEWORK in options:
        return references.FRAMEWORK
    return options[0]


def active_references(model: common.LoadedModel, resolved: common.ResolvedInput) -> references.ActiveReferences:
    """The references in use. When they change (an upload, another choice), the graph's
    'Colour nodes by' moves to the error view: the next thing the user wants to see."""
    bundled = sources.bundled(model, resolved)
    runs = saved_runs()
    framework = sources.computed_framework(model, resolved)
    options = references.reference_choices(
        bundled is not None, _uploaded() is not None, runs, _framework_offered(model), ncnn_panel.offered(model)
    )
    assert model.graph is not None
    chosen = _choice(options, framework is not None)
    active = references.choose_references(
        model.graph,
        chosen,
        bundled=bundled,
        uploaded=_uploaded(),
        runs=runs,
        framework=framework,
        ncnn=_ncnn(model, resolved),
    )
    if chosen == references.FRAMEWORK and framework is not None:  # an .onnx's node names, for details and tables
        nodes = st.session_state[sources.FRAMEWORK_KEY]["set"].onnx_nodes
        active = dataclasses.replace(active, onnx_nodes=references.operator_onnx_nodes(model.graph, nodes))
    token = (model.key, *active.token)
    if active.refs and st.session_state.get(TOKEN) != token:
        st.session_state["fw_color_mode"] = "errors"
    st.session_state[TOKEN] = token
    return active


# -- callbacks ------------------------------------------------------------------------------------
def _on_upload() -> None:
    f = st.session_state.get("forward_refs")
    st.session_state.pop(ERROR, None)
    if f is None:
        common.clear_uploaded_references()
        return
    try:
        common.set_uploaded_references(f.getvalue(), common.display_name(f.name))
        st.session_state[CHOICE] = references.UPLOADED
    except (KuiperError, MemoryError) as e:
        st.session_state[ERROR] = e


def _on_choice() -> None:
    st.session_state[CHOICE] = st.session_state.get("fw_ref_choice")


def _save_run(stepper: ForwardStepper, model: common.LoadedModel, description: str) -> None:
    if not stepper.events:
        st.session_state["fw_saved_note"] = None
        return
    n = int(st.session_state.get("fw_run_counter", 0)) + 1
    st.session_state["fw_run_counter"] = n
    arrays = references.run_arrays(stepper.values, stepper.outputs())
    run = references.SavedRun(f"run {n}: {description}", model.name, arrays, len(stepper.events), stepper.total)
    kept, dropped = references.keep_runs(saved_runs(), run, MAX_RUNS, MAX_RUN_BYTES)
    st.session_state[RUNS] = kept
    st.session_state["fw_saved_note"] = (run.label, dropped)


# -- the section ------------------------------------------------------------------------------------
def compare_section(
    model: common.LoadedModel,
    resolved: common.ResolvedInput,
    stepper: ForwardStepper,
    active: references.ActiveReferences,
) -> None:
    """Save / download this run, choose what to compare with, and say what an upload matched."""
    st.subheader("Compare with")
    _run_actions(model, resolved, stepper)
    bundled = sources.bundled(model, resolved) is not None
    runs = saved_runs()
    framework = sources.computed_framework(model, resolved)
    options = references.reference_choices(
        bundled, _uploaded() is not None, runs, _framework_offered(model), ncnn_panel.offered(model)
    )
    labels = {
        references.BUNDLED: "PyTorch's tensors for the sample input",
        references.FRAMEWORK: "computed from the model's framework",
        references.NCNN: "the deployed ncnn model (ncnn itself)",
        references.UPLOADED: "a reference file (.npz)",
    }
    if len(options) == 1:
        st.session_state.pop("fw_ref_choice", None)
    else:
        st.radio(
            "Compare with",
            options,
            index=options.index(_choice(options, framework is not None)),
            format_func=lambda o: labels.get(o) or f"saved {o[4:]}",
            key="fw_ref_choice",
            on_change=_on_choice,
            horizontal=True,
            label_visibility="collapsed",
        )
    chosen = _choice(options, framework is not None)
    missing = model.opened.references.missing if model.opened is not None and model.opened.converted else ()
    if missing and not _framework_offered(model):
        st.caption(f"References from `{model.name}`'s own framework could be computed here with: {'; '.join(missing)}.")
    if ncnn_panel.missing_note(model):
        st.caption(ncnn_panel.missing_note(model) or "")
    if chosen == references.FRAMEWORK:
        _framework_panel(model, resolved, stepper)
    elif chosen == references.NCNN:
        ncnn_panel.panel(model, resolved, stepper)
    elif chosen == references.BUNDLED:
        st.caption(
            f"PyTorch computed these tensors for `{model.name}`'s sample input with the original module "
            "(every operand, through pnnx's generated Python). Another input has no references: save a run, "
            "or upload a file."
        )
    elif chosen.startswith("run:") and not active.refs:
        st.caption("This saved run names no operand of this model.")
    if active.match is not None:
        _match_report(active.match, model)
    _upload_panel(model)  # always here: an upload becomes the choice
    if not runs:
        st.caption("Save a run above to compare a later one with it (another input, the model before `kuiper opt`).")


def _run_actions(model: common.LoadedModel, resolved: common.ResolvedInput, stepper: ForwardStepper) -> None:
    # Never disabled: the section is outside the stepping fragment, and redrawing it when the
    # first step or a Reset changed "anything to save?" took a whole-page rerun from inside the
    # fragment (with a burst of clicks queued behind it, the page froze: issue 38). A click
    # with nothing run yet says so; the download then holds no tensor.
    a, b = st.columns(2)
    a.download_button(
        "Download every tensor computed so far (.npz)",
        lambda: references.npz_bytes(references.run_arrays(stepper.values, stepper.outputs())),
        file_name=f"{model.name}.tensors.npz",
        mime="application/octet-stream",
        key="fw_dl_npz",
        width="stretch",
        help="keyed by operand name (and out0, out1, … once the run is complete): upload it back here as a "
        "reference, or compare it with `kuiper compare` (empty until a Step)",
    )
    b.button(
        "Save this run to compare with later",
        key="fw_save_run",
        on_click=_save_run,
        args=(stepper, model, f"{model.name}, {resolved.description}"),
        width="stretch",
    )
    if "fw_saved_note" in st.session_state and st.session_state["fw_saved_note"] is None:
        del st.session_state["fw_saved_note"]
        st.warning("Nothing has run yet: press **Step** (or **End**) first, then save the run.")
    note = st.session_state.pop("fw_saved_note", None)
    if note is not None:
        label, dropped = note
        st.success(
            f"Saved '{label}'. Choose it below after changing the input or the model."
            + (f" Dropped the oldest: {', '.join(dropped)}." if dropped else "")
        )


def _upload_panel(model: common.LoadedModel) -> None:
    st.file_uploader(
        "Reference .npz: keyed by operand number, out0/out1/…, operator name or PyTorch module path",
        type=["npz"],
        key="forward_refs",
        on_change=_on_upload,
    )
    if ERROR in st.session_state:
        common.show_error(st.session_state[ERROR], title="Cannot read the reference file")
    elif st.session_state.get(common.REFS_KEY) is not None and not st.session_state.get(common.REFS_DIGEST_KEY):
        st.warning("The reference file is too big for what this server keeps for reloads and links: a reload loses it.")
    # Drawn only when opened: highlighting the Python took the browser ~0.5 s at each load of the page.
    hooks = st.expander(
        "Make a reference file from your PyTorch model (forward hooks)", key="fw_hooks", on_change="rerun"
    )
    if hooks.open:
        with hooks:
            st.caption(
                "Run this next to your model with the same input: it saves every module's output keyed by module "
                "path, which matches the operators pnnx kept by name (fused ones, e.g. Conv2d + BatchNorm2d, are "
                "listed as unmatched). Converting the model here computes references for every operand instead."
            )
            st.code(hook_snippet(), language="python")


def _match_report(match: references.KeyMatch, model: common.LoadedModel) -> None:
    """What the file's keys matched, by kind, and every key that matched nothing with why."""
    kinds = ", ".join(f"{n} by {kind}" for kind, n in match.counts().items())
    if match.matched == 0:
        example = ", ".join(code_span(o) for o in list(model.graph.operands)[:4]) if model.graph else ""
        some = ", ".join(code_span(k) for k in match.unmatched[:8]) + (" …" if len(match.unmatched) > 8 else "")
        st.warning(
            f"None of the {match.keys} arrays in the uploaded .npz names an operand of `{model.name}` ({some}): "
            f"nothing can be compared. Keys must be operand names such as {example}, out0, out1, …, or operator "
            "names / module paths."
        )
    elif match.unmatched:
        st.warning(
            f"{match.matched} of {match.keys} arrays matched ({kinds}); {len(match.unmatched)} match "
            "nothing and are ignored:"
        )
    else:
        st.caption(f"All {match.keys} arrays matched: {kinds}.")
    if match.unmatched:
        rows: list[dict[str, Any]] = [{"key": k, "why": match.reasons.get(k, "")} for k in match.unmatched[:200]]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(300, 38 + 35 * len(rows)))


def _framework_panel(model: common.LoadedModel, resolved: common.ResolvedInput, stepper: ForwardStepper) -> None:
    """Compute references from the model's own framework for this input, or say what they cover."""
    assert model.opened is not None
    info = model.opened.references
    state = st.session_state.get(sources.FRAMEWORK_KEY)
    key = (model.key, tensors.arrays_digest(resolved.arrays))
    if state is None or state["key"] != key:
        engines = sorted({"onnxruntime" if m == "onnxruntime" else "PyTorch" for m in info.methods})
        st.caption(f"For `{model.name}` and this input: {info.text()}.")
        if st.button(f"Compute references with {' and '.join(engines)}", key="fw_framework", type="primary"):
            with st.spinner(f"Running {' and '.join(engines)} on `{model.name}`…"):
                try:
                    # a finished run's values spare the ONNX mapping a run of its own
                    ours = dict(stepper.values) if stepper.outputs() is not None else None
                    with limits.use(common.APP_LIMITS):  # the children's memory and time: the app's
                        computed = framework_references(model.opened, resolved.arrays, ours=ours)
                except (KuiperError, MemoryError) as e:
                    common.show_error(e, title="No references could be computed")
                    return
            st.session_state[sources.FRAMEWORK_KEY] = {"key": key, "set": computed}
            nbytes = sum(int(getattr(a, "nbytes", 0)) for a in computed.refs.values())
            common.kept_store().put(Kept(sources.kept_name(key), computed, nbytes))  # a reload finds them (issue 38)
            st.session_state[CHOICE] = references.FRAMEWORK
            st.rerun()
        return
    computed = state["set"]
    covered = computed.computed - len(computed.unmapped)
    level = st.success if not computed.unmapped else st.warning
    # One count (issue 38: "9 of the 9 operands", each method's own "10 operands" and the
    # verdict's operators side by side read as three disagreeing numbers); how each method
    # got there, with its own counts, is one click away.
    every = f"every one of the {covered}" if not computed.unmapped else f"{covered} of the {computed.computed}"
    level(f"{sources.framework_label(computed)} computed a reference for {every} operands this model computes.")
    with st.expander("How the references were computed"):
        for line in [*computed.sources, *computed.notes]:
            st.caption(md_text(hide_server_paths(line), limit=1000))  # a framework's message quotes node names
    if computed.unmapped:
        some = ", ".join(code_span(n) for n in computed.unmapped[:20]) + (" …" if len(computed.unmapped) > 20 else "")
        st.caption(f"No reference for: {some}")
