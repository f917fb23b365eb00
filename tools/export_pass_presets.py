"""Export the models the Passes page and the pass tests start from, with the real pnnx
converter at optlevel 1 (the input the passes optimise) and 2 (pnnx's own optimisation,
kept for its operator count), into sample_models/passes/.

    conv_bn_relu   the seed's TVM Relay example: Conv(3→32, 3×3, stride 2) + BN + ReLU
    pass_zoo       a model built so that every pass has work at optlevel 1

For each NAME: NAME.o1.pnnx.param/.bin, NAME.o2.pnnx.param (operator count only),
NAME.input.npy and NAME.expected.npz (PyTorch's outputs of the torch module).

    python tools/export_pass_presets.py          # needs the `export` extra (torch + pnnx)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "sample_models" / "passes"
sys.path.insert(0, str(ROOT / "tools"))

from pnnx_export import export_module  # noqa: E402


def build_models():  # torch is imported here so the module docstring reads without it
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ConvBNReLU(nn.Module):
        """simplenet of seed 003: conv2d(channels=32, kernel 3, stride 2, padding 1) → batch_norm → relu."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(32, eps=1e-5)

        def forward(self, x):
            return F.relu(self.bn(self.conv(x)))

    class PassZoo(nn.Module):
        """Every pass has something to do on its optlevel-1 export (see the comments)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=0)  # after a zero pad: FoldPadIntoConv
            self.bn1 = nn.BatchNorm2d(8)  # FoldBatchNorm (Conv)
            self.shared = nn.Conv2d(8, 8, 1)  # called twice on one input: EliminateCommonSubexpr
            self.up = nn.ConvTranspose2d(8, 6, 2, stride=2, groups=2)
            self.bn2 = nn.BatchNorm2d(6)  # FoldBatchNorm (ConvTranspose, groups)
            self.conv2 = nn.Conv2d(6, 6, 3, padding=0, padding_mode="zeros")
            self.drop = nn.Dropout(0.3)  # RemoveNoOps
            self.ident = nn.Identity()
            self.log_scale = nn.Parameter(torch.randn(1, 6, 1, 1) * 0.1)  # exp(): FoldConstants
            self.mix = nn.Parameter(torch.randn(6, 6))  # softmax of a weight: FoldConstants
            self.fw = nn.Parameter(torch.randn(6, 6, 3, 3) * 0.2)  # F.conv2d of a weight: FoldStaticWeights
            self.register_buffer("rm", torch.rand(6) - 0.5)
            self.register_buffer("rv", torch.rand(6) + 0.5)
            self.fc = nn.Linear(4 * 4 * 4, 16)
            self.bn3 = nn.BatchNorm1d(16)  # FoldBatchNorm (Linear)
            self.head = nn.Linear(16, 5)

        def forward(self, x):
            x = self.conv1(F.pad(x, (1, 1, 1, 1)))
            x = F.relu(self.bn1(x))
            a = self.shared(x)
            b = self.shared(x)
            x = a + b  # the same conv twice
            x = x[:, :, :, :]  # full slice
            x = torch.cat([x], dim=1)  # one-input cat
            x = F.interpolate(x, scale_factor=1.0, mode="nearest")  # ×1 upsample
            x = self.up(x)
            x = self.bn2(x)
            x = F.pad(x, (1, 1, 1, 1), mode="reflect")
            x = self.conv2(x)  # reflect pad folds in as padding_mode
            x = self.ident(self.drop(x))
            x = F.batch_norm(F.conv2d(x, self.fw, None, padding=1), self.rm, self.rv, None, None, False, 0.1, 1e-5)
            x = x * torch.exp(self.log_scale)  # a constant part of an expression
            x = x.reshape(x.size(0), x.size(1), x.size(2), x.size(3))  # same-shape reshape
            t = x.permute(0, 2, 3, 1)
            x = t.permute(0, 3, 1, 2)  # cancelling permutes
            w = torch.softmax(self.mix, dim=0)  # constant subgraph
            x = (x.permute(0, 2, 3, 1) @ w).permute(0, 3, 1, 2)
            p, q, r = x[:, :2], x[:, 2:4], x[:, 4:]  # slices that tile dim 1: FuseSlicesToSplit
            e = torch.exp(p) * torch.exp(p)  # one expression with a repeated subtree
            y = torch.cat([e, torch.tanh(q + r)], dim=1)
            y = torch.relu(y * 1.0 + 0.0)  # x*1, x+0, then relu fuses into the expression
            y = torch.tanh(y)
            y = F.adaptive_avg_pool2d(y, 4)
            y = y.reshape(y.size(0), -1).reshape(y.size(0), 4, -1).reshape(y.size(0), -1)  # reshape of reshape
            y = self.bn3(self.fc(y))
            return self.head(F.relu(y))

    torch.manual_seed(0)
    zoo = PassZoo()
    with torch.no_grad():  # non-trivial BN statistics, so folding them matters
        for bn in (zoo.bn1, zoo.bn2, zoo.bn3):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    seed = ConvBNReLU()
    with torch.no_grad():
        seed.bn.running_mean.uniform_(-0.5, 0.5)
        seed.bn.running_var.uniform_(0.5, 2.0)
        seed.bn.weight.uniform_(-1, 1)  # the seed draws gamma/beta from U(-1, 1)
        seed.bn.bias.uniform_(-1, 1)
    return {
        "conv_bn_relu": (seed, torch.rand(1, 3, 32, 32) * 2 - 1),
        "pass_zoo": (zoo, torch.randn(1, 3, 8, 8)),
    }


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (module, x) in build_models().items():
        with tempfile.TemporaryDirectory() as tmp:
            for level in (1, 2):
                d = Path(tmp) / f"o{level}"
                export_module(module.eval(), [x], d, name=name, capture_operands=False, optlevel=level)
                shutil.copy(d / f"{name}.pnnx.param", OUT / f"{name}.o{level}.pnnx.param")
                if level == 1:
                    shutil.copy(d / f"{name}.pnnx.bin", OUT / f"{name}.o1.pnnx.bin")
                    with np.load(d / "inputs.npz") as z:
                        np.save(OUT / f"{name}.input.npy", z["in0"])
                    shutil.copy(d / "expected.npz", OUT / f"{name}.expected.npz")
        n1 = int((OUT / f"{name}.o1.pnnx.param").read_text().split("\n")[1].split()[0])
        n2 = int((OUT / f"{name}.o2.pnnx.param").read_text().split("\n")[1].split()[0])
        print(f"ok {name}: optlevel 1 has {n1} operators, pnnx's optlevel 2 {n2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
