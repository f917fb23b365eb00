"""Keyboard stepping: → / ← and PageDown / PageUp (what presentation clickers send).

A tiny st.components.v2 component with no visible output: a keydown listener on the
page that reports the key, ignored while the user types in a field or uses the graph
viewer's own keys. The page maps the key to its Step/Back callbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import streamlit as st

_JS = """
export default function (component) {
  const { data, setTriggerValue, parentElement: root } = component;
  root.__keys = { send: setTriggerValue, keys: new Set((data && data.keys) || []) };
  if (root.__listener) return root.__cleanup;
  const listener = e => {
    const k = root.__keys;
    if (!k || !k.keys.has(e.key) || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t && (t.closest("input, textarea, select, [contenteditable=true], [role=slider], [role=combobox]"))) return;
    e.preventDefault();
    k.send("pressed", e.key + "@" + Date.now());
  };
  document.addEventListener("keydown", listener);
  root.__listener = listener;
  root.__cleanup = () => { document.removeEventListener("keydown", listener); delete root.__listener; };
  return root.__cleanup;
}
"""
_keys = st.components.v2.component("kx_keys", js=_JS, isolate_styles=False)

STEP_KEYS = {"ArrowRight": +1, "PageDown": +1, "ArrowLeft": -1, "PageUp": -1}


def keyboard(key: str, actions: Mapping[str, Callable[[], None]]) -> None:
    """Call actions[key name] when that key is pressed anywhere on the page."""

    def _pressed() -> None:
        value = (st.session_state.get(key) or {}).get("pressed")
        if isinstance(value, str):
            action = actions.get(value.split("@", 1)[0])
            if action is not None:
                action()

    _keys(key=key, data={"keys": sorted(actions)}, on_pressed_change=_pressed)


def step_keys(key: str, forward: Callable[[], None], back: Callable[[], None]) -> None:
    """→ and PageDown step forward, ← and PageUp step back."""
    keyboard(key, {k: forward if d > 0 else back for k, d in STEP_KEYS.items()})
