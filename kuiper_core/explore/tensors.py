"""Tensors as the app shows them: statistics, histograms, heatmaps (errors: compare.py).

Everything here is vectorised NumPy on one tensor at a time and returns plain data (dicts,
arrays, uint8 RGB images) so pages only lay it out. Statistics ignore NaN/Inf (they are
counted separately) so one bad value does not hide the rest of the distribution.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any
from collections.abc import Iterable, Iterator, Sequence

import numpy as np


def as_arrays(value: Any) -> list[np.ndarray]:
    """An operand value as a list of arrays (a prim::TupleConstruct value is a tuple)."""
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in as_arrays(v)]
    return [np.asarray(value)]


CHUNK = 1 << 20  # elements read at a time: a whole 2^26-element tensor's float64 copy and std's
#                 temporaries were 1 GiB (2.3 GB resident) each time a page showed it


def _finite_chunks(a: np.ndarray) -> Iterator[tuple[np.ndarray, int, int]]:
    """(the finite values as float64, NaN count, Inf count) of a numeric `a`, CHUNK elements at a
    time (no copy of the whole, a broadcast view's neither); complex as magnitudes."""
    if a.flags.c_contiguous:  # slices of it are views
        flat = a.reshape(-1)
        chunks: Iterable[np.ndarray] = (flat[i : i + CHUNK] for i in range(0, a.size, CHUNK))
    else:  # a broadcast or strided view: copied a buffer at a time
        buffered = np.nditer(a, flags=["external_loop", "buffered", "zerosize_ok"], buffersize=CHUNK, order="K")
        chunks = (np.asarray(c) for c in buffered)
    for c in chunks:
        if c.dtype.kind == "c":
            c = np.abs(c)
        nan = inf = 0
        if c.dtype.kind == "f":
            finite = np.isfinite(c)
            nan = int(np.count_nonzero(np.isnan(c)))
            inf = c.size - int(np.count_nonzero(finite)) - nan
            c = c[finite] if nan or inf else c
        yield c.astype(np.float64, copy=False), nan, inf


def tensor_stats(a: np.ndarray) -> dict[str, Any]:
    """shape, dtype, size, min/max/mean/std over finite values (in float64: float32 sums drift on
    big tensors), NaN and Inf counts; read a chunk at a time."""
    a = np.asarray(a)
    stats: dict[str, Any] = {"shape": tuple(a.shape), "dtype": str(a.dtype), "size": int(a.size)}
    stats.update(nan=0, inf=0, min=None, max=None, mean=None, std=None)
    if a.dtype.kind not in "fiubc":
        return stats
    n, total, lo, hi = 0, 0.0, np.inf, -np.inf
    for c, nan, inf in _finite_chunks(a):
        stats["nan"] += nan
        stats["inf"] += inf
        if c.size:
            n, total, lo, hi = n + c.size, total + float(c.sum()), min(lo, float(c.min())), max(hi, float(c.max()))
    if n:
        mean = total / n
        squares = sum(float(np.square(c - mean).sum()) for c, _, _ in _finite_chunks(a))
        stats.update(min=lo, max=hi, mean=mean, std=float(np.sqrt(squares / n)))
    return stats


def histogram(a: np.ndarray, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """(counts, bin edges) of the finite values; empty arrays for a tensor without any (read a
    chunk at a time: the counts of one range add up)."""
    a = np.asarray(a)
    if a.dtype.kind not in "fiubc":
        return np.zeros(0, np.int64), np.zeros(0)
    lo, hi = np.inf, -np.inf
    for c, _, _ in _finite_chunks(a):
        if c.size:
            lo, hi = min(lo, float(c.min())), max(hi, float(c.max()))
    if lo > hi:
        return np.zeros(0, np.int64), np.zeros(0)
    if lo == hi:  # a constant tensor: bins around the value (wide enough to exist at 3e38)
        span, top = max(0.5, abs(lo) * 1e-6), float(np.finfo(np.float64).max)
        lo, hi = max(lo - span, -top), min(hi + span, top)
    halve = not np.isfinite(hi - lo)  # values near ±1.8e308: the range itself overflows; bin the halves
    scale = 2.0 if halve else 1.0
    counts = np.zeros(bins, np.int64)
    edges = np.zeros(0)
    for c, _, _ in _finite_chunks(a):
        part, edges = np.histogram(c / scale if halve else c, bins=bins, range=(lo / scale, hi / scale))
        counts += part
    return counts, edges * scale


def histogram_table(a: np.ndarray, bins: int = 40) -> dict[str, list[float]]:
    """The histogram as columns for a bar chart: each bin's start, end and count."""
    counts, edges = histogram(a, bins)
    return {
        "start": [float(x) for x in edges[:-1]],
        "end": [float(x) for x in edges[1:]],
        "count": [int(c) for c in counts],
    }


# -- images ----------------------------------------------------------------------------------------
def _lut(anchors: list[list[int]]) -> np.ndarray:
    """A 256-entry RGB table interpolated between evenly spaced anchor colours."""
    a = np.array(anchors, dtype=np.float64)
    x = np.linspace(0, len(a) - 1, 256)
    lut = np.stack([np.interp(x, np.arange(len(a)), a[:, c]) for c in range(3)], axis=1)
    return lut.round().astype(np.uint8)


# The anchors of Vega's schemes of the same names (the charts' colours): viridis (dark blue ->
# yellow) for values, reds (white -> dark red) for differences.
LUTS = {
    "viridis": _lut(
        [
            [68, 1, 84],
            [72, 40, 120],
            [62, 74, 137],
            [49, 104, 142],
            [38, 130, 142],
            [31, 158, 137],
            [53, 183, 121],
            [109, 205, 89],
            [180, 222, 44],
            [253, 231, 37],
        ]
    ),
    "reds": _lut(
        [
            [255, 245, 240],
            [254, 224, 210],
            [252, 187, 161],
            [252, 146, 114],
            [251, 106, 74],
            [239, 59, 44],
            [203, 24, 29],
            [165, 15, 21],
            [103, 0, 13],
        ]
    ),
}
_LUT = LUTS["viridis"]
NAN_RGB = np.array([255, 0, 255], np.uint8)  # magenta: impossible to miss


def _unit(x: np.ndarray, lo: np.ndarray | np.floating[Any], hi: np.ndarray | np.floating[Any]) -> np.ndarray:
    """(x - lo) / (hi - lo) clipped to 0..1 (0 where hi <= lo), computed on halves so values
    near ±1.8e308 do not overflow the range into inf and NaN."""
    half_lo, half_hi = lo / 2, hi / 2
    scale = np.where(half_hi > half_lo, half_hi - half_lo, 1.0)
    return np.clip((x / 2 - half_lo) / scale, 0.0, 1.0)


def colorize(x: np.ndarray, lo: float | None = None, hi: float | None = None, scheme: str = "viridis") -> np.ndarray:
    """A real array (H, W) as uint8 RGB (H, W, 3) through `scheme` (LUTS); NaN/Inf are magenta."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    if lo is None or hi is None:
        vals = x[finite]
        lo = float(vals.min()) if vals.size else 0.0
        hi = float(vals.max()) if vals.size else 1.0
    t = _unit(np.where(finite, x, lo), np.float64(lo), np.float64(hi))
    rgb = LUTS[scheme][(t * 255).round().astype(np.intp)]
    rgb[~finite] = NAN_RGB
    return rgb


def channel_grid(
    a: np.ndarray,
    *,
    batch: int = 0,
    max_channels: int = 16,
    columns: int = 8,
    shared_scale: bool = False,
    max_side: int = 96,
) -> tuple[np.ndarray, list[int]]:
    """Channels of a 4-D (N, C, H, W) tensor as one RGB mosaic, and the channels shown.

    Each channel is scaled to its own min..max (or one scale for all with shared_scale),
    enlarged so a tile is about max_side pixels, and separated by a white 2-pixel border.
    """
    a = np.asarray(a)
    if a.ndim != 4:
        raise ValueError(f"channel_grid needs an (N, C, H, W) tensor, got shape {a.shape}")
    if a.dtype.kind == "c":
        a = np.abs(a)
    x = a[batch].astype(np.float64, copy=False)
    shown = list(range(min(x.shape[0], max_channels)))
    x = x[shown]
    c, h, w = x.shape
    if not c or not h or not w:  # no channels or empty planes: nothing to draw
        return np.full((4, 4, 3), 255, np.uint8), shown
    finite = np.isfinite(x)
    safe = np.where(finite, x, np.nan)
    if shared_scale:
        lo = np.full(c, np.nanmin(safe) if finite.any() else 0.0)
        hi = np.full(c, np.nanmax(safe) if finite.any() else 1.0)
    else:
        any_finite = finite.reshape(c, -1).any(axis=1)
        with np.errstate(all="ignore"):
            lo = np.where(any_finite, np.nanmin(np.where(finite, x, np.inf).reshape(c, -1), axis=1), 0.0)
            hi = np.where(any_finite, np.nanmax(np.where(finite, x, -np.inf).reshape(c, -1), axis=1), 1.0)
    t = _unit(np.where(finite, x, lo[:, None, None]), lo[:, None, None], hi[:, None, None])
    tiles = _LUT[(t * 255).round().astype(np.intp)]  # (c, h, w, 3)
    tiles[~finite] = NAN_RGB
    k = max(1, min(max_side // max(h, 1), max_side // max(w, 1), 32))
    if k > 1:
        tiles = np.repeat(np.repeat(tiles, k, axis=1), k, axis=2)
    th, tw = tiles.shape[1:3]
    cols = min(columns, c)
    rows = -(-c // cols)
    pad = 2
    mosaic = np.full((rows * (th + pad) + pad, cols * (tw + pad) + pad, 3), 255, np.uint8)
    for i in range(c):  # a loop over tiles (at most max_channels), not over pixels
        r, q = divmod(i, cols)
        y0, x0 = pad + r * (th + pad), pad + q * (tw + pad)
        mosaic[y0 : y0 + th, x0 : x0 + tw] = tiles[i]
    return mosaic, shown


def npy_bytes(a: np.ndarray) -> bytes:
    """The tensor as a .npy file (for st.download_button)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(a), allow_pickle=False)
    return buf.getvalue()


def arrays_digest(arrays: Sequence[np.ndarray]) -> str:
    """A short content hash of input arrays (shape, dtype and bytes): keys per-input state."""
    h = hashlib.sha1()
    for a in arrays:
        a = np.asarray(a)
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]
