"""formats/onnx_given.py: an ONNX model whose If reads the value of a small integer input (silero-vad's
`sr`) converted for the value the user gives: the If folds to that value's branch, the cache key
holds the value, the converted pnnx.Input records it (`value=`), the engine refuses another
value, and the conversion check and its probe run onnxruntime at that value. Models are made
with onnx.helper; every answer is onnxruntime's on the same file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import max_err_ok

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import kuiper_core  # noqa: E402
from kuiper_core.errors import ConversionError, InputError  # noqa: E402
from kuiper_core.formats import onnx_given, onnx_prepare  # noqa: E402
from kuiper_core.formats.convert import converter_available  # noqa: E402
from kuiper_core.pnnx import parse_param_bytes  # noqa: E402
from kuiper_core.explore.input_choice import resolve_input  # noqa: E402
from kuiper_core.explore.inputs import input_specs  # noqa: E402
from kuiper_core.explore.loaded_model import LoadedModel  # noqa: E402
from kuiper_core.references.compare import random_inputs  # noqa: E402
from kuiper_core.references.conversion_check import probe_inputs  # noqa: E402
from kuiper_core.runtime.inputs import check_fixed_value  # noqa: E402

needs_pnnx = pytest.mark.skipif(not converter_available(), reason="needs the pnnx converter")
F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(1, 8)


def _rate_if() -> bytes:
    """y = If(sr == 16000, relu(x) * 2, exp(-x) + 3): the branch is chosen by sr's value."""
    then_b = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", F, None)],
        initializer=[onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    else_b = helper.make_graph(
        [
            helper.make_node("Neg", ["x"], ["n"]),
            helper.make_node("Exp", ["n"], ["e"]),
            helper.make_node("Add", ["e", "three"], ["s"]),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("s", F, None)],
        initializer=[onnx.numpy_helper.from_array(np.array(3.0, np.float32), "three")],
    )
    nodes = [
        helper.make_node("Equal", ["sr", "k16"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b, name="pick_rate"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 8]), helper.make_tensor_value_info("sr", I64, [])],
        [helper.make_tensor_value_info("y", F, None)],
        initializer=[onnx.numpy_helper.from_array(np.array(16000, np.int64), "k16")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _onnxruntime(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), inputs)})


@pytest.mark.parametrize("rate", [16000, 8000])
def test_the_normalised_file_takes_the_given_values_branch(rate: int) -> None:
    """normalise() with sr given: no If left, sr unread (still an input), and onnxruntime gives
    the original's answer on the normalised file at that value."""
    data = _rate_if()
    model = onnx.load_from_string(data)
    result = onnx_prepare.normalise(model, "[1,8],[]i64", "vad.onnx", 1 << 20, 1 << 30, [None, rate])
    assert [n.op_type for n in model.graph.node if n.op_type == "If"] == []
    assert [i.name for i in model.graph.input] == ["x", "sr"]
    assert result["fixed"] == [[1, "sr", rate, "i64"]]
    sr = np.array(rate, np.int64)
    assert np.array_equal(_onnxruntime(model.SerializeToString(), [X, sr])[0], _onnxruntime(data, [X, sr])[0])


def _scaled_by_n() -> bytes:
    """y = x * float(n): the small integer input n is data, read by no condition or shape."""
    nodes = [helper.make_node("Cast", ["n"], ["f"], to=F), helper.make_node("Mul", ["x", "f"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 8]), helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_values_nothing_reads_as_a_condition_or_shape_are_not_fixed() -> None:
    """An integer input used as data only is left as it is, given or not."""
    model = onnx.load_from_string(_scaled_by_n())
    result = onnx_prepare.normalise(model, "[1,8],[]i64", "m.onnx", 1 << 20, 1 << 30, [None, 3])
    assert result["fixed"] == [] and [n.op_type for n in model.graph.node] == ["Cast", "Mul"]


def test_an_if_on_float_data_is_not_offered_a_value() -> None:
    """An If on the values of a float tensor cannot be converted for one value: the message says
    so, and does not ask for --input."""
    then_b = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, None)]
    )
    else_b = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", F, None)]
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b, name="sign"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F, [1, 8])],
        [helper.make_tensor_value_info("y", F, None)],
        initializer=[onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(onnx_prepare._UserError) as info:
        onnx_prepare.normalise(model, "[1,8]", "m.onnx", 1 << 20, 1 << 30, None)
    text = str(info.value)
    assert "depends on the values of input(s) 'x', data too large (or not integers)" in text and "--input" not in text


def test_only_small_integer_inputs_are_offered() -> None:
    values = onnx_given.given_values([X, np.array(16000), np.arange(9), np.array([True, False])])
    assert values == [None, 16000, None, [True, False]]
    assert onnx_given.given_values([X]) is None
    assert onnx_given.param_text([[3, 1]]) == "value=(3,1)" and onnx_given.param_text(8000) == "value=8000"


_FIXED_PARAM = """7767517
4 3
pnnx.Input in0 0 1 0 #0=(1,8)f32
pnnx.Input in1 0 1 1 value=16000 #1=()i64
pnnx.Expression e 1 1 0 2 expr=mul(@0,2.0) #0=(1,8)f32 #2=(1,8)f32
pnnx.Output out0 1 0 2
"""


def test_the_engine_refuses_another_value_and_the_probe_uses_the_fixed_one() -> None:
    """A file converted for sr=16000 runs at 16000 (each call checked, not only the first
    signature) and refuses 8000 with what to do; the conversion check's probe feeds 16000."""
    graph = parse_param_bytes(_FIXED_PARAM.encode(), "fixed.pnnx.param")
    runtime = kuiper_core.RuntimeGraph.from_graph(graph).build()
    sr16, sr8 = np.array(16000, np.int64), np.array(8000, np.int64)
    assert np.array_equal(runtime.forward(X, sr16)[0], X * 2)
    assert np.array_equal(runtime.forward(X, sr16)[0], X * 2)
    with pytest.raises(InputError, match=r"converted for the value 16000 of this input only .* got 8000"):
        runtime.forward(X, sr8)
    with pytest.raises(InputError, match="kuiper run MODEL --input"):
        check_fixed_value(graph.inputs[1], sr8)
    arrays, said = probe_inputs(graph)
    assert int(arrays[1]) == 16000 and arrays[1].dtype == np.int64 and "= 16000 (converted for it)" in said


def test_made_up_inputs_use_the_fixed_value() -> None:
    """`kuiper compare` without --input and the app's seeded/zeros input feed the fixed value."""
    graph = parse_param_bytes(_FIXED_PARAM.encode(), "fixed.pnnx.param")
    arrays, _ = random_inputs(graph)
    assert arrays[1].shape == () and int(arrays[1]) == 16000
    model = LoadedModel(key="k", name="fixed.pnnx.param", source="upload", graph=graph)
    for kind in ("random", "zeros"):
        resolved = resolve_input(model, {"kind": kind}, input_specs(graph), {})
        assert int(resolved.arrays[1]) == 16000 and resolved.arrays[0].shape == (1, 8)


@pytest.mark.slow
@needs_pnnx
def test_a_value_dependent_if_converts_for_each_given_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Converted at sr=16000 and at sr=8000 (two cache entries): each gives onnxruntime's answer
    at its value, is checked against onnxruntime at it, and refuses the other value."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    data = _rate_if()
    keys, answers = set(), []
    for rate, other in ((16000, 8000), (8000, 16000)):
        sr = np.array(rate, np.int64)
        model = kuiper_core.open_model(data, name="vad.onnx", inputs=[X, sr])
        assert model.conversion is not None and f"'sr' = {rate} only" in (model.conversion.note or "")
        assert model.check is not None and model.check.status == "agrees", model.check
        keys.add(model.conversion.key)
        (y,) = model.build().forward(X, sr)
        (ref,) = _onnxruntime(data, [X, sr])
        assert max_err_ok(y, ref)[0]
        answers.append(y)
        fixed = [op for op in model.graph.inputs if "value" in op.params]
        assert [op.params["value"] for op in fixed] == [rate]
        with pytest.raises(InputError, match=f"converted for the value {rate} of this input only"):
            model.build().forward(X, np.array(other, np.int64))
    assert len(keys) == 2 and not np.allclose(answers[0], answers[1])


@pytest.mark.slow
@needs_pnnx
def test_without_the_value_the_message_says_to_give_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    with pytest.raises(ConversionError) as info:
        kuiper_core.load(_rate_if(), name="vad.onnx", inputshape="[1,8],[]i64")
    text = str(info.value)
    assert "node 'pick_rate' (If) is control flow" in text
    assert "depends on the values of input(s) 'sr'" in text and "--input" in text and "'sr' included" in text


@pytest.mark.slow
@needs_pnnx
def test_expand_to_a_given_shape_converts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Expand(x, shape) with `shape` an int64 input (ONNX's test_expand_shape_model1): fixed at
    the given shape, given the shape it makes (ONNX broadcasts both ways, torch's expand one way)."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", F, [1, 3, 1]), helper.make_tensor_value_info("shape", I64, [2])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    x = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    for shape in ([3, 1], [1, 4]):
        s = np.array(shape, np.int64)
        (y,) = kuiper_core.load(data, inputs=[x, s]).forward(x, s)
        assert np.array_equal(y, _onnxruntime(data, [x, s])[0])


@pytest.mark.slow
@needs_pnnx
def test_kuiper_convert_with_inputs_writes_a_file_for_that_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`kuiper convert vad.onnx --input x.npy --input sr.npy` writes files for that sr, which
    `kuiper inspect` says and `kuiper run` refuses another sr on."""
    from kuiper_core.cli import main

    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "vad.onnx"
    model.write_bytes(_rate_if())
    for name, value in (("x.npy", X), ("sr8.npy", np.array(8000, np.int64)), ("sr16.npy", np.array(16000, np.int64))):
        np.save(tmp_path / name, value)
    args = ["--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "sr8.npy")]
    assert main(["convert", str(model), "-q", "-o", str(tmp_path / "out"), *args]) == 0
    param = tmp_path / "out" / "vad.pnnx.param"
    assert "value=8000" in param.read_text()
    capsys.readouterr()
    assert main(["inspect", str(param)]) == 0
    assert "is fixed at 8000" in capsys.readouterr().out
    assert main(["run", str(param), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "sr16.npy")]) != 0
    assert "converted for the value 8000 of this input only" in capsys.readouterr().err


@pytest.mark.slow
@needs_pnnx
def test_an_input_nothing_fixed_shares_one_conversion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small integer input used as data: converted once (the key without values), every value runs."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    data = _scaled_by_n()
    keys = set()
    for n in (3, 5):
        inputs = [X, np.array(n, np.int64)]
        opened = kuiper_core.open_model(data, inputs=inputs)
        assert opened.conversion is not None and opened.conversion.cached == (n == 5)
        keys.add(opened.conversion.key)
        assert max_err_ok(opened.build().forward(*inputs)[0], _onnxruntime(data, inputs)[0])[0]
    assert len(keys) == 1
