"""Timing and small statistics for the benchmarks (no NumPy: probe processes time imports)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable


def timed_blocks(
    engines: dict[str, Callable[[], object]],
    runs: int,
    rounds: int,
    warmup: int = 3,
    warmup_seconds: float = 0.3,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per run of each engine in one process, measured in alternating blocks: after
    a warm-up, `rounds` times each engine does one untimed and `runs` timed runs (load from
    other processes hits all alike; idle worker threads of one do not steal the other's
    cores mid-block). `clock`: time.process_time times CPU time (a busy machine, one thread)."""
    for fn in engines.values():
        start = time.perf_counter()
        for i in itertools.count():
            fn()
            if i + 1 >= warmup and time.perf_counter() - start > warmup_seconds:
                break
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(rounds):
        for name, fn in engines.items():
            fn()
            for _ in range(runs):
                t0 = clock()
                fn()
                times[name].append(clock() - t0)
    return times


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
