"""Models shared by every session of one server, bounded in bytes and released with the sessions.

Streamlit's `cache_resource` bounds a count: eight uploads of any size stayed resident, and a
model stayed after the last browser that used it had closed. This cache sums what each model
holds (`size(model)`: weights, values folded at build, planned buffers, reference arrays) and
evicts the least recently used until the total is within `budget()` bytes; the model just asked
for stays even when it alone is over (its session is using it). A session holds the models it
uses through an object of its own (`hold(holder, key)`): when that object is collected (the
session ended and its state was dropped), the session's holds go, a model no session holds is
dropped (and emptied by `on_release`: Streamlit may keep a finished page's globals, and so a
reference to the model, until the next run), and the freed memory is handed back to the system
(glibc keeps freed heap otherwise).

    cache = ModelCache(lambda: 1 << 30)
    model = cache.get(key, lambda: load(...), size_of)
    cache.hold(session_token, key)
"""

from __future__ import annotations

import ctypes
import gc
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def give_back_memory() -> None:
    """Collect, then return freed heap pages to the system (glibc only; elsewhere a no-op)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class ModelCache(Generic[T]):
    def __init__(self, budget: Callable[[], int], on_release: Callable[[T], None] | None = None) -> None:
        self._budget = budget
        self._on_release = on_release  # empties a model no session holds (stray references keep only a shell)
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, tuple[T, int]] = OrderedDict()  # least recently used first
        self._building: dict[Any, threading.Lock] = {}
        self._holders: dict[Any, set[int]] = {}  # key -> ids of live holders
        self._held: dict[int, set[Any]] = {}  # holder id -> keys

    # -- queries -------------------------------------------------------------------------------
    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(size for _, size in self._entries.values())

    def keys(self) -> list[Any]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # -- use -------------------------------------------------------------------------------------
    def get(self, key: Any, make: Callable[[], T], size: Callable[[T], int]) -> T:
        """The cached model for `key`, else `make()` it (once, however many sessions ask at once)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key][0]
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                if key in self._entries:  # another session built it while this one waited
                    self._entries.move_to_end(key)
                    return self._entries[key][0]
            value = make()
            nbytes = max(0, int(size(value)))
            with self._lock:
                self._entries[key] = (value, nbytes)
                self._building.pop(key, None)
                evicted = self._evict(keep=key)
        if evicted:
            give_back_memory()
        return value

    def hold(self, holder: object, key: Any) -> None:
        """`holder` (a session's own object) uses the model `key` until the holder is collected."""
        token = id(holder)
        with self._lock:
            first = token not in self._held
            self._held.setdefault(token, set()).add(key)
            self._holders.setdefault(key, set()).add(token)
        if first:
            weakref.finalize(holder, self._release, token)

    def drop(self, key: Any) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    # -- inside ----------------------------------------------------------------------------------
    def _evict(self, keep: Any) -> bool:
        """Least recently used first, until within the budget (never `keep`). Lock held."""
        budget = self._budget()
        total = sum(size for _, size in self._entries.values())
        evicted = False
        for key in list(self._entries):
            if total <= budget:
                break
            if key == keep:
                continue
            total -= self._entries.pop(key)[1]
            evicted = True
        return evicted

    def _release(self, token: int) -> None:
        """A holder was collected: its models go when no other holder has them."""
        dropped: list[T] = []
        with self._lock:
            for key in self._held.pop(token, set()):
                holders = self._holders.get(key, set())
                holders.discard(token)
                if not holders:
                    self._holders.pop(key, None)
                    entry = self._entries.pop(key, None)
                    if entry is not None:
                        dropped.append(entry[0])
        if dropped:
            if self._on_release is not None:
                for value in dropped:
                    self._on_release(value)
            dropped.clear()
            give_back_memory()
