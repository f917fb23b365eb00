"""Export models to ncnn with the real `pnnx` converter, at fp32 and fp16 weights, with PyTorch's
outputs of the same module as the reference.

For each model NAME this writes into the output folder (default tests/data/ncnn):
  NAME.fp32.ncnn.param/.bin   pnnx ... fp16=0 (ncnn weights stored as fp32)
  NAME.fp16.ncnn.param/.bin   pnnx's default (ncnn weights stored as fp16)
  NAME.pnnx.param             the PNNX graph of the same conversion (what each ncnn layer came from)
  NAME.input.npy              the example input without its batch dim (ncnn's CHW blob)
  NAME.expected.npz           out0, … PyTorch's outputs of the module, without the batch dim

    python tools/export_ncnn.py                       # the committed set (COMMITTED)
    python tools/export_ncnn.py resnet18 --out /tmp/x # any model of MODELS

Needs torch and pnnx (the `export` extra). Seeds are fixed, so a re-export reproduces the files.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

OUT = ROOT / "tests" / "data" / "ncnn"


def _sample(name: str) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        from samples import all_samples

        return all_samples()[name].build()

    return build


def _torchvision(arch: str, size: int, **kwargs: Any) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch
        from torchvision_cpu import torchvision

        m = getattr(torchvision.models, arch)(**kwargs)
        from samples.common import randomize_batchnorm

        randomize_batchnorm(m, input_shape=(3, size, size))
        return m.eval(), torch.rand(1, 3, size, size)

    return build


def _encoder() -> tuple[Any, Any]:
    """nn.TransformerEncoder (2 layers, d=32, 4 heads, GELU, norm first) on (1, 10, 32)."""
    import torch
    from torch import nn

    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
    m = nn.Sequential(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), nn.Linear(32, 5))
    return m.eval(), torch.randn(1, 10, 32)


def _fpn_backbone() -> tuple[Any, Any]:
    """A detector's backbone: torchvision's MobileNetV3-small features (width 0.5) and an FPN
    neck (torchvision.ops.FeaturePyramidNetwork) over its strides 8, 16 and 32."""
    import torch
    from torch import nn
    from torchvision_cpu import torchvision
    from samples.common import randomize_batchnorm

    features = torchvision.models.mobilenet_v3_small(width_mult=0.5).features
    taps = (3, 8, 12)
    channels, x = [], torch.zeros(1, 3, 64, 64)
    for i, block in enumerate(features):
        x = block(x)
        if i in taps:
            channels.append(x.shape[1])

    class Backbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = features
            self.fpn = torchvision.ops.FeaturePyramidNetwork(channels, 32)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            found = {}
            for i, block in enumerate(self.features):
                x = block(x)
                if i in taps:
                    found[str(i)] = x
            return tuple(self.fpn(found).values())

    m = Backbone()
    randomize_batchnorm(m, input_shape=(3, 64, 64))
    return m.eval(), torch.rand(1, 3, 64, 64)


MODELS: dict[str, Callable[[], tuple[Any, Any]]] = {
    "tiny_mlp": _sample("tiny_mlp"),
    "digits_cnn": _sample("digits_cnn"),
    "expr_zoo": _sample("expr_zoo"),
    "vit_tiny": _sample("vit_tiny"),
    "unet": _sample("unet"),
    "mobilenetv3": _sample("mobilenetv3"),
    "yolov5s_mini": _sample("yolov5s_mini"),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small", 64, width_mult=0.5, num_classes=10),
    "resnet18": _torchvision("resnet18", 64),
    "encoder": _encoder,
    "fpn_backbone": _fpn_backbone,
}
# What tests/data/ncnn holds (small exports, about 3 MB together); the rest are exported by the
# slow tests when torch and pnnx are installed.
COMMITTED = ("tiny_mlp", "digits_cnn", "expr_zoo", "vit_tiny", "mobilenet_v3_small", "encoder", "fpn_backbone")
FP16_ONLY = ("fpn_backbone",)  # its fp32 .bin (1.1 MB) is left out of the committed set


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [value]


def export(name: str, out: Path, build: Callable[[], tuple[Any, Any]] | None = None) -> Path:
    """Convert MODELS[name] (or `build`) at fp32 and fp16; the files listed above, in `out`."""
    import pnnx
    import torch

    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    module, x = (build or MODELS[name])()
    module = module.eval()
    out.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        expected = [y.numpy() for y in _flat(module(x))]
    with tempfile.TemporaryDirectory() as tmp:
        pt = Path(tmp) / f"{name}.pt"
        torch.jit.trace(module, (x,)).save(str(pt))
        shape = "[" + ",".join(str(d) for d in x.shape) + "]"
        for tag, flag in (("fp32", "fp16=0"), ("fp16", "fp16=1")):
            res = subprocess.run(
                [pnnx.EXEC_PATH, pt.name, f"inputshape={shape}", flag], cwd=tmp, capture_output=True, text=True
            )
            param = Path(tmp) / f"{name}.ncnn.param"
            if not param.exists():
                raise RuntimeError(f"pnnx wrote no ncnn files for {name} ({res.returncode}): {res.stderr[-2000:]}")
            shutil.copy(param, out / f"{name}.{tag}.ncnn.param")
            shutil.copy(Path(tmp) / f"{name}.ncnn.bin", out / f"{name}.{tag}.ncnn.bin")
        shutil.copy(Path(tmp) / f"{name}.pnnx.param", out / f"{name}.pnnx.param")
    np.save(out / f"{name}.input.npy", x.numpy()[0])
    np.savez_compressed(out / f"{name}.expected.npz", **{f"out{i}": y[0] for i, y in enumerate(expected)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models (default: {', '.join(COMMITTED)}); any of {', '.join(MODELS)}")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    for name in args.names or COMMITTED:
        export(name, args.out)
        if not args.names and name in FP16_ONLY:
            for suffix in (".fp32.ncnn.param", ".fp32.ncnn.bin"):
                (args.out / f"{name}{suffix}").unlink()
        print(f"{name}: written to {args.out}")


if __name__ == "__main__":
    main()
