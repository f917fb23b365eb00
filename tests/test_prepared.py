"""The prepared forward (runtime/prepared.py): fixed calls on fixed, shared, in-place buffers.

Every exported op case and bundled model runs forward three times: with its input, with
another input (so every buffer holds other values), and with its input again; the last
run must still match PyTorch's outputs, and no result may change after it is returned.
The in-place choices are checked on ResNet-18's plan.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from conftest import OPS, SAMPLES, max_err_ok, slow_cases
from kuiper_core.layers.conv_reference import conv2d_reference
from kuiper_core.runtime.prepared import PreparedForward
from kuiper_core.graph import Attribute
from kuiper_core.pnnx import parse_param
from layer_testing import param_text

# The op corpus at optlevel 2, 1 and 0 (TorchScript-style operators, parameters given as
# operands, packed outputs: the graphs that cannot be prepared run operator by operator).
CASES = sorted(
    p.parent for d in (OPS, OPS.parent / "ops_o1", OPS.parent / "ops_o0") for p in d.glob("*/model.pnnx.param")
)
MODELS = [
    "digits_cnn",
    "tiny_mlp",
    "resnet18",
    "mobilenetv3",
    "unet",
    "yolov5s_mini",
    "vit_tiny",
    "expr_zoo",
    "deep1500",
]


def _npz(path: Path, prefix: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"{prefix}{i}"] for i in range(len(z.files))]


def _other(x: np.ndarray) -> np.ndarray:
    """Another input of the same shape and dtype (floats changed, integers kept: they may be indices)."""
    return (x * np.asarray(0.5, x.dtype) + np.asarray(0.25, x.dtype)) if x.dtype.kind == "f" else x.copy()


def _three_runs(runtime: kuiper_core.RuntimeGraph, inputs: list[np.ndarray], expected: list[np.ndarray]) -> None:
    first = runtime.forward(*inputs)
    assert len(first) == len(expected)
    for i, (y, ref) in enumerate(zip(first, expected)):  # the first run too (test_ops' forward check)
        assert y.shape == ref.shape, f"out{i}: shape {y.shape} != {ref.shape}"
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"out{i}: first run err {err:.3g} > {bound:.3g}"
    kept = [y.copy() for y in first]
    runtime.forward(*[_other(x) for x in inputs])
    last = runtime.forward(*inputs)
    assert len(last) == len(expected)
    for i, (y0, k, y, ref) in enumerate(zip(first, kept, last, expected)):
        assert np.array_equal(y0, k, equal_nan=True), f"out{i} changed after it was returned"
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"out{i}: prepared run err {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_op_case_runs_prepared(case: Path) -> None:
    runtime = kuiper_core.load(case / "model.pnnx.param", executor="prepared")
    _three_runs(runtime, _npz(case / "inputs.npz", "in"), _npz(case / "expected.npz", "out"))


@pytest.mark.slow
def test_most_op_cases_are_prepared() -> None:
    """Only graphs whose operators pass non-arrays around (size arithmetic) run unprepared."""
    unprepared = []
    for case in CASES:
        runtime = kuiper_core.load(case / "model.pnnx.param", executor="prepared")
        runtime.forward(*_npz(case / "inputs.npz", "in"))
        if runtime.last_executor != "prepared":
            unprepared.append(f"{case.parent.name}/{case.name}")
    assert len(unprepared) < 0.2 * len(CASES), unprepared


@pytest.mark.parametrize("name", slow_cases(MODELS, {"deep1500", "resnet18", "unet", "yolov5s_mini"}))
def test_model_runs_prepared(name: str) -> None:
    runtime = kuiper_core.load(SAMPLES / f"{name}.pnnx.param", executor="prepared")
    x = np.load(SAMPLES / f"{name}.input.npy")
    _three_runs(runtime, [x], _npz(SAMPLES / f"{name}.expected.npz", "out"))
    assert runtime.last_executor == "prepared"


@pytest.mark.slow
def test_resnet_runs_relu_and_residual_add_in_place() -> None:
    runtime = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")
    x = np.load(SAMPLES / "resnet18.input.npy")
    prepared = PreparedForward.build(runtime.program, [x])
    assert runtime.graph is not None
    relus = [op for op in runtime.graph.operators if op.type == "nn.ReLU"]
    adds = [op for op in runtime.graph.operators if op.type == "pnnx.Expression"]
    slots = prepared.plan.assignment

    def same_buffer(op) -> bool:
        return any(slots[op.outputs[0].name][0] == slots[i.name][0] for i in op.inputs if i.name in slots)

    assert all(same_buffer(op) for op in relus + adds)
    # ...so the plan needs fewer bytes than one buffer per operand, and fewer than the
    # declared-shape plan without in-place reuse.
    assert runtime.plan is not None and prepared.plan.total_bytes < 0.8 * runtime.plan.total_bytes


@pytest.mark.slow
def test_relu_after_a_convolution_joins_its_call() -> None:
    """ResNet-18: the ReLU after the stem and after each block's first conv (the conv's
    only reader, in place) has no call of its own, nor the 8 after residual adds (the add's
    call applies it). The outputs stay PyTorch's (test_model_runs_prepared)."""
    runtime = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")
    x = np.load(SAMPLES / "resnet18.input.npy")
    prepared = PreparedForward.build(runtime.program, [x])
    assert prepared.types.count("nn.ReLU") == 0
    assert prepared.types.count("nn.Conv2d") == 20 and prepared.types.count("pnnx.Expression") == 8
    np.testing.assert_array_equal(prepared.run([x])[0], prepared.first_outputs[0])  # the fused adds run twice alike


def test_relu_is_not_fused_when_another_operator_reads_the_conv_output() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = parse_param(
        param_text(
            "pnnx.Input in 0 1 0 #0=(1,3,6,6)f32",
            "nn.Conv2d conv 1 1 0 1 bias=False dilation=(1,1) groups=1 in_channels=3 kernel_size=(3,3) out_channels=4 "
            "padding=(1,1) padding_mode=zeros stride=(1,1) @weight=(4,3,3,3)f32 #1=(1,4,6,6)f32",
            "nn.ReLU relu 1 1 1 2 #2=(1,4,6,6)f32",
            "pnnx.Expression add 2 1 2 1 3 expr=add(@0,@1) #3=(1,4,6,6)f32",
            "pnnx.Output out 1 0 3",
        )
    )
    graph.operator("conv").attrs["weight"] = Attribute("f32", w.shape, w)
    runtime = kuiper_core.RuntimeGraph.from_graph(graph).build()
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    conv = conv2d_reference(x, w, pads=(1, 1, 1, 1))
    for _ in range(2):  # the record run, then the prepared one
        assert max_err_ok(runtime.forward(x)[0], np.maximum(conv, 0) + conv)[0]
    assert runtime.last_executor == "prepared"
    assert "nn.ReLU" in PreparedForward.build(runtime.program, [x]).types


def test_batch_change_gets_its_own_prepared_forward() -> None:
    runtime = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param", executor="prepared")
    x = np.load(SAMPLES / "digits_cnn.input.npy")
    x4 = np.concatenate([x, _other(x), x, x], axis=0)
    y1 = runtime.forward(x)[0]
    y4 = runtime.forward(x4)[0]
    assert runtime.last_executor == "prepared"
    for i in (0, 2, 3):
        assert max_err_ok(runtime.forward(x4)[0][i], y1[0])[0]
    assert max_err_ok(y4[1], runtime.forward(_other(x))[0][0])[0]
