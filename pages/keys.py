"""Keyboard stepping: → / ← and PageDown / PageUp (what presentation clickers send), and
button clicks that are never merged.

A tiny st.components.v2 component with no visible output: a keydown listener on the
page that reports the key, ignored while the user types in a field or uses the graph
viewer's own keys. The page maps the key to its Step/Back callbacks.

Clicks: Streamlit merges the triggers of the clicks that arrive while a run has not yet
taken the previous request (5 quick Step clicks made 2 steps on ResNet-18, whose first
step is long). For the st.buttons named in `buttons`, the component takes the click
itself (capture phase: the button's own trigger never fires) and reports the list of
buttons clicked since it was mounted as its *state*, which a newer report replaces
without losing anything; the page runs each click's action once, in order. Where no
browser runs it (AppTest), the buttons' own on_click does the work as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import streamlit as st

_JS = """
export default function (component) {
  const { data, setTriggerValue, setStateValue, parentElement: root } = component;
  root.__keys = { send: setTriggerValue, keys: new Set((data && data.keys) || []),
                  buttons: (data && data.buttons) || [], log: setStateValue };
  if (root.__listener) return root.__cleanup;
  const listener = e => {
    const k = root.__keys;
    if (!k || !k.keys.has(e.key) || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t && (t.closest("input, textarea, select, [contenteditable=true], [role=slider], [role=combobox]"))) return;
    e.preventDefault();
    k.send("pressed", e.key + "@" + Date.now());
  };
  const mount = Math.random().toString(36).slice(2, 10);  // a new list per mount
  const clicked = [];
  const onClick = e => {
    const k = root.__keys;
    const t = e.target;
    if (!k || !t || !t.closest) return;
    for (const name of k.buttons) {
      const b = t.closest(".st-key-" + name + " button");
      if (!b) continue;
      e.stopPropagation();  // the st.button's own trigger would be a second, mergeable request
      e.preventDefault();
      if (b.disabled) return;
      clicked.push(name);
      k.log("clicks", mount + ":" + clicked.join(","));
      return;
    }
  };
  document.addEventListener("keydown", listener);
  document.addEventListener("click", onClick, true);
  root.__listener = listener;
  root.__cleanup = () => {
    document.removeEventListener("keydown", listener);
    document.removeEventListener("click", onClick, true);
    delete root.__listener;
  };
  return root.__cleanup;
}
"""
_keys = st.components.v2.component("kx_keys", js=_JS, isolate_styles=False)

STEP_KEYS = {"ArrowRight": +1, "PageDown": +1, "ArrowLeft": -1, "PageUp": -1}


def _clicks_since(key: str) -> list[str]:
    """The buttons clicked since the last call for component `key`, in order."""
    value = (st.session_state.get(key) or {}).get("clicks")
    if not isinstance(value, str) or ":" not in value:
        return []
    mount, _, names = value.partition(":")
    clicked = names.split(",") if names else []
    seen = st.session_state.get(f"{key}__seen")
    start = seen[1] if isinstance(seen, tuple) and seen[0] == mount else 0  # a new mount counts from 0
    st.session_state[f"{key}__seen"] = (mount, len(clicked))
    return clicked[start:]


def keyboard(
    key: str,
    actions: Mapping[str, Callable[[], None]],
    buttons: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """Call actions[key name] when that key is pressed anywhere on the page, and
    buttons[widget key] once per click on that st.button (see the module's docstring)."""

    def _pressed() -> None:
        value = (st.session_state.get(key) or {}).get("pressed")
        if isinstance(value, str):
            action = actions.get(value.split("@", 1)[0])
            if action is not None:
                action()

    def _clicked() -> None:
        for name in _clicks_since(key):
            action = (buttons or {}).get(name)
            if action is not None:
                action()

    _keys(
        key=key,
        data={"keys": sorted(actions), "buttons": sorted(buttons or {})},
        on_pressed_change=_pressed,
        on_clicks_change=_clicked,
    )


def step_keys(
    key: str,
    forward: Callable[[], None],
    back: Callable[[], None],
    buttons: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """→ and PageDown step forward, ← and PageUp step back; `buttons`: as keyboard's."""
    keyboard(key, {k: forward if d > 0 else back for k, d in STEP_KEYS.items()}, buttons)
