"""The runtime's own overhead, old code against new: forward(), a full steps() walk, first load.

    python bench/bench_runtime.py /path/to/old/tree /path/to/new/tree [--rounds 5]

Each measurement runs in a fresh process with PYTHONPATH at one tree, the trees alternating
(a shared, noisy machine: each number is the minimum over the rounds' minima). At one BLAS
thread and for loads the clock is the process's CPU time (waiting for a core does not count);
at two threads, wall time. Cases: deep1500
forward and steps() walk (per-operator overhead = time / operators), resnet18 at batch 1 and 4,
vit_tiny, mobilenetv3 (forward and walk), at 1 BLAS thread, plus resnet18 b4 forward at 2 (the
sharded path); and the first load (imports included) of resnet18 and digits_cnn.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.process_time()
import kuiper_core
case = sys.argv[1]
root = sys.argv[2]
if case.startswith("load:"):
    kuiper_core.load(f"{root}/sample_models/{case[5:]}.pnnx.param")
    print(json.dumps({case: time.process_time() - t0}))
    raise SystemExit
import numpy as np
from kuiper_core.threads import set_blas_threads
model, batch, threads = case.split(":")
set_blas_threads(int(threads))
clock = time.process_time if threads == "1" else time.perf_counter  # CPU time where one thread runs
runtime = kuiper_core.load(f"{root}/sample_models/{model}.pnnx.param")
x = np.load(f"{root}/sample_models/{model}.input.npy")
x = np.repeat(x, int(batch), axis=0)
def walk():
    for _ in runtime.steps(x):
        pass
out = {}
for name, fn, n in (("forward", lambda: runtime.forward(x), 30), ("steps", walk, 15)):
    if threads != "1" and name == "steps":
        continue
    for _ in range(3):
        fn()
    best = float("inf")
    deadline = time.perf_counter() + 4.0
    for i in range(n):
        t = clock(); fn(); best = min(best, clock() - t)
        if time.perf_counter() > deadline and i >= 4:
            break
    out[f"{case} {name}"] = best
out[f"{case} operators"] = len(runtime.order)
print(json.dumps(out))
"""

CASES = [
    "deep1500:1:1",
    "resnet18:1:1",
    "resnet18:4:1",
    "resnet18:4:2",
    "vit_tiny:1:1",
    "mobilenetv3:1:1",
    "load:resnet18",
    "load:digits_cnn",
]


def run(tree: Path, case: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python caches bytecode: time imports from it
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(tree)], env=env, capture_output=True, text=True, check=True, cwd=tree
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", nargs="*", default=CASES)
    args = parser.parse_args()
    best: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    for tree in (args.old, args.new):
        run(tree, "load:digits_cnn")  # writes the bytecode caches
    for r in range(args.rounds):
        for case in args.cases:
            for label, tree in (
                (("old", args.old), ("new", args.new)) if r % 2 == 0 else (("new", args.new), ("old", args.old))
            ):
                for k, v in run(tree, case).items():
                    best[label][k] = min(best[label].get(k, float("inf")), v)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print("| measurement | old | new | new/old |\n|---|---|---|---|")
    for k in best["old"]:
        old, new = best["old"][k], best["new"].get(k, float("nan"))
        if k.endswith("operators"):
            continue
        ops = best["old"].get(k.rsplit(" ", 1)[0] + " operators")
        extra = f" ({old / ops * 1e6:.2f} / {new / ops * 1e6:.2f} µs per operator)" if ops and "deep1500" in k else ""
        print(f"| {k}{extra} | {old * 1e3:.2f} ms | {new * 1e3:.2f} ms | {new / old:.3f} |")


if __name__ == "__main__":
    main()
