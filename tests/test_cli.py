"""The `kuiper` command: run writes .npy outputs; bad input exits 2 with a located error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import OPS, ROOT, max_err_ok

CASE = OPS / "io_two_inputs"


def kuiper(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "kuiper_core.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def test_run_writes_outputs_equal_to_pytorch(tmp_path: Path) -> None:
    ins = np.load(CASE / "inputs.npz")
    exp = np.load(CASE / "expected.npz")
    np.save(tmp_path / "a.npy", ins["in0"])
    np.save(tmp_path / "b.npy", ins["in1"])
    r = kuiper(
        "run",
        str(CASE / "model.pnnx.param"),
        "--input",
        str(tmp_path / "a.npy"),
        "--input",
        str(tmp_path / "b.npy"),
        "--output",
        str(tmp_path / "s.npy"),
        "--output",
        str(tmp_path / "p.npy"),
    )
    assert r.returncode == 0, r.stderr
    for name, key in (("s", "out0"), ("p", "out1")):
        assert max_err_ok(np.load(tmp_path / f"{name}.npy"), exp[key])[0]


def test_inspect_prints_the_operator_table() -> None:
    r = kuiper("inspect", str(CASE / "model.pnnx.param"))
    assert r.returncode == 0, r.stderr
    assert "pnnx.Input" in r.stdout and "pnnx.Output" in r.stdout and "operators" in r.stdout


def test_bad_param_exits_2_with_location(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pnnx.param"
    bad.write_text("7767517\n2 1\npnnx.Input in 0 1 0 #0=(1,3)f99\npnnx.Output out 1 0 0\n")
    r = kuiper("inspect", str(bad))
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: {bad}:3:29: unknown dtype 'f99'")
    assert "Traceback" not in r.stderr and "^^^" in r.stderr


@pytest.mark.slow
def test_bad_input_exits_2_naming_the_input(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 5), np.float32))
    r = kuiper(
        "run", str(CASE / "model.pnnx.param"), "--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "a.npy")
    )
    assert r.returncode == 2 and "dim 1 must be 3" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "p.npy").write_bytes(b"not numpy")
    r = kuiper("run", str(CASE / "model.pnnx.param"), "--input", str(tmp_path / "p.npy"))
    assert r.returncode == 2 and "not a readable .npy" in r.stderr


def test_debug_shows_a_traceback(tmp_path: Path) -> None:
    r = kuiper("--debug", "inspect", str(tmp_path / "missing.pnnx.param"))
    assert r.returncode == 2 and "Traceback" in r.stderr


@pytest.mark.slow
def test_run_on_values_that_overflow_prints_no_numpy_warning(tmp_path: Path) -> None:
    """Issue 35: ±1e20 into a LayerNorm squared past float32's range and `kuiper run` printed
    NumPy's RuntimeWarning with the engine's source path. Overflow is the answer (inf, or
    torch's 0 for LayerNorm), as in torch: no raw warning reaches the user, from a layer that
    handles it (LayerNorm) or from any other (pow(|x|, 1.5) of 1e30 is inf)."""
    cases = {"norm_layernorm_last": (1e20, (2, 4, 5, 6)), "expr_reciprocal_pow": (1e30, (1, 4, 8, 8))}
    for case, (value, shape) in cases.items():
        x = np.where(np.arange(np.prod(shape)).reshape(shape) % 2, value, -value).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        r = kuiper("run", str(OPS / case / "model.pnnx.param"), "--input", str(tmp_path / "x.npy"))
        assert r.returncode == 0, r.stderr
        assert "Warning" not in r.stderr and ".py:" not in r.stderr, r.stderr
