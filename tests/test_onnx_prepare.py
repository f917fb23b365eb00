"""onnx_prepare.py: an .onnx normalised before pnnx reads it (opset, 0-d inputs, the given
shapes, constant folding, constant-condition If inlined, control flow left as a located error),
in a child process whose crash leaves the file as it was. Models are made with onnx.helper;
every answer is onnxruntime's on the same file."""

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
from kuiper_core.formats import onnx_prepare  # noqa: E402
from kuiper_core.formats.convert import converter_available, inputshape_text  # noqa: E402

needs_pnnx = pytest.mark.skipif(not converter_available(), reason="needs the pnnx converter")
slow = pytest.mark.slow  # a real conversion: the normalising child, then pnnx
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None, opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _const(name: str, value: object, dtype: type = np.int64) -> object:
    return onnx.numpy_helper.from_array(np.array(value, dtype=dtype), name)


def _onnxruntime(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), inputs)})


def _shape_if(then_scale: float) -> bytes:
    """y = If(x.shape[1] == 4, x * then_scale, -x): the condition follows from x's shape."""
    then_b = helper.make_graph(
        [helper.make_node("Mul", ["x", "k"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", F, None)],
        initializer=[_const("k", then_scale, np.float32)],
    )
    else_b = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", F, None)]
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["d"], axis=0),
        helper.make_node("Equal", ["d", "four"], ["c"]),
        helper.make_node("If", ["c"], ["i"], then_branch=then_b, else_branch=else_b),
        helper.make_node("Relu", ["i"], ["y"]),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [1, "n", 8])],
        [helper.make_tensor_value_info("y", F, None)],
        [_const("one", 1), _const("four", 4)],
    )


def test_inputshape_accepts_0d() -> None:
    assert inputshape_text("[1,16],[]i64") == "[1,16],[]i64"
    assert inputshape_text([[1, 16], []]) == "[1,16],[]"
    assert onnx_prepare.parse_shapes("[1,16]f32,[]i64") == [([1, 16], "f32"), ([], "i64")]


def test_a_0d_torchscript_input_says_what_to_do(tmp_path: Path) -> None:
    """pnnx's inputshape= cannot say [] and a TorchScript file has no shapes to write into."""
    with pytest.raises(ConversionError, match=r"gives a 0-d input, which the pnnx converter cannot give a TorchScript"):
        onnx_prepare.prepare(tmp_path / "m.pt", "torchscript", "[1,16],[]i64", 10, 1 << 30)
    assert onnx_prepare.prepare(tmp_path / "m.pt", "torchscript", "[1,16]", 10, 1 << 30).inputshape == "[1,16]"


@slow
@needs_pnnx
@pytest.mark.parametrize("n", [4, 3])
def test_if_on_a_shape_is_folded(n: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The If follows from the shapes given: pnnx gets the branch taken, and the answer is
    onnxruntime's for both branches."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    data = _shape_if(2.0)
    x = np.random.default_rng(0).standard_normal((1, n, 8)).astype(np.float32)
    log: list[str] = []
    graph = kuiper_core.load(data, inputshape=f"[1,{n},8]", on_log=log.append)
    (y,) = graph.forward(x)
    (ref,) = _onnxruntime(data, [x])
    assert max_err_ok(y, ref)[0]
    assert any("1 If(s) with a constant condition inlined" in line for line in log), log


@slow
@needs_pnnx
def test_if_on_values_is_a_located_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An If whose condition depends on an input's values: the node, its branches and what to do."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    then_b = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, None)]
    )
    else_b = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e1"]), helper.make_node("Exp", ["e1"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", F, None)],
    )
    nodes = [
        helper.make_node("Cast", ["sr"], ["srf"], to=F),
        helper.make_node("Greater", ["srf", "half"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b, name="pick_rate"),
    ]
    data = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [1, 8]), helper.make_tensor_value_info("sr", I64, [])],
        [helper.make_tensor_value_info("y", F, None)],
        [_const("half", 12000.0, np.float32)],
    )
    with pytest.raises(ConversionError) as info:
        kuiper_core.load(data, name="vad.onnx", inputshape="[1,8],[]i64")
    text = str(info.value)
    assert "vad.onnx: node 'pick_rate' (If) is control flow" in text
    assert "depends on the values of input(s) 'sr'" in text
    assert "then-branch 1 node(s) (Relu) giving 1 output(s)" in text
    assert "else-branch 2 node(s) (Neg, Exp)" in text
    assert "export the model with the condition fixed" in text


@pytest.mark.parametrize("n", [4, 3])
def test_the_inlined_branch_gives_onnxruntimes_answer(n: int) -> None:
    """The normalised file (If replaced by the branch its shape picks) against the original,
    both in onnxruntime, at the two shapes that take the two branches."""
    data = _shape_if(2.0)
    model = onnx.load_from_string(data)
    onnx_prepare.normalise(model, f"[1,{n},8]", "m.onnx", 1 << 20, 1 << 30)
    assert "If" not in [node.op_type for node in model.graph.node]
    x = np.random.default_rng(1).standard_normal((1, n, 8)).astype(np.float32)
    assert np.array_equal(_onnxruntime(model.SerializeToString(), [x])[0], _onnxruntime(data, [x])[0])


def test_if_on_an_unknown_shape_asks_for_the_shapes() -> None:
    """Without input shapes the same If cannot fold: the message says what would fold it."""
    model = onnx.load_from_string(_shape_if(2.0))
    with pytest.raises(onnx_prepare._UserError) as info:
        onnx_prepare.normalise(model, None, "m.onnx", 1 << 20, 1 << 30)
    assert "depends on the shape of 'x', not known from the file: give the input shapes (--inputshape" in str(
        info.value
    )


def test_a_loop_is_named_with_its_body() -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["v_in", "v_in"], ["v_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", I64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", F, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", F, None),
        ],
    )
    nodes = [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="repeat")]
    data = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    with pytest.raises(onnx_prepare._UserError, match=r"node 'repeat' \(Loop\) is a loop whose body has 2 node\(s\)"):
        onnx_prepare.normalise(onnx.load_from_string(data), "[2],[]i64", "m.onnx", 1 << 20, 1 << 30)


@slow
@needs_pnnx
def test_0d_input_converts_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[]i64` in inputshape: written into the file (pnnx cannot parse it), and the model runs."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    nodes = [helper.make_node("Cast", ["sr"], ["s"], to=F), helper.make_node("Mul", ["x", "s"], ["y"])]
    data = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [1, "n"]), helper.make_tensor_value_info("sr", I64, [])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    x, sr = np.linspace(-1, 1, 16, dtype=np.float32)[None], np.array(3, dtype=np.int64)
    graph = kuiper_core.load(data, inputshape="[1,16],[]i64")
    (y,) = graph.forward(x, sr)
    assert max_err_ok(y, _onnxruntime(data, [x, sr])[0])[0]


@slow
@needs_pnnx
def test_shapes_that_do_not_fit_the_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    nodes = [helper.make_node("Cast", ["sr"], ["s"], to=F), helper.make_node("Mul", ["x", "s"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", F, [1, "n"]), helper.make_tensor_value_info("sr", I64, [])]
    data = _model(nodes, inputs, [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(InputError, match=r"gives 1 shape\(s\), but the model has 2 input\(s\): x: float32 \[1,n\], sr"):
        kuiper_core.load(data, inputshape="[1,16]")
    with pytest.raises(InputError, match="input 'sr' is i64 in the model, not f32"):
        kuiper_core.load(data, inputshape="[1,16],[]f32")


def test_opset6_weights_as_inputs_are_upgraded() -> None:
    """ONNX's own opset-6 Linear (PyTorch 0.3): upgraded to opset 17, its weights no inputs."""
    path = Path(onnx.__file__).parent / "backend/test/data/pytorch-converted/test_Linear/model.onnx"
    if not path.exists():
        pytest.skip("the onnx wheel ships no backend test data")
    model = onnx.load(str(path))
    result = onnx_prepare.normalise(model, "[4,10]", "linear", 1 << 20, 1 << 30)
    assert model.opset_import[0].version == 17 and model.ir_version >= 8
    assert [i.name for i in model.graph.input] == ["0"]
    assert "opset 6 upgraded to 17 (onnx.version_converter)" in result["notes"]
    x = onnx.numpy_helper.to_array(onnx.load_tensor(str(path.parent / "test_data_set_0/input_0.pb")))
    ref = onnx.numpy_helper.to_array(onnx.load_tensor(str(path.parent / "test_data_set_0/output_0.pb")))
    assert max_err_ok(_onnxruntime(model.SerializeToString(), [x])[0], ref)[0]


def test_folding_keeps_to_its_limits() -> None:
    """A constant bigger than the fold limit stays a node for pnnx (under its own memory limit)."""
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["big"], value=helper.make_tensor("v", F, [1], [1.0])),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["sf"], to=F),
        helper.make_node("ReduceSum", ["sf"], ["n"], keepdims=0),
        helper.make_node("Add", ["x", "n"], ["a"]),
        helper.make_node("Add", ["a", "big"], ["y"]),
    ]
    data = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [1, "n"])],
        [helper.make_tensor_value_info("y", F, None)],
        [_const("shape", [64, 64])],
    )
    model = onnx.load_from_string(data)
    onnx_prepare.normalise(model, "[1,64]", "m", 1000, 1 << 30)
    ops = [n.op_type for n in model.graph.node]
    assert "ConstantOfShape" in ops and "Shape" not in ops and "ReduceSum" not in ops
    x = np.ones((1, 64), np.float32)
    assert max_err_ok(_onnxruntime(model.SerializeToString(), [x])[0], _onnxruntime(data, [x])[0])[0]


def test_quantized_models_are_refused_up_front() -> None:
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
        helper.make_node("MatMulInteger", ["q", "w", "z"], ["y"]),
    ]
    data = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [onnx.numpy_helper.from_array(np.ones((4, 3), np.uint8), "w")],
    )
    with pytest.raises(onnx_prepare._UserError, match=r"node 0 '' \(DynamicQuantizeLinear\) is a quantized operator"):
        onnx_prepare.normalise(onnx.load_from_string(data), None, "q.onnx", 1 << 20, 1 << 30)


def test_qdq_quantized_models_are_refused_up_front() -> None:
    """pipecat-ai's smart-turn-v3.2-cpu.onnx: QuantizeLinear/DequantizeLinear around each MatMul;
    pnnx kept them as ONNX nodes and the engine listed 114 unsupported operators."""
    scale = onnx.numpy_helper.from_array(np.array(0.02, np.float32), "s")
    zero = onnx.numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q_x")]
    nodes.append(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]))
    data = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", F, None)],
        [scale, zero],
    )
    with pytest.raises(onnx_prepare._UserError, match=r"node 0 'q_x' \(QuantizeLinear\) .* QDQ form"):
        onnx_prepare.normalise(onnx.load_from_string(data), None, "qdq.onnx", 1 << 20, 1 << 30)


def test_string_and_training_models_are_refused_up_front() -> None:
    path = Path(onnx.__file__).parent / "backend/test/data/simple"
    if not path.exists():
        pytest.skip("the onnx wheel ships no backend test data")
    for case, words in [
        ("test_strnorm_model_monday_casesensintive_lower", "is a string tensor"),
        ("test_gradient_of_add", "(Gradient) is a training operator"),
        ("test_sequence_model1", "works on an ONNX sequence"),
    ]:
        model = onnx.load(str(path / case / "model.onnx"))
        with pytest.raises(onnx_prepare._UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
            onnx_prepare.normalise(model, None, case, 1 << 20, 1 << 30)


@slow
@needs_pnnx
def test_a_crashing_child_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The normalisation dies (here by SIGSEGV): the caller lives, the log says so, and the
    file goes to pnnx unchanged."""
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    crash = ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    monkeypatch.setattr(onnx_prepare, "_child_args", lambda folder: crash)
    data = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", F, [1, 8])],
        [helper.make_tensor_value_info("y", F, [1, 8])],
    )
    log: list[str] = []
    graph = kuiper_core.load(data, inputshape="[1,8]", on_log=log.append)
    x = np.linspace(-1, 1, 8, dtype=np.float32)[None]
    assert np.array_equal(graph.forward(x)[0], np.maximum(x, 0))
    assert any("normalising the ONNX file failed (killed by signal 11" in line for line in log), log
    with pytest.raises(ConversionError, match=r"a 0-d input \(\[\]\) must be written into the ONNX file"):
        kuiper_core.load(data, inputshape="[1,8],[]i64")
