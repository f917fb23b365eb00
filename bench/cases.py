"""The benchmark's cases: every bundled model, converted afresh for all three engines.

For a case, `prepare` writes into its own folder:
  model.pnnx.param, model.pnnx.bin   pnnx's conversion (what kuiper_core runs)
  model_pnnx.py                      pnnx's generated PyTorch module (what PyTorch eager runs)
  model.onnx                         torch.onnx.export of the same torch module (onnxruntime)
  input.npy, expected.npz            the input, and the original torch module's outputs
  case.json                          name, input shape, operator count

pnnx's own `.pnnx.onnx` is not runnable, hence the separate torch.onnx.export. The torch
modules are tools/samples/ (the definitions sample_models/ was exported from), or for
`OUTSIDE_CASES` torchvision's.

`write_wide_param` makes the 10,000-operator `.param` the parser is timed on.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    name: str  # the case's name in the report
    sample: str  # tools/samples name, or a torchvision.models builder (source "torchvision")
    batch: int = 1
    source: str = "samples"


CASES = [
    Case("resnet18", "resnet18"),
    Case("resnet18_b4", "resnet18", batch=4),
    Case("mobilenetv3", "mobilenetv3"),
    Case("yolov5s_mini", "yolov5s_mini"),
    Case("unet", "unet"),
    Case("vit_tiny", "vit_tiny"),
    Case("expr_zoo", "expr_zoo"),
    Case("digits_cnn", "digits_cnn"),
    Case("tiny_mlp", "tiny_mlp"),
    Case("deep1500", "deep1500"),
]
# Models not in the project (`compare.py --suite outside`): torchvision's definitions with random
# weights (tools/torchvision_cpu.py), 1x3x224x224, converted by pnnx as a user would. Not
# RegNet: pnnx 20261020 writes its model_pnnx.py with names such as `block1-0_f_a_2` (a
# SyntaxError), so PyTorch cannot run pnnx's module for it (kuiper_core runs its .param).
OUTSIDE_CASES = [
    Case(name, name, source="torchvision")
    for name in (
        "resnet50",
        "mobilenet_v2",
        "mobilenet_v3_large",
        "efficientnet_b0",
        "densenet121",
        "convnext_tiny",
        "vit_b_16",
        "swin_t",
    )
]
PER_OPERATOR_CASE = "deep1500"  # per-operator overhead = its forward / its operator count
SMALL_LOAD_CASE = "digits_cnn"  # the "small model" of the load-time target


def prepare(case: Case, folder: Path) -> dict:
    """Convert the case's torch module with pnnx and torch.onnx; write the files listed above."""
    import numpy as np
    import pnnx
    import torch

    sys.path.insert(0, str(ROOT / "tools"))
    from samples import all_samples

    folder.mkdir(parents=True, exist_ok=True)
    # nn.MultiheadAttention's fast path makes torch.jit.trace's check run differ from the
    # trace (as in tools/export_samples.py); the slow path computes the same thing.
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    module, x = torchvision_model(case.sample) if case.source == "torchvision" else all_samples()[case.sample].build()
    module = module.eval()
    x = x.repeat(case.batch, *([1] * (x.dim() - 1))) if case.batch != 1 else x
    with torch.no_grad():
        y = module(x)
    outs = y if isinstance(y, (tuple, list)) else (y,)
    np.save(folder / "input.npy", x.numpy())
    np.savez(folder / "expected.npz", **{f"out{i}": t.numpy() for i, t in enumerate(outs)})

    pnnx.export(module, str(folder / "model.pt"), (x,))
    for f in ("model.pnnx.param", "model.pnnx.bin", "model_pnnx.py"):
        if not (folder / f).exists():
            raise RuntimeError(f"pnnx wrote no {f} for {case.name}")
    for junk in folder.glob("model.ncnn.*"):
        junk.unlink()
    torch.onnx.export(module, (x,), str(folder / "model.onnx"), dynamo=False, opset_version=17)
    torch.backends.mha.set_fastpath_enabled(True)

    lines = (folder / "model.pnnx.param").read_text().splitlines()
    meta = {
        "name": case.name,
        "sample": case.sample,
        "source": case.source,
        "batch": case.batch,
        "input_shape": list(x.shape),
        "operators": int(lines[1].split()[0]),
    }
    (folder / "case.json").write_text(json.dumps(meta))
    return meta


def torchvision_model(name: str) -> tuple[object, object]:
    """torchvision.models' `name` with random weights and a 1x3x224x224 input. A Linear left
    all zero by its initialisation (ViT's classifier head) gets random weights: an all-zero
    output would compare equal whatever the engine computes."""
    import torch
    from torchvision_cpu import torchvision

    module = getattr(torchvision.models, name)(weights=None)
    for m in module.modules():
        if isinstance(m, torch.nn.Linear) and not m.weight.any():
            torch.nn.init.normal_(m.weight, std=0.02)
    return module, torch.randn(1, 3, 224, 224)


def write_wide_param(path: Path, operators: int = 10_000) -> int:
    """A valid `.param` with `operators` operators: a chain of conv -> relu -> add blocks
    (the operator mix of deep1500, with params, weight shapes and operand shapes)."""
    lines = []
    n_ops = 0
    blob = 1  # next operand id

    def emit(line: str) -> None:
        nonlocal n_ops
        lines.append(line)
        n_ops += 1

    emit("pnnx.Input               pnnx_input_0             0 1 0 #0=(1,8,8,8)f32")
    prev = 0
    i = 0
    while n_ops < operators - 1:
        conv, relu = blob, blob + 1
        emit(
            f"nn.Conv2d                conv_{i}                 1 1 {prev} {conv} bias=True dilation=(1,1) groups=1 "
            f"in_channels=8 kernel_size=(3,3) out_channels=8 padding=(1,1) padding_mode=zeros stride=(1,1) "
            f"@bias=(8)f32 @weight=(8,8,3,3)f32 #{prev}=(1,8,8,8)f32 #{conv}=(1,8,8,8)f32"
        )
        emit(
            f"nn.ReLU                  relu_{i}                 1 1 {conv} {relu} #{conv}=(1,8,8,8)f32 #{relu}=(1,8,8,8)f32"
        )
        blob += 2
        if n_ops < operators - 1:
            emit(
                f"pnnx.Expression          add_{i}                  2 1 {relu} {prev} {blob} expr=add(@0,@1) "
                f"#{relu}=(1,8,8,8)f32 #{prev}=(1,8,8,8)f32 #{blob}=(1,8,8,8)f32"
            )
            relu = blob
            blob += 1
        prev = relu
        i += 1
    emit(f"pnnx.Output              pnnx_output_0            1 0 {prev} #{prev}=(1,8,8,8)f32")
    operands = blob
    path.write_text("7767517\n" + f"{n_ops} {operands}\n" + "\n".join(lines) + "\n")
    return n_ops
