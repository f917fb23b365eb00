"""kuiper_core.explore.profile: per-operator time, parameters, MACs, output memory."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLES

import kuiper_core
from kuiper_core.explore.profile import (
    by_type,
    declared_kernel,
    profile_model,
    profile_table,
    profile_totals,
    top_operators,
)


@pytest.fixture(scope="module")
def tiny():
    g = kuiper_core.load(SAMPLES / "tiny_mlp.pnnx.param")
    return g, np.load(SAMPLES / "tiny_mlp.input.npy")


def test_rows_follow_execution_order(tiny) -> None:
    g, x = tiny
    rows = profile_model(g, [x])
    assert [r.name for r in rows] == [rop.name for rop in g.order]
    assert [r.index for r in rows] == list(range(len(g.order)))
    assert all(r.seconds >= 0 for r in rows)


def test_tiny_mlp_parameters_macs_and_memory(tiny) -> None:
    g, x = tiny
    rows = {r.name: r for r in profile_model(g, [x])}
    # Linear(64->32) and Linear(32->10) at batch 1: in*out multiply-accumulates.
    assert rows["fc1"].macs == 64 * 32 and rows["fc2"].macs == 32 * 10
    assert rows["fc1"].parameters == 64 * 32 + 32 and rows["fc2"].parameters == 32 * 10 + 10
    assert rows["act"].parameters == 0
    assert rows["fc1"].output_bytes == 32 * 4 and rows["fc1"].output_shapes == "1x32"
    assert rows["torch.flatten_0"].output_bytes == 64 * 4
    assert rows["pnnx_output_0"].output_bytes == 0  # no outputs of its own
    t = profile_totals(list(rows.values()))
    assert t.parameters == 2410 and t.operators == 7
    assert t.macs == sum(r.macs for r in rows.values())


def test_batch_scales_macs_and_memory(tiny) -> None:
    g, x = tiny
    rows = {r.name: r for r in profile_model(g, [np.concatenate([x, x, x])])}
    assert rows["fc1"].macs == 3 * 64 * 32 and rows["fc1"].output_bytes == 3 * 32 * 4


def test_repeats_keep_the_fastest_time(tiny) -> None:
    g, x = tiny
    rows = profile_model(g, [x], repeats=4)
    assert len(rows) == len(g.order)
    with pytest.raises(ValueError):
        profile_model(g, [x], repeats=0)


def test_conv_macs_match_the_param_shapes() -> None:
    """digits_cnn: each Conv2d's MACs = out elements x in_channels/groups x kh x kw, from the .param."""
    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    rows = {r.name: r for r in profile_model(g, [np.load(SAMPLES / "digits_cnn.input.npy")])}
    convs = [op for op in g.graph.operators if op.type == "nn.Conv2d"]
    assert convs
    for op in convs:
        kh, kw = op.params["kernel_size"]
        out = int(np.prod(op.outputs[0].shape))
        assert rows[op.name].macs == out * op.params["in_channels"] // op.params["groups"] * kh * kw


def test_table_top_and_by_type(tiny) -> None:
    g, x = tiny
    rows = profile_model(g, [x])
    table = profile_table(rows)
    assert sum(r["time_%"] for r in table) == pytest.approx(100.0)
    assert {"time_ms", "macs", "parameters", "output_KiB", "name", "type"} <= set(table[0])
    top = top_operators(rows, "macs", n=2)
    assert [r.name for r in top] == ["fc1", "fc2"]
    assert top_operators(rows, "parameters", n=1)[0].name == "fc1"
    with pytest.raises(ValueError):
        top_operators(rows, "colour")
    types = by_type(rows)
    assert {t["type"]: t["count"] for t in types}["nn.Linear"] == 2
    assert types == sorted(types, key=lambda t: -t["time_ms"])


@pytest.mark.slow
def test_convolutions_say_which_kernel_runs_them() -> None:
    # ResNet-18 at batch 1: the kernels the cost model picks (conv_choice.py with the default KernelCosts, bench/bench_convs.py).
    g = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")
    rows = {r.name: r for r in profile_model(g, [np.load(SAMPLES / "resnet18.input.npy")])}
    convs = {name: r.kernel for name, r in rows.items() if r.type == "nn.Conv2d"}
    assert convs["convbn2d_1"] == "Winograd F(2x2, 3x3)"  # layer1: 64 channels, 56x56 (F(4,3): issue 34)
    assert convs["convbn2d_16"] == "Winograd F(2, 3) along the rows"  # layer4: 512 channels, 7x7
    assert convs["convbn2d_7"] == "im2col + GEMM"  # a 1x1 stride-2 shortcut
    assert all(convs.values())
    assert {r.kernel for r in rows.values() if r.type != "nn.Conv2d"} == {""}  # nothing to choose
    assert profile_table(list(rows.values()))[0]["kernel"] == ""


def test_depthwise_convolutions_on_small_maps_run_channels_last() -> None:
    g = kuiper_core.load(SAMPLES / "mobilenetv3.pnnx.param")
    rows = profile_model(g, [np.load(SAMPLES / "mobilenetv3.input.npy")])
    kernels = [r.kernel for r in rows if r.type == "nn.Conv2d"]
    assert "depthwise, channels last" in kernels and "1x1: one GEMM" in kernels


@pytest.mark.slow
def test_the_declared_shapes_give_the_same_kernel_as_a_run() -> None:
    g = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")
    rows = profile_model(g, [np.load(SAMPLES / "resnet18.input.npy")])
    assert all(declared_kernel(g, r.name) == r.kernel for r in rows)
    assert declared_kernel(g, "no such operator") == ""
