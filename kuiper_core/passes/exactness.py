"""Are an optimised model's outputs the original's? (`kuiper opt --check`, tools/fuzz_passes.py)

-O1 promises the same numbers: every output bit for bit, signed zeros and NaN positions
included (`x + 0.0` turns -0.0 into +0.0, and 1/x then gives +inf where it gave -inf).
-O2 may reorder float arithmetic (fused expressions, folded batch norms): finite values may
differ by rounding, within ROUNDING of the output's scale; NaN positions, infinities and the
sign of exact zeros must still match. An input that amplifies float32 rounding moves an output
by more: `allowed` then widens the bound to what rounding does to the original there
(passes/sensitivity.py).
"""

from __future__ import annotations

import numpy as np

ROUNDING = 1e-4  # of max(1, max |y|): float32 reordering on outputs up to ~1e3 stays far below


def _where(index: tuple[int, ...]) -> str:
    return f"[{','.join(map(str, index))}]" if index else "(a scalar)"


def output_difference(original: object, optimised: object, *, exact: bool, allowed: float = 0.0) -> str | None:
    """What differs between one output before and after (None: nothing beyond what the level
    allows). `allowed`: at -O2, finite values may also move by this much (an absolute bound)."""
    a, b = np.asarray(original), np.asarray(optimised)
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        return None if repr(original) == repr(optimised) else f"{original!r} became {optimised!r}"
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{a.shape} became {b.dtype}{b.shape}"
    if a.dtype.kind not in "fc":
        if np.array_equal(a, b):
            return None
        i = tuple(int(v) for v in np.argwhere(a != b)[0])
        return f"at {_where(i)} the original gives {a[i]}, the optimised {b[i]}"
    if a.dtype.kind == "c":
        return output_difference(a.real, b.real, exact=exact, allowed=allowed) or output_difference(
            a.imag, b.imag, exact=exact, allowed=allowed
        )
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    same_bits = (a == b) & (np.signbit(a) == np.signbit(b))  # -0.0 == 0.0, but not the same number
    fine = same_bits | (nan_a & nan_b)
    if not exact:
        scale = max(1.0, float(np.abs(a[np.isfinite(a)]).max())) if np.isfinite(a).any() else 1.0
        both_finite = np.isfinite(a) & np.isfinite(b)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.abs(a.astype(np.float64) - b.astype(np.float64)) <= max(ROUNDING * scale, allowed)
        # rounding may move a value, not flip an exact zero's sign or turn a number into a non-number
        fine |= both_finite & close & ~((a == 0) & (b == 0))
    if fine.all():
        return None
    i = tuple(int(v) for v in np.argwhere(~fine)[0])
    count = int((~fine).sum())
    return f"at {_where(i)} the original gives {_number(a[i])}, the optimised {_number(b[i])}" + (
        f" ({count:,} elements differ)" if count > 1 else ""
    )


def _number(x: np.generic) -> str:
    """A float as a person compares it: -0.0 and +inf keep their signs."""
    v = float(x)
    if v == 0 or np.isinf(v):
        return ("-" if np.signbit(v) else "+") + ("0.0" if v == 0 else "inf")
    return repr(v) if not np.isnan(v) else "nan"


def outputs_difference(
    original: list, optimised: list, *, exact: bool, allowed: list[float] | None = None
) -> str | None:
    """The first output that differs, as `out<i>: …` (None when all agree). `allowed`: per
    output, see output_difference."""
    if len(original) != len(optimised):
        return f"{len(original)} output(s) became {len(optimised)}"
    for i, (a, b) in enumerate(zip(original, optimised)):
        why = output_difference(a, b, exact=exact, allowed=allowed[i] if allowed else 0.0)
        if why is not None:
            return f"out{i}: {why}"
    return None
