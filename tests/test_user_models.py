"""Models nobody here wrote, as a user brings them (tests/data/user_models/, made by
tools/export_user_models.py from torchvision and torch): each .onnx and TorchScript .pt is
converted by the real pnnx converter, run, matched to PyTorch's output, and compared layer
by layer with references computed for it (onnxruntime for ONNX, torch for TorchScript), with
no hand-made file."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import numpy as np
import pytest

from conftest import DATA, max_err_ok
from kuiper_core import KuiperError
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats.base import installed
from kuiper_core.references.compare import compare

USER = DATA / "user_models"
MODELS = list(json.loads((USER / "manifest.json").read_text()))

pytestmark = [
    pytest.mark.skipif(
        not converter_available(), reason="the pnnx converter is not installed (pip install --no-deps pnnx)"
    ),
    pytest.mark.slow,  # a real conversion each (tests/test_formats.py is the fast tier's)
]
needs_ort = pytest.mark.skipif(
    not (installed("onnxruntime") and installed("onnx")), reason="onnxruntime and onnx are not installed"
)
needs_torch = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")

# Engine gaps (layers the engine lacked when these were written): (what the error says, why).
# A case xfails only while building fails with that error; once the layer exists it must pass.
# None today: transformer.onnx (nn.MultiheadAttention with one $input) and transformer.pt
# (aten::_transformer_encoder_layer_fwd) run since the models branch.
GAPS: dict[tuple[str, str], tuple[str, str]] = {}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("kuiper_cache")


CASES = [pytest.param(n, e, id=f"{n}.{e}") for n in MODELS for e in ("onnx", "pt")]


@contextlib.contextmanager
def known_gap(name: str, ext: str) -> Iterator[None]:
    """xfail when the engine stops at this case's known gap (GAPS); any other error fails."""
    try:
        yield
    except KuiperError as e:
        said, why = GAPS.get((name, ext), (None, ""))
        if said is not None and said in str(e):
            pytest.xfail(f"engine gap: {why}")
        raise


@pytest.mark.parametrize(("name", "ext"), CASES)
def test_converts_and_runs_to_pytorchs_answer(name, ext, cache):
    model = open_model(USER / f"{name}.{ext}", cache_dir=cache)
    x = np.load(USER / f"{name}.input.npy")
    with known_gap(name, ext):
        runtime = model.build()
    ys = runtime.forward(x)
    with np.load(USER / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    assert len(ys) == len(expected)
    for y, want in zip(ys, expected):
        ok, err, bound = max_err_ok(y, want)
        assert ok, f"{name}.{ext}: max |error| {err:.3g} > {bound:.3g}"


@needs_ort
@pytest.mark.parametrize(("name", "ext"), [c for c in CASES if c.values[1] == "onnx"])
def test_onnx_layer_by_layer_with_onnxruntime(name, ext, cache):
    model = open_model(USER / f"{name}.onnx", cache_dir=cache)
    with known_gap(name, ext):
        report = compare(model, USER / f"{name}.input.npy", framework=["onnxruntime"])
    assert report.ok, report.summary()
    # every operand maps to an ONNX value (a node's, or an initializer for pnnx's constants)
    assert not report.unchecked and len(report.rows) == report.computed, report.summary()


@needs_torch
@pytest.mark.parametrize(("name", "ext"), [c for c in CASES if c.values[1] == "pt"])
def test_torchscript_every_operand_with_torch(name, ext, cache):
    model = open_model(USER / f"{name}.pt", cache_dir=cache)
    with known_gap(name, ext):
        report = compare(model, USER / f"{name}.input.npy", framework=True)
    assert report.ok, report.summary()
    if model.files.python is None:  # pnnx's code for it does not run (e.g. it calls an aten:: op)
        assert "pnnx wrote no runnable model_pnnx.py" in report.summary() and report.rows, report.summary()
    else:
        assert not report.unchecked and len(report.rows) == report.computed, report.summary()


@needs_torch
def test_hook_keyed_references_of_a_torchvision_model(tmp_path, cache):
    """torchvision's MobileNetV2 (built here, traced), references written by the hook snippet the
    app shows (module paths): every module pnnx kept is compared by name, every BatchNorm it
    fused into a convolution with the fused operator (placed by the keys' order), all within
    tolerance; what stays unchecked is no module's output (residual adds, pooling, flatten)."""
    import torch

    try:
        from tools.export_user_models import _randomise_norms, mobilenet_v2
        from tools.torchvision_cpu import torchvision  # noqa: F401 - skips when it cannot import
    except ImportError as e:
        pytest.skip(f"torchvision: {e}")
    from kuiper_core.references.hooks import hook_snippet

    torch.manual_seed(0)
    module, x = mobilenet_v2()
    module = module.eval()
    _randomise_norms(module)
    torch.jit.trace(module, (x,)).save(str(tmp_path / "mnv2.pt"))
    namespace: dict = {}
    exec(hook_snippet(), namespace)
    namespace["save_references"](module, [x], str(tmp_path / "hooks.npz"))
    model = open_model(tmp_path / "mnv2.pt", cache_dir=cache)
    report = compare(model, [x.numpy()], reference=tmp_path / "hooks.npz")
    assert report.ok, report.summary()
    compared = {r.operator for r in report.rows}
    fused = [op.name for op in model.graph.operators if op.name.startswith("convbn")]
    assert len(fused) == 25 and set(fused) <= compared, report.summary()
    types = {op.outputs[0].name: op.type for op in model.graph.operators if op.outputs}
    assert {types[n] for n in report.unchecked} <= {"pnnx.Expression", "F.adaptive_avg_pool2d", "torch.flatten"}, (
        report.summary()
    )
    assert "pnnx fused 25 BatchNorm(s)" in report.summary()
