"""Files named by people (models, weights, arrays): only regular files, never more than a limit.

A FIFO would block forever, /dev/zero never ends, a directory or a symlink loop is no model:
each is a clear error before anything is read. Callers pass the KuiperError to raise, so a
.param problem stays a ParseError, a .bin problem a WeightError, a .npy problem an InputError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any
from collections.abc import Callable

from .errors import KuiperError, LimitError, ParseError

ErrorFactory = Callable[[str], KuiperError]


def file_problem(path: str | Path) -> str | None:
    """Why `path` cannot be read as a file ('no such file', 'is a directory', …), or None."""
    try:
        info = os.stat(path)  # follows symlinks: a link to a regular file is fine
    except FileNotFoundError:
        return "no such file"
    except OSError as e:  # a symlink loop, no permission, a name too long
        return e.strerror or str(e)
    if stat.S_ISDIR(info.st_mode):
        return "is a directory"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a pipe, device or socket)"
    return None


def check_regular(path: str | Path, error: ErrorFactory) -> int:
    """The size of a regular file; else `raise error(reason)`."""
    problem = file_problem(path)
    if problem is not None:
        raise error(problem)
    return os.stat(path).st_size


def read_regular(path: str | Path, error: ErrorFactory, *, max_bytes: int, limit: str) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (the limit named `limit`)."""
    size = check_regular(path, error)
    if size > max_bytes:
        raise LimitError(f"{path} is {size:,} bytes", limit=limit, maximum=max_bytes, value=size, path=str(path))
    try:
        with open(path, "rb") as f:
            raw = f.read(size + 1)  # a file growing while read is still capped (read(n) allocates n first)
    except OSError as e:
        raise error(e.strerror or str(e)) from None
    if len(raw) > size:
        raise error("it grew while it was read")
    return raw


def decode_utf8(raw: bytes, path: str | None, **error_args: Any) -> str:
    """UTF-8 text (a byte-order mark dropped); an invalid byte is a ParseError at its line
    and column."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ParseError(
            "not a text file: invalid UTF-8 byte", path=path, line=line, column=col, **error_args
        ) from None
