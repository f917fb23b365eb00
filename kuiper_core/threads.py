"""The BLAS's thread count: NumPy's bundled OpenBLAS, read and set through its own C API.

The engine's calls run at the count their RuntimeGraph's options name (runtime/policy.py),
set for the call and restored after it (`using_blas_threads`); the kernel choice is told the same
count by the runtime (layers/kernel_costs.ChoiceInputs), not read here. Read by ctypes (~0.1 us a call; threadpoolctl's inspection of
the loaded libraries takes ~ms). A BLAS this module cannot reach (not NumPy's bundled OpenBLAS:
conda's, macOS's Accelerate, MKL) counts as one thread and keeps its own setting.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
import contextlib
from contextlib import contextmanager
from collections.abc import Callable, Iterator

import numpy as np

_SET_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_GET_NAMES = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads")
_CORE_NAMES = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename")


def _load_blas() -> tuple[Callable[[int], None], Callable[[], int], Callable[[], bytes] | None] | None:
    """set/get_num_threads and get_corename of NumPy's bundled OpenBLAS (the wheel's
    numpy.libs), if found."""
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
                core = next((getattr(lib, n) for n in _CORE_NAMES if hasattr(lib, n)), None)
                if core is not None:
                    core.argtypes, core.restype = [], ctypes.c_char_p
                return setter, getter, core
    return None


_blas = _load_blas()


def blas_threads() -> int:
    """The BLAS's current thread count (1 when it cannot be read)."""
    return _blas[1]() if _blas is not None else 1


def blas_core() -> str:
    """The CPU kernel set OpenBLAS chose (e.g. 'Haswell', 'SkylakeX', 'Zen'); '' when it cannot
    be read. Kernels of different cores round differently: bit-for-bit comparisons need the same."""
    if _blas is None or _blas[2] is None:
        return ""
    return (_blas[2]() or b"").decode()


def set_blas_threads(n: int) -> None:
    if _blas is not None:
        _blas[0](n)


class _Lease:
    """The BLAS's thread count held by the engine's calls: the count is one setting for the whole
    process (OpenBLAS has no per-call one), and its GEMMs round differently at one thread and at
    two. So a call sets the count it was asked for and restores what it found when the last
    call sharing that count leaves; a call at another count waits until then: concurrent engine
    calls never run at a count they did not ask for."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.count = 0  # the count the calls inside hold (0: nobody inside)
        self.holders = 0
        self.found = 1  # the count to restore when the last holder leaves

    @contextmanager
    def hold(self, n: int | None) -> Iterator[None]:
        if n is None or _blas is None:
            yield
            return
        with self.changed:
            while self.holders and self.count != n:
                self.changed.wait()
            if not self.holders:
                self.found, self.count = blas_threads(), n
                if self.found != n:
                    set_blas_threads(n)
            self.holders += 1
        try:
            yield
        finally:
            with self.changed:
                self.holders -= 1
                if not self.holders:
                    if self.found != n:
                        set_blas_threads(self.found)
                    self.count = 0
                    self.changed.notify_all()


_lease = _Lease()


def _forget_holders() -> None:
    """A forked child has only the thread that forked: calls other threads held are not its."""
    global _lease
    _lease = _Lease()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_holders)


def using_blas_threads(n: int | None) -> contextlib.AbstractContextManager[None]:
    """The BLAS at `n` threads inside (None: as the process has it), restored on leaving, even
    on error (see _Lease)."""
    return _lease.hold(n)  # the module's current lease (a forked child's own: _forget_holders)


def blas_reachable() -> bool:
    """Whether the engine can set the BLAS's thread count (NumPy's bundled OpenBLAS)."""
    return _blas is not None
