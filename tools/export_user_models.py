"""Write small real ONNX and TorchScript files of models nobody here wrote (torchvision's
classifiers and a segmentation net at reduced widths, torch's TransformerEncoder and LSTM),
the files a user would arrive with, for tests/test_user_models.py.

For each model NAME this writes into tests/data/user_models/ (or --out):
  NAME.onnx          torch.onnx.export (the TorchScript-based exporter, opset 17)
  NAME.pt            torch.jit.trace(...).save (the traced example input is recorded in it)
  NAME.input.npy     the example input (seeded)
  NAME.expected.npz  out0, out1, … the PyTorch module's outputs on it
and a manifest.json (input shape, file sizes, what each model is). Nothing here is the
engine's: the tests convert these with the real pnnx converter and compare against
PyTorch's and onnxruntime's numbers.

    python tools/export_user_models.py                 # the committed set
    python tools/export_user_models.py --all --out DIR # also the larger ones (not committed)
    python tools/export_user_models.py --full --out DIR  # full-size torchvision models (tools/check_user_models.py checks them)

Needs torch==2.13.0, torchvision (tools/torchvision_cpu.py) and onnx.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "user_models"
sys.path.insert(0, str(ROOT))


def _tv() -> Any:
    from tools.torchvision_cpu import torchvision

    return torchvision


# -- the models: name -> (build() -> (module, example input), description, committed) ------------
def squeezenet() -> tuple[Any, Any]:
    import torch

    m = _tv().models.squeezenet1_1(num_classes=10)
    return m, torch.randn(1, 3, 64, 64)


def mobilenet_v2() -> tuple[Any, Any]:
    import torch

    # torchvision's MobileNetV2 with its first five stages (the full seven: 1 MB at width 0.25)
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 2, 2], [6, 96, 1, 1]]
    m = _tv().models.MobileNetV2(num_classes=10, width_mult=0.25, inverted_residual_setting=setting)
    return m, torch.randn(1, 3, 32, 32)


def shufflenet() -> tuple[Any, Any]:
    import torch

    m = _tv().models.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10)
    return m, torch.randn(1, 3, 32, 32)


def efficientnet() -> tuple[Any, Any]:
    import torch
    from functools import partial

    ef = _tv().models.efficientnet
    conf = partial(ef.MBConvConfig, width_mult=0.25, depth_mult=0.34)
    setting = [
        conf(1, 3, 1, 32, 16, 1),
        conf(6, 3, 2, 16, 24, 2),
        conf(6, 5, 2, 24, 40, 2),
        conf(6, 3, 2, 40, 80, 3),
    ]
    m = ef.EfficientNet(setting, dropout=0.2, num_classes=10, last_channel=64)
    return m, torch.randn(1, 3, 32, 32)


def regnet() -> tuple[Any, Any]:
    import torch

    rn = _tv().models.regnet
    params = rn.BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    m = rn.RegNet(params, num_classes=10, stem_width=8)
    return m, torch.randn(1, 3, 32, 32)


def densenet() -> tuple[Any, Any]:
    import torch

    m = _tv().models.DenseNet(growth_rate=8, block_config=(2, 2, 2), num_init_features=16, bn_size=2, num_classes=10)
    return m, torch.randn(1, 3, 32, 32)


def googlenet() -> tuple[Any, Any]:
    import torch

    m = _tv().models.GoogLeNet(num_classes=10, aux_logits=False, init_weights=True)
    return m, torch.randn(1, 3, 64, 64)


def convnext() -> tuple[Any, Any]:
    import torch

    cn = _tv().models.convnext
    setting = [cn.CNBlockConfig(16, 32, 1), cn.CNBlockConfig(32, 64, 1), cn.CNBlockConfig(64, None, 1)]
    m = cn.ConvNeXt(setting, stochastic_depth_prob=0.0, num_classes=10)
    return m, torch.randn(1, 3, 32, 32)


def lraspp() -> tuple[Any, Any]:
    """torchvision's LR-ASPP segmentation head on a MobileNetV3 at a quarter width."""
    import torch

    tv = _tv()
    mv3 = tv.models.mobilenetv3
    setting, last = mv3._mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25, dilated=True)
    backbone = mv3.MobileNetV3(setting, last).features
    stage = [0] + [i for i, b in enumerate(backbone) if getattr(b, "_is_cn", False)] + [len(backbone) - 1]
    low, high = stage[-4], stage[-1]
    seg = tv.models.segmentation.lraspp
    body = tv.models._utils.IntermediateLayerGetter(backbone, {str(low): "low", str(high): "high"})
    m = seg.LRASPP(body, backbone[low].out_channels, backbone[high].out_channels, num_classes=3, inter_channels=32)
    return _OutOnly(m), torch.randn(1, 3, 64, 64)


def _OutOnly(model: Any) -> Any:  # noqa: N802 - reads as the module it makes
    """Segmentation models return {"out": tensor}: trace and export the tensor."""
    import torch.nn as nn

    class OutOnly(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.model = inner

        def forward(self, x):
            return self.model(x)["out"]

    return OutOnly(model)


def transformer() -> tuple[Any, Any]:
    import torch
    import torch.nn as nn

    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    m = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    return m, torch.randn(1, 10, 32)


def causal_decoder() -> tuple[Any, Any]:
    """nn.TransformerDecoder on its own input with nn.Transformer's causal tgt_mask: PyTorch
    traces its self-attention as SDPA(is_causal=True), which pnnx drops (formats/causal_attention.py)."""
    import torch
    import torch.nn as nn

    class CausalDecoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerDecoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
            self.decoder = nn.TransformerDecoder(layer, num_layers=2)
            self.head = nn.Linear(32, 16)

        def forward(self, x):
            mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
            return self.head(self.decoder(x, x, tgt_mask=mask))

    return CausalDecoder(), torch.randn(1, 9, 32)


def lstm() -> tuple[Any, Any]:
    import torch
    import torch.nn as nn

    class Tagger(nn.Module):
        """A two-layer LSTM and a linear head: a sequence tagger."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            self.fc = nn.Linear(32, 5)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.fc(y)

    return Tagger(), torch.randn(1, 12, 16)


def shifted() -> tuple[Any, Any]:
    """Swin's shifted windows in small: a convolution, torch.roll, a ReLU (pnnx writes the roll
    as tensor_split + cat, ONNX as Slice + Slice + Concat in another order)."""
    import torch
    import torch.nn as nn

    class Shifted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(torch.roll(self.conv(x), shifts=(3, 2), dims=(2, 3))) * 2

    return Shifted(), torch.randn(1, 3, 12, 12)


MODELS: dict[str, tuple[Callable[[], tuple[Any, Any]], str, bool]] = {
    "squeezenet": (squeezenet, "torchvision squeezenet1_1, 10 classes, 64x64", False),
    "mobilenet_v2": (mobilenet_v2, "torchvision MobileNetV2 (5 stages, width 0.25), 10 classes, 32x32", True),
    "shufflenet": (shufflenet, "torchvision ShuffleNetV2 (8-128 channels), 10 classes, 32x32", True),
    "efficientnet": (efficientnet, "torchvision EfficientNet (4 stages, width 0.25), 32x32", True),
    "regnet": (regnet, "torchvision RegNet (depth 4, w0 8, SE), 32x32", True),
    "densenet": (densenet, "torchvision DenseNet (growth 8, blocks 2-2-2), 32x32", True),
    "googlenet": (googlenet, "torchvision GoogLeNet (no aux), 10 classes, 64x64", False),
    "convnext": (convnext, "torchvision ConvNeXt (16-32-64 channels), 32x32", True),
    "lraspp": (lraspp, "torchvision LR-ASPP on MobileNetV3-small width 0.25: segmentation, 3 classes, 64x64", True),
    "transformer": (transformer, "torch nn.TransformerEncoder, 2 layers, d_model 32, 4 heads, 10 tokens", True),
    "causal_decoder": (
        causal_decoder,
        "torch nn.TransformerDecoder (2 layers, d_model 32) with a causal tgt_mask, 9 tokens",
        True,
    ),
    "lstm": (lstm, "torch nn.LSTM (2 layers, 16->32) and a Linear head, 12 steps", True),
    "shifted": (shifted, "a convolution and torch.roll (Swin's shifted windows), 12x12", True),
}


# Full-size models as users have them (random weights; tens of MB each: never committed), for
# tools/check_user_models.py checks full-size models the same way, through the CLI.
def _tv_model(builder: str, size: int = 224, **kwargs: Any) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch

        model = getattr(_tv().models, builder)(weights=None, **kwargs)
        return model, torch.randn(1, 3, size, size)

    return build


def _tv_segmentation(builder: str, size: int = 224) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch

        model = getattr(_tv().models.segmentation, builder)(weights=None, weights_backbone=None, num_classes=21)
        return _OutOnly(model), torch.randn(1, 3, size, size)

    return build


def _vit_small() -> tuple[Any, Any]:
    import torch

    vt = _tv().models.vision_transformer
    m = vt.VisionTransformer(image_size=64, patch_size=16, num_layers=4, num_heads=4, hidden_dim=128, mlp_dim=256)
    return m, torch.randn(1, 3, 64, 64)


def _encoder(batch_first: bool, norm_first: bool = False) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch
        import torch.nn as nn

        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=batch_first, norm_first=norm_first)
        m = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
        return m, torch.randn(1, 16, 64) if batch_first else torch.randn(16, 1, 64)

    return build


def _recurrent(kind: str, bidirectional: bool) -> Callable[[], tuple[Any, Any]]:
    def build() -> tuple[Any, Any]:
        import torch
        import torch.nn as nn

        class Seq(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.rnn = getattr(nn, kind)(32, 64, num_layers=2, batch_first=True, bidirectional=bidirectional)
                self.fc = nn.Linear(128 if bidirectional else 64, 10)

            def forward(self, x):
                y, _ = self.rnn(x)
                return self.fc(y[:, -1])

        return Seq(), torch.randn(1, 20, 32)

    return build


def _encoder_default() -> tuple[Any, Any]:
    """The encoder as its documentation writes it: every default (dim_feedforward 2048, dropout
    0.1, nested tensors on)."""
    import torch
    import torch.nn as nn

    layer = nn.TransformerEncoderLayer(d_model=128, nhead=8, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2), torch.randn(1, 24, 128)


def _lstm_module() -> tuple[Any, Any]:
    """nn.LSTM exported alone: three outputs (the sequence, h_n, c_n)."""
    import torch
    import torch.nn as nn

    return nn.LSTM(32, 64, num_layers=2, batch_first=True), torch.randn(1, 20, 32)


FULL: dict[str, tuple[Callable[[], tuple[Any, Any]], str, bool]] = {
    "squeezenet1_1": (_tv_model("squeezenet1_1"), "torchvision squeezenet1_1, 224x224", False),
    "shufflenet_v2_x1_0": (_tv_model("shufflenet_v2_x1_0"), "torchvision shufflenet_v2_x1_0, 224x224", False),
    "shufflenet_v2_x0_5": (_tv_model("shufflenet_v2_x0_5"), "torchvision shufflenet_v2_x0_5, 224x224", False),
    "mobilenet_v2_full": (_tv_model("mobilenet_v2"), "torchvision mobilenet_v2, 224x224", False),
    "mobilenet_v3_large": (_tv_model("mobilenet_v3_large"), "torchvision mobilenet_v3_large, 224x224", False),
    "efficientnet_b0": (_tv_model("efficientnet_b0"), "torchvision efficientnet_b0, 224x224", False),
    "regnet_y_400mf": (_tv_model("regnet_y_400mf"), "torchvision regnet_y_400mf, 224x224", False),
    "densenet121": (_tv_model("densenet121"), "torchvision densenet121, 224x224", False),
    "googlenet_full": (
        # as googlenet(weights=...) builds it: the input's per-channel rescale, no auxiliary heads
        _tv_model("googlenet", aux_logits=False, transform_input=True, init_weights=True),
        "torchvision googlenet (transform_input, as with weights), 224x224",
        False,
    ),
    "convnext_tiny": (_tv_model("convnext_tiny"), "torchvision convnext_tiny, 224x224", False),
    "resnet50": (_tv_model("resnet50"), "torchvision resnet50, 224x224", False),
    "vit_small": (_vit_small, "torchvision VisionTransformer (4 layers, 128 wide), 64x64", False),
    "lraspp_mobilenet_v3_large": (
        _tv_segmentation("lraspp_mobilenet_v3_large"),
        "torchvision LR-ASPP MobileNetV3-large, 224x224",
        False,
    ),
    "deeplabv3_mobilenet_v3_large": (
        _tv_segmentation("deeplabv3_mobilenet_v3_large"),
        "torchvision DeepLabV3 MobileNetV3-large, 224x224",
        False,
    ),
    "fcn_resnet50": (_tv_segmentation("fcn_resnet50", 160), "torchvision FCN ResNet-50, 160x160", False),
    "encoder_batch_first": (_encoder(True), "nn.TransformerEncoder, 3 layers, d 64, batch_first", False),
    "encoder_seq_first": (_encoder(False), "nn.TransformerEncoder, 3 layers, d 64, (seq, batch, d)", False),
    "encoder_norm_first": (_encoder(True, True), "nn.TransformerEncoder, norm_first", False),
    "encoder_default": (_encoder_default, "nn.TransformerEncoder as usually written (defaults), 2 layers", False),
    "lstm_module": (_lstm_module, "nn.LSTM alone (2 layers): outputs y, h, c", False),
    "lstm_bidirectional": (_recurrent("LSTM", True), "nn.LSTM 2 layers bidirectional + Linear", False),
    "gru": (_recurrent("GRU", False), "nn.GRU 2 layers + Linear", False),
}


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [v for item in value for v in _flatten(item)]
    return [value]


def export(name: str, out: Path, dynamo: bool = False) -> dict[str, Any]:
    """`dynamo`: the .onnx as torch.onnx.export writes it by default since torch 2.9 (the
    dynamo exporter, needs onnxscript; weights in NAME.onnx.data beside it)."""
    import torch

    build, description, _ = {**MODELS, **FULL}[name]
    torch.manual_seed(0)
    model, x = build()
    model = model.eval()
    _randomise_norms(model)
    with torch.no_grad():
        expected = [y.numpy() for y in _flatten(model(x))]
        traced = torch.jit.trace(model, (x,))
    traced.save(str(out / f"{name}.pt"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        if dynamo:
            torch.onnx.export(model, (x,), str(out / f"{name}.onnx"))
        else:
            torch.onnx.export(
                model, (x,), str(out / f"{name}.onnx"), dynamo=False, opset_version=17, input_names=["input"]
            )
    np.save(out / f"{name}.input.npy", x.numpy())
    np.savez(out / f"{name}.expected.npz", **{f"out{i}": y for i, y in enumerate(expected)})
    files = {p.name: p.stat().st_size for p in sorted(out.glob(f"{name}.*"))}
    return {"description": description, "input_shape": list(x.shape), "files": files}


def _randomise_norms(model: Any) -> None:
    """Fresh BatchNorms have mean 0, var 1: folding them would go untested. Seeded stats."""
    import torch

    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="models to export (default: the committed set)")
    ap.add_argument("--all", action="store_true", help="every model of the committed kind, the larger ones too")
    ap.add_argument("--full", action="store_true", help="the full-size models (tens of MB: use --out)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    known = {**MODELS, **FULL}
    unknown = set(args.names) - set(known)
    if unknown:
        ap.error(f"unknown model(s): {', '.join(sorted(unknown))}; known: {', '.join(known)}")
    if args.full and args.out == OUT:
        ap.error("--full models are large: give --out DIR (they are not committed)")
    names = args.names or (
        list(FULL) if args.full else [n for n, (_, _, committed) in MODELS.items() if committed or args.all]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    failed = []
    for name in names:
        try:
            manifest[name] = export(name, args.out)
        except Exception as e:  # report every model that fails, keep going
            failed.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        size = sum(manifest[name]["files"].values()) / 1024
        print(f"{name}: {size:.0f} KiB")
    ordered = {n: manifest[n] for n in known if n in manifest}
    manifest_path.write_text(json.dumps(ordered, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
