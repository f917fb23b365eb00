"""Where the Forward page's references come from, read from the session: PyTorch's bundled
tensors for a sample input, and the references computed from the model's framework (this
session's, or the server's kept ones after a reload). compare_panel chooses among them; the
deployed-ncnn panel reads PyTorch's values from here too."""

from __future__ import annotations

import numpy as np
import streamlit as st

from kuiper_core.explore import compare, tensors
from kuiper_core.references import ReferenceSet
from pages import common

FRAMEWORK_KEY = "kx_framework_refs"  # {"key": (model, input digest), "set": ReferenceSet}: computed references


def bundled(model: common.LoadedModel, resolved: common.ResolvedInput) -> dict[str, np.ndarray] | None:
    """PyTorch's tensors for the sample input (outN and operands), or None."""
    if not resolved.is_sample or not (model.expected or model.operands):
        return None
    arrays: dict[str, np.ndarray] = {f"out{i}": y for i, y in enumerate(model.expected)}
    arrays.update(model.operands)
    return arrays


def bundled_references(model: common.LoadedModel, resolved: common.ResolvedInput) -> dict[str, np.ndarray] | None:
    """PyTorch's bundled tensors for the sample input keyed by operand, or None."""
    found = bundled(model, resolved)
    return None if found is None or model.graph is None else compare.references_for(model.graph, found)


def kept_name(key: tuple[str, str]) -> str:
    return f"refs:{key[0]}:{key[1]}"


def computed_framework(
    model: common.LoadedModel, resolved: common.ResolvedInput
) -> tuple[str, dict[str, np.ndarray]] | None:
    """(what computed them, operand -> array): the references computed from the model's framework
    for this model and input, if any: this session's, or the server's kept ones (a reload of a
    session that computed them)."""
    key = (model.key, tensors.arrays_digest(resolved.arrays))
    state = st.session_state.get(FRAMEWORK_KEY)
    if state is None or state["key"] != key:
        kept = common.kept_store().get(kept_name(key))
        if kept is None:
            return None
        state = st.session_state[FRAMEWORK_KEY] = {"key": key, "set": kept.value}
    return framework_label(state["set"]), state["set"].refs


def framework_label(refs: ReferenceSet) -> str:
    """'PyTorch', 'onnxruntime' or 'PyTorch and onnxruntime': what computed the references."""
    used = [
        n
        for n, prefix in (("PyTorch", "torch"), ("onnxruntime", "onnxruntime"))
        if any(s.startswith(prefix) for s in refs.sources)
    ]
    return " and ".join(used) or "the framework"
