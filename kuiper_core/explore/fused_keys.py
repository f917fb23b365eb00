"""Forward-hook keys of modules pnnx fused away, placed by the keys' order.

A TorchScript model converted by pnnx keeps module paths as operator names, except where pnnx
fuses a BatchNorm into the convolution (or linear) before it: `features.0.0` (Conv2d) and
`features.0.1` (BatchNorm2d) become one operator `convbn2d_0`, whose output is the BatchNorm's.
Every torchvision classifier has dozens of these. The hook snippet saves tensors in the order
the modules ran, so between two keys that do name operators (anchors: `features.0.2`, the
ReLU6) the keys left over and the fused operators left over can be paired: a fused operator
takes the second of two consecutive sibling keys of its shape (the convolution's, then the
BatchNorm's: the one it computes). Only where the counts and shapes agree exactly in a stretch
between anchors; otherwise nothing there is paired (a key left unmatched is reported, a wrong
pairing would be a false alarm). Keys not in execution order (a file written sorted) pair none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph

# pnnx's names for a convolution / linear with a BatchNorm folded in (convbn2d_0, convtransposebn2d_1, linearbn_0)
_FUSED = re.compile(r"(?:conv|convtranspose|linear)bn(?:\dd)?_\d+")


@dataclass
class FusedKeys:
    operands: dict[str, str] = field(default_factory=dict)  # the BatchNorm's key -> the fused operator's output
    absorbed: dict[str, str] = field(default_factory=dict)  # the convolution's key -> the fused operator's name


def _parent(key: str) -> str:
    return key.rpartition(".")[0]


def fused_keys(graph: Graph, npz: Mapping[str, np.ndarray], matched: Mapping[str, str]) -> FusedKeys:
    """Pair the keys of `npz` (in its order) that `matched` left out with the fused operators
    that have no reference yet; `matched` maps keys already placed to their operands."""
    found = FusedKeys()
    order = {o.name: i for i, op in enumerate(graph.operators) for o in op.outputs}
    ops = list(graph.operators)
    keys = list(npz)
    anchors = [(k, order[matched[k]]) for k in keys if k in matched and not k.startswith("out")]
    positions = [p for _, p in anchors]
    if not anchors or positions != sorted(positions):
        return found  # no anchor, or keys not in execution order: nothing can be placed safely
    taken = set(matched.values())
    fused = [
        i
        for i, op in enumerate(ops)
        if _FUSED.fullmatch(op.name) and len(op.outputs) == 1 and op.outputs[0].name not in taken
    ]
    # stretches between anchors: (key positions after one anchor, operators after its operator)
    key_at = {k: i for i, k in enumerate(keys)}
    bounds = [(-1, -1), *((key_at[k], p) for k, p in anchors), (len(keys), len(ops))]
    for (k0, p0), (k1, p1) in zip(bounds, bounds[1:]):
        loose = [k for k in keys[k0 + 1 : k1] if k not in matched and not k.startswith("out")]
        here = [i for i in fused if p0 < i < p1]
        if not here:
            continue
        pairs: list[tuple[str, str]] = []
        j = 0
        while j + 1 < len(loose):
            a, b = loose[j], loose[j + 1]
            if _parent(a) == _parent(b) and np.shape(npz[a]) == np.shape(npz[b]):
                pairs.append((a, b))
                j += 2
            else:
                j += 1
        if len(pairs) != len(here):
            continue
        shapes = [ops[i].outputs[0].shape for i in here]
        if any(s is not None and tuple(s) != np.shape(npz[b]) for s, (_, b) in zip(shapes, pairs)):
            continue
        for i, (a, b) in zip(here, pairs):
            found.operands[b] = ops[i].outputs[0].name
            found.absorbed[a] = ops[i].name
    return found


def absorbed_note(absorbed: Mapping[str, str], placed: Sequence[str]) -> str | None:
    """What the app and `kuiper compare` say about the keys paired with fused operators."""
    if not placed:
        return None
    some = ", ".join(f"{k} → {absorbed[k]}" for k in list(absorbed)[:2])
    return (
        f"pnnx fused {len(placed)} BatchNorm(s) into the convolution before it: each BatchNorm's tensor is compared "
        f"with the fused operator's output, placed by the order the modules ran; the convolutions' own "
        f"(pre-BatchNorm) tensors exist nowhere in the converted model ({some}{', …' if len(absorbed) > 2 else ''})"
    )
