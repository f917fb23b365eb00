"""Draw a digit with the mouse (or a finger) and use it as the model's input.

A small st.components.v2 component: a canvas with dark ink on white paper, sent back as
28×28 grey pixels when a stroke ends; the model's own picture preprocessing (models.json:
invert, area-resize, scale) turns it into the input tensor, exactly as for an uploaded
picture.
"""

from __future__ import annotations

import io

import numpy as np
import streamlit as st

from pages import common

SIDE = 28  # pixels sent back (the browser averages the 224 px canvas down to this)

_JS = """
export default function (component) {
  const { data, setStateValue, parentElement: root } = component;
  let s = root.__pad;
  if (!s) {
    root.innerHTML = '<div class="kx-pad"><canvas width="224" height="224"></canvas>' +
      '<div><button type="button">Clear</button><span>draw with the mouse: dark ink on white paper</span></div></div>';
    const canvas = root.querySelector("canvas"), ctx = canvas.getContext("2d");
    s = root.__pad = { canvas, ctx, drawing: false };
    const clear = () => { ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, 224, 224); };
    clear();
    if (data && data.pixels && data.pixels.length === %(n)d) {
      const small = document.createElement("canvas"); small.width = small.height = %(side)d;
      const img = small.getContext("2d").createImageData(%(side)d, %(side)d);
      data.pixels.forEach((v, i) => { img.data.set([v, v, v, 255], 4 * i); });
      small.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false; ctx.drawImage(small, 0, 0, 224, 224);
    }
    const send = () => {
      const small = document.createElement("canvas"); small.width = small.height = %(side)d;
      const sctx = small.getContext("2d");
      sctx.imageSmoothingEnabled = true; sctx.imageSmoothingQuality = "high";
      sctx.drawImage(canvas, 0, 0, %(side)d, %(side)d);
      const px = sctx.getImageData(0, 0, %(side)d, %(side)d).data, out = [];
      for (let i = 0; i < px.length; i += 4) out.push(Math.round((px[i] + px[i + 1] + px[i + 2]) / 3));
      s.setState("pixels", out);
    };
    const at = e => { const r = canvas.getBoundingClientRect(); return [(e.clientX - r.left) * 224 / r.width, (e.clientY - r.top) * 224 / r.height]; };
    canvas.addEventListener("pointerdown", e => {
      s.drawing = true; canvas.setPointerCapture(e.pointerId);
      const [x, y] = at(e); ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + 0.1, y + 0.1);
      ctx.strokeStyle = "#000"; ctx.lineWidth = 20; ctx.lineCap = ctx.lineJoin = "round"; ctx.stroke();
    });
    canvas.addEventListener("pointermove", e => { if (!s.drawing) return; const [x, y] = at(e); ctx.lineTo(x, y); ctx.stroke(); });
    const end = () => { if (s.drawing) { s.drawing = false; send(); } };
    canvas.addEventListener("pointerup", end);
    canvas.addEventListener("pointerleave", end);
    root.querySelector("button").addEventListener("click", () => { clear(); send(); });
  }
  s.setState = setStateValue;
}
""" % {"side": SIDE, "n": SIDE * SIDE}  # noqa: UP031  (JavaScript braces: no str.format)
_CSS = """
.kx-pad canvas { border: 1px solid #999; border-radius: 6px; touch-action: none; cursor: crosshair; width: 224px; height: 224px; }
.kx-pad button { margin: 4px 8px 0 0; padding: 2px 10px; border-radius: 6px; border: 1px solid #aaa; background: #fff; cursor: pointer; }
.kx-pad span { font: 13px sans-serif; color: #666; }
"""
_pad = st.components.v2.component("kx_digit_pad", js=_JS, css=_CSS, isolate_styles=False)


def pixels_to_input(pixels: list[int], model: common.LoadedModel, shape: tuple[int, ...]) -> np.ndarray | None:
    """28×28 grey pixels (0 ink .. 255 paper) -> the model's input, or None for a blank pad."""
    from PIL import Image

    grey = np.asarray(pixels, np.uint8).reshape(SIDE, SIDE)
    if grey.min() > 250:
        return None
    buf = io.BytesIO()
    Image.fromarray(grey, mode="L").save(buf, format="PNG")
    return common.picture_to_input(buf.getvalue(), model, shape)


def digit_pad(model: common.LoadedModel, shape: tuple[int, ...]) -> None:
    def _drawn() -> None:
        pixels = (st.session_state.get("home_pad") or {}).get("pixels")
        array = pixels_to_input(pixels, model, shape) if pixels else None
        common.set_input_array("drawing", array, None)

    state = st.session_state.get("home_pad") or {}
    _pad(key="home_pad", data={"pixels": state.get("pixels")}, on_pixels_change=_drawn, width="content")
