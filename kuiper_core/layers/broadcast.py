"""Per-feature vectors (biases, norm weights) expanded to a whole output at prepare time.

NumPy runs an operation on two same-shape contiguous arrays as one flat loop; broadcasting a
short vector over many rows costs a loop call per row, 2-3x more: a (65, 64) bias add takes
0.5 us expanded and 1.25 us broadcast, (65, 192) 0.9 against 1.8 us (one thread). Prepared
calls of small outputs keep the expanded copy; big ones broadcast as before (the copy would
cost memory for a few percent).
"""

from __future__ import annotations

import math

import numpy as np

EXPANDED_MAX = 1 << 16  # elements: 256 KB of float32 per expanded vector at most


def expanded(vec: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """vec broadcast to `shape` as a contiguous copy, or vec itself when that would pass
    EXPANDED_MAX elements (either gives the same result in `y += expanded(b, y.shape)`)."""
    if vec is None or math.prod(shape) > EXPANDED_MAX:
        return vec
    return np.ascontiguousarray(np.broadcast_to(vec, shape))
