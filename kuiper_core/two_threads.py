"""Two halves of a job at once: a persistent worker thread beside the caller's.

The engine runs on the caller's thread; OpenBLAS (NumPy's bundled scipy-openblas) spreads
big GEMMs over its own threads. Everything else (copies, transforms, small or batched GEMMs,
which OpenBLAS scales poorly) runs on one core. `run_pair` runs two independent halves of a
job (a convolution's two bands of output rows, layers/conv_split.py) at once: one on a
worker thread, one on the caller, with OpenBLAS at one thread meanwhile (threads.py) so
that the halves do not fight over its pool. NumPy releases the GIL in copies, ufuncs and
BLAS calls. How many threads: the BLAS's own count (OPENBLAS_NUM_THREADS, or a threadpoolctl
limit set by the user), read on every call, so with one thread nothing changes.

Measured here (2 vCPUs): a lock hand-off to the waiting worker and back 14 us after a pause,
110 us back to back; switching OpenBLAS's count 2 -> 1 -> 2 by ctypes 0.5-0.8 us
(threadpoolctl's `threadpool_limits` context 206 us, `ThreadpoolController.limit` 5.7 us).
"""

from __future__ import annotations

import _thread
import ctypes
import os
import threading
from typing import Callable

from .threads import blas_threads, set_blas_threads


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
        self.cpus: set[int] = set()  # the CPUs the worker is pinned to (none yet)
        thread = threading.Thread(target=self._loop, name="kuiper-worker", daemon=True)
        thread.start()
        self.native_id = thread.native_id
        self.allowed = os.sched_getaffinity(thread.native_id) if hasattr(os, "sched_getaffinity") else set()

    def _loop(self) -> None:
        while True:
            self._start.acquire()
            try:
                self._job()  # type: ignore[misc]
            except BaseException as e:  # handed to the caller
                self._error = e
            self._job = None
            self._done.release()

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
        pinned = _pin_apart(worker)
        set_blas_threads(1)
        try:
            worker.pair(first, second)
        finally:
            set_blas_threads(threads)
            if pinned is not None and pinned != {_getcpu()}:
                os.sched_setaffinity(0, pinned)
    finally:
        worker.busy.release()


def _pin_apart(worker: _Worker) -> set[int] | None:
    """Pin this thread to the CPU it is on and the worker to the others for the pair; returns
    this thread's CPUs to restore after (None: not pinned). Unpinned, this VM's scheduler
    woke the worker on the caller's CPU (it ran when the caller's half was done) or on a
    halted one (1-5 ms late): a pair took as long as its halves one after the other."""
    if _getcpu is None:
        return None
    mine = os.sched_getaffinity(0)
    here = _getcpu()
    others = worker.allowed - {here}
    if not others:
        return None
    if mine != {here}:
        os.sched_setaffinity(0, {here})
    if worker.cpus != others:
        os.sched_setaffinity(worker.native_id, others)
        worker.cpus = others
    return mine


def _load_getcpu() -> Callable[[], int] | None:
    """libc's sched_getcpu (a vDSO call, ~0.1 us) where threads can be pinned (Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        getcpu = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    getcpu.argtypes, getcpu.restype = [], ctypes.c_int
    return getcpu


_getcpu = _load_getcpu()
