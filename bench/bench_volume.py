"""3-D layers (layers/volume.py) against PyTorch: convolution, transposed convolution and
pooling on video-sized volumes, one thread, in one process, alternating blocks, CPU time.

    python bench/bench_volume.py            # every shape below
    python bench/bench_volume.py --runs 5   # fewer runs on a busy machine

Each layer is made from a one-operator graph as the runtime makes it, checked against
PyTorch's output first (largest difference over the largest magnitude), then timed. Needs
the `export` extra (torch).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy's import: one thread each
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from timing import median, timed_blocks  # noqa: E402

# op type, in, out, kernel, stride, padding, groups, input shape
CASES = [
    ("nn.Conv3d", 3, 32, 3, 1, 1, 1, (1, 3, 16, 56, 56)),
    ("nn.Conv3d", 32, 64, 3, 1, 1, 1, (1, 32, 8, 28, 28)),
    ("nn.Conv3d", 64, 64, 3, 1, 1, 64, (1, 64, 8, 28, 28)),
    ("nn.Conv3d", 64, 128, 3, 2, 1, 1, (1, 64, 8, 28, 28)),
    ("nn.ConvTranspose3d", 64, 32, 2, 2, 0, 1, (1, 64, 8, 28, 28)),
    ("nn.ConvTranspose3d", 32, 16, 3, 1, 1, 1, (1, 32, 8, 28, 28)),
    ("F.max_pool3d", 64, 64, 2, 2, 0, 1, (1, 64, 16, 56, 56)),
    ("F.max_pool3d", 64, 64, 3, 2, 1, 1, (1, 64, 16, 56, 56)),
    ("F.avg_pool3d", 64, 64, 2, 2, 0, 1, (1, 64, 16, 56, 56)),
    ("F.avg_pool3d", 64, 64, 3, 1, 1, 1, (1, 64, 16, 56, 56)),
]
# op type, output size, input shape
ADAPTIVE = [
    ("F.adaptive_avg_pool3d", [1, 1, 1], (1, 64, 16, 56, 56)),
    ("F.adaptive_avg_pool3d", [4, 7, 7], (1, 64, 16, 56, 56)),
    ("F.adaptive_avg_pool3d", [8, 28, 28], (1, 64, 16, 56, 56)),
    ("F.adaptive_max_pool3d", [4, 7, 7], (1, 64, 16, 56, 56)),
    ("F.adaptive_max_pool3d", [5, 9, 9], (1, 64, 16, 56, 56)),
]


def _pair(op_type: str, cin: int, cout: int, k: int, s: int, p: int, g: int):
    """(kuiper_core layer, torch module) with the same weights."""
    import torch
    import torch.nn.functional as F

    from kuiper_core.graph import Attribute, Operand, Operator
    from kuiper_core.layers.registry import create_layer

    params = {"kernel_size": [k] * 3, "stride": [s] * 3, "padding": [p] * 3}
    if op_type.startswith("F."):
        fn = F.max_pool3d if "max" in op_type else F.avg_pool3d
        layer = create_layer(Operator(op_type, "v", inputs=[Operand("x")], outputs=[Operand("y")], params=params))
        return layer, lambda x: fn(x, k, s, p)
    transposed = "Transpose" in op_type
    module = (
        torch.nn.ConvTranspose3d(cin, cout, k, s, p, groups=g)
        if transposed
        else torch.nn.Conv3d(cin, cout, k, s, p, groups=g)
    ).eval()
    w, b = module.weight.detach().numpy(), module.bias.detach().numpy()
    params.update(in_channels=cin, out_channels=cout, groups=g, bias=True, dilation=[1, 1, 1])
    layer = create_layer(
        Operator(
            op_type,
            "v",
            inputs=[Operand("x")],
            outputs=[Operand("y")],
            params=params,
            attrs={"weight": Attribute("f32", w.shape, w), "bias": Attribute("f32", b.shape, b)},
        )
    )
    return layer, module


def _adaptive(op_type: str, size: list[int]):
    import torch.nn.functional as F

    from kuiper_core.graph import Operand, Operator
    from kuiper_core.layers.registry import create_layer

    fn = F.adaptive_max_pool3d if "max" in op_type else F.adaptive_avg_pool3d
    layer = create_layer(
        Operator(op_type, "v", inputs=[Operand("x")], outputs=[Operand("y")], params={"output_size": size})
    )
    return layer, lambda x: fn(x, size)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    print("| layer | input | PyTorch ms | kuiper ms | kuiper / PyTorch | max rel. error |")
    print("|---|---|---|---|---|---|")
    rows = [
        (_pair(t, cin, cout, k, s, p, g), _label(t, cin, cout, k, s, p, g), shape)
        for t, cin, cout, k, s, p, g, shape in CASES
    ]
    rows += [(_adaptive(t, size), f"{t} to {'x'.join(map(str, size))}", shape) for t, size, shape in ADAPTIVE]
    for (layer, module), what, shape in rows:
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        tx = torch.from_numpy(x)
        with torch.inference_mode():
            ref = module(tx).numpy()
            y = layer.forward([x], [None])[0]
            err = float(np.abs(y - ref).max() / np.abs(ref).max())
            times = timed_blocks(
                {
                    "torch": lambda module=module, tx=tx: module(tx),
                    "kuiper": lambda layer=layer, x=x: layer.forward([x], [None]),
                },
                args.runs,
                args.rounds,
                clock=time.process_time,
            )
        t, ours = median(times["torch"]) * 1e3, median(times["kuiper"]) * 1e3
        print(f"| {what} | {'x'.join(map(str, shape))} | {t:.2f} | {ours:.2f} | {ours / t:.2f}x | {err:.1e} |")
    return 0


def _label(op_type: str, cin: int, cout: int, k: int, s: int, p: int, g: int) -> str:
    what = (op_type if op_type.startswith("F.") else f"{op_type} {cin}→{cout}") + f" k{k} s{s} p{p}"
    return what + (f" g{g}" if g > 1 else "")


if __name__ == "__main__":
    sys.exit(main())
