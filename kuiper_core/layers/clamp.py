"""max / min of an array against a scalar bound, on NumPy's fast loop.

NumPy 2.x runs `np.maximum(x, 0.0)` (and `np.minimum`) against a scalar through a loop
3.4x slower than np.clip with two scalar bounds (NumPy 2.4, float32 (1, 64, 56, 56), one thread: 64 us against 19 us; a copy takes 14 us). So a
big float array is clipped to [bound, +inf] (or [-inf, bound]) instead: the same values, NaN
stays NaN; only a -0.0 against a bound of 0.0 may keep its sign (it compares equal to 0.0).
Small arrays keep the plain ufunc: np.clip's Python wrapper costs ~1.5 us more per call,
so big ones call the clip ufunc itself (np.clip's own last step; 2.3 -> 0.9 us on 4,096
floats), which matters where one call is a whole step (steps()' unfused ReLUs).

`maximum(x, s, out)` / `minimum(x, s, out)` do what np.maximum(x, s, out=out) does.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np


def _find_clip() -> Any:
    """The ufunc np.clip ends in, without its argument checks (private: not in NumPy's stubs)."""
    for module in ("numpy._core.umath", "numpy.core.umath"):  # NumPy 2, NumPy 1
        try:
            return importlib.import_module(module).clip
        except (ImportError, AttributeError):
            continue
    return np.clip


_clip = _find_clip()

# From this many elements the clip ufunc is faster (float32, one thread: 0.63 against
# 0.76 us at 1,024, 0.83 against 1.7 at 4,096; about even at 256).
CLIP_MIN_ELEMENTS = 1024
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _by_clip(x: np.ndarray, out: np.ndarray) -> bool:
    return x.size >= CLIP_MIN_ELEMENTS and x.dtype in _FLOATS and out.dtype == x.dtype


def maximum(x: np.ndarray, bound: np.floating, out: np.ndarray) -> None:
    """np.maximum(x, bound, out=out); bound: a float scalar of x's dtype or narrower."""
    if _by_clip(x, out):
        _clip(x, bound, x.dtype.type(np.inf), out=out)
    else:
        np.maximum(x, bound, out=out)


def minimum(x: np.ndarray, bound: np.floating, out: np.ndarray) -> None:
    """np.minimum(x, bound, out=out); bound: a float scalar of x's dtype or narrower."""
    if _by_clip(x, out):
        _clip(x, x.dtype.type(-np.inf), bound, out=out)
    else:
        np.minimum(x, bound, out=out)


def clip(x: np.ndarray, lo: np.floating, hi: np.floating, out: np.ndarray) -> None:
    """np.clip(x, lo, hi, out=out) on the clip ufunc itself: without np.clip's Python
    wrapper, ~1.5 us less per call at every size (Hardswish on (1, 96, 1, 1): 3.1 -> 1.6 us)."""
    _clip(x, lo, hi, out=out)
