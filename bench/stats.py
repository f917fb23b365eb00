"""Small statistics for the benchmark (no NumPy: the probe and worker processes time imports)."""

from __future__ import annotations


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if not n:
        return float("nan")
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile, q in [0, 1]."""
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def iqr_percent(xs: list[float]) -> float:
    """Interquartile range as a percentage of the median: the spread of the runs."""
    m = median(xs)
    return 100.0 * (quantile(xs, 0.75) - quantile(xs, 0.25)) / m if m else float("nan")
