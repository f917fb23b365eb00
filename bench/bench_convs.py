"""Each convolution shape of ResNet-18 (or a given one): kuiper_core's kernel vs F.conv2d.

    python bench/bench_convs.py                      # ResNet-18's 11 conv shapes, batch 1
    python bench/bench_convs.py --batch 4 --threads 1
    python bench/bench_convs.py --threads 1 --clock cpu    # a busy shared machine
    python bench/bench_convs.py --shape 256 256 14 3 1   # in, out, size, kernel, stride
    python bench/bench_convs.py --param /tmp/kb/unet/model.pnnx.param --threads 1 --clock cpu  # a model's nn.Conv2d
    python bench/bench_convs.py --candidates --param sample_models/unet.pnnx.param   # every kernel the chooser weighs

The kernel is the one the layer picks for that input (conv_choice.choose_kernel: Winograd
F(m,3), im2col or pointwise GEMM, depthwise), made once as the prepared forward makes it. With one thread it
is timed on the same input as PyTorch in alternating blocks in one process (bench/timing.py).
With more, each engine is timed in a process of its own (`--engine`; kuiper's imports no
torch), the two alternating `--rounds` times, and the best round's median of each is shown:
in one process PyTorch's OpenMP threads keep spinning after its turn and took the second
core from kuiper's (our convs measured slower at 2 threads than at 1). Use it to check the
cost model's choices and a kernel change; bench/compare.py times whole models.

`--candidates` (kuiper only, one thread, CPU time of this thread): every kernel the chooser
weighs for each conv that has more than one (im2col, F(2,3), F(4,3), F(2,3) along the rows,
stride-2 rows m=2/4; depthwise: im2col, channels last, wide rows), whatever the memory caps
say, timed warm and with the caches flushed before each call (a 96 MiB read: in a model whose
weights pass L3, as ResNet-18's 45 MB do, each conv's weights come from memory), beside the
cost model's estimate under the built-in costs or `--costs file.json`; `*` marks the pick.
The measured against the estimated columns are what the costs are fitted to
(layers/kernel_costs.py; docs/speed.md, "Re-fitting the kernel costs").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time, or this process's CPU time (a busy machine: use with --threads 1)",
    )
    ap.add_argument("--shape", type=int, nargs=5, metavar=("IN", "OUT", "SIZE", "K", "STRIDE"))
    ap.add_argument("--param", help="a .pnnx.param: time each of its nn.Conv2d (its weights, its declared input shape)")
    ap.add_argument(
        "--candidates",
        action="store_true",
        help="time every kernel the chooser weighs, warm and flushed (kuiper only, one thread)",
    )
    ap.add_argument(
        "--costs",
        help="a KernelCosts JSON (kernel_costs.py's save) to estimate and pick with; default: the built-in costs",
    )
    ap.add_argument(
        "--engine",
        choices=["kuiper", "torch"],
        help="time this engine only and print JSON (the child processes of a run with --threads > 1)",
    )
    args = ap.parse_args(argv)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)  # read when NumPy loads
    sys.path.insert(0, str(ROOT))
    if args.engine:
        return time_one_engine(args)
    if args.candidates:
        return time_candidates(args)
    import numpy as np

    print(
        f"{args.param or f'batch {args.batch}'}, {args.threads} thread(s); OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    )
    print(f"{'in, out, size, k, s':22s} {'kernel':20s} {'pytorch ms':>10s} {'kuiper ms':>10s} {'ratio':>6s}")
    if args.threads > 1:  # each engine in its own process (see the module docstring)
        runs: dict[str, list[list[float]]] = {"torch": [], "kuiper": []}
        rows: list = []
        for _ in range(args.rounds):
            for engine in runs:
                given = argv if argv is not None else sys.argv[1:]
                child = [sys.executable, __file__, *given, "--engine", engine, "--rounds", "1"]
                rows = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
                runs[engine].append([row["ms"] for row in rows])
        # The best round of each: another process on the shared cores only adds time, and
        # PyTorch's OpenMP threads suffer most (a 0.6 ms conv took 24 ms in a busy round).
        table = [
            (
                row["label"],
                row["kernel"],
                min(r[i] for r in runs["torch"]),
                min(r[i] for r in runs["kuiper"]),
                row["count"],
            )
            for i, row in enumerate(rows)
        ]
    else:
        table = [
            (label, kernel, 1e3 * median(times["torch"]), 1e3 * median(times["kuiper"]), count)
            for label, kernel, times, count in timed_cases(args, ["torch", "kuiper"])
        ]
    total = np.zeros(2)
    for label, kernel, tt, tk, count in table:
        total += np.array([tt, tk]) * count
        print(f"{label:22s} {kernel:20s} {tt:10.3f} {tk:10.3f} {tk / tt:6.2f}  (x{count})")
    if len(table) > 1:
        print(f"{'all':22s} {'':20s} {total[0]:10.2f} {total[1]:10.2f} {total[1] / total[0]:6.2f}")
    return 0


def time_one_engine(args: argparse.Namespace) -> int:
    """--engine: one engine's median per conv, as JSON on stdout (no torch imported for kuiper)."""
    rows = [
        {"label": label, "kernel": kernel, "ms": 1e3 * median(times[args.engine]), "count": count}
        for label, kernel, times, count in timed_cases(args, [args.engine])
    ]
    print(json.dumps(rows))
    return 0


def timed_cases(args: argparse.Namespace, engines: list[str]) -> list[tuple[str, str, dict[str, list[float]], int]]:
    """(label, kuiper's kernel, seconds per run by engine, count) per conv. With both engines,
    kuiper's output is checked against F.conv2d first."""
    import numpy as np

    if "torch" in engines:
        import torch
        import torch.nn.functional as F

        torch.set_num_threads(args.threads)
    shapes = [tuple(args.shape) + (1,)] if args.shape else RESNET18_CONVS
    rng = np.random.default_rng(0)
    cases = model_convs(args.param) if args.param else [synthetic_conv(rng, args.batch, *shape) for shape in shapes]
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    out = []
    for label, layer, x, y, conv_args, count in cases:
        run = layer.prepare([x], [y])
        assert run is not None
        kernel = kernel_name(run.args[0])  # type: ignore[attr-defined]
        fns = {}
        if "torch" in engines:
            xt = torch.from_numpy(x)
            targs = [torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in conv_args]
            with torch.inference_mode():
                ref = F.conv2d(xt, *targs).numpy()

            def torch_conv(xt=xt, targs=targs) -> None:
                with torch.inference_mode():
                    F.conv2d(xt, *targs)

            fns["torch"] = torch_conv
            if "kuiper" in engines:
                run([x], [y])
                err = float(np.abs(y - ref).max())
                assert err <= 1e-4 * max(1.0, float(np.abs(ref).max())), f"mismatch {err}"
        if "kuiper" in engines:
            fns["kuiper"] = lambda run=run, x=x, y=y: run([x], [y])
        out.append((label, kernel, timed_blocks(fns, args.runs, args.rounds, clock=clock), count))
    return out


def time_candidates(args: argparse.Namespace) -> int:
    """--candidates: each conv's candidate kernels, median ms warm and flushed, and estimated."""
    import numpy as np

    from kuiper_core.layers.kernel_costs import DEFAULT_COSTS, ChoiceInputs, KernelCosts

    if args.threads != 1:
        raise SystemExit("--candidates times one thread (the cost model's fit)")
    costs = KernelCosts.load(args.costs) if args.costs else DEFAULT_COSTS
    shapes = [tuple(args.shape) + (1,)] if args.shape else RESNET18_CONVS
    rng = np.random.default_rng(0)
    cases = model_convs(args.param) if args.param else [synthetic_conv(rng, args.batch, *shape) for shape in shapes]
    flush = np.ones(24 << 20, np.float32)  # 96 MiB: three times L3
    print(
        f"{args.param or f'batch {args.batch}'}, 1 thread, CPU time; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    )
    print(f"{'conv':22s} {'kernel':12s} {'warm ms':>8s} {'flushed':>8s} {'estimate':>8s}")
    seen = set()
    for label, layer, x, y, _, _ in cases:
        key = (x.shape, y.shape, layer.kernel, layer.stride, layer.dilation, layer.groups)  # type: ignore[attr-defined]
        kernels = candidate_kernels(layer, x.shape, costs)
        if len(kernels) < 2 or key in seen:
            continue
        seen.add(key)
        picked = kernel_name(layer.kernels.make(x.shape, np.dtype(np.float32), ChoiceInputs(costs, 1)))  # type: ignore[attr-defined]
        times: dict[str, dict[str, list[float]]] = {name: {"warm": [], "flushed": []} for name in kernels}
        for _ in range(args.rounds):
            for name, (kernel, _) in kernels.items():
                for mode in times[name]:
                    kernel.run(x, y)
                    for _ in range(args.runs):
                        if mode == "flushed":
                            flush.sum()
                        t0 = time.thread_time()
                        kernel.run(x, y)
                        times[name][mode].append(time.thread_time() - t0)
        for name, (kernel, estimate) in kernels.items():
            mark = "*" if kernel_name(kernel) == picked else " "
            warm, cold = (1e3 * median(times[name][mode]) for mode in ("warm", "flushed"))
            print(f"{label:22s}{mark}{name:12s} {warm:8.3f} {cold:8.3f} {estimate:8.3f}")
    return 0


def candidate_kernels(layer, x_shape: tuple[int, ...], costs) -> dict[str, tuple[object, float]]:
    """name -> (kernel, the cost model's estimate in ms under `costs`) for every kernel the
    chooser weighs for this conv (the memory caps aside), each made by the layer's kernel
    factory with the choice given (conv_factory.ConvKernels.make)."""
    import numpy as np

    from kuiper_core.layers import conv_choice as cc
    from kuiper_core.layers.kernel_costs import ChoiceInputs

    n, c = x_shape[:2]
    o, kernel, stride = layer.out_channels, layer.kernel, layer.stride
    pads, (oh, ow) = layer.geometry(x_shape[2], x_shape[3], kernel)
    geo = cc.ConvGeometry(o, kernel, stride, layer.dilation, layer.groups, layer.padding_mode, pads, (oh, ow))
    geometry = (kernel, stride, layer.dilation, layer.groups, layer.padding_mode)
    choices: dict[str, tuple[cc.Choice, float]] = {}  # name -> (the choice, its estimate)
    if layer.groups == 1 and not (kernel == (1, 1) and stride == (1, 1) and not any(pads)):
        choices["im2col"] = (("im2col", None), cc.im2col_cost(costs, n, c, o, oh, ow, kernel[0] * kernel[1]))
    if geometry == ((3, 3), (1, 1), (1, 1), 1, "zeros") and min(c, o) >= costs.winograd_min_channels:
        for m in (2, 4):
            choices[f"F({m},3)"] = (("winograd", m), cc.winograd_cost(costs, m, n, c, o, oh, ow))
        choices["rows F(2,3)"] = (("winograd", cc.ROWS), cc.winograd_rows_cost(costs, n, c, o, oh, ow))
    k = kernel[0]
    if geometry[1:] == ((2, 2), (1, 1), 1, "zeros") and kernel == (k, k) and k in cc.STRIDE2_KERNELS:
        for m in (2, 4):
            choices[f"stride2 m={m}"] = (("stride2", m), cc.stride2_cost(costs, m, k, n, c, o, oh, ow))
    if layer.groups == c == o and layer.padding_mode == "zeros":  # depthwise
        im2col, last = cc.depthwise_costs(x_shape, geo, costs)
        choices["im2col"] = (("im2col", None), im2col)
        choices["chan. last"] = (("depthwise", None), last)
        if stride == (1, 1):
            choices["wide rows"] = (("wide", None), float("nan"))  # a rule, not a cost model
    inputs = ChoiceInputs(costs, 1)
    f32 = np.dtype(np.float32)
    return {
        name: (layer.kernels.make(x_shape, f32, inputs, given=(pads, choice)), estimate)
        for name, (choice, estimate) in choices.items()
    }


def kernel_name(k: object) -> str:
    """The kernel's class (and its tile)."""
    tile = f" m={k.m}" if hasattr(k, "odd_shared") else f" F({k.m},3)" if hasattr(k, "m") else ""  # type: ignore[attr-defined]
    return type(k).__name__.replace("Conv", "") + tile


def synthetic_conv(rng, batch: int, c: int, o: int, size: int, k: int, s: int, count: int) -> tuple:
    """A ResNet-style conv (padding k // 2, random weights): (label, layer, x, y, F.conv2d args, count)."""
    import numpy as np

    from kuiper_core.graph import Attribute, Graph
    from kuiper_core.layers import create_layer

    p = k // 2
    x = rng.standard_normal((batch, c, size, size), dtype=np.float32)
    w = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    g = Graph()
    src = g.add_operand("x")
    src.shape, src.dtype = (batch, c, size, size), "f32"
    op = g.add_operator(
        "nn.Conv2d",
        "conv",
        [src],
        [g.add_operand("y")],
        in_channels=c,
        out_channels=o,
        kernel_size=[k, k],
        stride=[s, s],
        padding=[p, p],
        dilation=[1, 1],
        groups=1,
        bias=True,
        padding_mode="zeros",
    )
    op.attrs = {"weight": Attribute("f32", w.shape, w), "bias": Attribute("f32", b.shape, b)}
    oh = (size + 2 * p - k) // s + 1
    y = np.empty((batch, o, oh, oh), np.float32)
    return str((c, o, size, k, s)), create_layer(op), x, y, (w, b, s, p), count


def model_convs(param: str) -> list[tuple]:
    """Every nn.Conv2d of a model at its declared input shape, with its weights (one forward
    first, so that shapes and layers are the ones a run makes)."""
    import numpy as np

    import kuiper_core

    rg = kuiper_core.load(param)
    rng = np.random.default_rng(0)
    inputs = [
        rng.standard_normal(op.outputs[0].shape, dtype=np.float32)
        for op in rg.graph.operators
        if op.type == "pnnx.Input"
    ]
    rg.forward(*inputs)
    cases = []
    for rop in rg.order:
        if rop.type != "nn.Conv2d" or rop.layer is None:
            continue
        layer = rop.layer
        x = rng.standard_normal(rop.op.inputs[0].shape, dtype=np.float32)
        y = np.empty(rop.op.outputs[0].shape, np.float32)
        pads = layer.geometry(x.shape[2], x.shape[3], layer.kernel)[0]  # type: ignore[attr-defined]
        if pads[0] != pads[1] or pads[2] != pads[3] or layer.padding_mode != "zeros":  # type: ignore[attr-defined]
            continue  # F.conv2d pads symmetrically with zeros
        conv_args = (
            layer.weight_data,
            layer.bias_data,
            layer.stride,
            (pads[0], pads[2]),
            layer.dilation,  # type: ignore[attr-defined]
            layer.groups,
        )  # type: ignore[attr-defined]
        label = f"{rop.name} {x.shape[1]}>{y.shape[1]} {x.shape[2]}x{x.shape[3]} k{layer.kernel[0]}s{layer.stride[0]}"  # type: ignore[attr-defined]
        cases.append((label[:22], layer, x, y, conv_args, 1))
    return cases


if __name__ == "__main__":
    sys.exit(main())
