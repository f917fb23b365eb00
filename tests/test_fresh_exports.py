"""What fresh exports of models nobody here wrote showed (tools/check_fresh_exports.py,
docs/coverage.md "Fresh exports, both routes"), each on a small module made to need it: the
real pnnx converts, the engine runs, PyTorch's answer on the same input is the truth, and the
conversion check's verdict must say what the answer is."""

from __future__ import annotations

import pytest

from conftest import max_err_ok
from kuiper_core.formats import converter_available
from kuiper_core.references.conversion_check import open_model
from kuiper_core.formats.base import installed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (installed("torch") and converter_available()), reason="needs torch and pnnx"),
]


@pytest.mark.parametrize("batch", [3, 6])  # 6: the (B, S) mask has an (L, S) mask's shape
def test_a_folded_key_padding_mask_masks_keys_per_batch(batch: int, tmp_path) -> None:
    """A seq-first TransformerEncoder given a src_key_padding_mask (B, S) built in forward: pnnx
    folds it into `pnnx.Attribute pnnx_fold_key_padding_mask.1` and passes it to
    nn.MultiheadAttention as `$attn_mask`. Was: batch 3 refused ("attn_mask has shape (3, 6),
    expected (6, 6)"), batch 6 read as an (L, S) mask: 0.96 off PyTorch (the check said
    DISAGREES)."""
    import torch

    from tools.check_fresh_exports import MODELS  # (seq, batch, 16), the mask built in forward

    torch.manual_seed(0)
    model, (x,) = MODELS[f"encoder_padding_b{batch}"]()
    model = model.eval()
    with torch.no_grad():
        expected = model(x).numpy()
        torch.jit.trace(model, (x,)).save(str(tmp_path / "enc.pt"))
    m = open_model(tmp_path / "enc.pt", cache_dir=tmp_path / "cache", inputs=[x.numpy()])
    assert any(op.name.startswith("pnnx_fold_key_padding_mask") for op in m.graph.operators)
    (y,) = m.build().forward(x.numpy())
    ok, err, bound = max_err_ok(y, expected)
    assert ok, f"max error {err:.3g} > {bound:.3g}"
    assert m.check is not None and m.check.status == "agrees", m.check.text() if m.check else None


def test_bicubic_align_corners_at_a_fractional_length_is_onnxruntimes(tmp_path) -> None:
    """torch.onnx.export of F.interpolate(bicubic, align_corners=True, scale (0.6, 2.5)) on 6x9:
    pnnx keeps the Resize (formats/onnx_resize.py); the layer divided by 6·0.6 − 1 as
    onnx.reference does, where onnxruntime and torch divide by 3 − 1 (4.4 off, caught by the
    check). Now the answer agrees."""
    pytest.importorskip("onnxruntime")
    import torch
    import torch.nn.functional as F

    class Up(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=(0.6, 2.5), mode="bicubic", align_corners=True)

    x = torch.randn(2, 3, 6, 9, generator=torch.Generator().manual_seed(0))
    expected = Up()(x).numpy()
    torch.onnx.export(Up(), (x,), str(tmp_path / "up.onnx"), dynamo=False, opset_version=17)
    m = open_model(tmp_path / "up.onnx", cache_dir=tmp_path / "cache", inputs=[x.numpy()])
    (y,) = m.build().forward(x.numpy())
    ok, err, bound = max_err_ok(y, expected)
    assert ok, f"max error {err:.3g} > {bound:.3g}"
    assert m.check is not None and m.check.status == "agrees", m.check.text() if m.check else None
