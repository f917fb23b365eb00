"""`/` or Ctrl+F (⌘F) puts the cursor in a page's search box (the st.text_input keyed `key`),
as in Netron and most viewers; Esc in the box gives the keys back to the page. A tiny
st.components.v2 component with no output, all in the browser."""

from __future__ import annotations

import streamlit as st

_JS = """
export default function (component) {
  const { data, parentElement: root } = component;
  root.__find = data.key;
  if (root.__findListener) return root.__findCleanup;
  const listener = e => {
    const find = (e.key === "/" && !e.ctrlKey && !e.metaKey && !e.altKey) || ((e.ctrlKey || e.metaKey) && e.key === "f");
    const box = document.querySelector(".st-key-" + root.__find + " input");
    if (!box || !root.isConnected) return;
    if (e.key === "Escape" && e.target === box) { box.blur(); return; }
    if (!find) return;
    const t = e.target;
    if (t && t.closest && t.closest("input, textarea, select, [contenteditable=true]")) return;
    e.preventDefault();
    box.focus();
    box.select();
  };
  document.addEventListener("keydown", listener, true);
  root.__findListener = listener;
  root.__findCleanup = () => { document.removeEventListener("keydown", listener, true); delete root.__findListener; };
  return root.__findCleanup;
}
"""
_find = st.components.v2.component("kx_find_key", js=_JS, isolate_styles=False)


def find_key(key: str) -> None:
    """Call after drawing the text input keyed `key`."""
    _find(key=f"kx-find-{key}", data={"key": key})
