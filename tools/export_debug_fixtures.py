"""Export the "your own model" fixtures of the app's debugging tests into tests/data/debug_models/.

A small conv net as a user would bring it (Conv2d + BatchNorm2d that pnnx fuses, a ReLU module
called twice, a nested block, a linear head), seeded, written as:
  small_cnn.pt                       TorchScript (torch.jit.trace: it records the example input's shape)
  small_cnn_untraced.pt              the same without the recorded example input (as older torch
                                     wrote it): pnnx needs its inputshape
  small_cnn.onnx                     ONNX (opset 17), what `pnnx model.onnx` reads
  small_cnn.pnnx.param, .pnnx.bin    the real pnnx converter's output of small_cnn.pt (optlevel 2)
  small_cnn.input.npy                the example input
  small_cnn.operands.npz             every operand, computed by pnnx's generated small_cnn_pnnx.py
  small_cnn.hooks.npz                every module's output keyed by module path, written by
                                     kuiper_core.references.hooks.hook_snippet() (what the app shows)

    python tools/export_debug_fixtures.py

Needs torch, pnnx and onnx (the `export` extra). Fixed seeds: a re-export reproduces the files
(the .pt files but for TorchScript's debug records: a random serialization id, source paths).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "data" / "debug_models"


def build():
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, ch: int) -> None:
            super().__init__()
            self.conv = nn.Conv2d(ch, ch, 3, padding=1)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.conv(x)) + x

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()  # called twice: pnnx names the second call pnnx_unique_N
            self.pool = nn.MaxPool2d(2)
            self.block = Block(8)
            self.fc = nn.Linear(8 * 8 * 8, 10)

        def forward(self, x):
            x = self.pool(self.relu(self.bn1(self.conv1(x))))
            x = self.relu(self.block(x))
            return self.fc(torch.flatten(x, 1))

    torch.manual_seed(22)
    model = SmallCNN()
    with torch.no_grad():
        model.bn1.weight.uniform_(0.5, 1.5)
        model.bn1.bias.uniform_(-0.2, 0.2)
        model.bn1.running_mean.uniform_(-0.1, 0.1)
        model.bn1.running_var.uniform_(0.5, 1.5)
    return model.eval(), torch.randn(1, 3, 16, 16)


def _without_traced_inputs(src: Path, dst: Path) -> None:
    """A copy of a traced TorchScript zip without traced_inputs*: no input shapes recorded."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if "/traced_inputs" not in info.filename:
                zout.writestr(info, zin.read(info.filename))


def main() -> int:
    import torch

    from kuiper_core.references.hooks import hook_snippet
    from pnnx_export import export_module

    OUT.mkdir(parents=True, exist_ok=True)
    model, x = build()
    name = "small_cnn"
    np.save(OUT / f"{name}.input.npy", x.numpy())
    torch.jit.trace(model, (x,)).save(str(OUT / f"{name}.pt"))
    _without_traced_inputs(OUT / f"{name}.pt", OUT / f"{name}_untraced.pt")
    torch.onnx.export(
        model, (x,), str(OUT / f"{name}.onnx"), dynamo=False, opset_version=17, input_names=["x"], output_names=["y"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        export_module(model, [x], tmp, name=name)
        for suffix in (".pnnx.param", ".pnnx.bin"):
            shutil.copy(Path(tmp) / f"{name}{suffix}", OUT / f"{name}{suffix}")
        shutil.copy(Path(tmp) / "operands.npz", OUT / f"{name}.operands.npz")
    namespace: dict = {}
    exec(hook_snippet(), namespace)  # the snippet the app shows, exactly
    namespace["save_references"](model, [x], str(OUT / f"{name}.hooks.npz"))
    for p in sorted(OUT.glob(f"{name}*")):
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
