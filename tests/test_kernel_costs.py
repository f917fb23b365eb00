"""The convolution kernel chooser's costs as a value (layers/kernel_costs.py): saved and loaded
as JSON with every field and no other, passed in through ExecutionOptions, and the thread
count the choice reads taken from the options, not from the process's BLAS."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace
from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from kuiper_core import ExecutionOptions, KernelCosts, KuiperError, threads
from kuiper_core.layers.kernel_costs import DEFAULT_COSTS
from conftest import SAMPLES

# Winograd never weighed: every 3x3 stride-1 conv of ResNet-18 takes im2col.
NO_WINOGRAD = replace(DEFAULT_COSTS, winograd_min_channels=1 << 30, fitted_on="a test")


def test_costs_saved_and_loaded_are_equal(tmp_path: Path) -> None:
    costs = replace(DEFAULT_COSTS, gemm_mac=3.5e-8, cached_weights=1 << 19, fitted_on="a laptop, bench_convs")
    path = tmp_path / "costs.json"
    costs.save(path)
    loaded = KernelCosts.load(path)
    assert loaded == costs and loaded != DEFAULT_COSTS
    assert loaded.wino_fixed == DEFAULT_COSTS.wino_fixed  # floats exact through JSON
    assert set(json.loads(path.read_text())["costs"]) == {f.name for f in fields(KernelCosts)}


def _write(path: Path, costs: dict, fmt: str = "kuiper-kernel-costs") -> Path:
    path.write_text(json.dumps({"format": fmt, "costs": costs}))
    return path


def test_unknown_and_missing_costs_are_named(tmp_path: Path) -> None:
    saved = asdict(DEFAULT_COSTS)
    with pytest.raises(KuiperError, match="unknown: gemm_mak; missing: gemm_mac"):
        KernelCosts.load(
            _write(tmp_path / "a.json", {**{k: v for k, v in saved.items() if k != "gemm_mac"}, "gemm_mak": 1.0})
        )
    with pytest.raises(KuiperError, match="unknown: -; missing: wide_max_taps"):
        KernelCosts.load(_write(tmp_path / "b.json", {k: v for k, v in saved.items() if k != "wide_max_taps"}))
    with pytest.raises(KuiperError, match="not a kernel costs file"):
        KernelCosts.load(_write(tmp_path / "c.json", saved, fmt="split-sizes"))
    (tmp_path / "d.json").write_text("{")
    with pytest.raises(KuiperError, match="cannot read kernel costs"):
        KernelCosts.load(tmp_path / "d.json")


@pytest.mark.parametrize(
    "field, value", [("gemm_mac", "fast"), ("gemm_mac", -1.0), ("wide_max_taps", 9.5), ("wide_max_taps", True)]
)
def test_costs_of_the_wrong_kind_are_refused(tmp_path: Path, field: str, value: object) -> None:
    with pytest.raises(KuiperError, match=f"kernel cost {field} must be a non-negative"):
        replace(DEFAULT_COSTS, **{field: value})
    saved = {**asdict(DEFAULT_COSTS), field: value}
    with pytest.raises(KuiperError, match=field):
        KernelCosts.load(_write(tmp_path / "e.json", saved))


def _convs(g: kuiper_core.RuntimeGraph) -> dict[str, str]:
    """Each nn.Conv2d's kernel at its declared shapes under the graph's options."""
    return {
        rop.name: g.kernel_name(rop.layer, [o.static_shape for o in rop.op.inputs])  # type: ignore[misc]
        for rop in g.order
        if rop.type == "nn.Conv2d" and rop.layer is not None
    }


def test_costs_passed_in_decide_the_kernels_and_not_the_answer() -> None:
    x = np.load(SAMPLES / "resnet18.input.npy")
    g = kuiper_core.load(SAMPLES / "resnet18.pnnx.param", threads=1)
    assert _convs(g)["convbn2d_1"] == "Winograd F(2x2, 3x3)"
    (y,) = g.forward(x)
    other = kuiper_core.load(SAMPLES / "resnet18.pnnx.param", threads=1, kernel_costs=NO_WINOGRAD)
    assert not any("Winograd F(" in k for k in _convs(other).values())
    (y2,) = other.forward(x)
    assert other.last_executor == "prepared"
    np.testing.assert_allclose(y2, y, rtol=1e-4, atol=1e-4 * float(np.abs(y).max()))
    # new options: the kernels are chosen again under them
    g.options = ExecutionOptions(threads=1, kernel_costs=NO_WINOGRAD)
    assert _convs(g) == _convs(other)
    np.testing.assert_array_equal(g.forward(x)[0], y2)  # the same kernels: the same bits


def test_the_choice_reads_the_options_thread_count_not_the_process() -> None:
    """The stride-2 rows kernel is weighed at one BLAS thread only; the count is the options'
    (what the call will run at), whatever the process's BLAS is set to when asked."""
    if not threads.blas_reachable():
        pytest.skip("the BLAS's thread count cannot be set here")
    param = SAMPLES / "resnet18.pnnx.param"
    one, two = kuiper_core.load(param, threads=1), kuiper_core.load(param, threads=2)
    with threads.using_blas_threads(2):
        at_one = _convs(one)
    with threads.using_blas_threads(1):
        at_two = _convs(two)
    stride2 = [name for name, k in at_one.items() if k.startswith("Winograd along the rows, stride 2")]
    assert stride2, at_one
    assert all(at_two[name] == "im2col + GEMM" for name in stride2)
