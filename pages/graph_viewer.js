// Kuiper Explorer's graph viewer (a Streamlit components.v2 component, no iframe).
//
// st.graphviz_chart renders the DOT in the same keyed container (hidden by CSS); this
// component clones that SVG into a pan/zoom viewport, paints the overlay it is given
// (current node, state colours, neutral fill for nodes without a state) and reports clicks
// on nodes and clusters. Python keeps the DOT stable while only the overlay changes, so a
// step or a selection repaints nodes instead of laying the graph out again.
//
// data: {highlight, colors {title: fill}, neutral, legend [[label, colour]], note,
//        height (px), follow (pan to the highlight), min_font_px, clickable}
// trigger: clicked = the <title> of the node or cluster clicked.

const NS = "http://www.w3.org/2000/svg";
const CURRENT = "#d62728";

function esc(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function titleOf(g) {
  const t = g.querySelector(":scope > title");
  return t ? t.textContent : null;
}

function shapeOf(g) {
  return g.querySelector("polygon, path, ellipse");  // the outline comes first (graphviz may wrap it in <a>)
}

function naturalSize(svg) {
  const vb = (svg.getAttribute("viewBox") || "0 0 100 100").trim().split(/[\s,]+/).map(Number);
  return { w: vb[2] * 4 / 3, h: vb[3] * 4 / 3, vb: vb.join(" ") };  // pt -> px
}

function nodeFontPx(svg) {
  const sizes = [...svg.querySelectorAll("g.node text")].map(t => parseFloat(t.getAttribute("font-size") || "14"));
  if (!sizes.length) return 14 * 4 / 3;
  sizes.sort((a, b) => a - b);
  return sizes[Math.floor(sizes.length / 2)] * 4 / 3;
}

function build(root) {
  const wrap = document.createElement("div");
  wrap.className = "kx-wrap";
  for (const old of root.querySelectorAll(":scope > .kx-wrap")) old.remove();
  wrap.innerHTML =
    '<div class="kx-view" tabindex="0"><div class="kx-stage"></div>' +
    '<div class="kx-tools">' +
    '<button data-act="out" title="Zoom out (-)">−</button>' +
    '<button data-act="in" title="Zoom in (+)">+</button>' +
    '<button data-act="fit" title="Fit the whole graph (0)">Fit</button>' +
    '<button data-act="read" title="Readable text size (1)">Aa</button>' +
    '<button data-act="full" title="Fullscreen (f)"><svg viewBox="0 0 24 24" width="16" height="16" fill="currentColor">' +
    '<path d="M7 14H5v5h5v-2H7v-3zm-2-4h2V7h3V5H5v5zm12 7h-3v2h5v-5h-2v3zM14 5v2h3v3h2V5h-5z"/></svg></button></div>' +
    '<div class="kx-hint">scroll: zoom · drag: pan · click: select</div></div><div class="kx-legend"></div>';
  root.appendChild(wrap);
  const s = {
    root, wrap, view: wrap.querySelector(".kx-view"), stage: wrap.querySelector(".kx-stage"),
    legend: wrap.querySelector(".kx-legend"), svg: null, src: null, sig: null,
    k: 1, x: 0, y: 0, fit: 1, readable: 1, size: { w: 1, h: 1 }, lastHighlight: undefined,
  };
  wireEvents(s);
  s.view.kxCentre = name => centreOn(s, name);  // for automation: pan a node into the middle
  // Until the user zooms or pans, a resize (layout settling, fullscreen) re-fits the view.
  s.resize = new ResizeObserver(() => { if (!s.touched && s.svg) initialView(s); });
  s.resize.observe(s.view);
  return s;
}

function apply(s) {
  s.stage.style.transform = `translate(${s.x}px, ${s.y}px) scale(${s.k})`;
  s.view.dataset.scale = s.k.toFixed(3);
  s.view.dataset.fontPx = (s.fontPx * s.k).toFixed(1);
}

function zoomAt(s, factor, cx, cy) {
  const k = Math.min(8, Math.max(Math.min(s.fit, s.readable) * 0.5, s.k * factor));
  s.x = cx - (cx - s.x) * (k / s.k);
  s.y = cy - (cy - s.y) * (k / s.k);
  s.k = k;
  apply(s);
}

function viewSize(s) {
  return { W: s.view.clientWidth || 600, H: s.view.clientHeight || 400 };
}

function centreOn(s, name) {
  const g = s.nodes && s.nodes.get(name);
  if (!g) return false;
  const { W, H } = viewSize(s);
  const r = g.getBoundingClientRect(), sr = s.stage.getBoundingClientRect();
  const cx = (r.left + r.width / 2 - sr.left) / s.k, cy = (r.top + r.height / 2 - sr.top) / s.k;  // stage px
  s.x = W / 2 - cx * s.k;
  s.y = H / 2 - cy * s.k;
  apply(s);
  return true;
}

function isVisible(s, name) {
  const g = s.nodes && s.nodes.get(name);
  if (!g) return true;
  const r = g.getBoundingClientRect(), v = s.view.getBoundingClientRect();
  return r.left >= v.left && r.right <= v.right && r.top >= v.top && r.bottom <= v.bottom;
}

// The first view: the whole graph when its text stays readable, else readable size
// around the highlighted node (or the top of the graph).
// The toolbar's strip at the top of the box: the first view starts below it, so it never
// covers the first node's name.
const TOOLBAR_PX = 40;

function fitView(s) {
  const { W, H } = viewSize(s);
  s.k = s.fit;
  s.x = (W - s.size.w * s.k) / 2;
  s.y = Math.max(TOOLBAR_PX, TOOLBAR_PX + (H - TOOLBAR_PX - s.size.h * s.k) / 2);
  apply(s);
}

function initialView(s) {
  const { W, H } = viewSize(s);
  s.fit = Math.min(W / s.size.w, (H - TOOLBAR_PX) / s.size.h) * 0.96;
  s.readable = (s.data.min_font_px || 12) / s.fontPx;
  s.k = Math.min(s.fit, Math.max(1, s.readable));
  if (s.k >= s.readable) {
    fitView(s);
    return;
  }
  s.k = s.readable;
  s.x = s.size.w * s.k < W ? (W - s.size.w * s.k) / 2 : 0;
  s.y = TOOLBAR_PX;
  apply(s);
  if (s.data.highlight) centreOn(s, s.data.highlight);
}

function wireEvents(s) {
  const v = s.view;
  v.addEventListener("wheel", e => {
    e.preventDefault();
    s.touched = true;
    const r = v.getBoundingClientRect();
    zoomAt(s, Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  v.addEventListener("pointerdown", e => {
    if (e.target.closest(".kx-tools")) return;
    drag = { x0: e.clientX, y0: e.clientY, x: s.x, y: s.y, moved: false, target: e.target };
  });
  v.addEventListener("pointermove", e => {
    if (!drag) return;
    const dx = e.clientX - drag.x0, dy = e.clientY - drag.y0;
    if (!drag.moved && Math.hypot(dx, dy) > 4) {
      drag.moved = true;
      v.setPointerCapture(e.pointerId);
      v.classList.add("kx-dragging");
    }
    if (drag.moved) { s.touched = true; s.x = drag.x + dx; s.y = drag.y + dy; apply(s); }
  });
  const end = e => {
    if (!drag) return;
    const d = drag;
    drag = null;
    v.classList.remove("kx-dragging");
    if (d.moved || !s.data.clickable) return;
    const g = d.target.closest && d.target.closest("g.node, g.cluster");  // a cluster: its frame or name
    const t = g && titleOf(g);
    if (t) s.setTrigger("clicked", t);
  };
  v.addEventListener("pointerup", end);
  v.addEventListener("pointercancel", () => { drag = null; });
  v.addEventListener("keydown", e => {
    const { W, H } = viewSize(s);
    if (e.key === "+" || e.key === "=") zoomAt(s, 1.25, W / 2, H / 2);
    else if (e.key === "-") zoomAt(s, 0.8, W / 2, H / 2);
    else if (e.key === "0") fitView(s);
    else if (e.key === "1") { const c = [W / 2, H / 2]; zoomAt(s, s.readable / s.k, c[0], c[1]); }
    else if (e.key === "f") toggleFull(s);
    else return;
    e.stopPropagation();
  });
  s.wrap.querySelector(".kx-tools").addEventListener("click", e => {
    const act = e.target.closest("button") && e.target.closest("button").dataset.act;
    const { W, H } = viewSize(s);
    s.touched = true;
    if (act === "in") zoomAt(s, 1.25, W / 2, H / 2);
    else if (act === "out") zoomAt(s, 0.8, W / 2, H / 2);
    else if (act === "fit") fitView(s);
    else if (act === "read") {
      zoomAt(s, s.readable / s.k, W / 2, H / 2);
      if (s.data.highlight) centreOn(s, s.data.highlight);
    } else if (act === "full") toggleFull(s);
  });
  document.addEventListener("fullscreenchange", () => {
    if (document.fullscreenElement === s.wrap || s.wasFull) {
      s.wasFull = document.fullscreenElement === s.wrap;
      requestAnimationFrame(() => { s.fit = 0; initialView(s); });
    }
  });
}

function toggleFull(s) {
  if (document.fullscreenElement) document.exitFullscreen();
  else if (s.wrap.requestFullscreen) s.wrap.requestFullscreen();
}

function sourceSvg(s) {
  const block = s.root.closest('[data-testid="stVerticalBlock"]');
  return block && block.querySelector('[data-testid="stGraphVizChart"] svg');
}

// Clone the rendered SVG when Streamlit has drawn a new one; keep the view when the
// graph is the same one redrawn (same viewBox and node count).
function sourceSig(src) {
  return (src.getAttribute("viewBox") || "") + "|" + src.querySelectorAll("g.node, g.cluster").length + "|" + src.textContent.length;
}

function sync(s) {
  const src = sourceSvg(s);
  if (!src) return false;
  const srcSig = sourceSig(src);
  if (src === s.src && srcSig === s.srcSig) return false;  // Streamlit may redraw into the same <svg>
  s.srcSig = srcSig;
  s.view.dataset.syncs = String((+s.view.dataset.syncs || 0) + 1);  // how often a new drawing was cloned
  const size = naturalSize(src);
  const clone = src.cloneNode(true);
  clone.removeAttribute("width");
  clone.removeAttribute("height");
  clone.style.width = size.w + "px";
  clone.style.height = size.h + "px";
  clone.style.display = "block";
  const bg = clone.querySelector("g.graph > polygon");
  if (bg) bg.setAttribute("fill", "transparent");
  s.stage.replaceChildren(clone);
  s.src = src;
  s.svg = clone;
  s.nodes = new Map();
  for (const g of clone.querySelectorAll("g.node")) {
    const t = titleOf(g);
    if (t === null) continue;
    s.nodes.set(t, g);
    const shape = shapeOf(g);
    if (shape) {
      shape.dataset.kxFill = shape.getAttribute("fill") || "none";
      shape.dataset.kxStroke = shape.getAttribute("stroke") || "black";
      shape.dataset.kxWidth = shape.getAttribute("stroke-width") || "1";
    }
  }
  const sig = size.vb + "|" + s.nodes.size;
  s.size = size;
  s.fontPx = nodeFontPx(clone);
  const same = sig === s.sig;
  s.sig = sig;
  s.view.dataset.nodes = String(s.nodes.size);
  if (!same) { s.lastHighlight = undefined; s.touched = false; initialView(s); }
  else apply(s);
  return true;
}

function paint(s) {
  if (!s.svg) return;
  const d = s.data;
  const colors = d.colors || {};
  for (const [name, g] of s.nodes) {
    const shape = shapeOf(g);
    if (!shape) continue;
    const fill = colors[name] || (d.neutral ? d.neutral_color : shape.dataset.kxFill);
    shape.setAttribute("fill", fill);
    const current = name === d.highlight;
    g.classList.toggle("kx-current", current);
    shape.setAttribute("stroke", current ? CURRENT : shape.dataset.kxStroke);
    shape.setAttribute("stroke-width", current ? "4" : shape.dataset.kxWidth);
  }
  s.view.dataset.highlight = d.highlight || "";
  s.view.classList.toggle("kx-clickable", !!d.clickable);
  const items = (d.legend || []).map(([label, colour]) =>
    `<span class="kx-chip" style="background:${esc(colour)}">${esc(label)}</span>`);
  if (d.highlight_label) items.push(`<span class="kx-chip kx-chip-current">${esc(d.highlight_label)}</span>`);
  s.legend.innerHTML = items.join("") + (d.note ? `<span class="kx-note">${esc(d.note)}</span>` : "");
  s.legend.style.display = items.length || d.note ? "" : "none";
  if (d.follow && d.highlight && d.highlight !== s.lastHighlight && !isVisible(s, d.highlight)) centreOn(s, d.highlight);
  s.lastHighlight = d.highlight;
}

// The box is as tall as asked, but never taller than what is left of the window below it
// (a projector at 1280x720 should see the whole box with the controls above it).
function scrollParent(el) {
  for (let p = el.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowY;
    if ((o === "auto" || o === "scroll") && p.scrollHeight > p.clientHeight) return p;
  }
  return null;
}

function fitHeight(s) {
  const want = s.data.height || 560;
  const sp = scrollParent(s.view);
  const top = s.view.getBoundingClientRect().top + (sp ? sp.scrollTop - sp.getBoundingClientRect().top : window.scrollY);
  const room = window.innerHeight - top - 16 - Math.max(28, s.legend.offsetHeight);  // the legend strip stays on screen
  s.view.style.height = Math.round(Math.max(Math.min(300, want), Math.min(want, room))) + "px";
}

// The keyed container may not be in the document yet when the component mounts (a rerun
// that moved elements remounts it): retry until it is, then follow its SVG.
function attach(s) {
  const block = s.root.closest('[data-testid="stVerticalBlock"]');
  if (!block) {
    s.tries = (s.tries || 0) + 1;
    if (s.tries < 400) s.timer = setTimeout(() => attach(s), 25);
    return;
  }
  s.observer = new MutationObserver(() => {
    if (s.pending) return;
    s.pending = requestAnimationFrame(() => { s.pending = 0; if (sync(s)) paint(s); });
  });
  s.observer.observe(block, { childList: true, subtree: true });
  fitHeight(s);
  if (sync(s)) paint(s);
}

export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let s = parentElement.__kx;
  const fresh = !s;
  if (fresh) s = parentElement.__kx = build(parentElement);
  s.setTrigger = setTriggerValue;
  s.data = data || {};
  if (fresh) {
    s.view.style.height = (s.data.height || 560) + "px";
    attach(s);
  } else {
    if (s.data.height !== s.height) fitHeight(s);
    sync(s);
  }
  s.height = s.data.height;
  paint(s);
  return () => {
    if (s.observer) s.observer.disconnect();
    if (s.resize) s.resize.disconnect();
    clearTimeout(s.timer);
    delete parentElement.__kx;
  };
}
