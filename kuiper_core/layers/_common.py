"""Helpers shared by the layer families. A family imports from here and from registry.py (the
contract, with the typed param accessors `int_param`, `float_param`, `number_param`...), not
from another family's module."""

from __future__ import annotations

from typing import Any

import numpy as np


def output_like(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """The output buffer for an elementwise result: `out` when given, else a new array."""
    if out is not None and out.shape == x.shape:
        return out
    return np.empty(x.shape, x.dtype if x.dtype.kind == "f" else np.float32)


def check_index(layer: Any, index: np.ndarray, size: int, what: str) -> np.ndarray:
    """`index` (integers in [-size, size-1], torch's and ONNX's range) as it is, or an error
    naming the layer's operator and the first index out of range. `layer`: a registry.Layer."""
    if index.dtype.kind not in "iu":
        raise layer.error(f"{what} must hold integers, got {index.dtype}")
    if index.size and (int(index.min()) < -size or int(index.max()) >= size):
        bad = int(index.min()) if int(index.min()) < -size else int(index.max())
        raise layer.error(f"{what} {bad} is out of range for a dim of size {size}")
    return index
