"""Export the models the graph passes are checked on, with the real pnnx converter at
optlevel 1 (what the passes optimise) and 2 (pnnx's own optimisation, for its operator
count), each with its input and PyTorch's outputs.

Presets (the Passes page's, into sample_models/passes/):
    conv_bn_relu   the seed's TVM Relay example: Conv(3→32, 3×3, stride 2) + BN + ReLU
    pass_zoo       a model built so that every pass has work at optlevel 1
  files: NAME.o1.pnnx.param/.bin, NAME.o2.pnnx.param, NAME.input.npy, NAME.expected.npz

Cases (into tests/data/passes/NAME/): small models in the styles people write — manual
attention, ShuffleNet's shuffle, a hand-written LayerNorm, nn.TransformerEncoderLayer,
GRU and LSTM, squeeze-excitation, pixel-shuffle super-resolution, an MLP on a view,
depthwise + ConvTranspose with BN, functional layers with parameter weights.
  files: o1/model.pnnx.param/.bin, o1/inputs.npz, o1/expected.npz, o2/model.pnnx.param

More cases in tools/pass_style_cases.py (MobileNetV2, Focus, pads, no-ops, RMSNorm, …).

    python tools/export_pass_models.py [presets|cases|NAME…]   # needs the `export` extra (torch + pnnx)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "sample_models" / "passes"
CASES_OUT = ROOT / "tests" / "data" / "passes"
sys.path.insert(0, str(ROOT / "tools"))

from pass_style_cases import PNNX_O2_WRONG, build_style_cases  # noqa: E402
from pnnx_export import export_module  # noqa: E402


def build_presets():  # torch is imported here so the module docstring reads without it
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
            n, c, h, w = x.shape
            x = x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)  # channel shuffle: FusePatterns
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
            p, q, r = x[:, :2], x[:, 2:4], x[:, 4:]  # slices that tile dim 1: FuseSlices
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


def build_cases():
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        """A ViT block's attention written out: qkv[0], qkv[1], qkv[2], q @ k^T, softmax."""

        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.proj, self.ln = nn.Linear(16, 48), nn.Linear(16, 16), nn.LayerNorm(16)

        def forward(self, x):
            b, n, c = x.shape
            qkv = self.qkv(self.ln(x)).reshape(b, n, 3, 2, c // 2).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = ((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // 2))).softmax(dim=-1)
            return x + self.proj((a @ v).transpose(1, 2).reshape(b, n, c))

    class Shuffle(nn.Module):
        """ShuffleNet v2 unit: group conv, BN, the reshape-transpose-reshape shuffle, chunk."""

        def __init__(self) -> None:
            super().__init__()
            self.c1, self.bn = nn.Conv2d(8, 8, 1, groups=2), nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)

        def forward(self, x):
            x = F.relu(self.bn(self.c1(x)))
            b, c, h, w = x.shape
            x = x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
            a, b2 = x.chunk(2, dim=1)
            return torch.cat([a, self.c2(x)[:, :4] + b2], 1)

    class ManualLayerNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w, self.b, self.fc = nn.Parameter(torch.ones(16)), nn.Parameter(torch.zeros(16)), nn.Linear(16, 16)

        def forward(self, x):
            u = x.mean(-1, keepdim=True)
            v = (x - u).pow(2).mean(-1, keepdim=True)
            x = self.w * ((x - u) / torch.sqrt(v + 1e-6)) + self.b
            return F.gelu(self.fc(x)) * torch.sigmoid(x)

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)

        def forward(self, x):
            return self.layer(x)

    class GRUHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru, self.fc, self.drop = nn.GRU(8, 12, batch_first=True), nn.Linear(12, 3), nn.Dropout(0.2)

        def forward(self, x):
            y, _ = self.gru(x)
            return self.fc(self.drop(y[:, -1]))

    class LSTMHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e, self.lstm, self.h = nn.Linear(4, 8), nn.LSTM(8, 8, num_layers=2, batch_first=True), nn.Linear(8, 2)

        def forward(self, x):
            y, _ = self.lstm(torch.tanh(self.e(x)))
            return self.h(y[:, -1, :]) * 2 + 1

    class SqueezeExcite(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c, self.bn = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.f1, self.f2 = nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)

        def forward(self, x):
            y = F.relu6(self.bn(self.c(x)))
            return x + y * torch.sigmoid(self.f2(F.relu(self.f1(F.adaptive_avg_pool2d(y, 1)))))

    class SuperResolution(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c, self.ps = nn.Conv2d(3, 12, 3, padding=1), nn.PixelShuffle(2)

        def forward(self, x):
            up = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            return torch.clamp(self.ps(self.c(x)) + up, 0, 1)

    class ViewMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.bn, self.b = nn.Linear(12, 24), nn.BatchNorm1d(24), nn.Linear(24, 4)

        def forward(self, x):
            x = F.leaky_relu(self.bn(self.a(x.view(x.size(0), -1))), 0.1)
            return F.log_softmax(self.b(F.dropout(x, 0.5, training=False)), dim=1)

    class DepthwiseUp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dw, self.b1 = nn.Conv2d(6, 6, 3, padding=1, groups=6, bias=False), nn.BatchNorm2d(6)
            self.pw, self.b2 = nn.Conv2d(6, 12, 1, bias=False), nn.BatchNorm2d(12)
            self.up, self.b3 = nn.ConvTranspose2d(12, 4, 4, stride=2, padding=1), nn.BatchNorm2d(4)

        def forward(self, x):
            x = self.b2(self.pw(F.hardswish(self.b1(self.dw(x)))))
            a, b = x.split([6, 6], dim=1)
            return F.relu(self.b3(self.up(torch.cat([b, a], 1) + a.repeat(1, 2, 1, 1))))

    class FunctionalWeights(nn.Module):
        """F.conv2d / F.batch_norm / F.conv_transpose2d on parameters, F.*_norm without."""

        def __init__(self) -> None:
            super().__init__()
            self.w, self.b = nn.Parameter(torch.randn(8, 3, 3, 3)), nn.Parameter(torch.randn(8))
            self.g, self.beta = nn.Parameter(torch.randn(8)), nn.Parameter(torch.randn(8))
            self.register_buffer("rm", torch.randn(8))
            self.register_buffer("rv", torch.rand(8) + 0.5)
            self.tw = nn.Parameter(torch.randn(8, 4, 2, 2))

        def forward(self, x):
            x = F.batch_norm(
                F.conv2d(x, self.w, self.b, padding=1), self.rm, self.rv, self.g, self.beta, False, 0.1, 1e-5
            )
            x = F.group_norm(F.conv_transpose2d(x, self.tw, None, stride=2), 2)
            return F.layer_norm(x.mean(dim=(2, 3)), (4,))

    # nn.MultiheadAttention's fast path makes the trace check fail (tools/export_samples.py does the same).
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    cases = {
        "attention": (Attention(), torch.randn(1, 5, 16)),
        "shuffle": (Shuffle(), torch.randn(1, 8, 6, 6)),
        "manual_layernorm": (ManualLayerNorm(), torch.randn(1, 4, 16)),
        "encoder": (Encoder(), torch.randn(1, 5, 16)),
        "gru": (GRUHead(), torch.randn(1, 7, 8)),
        "lstm": (LSTMHead(), torch.randn(1, 6, 4)),
        "squeeze_excite": (SqueezeExcite(), torch.randn(1, 8, 6, 6)),
        "super_resolution": (SuperResolution(), torch.rand(1, 3, 5, 5)),
        "view_mlp": (ViewMLP(), torch.randn(1, 3, 4)),
        "depthwise_up": (DepthwiseUp(), torch.randn(1, 6, 6, 6)),
        "functional_weights": (FunctionalWeights(), torch.randn(1, 3, 8, 8)),
    }
    with torch.no_grad():  # BN statistics that make folding matter
        for module, _ in cases.values():
            for m in module.modules():
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
    return cases


def _export_levels(module, x, name: str) -> tuple[Path, Path]:
    """Export at optlevel 1 and 2 into a temporary folder; returns the two folders. `x`:
    one input tensor or a list of them."""
    tmp = Path(tempfile.mkdtemp(prefix=f"kx_pass_{name}_"))
    for level in (1, 2):
        export_module(
            module.eval(),
            x if isinstance(x, list) else [x],
            tmp / f"o{level}",
            name=name,
            capture_operands=False,
            optlevel=level,
        )
    return tmp / "o1", tmp / "o2"


def _count(param: Path) -> int:
    return int(param.read_text().split("\n")[1].split()[0])


def main(argv: list[str] | None = None) -> int:
    which = set(argv if argv is not None else sys.argv[1:]) or {"presets", "cases"}
    if "presets" in which:
        OUT.mkdir(parents=True, exist_ok=True)
        for name, (module, x) in build_presets().items():
            o1, o2 = _export_levels(module, x, name)
            shutil.copy(o1 / f"{name}.pnnx.param", OUT / f"{name}.o1.pnnx.param")
            shutil.copy(o1 / f"{name}.pnnx.bin", OUT / f"{name}.o1.pnnx.bin")
            shutil.copy(o2 / f"{name}.pnnx.param", OUT / f"{name}.o2.pnnx.param")
            with np.load(o1 / "inputs.npz") as z:
                np.save(OUT / f"{name}.input.npy", z["in0"])
            shutil.copy(o1 / "expected.npz", OUT / f"{name}.expected.npz")
            shutil.rmtree(o1.parent)
            print(
                f"ok {name}: optlevel 1 has {_count(OUT / f'{name}.o1.pnnx.param')} operators, "
                f"pnnx's optlevel 2 {_count(OUT / f'{name}.o2.pnnx.param')}"
            )
    cases = {**build_cases(), **build_style_cases()}
    for name, (module, x) in cases.items():
        if "cases" not in which and name not in which:
            continue
        o1, o2 = _export_levels(module, x, name)
        dest = CASES_OUT / name
        for level, src in ((1, o1), (2, o2)):
            (dest / f"o{level}").mkdir(parents=True, exist_ok=True)
            shutil.copy(src / f"{name}.pnnx.param", dest / f"o{level}" / "model.pnnx.param")
        shutil.copy(o1 / f"{name}.pnnx.bin", dest / "o1" / "model.pnnx.bin")
        if name in PNNX_O2_WRONG:  # the test runs pnnx's optlevel 2 to show it is wrong
            shutil.copy(o2 / f"{name}.pnnx.bin", dest / "o2" / "model.pnnx.bin")
            (dest / "PNNX_O2_WRONG").write_text(PNNX_O2_WRONG[name] + "\n")
        for f in ("inputs.npz", "expected.npz"):
            shutil.copy(o1 / f, dest / "o1" / f)
        shutil.rmtree(o1.parent)
        print(
            f"ok {name}: optlevel 1 has {_count(dest / 'o1' / 'model.pnnx.param')} operators, "
            f"pnnx's optlevel 2 {_count(dest / 'o2' / 'model.pnnx.param')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
