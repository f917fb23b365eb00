"""Helpers shared by the layer families. A family imports from here and from registry.py (the
contract, with the typed param accessors `int_param`, `float_param`, `number_param`...), not
from another family's module."""

from __future__ import annotations

import numpy as np


def output_like(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """The output buffer for an elementwise result: `out` when given, else a new array."""
    if out is not None and out.shape == x.shape:
        return out
    return np.empty(x.shape, x.dtype if x.dtype.kind == "f" else np.float32)
