"""`kuiper compare --framework`'s references (issue 34 item 8): pnnx's generated `inf` and a
Max of a constant and a tensor run, bare ONNX op names pnnx leaves (`Gather(…)`) run with the
ONNX semantics, the reference used over another is said, and --relative checks each element
of a probability-valued output against its own size."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from conftest import SAMPLES
from kuiper_core.cli import main
from kuiper_core.explore import compare as C
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats.base import installed
from kuiper_core.references.code_check import check
from kuiper_core.references.pnnx_py import _map_calls, _model_class

needs_torch = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
needs_pnnx = pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))


PNNX_CODE = """
class Model(nn.Module):
    def forward(self, v_0):
        v_1 = torch.max(-inf, v_0)
        v_2 = torch.min(v_1, 6.0)
        v_3 = Gather(v_2, v_0, axis=1)
        v_4 = torch.max(v_2, v_3)
        return v_4
"""


@needs_torch  # the check reads torch.nn.Module's attribute names
def test_pnnx_inf_and_a_max_of_a_number_are_mapped_and_pass_the_check():
    model = _model_class(ast.parse(PNNX_CODE))
    _map_calls(model)
    check(model)  # `inf` and `Gather` are known names now
    text = ast.unparse(model)
    assert "torch.clamp(v_0, min=-inf)" in text and "torch.clamp(v_1, max=6.0)" in text
    assert "torch.max(v_2, v_3)" in text  # two tensors: torch takes it as it is


@needs_torch
def test_onnx_ops_pnnx_leaves_run_with_the_onnx_semantics():
    import torch

    from kuiper_core.references.onnx_in_torch import OPS

    x = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)
    idx = np.array([[0, 2], [4, -1]])
    got = OPS["Gather"](x, torch.from_numpy(idx), axis=1).numpy()
    np.testing.assert_array_equal(got, np.take(x.numpy(), idx, axis=1))  # ONNX Gather is np.take
    np.testing.assert_array_equal(OPS["ReduceMax"](x, axes=[-1], keepdims=0).numpy(), x.numpy().max(-1))
    np.testing.assert_array_equal(OPS["Expand"](x[:, :1], torch.tensor([1, 4, 3])).shape, (2, 4, 3))


@pytest.mark.slow  # a real conversion, torch and onnxruntime
@needs_pnnx
@needs_torch
@pytest.mark.skipif(not installed("onnxruntime"), reason="onnxruntime is not installed")
def test_a_gather_pnnx_leaves_in_its_code_gives_references(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    idx = numpy_helper.from_array(np.array([[0, 2], [4, -1]], np.int64), "idx")
    nodes = [helper.make_node("Gather", ["x", "idx"], ["g"], axis=1), helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], [idx])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(tmp_path / "gather.onnx"))
    opened = open_model(tmp_path / "gather.onnx")
    assert "Gather(" in opened.files.python.read_text()  # pnnx left the ONNX op in its code
    assert main(["compare", str(tmp_path / "gather.onnx"), "--framework"]) == 0
    out = capsys.readouterr().out
    assert "running pnnx's model_pnnx.py" in out and "pnnx's code was not run" not in out, out


def test_relative_checks_each_element_of_a_probability_output(tmp_path, capsys):
    param, x = str(SAMPLES / "tiny_mlp.pnnx.param"), str(SAMPLES / "tiny_mlp.input.npy")
    refs = dict(np.load(SAMPLES / "tiny_mlp.operands.npz"))
    out = open_model(SAMPLES / "tiny_mlp.pnnx.param").graph.outputs[0].inputs[0].name
    probs = refs[out].astype(np.float64)
    small = int(np.argmin(probs))
    probs[0, small] *= 1.2  # 20 % off on the smallest probability: far below 1e-4 in absolute terms
    refs[out] = probs.astype(np.float32)
    np.savez(tmp_path / "r.npz", **refs)
    args = ["compare", param, "--input", x, "--reference", str(tmp_path / "r.npz")]
    assert probs[0, small] < 1e-4 and main(args) == 0  # the default tolerance passes it
    capsys.readouterr()
    assert main([*args, "--relative", "1e-3"]) == 1
    said = capsys.readouterr().out
    assert f"operand {out}" in said and f"at [0, {small}]" in said, said
    assert main([*args, "--relative", "1e-3", "--rtol", "1e-3"]) == 2


def test_an_elementwise_bound_reports_the_element_furthest_past_it():
    ref = np.array([1.0, 1e-6, 0.5])
    value = ref * np.array([1.0 + 1e-5, 1.5, 1.0])
    c = C.compare(value, ref, C.tolerance_for(relative=1e-3)(ref))
    assert c.status == C.OVER and c.where == (1,) and c.tolerance == pytest.approx(1e-9)
    assert C.compare(ref, ref, C.tolerance_for(relative=1e-3)(ref)).status == C.OK
