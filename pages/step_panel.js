// A step's panel (sentence, lists, tables) from the frames the page sent once: it follows
// the "kx-step" events of its group (pages/step_controls.js). data: {group, frames [html]}.
// The HTML is built and escaped in Python (kuiper_core/explore/walk_frames.py).
function show(s) {
  const frames = s.data.frames || [];
  const at = Math.max(0, Math.min(frames.length - 1, (window.__kxSteps || {})[s.data.group] ?? s.data.step ?? 0));
  if (s.shown === at && s.frames === frames) return;
  s.shown = at;
  s.frames = frames;
  s.el.innerHTML = frames[at] || "";
  s.el.dataset.step = String(at);
}

export default function (component) {
  const { data, parentElement } = component;
  let s = parentElement.__kxPanel;
  if (!s) {
    const el = document.createElement("div");
    el.className = "kx-panel";
    parentElement.appendChild(el);
    s = parentElement.__kxPanel = { el };
    s.onStep = e => { if (e.detail.group === s.data.group) show(s); };
    window.addEventListener("kx-step", s.onStep);
  }
  s.data = data || {};
  show(s);
  return () => { window.removeEventListener("kx-step", s.onStep); delete parentElement.__kxPanel; };
}
