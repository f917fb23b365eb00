"""One operator in two halves on two cores: this process and a helper process.

Why: at batch 1 with two BLAS threads only OpenBLAS's bigger GEMMs use the second core; the
Winograd transforms, gathers, scatters, pooling passes and the small GEMMs (OpenBLAS runs those
under ~1 M multiply-adds on one thread) run on one (ResNet-18 b1: 35 ms at one thread, 26.5 at
two, PyTorch 21). A layer's prepared call made inside `splitting()` (runtime/split_forward.py
builds a whole forward so, its buffers in shared memory) runs as two halves bound once to
their parts of the arrays (`halves_call`; convolutions by output rows or channels, conv.py;
pools by rows, pool.py; BatchNorm by channels; activations, expressions, norms, softmax as flat
halves of whole rows, `split_flat`; a concat and a one-row Linear by halves of their output):
the first here, the second in a helper process.

Why a process: a helper *thread* was measured first (branch twothreads26, docs/BENCHMARKS.md)
and gained nothing on the 2-core VM: waking a sleeping thread on the other, halted vCPU takes
50-70 us, twice a call, and a thread that polls instead shares the GIL with the caller and was
time-sliced with it on one vCPU. A forked process has no GIL to share, so it can poll: a
posted half reaches it in ~1 us (round trip 0.65 us, 2026-11-27). It polls for SPIN_SECONDS
after its last half, as OpenBLAS's and OpenMP's pool threads spin, then sleeps on a pipe (the
next forward wakes it once).

The protocol (`HelperProcess.run`): a half is posted by its index into `Splits.calls` (the
child has its own copy of every split call, made before the fork: the same arrays at the same
addresses, the buffers shared). Whoever claims the half first runs it (a claim is a
compare-and-set under a process-shared lock): the caller, done with its own half, takes the
second too if the helper has not started it, so a helper that starts late (another job on the
core) costs no more than the whole call here. An error in the helper's half is raised by
running that half here. A helper that died is noticed while waiting (a half here instead, and
none posted after).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # multiprocessing costs ~5 ms to import: only a split forward needs it
    from multiprocessing.synchronize import Lock as ProcessLock

# A layer splits only where the work of one half (multiply-adds, or a pool's window taps times
# PASS_COST) is at least this: a half costs a few microseconds to hand over and each half of a
# small call does a little more than half its work (its own copies and calls).
MIN_HALF_WORK = 1_000_000
# Multiply-adds a pooling window tap is worth (ResNet-18's maxpool: 1.6 ms for 1.8 M taps; its
# 1x1 convs 0.28 ms for 6.4 M multiply-adds).
PASS_COST = 16
# Elements a half from which an elementwise-style call splits (min_half): a hand-off costs a few
# microseconds; GELU on 4096 floats ~25 us, a ReLU (a cheap one: one pass) on 32768 ~10 us.
SPLIT_MIN_HALF = 4096
SPLIT_MIN_HALF_CHEAP = 32768
# How long the helper polls for the next half before it sleeps (OpenBLAS's threads spin ~0.1 s).
SPIN_SECONDS = 0.05
# A helper that has not finished a claimed half in this long is taken for hung: killed, the
# half run here.
HUNG_SECONDS = 30.0

_local = threading.local()


class Splits:
    """The split calls of one forward (what splitting() yields): each call's zero-argument
    function by index, and the helper process that runs their second halves (None: both
    halves here)."""

    def __init__(self) -> None:
        self.calls: list[Callable[[], None]] = []
        self.helper: HelperProcess | None = None

    @property
    def made(self) -> int:
        return len(self.calls)


class Ticket:
    """One split call's place in its Splits (`run_halves` posts its index)."""

    __slots__ = ("splits", "index")

    def __init__(self, splits: Splits, index: int) -> None:
        self.splits, self.index = splits, index

    def bind(self, call: Callable[[], None]) -> None:
        """The whole split call (both halves, through run_halves), as the helper runs it."""
        self.splits.calls[self.index] = call


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


def made() -> Ticket:
    """A layer prepared a split call: its ticket (the layer binds the call to it)."""
    splits: Splits = _local.splits
    splits.calls.append(_unbound)
    return Ticket(splits, len(splits.calls) - 1)


def _unbound() -> None:
    raise RuntimeError("a split call was not bound to its ticket")


def run_halves(ticket: Ticket, first: Callable[[], None], second: Callable[[], None]) -> None:
    """first() here while the helper process runs second(); both done on return. Without a
    helper (the build's own runs, or one that died) both here. In the helper it is the second
    half it was asked for."""
    if getattr(_local, "in_helper", False):
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
                _local.in_helper = True
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
    from ..threads import set_blas_threads
    from ..ufunc_buffers import set_engine_bufsize

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


def shared_array(shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """An array in shared memory (shared_bytes): a work buffer both halves of a split call
    write and a later step reads (the helper is forked after the split calls are made)."""
    dtype = np.dtype(dtype)
    return shared_bytes(int(np.prod(shape)) * dtype.itemsize).view(dtype).reshape(shape)


def min_half(cheap: bool) -> int:
    """Elements a half from which an elementwise-style call splits (read at each prepare: the
    tests lower them)."""
    return SPLIT_MIN_HALF_CHEAP if cheap else SPLIT_MIN_HALF


def split_flat(
    prepare_part: Callable[..., Any],
    inputs: list,
    out: list,
    cheap: bool = False,
    unit: int = 1,
) -> Callable[[list, list], None] | None:
    """An elementwise call (or one over rows of `unit` elements: a norm, a softmax over the last
    dim) as its two flat halves, split at a whole row (inside splitting()): `prepare_part(ins,
    outs)` prepares the layer's function for parts of its arrays. None where the arrays are
    not all contiguous and of the output's shape, a half would be under min_half(cheap)
    elements, or a part cannot be prepared."""
    y = out[0]
    arrays = [*inputs, y]
    if (
        y.size < 2 * min_half(cheap)
        or y.size < 2 * unit
        or not all(isinstance(a, np.ndarray) and a.flags.c_contiguous and a.shape == y.shape for a in arrays)
    ):
        return None
    h = unit * split_rows(y.size // unit)
    parts = [([x.reshape(-1)[s] for x in inputs], [y.reshape(-1)[s]]) for s in (slice(0, h), slice(h, None))]
    return _prepared_halves(prepare_part, parts, inputs, out)


def split_leading(
    prepare_part: Callable[..., Any],
    inputs: list,
    out: list,
    cheap: bool = False,
    max_axis: int | None = None,
) -> Callable[[list, list], None] | None:
    """An elementwise call over broadcast or strided inputs (split_flat's are flat and of the
    output's shape) as two halves of the output's first axis of more than one (below
    `max_axis`: a norm's leading axes): each input is cut there where it has that axis, passed
    whole where it broadcasts over it; the output's halves stay contiguous. None where the
    output is not contiguous, a half is under min_half(cheap) elements, an input's size
    there fits neither, or a part cannot be prepared."""
    y = out[0]
    if len(out) != 1 or not isinstance(y, np.ndarray) or not y.flags.c_contiguous or y.size < 2 * min_half(cheap):
        return None
    axis = next((a for a in range(y.ndim if max_axis is None else max_axis) if y.shape[a] >= 2), None)
    if axis is None:
        return None
    h = split_rows(y.shape[axis])
    parts = []
    for cut in (slice(0, h), slice(h, None)):
        ins = []
        for a in inputs:
            k = axis - (y.ndim - a.ndim) if isinstance(a, np.ndarray) else -1  # a's axis under y's
            if k < 0 or a.shape[k] == 1:
                ins.append(a)  # broadcast over the axis
            elif a.shape[k] == y.shape[axis]:
                ins.append(a[(slice(None),) * k + (cut,)])
            else:
                return None
        parts.append((ins, [y[(slice(None),) * axis + (cut,)]]))
    return _prepared_halves(prepare_part, parts, inputs, out)


def _prepared_halves(prepare_part: Callable[..., Any], parts: list, inputs: list, out: list) -> Callable | None:
    """The split call over two (inputs, out) parts, each prepared by `prepare_part`; None where
    one cannot be."""
    fs = [prepare_part(*part) for part in parts]
    if fs[0] is None or fs[1] is None:
        return None
    return halves_call(partial(fs[0], *parts[0]), partial(fs[1], *parts[1]), inputs, out)


def halves_call(
    first: Callable[[], None], second: Callable[[], None], inputs: list, out: list
) -> Callable[[list, list], None]:
    """The prepared call (f(inputs, out), inside splitting()) that runs two halves already bound
    to their parts of `inputs` and `out`."""
    ticket = made()
    call = partial(_run_parts, ticket, first, second)
    ticket.bind(partial(call, inputs, out))
    return call


def _run_parts(ticket: Ticket, first: Callable[[], None], second: Callable[[], None], inputs: list, out: list) -> None:
    run_halves(ticket, first, second)


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


__all__ = [
    "HelperProcess",
    "Splits",
    "Ticket",
    "active",
    "input_rows",
    "halves_call",
    "made",
    "min_half",
    "run_halves",
    "shared_array",
    "shared_bytes",
    "split_rows",
    "split_flat",
    "split_leading",
    "splitting",
]
