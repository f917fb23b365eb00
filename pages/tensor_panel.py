"""One tensor on screen, drawn by its shape (kuiper_core.explore.tensor_view decides how).

Vectors are line or bar plots with their largest entries, matrices capped heatmaps with
axes and hover values (above 32×32 cells a picture with a colour bar: one PNG, not a chart
of thousands of marks), higher ranks a 2-D slice with a picker per other axis (and the
channels as a mosaic), always with a value table; with a reference, the difference
|engine - reference| is a heatmap of the same slice.
"""

from __future__ import annotations

from typing import Any, Literal
from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core.explore import compare
from kuiper_core.explore import tensor_view
from kuiper_core.explore import tensors

HEAT_W, HEAT_H = 400, 380  # px a heatmap may take, axes and legend included (half a 1280 px screen)
NUMBER = ".4~g"


# Charts are plain Vega-Lite specs (st.vega_lite_chart): Altair's schema validation alone
# took ~0.1 s per heatmap, on every step.
def _axis(title: str, fmt: str = ".4~g", **extra: Any) -> dict[str, Any]:
    return {"title": title, "format": fmt, "labelOverlap": True, **extra}


def histogram_chart(a: np.ndarray, height: int = 160) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Counts of the finite values in 40 bins, axes with short numbers."""
    hist = pd.DataFrame(tensors.histogram_table(a))
    spec = {
        "mark": {"type": "bar"},
        "height": height,
        "encoding": {
            "x": {"field": "start", "type": "quantitative", "bin": "binned", "axis": _axis("value", tickCount=6)},
            "x2": {"field": "end"},
            "y": {"field": "count", "type": "quantitative", "axis": _axis("count", "~s", tickCount=4)},
            "tooltip": [
                {"field": "start", "type": "quantitative", "format": NUMBER},
                {"field": "end", "type": "quantitative", "format": NUMBER},
                {"field": "count", "type": "quantitative"},
            ],
        },
    }
    return hist, spec


def heatmap_chart(
    m: np.ndarray,
    row_title: str,
    col_title: str,
    scheme: str = "viridis",
    domain: tuple[float, float] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any], str]:
    """A capped heatmap of a 2-D array (data, spec) and a caption saying what was averaged."""
    cells, (fr, fc) = tensor_view.block_reduce(m, tensor_view.MAX_HEATMAP, tensor_view.MAX_HEATMAP)
    rows, cols = cells.shape
    cell_h = min(36.0, max(4.0, HEAT_H / rows))
    cell_w = min(36.0, max(4.0, HEAT_W / cols))
    df = pd.DataFrame(tensor_view.heatmap_rows(cells, (fr, fc)))
    # Cell i spans [i - 0.5, i + 0.5): integer ticks sit on the cells' middles and run 0..n-1
    # (edges at 0..n labelled 8 rows 0 to 8). Computed here, not as Vega transforms: the
    # browser's CSP-safe Vega interprets an expression per cell (a 96x96 slice: 9,216 a pass).
    for a, b in (("col", "x0"), ("col_end", "x1"), ("row", "y0"), ("row_end", "y1")):
        df[b] = (df[a] - 0.5).astype(np.float32)
    bad = bool(df["nonfinite"].any())
    # Only what the chart reads, in 4-byte columns: a 56x56 slice went as 230 KB, each step.
    df = df[["row", "col", "x0", "x1", "y0", "y1", "value"] + (["nonfinite"] if bad else [])].astype(
        {"row": np.int32, "col": np.int32, "value": np.float32}
    )
    nrows, ncols = m.shape if m.ndim == 2 else (1, m.shape[0])
    enc = {
        "x": {
            "field": "x0",
            "type": "quantitative",
            "scale": {"domain": [-0.5, ncols - 0.5], "nice": False, "zero": False},
            "axis": _axis(col_title, "d", tickMinStep=1),
        },
        "x2": {"field": "x1"},
        "y": {
            "field": "y0",
            "type": "quantitative",
            "scale": {"domain": [-0.5, nrows - 0.5], "nice": False, "zero": False, "reverse": True},
            "axis": _axis(row_title, "d", tickMinStep=1),
        },
        "y2": {"field": "y1"},
        "tooltip": [
            {"field": "row", "type": "quantitative", "title": row_title},
            {"field": "col", "type": "quantitative", "title": col_title},
            {"field": "value", "type": "quantitative", "format": NUMBER},
        ],
    }
    spec = {
        "width": min(HEAT_W, round(cols * cell_w) + 90),  # + the row axis and the colour legend
        "height": round(rows * cell_h) + 45,  # + the column axis
        "autosize": {"type": "fit", "contains": "padding"},  # the axes and legend inside that box
        "layer": [
            {
                "mark": {"type": "rect"},
                "encoding": {
                    **enc,
                    "color": {
                        "field": "value",
                        "type": "quantitative",
                        "scale": {"scheme": scheme, **({"domain": list(domain)} if domain is not None else {})},
                        "legend": {"title": None, "format": ".4~g"},
                    },
                },
            }
        ],
    }
    if bad:  # NaN/Inf cells in magenta on top (filters only then: each costs a pass per cell)
        spec["layer"][0]["transform"] = [{"filter": "datum.value !== null"}]
        spec["layer"].append(
            {
                "mark": {"type": "rect", "color": "#ff00ff"},
                "transform": [{"filter": "datum.nonfinite"}],
                "encoding": enc,
            }
        )
    return df, spec, _notes((fr, fc), (nrows, ncols), abs(cell_w - cell_h) > 1, bad)


def _notes(factors: tuple[int, int], shape: tuple[int, int], stretched: bool, nonfinite: bool) -> str:
    """What a heatmap's caption must say: block means, stretched cells, NaN/Inf."""
    notes = []
    if factors[0] > 1 or factors[1] > 1:
        notes.append(f"each cell is the mean of a {factors[0]}×{factors[1]} block ({shape[0]:,}×{shape[1]:,} values)")
    if stretched:
        notes.append("cells are stretched to fit")
    if nonfinite:
        notes.append("magenta: NaN/Inf")
    return "; ".join(notes)


def _cells(m: np.ndarray) -> int:
    """Cells of m's heatmap (after the block means beyond MAX_HEATMAP)."""
    rows, cols = m.shape if m.ndim == 2 else (1, m.shape[-1])
    cap = tensor_view.MAX_HEATMAP
    return min(rows, cap) * min(cols, cap)


def heatmap_picture(
    m: np.ndarray, row_title: str, col_title: str, scheme: str = "viridis", domain: tuple[float, float] | None = None
) -> str:
    """A big heatmap drawn as a picture (one PNG, no chart: see tensor_view.heatmap_image),
    its axes and colour scale said in the caption; returns the notes heatmap_chart would."""
    pic = tensor_view.heatmap_image(m, HEAT_W, HEAT_H, scheme, domain=domain)
    nrows, ncols = m.shape if m.ndim == 2 else (1, m.shape[0])
    st.image(
        pic.rgb,
        caption=f"rows: {row_title} (0 at the top) · columns: {col_title} · colour bar: "
        f"{pic.lo:.4g} (bottom) to {pic.hi:.4g} (top); 'values' shows the numbers",
    )
    return _notes(pic.factors, (nrows, ncols), pic.stretched, pic.nonfinite)


def vector_chart(v: np.ndarray) -> tuple[pd.DataFrame, dict[str, Any]]:
    df = pd.DataFrame(tensor_view.vector_rows(v))
    short = len(df) <= 64
    spec = {
        "mark": {"type": "bar"} if short else {"type": "line", "point": len(df) <= 200},
        "height": 220,
        "encoding": {
            "x": {"field": "index", "type": "ordinal" if short else "quantitative", "axis": _axis("index", "d")},
            "y": {"field": "value", "type": "quantitative", "axis": _axis("value")},
            "tooltip": [
                {"field": "index", "type": "quantitative"},
                {"field": "value", "type": "quantitative", "format": NUMBER},
            ],
        },
    }
    return df, spec


def chart(data_and_spec: tuple, width: Literal["stretch", "content"] = "stretch") -> None:
    data, spec = data_and_spec[0], data_and_spec[1]
    st.vega_lite_chart(data, spec, width=width)


def value_table(m: np.ndarray) -> None:
    part, cut = tensor_view.table_slice(m)
    st.dataframe(pd.DataFrame(part), width="stretch", height=min(320, 38 + 35 * part.shape[0]))
    if cut:
        st.caption(
            f"Table shows the first {part.shape[0]:,} rows and {part.shape[1]} columns; download the .npy for all."
        )


def _axis_name(ndim: int, axis: int, size: int) -> str:
    letter = "NCHW"[axis] if ndim == 4 else None
    return f"dim {axis}" + (f" ({letter}={size})" if letter else f" (size {size})")


def _pick_slice(a: np.ndarray, lay: tensor_view.Layout, key: str) -> tuple[np.ndarray, str, str]:
    """Widgets choosing the 2-D slice of an N-D tensor: two axes shown, an index for each
    other axis (dims numbered as in the tensor's own shape, indices from 0 like NumPy)."""
    full = np.asarray(a)
    axes = list(range(lay.lead, full.ndim))
    names = {ax: _axis_name(full.ndim, ax, full.shape[ax]) for ax in range(full.ndim)}
    c1, c2 = st.columns(2)
    rows = c1.selectbox("Rows", axes, index=len(axes) - 2, format_func=names.__getitem__, key=f"{key}_rows")
    cols = c2.selectbox(
        "Columns",
        [ax for ax in axes if ax != rows],
        index=len(axes) - 2 if axes[-1] != rows else len(axes) - 2,
        format_func=names.__getitem__,
        key=f"{key}_cols",
    )
    index = {}
    others = [ax for ax in range(full.ndim) if ax not in (rows, cols)]
    pickers = [ax for ax in others if full.shape[ax] > 1]
    if pickers:
        cols_ = st.columns(len(pickers))
        for col, ax in zip(cols_, pickers):
            index[ax] = col.slider(f"index along {names[ax]}", 0, full.shape[ax] - 1, 0, key=f"{key}_ix{ax}")
    m = tensor_view.slice_2d(full, rows, cols, index)
    where = ", ".join(f"{names[ax].split(' ')[0]} {ax}={index.get(ax, 0)}" for ax in others)
    return m, names[rows], names[cols] + (f" · at {where}" if where else "")


VIEWS = ["picture", "values", "histogram", "difference"]


def show_tensor(
    a: np.ndarray,
    key: str,
    *,
    ref: np.ndarray | None = None,
    labels: Sequence[str] | None = None,
    ref_source: str = "the reference",
    view_key: str | None = None,
    stats: bool = True,
) -> None:
    """Stats, then one view: a picture chosen by shape, the values, the histogram, or the
    difference to `ref`. Only the chosen view is drawn (a step stays quick); `view_key`
    keeps the choice across tensors and steps. stats=False: the caller shows them (Forward's
    step panel, drawn in the browser)."""
    s = tensors.tensor_stats(a)
    if stats:
        cols = ["min", "max", "mean", "std", "nan", "inf"]
        st.dataframe(pd.DataFrame([{k: _fmt(s[k]) for k in cols}]), hide_index=True, width="stretch")
    if s["nan"] or s["inf"]:
        st.warning(f"{s['nan']} NaN and {s['inf']} Inf values")
    comparison = compare.compare(a, ref) if ref is not None else None
    if comparison is not None:
        level = {compare.OK: st.success, compare.OVER: st.error, compare.SHAPE: st.error}[comparison.status]
        level(f"Against {ref_source}: {comparison.text()}")
    lay = tensor_view.layout(a)
    core = tensor_view.core(a)
    views = VIEWS if comparison is not None and comparison.status != compare.SHAPE else VIEWS[:3]
    vk = view_key or f"{key}_view"
    if st.session_state.get(vk) not in views:
        st.session_state[vk] = "picture"
    view = st.segmented_control("View", views, key=vk, required=True, label_visibility="collapsed")
    if lay.kind in ("none", "empty"):
        st.caption(f"Nothing to draw ({'no values' if lay.kind == 'empty' else s['dtype']}).")
    elif view == "histogram":
        chart(histogram_chart(a))
    elif lay.kind == "scalar":
        st.markdown(f"### {_fmt(core.item() if hasattr(core, 'item') else core)}")
    elif lay.kind == "vector":
        if view == "values":
            value_table(core)
        else:
            shown = compare.difference(a, ref).reshape(lay.core) if view == "difference" and ref is not None else core
            chart(vector_chart(shown))
            if view == "picture" and core.size >= 10:
                top = tensor_view.top_entries(core, 5, labels)
                st.caption(
                    "Largest entries: "
                    + ", ".join(
                        (f"class {r['label']}" if "label" in r else f"[{r['index']}]") + f" = {r['value']:.4g}"
                        for r in top
                    )
                )
    else:
        if lay.kind == "matrix":
            m, row_title, col_title = core, "row", "column"
            diff_m = compare.difference(a, ref).reshape(lay.core) if view == "difference" and ref is not None else None
        else:
            if view == "picture" and len(lay.core) == 3 and lay.core[0] > 1:
                mosaic, shown_ch = tensors.channel_grid(core[None])
                more = f" (first {len(shown_ch)} of {lay.core[0]})" if len(shown_ch) < lay.core[0] else ""
                st.image(mosaic, caption=f"channels{more}, each on its own scale (viridis; magenta = NaN/Inf)")
            m, row_title, col_title = _pick_slice(a, lay, key)
            diff_m = (
                tensor_view.slice_2d(
                    compare.difference(a, ref),
                    *_current_axes(key, lay),
                    {ax: st.session_state.get(f"{key}_ix{ax}", 0) for ax in range(a.ndim)},
                )
                if view == "difference" and ref is not None
                else None
            )
        if view == "values":
            value_table(m)
        else:
            shown, scheme = (m, "viridis") if diff_m is None else (diff_m, "reds")
            # a difference is coloured from 0 to max(tolerance, its largest): noise stays pale
            tolerance = comparison.tolerance if comparison is not None else 0.0  # (a difference has a reference)
            domain = tensor_view.difference_domain(diff_m, tolerance) if diff_m is not None else None
            if _cells(shown) > tensor_view.IMAGE_ABOVE:
                note = heatmap_picture(shown, row_title, col_title, scheme, domain=domain)
            else:
                data, spec, note = heatmap_chart(shown, row_title, col_title, scheme=scheme, domain=domain)
                chart((data, spec), width="content")
            if domain is not None:
                note = (
                    "|engine − reference| of this slice, coloured from 0 to "
                    + f"{domain[1]:.3g}"
                    + (" (the tolerance)" if domain[1] == tolerance else "")
                    + (f"; {note}" if note else "")
                    + f"; tolerance {tolerance:.3g}"
                )
            if note:
                st.caption(note[0].upper() + note[1:] + ".")
    if view == "difference" and ref is not None and a.size:
        diff = compare.difference(a, ref)
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
        st.caption(f"Largest difference {float(diff[worst]):.3g} at index {tuple(int(i) for i in worst)}.")
    st.download_button(
        "Download .npy",
        lambda: tensors.npy_bytes(a),
        file_name=f"{key}.npy",
        mime="application/octet-stream",
        key=f"{key}_dl",
    )


def _current_axes(key: str, lay: tensor_view.Layout) -> tuple[int, int]:
    n = lay.lead + len(lay.core)
    return st.session_state.get(f"{key}_rows", n - 2), st.session_state.get(f"{key}_cols", n - 1)


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)
