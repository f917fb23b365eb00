"""A scripted TorchScript module whose forward takes an int (silero-vad's `forward(x, sr: int)`):
pnnx cannot give it that argument. The message leads with the converter's own reason (torch's
"forward() is missing value for argument 'sr.1'"), not C++ frames or a memory hint, and says
what to do (formats/scripted.py); a 0-d input for it is refused before pnnx runs, saying the same."""

from __future__ import annotations

from pathlib import Path

import pytest

import kuiper_core
from kuiper_core.errors import ConversionError
from kuiper_core.formats.convert import converter_available

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not converter_available(), reason="needs the pnnx converter"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]


class _Rate(torch.nn.Module):
    def forward(self, x: torch.Tensor, sr: int) -> torch.Tensor:
        if sr == 16000:
            return x * 2.0
        return x + 1.0


def _scripted(tmp_path: Path) -> Path:
    path = tmp_path / "rate.pt"
    torch.jit.script(_Rate()).save(str(path))
    return path


def test_an_int_argument_is_named_with_pnnxs_reason_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConversionError) as info:
        kuiper_core.load(_scripted(tmp_path), inputshape="[1,8]")
    head = str(info.value).split("\n")[0]
    reason = head.split("wrote no model: ", 1)[1]
    assert reason.startswith("what():") and "missing value for argument 'sr" in reason, head
    assert "the module's forward takes 'sr', which is no tensor" in head
    assert "torch.jit.trace" in head and "torch.onnx.export" in head
    assert "MiB" not in str(info.value) and "frame #" not in str(info.value)


def test_a_0d_value_for_it_is_refused_before_pnnx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConversionError) as info:
        kuiper_core.load(_scripted(tmp_path), inputshape="[1,8],[]i64")
    text = str(info.value)
    assert "gives a 0-d input, which the pnnx converter cannot give a TorchScript module" in text
    assert "forward() is missing value for argument" in text and "torch.jit.trace" in text
