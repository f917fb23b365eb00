"""The input size of a dynamic-shape model (exported with pnnx's inputshape2: `?` dims).

Such a model runs at any size in its open dims; the Home page lets the user pick them.
The choice lives in `st.session_state[SIZES_KEY]` per model and feeds every input the
session makes (random, zeros, ones, a resized picture); see common.model_input_specs.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from kuiper_core.explore import inputs as kx_inputs

SIZES_KEY = "kx_input_sizes"  # {"model": model key, "sizes": {operand: {dim: size}}}


def chosen_sizes(model: Any) -> dict[str, dict[int, int]]:
    """The sizes chosen for this model's open input dims ({} when none or another model)."""
    state = st.session_state.get(SIZES_KEY) or {}
    return state.get("sizes", {}) if state.get("model") == model.key else {}


def size_picker(model: Any, specs: list[tuple[str, tuple[int, ...], str]]) -> None:
    """Number inputs for each open dim; nothing for a model with static shapes."""
    free = kx_inputs.free_dims(model.graph)
    if not free:
        return
    st.caption("This model was exported with dynamic shapes (`?` dims): it runs at any size there. Choose it:")
    current = {name: dims for name, dims, _ in specs}
    sizes: dict[str, dict[int, int]] = {}
    for col, (name, dim) in zip(st.columns(min(len(free), 6)), free):
        value = col.number_input(
            f"`{name}` dim {dim}",
            min_value=1,
            max_value=4096,
            value=int(current[name][dim]),
            step=1,
            key=f"home_size_{model.key}_{name}_{dim}",
        )
        sizes.setdefault(name, {})[dim] = int(value)
    if sizes != chosen_sizes(model):
        st.session_state[SIZES_KEY] = {"model": model.key, "sizes": sizes}
        st.rerun()
