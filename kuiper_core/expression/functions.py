"""The functions of the pnnx.Expression language: arity, meaning, NumPy kernel, dtype rule.

One table shared by the parser (names, arity, "did you mean"), the evaluator (kernels and
PyTorch's type promotion) and the app (the one-line meaning of each function).

Every kernel is `f(*args, out=None)` over arrays/NumPy scalars already converted to the
compute dtype, and writes into `out` when given, like a ufunc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

import numpy as np

from ..torch_dtypes import TORCH_DTYPES

Kernel = Callable[..., Any]

# How a function's result dtype follows from its (promoted) argument dtype:
FLOAT = "float"  # int/bool tensors become float32 (sqrt, exp, sin, ...)
KEEP = "keep"  # the promoted dtype (abs, neg, floor, add, mul, pow, ...)
TRUE_DIV = "true_div"  # promoted, then int/bool -> float32 (div, atan2, logaddexp)
BITWISE = "bitwise"  # promoted; only integer or bool tensors
CAST = "cast"  # a fixed target dtype (torch.float, torch.long, torch.bool, ...)
INT = "int"  # Python int() of a scalar or a one-element tensor
SIZE = "size"  # size(@0,dim) -> int, size(@0) -> shape


@dataclass(frozen=True)
class Function:
    name: str
    min_args: int
    max_args: int
    rule: str
    kernel: Kernel | None
    meaning: str
    target: np.dtype | None = None  # for CAST

    @property
    def arity_text(self) -> str:
        if self.min_args == self.max_args:
            n = self.min_args
            return f"{n} argument" + ("s" if n != 1 else "")
        return f"{self.min_args} or {self.max_args} arguments"


# -- kernels NumPy does not have as one ufunc -------------------------------------------


def _rsqrt(x: Any, out: Any = None) -> Any:
    r = np.sqrt(x, out=out)
    return np.reciprocal(r, out=r if isinstance(r, np.ndarray) else None)


def _sign(x: Any, out: Any = None) -> Any:
    # torch.sign(nan) is 0; np.sign(nan) is nan.
    r = np.sign(x, out=out)
    if isinstance(r, np.ndarray) and r.dtype.kind == "f":
        np.copyto(r, 0, where=np.isnan(r))
    elif isinstance(r, np.floating) and np.isnan(r):
        r = r.dtype.type(0)
    return r


def _integral(f: Kernel) -> Kernel:
    """floor/ceil/round/trunc: the identity on integer tensors (NumPy would give float64)."""

    def kernel(x: Any, out: Any = None) -> Any:
        if np.asarray(x).dtype.kind in "iub":
            if out is None:
                return np.array(x, copy=True)
            np.copyto(out, x)
            return out
        return f(x, out=out)

    return kernel


def _erf(x: Any, out: Any = None) -> Any:
    """erf, accurate to ~1e-14 (NumPy has none and the runtime may not use SciPy).

    erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n (2x^2)^n x / (1*3*...*(2n+1)): every term is
    positive, so the sum has no cancellation; 80 terms converge for |x| < 4, and beyond 4
    erf is +-1 to double precision.
    """
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    a = np.minimum(np.abs(x.astype(np.float64)), 6.0)
    a2 = a * a
    term = a.copy()
    total = a.copy()
    for n in range(1, 120):
        term *= 2.0 * a2 / (2 * n + 1)
        total += term
    r = (2.0 / np.sqrt(np.pi)) * np.exp(-a2) * total
    r = np.where(a >= 6.0, 1.0, np.minimum(r, 1.0))
    r = np.where(np.isnan(x), np.nan, np.copysign(r, x))
    if out is not None:
        np.copyto(out, r, casting="unsafe")
        return out
    return r.astype(dtype) if r.ndim else dtype.type(r)


def _integer_division(kernel: Kernel) -> Kernel:
    """floor_divide / remainder / fmod: an integer divisor of 0 raises, as in PyTorch
    (NumPy would give 0 and a warning: a silently different answer)."""

    def f(a: Any, b: Any, out: Any = None) -> Any:
        divisor = np.asarray(b)
        if divisor.dtype.kind in "iub" and not divisor.all():
            raise ZeroDivisionError("integer division by zero (PyTorch raises ZeroDivisionError too)")
        return kernel(a, b, out=out)

    return f


# -- the table ------------------------------------------------------------------------

_UNARY: list[tuple[str, str, Kernel, str]] = [
    ("abs", KEEP, np.abs, "|x|"),
    ("acos", FLOAT, np.arccos, "arc cosine"),
    ("acosh", FLOAT, np.arccosh, "inverse hyperbolic cosine"),
    ("asin", FLOAT, np.arcsin, "arc sine"),
    ("asinh", FLOAT, np.arcsinh, "inverse hyperbolic sine"),
    ("atan", FLOAT, np.arctan, "arc tangent"),
    ("atanh", FLOAT, np.arctanh, "inverse hyperbolic tangent"),
    ("ceil", KEEP, _integral(np.ceil), "round up"),
    ("cos", FLOAT, np.cos, "cosine"),
    ("cosh", FLOAT, np.cosh, "hyperbolic cosine"),
    ("erf", FLOAT, _erf, "error function"),
    ("exp", FLOAT, np.exp, "e^x"),
    ("expm1", FLOAT, np.expm1, "e^x - 1"),
    ("floor", KEEP, _integral(np.floor), "round down"),
    ("log", FLOAT, np.log, "natural logarithm"),
    ("log10", FLOAT, np.log10, "base-10 logarithm"),
    ("log1p", FLOAT, np.log1p, "log(1 + x)"),
    ("neg", KEEP, np.negative, "-x"),
    ("reciprocal", FLOAT, np.reciprocal, "1 / x"),
    ("round", KEEP, _integral(np.rint), "round half to even"),
    ("rsqrt", FLOAT, _rsqrt, "1 / sqrt(x)"),
    ("sign", KEEP, _sign, "-1, 0 or 1 (0 for nan)"),
    ("sin", FLOAT, np.sin, "sine"),
    ("sinh", FLOAT, np.sinh, "hyperbolic sine"),
    ("sqrt", FLOAT, np.sqrt, "square root"),
    ("square", KEEP, np.square, "x * x"),
    ("tan", FLOAT, np.tan, "tangent"),
    ("tanh", FLOAT, np.tanh, "hyperbolic tangent"),
    ("trunc", KEEP, _integral(np.trunc), "round toward zero"),
]

_BINARY: list[tuple[str, str, Kernel, str]] = [
    ("add", KEEP, np.add, "a + b"),
    ("sub", KEEP, np.subtract, "a - b"),
    ("mul", KEEP, np.multiply, "a * b"),
    ("div", TRUE_DIV, np.true_divide, "a / b (true division)"),
    ("floor_divide", KEEP, _integer_division(np.floor_divide), "floor(a / b)"),
    ("remainder", KEEP, _integer_division(np.remainder), "a mod b, sign of b (Python %)"),
    ("fmod", KEEP, _integer_division(np.fmod), "a mod b, sign of a (C fmod)"),
    ("pow", KEEP, np.power, "a ** b"),
    ("atan2", TRUE_DIV, np.arctan2, "angle of (b, a)"),
    ("max", KEEP, np.maximum, "elementwise maximum (nan wins)"),
    ("maximum", KEEP, np.maximum, "elementwise maximum (nan wins)"),
    ("min", KEEP, np.minimum, "elementwise minimum (nan wins)"),
    ("minimum", KEEP, np.minimum, "elementwise minimum (nan wins)"),
    ("logaddexp", TRUE_DIV, np.logaddexp, "log(e^a + e^b)"),
    ("and", BITWISE, np.bitwise_and, "a & b"),
    ("or", BITWISE, np.bitwise_or, "a | b"),
    ("xor", BITWISE, np.bitwise_xor, "a ^ b"),
    ("lshift", BITWISE, np.left_shift, "a << b"),
    ("rshift", BITWISE, np.right_shift, "a >> b"),
]

# Casts as pnnx writes them (Tensor.to on a scalar): `torch.float(...)`; the dtypes an
# expression can meet, not every torch dtype.
_CASTS: dict[str, np.dtype] = {
    name: TORCH_DTYPES[name]
    for name in (
        "torch.float",
        "torch.float32",
        "torch.double",
        "torch.float64",
        "torch.half",
        "torch.float16",
        "torch.long",
        "torch.int64",
        "torch.int",
        "torch.int32",
        "torch.bool",
    )
}


def _build() -> dict[str, Function]:
    table: dict[str, Function] = {}
    for name, rule, kernel, meaning in _UNARY:
        table[name] = Function(name, 1, 1, rule, kernel, meaning)
    for name, rule, kernel, meaning in _BINARY:
        table[name] = Function(name, 2, 2, rule, kernel, meaning)
    for name, dtype in _CASTS.items():
        table[name] = Function(name, 1, 1, CAST, None, f"cast to {dtype.name}", target=dtype)
    table["int"] = Function("int", 1, 1, INT, None, "Python int() of a scalar")
    table["size"] = Function("size", 1, 2, SIZE, None, "size(x, dim): one dim; size(x): the shape")
    return table


FUNCTIONS: dict[str, Function] = _build()
UNARY_NAMES: tuple[str, ...] = tuple(n for n, *_ in _UNARY)
BINARY_NAMES: tuple[str, ...] = tuple(n for n, *_ in _BINARY)
CAST_NAMES: tuple[str, ...] = tuple(_CASTS)
# Names that are values, not calls.
LITERAL_NAMES: dict[str, Any] = {"True": True, "False": False, "None": None}
