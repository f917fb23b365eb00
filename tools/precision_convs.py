"""Each fast convolution kernel's float32 error against float64, next to PyTorch's (issue 34).

    python tools/precision_convs.py                    # the table, 3 seeds, both inputs
    python tools/precision_convs.py --kernels f23 rows --seeds 5 --channels 1024 2048

For every kernel (layers/winograd.py, winograd_stride2.py, conv_kernels.py, depthwise.py) on
layers of up to 2048 channels and maps down to 2x2, over several seeds and two inputs (normal,
and a ReLU's output: non-negative, as most convolutions see in a CNN), it prints the max and
RMS error of the kernel's float32 output against a float64 convolution, PyTorch float32's on
the same layer, and their ratio (ours / PyTorch's; the rule is at most 2). Errors are pooled
over the seeds (max of maxes, RMS of all). The float64 reference is torch's conv2d in
float64 (checked against layers/conv_reference.py on the first case); weights ~N(0, 1/(9C)) as
a trained, normalised layer's are of that scale, biases ~N(0, 0.1).
Needs torch (one thread, so that its algorithm is the same on every run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from kuiper_core.layers.conv_kernels import Im2col, Pointwise  # noqa: E402
from kuiper_core.layers.conv_reference import conv2d_reference  # noqa: E402
from kuiper_core.layers.depthwise import DepthwiseChannelsLast, DepthwiseWideRows, Geometry  # noqa: E402
from kuiper_core.layers.windows import out_size  # noqa: E402
from kuiper_core.layers.winograd import (  # noqa: E402
    WinogradConv,
    WinogradRowsConv,
    transform_weights,
    transform_weights_rows,
)
from kuiper_core.layers.winograd_stride2 import Stride2RowsConv, transform_weights_stride2  # noqa: E402

F32 = np.dtype(np.float32)
Layer = tuple[int, int, int, int, int]  # C, O, H (= W), kernel, stride


def _square(channels: list[int], maps: list[int], k: int, stride: int) -> list[Layer]:
    return [(c, c, h, k, stride) for c in channels for h in maps]


def make_kernel(name: str, w: np.ndarray, b: np.ndarray, x_shape: tuple[int, int, int, int], layer: Layer):
    c, o, h, k, s = layer
    p = k // 2
    pads = (p, p, p, p)
    if name in ("f23", "f43"):
        m = 2 if name == "f23" else 4
        return WinogradConv(transform_weights(w, m), b, m, x_shape, pads, F32)
    if name == "rows":
        return WinogradRowsConv(transform_weights_rows(w), b, x_shape, pads, F32)
    if name in ("s2m2", "s2m4"):
        m = 2 if name == "s2m2" else 4
        return Stride2RowsConv(transform_weights_stride2(w, m), b, m, k, x_shape, pads, F32)
    oh = out_size(h, k, s, p, p, 1)
    if name == "pointwise":
        return Pointwise(w.reshape(1, o, c), b, x_shape)
    if name in ("dw_last", "dw_wide"):
        make = DepthwiseChannelsLast if name == "dw_last" else DepthwiseWideRows
        return make(w, b, Geometry((k, k), (s, s), (1, 1), pads, x_shape, (oh, oh)), F32, False)
    groups = c if w.shape[1] == 1 and c > 1 else 1
    wmat = w.reshape(groups, o // groups, -1)
    return Im2col(wmat, (k, k), (s, s), (1, 1), pads, "zeros", x_shape, (oh, oh), F32, bias_after=b)


CHANNELS = [64, 128, 256, 512, 1024, 2048]
MAPS = [2, 4, 8, 14]
STEMS = [(3, 64, 112, 7, 2), (3, 32, 64, 5, 2), (16, 32, 56, 5, 2)]  # image stems: 7x7 and 5x5, stride 2
KERNELS: dict[str, list[Layer]] = {
    "f23": _square(CHANNELS, MAPS, 3, 1),
    "f43": _square(CHANNELS, MAPS, 3, 1),
    "rows": _square(CHANNELS, MAPS, 3, 1),
    "s2m2": _square(CHANNELS, [4, 8, 16, 28], 3, 2) + STEMS,
    "s2m4": _square(CHANNELS, [4, 8, 16, 28], 3, 2) + STEMS,
    "im2col": _square(CHANNELS, MAPS, 3, 1) + _square(CHANNELS, [4, 8, 16], 3, 2),
    "pointwise": _square(CHANNELS, MAPS, 1, 1),
    "dw_last": _square([64, 512, 2048], [2, 4, 8, 14], 3, 1) + _square([64, 512, 2048], [4, 8, 14], 5, 2),
    "dw_wide": _square([64, 512], [8, 14, 28, 56], 3, 1) + _square([64, 512], [14, 28], 7, 1),
}
DEPTHWISE = ("dw_last", "dw_wide")


def errors(
    name: str, layer: Layer, seed: int, relu_input: bool, torch_conv: Callable
) -> tuple[np.ndarray, np.ndarray, float]:
    """(ours - f64, torch f32 - f64, max |f64|) for one layer and seed."""
    c, o, h, k, s = layer
    rng = np.random.default_rng(seed)
    cg = 1 if name in DEPTHWISE else c
    x = rng.standard_normal((1, c, h, h))
    if relu_input:
        x = np.maximum(x, 0)
    x = x.astype(np.float32)
    w = (rng.standard_normal((o, cg, k, k)) / np.sqrt(k * k * cg)).astype(np.float32)
    b = (rng.standard_normal(o) * 0.1).astype(np.float32)
    groups = c if name in DEPTHWISE else 1
    ref = torch_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), s, k // 2, groups)
    theirs = torch_conv(x, w, b, s, k // 2, groups)
    y = np.full(ref.shape, np.nan, np.float32)
    make_kernel(name, w, b, x.shape, layer).run(x, y)
    return y - ref, theirs - ref, float(np.abs(ref).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--channels", nargs="*", type=int, help="only these channel counts")
    parser.add_argument("--inputs", nargs="*", default=["normal", "relu"], choices=["normal", "relu"])
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)

    def torch_conv(x, w, b, stride, pad, groups):
        with torch.no_grad():
            t = torch.nn.functional.conv2d(
                torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, pad, 1, groups
            )
        return t.numpy()

    # the float64 reference is the definition's
    x, w = np.random.default_rng(0).standard_normal((2, 1, 8, 5, 5))
    w = w[:, :, :3, :3].copy()
    ref = conv2d_reference(x, w, None, pads=(1, 1, 1, 1))
    assert np.allclose(torch_conv(x, w, np.zeros(1), 1, 1, 1), ref, rtol=1e-12, atol=1e-12)

    print(
        f"{'kernel':9} {'input':6} {'C':>5} {'map':>4} {'k/s':>4}  {'ours max':>9} {'torch max':>9} {'ratio':>6}"
        f"  {'ours rms':>9} {'torch rms':>9} {'ratio':>6}"
    )
    worst: dict[str, float] = {}
    for name in args.kernels:
        for layer in KERNELS[name]:
            if args.channels and layer[0] not in args.channels:
                continue
            for kind in args.inputs:
                ours, theirs, scale = [], [], 0.0
                for seed in range(args.seeds):
                    a, t, sc = errors(name, layer, seed, kind == "relu", torch_conv)
                    ours.append(a.ravel())
                    theirs.append(t.ravel())
                    scale = max(scale, sc)
                o_all, t_all = np.concatenate(ours), np.concatenate(theirs)
                om, tm = np.abs(o_all).max() / scale, np.abs(t_all).max() / scale
                orms, trms = np.sqrt(np.mean(o_all**2)) / scale, np.sqrt(np.mean(t_all**2)) / scale
                ratio = om / tm if tm else float("inf") if om else 1.0
                rratio = orms / trms if trms else float("inf") if orms else 1.0
                worst[name] = max(worst.get(name, 0.0), ratio, rratio)
                c, _, h, k, s = layer
                flag = "  <-- over 2" if max(ratio, rratio) > 2 else ""
                print(
                    f"{name:9} {kind:6} {c:5} {h:4} {k}/{s:<2}  {om:9.2e} {tm:9.2e} {ratio:6.2f}"
                    f"  {orms:9.2e} {trms:9.2e} {rratio:6.2f}{flag}",
                    flush=True,
                )
    print("\nworst ratio per kernel (max and RMS):")
    for name, r in worst.items():
        print(f"  {name:9} {r:5.2f}")


if __name__ == "__main__":
    main()
