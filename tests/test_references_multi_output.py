"""`compare --framework` on an ONNX model: the outputs of one of our multi-output operators are
matched to onnxruntime's values by their values, not by the order ONNX computed them in.

tf2onnx writes a bidirectional LSTM's two directions as two Slices, the backward one first
(openwakeword 0.4.0's hey_mycroft_v0.1.onnx); pnnx writes one `torch.unbind` giving (forward,
backward). The in-order alignment paired them crosswise and reported a divergence of 0.69 at the
unbind of a model whose outputs agree to 1e-7."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.formats import converter_available
from kuiper_core.formats.base import installed

pytestmark = [
    pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed"),
    pytest.mark.skipif(not (installed("onnxruntime") and installed("onnx")), reason="needs onnx and onnxruntime"),
]


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path_factory.getbasetemp() / "kuiper_cache"))


def _bidirectional_lstm_backward_slice_first(path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    t, i, h = 6, 4, 3
    init = [
        numpy_helper.from_array(rng.normal(0, 0.5, (2, 4 * h, i)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.normal(0, 0.5, (2, 4 * h, h)).astype(np.float32), "R"),
        numpy_helper.from_array(rng.normal(0, 0.5, (2, 8 * h)).astype(np.float32), "B"),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
    ]
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], direction="bidirectional", hidden_size=h),
        helper.make_node("Slice", ["y", "one", "two", "one"], ["bwd4"]),  # backward first, as tf2onnx
        helper.make_node("Squeeze", ["bwd4", "one"], ["bwd"]),
        helper.make_node("Slice", ["y", "zero", "one", "one"], ["fwd4"]),
        helper.make_node("Squeeze", ["fwd4", "one"], ["fwd"]),
        helper.make_node("Concat", ["fwd", "bwd"], ["out"], axis=2),
    ]
    graph = helper.make_graph(
        nodes,
        "bilstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, 1, i])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [t, 1, 2 * h])],
        init,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.mark.slow  # a real conversion
def test_unbind_outputs_are_matched_by_value_not_by_onnx_order(tmp_path):
    from kuiper_core.references.compare import compare

    model = tmp_path / "bilstm.onnx"
    _bidirectional_lstm_backward_slice_first(model)
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).normal(0, 1, (6, 1, 4)).astype(np.float32))
    report = compare(model, x, framework=["onnxruntime"])
    unbind = [r for r in report.rows if r.type == "torch.unbind"]
    assert len(unbind) == 2, report.summary()  # both directions compared, none left unmapped
    assert report.ok and all(r.comparison.max_error < 1e-5 for r in unbind), report.summary()
