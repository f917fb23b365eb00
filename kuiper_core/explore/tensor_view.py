"""How to look at a tensor, chosen by its shape, as plain data for the page.

Leading size-1 dims are dropped first (a 1×1000 logit vector is a vector, a 1×1008×8
tensor a 1008×8 matrix). Then: a scalar is a number; a vector a line plot (bar plot when
short) with its largest entries; a matrix a heatmap whose size is capped (rows or columns
beyond the cap are averaged in blocks, and the page says so); three or more dims a 2-D
slice: two axes drawn, one index picked for every other axis (channels of a C×H×W map by
default). Every view has a value table of the same slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

MAX_HEATMAP = 96  # rows and columns drawn at most (beyond: block means)
IMAGE_ABOVE = 32 * 32  # cells: a bigger heatmap is a picture (PNG), not a chart of one mark per cell
BAR_W, BAR_GAP = 14, 10  # px of the colour bar drawn right of a heatmap picture
MAX_TABLE_ROWS = 2000
MAX_TABLE_COLS = 64


@dataclass(frozen=True)
class Layout:
    kind: str  # "empty", "scalar", "vector", "matrix", "slices", "none" (not numeric)
    shape: tuple[int, ...]
    lead: int  # leading size-1 dims dropped
    core: tuple[int, ...]  # the shape that is looked at


def layout(a: np.ndarray) -> Layout:
    a = np.asarray(a)
    shape = tuple(int(d) for d in a.shape)
    if a.dtype.kind not in "fiubc":
        return Layout("none", shape, 0, shape)
    if a.size == 0:
        return Layout("empty", shape, 0, shape)
    lead = 0
    while lead < len(shape) and shape[lead] == 1:
        lead += 1
    core = shape[lead:]
    kind = {0: "scalar", 1: "vector", 2: "matrix"}.get(len(core), "slices")
    return Layout(kind, shape, lead, core)


def core(a: np.ndarray) -> np.ndarray:
    """The tensor without its leading size-1 dims, as real numbers (|z| for complex)."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        a = np.abs(a)
    lay = layout(a)
    return a.reshape(lay.core) if lay.kind not in ("none", "empty") else a


def slice_2d(a: np.ndarray, rows: int, cols: int, index: Mapping[int, int]) -> np.ndarray:
    """A 2-D slice of an N-D array: axis `rows` down, axis `cols` across, every other axis
    at `index[axis]` (0 when missing). rows == cols is an error."""
    a = np.asarray(a)
    if rows == cols or not (0 <= rows < a.ndim and 0 <= cols < a.ndim):
        raise ValueError(f"need two different axes of a {a.ndim}-d tensor, got {rows} and {cols}")
    sel: list[Any] = []
    for ax in range(a.ndim):
        if ax in (rows, cols):
            sel.append(slice(None))
        else:
            i = int(index.get(ax, 0))
            if not 0 <= i < a.shape[ax]:
                raise IndexError(f"index {i} is out of range for axis {ax} of size {a.shape[ax]}")
            sel.append(i)
    m = a[tuple(sel)]
    return m if rows < cols else m.T


def block_reduce(
    m: np.ndarray, max_rows: int = MAX_HEATMAP, max_cols: int = MAX_HEATMAP
) -> tuple[np.ndarray, tuple[int, int]]:
    """Average blocks so the matrix has at most max_rows x max_cols cells.

    Returns (cells, (rows per cell, cols per cell)). Non-finite values stay visible: a
    block holding NaN/Inf is NaN (the page paints those magenta)."""
    m = np.asarray(m)  # read a band of rows at a time below: the whole in float64 with its padded
    if m.ndim == 1:  # copies and masks was ~2 GB for a 2^26-element tensor (2.3 GB resident a page view)
        m = m[None, :]
    fr = max(1, -(-m.shape[0] // max_rows))
    fc = max(1, -(-m.shape[1] // max_cols))
    if fr == 1 and fc == 1:
        return m.astype(np.float64), (1, 1)
    r, c = -(-m.shape[0] // fr), -(-m.shape[1] // fc)
    widths = np.minimum(fc, m.shape[1] - np.arange(c) * fc)  # the last block may be narrower
    cells = np.empty((r, c))
    for i in range(r):
        band = np.asarray(m[i * fr : (i + 1) * fr], dtype=np.float64)
        finite = np.pad(np.isfinite(band), ((0, 0), (0, c * fc - m.shape[1])), constant_values=True)
        values = np.pad(np.where(finite[:, : m.shape[1]], band, 0.0), ((0, 0), (0, c * fc - m.shape[1])))
        sums = values.reshape(band.shape[0], c, fc).sum(axis=(0, 2))
        bad = ~finite.reshape(band.shape[0], c, fc).all(axis=(0, 2))
        cells[i] = np.where(bad, np.nan, sums / (band.shape[0] * widths))
    return cells, (fr, fc)


@dataclass(frozen=True)
class HeatmapImage:
    """A heatmap as an RGB picture: each cell a block of pixels, the colour bar on its right
    (its top row is `hi`'s colour, its bottom row `lo`'s)."""

    rgb: np.ndarray  # (H, W, 3) uint8
    factors: tuple[int, int]  # rows and columns of the matrix per cell (block means beyond MAX_HEATMAP)
    cells: tuple[int, int]
    lo: float
    hi: float
    stretched: bool  # cells are not square on screen
    nonfinite: bool  # some cells are NaN/Inf (magenta)


def heatmap_image(
    m: np.ndarray,
    max_w: int,
    max_h: int,
    scheme: str = "viridis",
    max_cell: int = 36,
    domain: tuple[float, float] | None = None,
) -> HeatmapImage:
    """A 2-D array as a picture of at most about max_w x max_h px (cells of whole pixels,
    at most max_cell px a side) with a colour bar. Why: a chart of one Vega mark per cell
    (a 56x56 slice: 3,136 marks) cost the browser ~0.15 s at each Forward step; a picture of
    the same cells is one <img>. domain: the colour scale's ends (default: the cells' min and
    max; a difference passes (0, its scale): see difference_domain)."""
    from kuiper_core.explore.tensors import colorize

    cells, factors = block_reduce(m, MAX_HEATMAP, MAX_HEATMAP)
    rows, cols = cells.shape
    finite = np.isfinite(cells)
    lo = float(cells[finite].min()) if finite.any() else 0.0
    hi = float(cells[finite].max()) if finite.any() else 1.0
    if domain is not None:
        lo, hi = domain
    kh = max(1, min(max_cell, max_h // rows))
    kw = max(1, min(max_cell, (max_w - BAR_W - BAR_GAP) // cols))
    picture = np.repeat(np.repeat(colorize(cells, lo, hi, scheme), kh, axis=0), kw, axis=1)
    h = picture.shape[0]
    ramp = np.linspace(hi, lo, h)[:, None].repeat(BAR_W, axis=1)  # top: hi
    bar = colorize(ramp, lo, hi, scheme) if h > 1 else np.zeros((h, BAR_W, 3), np.uint8)
    gap = np.full((h, BAR_GAP, 3), 255, np.uint8)
    rgb = np.concatenate([picture, gap, bar], axis=1)
    return HeatmapImage(rgb, factors, (rows, cols), lo, hi, abs(kh - kw) > 1, bool((~finite).any()))


def heatmap_rows(cells: np.ndarray, factors: tuple[int, int] = (1, 1)) -> dict[str, list[Any]]:
    """Long-form columns for a heatmap: each cell's first row/col index in the original
    matrix, its extent, and its value (None for non-finite)."""
    fr, fc = factors
    r, c = np.indices(cells.shape)
    flat = cells.reshape(-1)
    finite = np.isfinite(flat)
    return {
        "row": (r.reshape(-1) * fr).tolist(),
        "row_end": ((r.reshape(-1) + 1) * fr).tolist(),
        "col": (c.reshape(-1) * fc).tolist(),
        "col_end": ((c.reshape(-1) + 1) * fc).tolist(),
        "value": [float(v) if ok else None for v, ok in zip(flat, finite)],
        "nonfinite": (~finite).tolist(),
    }


def top_entries(v: np.ndarray, k: int = 5, labels: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The k largest entries of a vector (ties by index), e.g. a classifier's top classes."""
    v = np.asarray(v).reshape(-1)
    if v.dtype.kind == "c":
        v = np.abs(v)
    vals = v.astype(np.float64)
    order = np.argsort(-np.where(np.isnan(vals), -np.inf, vals), kind="stable")[:k]
    rows = []
    for rank, i in enumerate(order, 1):
        row: dict[str, Any] = {"rank": rank, "index": int(i), "value": float(vals[i])}
        if labels is not None and i < len(labels):
            row["label"] = labels[int(i)]
        rows.append(row)
    return rows


def vector_rows(v: np.ndarray) -> dict[str, list[Any]]:
    """index/value columns for a line or bar plot of a vector."""
    v = np.asarray(v).reshape(-1)
    vals = v.astype(np.float64) if v.dtype.kind != "c" else np.abs(v)
    return {"index": list(range(v.size)), "value": [float(x) if np.isfinite(x) else None for x in vals]}


def table_slice(
    m: np.ndarray, max_rows: int = MAX_TABLE_ROWS, max_cols: int = MAX_TABLE_COLS
) -> tuple[np.ndarray, bool]:
    """The part of a 1-D/2-D array a value table shows, and whether it was cut."""
    m = np.asarray(m)
    if m.ndim == 0:
        return m.reshape(1, 1), False
    if m.ndim == 1:
        m = m[:, None]
    cut = m.shape[0] > max_rows or m.shape[1] > max_cols
    return m[:max_rows, :max_cols], cut


def value_preview(value: Any, max_items: int = 6) -> str:
    """A one-line picture of a value for the expression stack: numbers, not only a shape."""
    if not isinstance(value, np.ndarray):
        return repr(value)
    if value.ndim == 0:
        return np.array2string(value, precision=4)
    flat = value.reshape(-1)
    shown = ", ".join(f"{x:.4g}" if value.dtype.kind in "fc" else str(x) for x in flat[:max_items])
    more = f", … ({value.size:,} values)" if value.size > max_items else ""
    return f"[{shown}{more}]"


def difference_domain(diff: np.ndarray, tolerance: float) -> tuple[float, float]:
    """The colour scale of a |engine - reference| heatmap: from 0 to the larger of the
    tolerance and the largest difference. Scaled to its own min and max, float noise far
    below the tolerance (1e-9 .. 3e-9) filled the whole colour range and looked like
    structure, and a colour bar whose ends differ in the 5th digit read "0.05 / 0.05 / 0.05"."""
    d = np.asarray(diff, dtype=np.float64)
    finite = d[np.isfinite(d)]
    top = float(finite.max()) if finite.size else 0.0
    return 0.0, max(top, float(tolerance), float(np.finfo(np.float32).tiny))
