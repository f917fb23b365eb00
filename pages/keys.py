"""Keyboard stepping: → / ← and PageDown / PageUp (what presentation clickers send), and
button clicks, none of them ever merged.

A tiny st.components.v2 component with no visible output: a keydown listener on the
page (ignored while the user types in a field or uses the graph viewer's own keys) and a
capture-phase click listener for the st.buttons named in `buttons`.

Streamlit merges the triggers of the events that arrive while a run has not yet taken the
previous request (5 quick Step clicks made 2 steps on ResNet-18, whose first step is long;
a trigger per key press would be merged the same way). So the component reports neither
as a trigger: it keeps the list of the keys pressed and buttons clicked since it was
mounted (a button's click is taken in the capture phase: its own trigger never fires) and
reports that list as its *state*, which a newer report replaces without losing anything.
The events of one browser task (a scripted burst) go out as one report. The callback runs
the action of every entry the server has not seen yet, in order, before the page is
drawn: however many are pending when a run starts, they all apply in that run and the
page is drawn once, for the final position. Events that arrive while a fragment's run is
going on wait for its end and apply in the next run. (Stopping such a run early through
Streamlit's private request state froze the page after a Reset and a burst: issue 38.)
Walkthroughs and Forward step in the browser instead (pages/step_controls.py); this is
for the presenter's and the quizzes' keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import streamlit as st

_JS = """
export default function (component) {
  const { data, setStateValue, parentElement: root } = component;
  root.__keys = { keys: new Set((data && data.keys) || []), buttons: (data && data.buttons) || [],
                  log: setStateValue };
  if (root.__listener) return root.__cleanup;
  const mount = Math.random().toString(36).slice(2, 10);  // a new list per mount
  const events = [];  // key names and button keys, in order
  let queued = false;
  const add = name => {
    events.push(name);
    if (queued) return;
    queued = true;
    queueMicrotask(() => {  // one report for the events of one task
      queued = false;
      root.__keys.log("clicks", mount + ":" + events.join(","));
    });
  };
  const listener = e => {
    const k = root.__keys;
    if (!k || !k.keys.has(e.key) || e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    if (t && (t.closest("input, textarea, select, [contenteditable=true], [role=slider], [role=combobox]"))) return;
    e.preventDefault();
    add(e.key);
  };
  const onClick = e => {
    const k = root.__keys;
    const t = e.target;
    if (!k || !t || !t.closest) return;
    for (const name of k.buttons) {
      const b = t.closest(".st-key-" + name + " button");
      if (!b) continue;
      e.stopPropagation();  // the st.button's own trigger would be a second, mergeable request
      e.preventDefault();
      if (!b.disabled) add(name);
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


def _events_since(key: str) -> list[str]:
    """The keys pressed and buttons clicked since the last call for component `key`, in order."""
    value = (st.session_state.get(key) or {}).get("clicks")
    if not isinstance(value, str) or ":" not in value:
        return []
    mount, _, names = value.partition(":")
    events = names.split(",") if names else []
    seen = st.session_state.get(f"{key}__seen")
    start = seen[1] if isinstance(seen, tuple) and seen[0] == mount else 0  # a new mount counts from 0
    st.session_state[f"{key}__seen"] = (mount, len(events))
    return events[start:]


def keyboard(
    key: str,
    actions: Mapping[str, Callable[[], None]],
    buttons: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """Call actions[key name] once per press of that key anywhere on the page, and
    buttons[widget key] once per click on that st.button, in order (see the module's docstring)."""
    buttons = buttons or {}
    assert not set(actions) & set(buttons), "a key name and a button key share one list"

    def _apply() -> None:
        for name in _events_since(key):
            action = buttons.get(name) or actions.get(name)
            if action is not None:
                action()

    _keys(
        key=key,
        data={"keys": sorted(actions), "buttons": sorted(buttons)},
        on_clicks_change=_apply,
    )
