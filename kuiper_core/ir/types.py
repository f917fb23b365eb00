"""The value type of the IR and the `<...>` body shared by the tensor type and the weight.

    pnnx.tensor<1x3x224x224xf32>   dims then the dtype, separated by `x`
    pnnx.tensor<1x3x?x%hxf32>      `?` an unknown dim, `%name` a symbolic dim
    pnnx.tensor<f32>               a scalar (rank 0)
    pnnx.any                       an operand with no `#` annotation (shape and dtype unknown)

A bare symbol name cannot hold `x` (it separates dims) or characters outside [A-Za-z0-9_];
such names are quoted: `%"max_x"`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from collections.abc import Callable

from ..errors import ParseError, short
from ..graph import DTYPES, Dim, Shape

_SYMBOL = re.compile(r"[A-Za-wyzA-Z0-9_]+")  # a bare symbolic dim name: no 'x'
_DIGITS = re.compile(r"\d+")
_DTYPE = re.compile(r"[A-Za-z][A-Za-z0-9]*")


@dataclass(frozen=True)
class TensorType:
    """The type of a value: a shape and dtype, or neither (`pnnx.any`)."""

    shape: Shape | None
    dtype: str | None

    @property
    def known(self) -> bool:
        return self.shape is not None


ANY = TensorType(None, None)


def format_dim(d: Dim) -> str:
    if d is None:
        return "?"
    if isinstance(d, str):
        return f"%{d}" if _SYMBOL.fullmatch(d) else "%" + json.dumps(d, ensure_ascii=False)
    return str(d)


def format_body(shape: Shape, dtype: str) -> str:
    """`1x3x?x%hxf32` (no angle brackets)."""
    return "".join(f"{format_dim(d)}x" for d in shape) + dtype


def parse_body(body: str, error: Callable[[int, int, str], ParseError], *, symbolic: bool) -> tuple[Shape, str]:
    """Dims and dtype of a body; `error(start, end, message)` locates offsets within it.

    symbolic=False (weights) allows only non-negative ints."""
    dims: list[Dim] = []
    i, n = 0, len(body)
    want = "a dim (an int, '?' or '%name') or a dtype" if symbolic else "a dim (an int) or a dtype"
    while True:
        if i >= n:
            raise error(i, i, f"expected {want} before '>'")
        ch = body[i]
        if ch.isdigit():
            m = _DIGITS.match(body, i)
            assert m is not None
            if len(m.group()) > 18:
                raise error(i, m.end(), f"dim {short(m.group())} is too large")
            dims.append(int(m.group()))
            i = m.end()
        elif symbolic and ch == "?":
            dims.append(None)
            i += 1
        elif symbolic and ch == "%":
            if body.startswith('"', i + 1):
                name, i = _quoted(body, i + 1, error)
            else:
                m = _SYMBOL.match(body, i + 1)
                if m is None:
                    raise error(i, i + 1, "expected a symbol name after '%' (quote it if it holds 'x': %\"max_x\")")
                name, i = m.group(), m.end()
            dims.append(name)
        else:
            m = _DTYPE.match(body, i)
            if m is None:
                raise error(i, i + 1, f"expected {want}, got {body[i]!r}")
            word = m.group()
            head = word.split("x")[0]
            if word not in DTYPES and head in DTYPES:  # `f32x2`: something after the dtype
                raise error(i + len(head), n, f"unexpected '{body[i + len(head) :]}' after the dtype '{head}'")
            if word not in DTYPES:
                raise error(i, m.end(), f"unknown dtype '{word}': expected one of {' '.join(DTYPES)}")
            if m.end() != n:
                raise error(m.end(), n, f"unexpected '{body[m.end() :]}' after the dtype '{m.group()}'")
            return tuple(dims), m.group()
        if i >= n or body[i] != "x":
            got = repr(body[i]) if i < n else "'>'"
            raise error(i, i + 1, f"expected 'x' after a dim, got {got}")
        i += 1


def _quoted(body: str, start: int, error: Callable[[int, int, str], ParseError]) -> tuple[str, int]:
    """A JSON string at body[start] (symbol names that need quoting)."""
    try:
        value, end = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError:
        raise error(start, len(body), "malformed quoted symbol name") from None
    if not isinstance(value, str) or value == "":
        raise error(start, end, "a quoted symbol name must be a non-empty string")
    return value, end
