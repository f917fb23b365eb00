"""Each convolution shape of ResNet-18 (or a given one): kuiper_core's kernel vs F.conv2d.

    python bench/bench_convs.py                      # ResNet-18's 11 conv shapes, batch 1
    python bench/bench_convs.py --batch 4 --threads 1
    python bench/bench_convs.py --threads 1 --clock cpu    # a busy shared machine
    python bench/bench_convs.py --shape 256 256 14 3 1   # in, out, size, kernel, stride

The kernel is the one the layer picks for that input (conv_kernels.choose: Winograd F(m,3),
im2col or pointwise GEMM), made once as the prepared forward makes it, and timed on the
same input as PyTorch in alternating blocks in one process (bench/timing.py). Use it to
check the cost model's choices and a kernel change; bench/compare.py times whole models.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import median, timed_blocks  # noqa: E402

# (in, out, size, kernel, stride, how many in ResNet-18)
RESNET18_CONVS = [
    (3, 64, 224, 7, 2, 1),
    (64, 64, 56, 3, 1, 4),
    (64, 128, 56, 3, 2, 1),
    (64, 128, 56, 1, 2, 1),
    (128, 128, 28, 3, 1, 3),
    (128, 256, 28, 3, 2, 1),
    (128, 256, 28, 1, 2, 1),
    (256, 256, 14, 3, 1, 3),
    (256, 512, 14, 3, 2, 1),
    (256, 512, 14, 1, 2, 1),
    (512, 512, 7, 3, 1, 3),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall time, or this process's CPU time (a busy machine: use with --threads 1)")
    ap.add_argument("--shape", type=int, nargs=5, metavar=("IN", "OUT", "SIZE", "K", "STRIDE"))
    args = ap.parse_args(argv)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)  # read when NumPy loads
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch
    import torch.nn.functional as F

    from kuiper_core.graph import Attribute, Graph
    from kuiper_core.layers import create_layer

    torch.set_num_threads(args.threads)
    shapes = [tuple(args.shape) + (1,)] if args.shape else RESNET18_CONVS
    rng = np.random.default_rng(0)
    print(f"batch {args.batch}, {args.threads} thread(s); OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"{'in, out, size, k, s':22s} {'kernel':20s} {'pytorch ms':>10s} {'kuiper ms':>10s} {'ratio':>6s}")
    total = np.zeros(2)
    for c, o, size, k, s, count in shapes:
        p = k // 2
        x = rng.standard_normal((args.batch, c, size, size), dtype=np.float32)
        w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        g = Graph()
        src = g.add_operand("x")
        src.shape, src.dtype = (args.batch, c, size, size), "f32"
        op = g.add_operator("nn.Conv2d", "conv", [src], [g.add_operand("y")], in_channels=c, out_channels=o,
                            kernel_size=[k, k], stride=[s, s], padding=[p, p], dilation=[1, 1], groups=1, bias=True,
                            padding_mode="zeros")
        op.attrs = {"weight": Attribute("f32", w.shape, w), "bias": Attribute("f32", b.shape, b)}
        layer = create_layer(op)
        oh = (size + 2 * p - k) // s + 1
        y = np.empty((args.batch, o, oh, oh), np.float32)
        run = layer.prepare([x], [y])
        assert run is not None
        kernel = type(run.args[0]).__name__ + (f" F({run.args[0].m},3)" if hasattr(run.args[0], "m") else "")  # type: ignore[attr-defined]
        xt, wt, bt = (torch.from_numpy(a) for a in (x, w, b))
        with torch.inference_mode():
            ref = F.conv2d(xt, wt, bt, s, p).numpy()
        run([x], [y])
        err = float(np.abs(y - ref).max())
        assert err <= 1e-4 * max(1.0, float(np.abs(ref).max())), f"mismatch {err}"

        def torch_conv() -> None:
            with torch.inference_mode():
                F.conv2d(xt, wt, bt, s, p)

        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        times = timed_blocks({"torch": torch_conv, "kuiper": lambda: run([x], [y])}, args.runs, args.rounds, clock=clock)
        tt, tk = 1e3 * median(times["torch"]), 1e3 * median(times["kuiper"])
        total += np.array([tt, tk]) * count
        print(f"{str((c, o, size, k, s)):22s} {kernel:20s} {tt:10.3f} {tk:10.3f} {tk / tt:6.2f}  (x{count})")
    if len(shapes) > 1:
        print(f"{'all':22s} {'':20s} {total[0]:10.2f} {total[1]:10.2f} {total[1] / total[0]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
