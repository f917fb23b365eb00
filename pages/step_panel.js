// A step's panel (sentence, lists, tables) from the frames the page sent once: it follows
// the "kx-step" events of its group (pages/step_controls.js). data: {group, frames [html] or
// packed (the same, deflated),
// step (the server's), beyond (HTML for a step past the last frame, "{step}" replaced: the
// server is computing it), behind (a CSS selector: what the server drew for its step, dimmed
// while the browser shows another)}.
// The HTML is built and escaped in Python (kuiper_core/explore/walk_frames.py, forward_frames.py).
// Frames sent deflated (data.packed {z: base64, id}: Forward on a long model) are inflated
// once per id and kept for the page's life (a rerun sends the same id).
const INFLATED = window.__kxInflated || (window.__kxInflated = new Map());

async function inflate(packed) {
  const bytes = Uint8Array.from(atob(packed.z), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return JSON.parse(await new Response(stream).text());
}

function framesOf(s) {
  const p = s.data.packed;
  if (!p) return s.data.frames || [];
  const got = INFLATED.get(p.id);
  if (got) return got;
  if (s.inflating !== p.id) {
    s.inflating = p.id;
    inflate(p).then(frames => {
      INFLATED.set(p.id, frames);
      while (INFLATED.size > 8) INFLATED.delete(INFLATED.keys().next().value);
      if (s.data.packed && s.data.packed.id === p.id) show(s);
    });
  }
  return s.frames || [];  // (the frames shown before, until these are inflated)
}

function show(s) {
  const frames = framesOf(s);
  if (!frames.length && s.data.packed) return;  // the first frames still inflating
  const want = Math.max(0, (window.__kxSteps || {})[s.data.group] ?? s.data.step ?? 0);
  const at = Math.min(frames.length - 1, want);
  const past = want > at && s.data.beyond;
  if (s.data.behind) {
    for (const el of document.querySelectorAll(s.data.behind)) el.classList.toggle("kx-behind", want !== s.data.step);
  }
  if (s.shown === (past ? -want : at) && s.frames === frames) return;
  s.shown = past ? -want : at;
  s.frames = frames;
  s.el.innerHTML = past ? s.data.beyond.replace("{step}", String(want)) : frames[at] || "";
  s.el.dataset.step = String(past ? want : at);
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
