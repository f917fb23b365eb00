"""ONNX gathers and scatters pnnx keeps as ONNX nodes: GatherElements, GatherND, ScatterND,
ScatterElements, and Col2Im (columns of blocks added back into an image, the inverse of
im2col), with ONNX's semantics; _onnx.py says how pnnx writes such a node.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ..graph import Operator
from ._onnx import check_index_range, expect_inputs, inputs_constant, ints_of
from .registry import Layer, register


@register("GatherElements")
class GatherElements(Layer):
    """`GatherElements(data, indices; axis=0)`: out[i][j][k] = data[i][indices[i][j][k]][k] for
    axis 1; the output has indices' shape (no larger than data's off the axis)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.axis = self.int_param("axis", 0)
        expect_inputs(self, "data, indices", 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index = np.asarray(inputs[0]), np.asarray(inputs[1])
        if index.ndim != x.ndim:
            raise self.error(f"indices have rank {index.ndim}, data {x.ndim}: expected the same rank")
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        if not 0 <= axis < x.ndim:
            raise self.error(f"axis {self.axis} is out of range for rank {x.ndim}")
        if any(index.shape[d] > x.shape[d] for d in range(x.ndim) if d != axis):
            raise self.error(f"indices of shape {index.shape} are larger than data {x.shape} off axis {axis}")
        index = check_index_range(self, index, x.shape[axis], "index")
        cut = x[tuple(slice(0, n) if d != axis else slice(None) for d, n in enumerate(index.shape))]
        return [np.take_along_axis(cut, index, axis=axis)]


@register("GatherND")
class GatherND(Layer):
    """`GatherND(data, indices; batch_dims=0)`: indices' last dim (k) addresses the first k
    dims of data after the batch dims; out = indices.shape[:-1] + data.shape[b + k:]."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.batch_dims = self.int_param("batch_dims", 0, low=0)
        expect_inputs(self, "data, indices", 2)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index = np.asarray(inputs[0]), np.asarray(inputs[1])
        b = self.batch_dims
        if index.ndim < 1 or b >= min(x.ndim, index.ndim) or x.shape[:b] != index.shape[:b]:
            raise self.error(f"batch_dims={b} does not fit data {x.shape} and indices {index.shape}")
        k = index.shape[-1]
        if k > x.ndim - b:
            raise self.error(f"indices address {k} dims, data {x.shape} has {x.ndim - b} after the batch dims")
        batch = math.prod(x.shape[:b])
        xs = x.reshape((batch,) + x.shape[b:])
        ids = index.reshape((batch, -1, k))
        cols = [check_index_range(self, ids[..., d], x.shape[b + d], f"index on dim {b + d}") for d in range(k)]
        rows = np.arange(batch).reshape(batch, 1)
        picked = xs[(rows,) + tuple(cols)]  # (batch, m) + data.shape[b + k:]
        return [picked.reshape(index.shape[:-1] + x.shape[b + k :])]


_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


class _Scatter(Layer):
    """A scatter's `reduction` (none, add, mul, max, min) and its write into a copy of data."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        reduction = self.param("reduction", "none")
        if reduction != "none" and reduction not in _REDUCTIONS:
            raise self.error(f"reduction must be none, {', '.join(_REDUCTIONS)}, got {reduction!r}")
        self.reduction = str(reduction)
        expect_inputs(self, "data, indices, updates", 3)

    def write(self, x: np.ndarray, key: tuple[np.ndarray, ...], values: np.ndarray) -> np.ndarray:
        """x with the places `key` addresses replaced by (or combined with) values, in order."""
        y = x.copy()
        if self.reduction == "none":
            y[key] = values
        else:
            _REDUCTIONS[self.reduction].at(y, key, values)
        return y


@register("ScatterND")
class ScatterND(_Scatter):
    """`ScatterND(data, indices, updates; reduction=none)`: a copy of data with the slices that
    indices' rows address replaced by (or, with a reduction, combined with) updates', in
    order."""

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index, updates = (np.asarray(v) for v in inputs)
        k = index.shape[-1] if index.ndim else 0
        want = index.shape[:-1] + x.shape[k:]
        if index.ndim < 1 or k > x.ndim or updates.shape != want:
            raise self.error(
                f"indices {index.shape} and updates {updates.shape} do not fit data {x.shape}: updates must be {want}"
            )
        ids = index.reshape(-1, k)
        key = tuple(check_index_range(self, ids[:, d], x.shape[d], f"index on dim {d}") for d in range(k))
        return [self.write(x, key, updates.reshape((-1,) + x.shape[k:]))]


@register("ScatterElements")
class ScatterElements(_Scatter):
    """`ScatterElements(data, indices, updates; axis=0, reduction=none)` (torch's scatter /
    scatter_add / scatter_reduce): a copy of data where, for each place p of indices,
    out[p with p[axis] = indices[p]] = updates[p] (or combined with it); indices and updates
    have one shape, of data's rank, no larger than data's off the axis."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.axis = self.int_param("axis", 0)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index, updates = (np.asarray(v) for v in inputs)
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        if not 0 <= axis < x.ndim:
            raise self.error(f"axis {self.axis} is out of range for rank {x.ndim}")
        if index.shape != updates.shape or index.ndim != x.ndim:
            raise self.error(f"indices {index.shape} and updates {updates.shape} must have one shape of rank {x.ndim}")
        if any(index.shape[d] > x.shape[d] for d in range(x.ndim) if d != axis):
            raise self.error(f"indices of shape {index.shape} are larger than data {x.shape} off axis {axis}")
        places: list[np.ndarray] = list(np.indices(index.shape, sparse=True))
        places[axis] = check_index_range(self, index, x.shape[axis], "index")
        return [self.write(x, tuple(places), updates)]


@register("Col2Im")
class Col2Im(Layer):
    """`Col2Im(input, image_shape, block_shape; dilations, pads, strides)`: input (N, C·∏block,
    L) holds, for each of the L block positions, the block's values; each is added back at its
    place in an (N, C, *image_shape) image (overlaps sum), the inverse of im2col."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return not inputs_constant(op)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expect_inputs(self, "input, image_shape, block_shape", 3)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        image = ints_of(self, inputs[1], "image_shape")
        block = ints_of(self, inputs[2], "block_shape")
        nd = len(image)
        dil = self.ints_param("dilations", nd, (1,) * nd, low=1)
        stride = self.ints_param("strides", nd, (1,) * nd, low=1)
        pads = self.ints_param("pads", 2 * nd, (0,) * (2 * nd), low=0)
        if len(block) != nd or x.ndim != 3:
            raise self.error(f"expected a (N, C*prod(block), L) input and {nd}-D block_shape, got {x.shape}, {block}")
        padded = [n + pads[d] + pads[d + nd] for d, n in enumerate(image)]
        counts = [(padded[d] - dil[d] * (block[d] - 1) - 1) // stride[d] + 1 for d in range(nd)]
        n, cols, length = x.shape
        size = math.prod(block)
        if size == 0 or cols % size or math.prod(counts) != length or min(counts) < 1:
            raise self.error(
                f"input {x.shape} does not fit image_shape {image}, block_shape {block}: expected "
                f"C*{size} columns and {math.prod(counts)} block positions {tuple(counts)}"
            )
        c = cols // size
        self.check_size((n, c, *padded))
        y = np.zeros((n, c, *padded), x.dtype)
        whole: tuple[Any, ...] = (slice(None), slice(None))
        blocks = x.reshape(n, c, *block, *counts)
        for offset in itertools.product(*(range(b) for b in block)):
            at = tuple(
                slice(o * dil[d], o * dil[d] + stride[d] * (counts[d] - 1) + 1, stride[d]) for d, o in enumerate(offset)
            )
            y[whole + at] += blocks[whole + offset]
        crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(nd))
        return [np.ascontiguousarray(y[whole + crop])]
