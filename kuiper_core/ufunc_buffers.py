"""The size of NumPy's ufunc buffers while the engine computes.

A ufunc over arrays that are not contiguous as a whole (a strided view, a per-channel weight
broadcast over a map, a crop) runs through NumPy's buffered iterator. With NumPy's default
buffer of 8192 elements it copies rows shorter than about a third of that through its buffers
instead of running its SIMD loop on them in place (NumPy 2.4, one thread): a
(20, 1624) strided view times a (20, 1) weight 12.7 us instead of 3.5; a (10, 56, 56) crop
plus a (10, 1, 1) bias 16.0 us instead of 7.0. Buffers of 2048 elements keep rows from ~700
elements on the fast loop (EfficientNet's 144-channel 56x56 depthwise conv in halves, wide
rows of 1624: 1.68 -> 1.03 ms) and cost nothing measurable where buffering is needed (casts,
float64 means; 1024 was as good on long rows, slower on crops).

`np.setbufsize` is scoped to the enclosing `np.errstate` block (NumPy >= 2.0), a context
variable: the engine sets it inside the errstate of its own runs, a step walk runs each step in
a copy of the caller's context (step_arena.py), and a caller's NumPy settings are left as they were.
"""

from __future__ import annotations

import numpy as np

UFUNC_BUFSIZE = 2048


def set_engine_bufsize() -> None:
    """Inside an `np.errstate` block (it restores the caller's size), a context of the
    engine's own, or a process of the engine's own (halves.py's helper)."""
    np.setbufsize(UFUNC_BUFSIZE)


__all__ = ["UFUNC_BUFSIZE", "set_engine_bufsize"]
