"""pnnx's generated NAME_pnnx.py runs only after an allowlist check, in a child process under
memory and time limits (references/code_check.py, references/isolated.py). Each escape below
ran a shell command, reached a frame's globals or hung the process with the first check,
which refused names it knew (`torch.os` was not one of them)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from kuiper_core import limits
from kuiper_core.formats.base import installed

pytestmark = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")

MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.fc = nn.Linear(bias=True, in_features=2, out_features=2)
        archive = zipfile.ZipFile('m.pnnx.bin', 'r')
        self.fc.bias = self.load_pnnx_bin_as_parameter(archive, 'fc.bias', (2), 'float32')
        self.fc.weight = self.load_pnnx_bin_as_parameter(archive, 'fc.weight', (2,2), 'float32')
        archive.close()

    def forward(self, v_0):
        v_1 = self.fc(v_0)
        BODY
        v_2 = F.relu(v_1)
        return v_2
"""

ESCAPES = {
    "torch.os": "torch.os.system('touch HACKED')",
    "a module's module": "nn.modules.module.torch.os.system('touch HACKED')",
    "F.torch": "F.torch.load('x.pt')",
    "torch.ops.load_library": "torch.ops.load_library('/tmp/x.so')",
    "a module as a value": "m = torch.nn\n        m.modules.module.torch.os.system('touch HACKED')",
    "generator frame": "g = [0]\n        g[0] = (x.gi_frame.f_back.f_back.f_globals for x in g)",
    "frame by list": "fr = [h.gi_frame for h in [v_1]]",
    "lambda": "f = lambda: 1",
    "tofile": "v_1.numpy().tofile('HACKED')",
    "storage": "v_1.untyped_storage().from_file('HACKED')",
    "format": "s = '{0.__class__}'.format(v_1)",
    "private attribute": "d = v_1._base",
    "nn.Module internals": "d = self._modules",
    "global setter": "torch.set_num_threads(1)",
    "jit class": "torch.CompilationUnit('def f(x): return x')",
    "file reader": "torch.PyTorchFileReader('x')",
    "huge int": "n = 2 ** 2 ** 40",
    "shift": "n = 1 << 10 ** 10",
    "sum of range": "n = sum(range(10 ** 18))",
    "unknown name": "n = open('x')",
    "loop": "while True:\n            pass",
    "try": "try:\n            v_1 = v_1\n        except Exception as e:\n            pass",
    "nested def": "def f():\n            return 1",
    "aten file op": "torch.ops.aten.from_file('x')",
    "torchvision beyond ops": "torchvision.io.read_file('x')",
    "assign to self": "self = v_1",
}


def _script(tmp_path: Path, body: str = "pass") -> Path:
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin", "w") as zf:
        zf.writestr("fc.bias", np.array([0.5, -1.0], "<f4").tobytes())
        zf.writestr("fc.weight", np.array([[1, 2], [3, 4]], "<f4").tobytes())
    path = tmp_path / "m_pnnx.py"
    path.write_text(MODEL.replace("BODY", body))
    return path


@pytest.mark.parametrize("body", ESCAPES.values(), ids=ESCAPES.keys())
def test_escapes_are_refused_before_anything_runs(tmp_path, monkeypatch, body):
    from kuiper_core.references.pnnx_py import UnsafeCode, capture_operands

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafeCode):
        capture_operands(_script(tmp_path, body), [np.ones((1, 2), np.float32)], isolated=False)
    assert not (tmp_path / "HACKED").exists()


@pytest.mark.slow
def test_the_check_accepts_what_pnnx_writes(tmp_path):
    """Calls of every namespace pnnx uses, aten's operators (also the dunder ones), `_` names.
    (Scripts pnnx wrote run in tests/test_references.py; 98 of them, from every export made
    for this project, pass the check.)"""
    from kuiper_core.references.pnnx_py import capture_operands

    body = (
        "v_3 = torch.ops.aten.relu(v_1)\n        v_4, _ = torch.chunk(v_3, 2, 1)\n"
        "        v_5 = torch.ops.aten.__or__(v_3 > 0, v_3 < 0)\n        v_6 = torch.linalg.vector_norm(v_3)\n"
        "        v_7 = v_3.reshape(1, 2).permute(1, 0).float() * -1.5"
    )
    refs, outputs = capture_operands(_script(tmp_path, body), [np.array([[1.0, 1.0]], np.float32)])
    np.testing.assert_array_equal(refs["7"], [[-5.25], [-9.0]])
    np.testing.assert_array_equal(outputs[0], [[3.5, 6.0]])


def test_the_child_process_has_a_time_limit(tmp_path):
    from kuiper_core.references.isolated import IsolatedRunError
    from kuiper_core.references.pnnx_py import capture_operands

    with pytest.raises(IsolatedRunError, match="time limit"):
        capture_operands(_script(tmp_path), [np.ones((1, 2), np.float32)], timeout=0.2)


@pytest.mark.slow
def test_the_child_process_has_a_memory_limit(tmp_path):
    """32 GiB asked by checked code fails in the child (limited to max_planned_bytes + 2 GiB),
    not in the server."""
    from kuiper_core.references.isolated import IsolatedRunError
    from kuiper_core.references.pnnx_py import capture_operands

    script = _script(tmp_path, "v_9 = torch.ones(8 * 1024 * 1024 * 1024)")
    with limits.use(max_planned_bytes=64 << 20), pytest.raises(IsolatedRunError, match="alloc"):
        capture_operands(script, [np.ones((1, 2), np.float32)])


@pytest.mark.slow
@pytest.mark.skipif(
    not (installed("onnx") and installed("onnxruntime")), reason="onnx and onnxruntime are not installed"
)
def test_onnx_values_exposed_are_bounded_and_computed_in_a_child(tmp_path):
    """A 309-byte .onnx of ReLUs over a ConstantOfShape of 2^26 floats (pnnx folds it away, so
    our engine's limits never see it) took 2.7 GB in the server's process once every value was
    exposed: now the child computes it, and returns at most max_planned_bytes."""
    import resource

    import onnx
    from onnx import TensorProto, helper

    from kuiper_core.errors import LimitError
    from kuiper_core.references.onnx_values import run_onnx

    n, size = 4, 1 << 22  # 4 values of 16 MiB
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c0"], value=fill)]
    nodes += [helper.make_node("Relu", [f"c{i}"], [f"c{i + 1}"]) for i in range(n)]
    nodes += [helper.make_node("ReduceSum", [f"c{n}"], ["s"], keepdims=0), helper.make_node("Add", ["x", "s"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [size])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [shape]), ir_version=8)
    model.opset_import[0].version = 13
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with limits.use(max_planned_bytes=3 * 4 * size), pytest.raises(LimitError, match="max_planned_bytes"):
        run_onnx(path, [np.ones((1, 4), np.float32)])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 40 << 10  # KiB: not here
    with limits.use(max_planned_bytes=8 * 4 * size):
        run = run_onnx(path, [np.ones((1, 4), np.float32)])
    np.testing.assert_array_equal(run.outputs[0], np.full((1, 4), 1.0 + size, np.float32))
