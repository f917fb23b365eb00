"""How far float32 rounding alone moves a model's outputs on an input (`kuiper opt -O2 --check`).

-O2's passes reorder float arithmetic (folded batch norms, fused expressions), which moves the
outputs by rounding: within exactness.ROUNDING of their scale on a well-conditioned input. An
ill-conditioned one (EfficientNet's saturated squeeze-excitation sigmoids on randn·2 + 0.5)
amplifies every float32 rounding thousands of times, the original model's own as much as a
pass's: its folded batch norms then move outputs of ~2e3 by 1-25 (docs/coverage.md). So a
difference beyond ROUNDING is judged against what rounding does to the original on that input:

- its own float32 error: the original run again in float64 (weights and inputs widened);
- 1-ulp changes of its float inputs (DRAWS random ones): how much a rounding-sized change
  moves the outputs, for any graph (one that cannot run in float64 too).

Each is one draw of an amplified rounding error, which swings from draw to draw (a lucky run
is 30x closer to float64 than the next); the largest of them, times SENSITIVITY_FACTOR, is what
a pass may move an output by, but never more than MAX_SHARE of the output's scale: an input
whose rounding alone moves the outputs that much cannot tell a pass's rounding from a wrong
rewrite (a misplaced BN scale, a dropped term), which moves outputs by their own size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import KuiperError
from ..graph import Graph
from .exactness import outputs_difference
from .rewrite import clone_graph

SENSITIVITY_FACTOR = 10.0
DRAWS = 3
MAX_SHARE = 0.05


@dataclass(frozen=True)
class Sensitivity:
    """Per output: the original's float32 error against its float64 run (None: it cannot run
    in float64 here) and the largest move under 1-ulp input changes (None: no float input)."""

    own: list[float] | None
    perturbed: list[float] | None

    def allowed(self, scales: Sequence[float]) -> list[float] | None:
        """Per output of max |value| `scales`, how far a pass may move it (None: nothing measured)."""
        rows = [r for r in (self.own, self.perturbed) if r is not None]
        if not rows:
            return None
        return [min(SENSITIVITY_FACTOR * max(values), MAX_SHARE * s) for values, s in zip(zip(*rows), scales)]

    def text(self) -> str:
        parts = []
        if self.own is not None:
            parts.append(f"its own float32 error against a float64 run is {max(self.own, default=0):.3g}")
        if self.perturbed is not None:
            parts.append(f"1-ulp changes of the input move it by up to {max(self.perturbed, default=0):.3g}")
        return "; ".join(parts) if parts else "its float32 sensitivity could not be measured"


def in_float64(graph: Graph) -> Graph:
    """A copy of `graph` computing in float64: float32 weights (new arrays) and declared f32
    operands widened; the original is untouched."""
    wide = clone_graph(graph)
    for op in wide.operators:
        for attr in op.attrs.values():
            data = attr.data
            if data is not None and data.dtype == np.float32:
                attr.data = data.astype(np.float64)
                attr.dtype = "f64"
    for operand in wide.operands.values():
        if operand.dtype == "f32":
            operand.dtype = "f64"
    return wide


def _max_differences(outputs: Sequence[object], others: Sequence[object], wide: bool = False) -> list[float] | None:
    """Per output, max |a − b| over elements finite in both; None when they are not float
    arrays of one shape (or, `wide`, the others not float64: part of the run stayed float32)."""
    result = []
    for y, z in zip(outputs, others):
        a, b = np.asarray(y), np.asarray(z)
        if a.dtype.kind != "f" or b.dtype.kind != "f" or a.shape != b.shape or (wide and b.dtype != np.float64):
            return None
        finite = np.isfinite(a) & np.isfinite(b)
        result.append(float(np.abs(a[finite].astype(np.float64) - b[finite]).max()) if finite.any() else 0.0)
    return result


def scales(outputs: Sequence[object]) -> list[float]:
    """Per output, max |value| over its finite elements (0 for non-float outputs)."""
    result = []
    for y in outputs:
        a = np.asarray(y)
        finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a[:0]
        result.append(float(np.abs(finite).max()) if finite.size else 0.0)
    return result


def measure(graph: Graph, inputs: Sequence[np.ndarray], outputs: Sequence[object], runtime: Any = None) -> Sensitivity:
    """`outputs`: the original `graph` run on `inputs` (copies: `runtime`, the graph built, if
    given, runs again here)."""
    from ..runtime import RuntimeGraph

    if runtime is None:
        runtime = RuntimeGraph.from_graph(graph).build()
    own: list[float] | None = None
    try:
        with np.errstate(all="ignore"):
            wide_inputs = [x.astype(np.float64) if x.dtype == np.float32 else x for x in inputs]
            exact = RuntimeGraph.from_graph(in_float64(graph)).build().forward(*wide_inputs)
        own = _max_differences(outputs, exact, wide=True)
    except (KuiperError, ValueError, TypeError, FloatingPointError):
        pass  # a layer that takes float32 only: the perturbations still measure
    perturbed: list[float] | None = None
    if any(x.dtype.kind == "f" for x in inputs):
        rng = np.random.default_rng(0)
        moves: list[list[float]] = []
        for _ in range(DRAWS):
            changed = [_one_ulp(x, rng) for x in inputs]
            with np.errstate(all="ignore"):
                d = _max_differences(outputs, runtime.forward(*changed))
            if d is not None:
                moves.append(d)
        perturbed = [max(v) for v in zip(*moves)] if moves else None
    return Sensitivity(own, perturbed)


def o2_difference(
    graph: Graph, inputs: Sequence[np.ndarray], before: list, after: list, runtime: Any = None
) -> tuple[str | None, Sensitivity | None]:
    """-O2's verdict on `after` (the optimised graph's outputs) against `before` (the original
    `graph`'s on `inputs`): what differs beyond float rounding (None: nothing), and the
    sensitivity measured when exactness.ROUNDING did not settle it."""
    why = outputs_difference(before, after, exact=False)
    if why is None:
        return None, None
    sensitivity = measure(graph, inputs, before, runtime)
    allowed = sensitivity.allowed(scales(before))
    if allowed is not None:
        why = outputs_difference(before, after, exact=False, allowed=allowed)
    return why, sensitivity


def _one_ulp(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """x with each finite float element moved one ulp up or down at random (others as they are)."""
    if x.dtype.kind != "f":
        return x
    up = rng.random(x.shape) < 0.5
    moved = np.where(up, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)).astype(x.dtype)
    return np.where(np.isfinite(x), moved, x)
