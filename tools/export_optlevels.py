"""Export small models at every pnnx optlevel (0, 1, 2) and dynamic-shape, for the tests.

pnnx's converter has three optimisation levels; people export at 0 or 1 to debug a
conversion, and an export with `inputshape2` (dynamic shapes) looks like level 1. Each model
here is one of the bundled sample architectures (tools/samples/) at a reduced size, so the
files stay small (a few hundred KB at most), plus a tiny CNN whose flatten gets its
`start_dim` as an operand at optlevel 1. For every MODEL and LEVEL this writes

  tests/data/optlevel/MODEL/LEVEL/model.pnnx.param, model.pnnx.bin   what pnnx wrote
                                 inputs.npz, expected.npz               in0…, out0… (PyTorch)
                                 operands.npz                           pnnx's *_pnnx.py operands,
                                                                        when under 200 KB
  LEVEL: o0, o1, o2 (optlevel=0/1/2) and dyn (optlevel 2 with inputshape2: `?` dims and
  shape arithmetic kept). A dyn folder also holds inputs_K.npz and expected_K.npz for
  K = 1, 2, …: other input sizes (the inputshape2 one, then sizes pnnx never saw).

A converter failure is reported and the export goes on with the next model and level.
tests/data/optlevel/README.md describes the models and what pnnx does at each level.

    python tools/export_optlevels.py                  # every model and level
    python tools/export_optlevels.py resnet18 -l o0   # only these
    python tools/export_optlevels.py --out /tmp/x     # somewhere else (e.g. to try a model)

Needs the `export` extra (torch==2.13.0 + pnnx). Seeds are fixed: a re-export reproduces
the same weights and inputs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from pnnx_export import export_module  # noqa: E402

OUT = ROOT / "tests" / "data" / "optlevel"
LEVELS = {"o0": 0, "o1": 1, "o2": 2}
MAX_OPERANDS_BYTES = 200 * 1024


@dataclass
class OptModel:
    """A small model: build() -> (module in eval mode, example input)."""

    build: Callable[[], tuple[Any, Any]]
    about: str
    # Dynamic shape: the second shape given to pnnx (inputshape2) and further shapes to
    # check at run time (PyTorch's outputs recorded for each). None: no dyn export.
    shape2: tuple[int, ...] | None = None
    more_shapes: list[tuple[int, ...]] = field(default_factory=list)


def _tiny_cnn() -> tuple[Any, Any]:
    import torch
    import torch.nn as nn

    class TinyCNN(nn.Module):
        """conv -> relu -> pool -> flatten -> linear: flatten(1) of a (1,4,2,2) map is (1,16)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))

    torch.manual_seed(11)
    return TinyCNN().eval(), torch.randn(1, 1, 4, 4)


def _sample(make: str, seed: int, shape: tuple[int, ...], *, bn_batch: int | None = 4, uniform: bool = False,
            **kwargs: Any) -> Callable[[], tuple[Any, Any]]:
    """A builder for the sample architecture `module.Class` of tools/samples with these
    constructor arguments (a reduced size), its BatchNorms calibrated on random data
    (`bn_batch` items a pass; None: none), and an example input of `shape`."""

    def build() -> tuple[Any, Any]:
        import importlib

        import torch
        from samples.common import randomize_batchnorm

        torch.backends.mha.set_fastpath_enabled(False)  # see export_samples.py
        module, cls = make.rsplit(".", 1)
        torch.manual_seed(seed)
        m = getattr(importlib.import_module(f"samples.{module}"), cls)(**kwargs)
        if bn_batch:
            randomize_batchnorm(m, batches=2, batch_size=bn_batch, input_shape=shape[1:])
        return m.eval(), (torch.rand if uniform else torch.randn)(*shape)

    return build


MODELS: dict[str, OptModel] = {
    "tiny_cnn": OptModel(_tiny_cnn, "conv, relu, max pool, flatten(1) to (1,16), linear (the flatten regression)",
                         shape2=(3, 1, 4, 4), more_shapes=[(5, 1, 4, 4)]),
    "digits_cnn": OptModel(_sample("digits.DigitsCNN", 1, (1, 1, 8, 8), uniform=True),
                           "digits_cnn's architecture, untrained (conv+BN, pool, dropout, softmax)",
                           shape2=(4, 1, 8, 8), more_shapes=[(2, 1, 8, 8)]),
    "tiny_mlp": OptModel(_sample("digits.TinyMLP", 2, (1, 1, 8, 8), bn_batch=None, uniform=True),
                         "tiny_mlp's architecture, untrained"),
    "resnet18": OptModel(_sample("resnet.ResNet18", 18, (1, 3, 32, 32), num_classes=10, width=4),
                         "ResNet-18 layout at width 4 (stages of 4/8/16/32 channels), 32x32, 10 classes",
                         shape2=(1, 3, 48, 48), more_shapes=[(2, 3, 40, 56)]),
    "mobilenetv3": OptModel(_sample("mobilenet.MobileNetV3Small", 3, (1, 3, 32, 32), bn_batch=8, num_classes=10,
                                    last_channel=32, width=0.125),
                            "MobileNetV3-Small at width 0.125, 32x32, 10 classes",
                            shape2=(1, 3, 64, 64), more_shapes=[(1, 3, 48, 40)]),
    "unet": OptModel(_sample("unet.UNet", 4, (1, 3, 32, 32), base=4), "the sample UNet at base width 4, 32x32",
                     shape2=(1, 3, 48, 48), more_shapes=[(2, 3, 40, 24)]),
    "yolov5s_mini": OptModel(_sample("yolo.YoloV5Mini", 5, (1, 3, 64, 64), width=2, size=64),
                             "the YOLOv5-style detector at width 2, 64x64 (grids fixed: no dyn)"),
    "vit_tiny": OptModel(_sample("vit.ViTTiny", 6, (1, 3, 16, 16), bn_batch=None, img=16, patch=4, dim=16, depth=2,
                                 heads=2),
                         "the tiny ViT at dim 16, depth 2, 2 heads, 16x16 (position table fixed: no dyn)"),
    "expr_zoo": OptModel(_sample("expr_zoo.ExprZoo", 7, (1, 3, 8, 8), bn_batch=None), "the expression zoo at 8x8",
                         shape2=(1, 3, 12, 12), more_shapes=[(2, 3, 6, 10)]),
    "deep": OptModel(_sample("deep.Deep", 8, (1, 3, 16, 16), blocks=3, ch=4),
                     "deep1500's residual block, 3 blocks of 4 channels, 16x16",
                     shape2=(1, 3, 24, 24), more_shapes=[(3, 3, 8, 20)]),
}


def _export(name: str, spec: OptModel, level: str, dest: Path) -> None:
    import torch

    module, x = spec.build()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if level == "dyn":
            assert spec.shape2 is not None
            export_module(module, [x], tmp_path, optlevel=2, inputshape2=[spec.shape2])
        else:
            export_module(module, [x], tmp_path, optlevel=LEVELS[level])
        ops = tmp_path / "operands.npz"
        if ops.exists() and ops.stat().st_size > MAX_OPERANDS_BYTES:
            ops.unlink()
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(tmp_path, dest)
    if level == "dyn":
        gen = torch.Generator().manual_seed(99)
        for k, shape in enumerate([spec.shape2, *spec.more_shapes], start=1):
            xk = torch.randn(*shape, generator=gen, dtype=x.dtype)
            with torch.no_grad():
                ys = module(xk)
            ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
            np.savez(dest / f"inputs_{k}.npz", in0=xk.numpy())
            np.savez(dest / f"expected_{k}.npz", **{f"out{i}": y.numpy() for i, y in enumerate(ys)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help=f"models to export (default: all of {', '.join(MODELS)})")
    ap.add_argument("-l", "--levels", nargs="*", default=[*LEVELS, "dyn"], help="levels: o0 o1 o2 dyn")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    unknown = set(args.models) - set(MODELS)
    if unknown:
        ap.error(f"unknown model(s) {sorted(unknown)}; known: {', '.join(MODELS)}")

    failures: list[str] = []
    for name in args.models or list(MODELS):
        spec = MODELS[name]
        for level in args.levels:
            if level == "dyn" and spec.shape2 is None:
                continue
            dest = args.out / name / level
            try:
                _export(name, spec, level, dest)
                print(f"ok   {name}/{level}")
            except Exception as e:  # a converter failure: record it, go on
                failures.append(f"- {name}/{level}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}")
                print(f"FAIL {name}/{level}\n{traceback.format_exc()}", file=sys.stderr)
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
