"""The child processes that run framework code for the engine (the pnnx converter:
formats/convert.py; pnnx's Python and onnxruntime: references/isolated.py), kept within what
one shared server can give:

- `rlimits`: each child's address space, file size and CPU time are the caller's limits,
  never above the hard limits the parent itself runs under (in a container or under
  `ulimit -v`, asking for more failed every conversion with "not allowed to raise maximum
  limit");
- `slot`: at most KUIPER_CHILDREN (2) of them run at once on one machine, whatever process
  started them (the classroom deployment runs several app processes): an fcntl lock on one
  of N files in a private folder; a child that finds none free waits, and says so, instead
  of being refused;
- `private_folder`: each child's temporary folder holds a lock while in use, so the folders
  of a killed server (which hold uploaded models) are swept by the next one (`sweep`).

Nothing here changes process-wide state (no umask flip, no cwd): the app is threaded.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .cache_dir import cache_root, trusted_folder

try:
    import fcntl
except ImportError:  # Windows: no slots, no sweeping (folders are removed as they end)
    fcntl = None  # type: ignore[assignment]  # the module or None, tested where used

ENV_CHILDREN = "KUIPER_CHILDREN"
DEFAULT_CHILDREN = 2
PREFIXES = ("kuiper-convert-", "kuiper-reference-", "kuiper-onnx-")  # the folders children work in
UNLOCKED = "kuiper-converted-"  # conversions no cache could keep (convert._store): read later, so never locked
UNLOCKED_AGE = 86400.0  # seconds: such a folder outlives the session that converted it by far
LOCK = ".in-use"  # the lock file in a private folder
SWEEP_AGE = 900.0  # seconds: longer than a child runs by default, so a folder of an older Kuiper (no lock) is dead too
WAIT_NOTE_EVERY = 5.0  # seconds between "still waiting" notes
# A frame of a C++ backtrace a child prints (libtorch's c10::Error `frame #3: …`, glibc's or a
# sanitizer's `#3 0x…`): left out of quoted lines and pages.
BACKTRACE_FRAME = re.compile(r"^\s*(?:frame #\d+:|#\d+\s+0x[0-9a-fA-F]+\b)")


def rlimit_code(memory: int, seconds: int | None = None) -> str:
    """Python lines a child runs first: its address space and file size at `memory` bytes, its
    CPU time at `seconds`, each the smaller of that and the hard limit already in force."""
    wanted = [("RLIMIT_AS", memory), ("RLIMIT_FSIZE", memory)] + ([("RLIMIT_CPU", seconds)] if seconds else [])
    lines = ["import resource"]
    for name, value in wanted:
        lines.append(
            f"_s, _h = resource.getrlimit(resource.{name}); "
            f"_v = {value} if _h == resource.RLIM_INFINITY else min({value}, _h); "
            f"resource.setrlimit(resource.{name}, (_v, _v))"
        )
    return "\n".join(lines) + "\n"


def set_rlimits(memory: int, seconds: int | None = None) -> None:
    """rlimit_code run here (a child that is already Python: references/child.py)."""
    exec(rlimit_code(memory, seconds), {})


def children_allowed() -> int:
    try:
        return max(1, int(os.environ.get(ENV_CHILDREN, DEFAULT_CHILDREN)))
    except ValueError:
        return DEFAULT_CHILDREN


def _lock_folder() -> Path | None:
    """The slots' folder: one per user in the temporary folder (every process of the server
    finds it), else in the cache when another user planted that name."""
    for folder in (Path(tempfile.gettempdir()) / f"kuiper-locks-{os.geteuid()}", cache_root() / "locks"):
        if trusted_folder(folder):
            return folder
    return None


_holding = threading.local()  # .slot: this thread holds one of the slots (slot() below)


@contextlib.contextmanager
def slot(what: str, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold one of the machine's KUIPER_CHILDREN slots while the block runs. When all are
    taken, waits (telling `on_wait` "waiting for …" now and then; an exception from it, such
    as a closed browser tab's, ends the wait). Within a block holding one (a conversion's
    steps: the normalisation, then pnnx), a thread takes no second one: one slot a job."""
    folder = _lock_folder() if fcntl is not None else None
    if folder is None or getattr(_holding, "slot", False):
        yield
        return
    n = children_allowed()
    waited_since: float | None = None
    noted = 0.0
    while True:
        for i in range(n):
            fd = os.open(folder / f"slot-{i}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            try:
                _holding.slot = True
                if waited_since is not None and on_wait is not None:
                    on_wait(f"{what} starts after waiting {time.monotonic() - waited_since:.0f} s")
                yield
            finally:
                _holding.slot = False
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        now = time.monotonic()
        if waited_since is None:
            waited_since = now
        if on_wait is not None and now - noted >= WAIT_NOTE_EVERY:
            noted = now
            on_wait(
                f"waiting for {what}: all {n} of this server's framework processes are busy "
                f"({now - waited_since:.0f} s so far)"
            )
        time.sleep(0.2)


@contextlib.contextmanager
def private_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder (0700) that holds a lock while the block runs and is removed after;
    one left by a killed process is removed by the next `sweep`."""
    sweep()
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    fd = -1
    try:
        if fcntl is not None:
            fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder
    finally:
        if fd >= 0:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)


def sweep(older_than: float = SWEEP_AGE) -> list[Path]:
    """Remove this user's child folders (PREFIXES) in the temporary folder that no living
    process holds: what a killed server or conversion left (each holds an uploaded model);
    and uncached conversions (UNLOCKED) a day old."""
    if fcntl is None:
        return []
    removed: list[Path] = []
    now = time.time()
    try:
        candidates = [p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith((*PREFIXES, UNLOCKED))]
    except OSError:
        return []
    for folder in candidates:
        try:
            info = os.lstat(folder)
            age = UNLOCKED_AGE if folder.name.startswith(UNLOCKED) else older_than
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or now - info.st_mtime < age:
                continue
            fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # in use
        finally:
            os.close(fd)  # (closing drops a lock we got: the folder goes next)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
