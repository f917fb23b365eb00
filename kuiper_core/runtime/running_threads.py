"""Whether another thread of this process is on a core right now (Linux: /proc/self/task).

Why: the sharded forward (sharded.py) counts on both cores being free for its two shards.
After any two-thread BLAS call, OpenBLAS's pool thread busy-waits ~0.1 s for its next job
(measured: seen running 0.10 s after a GEMM), taking one core. The check reads each thread's
state, 'R' (running or runnable), from /proc/self/task/<tid>/stat: ~13 us with 3 threads
(6 per thread), against a forward of tens of ms. Where /proc is unavailable it sees nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Container

TASKS = "/proc/self/task"
_RUNNING = ord("R")


def other_thread_running(exclude: Container[int] = ()) -> bool:
    """True if a thread of this process other than the caller and `exclude` (native thread
    ids) is running or runnable. False where /proc/self/task cannot be read."""
    me = threading.get_native_id()
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return False
    for name in tids:
        tid = int(name)
        if tid == me or tid in exclude:
            continue
        try:
            fd = os.open(f"{TASKS}/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(fd, 256)
            finally:
                os.close(fd)
        except OSError:
            continue  # the thread ended meanwhile
        # "tid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
        end = stat.rfind(b")")
        if end >= 0 and len(stat) > end + 2 and stat[end + 2] == _RUNNING:
            return True
    return False


__all__ = ["other_thread_running"]
