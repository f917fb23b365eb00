"""Distances and similarities between vectors: torch.cdist, F.cosine_similarity,
F.pairwise_distance (pnnx keeps the first two as TorchScript's aten::, positional).

Computed in float64 and cast back: the differences of nearly equal vectors lose nothing.
"""

from __future__ import annotations

import numpy as np

from ..graph import Operator
from .registry import Layer, register
from .torch_args import input_index, normalize_axis


def _p_norm(layer: Layer, v: np.ndarray, p: float, axis: int, keepdims: bool = False) -> np.ndarray:
    a = np.abs(v)
    if p == np.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(v.dtype)
    if p < 0:
        raise layer.error(f"p must be >= 0, got {p}")
    return (a**p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def _p(layer: Layer) -> float:
    p = layer.param("p", 2.0)
    if isinstance(p, str) and p in ("inf", "+inf"):
        return np.inf
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise layer.error(f"parameter 'p' must be a number, got {p!r}")
    return float(p)


@register("aten::cdist")
class CDist(Layer):
    """`torch.cdist(x1, x2, p)`: (…, P, M) and (…, R, M) -> (…, P, R) p-norm distances."""

    arg_names = ("", "", "p", "compute_mode")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.p = _p(self)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = inputs[0], inputs[1]
        if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
            raise self.error(f"expected (…, P, M) and (…, R, M) inputs, got {a.shape} and {b.shape}")
        self.check_size(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-2], a.shape[-1]))
        diff = a[..., :, None, :].astype(np.float64) - b[..., None, :, :]
        return [_p_norm(self, diff, self.p, -1).astype(np.result_type(a, b))]


@register("aten::cosine_similarity")
class CosineSimilarity(Layer):
    """x1·x2 / sqrt(max(|x1|²·|x2|², eps²)) along dim, broadcasting (torch's formula)."""

    arg_names = ("", "", "dim", "eps")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", 1)
        self.eps = self.float_param("eps", 1e-8)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise self.error(f"inputs of shapes {inputs[0].shape} and {inputs[1].shape} do not broadcast") from None
        d = normalize_axis(self, self.dim, len(shape))
        dot = (a * b).sum(axis=d)
        norms = (a * a).sum(axis=d) * (b * b).sum(axis=d)
        return [(dot / np.sqrt(np.maximum(norms, self.eps**2))).astype(np.result_type(inputs[0], inputs[1]))]


@register("F.pairwise_distance")
class PairwiseDistance(Layer):
    """`F.pairwise_distance(x1, x2, p, eps, keepdim)` = ||x1 − x2 + eps||_p over the last dim."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.p = _p(self)
        self.eps = self.float_param("eps", 1e-6)
        self.keepdim = bool(self.param("keepdim", False))
        i1, i2 = input_index(op, "x1"), input_index(op, "x2")
        self.x1, self.x2 = (0 if i1 is None else i1), (1 if i2 is None else i2)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = inputs[self.x1], inputs[self.x2]
        try:
            diff = a.astype(np.float64) - b + self.eps
        except ValueError:
            raise self.error(f"inputs of shapes {a.shape} and {b.shape} do not broadcast") from None
        axis = -1 if diff.ndim else 0
        return [
            np.asarray(_p_norm(self, diff.reshape(diff.shape or (1,)), self.p, axis, self.keepdim)).astype(
                np.result_type(a, b)
            )
        ]
