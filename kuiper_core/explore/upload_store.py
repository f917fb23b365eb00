"""Uploaded models kept on the server by content, so a reload or a shared link finds them again.

The app puts each uploaded (or converted) model here under its content digest and writes the
digest into the URL; a new session opened from that URL takes the model back from the store.
The store is one per server process, bounded by bytes: the least recently used models go
first, and a model larger than the whole budget is not kept (the page then says a reload will
not find it). Sessions hold their own model's `StoredModel` (the same bytes, not a copy), so
eviction never takes a model from a session that is using it: it only stops new sessions
from finding it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

DIGEST_CHARS = 16  # hex characters of SHA-256 in URLs and cache keys


def content_digest(files: Mapping[str, bytes | None], options: Mapping[str, Any] | None = None) -> str:
    """SHA-256 over the files (by role, in sorted order) and any options that change the
    model made from them (a TorchScript file's input shapes)."""
    h = hashlib.sha256()
    for role in sorted(files):
        data = files[role] or b""
        h.update(f"\0{role}\0{len(data)}\0".encode())
        h.update(data)
    for key in sorted(options or {}):
        h.update(f"\0{key}={(options or {})[key]!r}".encode())
    return h.hexdigest()[:DIGEST_CHARS]


@dataclass(frozen=True)
class StoredModel:
    """A model as uploaded: `files` by role ("param", "bin"; "source" for an .onnx/.pt that was
    converted), `meta` what the app needs to reopen it the same way (format, input shapes)."""

    digest: str
    name: str
    files: Mapping[str, bytes | None]
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(len(b or b"") for b in self.files.values())


@dataclass(frozen=True)
class Kept:
    """Anything else a reload must find again, by a digest of what it belongs to: an uploaded
    input (the digest of its array) or references computed for a model and an input (issue 38:
    a reload swapped an uploaded input for seeded random numbers and dropped the references)."""

    digest: str
    value: Any
    nbytes: int


class _Stored(Protocol):
    @property
    def digest(self) -> str: ...

    @property
    def nbytes(self) -> int: ...


T = TypeVar("T", bound=_Stored)


class UploadStore(Generic[T]):
    """Models (or Kept values) by digest, least recently used dropped first to stay within
    `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._models: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()  # one store, every session's script thread

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(m.nbytes for m in self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    def put(self, model: T) -> bool:
        """Keep `model` (the most recently used); False when it alone exceeds the budget."""
        if model.nbytes > self.max_bytes:
            return False
        with self._lock:
            self._models.pop(model.digest, None)
            self._models[model.digest] = model
            total = sum(m.nbytes for m in self._models.values())
            while total > self.max_bytes:
                _, dropped = self._models.popitem(last=False)
                total -= dropped.nbytes
        return True

    def get(self, digest: str) -> T | None:
        with self._lock:
            model = self._models.get(digest)
            if model is not None:
                self._models.move_to_end(digest)
            return model

    def __contains__(self, digest: object) -> bool:
        with self._lock:
            return digest in self._models
