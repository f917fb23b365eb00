"""Models not in the project through pnnx to ncnn, run by the engine against PyTorch and against
the ncnn binding: torchvision classifiers and segmenters, a detector-style deconv block, recurrent
heads, nn.Transformer, activations and resizes (issue 37's "checked on ncnn exports of models
that are not in the project"). For each: pnnx at fp32 and fp16 weights (tools/export_ncnn.py),
then the engine's output against PyTorch's (fp32 weights) and every output against ncnn's (both).

    python tools/check_ncnn_models.py                 # every case, table on stdout (~25 min)
    python tools/check_ncnn_models.py convnext_tiny lstm --out /tmp/nc

Needs torch, torchvision (tools/torchvision_cpu.py), pnnx and ncnn. Random weights, fixed seeds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from export_ncnn import _torchvision, export  # noqa: E402
from torch import nn  # noqa: E402

from kuiper_core import open_model  # noqa: E402
from kuiper_core.references.isolated import run_ncnn  # noqa: E402
from kuiper_core.references.ncnn_compare import rel_error  # noqa: E402


def seq(*mods: nn.Module, shape: tuple[int, ...]) -> Any:
    def build() -> tuple[nn.Module, torch.Tensor]:
        return nn.Sequential(*mods).eval(), torch.randn(*shape)

    return build


class RecurrentHead(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.rnn = getattr(nn, kind)(16, 24, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(48, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.fc(y)


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.t = nn.Transformer(32, 4, 1, 1, 64, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.t(x, x[:, :5])


def segmenter(arch: str, size: int) -> Any:
    def build() -> tuple[nn.Module, torch.Tensor]:
        from torchvision_cpu import torchvision

        m = getattr(torchvision.models.segmentation, arch)(weights=None, weights_backbone=None, num_classes=4)

        class Out(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = m

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.m(x)["out"]

        return Out().eval(), torch.rand(1, 3, size, size)

    return build


CASES: dict[str, Any] = {
    **{a: _torchvision(a, 64) for a in ("squeezenet1_1", "shufflenet_v2_x0_5", "mnasnet0_5", "mobilenet_v2")},
    **{a: _torchvision(a, 64) for a in ("efficientnet_b0", "densenet121", "regnet_x_400mf", "resnext50_32x4d")},
    "googlenet": _torchvision("googlenet", 64, aux_logits=False, init_weights=True),
    "convnext_tiny": _torchvision("convnext_tiny", 64),
    "swin_t": _torchvision("swin_t", 64),
    "lraspp": segmenter("lraspp_mobilenet_v3_large", 64),
    "deeplabv3_mbv3": segmenter("deeplabv3_mobilenet_v3_large", 64),
    "lstm": lambda: (RecurrentHead("LSTM").eval(), torch.randn(1, 7, 16)),
    "gru": lambda: (RecurrentHead("GRU").eval(), torch.randn(1, 7, 16)),
    "transformer": lambda: (Transformer().eval(), torch.randn(1, 9, 32)),
    "deconv_norms": seq(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ConvTranspose2d(8, 8, 4, 2, 1),
        nn.GroupNorm(2, 8),
        nn.PixelShuffle(2),
        nn.InstanceNorm2d(2, affine=True),
        nn.ELU(),
        shape=(1, 3, 10, 12),
    ),
    "activations": seq(
        nn.Conv2d(3, 6, 1),
        nn.SELU(),
        nn.Softplus(),
        nn.Mish(),
        nn.Tanh(),
        nn.Hardtanh(-0.5, 0.5),
        nn.LogSoftmax(1),
        shape=(1, 3, 6, 7),
    ),
    "resizes_pools": seq(
        nn.Upsample(scale_factor=2, mode="bilinear"),
        nn.AdaptiveAvgPool2d((3, 5)),
        nn.Upsample(size=(7, 9), mode="nearest"),
        nn.AvgPool2d(3, 2, 1, ceil_mode=True),
        nn.MaxPool2d(2, 1),
        shape=(1, 3, 11, 13),
    ),
}


def check(name: str, out: Path) -> str:
    """One table row: the engine against PyTorch (fp32 weights) and against ncnn (fp32, fp16)."""
    try:
        export(name, out, CASES[name])
    except Exception as e:  # noqa: BLE001 - a row says what stopped the case
        return f"| {name} | pnnx failed: {str(e).splitlines()[0][:120]} | | | |"
    x = np.load(out / f"{name}.input.npy")
    with np.load(out / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    cells = []
    for tag in ("fp32", "fp16"):
        param = out / f"{name}.{tag}.ncnn.param"
        try:
            model = open_model(param)
            ours = model.build().forward(x)
        except Exception as e:  # noqa: BLE001
            return f"| {name} | {type(e).__name__}: {str(e).splitlines()[0][:160]} | | | |"
        names = [op.inputs[0].name for op in model.graph.outputs]
        if tag == "fp32":
            cells.append(f"{max(rel_error(y, e) for y, e in zip(ours, expected)):.1e}")
        try:
            _, (theirs,) = run_ncnn([(param, param.with_suffix(".bin"), {})], {"in0": x}, names, 600)
            cells.append(f"{max(rel_error(y, theirs[n]) for y, n in zip(ours, names)):.1e}")
            if tag == "fp32":
                cells.append(f"{max(rel_error(theirs[n], e) for n, e in zip(names, expected)):.1e}")
        except Exception as e:  # noqa: BLE001
            cells.append(f"ncnn failed: {str(e).splitlines()[0][:80]}")
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"cases (default: all of {', '.join(CASES)})")
    ap.add_argument("--out", type=Path, help="keep the exports here (default: a temporary folder)")
    args = ap.parse_args()
    torch.manual_seed(0)
    print("| model | ours vs PyTorch (fp32) | ours vs ncnn (fp32) | ncnn vs PyTorch (fp32) | ours vs ncnn (fp16) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        base = args.out or Path(tmp)
        for name in args.names or CASES:
            print(check(name, base / name), flush=True)


if __name__ == "__main__":
    main()
