"""The BLAS's thread count: NumPy's bundled OpenBLAS, read through its own C API.

Kernel choice needs it where a kernel's GEMMs are too small for OpenBLAS to spread over its
threads (conv_kernels.stride2_tile: its cost model is for one thread). Read by ctypes
(~0.1 us); threadpoolctl's inspection of the loaded libraries takes ~ms. A BLAS this module
cannot reach (not NumPy's bundled OpenBLAS) counts as one thread.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
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


_one_lock = threading.Lock()
_one_depth = 0  # how many callers are inside one_blas_thread()
_one_saved = 1  # the count to restore when the last leaves


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """The BLAS at one thread inside, restored on leaving (even on error). The count is
    process-wide: callers nest and overlap (two graphs' sharded forwards at once), and the
    last to leave restores the count the first found."""
    global _one_depth, _one_saved
    with _one_lock:
        if _one_depth == 0:
            _one_saved = blas_threads()
            set_blas_threads(1)
        _one_depth += 1
    try:
        yield
    finally:
        with _one_lock:
            _one_depth -= 1
            if _one_depth == 0:
                set_blas_threads(_one_saved)
