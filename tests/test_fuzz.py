"""Issue 11's fuzz tests, in CI: Hypothesis with a fixed seed and a fixed budget.

tests/fuzz/fuzz_engine.py mutates .param text (400 cases), .bin zips (300), writes random
expressions with random inputs (500, also comparing the compiled plan with the stack machine)
hostile .npy/.npz headers (200) and the Forward page's pictures of odd tensors (200);
tests/fuzz/fuzz_app.py uploads mutated models and arrays
through AppTest (10, each visiting every page). They run in a subprocess whose address space is limited, so a size that
slips past the checks fails the test (as an out-of-memory LimitError the fuzz cases reject)
instead of exhausting the machine; each case has a time budget (3 s engine, 30 s app).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest
from conftest import ROOT

MEMORY_LIMIT = 3 << 30  # address space of the fuzzing process: Python, NumPy, Streamlit and the cases


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("module", ["fuzz_engine.py", "fuzz_app.py"])
def test_fuzz(module: str) -> None:
    if module == "fuzz_app.py":
        pytest.importorskip("streamlit")
    env = dict(
        os.environ,
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "fuzz")]),
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::RuntimeWarning",
            str(ROOT / "tests" / "fuzz" / module),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limit_memory,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
