"""Big copies and elementwise passes split over two cores.

NumPy's BLAS runs the GEMMs on every core it was given (OPENBLAS_NUM_THREADS); everything
else (im2col and Winograd gathers and scatters, padding, in-place activations) runs on the
calling thread. NumPy releases the GIL inside those loops, so one helper thread doing half
of a big pass while the caller does the other half uses the second core.

`copyto(dst, src)` and `ufunc(f, *args, out=...)` do exactly what np.copyto and f(*args,
out=out) do; they split along the first axis whose length is at least 2 when the pass is
big enough to pay for the hand-off (a few microseconds), the helper is free, and two cores
are configured. Otherwise they run the pass whole, on the caller's thread.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np

# A pass over fewer elements than this runs whole: the hand-off costs ~5-10 us.
MIN_ELEMENTS = 1 << 16


def _configured_threads() -> int:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.strip().isdigit():
            return max(1, int(value))
    return os.cpu_count() or 1


class _Helper:
    """One daemon thread that runs one half-pass at a time for whoever holds `busy`."""

    def __init__(self) -> None:
        self.busy = threading.Lock()  # held by the caller for the length of one split pass
        self._go = threading.Semaphore(0)
        self._done = threading.Semaphore(0)
        self._job: tuple[Callable[..., Any], tuple, dict] | None = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, name="kuiper-parallel", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            assert self._job is not None
            fn, args, kwargs = self._job
            try:
                fn(*args, **kwargs)
            except BaseException as e:  # handed back to the caller
                self._error = e
            # Hold no array between jobs: steps() reuses memory nothing refers to (step_arena.py).
            self._job = fn = args = kwargs = None  # type: ignore[assignment]
            self._done.release()

    def run_pair(self, fn: Callable[..., Any], first: tuple[tuple, dict], second: tuple[tuple, dict]) -> None:
        """fn(*first) on the helper while fn(*second) runs here; the caller holds `busy`."""
        self._job = (fn, first[0], first[1])
        self._error = None
        self._go.release()
        try:
            fn(*second[0], **second[1])
        finally:
            self._done.acquire()
        if self._error is not None:
            raise self._error


THREADS = _configured_threads()
_helper: _Helper | None = None
_helper_lock = threading.Lock()


def _get_helper() -> _Helper | None:
    global _helper
    if THREADS < 2:
        return None
    if _helper is None:
        with _helper_lock:
            if _helper is None:
                _helper = _Helper()
    return _helper


def _split_axis(shape: tuple[int, ...]) -> int | None:
    return next((a for a, n in enumerate(shape) if n >= 2), None)


def _halves(a: Any, axis: int, size: int) -> tuple[Any, Any]:
    """The two halves of an operand along `axis` (broadcast operands, scalars: whole)."""
    if not isinstance(a, np.ndarray) or a.ndim <= axis or a.shape[axis] != size:
        return a, a
    mid = size // 2
    index = (slice(None),) * axis
    return a[index + (slice(0, mid),)], a[index + (slice(mid, size),)]


def _split(fn: Callable[..., Any], out: np.ndarray, args: tuple, out_key: str | None) -> bool:
    """Run fn over two halves of `out` (and of the operands that have its shape); False if it
    should run whole instead."""
    if out.size < MIN_ELEMENTS:
        return False
    helper = _get_helper()
    axis = _split_axis(out.shape)
    if helper is None or axis is None or threading.current_thread() is helper.thread:
        return False
    if any(isinstance(a, np.ndarray) and a.ndim != out.ndim and a.size > 1 for a in args):
        return False  # right-aligned broadcasting: keep it simple
    if not helper.busy.acquire(blocking=False):
        return False  # another thread is using the helper: do it alone
    try:
        size = out.shape[axis]
        pairs = [_halves(a, axis, size) for a in (out,) + tuple(args)]
        first = tuple(p[0] for p in pairs)
        second = tuple(p[1] for p in pairs)
        if out_key is None:  # fn(out, *args), as np.copyto(dst, src)
            helper.run_pair(fn, (first, {}), (second, {}))
        else:  # fn(*args, out=out), as a ufunc
            helper.run_pair(fn, (first[1:], {out_key: first[0]}), (second[1:], {out_key: second[0]}))
    finally:
        helper.busy.release()
    return True


def copyto(dst: np.ndarray, src: np.ndarray) -> None:
    """np.copyto(dst, src) (same shapes, or src broadcast over a dim of length 1)."""
    if not _split(np.copyto, dst, (src,), None):
        np.copyto(dst, src)


def ufunc(f: Callable[..., Any], *args: Any, out: np.ndarray) -> None:
    """f(*args, out=out) for an elementwise ufunc (or np.clip)."""
    if not _split(f, out, args, "out"):
        f(*args, out=out)
