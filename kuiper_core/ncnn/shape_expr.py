"""ncnn's shape expressions: a string param such as Reshape's `6="0w,*(1h,2),-1"`, a list of
prefix expressions over the bottoms' dims (`0w` is bottom 0's w; w h d c name a blob's dims
innermost first), read as ncnn's eval_list_expression does: tokens split at `(`, `)` and `,`,
evaluated right to left on a stack, the stack read from the top is the list (w first).

Integer arithmetic stays integer (`//` floors); a float result is truncated when it becomes a
size, as ncnn's to_int does. Only what sizes need is here: + - * // / max min abs neg and the
rounding functions; anything else is a ValueError naming the token. So is a value that is not
finite or past MAX_VALUE (what no size comes near): `inf` or `*(1e308,10.0)` reached
`int()` as an OverflowError, and 20,000 nested `*` made a 160,000-digit integer."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from ..errors import short

Value = int | float
MAX_VALUE = 1 << 62  # any value of an expression, inside int64 (sizes are checked against the limits later)

_DIM = re.compile(r"(\d)([whdcn])\Z")
_BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) else float(math.floor(a / b)),
    "/": lambda a, b: float(a) / float(b),
    "max": max,
    "min": min,
}
_UNARY: dict[str, Callable[[Value], Value]] = {
    "abs": abs,
    "neg": lambda a: -a,
    "trunc": lambda a: int(a),
    "ceil": lambda a: math.ceil(a),
    "floor": lambda a: math.floor(a),
    "round": lambda a: int(math.copysign(math.floor(abs(a) + 0.5), a)),  # C's round: half away from 0
}


def dims_of(shape: Sequence[int]) -> dict[str, int]:
    """A blob's ncnn dims by name (w innermost; a missing one is 1, as in ncnn's Mat)."""
    names = ("w", "h", "d", "c") if len(shape) == 4 else ("w", "h", "c")
    dims = dict.fromkeys(("w", "h", "d", "c"), 1)
    dims.update(zip(names, reversed(shape)))
    dims["n"] = 1
    return dims


def blobs_used(expr: str) -> int:
    """How many bottoms the expression reads (the highest `Nx` index + 1)."""
    return max((int(m.group(1)) + 1 for t in _tokens(expr) if (m := _DIM.match(t))), default=0)


def evaluate(expr: str, shapes: Sequence[Sequence[int]]) -> list[int]:
    """The list of sizes `expr` gives for bottoms of these shapes (w first, as ncnn lists)."""
    stack: list[Value] = []
    for t in reversed(_tokens(expr)):
        if m := _DIM.match(t):
            i = int(m.group(1))
            if i >= len(shapes):
                raise ValueError(f"shape expression {expr!r} reads bottom {i}, the layer has {len(shapes)}")
            stack.append(dims_of(shapes[i])[m.group(2)])
        elif t in _BINARY or t in _UNARY:
            arity = 2 if t in _BINARY else 1
            if len(stack) < arity:
                raise ValueError(f"shape expression {expr!r}: {t!r} needs {arity} operand(s)")
            a = stack.pop()
            if t in _UNARY:
                stack.append(_UNARY[t](a))
                _in_range(stack[-1], t, expr)
                continue
            b = stack.pop()
            if t in ("//", "/") and b == 0:
                raise ValueError(f"shape expression {expr!r} divides by zero")
            stack.append(_BINARY[t](a, b))
        else:
            stack.append(_literal(t, expr))
        _in_range(stack[-1], t, expr)
    if not stack:
        raise ValueError(f"shape expression {expr!r} is empty")
    return [int(v) for v in reversed(stack)]


def _in_range(value: Value, token: str, expr: str) -> None:
    if not (isinstance(value, int) or math.isfinite(value)) or abs(value) > MAX_VALUE:
        raise ValueError(
            f"shape expression {short(expr)!r}: {short(token)!r} gives a value past {MAX_VALUE:,} (or not finite)"
        )


def _tokens(expr: str) -> list[str]:
    return [t for t in re.split(r"[(),]", expr) if t]


def _literal(t: str, expr: str) -> Value:
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        raise ValueError(f"shape expression {expr!r}: {t!r} is not a size, a number or an operator we run") from None
