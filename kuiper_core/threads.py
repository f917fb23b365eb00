"""Two halves of a job on two threads: a persistent worker thread and the BLAS's thread count.

The engine runs on the caller's thread; OpenBLAS (NumPy's bundled scipy-openblas) spreads
big GEMMs over its own threads. Everything else (copies, transforms, small or batched GEMMs,
which OpenBLAS scales poorly) runs on one core. `run_pair` runs two independent halves of a
job (e.g. a convolution's two bands of output rows, layers/conv_split.py) at once: one on a
worker thread, one on the caller, with OpenBLAS at one thread meanwhile so that the halves
do not fight over its pool. NumPy releases the GIL in copies, ufuncs and BLAS calls.

How many threads: the BLAS's own count (OPENBLAS_NUM_THREADS, or a threadpoolctl limit
set by the user), read on every call (0.1 us), so with one thread nothing changes. A BLAS
this module cannot reach (not NumPy's bundled OpenBLAS) counts as one thread.

Measured here (2 cores): a hand-off to the waiting worker and back ~14 us; switching
OpenBLAS's count 2 -> 1 -> 2 by ctypes ~0.8 us (threadpoolctl's `threadpool_limits`
context ~ms: it inspects the loaded libraries on every use).
"""

from __future__ import annotations

import _thread
import ctypes
import glob
import os
import threading
import time
from typing import Callable

import numpy as np

# How long the worker polls for its next job before it sleeps (see _Worker._wait_for_job).
SPIN_SECONDS = 0.01
_SET_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_GET_NAMES = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads")


def _load_blas() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """set/get_num_threads of NumPy's bundled OpenBLAS (the wheel's numpy.libs), if found."""
    libs_dir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "lib*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in zip(_SET_NAMES, _GET_NAMES):
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


_blas = _load_blas()


def blas_threads() -> int:
    """The BLAS's current thread count (1 when it cannot be read)."""
    return _blas[1]() if _blas is not None else 1


def set_blas_threads(n: int) -> None:
    if _blas is not None:
        _blas[0](n)


class _Worker:
    """One daemon thread that runs a job handed to it and signals when done. Plain locks
    as semaphores: the cheapest hand-off Python offers (threading.Event measured the same
    or slower)."""

    def __init__(self) -> None:
        self._start = _thread.allocate_lock()
        self._start.acquire()
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self.busy = _thread.allocate_lock()  # held by the caller of a pair
        self._job: Callable[[], None] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._loop, name="kuiper-worker", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._wait_for_job()
            try:
                self._job()  # type: ignore[misc]
            except BaseException as e:  # handed to the caller
                self._error = e
            self._job = None
            self._done.release()

    def _wait_for_job(self) -> None:
        """Poll for SPIN_SECONDS before sleeping: a sleeping thread's core may halt (this VM
        halts an idle vCPU at once) and waking it took 1-3 ms, more than a split saves.
        time.sleep(0) releases the GIL between polls."""
        deadline = time.perf_counter() + SPIN_SECONDS
        while not self._start.acquire(False):
            if time.perf_counter() > deadline:
                self._start.acquire()
                return
            time.sleep(0)

    def pair(self, first: Callable[[], None], second: Callable[[], None]) -> None:
        """first() on the worker, second() here; returns when both are done. Call with
        `busy` held."""
        self._job, self._error = first, None
        self._start.release()
        try:
            second()
        finally:
            self._done.acquire()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


_worker: _Worker | None = None
_worker_made = threading.Lock()


def _get_worker() -> _Worker:
    global _worker
    if _worker is None:
        with _worker_made:
            if _worker is None:
                _worker = _Worker()
    return _worker


def _forget_worker() -> None:
    global _worker
    _worker = None  # a forked child has no worker thread: it makes its own


os.register_at_fork(after_in_child=_forget_worker)


def run_pair(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run two independent halves of a job: at once on two threads (OpenBLAS at one thread
    meanwhile) when the BLAS may use two or more; one after the other on this thread when
    it may use one, or when the worker is busy with another caller's pair."""
    threads = blas_threads()
    worker = _get_worker() if threads >= 2 else None
    if worker is None or not worker.busy.acquire(blocking=False):
        first()
        second()
        return
    try:
        set_blas_threads(1)
        try:
            worker.pair(first, second)
        finally:
            set_blas_threads(threads)
    finally:
        worker.busy.release()
