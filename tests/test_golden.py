"""forward() and steps() compute bit-for-bit what they did when tests/data/golden/outputs.json
was recorded (tools/golden_outputs.py, on the runtime before its rebuild into a Program and
executors): every bundled sample and export, at 1 and 2 BLAS threads.

Only on the footing the digests were made on: another OpenBLAS core (or NumPy SIMD target)
runs other kernels, which round differently, so elsewhere the test skips and says why. Only
models whose files are those the digests were made from: one exported again or added since
is left out with a warning that says how to record it.
"""

from __future__ import annotations

import json
import warnings
from functools import cache
from typing import Any

import pytest

from conftest import ROOT
from kuiper_core.threads import blas_threads, set_blas_threads
from tools.golden_outputs import GOLDEN, THREADS, comparable, differences, footing, models, record

pytestmark = pytest.mark.slow  # every model at two thread counts: ~15 s of CPU

GROUPS = ("sample_models", "optlevel", "ops", "ops_o0", "ops_o1", "value_shapes")


@cache
def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


def _group(key: str) -> str:
    return key.split("/")[0]


def test_every_model_has_digests_at_every_thread_count() -> None:
    assert len(_golden()["models"]) >= 900
    assert all(set(v) == {"files", *map(str, THREADS)} for v in _golden()["models"].values())


@pytest.mark.parametrize("group", GROUPS)
def test_outputs_are_bit_for_bit_as_recorded(group: str) -> None:
    golden = _golden()
    if golden["footing"] != footing():
        pytest.skip(
            f"digests made on {golden['footing']}, this machine is {footing()}: other CPU kernels round differently"
        )
    chosen = [(key, param, inputs) for key, param, inputs in models() if _group(key) == group]
    assert chosen, f"no model in {group} ({ROOT})"
    left_out = [key for key, param, _ in chosen if not comparable(golden, key, param)]
    if left_out:
        warnings.warn(
            f"{len(left_out)} model(s) exported or added after the digests were made, not compared "
            f"({', '.join(left_out[:5])}…): record them with tools/golden_outputs.py --add ID…",
            stacklevel=1,
        )
    saved = blas_threads()
    now: dict[str, dict[str, Any]] = {}
    try:
        for threads in THREADS:
            set_blas_threads(threads)
            if blas_threads() != threads:
                pytest.skip(f"the BLAS cannot be set to {threads} threads here")
            for key, param, inputs in chosen:
                if key not in left_out:
                    now.setdefault(key, {})[str(threads)] = record(param, inputs, threads)
    finally:
        set_blas_threads(saved)
    bad = differences(golden, {"models": now})
    assert not bad, f"{len(bad)} differ:\n" + "\n".join(bad[:20])
