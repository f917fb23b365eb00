"""One tensor on screen, drawn by its shape (kuiper_core.explore.tensor_view decides how).

Vectors are line or bar plots with their largest entries, matrices capped heatmaps with
axes and hover values, higher ranks a 2-D slice with a picker per other axis (and the
channels as a mosaic), always with a value table; with a reference, the difference
|engine - reference| is a heatmap of the same slice.
"""

from __future__ import annotations

from typing import Any, Sequence

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core.explore import compare as C
from kuiper_core.explore import tensor_view as V
from kuiper_core.explore import tensors as T

HEAT_W, HEAT_H = 560, 380  # px a heatmap may take
NUMBER = ".4~g"


def histogram_chart(a: np.ndarray, height: int = 160) -> alt.Chart:
    """Counts of the finite values in 40 bins, axes with short numbers."""
    hist = pd.DataFrame(T.histogram_table(a))
    return (
        alt.Chart(hist)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", bin="binned", title="value", axis=alt.Axis(format="~g", tickCount=6, labelOverlap=True)),
            x2="end:Q",
            y=alt.Y("count:Q", title="count", axis=alt.Axis(format="~s", tickCount=4)),
            tooltip=[alt.Tooltip("start:Q", format=NUMBER), alt.Tooltip("end:Q", format=NUMBER), "count:Q"],
        )
        .properties(height=height)
    )


def heatmap_chart(m: np.ndarray, row_title: str, col_title: str, scheme: str = "viridis") -> tuple[alt.Chart, str]:
    """A capped heatmap of a 2-D array and a caption saying what was averaged."""
    cells, (fr, fc) = V.block_reduce(m, V.MAX_HEATMAP, V.MAX_HEATMAP)
    rows, cols = cells.shape
    cell_h = min(36.0, max(4.0, HEAT_H / rows))
    cell_w = min(36.0, max(4.0, HEAT_W / cols))
    df = pd.DataFrame(V.heatmap_rows(cells, (fr, fc)))
    nrows, ncols = m.shape if m.ndim == 2 else (1, m.shape[0])
    x = alt.X("col:Q", title=col_title, scale=alt.Scale(domain=[0, ncols], nice=False), axis=alt.Axis(format="d", tickMinStep=1))
    y = alt.Y("row:Q", title=row_title, scale=alt.Scale(domain=[0, nrows], nice=False, reverse=True),
              axis=alt.Axis(format="d", tickMinStep=1))
    tip = [alt.Tooltip("row:Q", title=row_title), alt.Tooltip("col:Q", title=col_title), alt.Tooltip("value:Q", format=NUMBER)]
    base = alt.Chart(df).encode(x=x, x2="col_end:Q", y=y, y2="row_end:Q", tooltip=tip)
    chart = base.mark_rect().encode(
        color=alt.Color("value:Q", scale=alt.Scale(scheme=scheme), legend=alt.Legend(title=None, format="~g"))
    ).transform_filter("datum.value !== null")
    bad = base.mark_rect(color="#ff00ff").transform_filter("datum.nonfinite")
    layered = alt.layer(chart, bad).properties(width=round(cols * cell_w), height=round(rows * cell_h))
    notes = []
    if fr > 1 or fc > 1:
        notes.append(f"each cell is the mean of a {fr}×{fc} block ({nrows:,}×{ncols:,} values)")
    if abs(cell_w - cell_h) > 1:
        notes.append("cells are stretched to fit")
    if df["nonfinite"].any():
        notes.append("magenta: NaN/Inf")
    return layered, "; ".join(notes)


def vector_chart(v: np.ndarray) -> alt.Chart:
    df = pd.DataFrame(V.vector_rows(v))
    mark = alt.Chart(df).mark_bar() if len(df) <= 64 else alt.Chart(df).mark_line(point=len(df) <= 200)
    return mark.encode(
        x=alt.X("index:Q" if len(df) > 64 else "index:O", title="index", axis=alt.Axis(format="d", labelOverlap=True)),
        y=alt.Y("value:Q", title="value", axis=alt.Axis(format="~g")),
        tooltip=["index:Q", alt.Tooltip("value:Q", format=NUMBER)],
    ).properties(height=220)


def value_table(m: np.ndarray) -> None:
    part, cut = V.table_slice(m)
    st.dataframe(pd.DataFrame(part), width="stretch", height=min(320, 38 + 35 * part.shape[0]))
    if cut:
        st.caption(f"Table shows the first {part.shape[0]:,} rows and {part.shape[1]} columns; download the .npy for all.")


def _axis_name(ndim: int, axis: int, size: int) -> str:
    letter = "NCHW"[axis] if ndim == 4 else None
    return f"dim {axis}" + (f" ({letter}={size})" if letter else f" (size {size})")


def _pick_slice(a: np.ndarray, lay: V.Layout, key: str) -> tuple[np.ndarray, str, str]:
    """Widgets choosing the 2-D slice of an N-D tensor: two axes shown, an index for each
    other axis (dims numbered as in the tensor's own shape, indices from 0 like NumPy)."""
    full = np.asarray(a)
    axes = list(range(lay.lead, full.ndim))
    names = {ax: _axis_name(full.ndim, ax, full.shape[ax]) for ax in range(full.ndim)}
    c1, c2 = st.columns(2)
    rows = c1.selectbox("Rows", axes, index=len(axes) - 2, format_func=names.get, key=f"{key}_rows")
    cols = c2.selectbox("Columns", [ax for ax in axes if ax != rows], index=len(axes) - 2 if axes[-1] != rows else len(axes) - 2,
                        format_func=names.get, key=f"{key}_cols")
    index = {}
    others = [ax for ax in range(full.ndim) if ax not in (rows, cols)]
    pickers = [ax for ax in others if full.shape[ax] > 1]
    if pickers:
        cols_ = st.columns(len(pickers))
        for col, ax in zip(cols_, pickers):
            index[ax] = col.slider(f"index along {names[ax]}", 0, full.shape[ax] - 1, 0, key=f"{key}_ix{ax}")
    m = V.slice_2d(full, rows, cols, index)
    where = ", ".join(f"{names[ax].split(' ')[0]} {ax}={index.get(ax, 0)}" for ax in others)
    return m, names[rows], names[cols] + (f" · at {where}" if where else "")


def show_tensor(a: np.ndarray, key: str, *, ref: np.ndarray | None = None, labels: Sequence[str] | None = None,
                ref_source: str = "the reference") -> None:
    """Stats, a view chosen by shape, a value table, and the difference to `ref`."""
    s = T.tensor_stats(a)
    cols = ["min", "max", "mean", "std", "nan", "inf"]
    st.dataframe(pd.DataFrame([{k: _fmt(s[k]) for k in cols}]), hide_index=True, width="stretch")
    if s["nan"] or s["inf"]:
        st.warning(f"{s['nan']} NaN and {s['inf']} Inf values")
    comparison = C.compare(a, ref) if ref is not None else None
    if comparison is not None:
        level = {C.OK: st.success, C.OVER: st.error, C.SHAPE: st.error}[comparison.status]
        level(f"Against {ref_source}: {comparison.text()}")
    lay = V.layout(a)
    core = V.core(a)
    view_tab, table_tab, hist_tab, *diff_tab = st.tabs(
        ["picture", "values", "histogram"] + (["difference"] if comparison is not None and comparison.status != C.SHAPE else [])
    )
    m: Any = None
    row_title = col_title = ""
    with view_tab:
        if lay.kind in ("none", "empty"):
            st.caption(f"Nothing to draw ({'no values' if lay.kind == 'empty' else s['dtype']}).")
        elif lay.kind == "scalar":
            st.markdown(f"### {_fmt(core.item() if hasattr(core, 'item') else core)}")
        elif lay.kind == "vector":
            m = core
            st.altair_chart(vector_chart(core), width="stretch")
            if core.size >= 10:
                top = V.top_entries(core, 5, labels)
                st.caption("Largest entries: " + ", ".join(
                    (f"class {r['label']}" if "label" in r else f"[{r['index']}]") + f" = {r['value']:.4g}" for r in top))
        else:
            if lay.kind == "matrix":
                m, row_title, col_title = core, "row", "column"
            else:
                if len(lay.core) == 3 and lay.core[0] > 1:
                    mosaic, shown = T.channel_grid(core[None])
                    more = f" (first {len(shown)} of {lay.core[0]})" if len(shown) < lay.core[0] else ""
                    st.image(mosaic, caption=f"channels{more}, each on its own scale (viridis; magenta = NaN/Inf)")
                m, row_title, col_title = _pick_slice(a, lay, key)
            chart, note = heatmap_chart(m, row_title, col_title)
            st.altair_chart(chart, width="content")
            if note:
                st.caption(note.capitalize() + ".")
    with table_tab:
        if m is not None:
            value_table(m)
        elif lay.kind == "scalar":
            st.write(core)
    with hist_tab:
        st.altair_chart(histogram_chart(a), width="stretch")
    if diff_tab and ref is not None and m is not None:
        with diff_tab[0]:
            diff = C.difference(a, ref)
            dcore = diff.reshape(lay.core) if lay.kind not in ("none", "empty") else diff
            if lay.kind == "vector":
                st.altair_chart(vector_chart(dcore), width="stretch")
            elif lay.kind in ("matrix", "slices"):
                dm = dcore if lay.kind == "matrix" else V.slice_2d(
                    diff, *_current_axes(key, lay), {ax: st.session_state.get(f"{key}_ix{ax}", 0) for ax in range(diff.ndim)})
                chart, note = heatmap_chart(dm, "row" if lay.kind == "matrix" else row_title, "column" if lay.kind == "matrix" else col_title, scheme="reds")
                st.altair_chart(chart, width="content")
                st.caption("|engine − reference| of the slice above" + (f"; {note}" if note else "") + f"; tolerance {comparison.tolerance:.3g}.")
            st.caption(f"Largest difference {float(np.max(diff)) if diff.size else 0:.3g} at index "
                       f"{np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()}.")
    st.download_button("Download .npy", T.npy_bytes(a), file_name=f"{key}.npy", mime="application/octet-stream", key=f"{key}_dl")


def _current_axes(key: str, lay: V.Layout) -> tuple[int, int]:
    n = lay.lead + len(lay.core)
    return st.session_state.get(f"{key}_rows", n - 2), st.session_state.get(f"{key}_cols", n - 1)


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)
