"""Start the app for a class: one or several Streamlit processes on consecutive ports.

    python deploy/run_app.py                            # one process on 127.0.0.1:8501
    python deploy/run_app.py --processes 2 --port 8501  # 8501 and 8502, for deploy/nginx.conf
    python deploy/run_app.py --address 0.0.0.0          # one process straight on the network
    python deploy/run_app.py -- --server.disconnectedSessionTTL=60   # more Streamlit options

Each process is `streamlit run app.py` with the repository's .streamlit/config.toml, plus what
a shared server wants: no file watcher (nothing is edited on a classroom server), and NumPy's
BLAS at one thread per call (`OPENBLAS_NUM_THREADS=1` unless set): many sessions share the
cores, and a two-thread GEMM leaves OpenBLAS's pool thread spinning ~0.1 s on the other core
(bench/README.md), taking it from the next session's work; and glibc's malloc set to give big
freed arrays back to the system (below), so memory comes back when a class leaves. Students
read no file on the server unless KUIPER_SERVER_MODELS names a folder of models (only that one),
and at most KUIPER_CHILDREN (2) conversions or framework references run at once across every
process (docs/classroom_server.md, "What students can reach"). Streamlit runs every session in
one process (one GIL), so one process uses about one core: run one process per core behind
nginx (deploy/nginx.conf) for a larger class. Ctrl-C (SIGINT/SIGTERM) stops them all.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(port: int, address: str, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "app.py"),
        f"--server.port={port}",
        f"--server.address={address}",
        "--server.headless=true",
        "--server.fileWatcherType=none",
        "--server.runOnSave=false",
        "--browser.gatherUsageStats=false",
        *extra,
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=1, help="app processes (one per core)")
    ap.add_argument("--port", type=int, default=8501, help="the first process's port; the next ones follow")
    ap.add_argument("--address", default="127.0.0.1", help="listen address (127.0.0.1 behind nginx)")
    ap.add_argument("extra", nargs="*", help="more Streamlit options, after --")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    # glibc's malloc raises its mmap threshold after big frees, and then keeps freed arrays of
    # every session in its heaps (one per thread, and Streamlit starts a thread per script
    # run): the server's RSS stayed at its peak after a class left. A fixed threshold returns
    # every array of 128 KiB and up to the system when freed; two heaps are enough under a GIL.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
    env.setdefault("MALLOC_ARENA_MAX", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    if args.processes == 1:  # replace this process: signals and exit status are streamlit's own
        cmd = command(args.port, args.address, args.extra)
        os.chdir(ROOT)
        os.execve(cmd[0], cmd, env)
    procs = [
        subprocess.Popen(command(args.port + i, args.address, args.extra), cwd=ROOT, env=env)
        for i in range(args.processes)
    ]

    def stop(*_: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    codes = [p.wait() for p in procs]  # one exits: the others keep serving their sessions
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
