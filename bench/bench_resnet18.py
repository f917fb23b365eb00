"""ResNet-18 (batch 1, 3x224x224): PyTorch eager vs kuiper_core, same input, same process.

    python bench/bench_resnet18.py                 # whole model: both times, ratio, per-type time
    python bench/bench_resnet18.py --json bench/results/resnet18.json
    python bench/bench_resnet18.py --convs         # every ResNet-18 conv shape vs F.conv2d
    python bench/bench_resnet18.py --threads 1     # pin both engines to one thread
    python bench/bench_resnet18.py --openblas-core auto   # let OpenBLAS pick its kernels

The model is tools/samples/resnet.py (torchvision's layout, fixed seed), so PyTorch runs the
very module that sample_models/resnet18.pnnx.param was converted from (BatchNorm unfused
in eager mode, folded into the convs by pnnx); the script checks that both give the same
logits. Without the sample files it converts the model with pnnx into a temp folder.

Timing: warm-up runs, then `--rounds` alternating blocks of `--runs` runs per engine (so
that load from other processes hits both alike, and one engine's idle worker threads do
not steal the other's cores mid-run); the median of all runs is reported.
Needs the `export` extra (torch==2.13.0, pnnx) for PyTorch; see bench/README.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both engines (default: all cores)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per block (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating blocks per engine (default 3)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--convs", action="store_true", help="time each ResNet-18 conv shape against F.conv2d instead")
    ap.add_argument("--param", type=Path, default=ROOT / "sample_models" / "resnet18.pnnx.param")
    ap.add_argument("--json", type=Path, help="also write the whole-model numbers to this file")
    ap.add_argument("--openblas-core", metavar="NAME",
                    help="set OPENBLAS_CORETYPE for this run (e.g. SkylakeX, Haswell), or 'auto' to drop it "
                         "and let OpenBLAS detect the CPU; default: leave the environment as it is")
    return ap.parse_args(argv)


def timed_blocks(engines: dict[str, Callable[[], object]], runs: int, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per run of each engine, measured in alternating blocks."""
    for fn in engines.values():  # `warmup` runs, and at least 0.3 s: thread pools and caches settle
        start = time.perf_counter()
        for i in itertools.count():
            fn()
            if i + 1 >= warmup and time.perf_counter() - start > 0.3:
                break
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(rounds):
        for name, fn in engines.items():
            fn()  # one untimed run: let this engine's thread pool wake up
            for _ in range(runs):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return times


def median_ms(ts: list[float]) -> float:
    s = sorted(ts)
    n = len(s)
    return 1e3 * (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def openblas_core() -> str:
    """The kernel set OpenBLAS picked (e.g. 'Haswell' = AVX2, 'SkylakeX' = AVX-512), if NumPy uses OpenBLAS."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            path = next(line.split()[-1] for line in maps if "openblas" in line.lower() and line.rstrip().endswith(".so"))
        lib = ctypes.CDLL(path)
    except (OSError, StopIteration):
        return "?"
    for sym in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_", "openblas_get_corename"):
        fn = getattr(lib, sym, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            return fn().decode()
    return "?"


def blas_summary() -> str:
    import numpy as np

    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats  # type: ignore[import-not-found]
        cpu = "CPU has AVX-512" if feats.get("AVX512F") else "CPU without AVX-512"
    except ImportError:  # pragma: no cover - NumPy internals moved
        cpu = "CPU features unknown"
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    forced = os.environ.get("OPENBLAS_CORETYPE")
    core = openblas_core() + (f", forced by OPENBLAS_CORETYPE={forced}" if forced else "")
    return f"NumPy {np.__version__}, BLAS {blas.get('name', '?')} {blas.get('version', '')} (kernels: {core}; {cpu})"


def load_engine(param: Path):
    import kuiper_core

    return kuiper_core.load(param)


def torch_resnet18():
    sys.path.insert(0, str(ROOT / "tools"))
    from samples.resnet import build  # the definition sample_models/resnet18 was made from

    model, x = build()
    return model.eval(), x


def bench_model(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    model, x = torch_resnet18()
    x = x.repeat(args.batch, 1, 1, 1)
    param = args.param
    tmp = None
    if not param.exists():
        sys.path.insert(0, str(ROOT / "tools"))
        from pnnx_export import export_module

        tmp = tempfile.TemporaryDirectory()
        print(f"{param} not found: converting the model with pnnx into {tmp.name}")
        param = export_module(model, [x[:1]], tmp.name, name="resnet18", capture_operands=False)
    graph = load_engine(param)
    xn = x.numpy()

    with torch.no_grad():
        ref = model(x).numpy()
    (ours,) = graph.forward(xn)
    err = float(np.abs(ours - ref).max())

    def run_torch() -> None:
        with torch.no_grad():
            model(x)

    times = timed_blocks({"pytorch": run_torch, "kuiper": lambda: graph.forward(xn)}, args.runs, args.rounds, args.warmup)
    t_torch, t_ours = median_ms(times["pytorch"]), median_ms(times["kuiper"])
    print(f"ResNet-18, input {tuple(x.shape)}, {args.threads} thread(s); {blas_summary()}")
    print(f"max |kuiper - pytorch| = {err:.2e} (logits up to {float(np.abs(ref).max()):.2f})")
    print(f"pytorch eager  {t_torch:8.2f} ms   (min {1e3 * min(times['pytorch']):.2f})")
    print(f"kuiper_core    {t_ours:8.2f} ms   (min {1e3 * min(times['kuiper']):.2f})")
    print(f"ratio kuiper / pytorch = {t_ours / t_torch:.2f}x (medians), {min(times['kuiper']) / min(times['pytorch']):.2f}x (best runs)")
    result = {
        "model": "resnet18",
        "input_shape": list(x.shape),
        "threads": args.threads,
        "blas": blas_summary(),
        "max_abs_diff": err,
        "pytorch_ms": {"median": t_torch, "min": 1e3 * min(times["pytorch"]), "runs": len(times["pytorch"])},
        "kuiper_ms": {"median": t_ours, "min": 1e3 * min(times["kuiper"]), "runs": len(times["kuiper"])},
        "ratio_median": t_ours / t_torch,
        "ratio_min": min(times["kuiper"]) / min(times["pytorch"]),
    }

    # Per operator type: steps() times each operator (it keeps every operand alive, so its
    # total is a little above forward()'s).
    per_type: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for i in range(max(3, args.runs // 2)):
        acc: dict[str, float] = defaultdict(float)
        for ev in graph.steps(xn):
            acc[ev.type] += ev.seconds
            if i == 0:
                counts[ev.type] += 1
        for k, v in acc.items():
            per_type[k].append(v)
    total = sum(median_ms(v) for v in per_type.values())
    print(f"\nkuiper_core time per operator type (median of {len(next(iter(per_type.values())))} steps() runs):")
    for k, v in sorted(per_type.items(), key=lambda kv: -median_ms(kv[1])):
        ms = median_ms(v)
        print(f"  {k:24s} x{counts[k]:<3d} {ms:8.2f} ms  {100 * ms / total:5.1f}%")
    if args.json:
        result["per_type_ms"] = {k: median_ms(v) for k, v in per_type.items()}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if tmp is not None:
        tmp.cleanup()


# (in, out, size, kernel, stride, pad, how many in ResNet-18)
RESNET18_CONVS = [
    (3, 64, 224, 7, 2, 3, 1),
    (64, 64, 56, 3, 1, 1, 4),
    (64, 128, 56, 3, 2, 1, 1),
    (64, 128, 56, 1, 2, 0, 1),
    (128, 128, 28, 3, 1, 1, 3),
    (128, 256, 28, 3, 2, 1, 1),
    (128, 256, 28, 1, 2, 0, 1),
    (256, 256, 14, 3, 1, 1, 3),
    (256, 512, 14, 3, 2, 1, 1),
    (256, 512, 14, 1, 2, 0, 1),
    (512, 512, 7, 3, 1, 1, 3),
]


def bench_convs(args: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from kuiper_core.graph import Attribute, Graph
    from kuiper_core.layers import create_layer

    print(f"ResNet-18 conv shapes, batch {args.batch}, {args.threads} thread(s); {blas_summary()}")
    print(f"{'':24s} {'median: pytorch':>18s} {'kuiper':>9s} {'ratio':>6s}   {'best: pytorch':>13s} {'kuiper':>9s} {'ratio':>6s}")
    print(f"{'conv (in,out,size,k,s)':24s}")
    tot = np.zeros(4)
    rng = np.random.default_rng(0)
    for c, o, size, k, s, p, count in RESNET18_CONVS:
        x = rng.standard_normal((args.batch, c, size, size), dtype=np.float32)
        w = rng.standard_normal((o, c, k, k), dtype=np.float32)
        b = rng.standard_normal(o, dtype=np.float32)
        g = Graph()
        oh = (size + 2 * p - k) // s + 1
        op = g.add_operator("nn.Conv2d", "conv", [g.add_operand("0")], [g.add_operand("1")],
                            in_channels=c, out_channels=o, kernel_size=[k, k], stride=[s, s], padding=[p, p],
                            dilation=[1, 1], groups=1, bias=True, padding_mode="zeros")
        op.attrs = {"weight": Attribute("f32", w.shape, w), "bias": Attribute("f32", b.shape, b)}
        layer = create_layer(op)
        out = [np.empty((args.batch, o, oh, oh), np.float32)]
        xt, wt, bt = (torch.from_numpy(a) for a in (x, w, b))

        def run_torch() -> None:
            with torch.no_grad():
                F.conv2d(xt, wt, bt, s, p)

        (y,) = layer.forward([x], out)
        with torch.no_grad():
            ref = F.conv2d(xt, wt, bt, s, p).numpy()
        assert np.abs(y - ref).max() <= 1e-3 * max(1.0, float(np.abs(ref).max())), "conv mismatch"
        times = timed_blocks({"pytorch": run_torch, "kuiper": lambda: layer.forward([x], out)}, args.runs, args.rounds, args.warmup)
        tt, tk = median_ms(times["pytorch"]), median_ms(times["kuiper"])
        bt, bk = 1e3 * min(times["pytorch"]), 1e3 * min(times["kuiper"])
        tot += np.array([tt, tk, bt, bk]) * count
        print(f"{str((c, o, size, k, s)):24s} {tt:8.3f}ms {tk:8.3f}ms {tk / tt:5.2f}x   {bt:8.3f}ms {bk:8.3f}ms {bk / bt:5.2f}x  (x{count})")
    print(f"{'all 20 convs':24s} {tot[0]:8.2f}ms {tot[1]:8.2f}ms {tot[1] / tot[0]:5.2f}x   "
          f"{tot[2]:8.2f}ms {tot[3]:8.2f}ms {tot[3] / tot[2]:5.2f}x")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # OpenBLAS reads these when NumPy loads it: set them before importing NumPy.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    if args.openblas_core == "auto":
        os.environ.pop("OPENBLAS_CORETYPE", None)
    elif args.openblas_core:
        os.environ["OPENBLAS_CORETYPE"] = args.openblas_core
    sys.path.insert(0, str(ROOT))
    try:
        import torch
    except ImportError:
        print("PyTorch is needed for the comparison: pip install -e '.[export]'", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    if args.convs:
        bench_convs(args)
    else:
        bench_model(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
