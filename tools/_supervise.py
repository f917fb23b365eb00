"""Run many hostile jobs in a memory-limited worker process, surviving hangs and crashes.

Shared by tools/fuzz_params.py and tools/hostile_corpus.py. The parent starts a worker at job
`start`; the worker runs jobs in order under RLIMIT_AS and prints one JSON line per job. A job
that gives no answer within `timeout` seconds is recorded as a hang and the worker killed; a
worker that dies records its job as `died:<code>`; either way a new worker continues after it.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
import time
from collections.abc import Callable, Sequence


def serve(jobs: Sequence[dict], start: int, mem_mb: int, run_one: Callable[[dict], dict]) -> None:
    """Worker side: jobs[start:] one by one; run_one returns the result fields of a job."""
    resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    for job in jobs[start:]:
        t0 = time.perf_counter()
        result = run_one(job)
        result.setdefault("seconds", round(time.perf_counter() - t0, 3))
        print(json.dumps({"id": job["id"], **result}), flush=True)


def supervise(
    n_jobs: int,
    worker_argv: Callable[[int], list[str]],
    *,
    timeout: float,
    on_result: Callable[[dict], None] | None = None,
) -> dict[int, dict]:
    """Parent side: results by job id (each a dict with at least 'kind' and 'seconds')."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    results: dict[int, dict] = {}
    pos = 0
    t_start = time.time()
    while pos < n_jobs:
        proc = subprocess.Popen(worker_argv(pos), env=env, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert proc.stdout is not None
        while pos < n_jobs:
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            if not ready:
                results[pos] = {"id": pos, "kind": "hang", "msg": f"no answer in {timeout} s", "seconds": timeout}
                proc.kill()
                pos += 1
                break
            line = proc.stdout.readline()
            if not line:  # the worker died (killed by the kernel, a segfault, ...)
                proc.wait()
                results[pos] = {"id": pos, "kind": f"died:{proc.returncode}", "msg": "", "seconds": 0}
                pos += 1
                break
            r = json.loads(line)
            results[r["id"]] = r
            pos = r["id"] + 1
            if on_result is not None:
                on_result(r)
            if pos % 2000 == 0:
                print(f"  {pos}/{n_jobs} ({time.time() - t_start:.0f}s)", file=sys.stderr, flush=True)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return results
