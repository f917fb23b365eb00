"""Batch 1 at two threads: the whole prepared forward (`kuiper_core.load(..., threads=2)`) against
the split one (`executor="split"`, runtime/split_forward.py: BLAS at one thread, big operators in
halves, one in a helper process), alternated in blocks of calls in one process (a pause before
each block: see PAUSE).

    python bench/bench_halves.py                                  # ResNet-18, 5 rounds x 20 calls each
    python bench/bench_halves.py --model sample_models/unet.pnnx.param --rounds 3
    python bench/bench_halves.py --one                            # also the whole forward at one BLAS thread
    python bench/bench_halves.py --ops                            # each split call's halves, one after the other

Prints per round (a block of each) the median and the lowest wall time of each, their ratio, the process's CPU
time per call of each, and the load average (other jobs on the cores make wall times of
two-thread runs wait). Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, as compare.py does.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse  # noqa: E402

import kuiper_core  # noqa: E402
from kuiper_core.runtime.prepared import PreparedForward  # noqa: E402
from kuiper_core.runtime.split_forward import SplitForward  # noqa: E402
from kuiper_core.layers import halves  # noqa: E402
from kuiper_core.runtime.program import Program  # noqa: E402
from kuiper_core.threads import using_blas_threads  # noqa: E402


PAUSE = 0.3  # s


def _cpu(f: Callable[[], object], repeats: int = 15) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.thread_time()
        f()
        best = min(best, time.thread_time() - t)
    return best * 1e3


def per_operator(split: SplitForward, program: Program, x: np.ndarray) -> None:
    """Each split call (one BLAS thread, warm): the whole call's CPU time, each half's alone
    (the halves as bound in the split call), their sum and the slower one."""
    with using_blas_threads(1):
        whole = dict(zip(*_names_calls(PreparedForward.build(program, [x]))))
        split.prepared.run([x])
        totals = [0.0, 0.0, 0.0]
        for name, call in zip(*_names_calls(split.prepared)):
            if not isinstance(call, partial) or call.func is not halves._run_pair or name not in whole:
                continue
            parts = call.args[0].args[1:3]  # the pair's two halves, bound to their arrays
            first = parts[0].func
            how = type(getattr(first, "__self__", None) or first).__name__
            halves_ = list(parts)
            t, a, b = _cpu(whole[name]), _cpu(halves_[0]), _cpu(halves_[1])
            totals = [totals[0] + t, totals[1] + a + b, totals[2] + max(a, b)]
            print(
                f"{name:16s} {how:28s} whole {t:.3f} ms, halves {a:.3f} + {b:.3f}: "
                f"sum {(a + b) / t:.2f}, slower {max(a, b) / t:.2f} of the whole"
            )
        print(f"split calls: whole {totals[0]:.2f} ms, halves {totals[1]:.2f}, slower halves {totals[2]:.2f}")


def _names_calls(forward: PreparedForward) -> tuple[list[str], list[Callable[[], object]]]:
    return forward.names, forward.calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "sample_models" / "resnet18.pnnx.param")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="the whole forward's BLAS threads")
    ap.add_argument("--one", action="store_true", help="also time the whole forward at one BLAS thread")
    ap.add_argument(
        "--ops",
        action="store_true",
        help="per split call, one BLAS thread, warm, CPU time (min of 15): the whole call and each half alone",
    )
    args = ap.parse_args()
    x = np.load(args.model.with_name(args.model.name.replace(".pnnx.param", ".input.npy")))
    graphs = {"whole": kuiper_core.load(args.model, threads=args.threads)}
    graphs["split"] = kuiper_core.load(args.model, executor="split")
    if args.one:
        graphs["one"] = kuiper_core.load(args.model, threads=1)
    ref, out = graphs["whole"].forward(x), graphs["split"].forward(x)
    if graphs["split"].last_executor != "split":
        sys.exit(f"{args.model.name}: no operator splits")
    err = max(float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)) for a, b in zip(ref, out))
    print(f"{args.model.name}: max rel. difference of the split forward to the whole one {err:.1e}")
    if args.ops:
        program = graphs["split"].program
        assert program is not None
        split = graphs["split"]._executors[((x.shape, x.dtype.str),)].parallel
        assert isinstance(split, SplitForward)
        with kuiper_core.limits.use(program.limits):
            per_operator(split, program, x)
        return
    for _ in range(3):
        for g in graphs.values():
            g.forward(x)
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} whole at {args.threads} BLAS threads")
    for r in range(args.rounds):
        wall: dict[str, list[float]] = {k: [] for k in graphs}
        cpu = dict.fromkeys(graphs, 0.0)
        for name, g in graphs.items():
            # In blocks, a pause between: after a two-thread GEMM OpenBLAS's pool thread
            # spins ~0.1 s on a core, which a run right after it would have to share.
            time.sleep(PAUSE)
            g.forward(x)
            for _ in range(args.runs):
                c, t = time.process_time(), time.perf_counter()
                g.forward(x)
                wall[name].append(time.perf_counter() - t)
                cpu[name] += time.process_time() - c
        med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
        print(
            f"round {r}: "
            + ", ".join(
                f"{k} {med[k]:.2f} ms (min {min(wall[k]) * 1e3:.2f}, CPU {cpu[k] / args.runs * 1e3:.2f})"
                for k in graphs
            )
            + f"; split/whole {med['split'] / med['whole']:.3f} (min {min(wall['split']) / min(wall['whole']):.3f}); "
            f"load average {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
