"""A TorchScript file saved by torch.jit.trace records the example inputs it was traced with,
and pnnx refuses any other input shape ("input_shapes[0] expect [1,3,8,8]f32 but got
[1,3,1024,1024]f32": kelp-o-matic 0.5.3's LRASPP models, traced at 8x8, run on 1024x1024
crops). Converted at the shapes given, the example inputs are left out of the copy pnnx reads."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper_core
from conftest import DATA
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats.base import installed

LRASPP = DATA / "user_models" / "lraspp.pt"  # traced at [1,3,64,64], its sizes taken with x.size()

pytestmark = pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))


@pytest.mark.slow  # a real conversion
def test_a_traced_file_converts_at_another_shape_than_it_was_traced_at():
    model = open_model(LRASPP, inputshape="[1,3,96,80]")
    assert "traced with; converted at [1,3,96,80]" in (model.conversion.note or "")
    x = np.random.default_rng(0).normal(0, 1, (1, 3, 96, 80)).astype(np.float32)
    (y,) = kuiper_core.load(str(LRASPP), inputshape="[1,3,96,80]").forward(x)  # from the cache
    assert y.shape[-2:] == (96, 80)  # the upsampling to the input's size follows the new size
    if installed("torch"):
        import torch

        with torch.no_grad():
            ref = torch.jit.load(str(LRASPP)).eval()(torch.from_numpy(x))
        ref = ref["out"] if isinstance(ref, dict) else ref
        assert np.abs(y - ref.numpy()).max() <= 1e-4 * max(1.0, float(np.abs(ref.numpy()).max()))


@pytest.mark.slow  # a real conversion
def test_run_with_an_input_of_another_size_converts_at_that_size(tmp_path, capsys):
    """`kuiper run model.pt --input x.npy`: converted at the input's shapes, as an ONNX file with
    open dims is (before, at the traced 64x64, which the engine cannot run at 96x80)."""
    from kuiper_core.cli import main

    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).normal(0, 1, (1, 3, 96, 80)).astype(np.float32))
    assert main(["run", str(LRASPP), "--input", str(x)]) == 0
    out = capsys.readouterr()
    assert "96,80" in out.out + out.err and "traced with" in out.out + out.err
