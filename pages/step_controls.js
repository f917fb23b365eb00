// Steps in the browser (issue 38): a walkthrough's Reset / Back / Step / End / Play, the
// slider, the keys (→ PageDown, ← PageUp: what clickers send) move a position kept here, and
// everything drawn for a step comes from frames the page sent once (the graph viewer's
// overlays, step_panel's HTML): a step costs the server nothing and never waits for it.
//
// The server learns the position only to keep its own state (a later rerun, a reload) and
// the URL: once the user stops stepping for REPORT_MS, as one absolute number (never "one
// more": a burst can neither be merged nor replayed twice). The address bar follows at once.
// A position the server sets itself (a click on a node, a new graph, a link) comes with a new
// `seq`, and only then replaces the one here.
//
// data: {group, total, step, seq, prefix (the buttons' keys: PREFIX_step …), label_suffix,
//        url_param, report_ms, speeds {label: steps per second}, speed, first (the lowest
//        step: 0 = before the first event, 1 for a walk that opens on its first step),
//        known (the last step with a frame; past it the position is reported at once)}
// state: step (the position, reported as above).
// Listeners: window "kx-step" events {group, step}; window.__kxSteps[group] the position now.

const STEPS = window.__kxSteps || (window.__kxSteps = {});
const KEYS = { ArrowRight: 1, PageDown: 1, ArrowLeft: -1, PageUp: -1 };
const MIN_GAP_MS = 250;  // between two reports of the position (see go)

function announce(group, step) {
  STEPS[group] = step;
  window.dispatchEvent(new CustomEvent("kx-step", { detail: { group, step } }));
}

function build(root) {
  const el = document.createElement("div");
  el.className = "kx-steps";
  root.appendChild(el);
  const s = { root, el, step: 0, playing: null, reportTimer: 0, lastReport: -Infinity };
  el.addEventListener("click", e => {
    const b = e.target.closest("button[data-act]");
    if (b && !b.disabled) act(s, b.dataset.act);
  });
  el.addEventListener("input", e => {
    if (e.target.matches("input[type=range]")) go(s, +e.target.value);
    if (e.target.matches("select")) { s.speed = e.target.value; if (s.playing) { stop(s); play(s); } }
  });
  s.onKey = e => {
    const by = KEYS[e.key];
    if (!by || e.altKey || e.ctrlKey || e.metaKey || !s.el.isConnected) return;
    const t = e.target;
    if (t && t.closest && t.closest("input, textarea, select, [contenteditable=true], [role=slider], [role=combobox]")) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    stop(s);
    go(s, s.step + by);
  };
  document.addEventListener("keydown", s.onKey, true);
  return s;
}

function act(s, what) {
  const d = s.data;
  if (what !== "play") stop(s);
  if (what === "reset") go(s, d.first || 0);
  else if (what === "back") go(s, s.step - 1);
  else if (what === "step") go(s, s.step + 1);
  else if (what === "end") go(s, d.total);
  else if (what === "play") { if (s.playing) stop(s); else play(s); draw(s); }
}

function play(s) {
  if (s.step >= s.data.total) return;
  const rate = (s.data.speeds || {})[s.speed] || 2;
  const tick = Math.max(50, 1000 / rate);
  let last = performance.now();
  s.playing = setInterval(() => {
    const now = performance.now(), due = Math.max(1, Math.round((now - last) * rate / 1000));
    last = now;
    go(s, s.step + due);
    if (s.step >= s.data.total) stop(s);
  }, tick);
  draw(s);
}

function stop(s) {
  if (!s.playing) return;
  clearInterval(s.playing);
  s.playing = null;
  draw(s);
}

function go(s, to) {
  const step = Math.max(s.data.first || 0, Math.min(s.data.total, to | 0));
  if (step === s.step) return;
  s.step = step;
  draw(s);
  announce(s.data.group, step);
  writeUrl(s);
  clearTimeout(s.reportTimer);
  // A step past `known` has no frame yet (Forward: an operator not run): the server must run
  // it, so it hears the position at once, but at most every MIN_GAP_MS: a Play at 100/s
  // would otherwise start a rerun per step, each cancelling the last (the page would not be
  // drawn until the Play ended, and a big graph's reruns swamp the browser).
  const due = step > (s.data.known ?? s.data.total) ? 0 : (s.data.report_ms ?? 700);
  const wait = Math.max(due, s.lastReport + MIN_GAP_MS - performance.now());
  if (wait <= 0) send(s);
  else s.reportTimer = setTimeout(() => send(s), wait);
}

function send(s) {
  s.reportTimer = 0;
  s.lastReport = performance.now();
  s.report("step", s.step);
}

function writeUrl(s) {
  const name = s.data.url_param;
  if (!name) return;
  const url = new URL(window.location.href);
  if (s.step) url.searchParams.set(name, String(s.step)); else url.searchParams.delete(name);
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, "", url.href);
}

function button(s, act, label, primary) {
  const key = s.data.prefix + "_" + act;
  return `<span class="st-key-${key}"><button data-act="${act}" class="${primary ? "kx-primary" : ""}">${label}</button></span>`;
}

// The controls are built once per walk and then only updated: a button a user (or a script)
// holds stays the same element through a burst of clicks.
function layout(s) {
  const d = s.data, speeds = Object.keys(d.speeds || {});
  s.el.innerHTML =
    '<div class="kx-steps-row">' +
    button(s, "reset", "Reset") + button(s, "back", "Back") + button(s, "step", "Step", true) +
    button(s, "end", "End") + button(s, "play", "Play") +
    `<select title="Play speed, in steps per second" aria-label="Play speed (steps per second)">` +
    speeds.map(k => `<option${k === s.speed ? " selected" : ""}>${k}</option>`).join("") + "</select>" +
    `<input type="range" min="${d.first || 0}" max="${d.total}" aria-label="Step (of ${d.total})">` +
    '</div><p class="kx-steps-where"></p>';
  s.laidOut = d.prefix + "|" + d.total + "|" + (d.first || 0);
  s.btn = Object.fromEntries([...s.el.querySelectorAll("button[data-act]")].map(b => [b.dataset.act, b]));
  s.range = s.el.querySelector("input[type=range]");
  s.where = s.el.querySelector(".kx-steps-where");
}

function draw(s) {
  const d = s.data, at = s.step, end = at >= d.total;
  if (s.laidOut !== d.prefix + "|" + d.total + "|" + (d.first || 0)) layout(s);
  s.btn.reset.disabled = s.btn.back.disabled = at <= (d.first || 0);
  s.btn.step.disabled = s.btn.end.disabled = end;
  s.btn.play.disabled = end && !s.playing;
  s.btn.play.textContent = s.playing ? "Pause" : "Play";
  if (+s.range.value !== at) s.range.value = String(at);
  s.where.innerHTML = `<b>Step ${at} of ${d.total}</b>`;
  s.where.append(d.label_suffix || "");
  s.el.dataset.step = String(at);
}

export default function (component) {
  const { data, setStateValue, parentElement } = component;
  let s = parentElement.__kxSteps;
  if (!s) s = parentElement.__kxSteps = build(parentElement);
  s.report = setStateValue;
  const d = data || {};
  const fresh = s.group !== d.group || s.seq !== d.seq;
  s.data = d;
  if (s.speed === undefined) s.speed = d.speed;
  if (fresh) {  // the server set the position (a new walk, a click on a node, a link)
    stop(s);
    clearTimeout(s.reportTimer);  // a report not sent yet is of a position the server replaced
    s.reportTimer = 0;
    s.group = d.group;
    s.seq = d.seq;
    s.step = Math.max(d.first || 0, Math.min(d.total, d.step | 0));
  }
  draw(s);
  announce(d.group, s.step);
  writeUrl(s);  // (a rerun's URL may carry an older position than the one here)
  return () => {
    stop(s);
    clearTimeout(s.reportTimer);
    try { if (s.reportTimer) s.report("step", s.step); } catch (e) { /* the page is gone */ }  // leaving: the server keeps where we were
    document.removeEventListener("keydown", s.onKey, true);
    delete parentElement.__kxSteps;
  };
}
