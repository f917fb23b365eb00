"""`python bench/timed_streamlit.py run app.py ...`: Streamlit, with each script run's wall and
CPU time appended to the file named by $KX_RUN_LOG ("<end perf_counter> <wall s> <cpu s>").

bench/bench_app.py starts the app this way to split a latency into the server's script run
and the rest (transfer and the browser). perf_counter is system-wide on Linux
(CLOCK_MONOTONIC), so the bench compares the end times with its own clock.
"""

from __future__ import annotations

import os
import sys
import time

from streamlit.runtime.scriptrunner import script_runner
from streamlit.web import cli

_run = script_runner.ScriptRunner._run_script
_LOG = os.environ.get("KX_RUN_LOG")


def _timed_run(self, rerun_data):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        return _run(self, rerun_data)
    finally:
        if _LOG:
            with open(_LOG, "a") as f:
                f.write(f"{time.perf_counter():.6f} {time.perf_counter() - wall:.6f} {time.thread_time() - cpu:.6f}\n")


script_runner.ScriptRunner._run_script = _timed_run  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv = ["streamlit", *sys.argv[1:]]
    sys.exit(cli.main())
