"""One operator in two halves on two threads: the caller's and a persistent helper's.

Why: at batch 1 with two BLAS threads only OpenBLAS's bigger GEMMs use the second core; the
Winograd transforms, gathers, scatters and pooling passes run on one (ResNet-18 b1: 35 ms
at one thread, 26 at two, PyTorch 21). NumPy releases the GIL inside its copy, ufunc and
BLAS loops, so two threads of ours, each running half of an operator's NumPy calls with the
BLAS at one thread, keep both cores busy. A layer's prepared call made inside `splitting()`
(runtime/split_forward.py builds a whole forward so) runs its two halves through `run_halves`
(convolutions: two kernels for the top and the bottom output rows, conv.py; pooling: two
halves of the channels, pool.py).

The hand-off: the second half goes into the helper's slot and the helper is woken (an Event:
~10 us there and back on a quiet 2-core machine, 2026-11-27). Either thread may run it: the
first to take the half's lock does. The caller, done with its own half, takes the second
too if the helper has not started it, so a helper that starts late (another process on the
core) costs the caller nothing beyond doing the whole operator itself.

Measured (docs/BENCHMARKS.md): in a forward a split call still waits 0.25-0.35 ms beyond its
slower half (waking a thread on the other, halted vCPU of the 2-core VM took 50-70 us, twice a
call; a polling helper was worse: the scheduler time-sliced it with the caller on one vCPU),
and the halves cost more than half the call; ResNet-18 b1 split is as fast as OpenBLAS at two
threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .. import limits as _limits

# A layer splits only where the work of one half (multiply-adds, or a pool's window taps times
# PASS_COST) is at least this. A split call lost 0.25-0.35 ms of wall time to the hand-off and
# the two threads' turns at the GIL (ResNet-18 b1, quiet, 09:08: wall minus the slower half's
# CPU time): its 1x1 stride-2 convs (3.2 M multiply-adds a half, 0.21-0.28 ms whole) took
# 0.33-0.37 ms split; its 3x3 ones (29 M and more a half) gained.
MIN_HALF_WORK = 8_000_000
# Multiply-adds a pooling window tap is worth (ResNet-18's maxpool: 1.6 ms for 1.8 M taps; its
# 1x1 convs 0.28 ms for 6.4 M multiply-adds).
PASS_COST = 16

_local = threading.local()


class Splits:
    """What splitting() yields: how many calls prepared inside were split."""

    made = 0


@contextmanager
def splitting() -> Iterator[Splits]:
    """Layers prepared inside (on this thread) split their calls in two halves where they pay."""
    before = getattr(_local, "splits", None)
    _local.splits = splits = Splits()
    try:
        yield splits
    finally:
        _local.splits = before


def active() -> bool:
    """Inside splitting(): a layer preparing a call may split it (and then calls `made`)."""
    return getattr(_local, "splits", None) is not None


def made() -> None:
    """A layer prepared a split call (counted for splitting()'s caller)."""
    splits = getattr(_local, "splits", None)
    if splits is not None:
        splits.made += 1


class _Half:
    """The second half of one call: whoever takes `claim` first runs it."""

    __slots__ = ("run", "claim", "done", "error")

    def __init__(self, run: Callable[[], None]) -> None:
        self.run = run
        self.claim = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None


class _Helper:
    """The persistent thread that runs second halves (one slot: the caller waits for each)."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.slot: _Half | None = None
        self.limits = _limits.DEFAULT
        self.thread = threading.Thread(target=self._loop, name="kuiper-half", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()  # before reading the slot: a half posted meanwhile wakes us again
            half = self.slot
            if half is None or not half.claim.acquire(blocking=False):
                continue  # the caller took it
            try:
                with _limits.use(self.limits):  # this thread does not see the caller's context
                    half.run()
            except BaseException as e:  # noqa: BLE001  (raised again on the caller's thread)
                half.error = e
            finally:
                half.done.set()

    def post(self, half: _Half) -> None:
        self.limits = _limits.current()
        self.slot = half
        self.wake.set()


_helper: tuple[int, _Helper] | None = None  # (the process it belongs to, the helper)


def helper() -> _Helper:
    """The helper thread (made at first use; again in a forked child)."""
    global _helper
    if _helper is None or _helper[0] != os.getpid():
        _helper = (os.getpid(), _Helper())
    return _helper[1]


def run_halves(first: Callable[[], None], second: Callable[[], None]) -> None:
    """first() on this thread while the helper runs second(); both done on return (module
    docstring). An error in either is raised here, after both have ended."""
    half = _Half(second)
    helper().post(half)
    try:
        first()
    finally:
        if half.claim.acquire(blocking=False):
            half.run()  # the helper has not started it: ours
        else:
            half.done.wait()
    if half.error is not None:
        raise half.error


def split_rows(rows: int, unit: int = 1) -> int:
    """Where to split `rows` output rows: the multiple of `unit` (a Winograd tile's rows) nearest
    the middle, inside (0, rows)."""
    r = unit * max(1, round(rows / (2 * unit)))
    return r if r < rows else max(1, rows // 2)


def input_rows(
    rows: tuple[int, int], height: int, keff: int, stride: int, top: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The input rows [lo, hi) and the (top, bottom) zero padding that give output rows
    rows = [r0, r1) of a window of keff rows, stride `stride`, top padding `top`, on an input
    of `height` rows: output row r reads padded rows r*stride .. r*stride + keff - 1."""
    r0, r1 = rows
    start, stop = r0 * stride - top, (r1 - 1) * stride + keff - top  # input rows, may pass either edge
    lo, hi = max(0, start), min(height, stop)
    return (lo, hi), (lo - start, stop - hi)


__all__ = ["Splits", "active", "input_rows", "made", "run_halves", "split_rows", "splitting"]
