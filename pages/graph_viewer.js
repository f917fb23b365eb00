// Kuiper Explorer's graph viewer (a Streamlit components.v2 component, no iframe).
//
// st.graphviz_chart renders the DOT in the same keyed container (hidden by CSS); this
// component copies that SVG into a pan/zoom viewport, paints the overlay it is given
// (current node, state colours, neutral fill for nodes without a state, search marks) and
// reports clicks on nodes and clusters. Python keeps the DOT stable while only the overlay
// changes, so a step or a selection repaints nodes instead of laying the graph out again;
// when the DOT does change (a walkthrough's labels and colours), the copy follows it: the
// source is compared by content, never by size (equal sizes used to hide a changed graph).
//
// data: {highlight, colors {title: fill}, neutral, neutral_color, marks [title], legend
//        [[label, colour]], highlight_label, note, height (px, the least height: the box
//        grows to the window), follow (centre the highlight when it changes and is out of
//        view), min_font_px, clickable, export_name, svg_id + svg (a graph laid out in
//        Python: the SVG itself only the first time this session draws it),
//        frames + group (steps in the browser: frames[i] is the overlay of step i, with each
//        node's label lines `texts` and the edges drawn apart `edges` {"a->b": "current" |
//        "removed"}; the step is the group's, from pages/step_controls.js's "kx-step" events;
//        with `additive`, frame i's colors are what step i adds to frames 0..i-1's)}
// trigger: clicked = the <title> of the node or cluster clicked; missing = the id of a
// big graph's SVG this page does not hold (Python then sends it again).
// For automation the .kx-view element carries dataset {scale, fontPx, nodes, inView,
// highlight, syncs} and functions kxCentre(title), kxExport("svg"|"png") (a Promise of the
// file's text or data URL), kxVisible(title).

const CURRENT = "#d62728";
const MARK = "#0072b2";  // search matches: a blue ring (Okabe-Ito blue)
const MIN_FIT_FONT_PX = 7;  // node text smaller than this: the view is an overview (the box says so)
const MARGIN = 12;
const MIN_BOX_PX = 220;  // the box shrinks to this to keep its legend on a 720-px screen
const MAP_NODES = 40;
const SMALL_GRAPH_FONT_PX = 10.5;
const MAP_MIN_PX = 48;  // the overview map opens by itself on graphs this big that do not fit
const EXPORT_MAX_PX = 16000;  // a PNG side (Chromium's canvas limit is 32767; memory is the real one)
const EXPORT_MAX_AREA = 1.2e8;
const LEGEND_MIN_PT = 420;  // an export's legend wraps within the graph's width, or this much
const EXPORT_MIN_FONT_PX = 6;  // a PNG whose node text would be smaller: the part in view instead

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
  // The toolbar is a strip above the drawing, never over it: it cannot cover a node's text.
  wrap.innerHTML =
    '<div class="kx-view" tabindex="0"><div class="kx-bar"><span class="kx-hint">scroll: zoom · drag: pan · click: select</span>' +
    '<span class="kx-msg"></span><div class="kx-tools">' +
    '<button data-act="out" title="Zoom out (-)">−</button>' +
    '<button data-act="in" title="Zoom in (+)">+</button>' +
    '<button data-act="fit" title="The whole graph (0): an overview when it is big">Fit</button>' +
    '<button data-act="read" title="Readable text size (1)">Aa</button>' +
    '<button data-act="map" title="Overview map with the visible part (m)">Map</button>' +
    '<button data-act="svg" title="Download the graph as drawn, as SVG">SVG</button>' +
    '<button data-act="png" title="Download the graph as drawn, as PNG">PNG</button>' +
    '<button data-act="full" class="kx-full" title="Fullscreen (f)" aria-label="Fullscreen"></button></div></div>' +
    '<div class="kx-port"><div class="kx-stage"></div>' +
    '<div class="kx-map" hidden><img alt="overview"><div class="kx-map-view"></div></div></div></div>' +
    '<div class="kx-legend"></div>';
  root.appendChild(wrap);
  const s = {
    root, wrap, view: wrap.querySelector(".kx-view"), port: wrap.querySelector(".kx-port"),
    stage: wrap.querySelector(".kx-stage"), legend: wrap.querySelector(".kx-legend"),
    msg: wrap.querySelector(".kx-msg"), map: wrap.querySelector(".kx-map"),
    mapImg: wrap.querySelector(".kx-map img"), mapView: wrap.querySelector(".kx-map-view"),
    svg: null, src: null, srcHtml: null, sig: null, mapWanted: null,
    k: 1, x: 0, y: 0, fit: 1, readable: 1, size: { w: 1, h: 1 }, lastHighlight: undefined,
  };
  wireEvents(s);
  s.view.kxCentre = name => centreOn(s, name);  // for automation: pan a node into the middle
  s.view.kxVisible = name => isVisible(s, name);
  s.view.kxExport = kind => (kind === "png" ? exportPng(s) : Promise.resolve(exportSvg(s)));
  // Until the user zooms or pans, a resize (layout settling, fullscreen) re-fits the view.
  s.resize = new ResizeObserver(() => { if (!s.touched && s.svg) initialView(s); else if (s.svg) apply(s); });
  s.resize.observe(s.port);
  s.legendWatch = new ResizeObserver(() => requestFit(s));  // a legend that wraps takes a row more
  s.legendWatch.observe(s.legend);
  s.pageWatch = new ResizeObserver(() => requestFit(s));  // the page above the box grows or shrinks
  s.watchPage = () => {
    const main = root.closest('[data-testid="stMainBlockContainer"]') || document.body;
    if (main !== s.watched) { s.watched = main; s.pageWatch.disconnect(); s.pageWatch.observe(main); }
  };
  return s;
}

// -- geometry ------------------------------------------------------------------------------
function viewSize(s) {
  return { W: s.port.clientWidth || 600, H: s.port.clientHeight || 400 };
}

// Node boxes in unscaled stage px, measured once per drawing (the minimap, "n of N in view").
function boxes(s) {
  if (s.boxes) return s.boxes;
  const sr = s.stage.getBoundingClientRect();
  const out = new Map();
  if (sr.width || sr.height) s.boxes = out;  // (a hidden view measures nothing: measure again later)
  for (const [name, g] of s.nodes) {
    const r = g.getBoundingClientRect();
    out.set(name, { x: (r.left - sr.left) / s.k, y: (r.top - sr.top) / s.k, w: r.width / s.k, h: r.height / s.k });
  }
  return out;
}

function inViewCount(s) {
  const { W, H } = viewSize(s);
  const x0 = -s.x / s.k, y0 = -s.y / s.k, x1 = x0 + W / s.k, y1 = y0 + H / s.k;
  let n = 0;
  for (const b of boxes(s).values()) if (b.x + b.w > x0 && b.x < x1 && b.y + b.h > y0 && b.y < y1) n++;
  return n;
}

function apply(s) {
  s.stage.style.transform = `translate(${s.x}px, ${s.y}px) scale(${s.k})`;
  s.view.dataset.scale = s.k.toFixed(4);
  // Linked viewers (Passes' before and after) pan and zoom together: tell the others the
  // scale and the view's centre as a fraction of the graph (the two graphs differ in size:
  // the same pixels would show the smaller one's empty margin).
  if (s.given && s.given.link && !s.linking && s.size && s.size.w && s.size.h) {
    const { W, H } = viewSize(s);
    const cx = (W / 2 - s.x) / (s.k * s.size.w), cy = (H / 2 - s.y) / (s.k * s.size.h);
    window.dispatchEvent(new CustomEvent("kx-link", { detail: { link: s.given.link, from: s, k: s.k, cx, cy } }));
  }
  s.view.dataset.fontPx = ((s.fontPx || 0) * s.k).toFixed(1);
  if (!s.svg) return;
  if (!s.statusQueued) {  // the counts and the map follow at most once a frame (panning stays smooth)
    s.statusQueued = requestAnimationFrame(() => { s.statusQueued = 0; status(s); });
  }
}

function status(s) {
  if (!s.svg) return;
  const total = s.nodes.size, shown = inViewCount(s);
  s.view.dataset.inView = String(shown);
  const overview = total && shown === total && (s.fontPx || 0) * s.k < MIN_FIT_FONT_PX;
  s.msg.textContent = overview
    ? `overview of all ${total.toLocaleString()} nodes · Aa or + to read them`
    : total && shown < total && s.nodes.size >= MAP_NODES
      ? `${shown.toLocaleString()} of ${total.toLocaleString()} nodes in view` +
        (s.k <= s.minK * 1.001 ? " · Fit (0) for all, or the map" : "")
      : "";
  s.view.classList.toggle("kx-has-msg", !!s.msg.textContent);
  drawMapView(s);
}

function zoomAt(s, factor, cx, cy) {
  const k = Math.min(8, Math.max(Math.min(s.fit, s.readable) * 0.5, s.k * factor));
  s.x = cx - (cx - s.x) * (k / s.k);
  s.y = cy - (cy - s.y) * (k / s.k);
  s.k = k;
  apply(s);
}

function centreAt(s, cx, cy) {  // stage px (unscaled) -> the middle of the box
  const { W, H } = viewSize(s);
  s.x = W / 2 - cx * s.k;
  s.y = H / 2 - cy * s.k;
  apply(s);
}

// A node's box in unscaled stage px, measured now: the cached boxes (the counts, the map) may
// predate a layout change above the box or a font that loaded late (search and deep links
// centred a node 257-3,275 px off the box on stale geometry: issue 38).
function freshBox(s, name) {
  const g = s.nodes && s.nodes.get(name);
  if (!g) return null;
  const sr = s.stage.getBoundingClientRect(), r = g.getBoundingClientRect();
  if (!sr.width && !sr.height) return null;  // not laid out (a hidden tab): nothing to centre on
  return { x: (r.left - sr.left) / s.k, y: (r.top - sr.top) / s.k, w: r.width / s.k, h: r.height / s.k };
}

function centreOn(s, name) {
  const b = freshBox(s, name);
  if (!b) return false;
  centreAt(s, b.x + b.w / 2, b.y + b.h / 2);
  clampView(s);
  return true;
}

// Never pan past the graph's edges into empty space (a node near the end is shown with the
// graph's end at the box's edge, not in the middle of a half-empty box); along an axis where
// the whole graph fits, it is centred.
function clampView(s) {
  const { W, H } = viewSize(s), w = s.size.w * s.k, h = s.size.h * s.k;
  s.x = w > W ? Math.min(MARGIN, Math.max(W - w - MARGIN, s.x)) : (W - w) / 2;
  s.y = h > H ? Math.min(MARGIN, Math.max(H - h - MARGIN, s.y)) : (H - h) / 2;
  apply(s);
}

// Whether the node is wholly inside the box on screen, from the DOM as drawn now (not from
// the pan/zoom arithmetic): what a student sees.
function isVisible(s, name) {
  const g = s.nodes && s.nodes.get(name);
  if (!g) return false;
  const r = g.getBoundingClientRect(), p = s.port.getBoundingClientRect();
  if (!r.width || !p.width) return false;
  const l = r.left - p.left, t = r.top - p.top, rt = r.right - p.left, b = r.bottom - p.top;
  return l >= -0.5 && t >= -0.5 && rt <= p.width + 0.5 && b <= p.height + 0.5 && !underMap(s, l, t, rt, b);
}

function underMap(s, l, t, r, b) {
  if (s.map.hidden) return false;
  const m = s.map, W = s.port.clientWidth, H = s.port.clientHeight;
  const ml = W - m.offsetWidth - 8, mt = H - m.offsetHeight - 8;
  return r > ml && b > mt;
}

// -- views ---------------------------------------------------------------------------------
// Fit: the whole graph, always: below the legible scale it is an overview, like a map (the
// box says so; Aa or + read it). Fit used to stop at 7-px text and showed 14 of 166 nodes.
function fitView(s) {
  const { W, H } = viewSize(s);
  s.k = s.fit;
  s.x = (W - s.size.w * s.k) / 2;
  s.y = Math.max(MARGIN / 2, (H - s.size.h * s.k) / 2);
  apply(s);
}

// The node a reader starts from: the topmost one (the graph's inputs), its middle if several.
function entryNode(s) {
  let best = null;
  for (const b of boxes(s).values()) if (!best || b.y < best.y - 1) best = b;
  return best;
}

// The first view: the whole graph when its text stays readable, else readable size
// centred on the highlighted node, or on the graph's first node (never an empty corner).
function initialView(s) {
  const { W, H } = viewSize(s);
  s.fit = Math.min((W - MARGIN) / s.size.w, (H - MARGIN) / s.size.h);
  s.readable = (s.data.min_font_px || 12) / s.fontPx;
  s.minK = Math.min(s.readable, MIN_FIT_FONT_PX / s.fontPx);
  // A small graph (a lesson's) is shown whole while its text stays legible on a projector.
  const least = s.nodes.size < MAP_NODES ? Math.min(s.readable, SMALL_GRAPH_FONT_PX / s.fontPx) : s.readable;
  const big = s.fit < least;
  showMap(s, s.mapWanted === null ? big && s.nodes.size >= MAP_NODES : s.mapWanted);
  if (!big) {
    s.k = s.fit;
    fitView(s);
    return;
  }
  s.k = s.readable;
  if (s.data.highlight && centreOn(s, s.data.highlight)) return;
  const top = entryNode(s);
  s.x = s.size.w * s.k < W ? (W - s.size.w * s.k) / 2 : top ? W / 2 - (top.x + top.w / 2) * s.k : 0;
  s.y = MARGIN;
  apply(s);
}

// -- the overview map ------------------------------------------------------------------------
function showMap(s, on) {
  s.map.hidden = !on;
  s.view.querySelector('[data-act="map"]').classList.toggle("kx-on", on);
  if (on && s.mapFor !== s.svg) {
    s.mapFor = s.svg;
    if (s.mapUrl) URL.revokeObjectURL(s.mapUrl);
    s.mapUrl = URL.createObjectURL(new Blob([serialise(s, false, true)], { type: "image/svg+xml" }));
    s.mapImg.src = s.mapUrl;
  }
  if (on) drawMapView(s);
}

// px of the map per stage px, per axis: uniform, but a chain 1,500 nodes tall is stretched
// to stay MAP_MIN_PX wide (and a very wide graph tall), so the map is never a hairline.
function mapScale(s) {
  const { W, H } = viewSize(s);
  const mw = Math.min(180, W * 0.3), mh = Math.min(220, H * 0.45);
  const k = Math.min(mw / s.size.w, mh / s.size.h);
  return { x: Math.max(k, Math.min(mw, MAP_MIN_PX) / s.size.w), y: Math.max(k, Math.min(mh, MAP_MIN_PX) / s.size.h) };
}

function drawMapView(s) {
  if (s.map.hidden || !s.svg) return;
  const m = mapScale(s), { W, H } = viewSize(s);
  s.mapImg.style.width = s.size.w * m.x + "px";
  s.mapImg.style.height = s.size.h * m.y + "px";
  const x0 = Math.max(0, -s.x / s.k), y0 = Math.max(0, -s.y / s.k);
  const x1 = Math.min(s.size.w, (W - s.x) / s.k), y1 = Math.min(s.size.h, (H - s.y) / s.k);
  Object.assign(s.mapView.style, {
    left: x0 * m.x + "px", top: y0 * m.y + "px",
    width: Math.max(2, (x1 - x0) * m.x) + "px", height: Math.max(2, (y1 - y0) * m.y) + "px",
  });
}

function mapPan(s, e) {
  const r = s.mapImg.getBoundingClientRect(), m = mapScale(s);
  s.touched = true;
  centreAt(s, (e.clientX - r.left) / m.x, (e.clientY - r.top) / m.y);
  clampView(s);  // the map's ends are the graph's ends
}

// -- export: exactly the drawing on screen (colours, highlight), the whole graph, the legend --
// region: {x, y, w, h} in stage px, the part to export (default: the whole graph).
function serialise(s, withLegend, stretch = false, region = null) {
  const svg = s.svg.cloneNode(true);
  const w = region ? region.w : s.size.w, h = region ? region.h : s.size.h;
  const vb = region
    ? (([x0, y0]) => `${x0 + region.x * 0.75} ${y0 + region.y * 0.75} ${region.w * 0.75} ${region.h * 0.75}`)(
        s.size.vb.split(" ").map(Number))
    : s.size.vb;
  svg.setAttribute("viewBox", vb);
  svg.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  svg.setAttribute("xmlns:xlink", "http://www.w3.org/1999/xlink");
  if (stretch) svg.setAttribute("preserveAspectRatio", "none");  // (the map of a tall chain)
  svg.removeAttribute("style");
  svg.removeAttribute("class");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  for (const g of svg.querySelectorAll("g.node.kx-current")) g.classList.remove("kx-current");
  const items = withLegend ? legendItems(s.data) : [];
  if (items.length) {  // the legend as rows of chips under the graph, whole (a narrow graph is widened)
    const [vx, vy, vw, vh] = vb.split(" ").map(Number);
    const rowPt = 20, fontPt = 10, room = Math.max(vw, LEGEND_MIN_PT);
    const NS = "http://www.w3.org/2000/svg";
    const g = document.createElementNS(NS, "g");
    g.setAttribute("font-family", "Helvetica,sans-Serif");
    g.setAttribute("font-size", fontPt);
    let x = vx + 4, row = 0, widest = 0;
    for (const [label, colour, stroke] of items) {
      const width = label.length * fontPt * 0.55 + 10;
      if (x > vx + 4 && x + width > vx + room - 4) { x = vx + 4; row++; }  // wrap: no chip is cut
      const y = vy + vh + 3 + row * rowPt;
      const r = document.createElementNS(NS, "rect");
      Object.entries({ x, y, width, height: rowPt - 6, rx: 3, fill: colour, stroke: stroke || "#888888",
        "stroke-width": stroke ? 2 : 0.75 }).forEach(([k, v]) => r.setAttribute(k, v));
      const t = document.createElementNS(NS, "text");
      t.setAttribute("x", x + 5);
      t.setAttribute("y", y + rowPt - 9.5);
      t.textContent = label;
      g.append(r, t);
      x += width + 6;
      widest = Math.max(widest, x - vx);
    }
    const W2 = Math.max(vw, widest + 4), H2 = vh + (row + 1) * rowPt;
    svg.setAttribute("viewBox", `${vx} ${vy} ${W2} ${H2}`);
    svg.setAttribute("width", W2 * 4 / 3);
    svg.setAttribute("height", H2 * 4 / 3);
    svg.appendChild(g);
  }
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(svg);
}

function legendItems(d) {
  const items = (d.legend || []).map(([label, colour]) => [label, colour, null]);
  if (d.highlight && d.highlight_label) items.push([d.highlight_label, "#ffffff", CURRENT]);
  if ((d.marks || []).length && d.marks_label) items.push([d.marks_label, "#ffffff", MARK]);
  return items;
}

function exportSvg(s) {
  return s.svg ? serialise(s, true) : "";
}

// The part of the graph in the box, in stage px (for a PNG the whole graph would make unreadable).
function regionInView(s) {
  const { W, H } = viewSize(s);
  const x0 = Math.max(0, -s.x / s.k), y0 = Math.max(0, -s.y / s.k);
  const x1 = Math.min(s.size.w, (W - s.x) / s.k), y1 = Math.min(s.size.h, (H - s.y) / s.k);
  return { x: x0, y: y0, w: Math.max(1, x1 - x0), h: Math.max(1, y1 - y0) };
}

// The PNG's scale for a drawing of w x h px: at most 2x, within the canvas's limits.
function pngScale(w, h) {
  return Math.min(2, EXPORT_MAX_PX / w, EXPORT_MAX_PX / h, Math.sqrt(EXPORT_MAX_AREA / (w * h)));
}

function exportPng(s) {
  return new Promise((resolve, reject) => {
    if (!s.svg) { reject(new Error("nothing drawn")); return; }
    // A tall graph (deep1500: 18 x 16,000 px, unreadable) exports the part in view instead,
    // and says so; the SVG always has the whole graph.
    const whole = pngScale(s.size.w, s.size.h) * (s.fontPx || 14) >= EXPORT_MIN_FONT_PX;
    s.view.dataset.pngPart = whole ? "whole" : "view";
    if (!whole) s.msg.textContent = "PNG: the part in view (the whole graph would be unreadable; the SVG has it all)";
    const text = serialise(s, true, false, whole ? null : regionInView(s));
    const img = new Image();
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    img.onload = () => {
      const w = img.naturalWidth || s.size.w, h = img.naturalHeight || s.size.h;
      const k = pngScale(w, h);
      const c = document.createElement("canvas");
      c.width = Math.max(1, Math.round(w * k));
      c.height = Math.max(1, Math.round(h * k));
      const ctx = c.getContext("2d");
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, c.width, c.height);
      ctx.drawImage(img, 0, 0, c.width, c.height);
      URL.revokeObjectURL(url);
      resolve(c.toDataURL("image/png"));
    };
    img.onerror = () => { URL.revokeObjectURL(url); reject(new Error("the SVG could not be drawn")); };
    img.src = url;
  });
}

function download(name, href) {
  const a = document.createElement("a");
  a.href = href;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

async function exportFile(s, kind) {
  if (!s.svg) return;
  const name = (s.data.export_name || "graph") + "." + kind;
  if (kind === "svg") {
    const url = URL.createObjectURL(new Blob([exportSvg(s)], { type: "image/svg+xml" }));
    download(name, url);
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } else {
    download(name, await exportPng(s));
  }
}

// -- events --------------------------------------------------------------------------------
function wireEvents(s) {
  const v = s.view, port = s.port;
  port.addEventListener("wheel", e => {
    e.preventDefault();
    s.touched = true;
    const r = port.getBoundingClientRect();
    zoomAt(s, Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  port.addEventListener("pointerdown", e => {
    if (e.target.closest(".kx-map")) {
      drag = { map: true };
      port.setPointerCapture(e.pointerId);
      mapPan(s, e);
      return;
    }
    drag = { x0: e.clientX, y0: e.clientY, x: s.x, y: s.y, moved: false, target: e.target };
  });
  port.addEventListener("pointermove", e => {
    if (!drag) return;
    if (drag.map) { mapPan(s, e); return; }
    const dx = e.clientX - drag.x0, dy = e.clientY - drag.y0;
    if (!drag.moved && Math.hypot(dx, dy) > 4) {
      drag.moved = true;
      port.setPointerCapture(e.pointerId);
      v.classList.add("kx-dragging");
    }
    if (drag.moved) { s.touched = true; s.x = drag.x + dx; s.y = drag.y + dy; apply(s); }
  });
  const end = () => {
    if (!drag) return;
    const d = drag;
    drag = null;
    v.classList.remove("kx-dragging");
    if (d.map || d.moved || !s.data.clickable) return;
    const g = d.target.closest && d.target.closest("g.node, g.cluster");  // a cluster: its frame or name
    const t = g && titleOf(g);
    if (t) {
      s.clickedTitle = t;  // the user pointed at it: it is where they look, do not move it
      s.setTrigger("clicked", t);
    }
  };
  port.addEventListener("pointerup", end);
  port.addEventListener("pointercancel", () => { drag = null; });
  v.addEventListener("keydown", e => {
    const act = { "+": "in", "=": "in", "-": "out", "0": "fit", "1": "read", f: "full", m: "map" }[e.key];
    if (!act) return;
    e.stopPropagation();
    act_(s, act);
  });
  s.wrap.querySelector(".kx-tools").addEventListener("click", e => {
    const b = e.target.closest("button");
    if (b) act_(s, b.dataset.act);
  });
  s.onResize = () => requestFit(s);  // (a projector's window, a resized browser)
  window.addEventListener("resize", s.onResize);
  document.addEventListener("fullscreenchange", () => {
    if (document.fullscreenElement === s.wrap || s.wasFull) {
      s.wasFull = document.fullscreenElement === s.wrap;
      requestAnimationFrame(() => { s.touched = false; if (s.svg) initialView(s); });
    }
  });
}

function act_(s, act) {
  const { W, H } = viewSize(s);
  if (act === "svg" || act === "png") { exportFile(s, act); return; }
  if (act === "full") { toggleFull(s); return; }
  if (!s.svg) return;
  s.touched = true;
  if (act === "in") zoomAt(s, 1.25, W / 2, H / 2);
  else if (act === "out") zoomAt(s, 0.8, W / 2, H / 2);
  else if (act === "fit") fitView(s);
  else if (act === "read") {
    zoomAt(s, s.readable / s.k, W / 2, H / 2);
    if (s.data.highlight) centreOn(s, s.data.highlight);
  } else if (act === "map") {
    s.mapWanted = s.map.hidden;
    showMap(s, s.mapWanted);
  }
}

function toggleFull(s) {
  if (document.fullscreenElement) document.exitFullscreen();
  else if (s.wrap.requestFullscreen) s.wrap.requestFullscreen();
}

// -- following the source drawing ----------------------------------------------------------------
// A big graph laid out in Python comes as data once per session (svg_id, svg); later runs
// send only its id and the copy kept here (page-wide: a remounted viewer finds it) is drawn.
const SVGS = window.__kxSvgs || (window.__kxSvgs = new Map());
const SVGS_KEPT = 8;

function sourceSvg(s) {
  const id = s.data.svg_id;
  if (id) {
    if (s.data.svg) {
      SVGS.delete(id);
      SVGS.set(id, s.data.svg);
      while (SVGS.size > SVGS_KEPT) SVGS.delete(SVGS.keys().next().value);
    }
    const text = SVGS.get(id);
    if (text === undefined) {  // (a run that never reached the browser): ask for it again
      if (s.askedFor !== id) { s.askedFor = id; s.setTrigger("missing", id); }
      return null;
    }
    if (s.svgId !== id) {
      const holder = document.createElement("div");
      holder.innerHTML = text;
      s.svgId = id;
      s.svgEl = holder.querySelector("svg");
    }
    return s.svgEl;
  }
  const block = s.root.closest('[data-testid="stVerticalBlock"]');
  return block && block.querySelector('[data-testid="stGraphVizChart"] svg');
}

// Copy the rendered SVG whenever its content differs from what was copied last. Streamlit
// redraws into the same <svg> in place (a step may change only fills and a label of equal
// length), so nothing short of the content tells a new drawing from the old one.
function sync(s) {
  const src = sourceSvg(s);
  if (!src) return false;
  const own = !!s.data.svg_id;  // an SVG given as data is a new element exactly when it changed
  const html = own ? null : src.outerHTML;
  if (src === s.src && (own || html === s.srcHtml)) return false;
  s.srcHtml = html;
  s.view.dataset.syncs = String((+s.view.dataset.syncs || 0) + 1);  // how often a new drawing was copied
  const size = naturalSize(src);
  const clone = own ? src : src.cloneNode(true);
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
  s.boxes = null;
  s.nodes = new Map();
  s.edges = new Map();
  for (const g of clone.querySelectorAll("g.edge")) {
    const t = titleOf(g);
    if (t === null) continue;
    s.edges.set(t, g);
    for (const p of g.querySelectorAll("path, polygon")) {
      p.dataset.kxStroke = p.getAttribute("stroke") || "black";
      p.dataset.kxWidth = p.getAttribute("stroke-width") || "1";
      p.dataset.kxDash = p.getAttribute("stroke-dasharray") || "";
      if (p.tagName === "polygon") p.dataset.kxFill = p.getAttribute("fill") || "black";
    }
  }
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
  // The same layout redrawn (a walkthrough step): keep the user's view.
  const sig = size.vb + "|" + [...s.nodes.keys()].join("\u0001");
  s.size = size;
  s.fontPx = nodeFontPx(clone);
  const same = sig === s.sig;
  s.sig = sig;
  s.view.dataset.nodes = String(s.nodes.size);
  if (!same) { s.lastHighlight = undefined; s.touched = false; initialView(s); }
  else { apply(s); if (!s.map.hidden) { s.mapFor = null; showMap(s, true); } }
  return true;
}

function paint(s) {
  if (!s.svg) return;
  const d = s.data;
  const colors = d.colors || {};
  const marks = new Set(d.marks || []);
  for (const [name, g] of s.nodes) {
    const shape = shapeOf(g);
    if (!shape) continue;
    const fill = colors[name] || (d.neutral ? d.neutral_color : shape.dataset.kxFill);
    shape.setAttribute("fill", fill);
    const current = name === d.highlight, marked = marks.has(name);
    g.classList.toggle("kx-current", current);
    g.classList.toggle("kx-mark", marked);
    shape.setAttribute("stroke", current ? CURRENT : marked ? MARK : shape.dataset.kxStroke);
    shape.setAttribute("stroke-width", current ? "4" : marked ? "3" : shape.dataset.kxWidth);
  }
  if (d.texts) paintTexts(s, d.texts);
  if (d.frames) paintEdges(s, d.edges || {});
  s.view.dataset.highlight = d.highlight || "";
  s.view.classList.toggle("kx-clickable", !!d.clickable);
  const items = legendItems(d).map(([label, colour, stroke]) => stroke
    ? `<span class="kx-chip" style="background:#fff;border:3px solid ${esc(stroke)}">${esc(label)}</span>`
    : `<span class="kx-chip" style="background:${esc(colour)}">${esc(label)}</span>`);
  const legend = items.join("") + (d.note ? `<span class="kx-note">${esc(d.note)}</span>` : "");
  if (legend !== s.legendHtml) {  // (rewriting an equal legend would make the page lay out again)
    s.legendHtml = legend;
    s.legend.innerHTML = legend;
    s.legend.style.display = legend ? "" : "none";
  }
  const h = d.highlight;
  if (h && h !== s.lastHighlight && s.nodes.has(h)) {
    // A selection made outside the drawing (a picker, a search, a step) is centred when it
    // is not in view; a node the user just clicked stays where it is.
    if ((d.follow || d.centre) && h !== s.clickedTitle && !isVisible(s, h)) { s.touched = true; centreOn(s, h); }
    s.lastHighlight = h;
  } else if (!h) s.lastHighlight = undefined;
  s.clickedTitle = null;
  // The page may still be settling above the box (a rerun's new elements): measure again.
  s.watchPage();
  requestFit(s);
}

// A step's label lines (Kahn's in-degrees, DFS's places): the drawing has the room of the
// longest (walk_frames.base_dot), and each <text> of a node is one line.
function paintTexts(s, texts) {
  for (const [name, lines] of Object.entries(texts)) {
    const g = s.nodes.get(name);
    if (!g) continue;
    const els = g.querySelectorAll("text");
    els.forEach((t, i) => { const v = lines[i] ?? ""; if (t.textContent !== v) t.textContent = v; });
  }
}

function paintEdges(s, edges) {
  for (const [name, g] of s.edges) {
    const kind = edges[name];
    for (const p of g.querySelectorAll("path, polygon")) {
      const colour = kind === "current" ? CURRENT : kind === "removed" ? "#bbbbbb" : p.dataset.kxStroke;
      p.setAttribute("stroke", colour);
      p.setAttribute("stroke-width", kind === "current" ? "2.5" : p.dataset.kxWidth);
      if (kind === "removed" && p.tagName === "path") p.setAttribute("stroke-dasharray", "5,2");
      else if (p.dataset.kxDash) p.setAttribute("stroke-dasharray", p.dataset.kxDash);
      else p.removeAttribute("stroke-dasharray");
      if (p.tagName === "polygon") p.setAttribute("fill", kind ? colour : p.dataset.kxFill);
    }
  }
}

// Steps in the browser: the frame of the group's step over the data the page sent.
function frameData(s) {
  const d = s.given, frames = d.frames;
  if (!frames || !frames.length) return d;
  const at = (window.__kxSteps || {})[d.group];
  const i = Math.max(0, Math.min(frames.length - 1, at ?? d.step ?? 0));
  s.view.dataset.step = String(i);
  if (!d.additive) return { ...d, ...frames[i] };
  // Each frame holds the fills its step adds (Forward): step i's are frames 0..i's, merged.
  const colors = { ...(d.colors || {}) };
  for (let k = 0; k <= i; k++) Object.assign(colors, frames[k].colors);
  return { ...d, ...frames[i], colors };
}

// The box is at least as tall as asked and grows to the window (1080p uses the screen), but
// never taller than what is left of the window below its top, so the legend under it stays
// on screen (a projector at 1280x720 sees the whole box and its legend).
function scrollParent(el) {
  for (let p = el.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowY;
    if ((o === "auto" || o === "scroll") && p.scrollHeight > p.clientHeight) return p;
  }
  return null;
}

// At most one measurement a frame: a rerun resizes the page many times, and each
// measurement forces the browser to lay the page out.
function requestFit(s) {
  if (s.fitQueued) return;
  s.fitQueued = requestAnimationFrame(() => { s.fitQueued = 0; fitHeight(s); });
}

function fitHeight(s) {
  const want = s.data.height || 560;
  const sp = scrollParent(s.view);
  const top = s.view.getBoundingClientRect().top + (sp ? sp.scrollTop - sp.getBoundingClientRect().top : window.scrollY);
  if (document.fullscreenElement === s.wrap) return;
  const room = window.innerHeight - top - 12 - Math.max(24, s.legend.offsetHeight);
  const grow = Math.max(want, Math.min(room, want * 1.6));
  const h = Math.round(Math.max(Math.min(MIN_BOX_PX, want), Math.min(grow, room))) + "px";
  if (s.view.style.height !== h) s.view.style.height = h;
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
  s.observer = new MutationObserver(records => {
    if (s.pending || records.every(r => s.wrap.contains(r.target))) return;  // our own repaint or pan
    s.pending = requestAnimationFrame(() => { s.pending = 0; if (sync(s)) paint(s); });
  });
  // Attributes and text too: a redraw in place may change only a fill or a label.
  s.observer.observe(block, { childList: true, subtree: true, attributes: true, characterData: true });
  fitHeight(s);
  if (sync(s)) paint(s);
}

export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let s = parentElement.__kx;
  const fresh = !s;
  if (fresh) s = parentElement.__kx = build(parentElement);
  s.setTrigger = setTriggerValue;
  s.given = data || {};
  s.data = frameData(s);
  if (s.given.frames && !s.onStep) {
    s.onStep = e => {
      if (e.detail.group !== s.given.group) return;
      s.data = frameData(s);
      s.data.follow = true;  // a step in the browser: the node it is about stays in view
      paint(s);
    };
    window.addEventListener("kx-step", s.onStep);
  }
  if (s.given.link && !s.onLink) {
    s.onLink = e => {
      if (e.detail.link !== s.given.link || e.detail.from === s || !s.svg || !s.size || !s.size.w) return;
      const { W, H } = viewSize(s);
      s.linking = true;  // (no echo back)
      s.k = e.detail.k;
      s.x = W / 2 - e.detail.cx * s.k * s.size.w;
      s.y = H / 2 - e.detail.cy * s.k * s.size.h;
      apply(s);
      s.linking = false;
    };
    window.addEventListener("kx-link", s.onLink);
  }
  if (fresh) {
    s.view.style.height = (s.data.height || 560) + "px";
    attach(s);
  } else if (s.data.svg_id || sourceSvg(s) !== s.src) {
    sync(s);  // (Streamlit's drawing changing in place is seen by the observer)
  }
  s.height = s.data.height;
  paint(s);
  return () => {
    if (s.observer) s.observer.disconnect();
    if (s.resize) s.resize.disconnect();
    if (s.legendWatch) s.legendWatch.disconnect();
    if (s.pageWatch) s.pageWatch.disconnect();
    cancelAnimationFrame(s.fitQueued);
    if (s.mapUrl) URL.revokeObjectURL(s.mapUrl);
    window.removeEventListener("resize", s.onResize);
    if (s.onStep) window.removeEventListener("kx-step", s.onStep);
    if (s.onLink) window.removeEventListener("kx-link", s.onLink);
    clearTimeout(s.timer);
    delete parentElement.__kx;
  };
}
