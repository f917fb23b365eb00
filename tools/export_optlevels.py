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
from typing import Any
from collections.abc import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from pnnx_export import _flatten, export_module  # noqa: E402

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
    shape2: tuple[Any, ...] | None = None  # a shape, or a tuple of shapes for several inputs
    more_shapes: list[tuple[Any, ...]] = field(default_factory=list)


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


def _sample(
    make: str, seed: int, shape: tuple[int, ...], *, bn_batch: int | None = 4, uniform: bool = False, **kwargs: Any
) -> Callable[[], tuple[Any, Any]]:
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
    "tiny_cnn": OptModel(
        _tiny_cnn,
        "conv, relu, max pool, flatten(1) to (1,16), linear (the flatten regression)",
        shape2=(3, 1, 4, 4),
        more_shapes=[(5, 1, 4, 4)],
    ),
    "digits_cnn": OptModel(
        _sample("digits.DigitsCNN", 1, (1, 1, 8, 8), uniform=True),
        "digits_cnn's architecture, untrained (conv+BN, pool, dropout, softmax)",
        shape2=(4, 1, 8, 8),
        more_shapes=[(2, 1, 8, 8)],
    ),
    "tiny_mlp": OptModel(
        _sample("digits.TinyMLP", 2, (1, 1, 8, 8), bn_batch=None, uniform=True), "tiny_mlp's architecture, untrained"
    ),
    "resnet18": OptModel(
        _sample("resnet.ResNet18", 18, (1, 3, 32, 32), num_classes=10, width=4),
        "ResNet-18 layout at width 4 (stages of 4/8/16/32 channels), 32x32, 10 classes",
        shape2=(1, 3, 48, 48),
        more_shapes=[(2, 3, 40, 56)],
    ),
    "mobilenetv3": OptModel(
        _sample(
            "mobilenet.MobileNetV3Small", 3, (1, 3, 32, 32), bn_batch=8, num_classes=10, last_channel=32, width=0.125
        ),
        "MobileNetV3-Small at width 0.125, 32x32, 10 classes",
        shape2=(1, 3, 64, 64),
        more_shapes=[(1, 3, 48, 40)],
    ),
    "unet": OptModel(
        _sample("unet.UNet", 4, (1, 3, 32, 32), base=4),
        "the sample UNet at base width 4, 32x32",
        shape2=(1, 3, 48, 48),
        more_shapes=[(2, 3, 40, 24)],
    ),
    "yolov5s_mini": OptModel(
        _sample("yolo.YoloV5Mini", 5, (1, 3, 64, 64), width=2, size=64),
        "the YOLOv5-style detector at width 2, 64x64 (grids fixed: no dyn)",
    ),
    "vit_tiny": OptModel(
        _sample("vit.ViTTiny", 6, (1, 3, 16, 16), bn_batch=None, img=16, patch=4, dim=16, depth=2, heads=2),
        "the tiny ViT at dim 16, depth 2, 2 heads, 16x16 (position table fixed: no dyn)",
    ),
    "expr_zoo": OptModel(
        _sample("expr_zoo.ExprZoo", 7, (1, 3, 8, 8), bn_batch=None),
        "the expression zoo at 8x8",
        shape2=(1, 3, 12, 12),
        more_shapes=[(2, 3, 6, 10)],
    ),
    "deep": OptModel(
        _sample("deep.Deep", 8, (1, 3, 16, 16), blocks=3, ch=4),
        "deep1500's residual block, 3 blocks of 4 channels, 16x16",
        shape2=(1, 3, 24, 24),
        more_shapes=[(3, 3, 8, 20)],
    ),
}


def _new(cls_name: str, seed: int, shape: tuple[int, ...], **kwargs: Any) -> Callable[[], tuple[Any, Any]]:
    """A builder for tools/optlevel_models.py's `cls_name` (plain torch, unlike the samples)."""

    def build() -> tuple[Any, Any]:
        import optlevel_models

        return optlevel_models.build(getattr(optlevel_models, cls_name), seed, shape, **kwargs)

    return build


# Models unlike the bundled samples (tools/optlevel_models.py): what other people's exports hold.
MODELS.update(
    {
        "gru_text": OptModel(
            _new("GruTextClassifier", 21, (1, 7), ids=20),
            "embedding, bidirectional GRU, LSTM, mean + last step, log_softmax (token ids in)",
            shape2=(2, 5),
            more_shapes=[(3, 9)],
        ),
        "encoder_block": OptModel(
            _new("EncoderBlock", 22, (1, 6, 16)),
            "pre-norm transformer block: nn.MultiheadAttention with a causal mask, GELU MLP "
            "(mask fixed at 6 tokens: batch-only dyn)",
            shape2=(2, 6, 16),
            more_shapes=[(3, 6, 16)],
        ),
        "tensor_ops": OptModel(
            _new("TensorOpsZoo", 23, (1, 4, 8, 8)),
            "split, chunk, stack, argmax+gather, where, einsum, interpolate, pixel_shuffle, "
            "group norm, avg/adaptive pooling, softmax (einsum weight fixes H: batch-only dyn)",
            shape2=(2, 4, 8, 8),
            more_shapes=[(3, 4, 8, 8)],
        ),
        "shape_arith": OptModel(
            _new("ShapeArithmetic", 24, (1, 3, 4, 6)),
            "reshapes from x.size(): view(b,-1), reshape(b,c//2,2,h,w) channel shuffle, flatten, shape[1]//2 slices",
            shape2=(2, 3, 6, 5),
            more_shapes=[(3, 3, 5, 7)],
        ),
        "densenet_mini": OptModel(
            _new("DenseNetMini", 25, (1, 3, 16, 16), bn_shape=(3, 16, 16)),
            "DenseNet-style concatenating blocks, BN-ReLU-conv, avg-pool transitions",
            shape2=(1, 3, 24, 24),
            more_shapes=[(2, 3, 20, 12)],
        ),
        "mobilenetv2_mini": OptModel(
            _new("MobileNetV2Mini", 26, (1, 3, 16, 16), bn_shape=(3, 16, 16)),
            "inverted residuals with ReLU6 / Hardswish, squeeze-excitation, depthwise convs",
            shape2=(1, 3, 32, 32),
            more_shapes=[(2, 3, 24, 20)],
        ),
        "indexing": OptModel(
            _new("IndexingZoo", 27, (1, 3, 6, 8)),
            "slices with steps and negative bounds, flip, index_select, list index, masked_fill, "
            "cumsum, roll, narrow, select, expand, repeat (dyn: pnnx drops the stepped slices, "
            "see the README)",
            shape2=(1, 3, 8, 10),
            more_shapes=[(1, 3, 9, 12)],
        ),
        "audio_conv1d": OptModel(
            _new("AudioConv1d", 28, (1, 2, 32), bn_shape=(2, 32)),
            "conv1d, BatchNorm1d, SiLU, max_pool1d, reflect pad, dilated conv, conv_transpose1d, "
            "leaky_relu, nearest interpolate, tanh",
            shape2=(2, 2, 48),
            more_shapes=[(1, 2, 40)],
        ),
        "gpt_block": OptModel(
            _new("GptBlock", 29, (1, 6, 16)),
            "hand-written causal attention (RMSNorm, split, view/transpose heads, tril buffer cut "
            "to T, masked_fill), scaled_dot_product_attention(is_causal), SwiGLU MLP",
            shape2=(2, 8, 16),
            more_shapes=[(3, 5, 16)],
        ),
        "unet_pad": OptModel(
            _new("UNetPad", 30, (1, 3, 11, 14)),
            "UNet up step on odd sizes: transposed conv, F.pad by the size difference, "
            "interpolate to the skip's size, cat",
            shape2=(2, 3, 16, 9),
            more_shapes=[(1, 3, 13, 21)],
        ),
        "swin_windows": OptModel(
            _new("SwinWindows", 31, (1, 4, 6, 8)),
            "Swin-style shifted windows: roll, window partition/reverse by view+permute, "
            "attention per window, LayerNorm, tanh-GELU MLP",
            shape2=(2, 6, 4, 8),
            more_shapes=[(1, 8, 8, 8)],
        ),
        "yolo_decode": OptModel(
            _new("YoloDecode", 32, (1, 3, 8, 10)),
            "detection decode from the feature map's size: meshgrid of aranges, sigmoid, exp, "
            "clamp, anchors buffer, view/permute/reshape",
            shape2=(2, 3, 12, 6),
            more_shapes=[(1, 3, 6, 14)],
        ),
        "norm_act_zoo": OptModel(
            _new("NormActZoo", 33, (1, 3, 6, 6)),
            "InstanceNorm, F.normalize, PReLU, ELU, Mish, Softplus, grouped conv + channel "
            "shuffle, transposed conv with output_padding, bilinear align_corners, max with "
            "indices, topk, sort",
            shape2=(2, 3, 8, 4),
            more_shapes=[(1, 3, 5, 7)],
        ),
        "recurrent_states": OptModel(
            _new("RecurrentStates", 35, (1, 3, 4)),
            "2-layer LSTM with initial states from torch.zeros(…, x.size(0), …), LSTMCell and "
            "GRUCell unrolled over time by the trace (T fixed: batch-only dyn)",
            shape2=(2, 3, 4),
            more_shapes=[(4, 3, 4)],
        ),
        "spatial_ops": OptModel(
            _new("SpatialOps", 36, (1, 3, 6, 6)),
            "reflection/replication/zero padding, unfold and fold, pixel_unshuffle, bmm, F.linear "
            "with a parameter, affine_grid + grid_sample, whole-tensor sum and mean "
            "(sizes fixed by the fold: batch-only dyn)",
            shape2=(2, 3, 6, 6),
            more_shapes=[(3, 3, 6, 6)],
        ),
        "scalars_casts": OptModel(
            _new("ScalarsAndCasts", 37, (1, 2, 4, 6)),
            "cat with a constant scalar tensor, max(dim)[0], norm, std, sign/abs, hardtanh, "
            "logical_and, casts, interpolate to int(H * 1.5), float(x.size(1)) arithmetic",
            shape2=(2, 2, 6, 8),
            more_shapes=[(3, 2, 5, 9)],
        ),
        "video3d": OptModel(
            _new("Video3d", 34, (1, 2, 4, 8, 8), bn_shape=(2, 4, 8, 8)),
            "Conv3d, BatchNorm3d, MaxPool3d, AdaptiveAvgPool3d, linear",
            shape2=(2, 2, 6, 12, 10),
            more_shapes=[(1, 2, 3, 6, 6)],
        ),
        "text_transformer": OptModel(
            _new("TextTransformer", 38, (1, 7), ids=16),
            "token + learned position embeddings (arange(T)), nn.TransformerEncoderLayer with "
            "a causal mask made by triu(ones(T, T)), padding-aware mean, one_hot",
            shape2=(2, 5),
            more_shapes=[(3, 10)],
        ),
        "two_inputs": OptModel(
            _new("TwoInputs", 39, ((1, 3, 6, 7), (1, 5))),
            "an image and a vector in, a nested tuple out: 'same' reflect-padded and circular "
            "convs, repeat_interleave, tile, broadcast_to, var_mean, layer_norm over "
            "x.shape[-1:], LogSoftmax, Softmax2d, 1/sqrt(size(-1))",
            shape2=((2, 3, 8, 5), (2, 5)),
            more_shapes=[((3, 3, 5, 9), (3, 5))],
        ),
        "metric_head": OptModel(
            _new("MetricHead", 40, (1, 3, 6, 8)),
            "cdist, cosine_similarity, pairwise_distance, argsort, median, kthvalue, addcmul, "
            "lerp, maximum, einsum, baddbmm, LocalResponseNorm, LPPool2d, bicubic and area "
            "interpolation, SELU/CELU/Softsign/Tanhshrink/LogSigmoid/GLU",
            shape2=(2, 3, 8, 10),
            more_shapes=[(3, 3, 4, 10)],
        ),
        "unet3d_mini": OptModel(
            _new("UNet3dMini", 41, (1, 1, 4, 6, 8)),
            "a 3-D UNet step: Conv3d, MaxPool3d, ConvTranspose3d, trilinear upsample, cat",
            shape2=(2, 1, 6, 4, 6),
            more_shapes=[(1, 1, 8, 8, 4)],
        ),
        "modules_zoo": OptModel(
            _new("ModulesZoo", 42, (1, 3, 4, 6)),
            "nn.* module forms: Unfold, Fold, PixelUnshuffle, Unflatten, ChannelShuffle, Bilinear, "
            "CosineSimilarity, PairwiseDistance, Softmin, Hardshrink, Threshold, GLU "
            "(sizes fixed by the fold: batch-only dyn)",
            shape2=(2, 3, 4, 6),
            more_shapes=[(3, 3, 4, 6)],
        ),
        "dtype_zoo": OptModel(
            _new("DtypeZoo", 43, (1, 4, 5)),
            "float64 arithmetic, isnan/isinf, nan_to_num, ~mask, erf, pow(0.5), integer floor "
            "division, a float64 sum, casts back",
            shape2=(2, 3, 7),
            more_shapes=[(3, 6, 2)],
        ),
    }
)


def _export(name: str, spec: OptModel, level: str, dest: Path) -> None:
    import torch

    module, x = spec.build()
    xs = list(x) if isinstance(x, (tuple, list)) else [x]  # a model of several inputs gives a tuple
    # shape2 / more_shapes entries: one shape, or a tuple of shapes (one per input)
    per_input = lambda s: list(s) if isinstance(s[0], tuple) else [s]  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if level == "dyn":
            assert spec.shape2 is not None
            export_module(module, xs, tmp_path, optlevel=2, inputshape2=per_input(spec.shape2))
        else:
            export_module(module, xs, tmp_path, optlevel=LEVELS[level])
        ops = tmp_path / "operands.npz"
        if ops.exists() and ops.stat().st_size > MAX_OPERANDS_BYTES:
            ops.unlink()
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(tmp_path, dest)
    if level == "dyn":
        gen = torch.Generator().manual_seed(99)
        for k, shapes in enumerate([spec.shape2, *spec.more_shapes], start=1):
            xks = []
            for xi, shape in zip(xs, per_input(shapes)):
                if xi.dtype.is_floating_point:
                    xks.append(torch.randn(*shape, generator=gen, dtype=xi.dtype))
                else:  # token ids: the example's range
                    xks.append(torch.randint(0, int(xi.max()) + 1, shape, generator=gen, dtype=xi.dtype))
            with torch.no_grad():
                ys = _flatten(module(*xks))
            np.savez(dest / f"inputs_{k}.npz", **{f"in{i}": xk.numpy() for i, xk in enumerate(xks)})
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
