"""The evaluator's dtypes and values against PyTorch itself (skipped where torch is absent).

Each case is an expression and the PyTorch code pnnx generates for it (ir.cpp's
expand_expression: `add` -> `+`, `floor_divide` -> `//`, `max` -> torch.max, ...).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kuiper_core import expression as ex  # noqa: E402

rng = np.random.default_rng(7)
F = rng.standard_normal((2, 3, 4)).astype(np.float32) * 3
F_HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, np.nan, -0.0], np.float32)
G = rng.standard_normal((1, 3, 1)).astype(np.float32) + 0.1
I = rng.integers(-20, 20, (2, 3, 4))
J = rng.integers(1, 6, (1, 3, 1))
B = rng.standard_normal((2, 3, 4)) > 0

CASES: list[tuple[str, list[np.ndarray], Callable[..., Any]]] = [
    ("mul(@0,0.5)", [I], lambda a: a * 0.5),
    ("div(@0,@1)", [I, J], lambda a, b: a / b),
    ("floor_divide(@0,@1)", [I, J], lambda a, b: a // b),
    ("remainder(@0,-3)", [I], lambda a: a % -3),
    ("fmod(@0,-3)", [I], lambda a: torch.fmod(a, -3)),
    ("sqrt(abs(@0))", [I], lambda a: torch.sqrt(torch.abs(a))),
    ("exp(div(@0,10))", [I], lambda a: torch.exp(a / 10)),
    ("add(@0,@1)", [I.astype(np.int32), F.astype(np.float16)], lambda a, b: a + b),
    ("add(@0,@1)", [F, G.astype(np.float64)], lambda a, b: a + b),
    ("add(@0,1)", [B], lambda a: a + 1),
    ("mul(@0,1.5)", [B], lambda a: a * 1.5),
    ("and(@0,@1)", [B, ~B], lambda a, b: a & b),
    ("floor(@0)", [I], torch.floor),
    ("round(@0)", [F_HALVES], torch.round),
    ("sign(@0)", [F_HALVES], torch.sign),
    ("max(@0,@1)", [F_HALVES, F_HALVES[::-1].copy()], torch.max),
    ("minimum(@0,@1)", [F_HALVES, F_HALVES[::-1].copy()], torch.minimum),
    ("pow(@0,2)", [I], lambda a: torch.pow(a, 2)),
    ("pow(abs(@0),0.5)", [I], lambda a: torch.pow(torch.abs(a), 0.5)),
    ("atan2(@0,@1)", [I, J], torch.atan2),
    ("pow(@0,2)", [F], lambda a: torch.pow(a, 2)),
    ("pow(abs(@0),0.5)", [F], lambda a: torch.pow(torch.abs(a), 0.5)),
    ("pow(abs(@0),1.5)", [F], lambda a: torch.pow(torch.abs(a), 1.5)),
    ("pow(@0,@1)", [np.abs(F), G], torch.pow),
    ("erf(@0)", [F], torch.erf),
    ("erf(@0)", [np.linspace(-7, 7, 301).astype(np.float32)], torch.erf),
    ("logaddexp(@0,@1)", [F, G], torch.logaddexp),
    ("expm1(@0)", [F], torch.expm1),
    ("log1p(abs(@0))", [F], lambda a: torch.log1p(torch.abs(a))),
    ("reciprocal(@0)", [J], torch.reciprocal),
    ("rsqrt(@0)", [J], torch.rsqrt),
    ("floor_divide(@0,@1)", [F, G], lambda a, b: a // b),
    ("remainder(@0,@1)", [F, G], lambda a, b: a % b),
    ("fmod(@0,@1)", [F, G], torch.fmod),
    ("lshift(@0,2)", [I], lambda a: a << 2),
    ("rshift(@0,1)", [I], lambda a: a >> 1),
    ("xor(@0,@1)", [I, J], lambda a, b: a ^ b),
    ("mul(@0,size(@0,2))", [F], lambda a: a * a.size(2)),
    ("div(@0,size(@0,-1))", [I], lambda a: a / a.size(-1)),
    ("sub(1.0,add(@0,mul(@1,2.0)))", [F, G], lambda a, b: 1.0 - (a + b * 2.0)),
    ("torch.long(@0)", [F], lambda a: a.to(torch.long)),
    ("torch.bool(@0)", [F], lambda a: a.to(torch.bool)),
    ("torch.float(@0)", [I], lambda a: a.to(torch.float)),
    ("square(@0)", [I], torch.square),
    ("trunc(mul(@0,1.7))", [F], lambda a: torch.trunc(a * 1.7)),
    ("ceil(@0)", [F], torch.ceil),
    ("acosh(add(abs(@0),1.0))", [F], lambda a: torch.acosh(torch.abs(a) + 1.0)),
]


@pytest.mark.parametrize("text,inputs,fn", CASES, ids=[f"{c[0]}-{c[1][0].dtype}" for c in CASES])
def test_matches_torch(text: str, inputs: list[np.ndarray], fn: Callable[..., Any]) -> None:
    with torch.no_grad():
        ref = fn(*[torch.from_numpy(x) for x in inputs]).numpy()
    y = ex.evaluate(text, inputs)
    assert y.dtype == ref.dtype, f"{text}: dtype {y.dtype}, torch {ref.dtype}"
    assert y.shape == ref.shape
    if ref.dtype.kind in "biu":
        np.testing.assert_array_equal(y, ref)
    else:
        np.testing.assert_allclose(y, ref, rtol=2e-6, atol=2e-7, equal_nan=True)


def test_scalar_arithmetic_is_python_arithmetic() -> None:
    x = torch.zeros(2, 3, 4)
    assert ex.evaluate("div(size(@0,2),8)", [x.numpy()]) == x.size(2) / 8
    assert ex.evaluate("floor_divide(size(@0,2),3)", [x.numpy()]) == x.size(2) // 3
    assert ex.evaluate("remainder(neg(size(@0,2)),3)", [x.numpy()]) == (-x.size(2)) % 3
