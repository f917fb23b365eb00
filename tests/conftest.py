"""Shared helpers for the tests."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OPS = DATA / "ops"
SAMPLES = ROOT / "sample_models"


def max_err_ok(y: np.ndarray, ref: np.ndarray, rel: float = 1e-4) -> tuple[bool, float, float]:
    """The project's tolerance: max abs error <= rel * max(1, max|ref|). Returns (ok, err, bound)."""
    y = np.asarray(y)
    ref = np.asarray(ref)
    if y.shape != ref.shape:
        return False, float("inf"), 0.0
    if ref.size == 0:
        return True, 0.0, 0.0
    if ref.dtype == np.bool_ or ref.dtype.kind in "iu":
        err = float(np.abs(y.astype(np.int64) - ref.astype(np.int64)).max())
        return err == 0, err, 0.0
    bound = rel * max(1.0, float(np.nanmax(np.abs(ref))) if np.isfinite(ref).any() else 1.0)
    same_nan = np.array_equal(np.isnan(y), np.isnan(ref))
    with np.errstate(invalid="ignore"):  # inf - inf (equal infinities, e.g. a -inf mask) is nan: not an error
        diff = np.abs(y.astype(np.float64) - ref.astype(np.float64))
    err = float(np.nanmax(diff)) if np.isfinite(diff).any() else 0.0
    return bool(same_nan and err <= bound), err, bound


# -- the fast tier ------------------------------------------------------------------------------
# `pytest -m "not slow"` runs every module's quick tests; the README's command runs everything.
# A slow test says so where it is written: `@pytest.mark.slow` (or a module's `pytestmark`), and
# for a parametrized test whose cases differ, `slow_cases(...)` in its parametrize list. The
# browser tests and the fuzzers (their own subprocesses) are slow by their marker and file here.
# `python tools/slow_tests.py` reports the fast tests over a time budget; it writes no list.
_SLOW_FILES = ("test_fuzz.py",)


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001  (pytest's hook signature)
    import pytest

    for item in items:
        if item.get_closest_marker("browser") or item.nodeid.removeprefix("tests/").split("::")[0] in _SLOW_FILES:
            item.add_marker(pytest.mark.slow)


def slow_cases(values: Iterable[Any], slow: Container[Any], key: Callable[[Any], Any] = lambda v: v) -> list[Any]:
    """`values` for `pytest.mark.parametrize`, those whose `key` is in `slow` marked slow.

    A tuple value is one case of several argnames (unpacked into pytest.param, as pytest does)."""
    import pytest

    def case(v: Any) -> Any:
        if key(v) not in slow:
            return v
        return pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=pytest.mark.slow)

    return [case(v) for v in values]


def without_traced_inputs(data: bytes) -> bytes:
    """The TorchScript zip as torch.jit.script or an older torch saves it: no example inputs."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if "traced_inputs" not in info.filename:
                dst.writestr(info, src.read(info))
    return out.getvalue()
