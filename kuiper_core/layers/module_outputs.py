"""Which of a module's outputs did pnnx keep?

A torch module such as nn.LSTM returns several tensors (output, h_n, c_n). pnnx drops the
ones the model never uses and writes only the rest, in their original order, without saying
which were dropped: `_, (h, _) = lstm(x)` becomes an `nn.LSTM` with one output shaped like
h_n. The declared `#` shapes are the only trace of the choice, so a layer lists the output
combinations it could have (most likely first) and picks the first whose shapes fit.
Combinations whose shapes coincide (h_n and c_n always do) cannot be told apart; the
earlier one wins, which is pnnx's own positional reading.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..graph import Shape, format_shape
from .registry import Layer


def dims_compatible(a: Shape | None, b: Shape | None) -> bool:
    """Same rank and equal dims wherever both are known ints (None/str match anything)."""
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(not isinstance(x, int) or not isinstance(y, int) or x == y for x, y in zip(a, b))


def ordered_subsets(names: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """Every choice of n of the names, order kept, earliest positions first."""
    return list(itertools.combinations(names, n))


def match_outputs(
    layer: Layer,
    shapes: dict[str, Shape | None],
    combos: Sequence[tuple[str, ...]],
) -> tuple[str, ...]:
    """The first combination whose expected shapes fit the operator's declared outputs.

    `shapes` maps each possible output to the shape it would have (from the declared input
    shapes); `combos` lists candidate combinations in order of preference.
    """
    declared = [o.shape for o in layer.op.outputs]
    for combo in combos:
        if len(combo) == len(declared) and all(dims_compatible(shapes[n], d) for n, d in zip(combo, declared)):
            return combo
    possible = ", ".join(f"{n} {format_shape(s)}" for n, s in shapes.items())
    got = ", ".join(format_shape(d) for d in declared)
    raise layer.error(f"{len(declared)} output(s) shaped {got} match none of the module's outputs: {possible}")
