"""pnnx's generated NAME_pnnx.py is run for references only after a check: the script is
written from names inside a model file, which may be a hostile upload (references/pnnx_py.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.formats.base import installed
from kuiper_core.references.pnnx_py import UnsafeCode, capture_operands

pytestmark = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")

HEADER = """
import os
import numpy as np
import tempfile, zipfile
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

MODEL = """
class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.fc = nn.Linear(bias=True, in_features=2, out_features=2)
        archive = zipfile.ZipFile('m.pnnx.bin', 'r')
        self.fc.bias = self.load_pnnx_bin_as_parameter(archive, 'fc.bias', (2), 'float32')
        self.fc.weight = self.load_pnnx_bin_as_parameter(archive, 'fc.weight', (2,2), 'float32')
        archive.close()

    def load_pnnx_bin_as_tensor(self, archive, key, shape, dtype):
        fd, tmppath = tempfile.mkstemp()
        return None

    def forward(self, v_0):
        v_1 = self.fc(v_0)
        v_2 = F.relu(BODY)
        return v_2
"""


def _script(tmp_path, body: str = "v_1", tail: str = "") -> str:
    import zipfile

    with zipfile.ZipFile(tmp_path / "m.pnnx.bin", "w") as zf:
        zf.writestr("fc.bias", np.array([0.5, -1.0], "<f4").tobytes())
        zf.writestr("fc.weight", np.array([[1, 2], [3, 4]], "<f4").tobytes())
    path = tmp_path / "m_pnnx.py"
    path.write_text(HEADER + MODEL.replace("BODY", body) + tail)
    return str(path)


@pytest.mark.slow
def test_a_plain_script_runs_with_our_weight_loader(tmp_path):
    refs, outputs = capture_operands(_script(tmp_path), [np.array([[1.0, 1.0]], np.float32)])
    np.testing.assert_array_equal(refs["1"], [[3.5, 6.0]])
    np.testing.assert_array_equal(outputs[0], [[3.5, 6.0]])


@pytest.mark.parametrize(
    "body",
    [
        "__import__('os').system('touch HACKED') or v_1",
        "v_1 if open('/etc/passwd') else v_1",
        "torch.load('x.pt')",
        "v_1.__class__.__bases__[0]",
        "getattr(v_1, 'relu')()",
        "torch.ops.custom.thing(v_1)",
        "torch.ops.aten.from_file('/etc/passwd')",
        "eval('v_1')",
    ],
    ids=["import", "open", "torch.load", "dunder", "getattr", "torch.ops.custom", "aten.from_file", "eval"],
)
def test_code_beyond_computing_is_refused(tmp_path, body):
    with pytest.raises(UnsafeCode):
        capture_operands(_script(tmp_path, body), [np.ones((1, 2), np.float32)])
    assert not (tmp_path / "HACKED").exists()


@pytest.mark.slow
def test_code_outside_the_model_class_never_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tail = "\nopen('HACKED', 'w').write('x')\nif __name__ == '__main__':\n    os.system('touch HACKED2')\n"
    capture_operands(_script(tmp_path, tail=tail), [np.ones((1, 2), np.float32)])
    assert not (tmp_path / "HACKED").exists() and not (tmp_path / "HACKED2").exists()


@pytest.mark.slow
def test_aten_operators_run(tmp_path):
    """pnnx writes an operator it has no Python for as `aten::op(...)`: repaired to torch.ops.aten."""
    from kuiper_core.formats.convert import repair_python

    path = _script(tmp_path, "aten::relu(v_1)")
    fixed = repair_python((tmp_path / "m_pnnx.py").read_text())
    assert fixed is not None and "torch.ops.aten.relu(v_1)" in fixed
    (tmp_path / "m_pnnx.py").write_text(fixed)
    refs, _ = capture_operands(path, [np.array([[-1.0, -1.0]], np.float32)])
    np.testing.assert_array_equal(refs["2"], [[0.0, 0.0]])
