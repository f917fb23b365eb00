"""Export small models in the styles of torchvision's and torch.nn's bigger ones (issue 25) with
the real pnnx converter at optlevel 0, 1 and 2, for tests/test_models_styles.py:

    swin_v2         the same with Swin V2's blocks (swin_v2_t's): torch.clone, aten::zero
    swin            torchvision's SwinTransformer at a small size (embed 16, depths 2+2, 4x4
                    windows on a 32x32 image): shifted windows, their mask built from
                    new_zeros/slices/fill/copy/masked_fill at optlevel 0/1, the relative
                    position bias; pnnx's optlevel 2 writes nn.MultiheadAttention $input $attn_mask
    maxvit          torchvision's MaxVit at 2 small stages: einsum equations that pnnx writes
                    with spaces in them at optlevel 0/1
    conv3d_stem     r3d_18's stem and first stage at 8 channels: nn.Conv3d + BatchNorm3d, and
                    torchvision's Conv3DSimple (a subclass of nn.Conv3d), which pnnx writes as
                    F.conv3d at optlevel 0/1
    ssdlite_head    ssdlite320_mobilenet_v3_large's backbone and extra blocks (width 0.25) and SSDLite head on a
                    160x160 image: the box regression and class logits (no post-processing)
    detection_post  torchvision.ops.nms, then MultiScaleRoIAlign (two levels): runs (nms, roi_align,
                    where, scatter, log2 as layers; references in tools/torchvision_ops.py)
    batched_nms     torchvision.ops.batched_nms: a prim::If whose branches pnnx drops (a located
                    error, expected.npz still PyTorch's)
    efficientnet_precision  efficientnet_b0's layout at width 0.25, depth 0.5, 64x64, on an
                    ill-conditioned input (randn·2 + 0.5): o2 with precision.npz (8 such inputs and
                    the file run by PyTorch in float64 and in float32); o0 (batch norms unfolded)
                    for `kuiper opt -O2 --check`, whose folding that input amplifies
    encoder_*       nn.TransformerEncoder traced with torch.jit.trace in eval mode without grad
                    (PyTorch's fast path: aten::_transformer_encoder_layer_fwd), the .pt converted
                    by the pnnx CLI: relu post-norm, gelu norm_first, a causal float mask, a bool
                    key padding mask (enable_nested_tensor=False: a nested-tensor trace does not
                    convert)

Each export is a folder tests/data/styles/MODEL/LEVEL (LEVEL o0, o1, o2) with model.pnnx.param,
model.pnnx.bin, inputs.npz and expected.npz (PyTorch's outputs of the module, or of the traced
TorchScript module for the encoders); Swin's o0/o1 also inputs_batch2.npz and expected_batch2.npz
(the module at batch 2: `--batch2-only` writes just these). Seeded: a re-export reproduces the files.

    python tools/export_model_styles.py                 # everything
    python tools/export_model_styles.py swin -l o1      # only these
    python tools/export_model_styles.py --out /tmp/x    # elsewhere

Needs the `export` extra (torch==2.13.0, pnnx) and torchvision (tools/torchvision_cpu.py, with its
compiled ops registered from Python by tools/torchvision_ops.py).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "styles"
sys.path.insert(0, str(ROOT / "tools"))

from pnnx_export import export_module  # noqa: E402

LEVELS = {"o0": 0, "o1": 1, "o2": 2}


def _swin() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from torchvision_cpu import torchvision

    torch.manual_seed(0)
    m = torchvision.models.swin_transformer.SwinTransformer(
        patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4], num_classes=10
    )
    with torch.no_grad():  # a trained-looking position bias (torchvision initialises it near 0)
        for name, p in m.named_parameters():
            if "relative_position_bias_table" in name:
                p.normal_(0, 0.5)
    return m.eval(), (torch.randn(1, 3, 32, 32),)


def _swin_v2() -> tuple[Any, tuple[Any, ...]]:
    """torchvision's Swin V2 (swin_v2_t's blocks and patch merging) at the small Swin's size: the
    cosine attention, its position-bias MLP, and the qkv bias cloned with its key part zeroed
    (torch.clone, aten::zero and Tensor.copy at optlevel 0/1)."""
    import torch
    from torchvision_cpu import torchvision

    st = torchvision.models.swin_transformer
    torch.manual_seed(5)
    m = st.SwinTransformer(
        patch_size=[4, 4],
        embed_dim=16,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=[4, 4],
        num_classes=10,
        block=st.SwinTransformerBlockV2,
        downsample_layer=st.PatchMergingV2,
    )
    return m.eval(), (torch.randn(1, 3, 32, 32),)


def _maxvit() -> tuple[Any, tuple[Any, ...]]:
    """torchvision's MaxVit (maxvit_t's MBConv, block and grid attention) at 2 stages of 16/32
    channels, 4x4 partitions on a 32x32 image: its einsum equations, which pnnx writes with
    their spaces at optlevel 0/1 (`expr=B G H I J, B G H J D -> B G H I D`)."""
    import torch
    from torchvision_cpu import torchvision

    torch.manual_seed(7)
    m = torchvision.models.maxvit.MaxVit(
        input_size=(32, 32),
        stem_channels=8,
        partition_size=4,
        block_channels=[16, 32],
        block_layers=[1, 1],
        head_dim=8,
        stochastic_depth_prob=0.0,
        num_classes=10,
    )
    return m.eval(), (torch.randn(1, 3, 32, 32),)


def _conv3d_stem() -> tuple[Any, tuple[Any, ...]]:
    import torch
    import torch.nn as nn
    from samples.common import randomize_batchnorm
    from torchvision_cpu import torchvision

    video = torchvision.models.video.resnet

    class Stem(nn.Module):
        """r3d_18's BasicStem (Conv3d 3x7x7 stride (1,2,2), BN3d, ReLU) and a BasicBlock of
        Conv3DSimple, at 8 channels."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv3d(3, 8, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False),
                nn.BatchNorm3d(8),
                nn.ReLU(inplace=True),
            )
            self.layer1 = video.BasicBlock(8, 8, video.Conv3DSimple)

        def forward(self, x):
            return self.layer1(self.stem(x))

    torch.manual_seed(1)
    m = Stem()
    randomize_batchnorm(m, batches=2, batch_size=2, input_shape=(3, 4, 16, 16))
    return m.eval(), (torch.randn(1, 3, 4, 16, 16),)


def _ssdlite_head() -> tuple[Any, tuple[Any, ...]]:
    from functools import partial

    import torch
    import torch.nn as nn
    from samples.common import randomize_batchnorm
    from torchvision_cpu import torchvision

    det = torchvision.models.detection
    ssdlite = det.ssdlite

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
            features = torchvision.models.mobilenet_v3_large(norm_layer=norm, reduced_tail=True, width_mult=0.25)
            ssdlite._normal_init(features)
            features = features.features  # what ssdlite._mobilenet_extractor does, extra blocks at width 0.25
            c4 = [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)][-1]
            self.backbone = ssdlite.SSDLiteFeatureExtractorMobileNet(features, c4, norm, width_mult=0.25)
            anchors = det.anchor_utils.DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
            channels = det._utils.retrieve_out_channels(self.backbone, (160, 160))
            self.head = ssdlite.SSDLiteHead(channels, anchors.num_anchors_per_location(), 5, norm)

        def forward(self, x):
            out = self.head(list(self.backbone(x).values()))
            return out["bbox_regression"], out["cls_logits"]

    torch.manual_seed(2)
    m = Head()
    randomize_batchnorm(m, batches=2, batch_size=2, input_shape=(3, 160, 160))
    return m.eval(), (torch.rand(1, 3, 160, 160),)


def _encoder(*, gelu: bool = False, norm_first: bool = False, mask: str = "") -> Callable[[], tuple[Any, ...]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                layer = nn.TransformerEncoderLayer(
                    16, 2, 32, batch_first=True, activation="gelu" if gelu else "relu", norm_first=norm_first
                )
                self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
                self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(5))

            def forward(self, x, *pad):
                if mask == "causal":
                    return self.enc(x, mask=self.causal)
                if mask == "padding":
                    return self.enc(x, src_key_padding_mask=pad[0])
                return self.enc(x)

        torch.manual_seed(3)
        m = Encoder()
        with torch.no_grad():  # the clones of one layer start equal: make each its own
            for name, p in m.named_parameters():
                if "norm" in name and name.endswith("weight"):
                    p.uniform_(0.5, 1.5)
                else:
                    p.normal_(0, 0.3 if p.ndim > 1 else 0.2)
        x = torch.randn(2, 5, 16)
        if mask == "padding":
            return m.eval(), (x, torch.tensor([[False] * 5, [False] * 3 + [True] * 2]))
        return m.eval(), (x,)

    return build


def _boxes(n: int, seed: int) -> tuple[Any, Any]:
    """Boxes (x1, y1, x2, y2) on a 64x64 image, some overlapping each other, and scores."""
    import torch

    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 36
    wh = torch.rand(n, 2, generator=g) * 24 + 6
    boxes = torch.cat([xy, xy + wh], 1)
    boxes[n // 2 :] = boxes[: n - n // 2] + torch.rand(n - n // 2, 4, generator=g) * 3  # near-duplicates
    return boxes, torch.rand(n, generator=g)


def _detection_post() -> tuple[Any, tuple[Any, ...]]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torchvision_ops import torchvision

    class Post(nn.Module):
        """torchvision.ops.nms (kept by pnnx as an operator), then MultiScaleRoIAlign over two
        levels of a feature map: traced, its LevelMapper (log2, clamp), _onnx_merge_levels
        (where, scatter) and torchvision::roi_align."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.pool = torchvision.ops.MultiScaleRoIAlign(["p2", "p3"], 3, 2, canonical_scale=32, canonical_level=3)

        def forward(self, image, boxes, scores):
            f2 = self.conv(image)
            f3 = F.max_pool2d(f2, 2)
            keep = torchvision.ops.nms(boxes, scores, 0.5)
            kept = boxes[keep]
            return self.pool({"p2": f2, "p3": f3}, [kept], [(64, 64)]), kept, scores[keep]

    torch.manual_seed(4)
    boxes, scores = _boxes(24, 4)
    return Post().eval(), (torch.randn(1, 4, 16, 16), boxes, scores)


def _batched_nms() -> tuple[Any, tuple[Any, ...]]:
    import torch
    import torch.nn as nn
    from torchvision_ops import torchvision

    class Batched(nn.Module):
        """torchvision.ops.batched_nms: traced, an `if boxes.numel() == 0` (prim::If) whose
        branches pnnx does not write (the located error of layers/detection.py)."""

        def forward(self, boxes, scores, classes):
            keep = torchvision.ops.batched_nms(boxes, scores, classes, 0.5)
            return boxes[keep], scores[keep]

    boxes, scores = _boxes(16, 5)
    return Batched().eval(), (boxes, scores, torch.arange(16) % 3)


def _efficientnet() -> tuple[Any, tuple[Any, ...]]:
    import torch
    from samples.common import randomize_batchnorm
    from torchvision_cpu import torchvision

    eff = torchvision.models.efficientnet
    torch.manual_seed(0)
    setting, last = eff._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5)
    m = eff.EfficientNet(setting, 0.2, last_channel=last, num_classes=10)
    randomize_batchnorm(m, batches=2, batch_size=4, input_shape=(3, 64, 64))
    return m.eval(), (_ill_conditioned(0),)


def _ill_conditioned(k: int) -> Any:
    """randn·2 + 0.5 (issue 25's input): saturates EfficientNet's squeeze-excitation sigmoids."""
    import torch

    return torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(100 + k)) * 2 + 0.5


PRECISION_INPUTS = 8


def _precision_references(folder: Path) -> None:
    """precision.npz beside the export: PRECISION_INPUTS ill-conditioned inputs x{k}, the file run
    by PyTorch in float64 (ref{k}: pnnx's generated Python, model.double()) and in float32
    (torch{k}); tests/test_models_styles.py compares our float32 error with PyTorch's."""
    import importlib.util
    import os

    import numpy as np
    import torch

    py = folder / "model_pnnx.py"
    text = py.read_text()
    start = text.index("zipfile.ZipFile(") + len("zipfile.ZipFile(")
    py.write_text(text[:start] + "'model.pnnx.bin'" + text[text.index(",", start) :])  # pnnx wrote its tmp path
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        spec = importlib.util.spec_from_file_location("precision_model", py)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        f32, f64 = module.Model().eval(), module.Model().eval().double()
        arrays = {}
        with torch.no_grad():
            for k in range(PRECISION_INPUTS):
                x = _ill_conditioned(k)
                arrays[f"x{k}"] = x.numpy()
                arrays[f"ref{k}"] = f64(x.double()).numpy()
                arrays[f"torch{k}"] = f32(x).numpy()
    finally:
        os.chdir(cwd)
        py.unlink()
    np.savez_compressed(folder / "precision.npz", **arrays)


def _batch2_reference(build: Callable[[], tuple[Any, tuple[Any, ...]]], folder: Path) -> None:
    """inputs_batch2.npz / expected_batch2.npz beside the export: PyTorch's module at batch 2 (the
    traced input and another), which the passes must keep (Swin's windows double with the batch)."""
    import numpy as np
    import torch

    module, inputs = build()
    g = torch.Generator().manual_seed(7)
    xs = [torch.cat([x, torch.randn(x.shape, generator=g)]) for x in inputs]
    with torch.no_grad():
        ys = module(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    np.savez(folder / "inputs_batch2.npz", **{f"in{i}": x.numpy() for i, x in enumerate(xs)})
    np.savez(folder / "expected_batch2.npz", **{f"out{i}": y.numpy() for i, y in enumerate(ys)})


MODELS: dict[str, tuple[Callable[[], tuple[Any, tuple[Any, ...]]], bool]] = {
    # name: (builder, traced without grad: PyTorch's fused fast path)
    "swin": (_swin, False),
    "swin_v2": (_swin_v2, False),
    "maxvit": (_maxvit, False),
    "conv3d_stem": (_conv3d_stem, False),
    "ssdlite_head": (_ssdlite_head, False),
    "detection_post": (_detection_post, False),
    "batched_nms": (_batched_nms, False),
    "efficientnet_precision": (_efficientnet, False),
    "encoder_relu": (_encoder(), True),
    "encoder_gelu_norm_first": (_encoder(gelu=True, norm_first=True), True),
    "encoder_causal": (_encoder(mask="causal"), True),
    "encoder_padding": (_encoder(mask="padding"), True),
}


# PyTorch's answer at batch 2 too, at these levels (pnnx's optlevel 2 fixes Swin's mask at batch 1).
BATCH2 = {"swin": ("o0", "o1")}
# Only these levels (the others would add MBs the tests do not need).
LEVELS_OF = {"ssdlite_head": ("o1", "o2"), "efficientnet_precision": ("o0", "o2")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("-l", "--levels", nargs="*", default=list(LEVELS), choices=list(LEVELS))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--batch2-only", action="store_true", help="only the batch-2 references of existing exports")
    args = ap.parse_args(argv)
    if args.batch2_only:
        for name in args.models:
            for level in [lv for lv in args.levels if lv in BATCH2.get(name, ())]:
                _batch2_reference(MODELS[name][0], args.out / name / level)
                print(f"ok     {name}/{level} batch 2")
        return 0
    failed = 0
    for name in args.models:
        build, no_grad = MODELS[name]
        for level in [lv for lv in args.levels if lv in LEVELS_OF.get(name, LEVELS)]:
            module, inputs = build()
            try:
                folder = args.out / name / level
                export_module(
                    module,
                    inputs,
                    folder,
                    optlevel=LEVELS[level],
                    capture_operands=False,
                    trace_without_grad=no_grad,
                    keep_python=folder if (name, level) == ("efficientnet_precision", "o2") else None,
                )
                if (name, level) == ("efficientnet_precision", "o2"):
                    _precision_references(folder)
                if level in BATCH2.get(name, ()):
                    _batch2_reference(build, folder)
                print(f"ok     {name}/{level}")
            except Exception:
                failed += 1
                print(f"FAILED {name}/{level}\n{traceback.format_exc()}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
