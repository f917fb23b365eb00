"""The split executor's second core: a helper process that runs the second half of each split
call (runtime/split_forward.py; the layers make the halves: layers/halves.py).

Why a process: a helper *thread* was measured first (bench/bench_halves.py measures the split forward)
and gained nothing on a 2-core VM: waking a sleeping thread on the other, halted vCPU takes
50-70 us, twice a call, and a thread that polls instead shares the GIL with the caller and was
time-sliced with it on one vCPU. A forked process has no GIL to share, so it can poll: a
posted half reaches it in ~1 us. It polls for SPIN_SECONDS after its last half, as OpenBLAS's
and OpenMP's pool threads spin, then sleeps on a pipe (the next forward wakes it once).

The protocol (`HelperProcess.run`): a half is posted by its index into `Splits.calls` (the
child has its own copy of every split call, made before the fork: the same arrays at the same
addresses, the buffers shared). Whoever claims the half first runs it (a claim is a
compare-and-set under a process-shared lock): the caller, done with its own half, takes the
second too if the helper has not started it, so a helper that starts late (another job on the
core) costs no more than the whole call here. An error in the helper's half is raised by
running that half here. A helper that died is noticed while waiting (a half here instead, and
none posted after). The posted index is read after the posted sequence number without a fence:
correct under x86's store order only, so the split executor is refused elsewhere (policy.py).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import time
import weakref
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from ..layers.halves import DEFAULT_SIZES, SplitSizes
from ..threads import set_blas_threads
from ..ufunc_buffers import set_engine_bufsize

if TYPE_CHECKING:  # multiprocessing costs ~5 ms to import: only a split forward needs it
    from multiprocessing.synchronize import Lock as ProcessLock

# How long the helper polls for the next half before it sleeps (OpenBLAS's threads spin ~0.1 s).
SPIN_SECONDS = 0.05
# A helper that has not finished a claimed half in this long is taken for hung: killed, the
# half run here.
HUNG_SECONDS = 30.0

_in_helper = False  # True in the helper process: a posted pair runs its second half there


class Splits:
    """The split calls of one forward: what its layers' prepare() receives as their `split`
    (layers/halves.SplitRequest), each pair of halves by index, and the helper process that
    runs their second halves (None: both halves here)."""

    def __init__(self, shared: bool = True, sizes: SplitSizes = DEFAULT_SIZES) -> None:
        self.sizes = sizes  # when a layer splits
        self.calls: list[Callable[[], None]] = []
        self.helper: HelperProcess | None = None
        self.shared = shared  # work arrays in memory a helper forked later shares

    @property
    def made(self) -> int:
        return len(self.calls)

    def pair(self, first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
        """The call that runs both halves (the second in the helper process); registered by
        index, which the helper, forked after the build, finds in its copy."""
        ticket = Ticket(self, len(self.calls))
        call = partial(run_halves, ticket, first, second)
        self.calls.append(call)
        return call

    def array(self, shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
        """A work array both halves of a pair write and a later step reads."""
        dtype = np.dtype(dtype)
        if not self.shared:
            return np.empty(shape, dtype)
        return shared_bytes(int(np.prod(shape)) * dtype.itemsize).view(dtype).reshape(shape)


class Ticket:
    """One split call's place in its Splits (`run_halves` posts its index)."""

    __slots__ = ("splits", "index")

    def __init__(self, splits: Splits, index: int) -> None:
        self.splits, self.index = splits, index


def run_halves(ticket: Ticket, first: Callable[[], None], second: Callable[[], None]) -> None:
    """first() here while the helper process runs second(); both done on return. Without a
    helper (the build's own runs, or one that died) both here. In the helper it is the second
    half it was asked for."""
    if _in_helper:
        second()
        return
    helper = ticket.splits.helper
    if helper is None or not helper.alive or helper.owner != os.getpid():
        first()
        second()
        return
    helper.run(ticket.index, first, second)


# -- the helper process ---------------------------------------------------------------------
# Control words in a shared page: what the caller posted, what is claimed and done.
_POSTED, _INDEX, _CLAIMED, _DONE, _FAILED, _SLEEPING, _STOP = range(7)


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent ends (PR_SET_PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the pipe's end-of-file still ends it once the parent is gone


class HelperProcess:
    """A forked process that runs the second halves of one Splits' calls (module docstring)."""

    def __init__(self, splits: Splits) -> None:
        self.page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_SHARED)
        self.ctl = np.frombuffer(self.page, np.int64, 8)
        import multiprocessing

        self.lock = multiprocessing.get_context("fork").Lock()
        self.seq = 0
        self.taken = 0  # halves the caller ran itself (the helper had not claimed them in time)
        self.alive = True
        wake_r, self.wake_w = os.pipe()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the helper: never returns
            code = 1
            try:
                os.close(self.wake_w)
                global _in_helper
                _in_helper = True
                _helper_main(splits, self.ctl, self.lock, wake_r, parent)
                code = 0
            finally:
                os._exit(code)
        os.close(wake_r)
        splits.helper = self
        self.owner = parent
        self._finalizer = weakref.finalize(self, _stop, self.ctl, self.wake_w, self.pid, parent)

    def run(self, index: int, first: Callable[[], None], second: Callable[[], None]) -> None:
        ctl = self.ctl
        self.seq = seq = self.seq + 1
        ctl[_INDEX] = index
        ctl[_POSTED] = seq  # after the index: x86 keeps stores in order, so does the helper see them
        if ctl[_SLEEPING]:
            os.write(self.wake_w, b"!")
        try:
            first()
        finally:
            with self.lock:
                ours = ctl[_CLAIMED] < seq
                if ours:
                    ctl[_CLAIMED] = seq
            if not ours:
                self._wait(seq)
        if ours or ctl[_FAILED] == seq:
            self.taken += 1
            second()  # not started by the helper, or failed there: raise its error here

    def _wait(self, seq: int) -> None:
        """Until the helper has done half `seq` (or is dead: then the half is run here)."""
        ctl, spins, start = self.ctl, 0, 0.0
        while ctl[_DONE] != seq:
            spins += 1
            if spins & 0xFFFF == 0:  # every ~5 ms: still there?
                start = start or time.monotonic()
                if os.waitpid(self.pid, os.WNOHANG)[0] or time.monotonic() - start > HUNG_SECONDS:
                    self.close()
                    ctl[_FAILED] = seq  # the caller runs it
                    return

    def close(self) -> None:
        """Stop the helper (idempotent); later halves run here."""
        self.alive = False
        self._finalizer()


def _stop(ctl: np.ndarray, wake_w: int, pid: int, owner: int) -> None:
    if os.getpid() != owner:
        return  # a process forked from the owner: the helper is the owner's to stop
    ctl[_STOP] = 1
    try:
        os.write(wake_w, b"!")
        os.close(wake_w)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass


def _helper_main(splits: Splits, ctl: np.ndarray, lock: ProcessLock, wake_r: int, parent: int) -> None:
    """The helper's loop: poll for a posted half, claim it, run it, mark it done; sleep on the
    pipe after SPIN_SECONDS without one."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _die_with_parent()
    if os.getppid() != parent:
        return
    # Only the pipe: a server's sockets and files stay the parent's alone to close.
    os.closerange(3, wake_r)
    os.closerange(wake_r + 1, 1 << 16)
    set_blas_threads(1)
    set_engine_bufsize()  # as the caller's halves run (ufunc_buffers.py)
    calls = splits.calls
    seen = 0
    while not ctl[_STOP]:
        deadline = time.monotonic() + SPIN_SECONDS
        while ctl[_POSTED] == seen and not ctl[_STOP]:
            if time.monotonic() > deadline:
                ctl[_SLEEPING] = 1
                if ctl[_POSTED] == seen and not ctl[_STOP]:
                    if not os.read(wake_r, 64):
                        return  # the parent is gone
                ctl[_SLEEPING] = 0
                deadline = time.monotonic() + SPIN_SECONDS
        seq = int(ctl[_POSTED])
        seen = seq
        index = int(ctl[_INDEX])
        with lock:
            mine = ctl[_CLAIMED] < seq
            if mine:
                ctl[_CLAIMED] = seq
        if not mine:
            continue
        try:
            calls[index]()
        except BaseException:  # noqa: BLE001  (the caller runs the half again and raises)
            ctl[_FAILED] = seq
        ctl[_DONE] = seq


def shared_bytes(n: int) -> np.ndarray:
    """n bytes of anonymous memory shared with processes forked later (a buffer slot)."""
    return np.frombuffer(mmap.mmap(-1, max(n, 1), flags=mmap.MAP_SHARED), np.uint8)[:n]


__all__ = ["HelperProcess", "Splits", "Ticket", "run_halves", "shared_bytes"]
