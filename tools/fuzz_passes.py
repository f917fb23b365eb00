"""Differential fuzzing of the graph passes (`kuiper opt`): every real export with inputs
(the op cases at each optlevel and the optlevel models, as tools/fuzz_params.py finds them),
intact and with single-param mutations that still run, is optimised at -O1 and -O2, built and
run. A finding: anything but a KuiperError out of the passes, an intact model that no longer
runs, a KuiperError the runtime's safety net made of another exception, or outputs that
differ from the unoptimised graph's (shape, dtype or values beyond float reordering).

    python tools/fuzz_passes.py                  # ~20,000 graphs, a few minutes
    python tools/fuzz_passes.py --per-case 6 -k ops_o0

Runs in this process under an address-space limit (the passes are not where sizes blow up;
tools/fuzz_params.py and tools/hostile_corpus.py isolate each case).
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # kuiper_core; tools/ is on the path when run
from fuzz_params import CASE_GLOBS, DATA, jobs_for, mutate  # noqa: E402

import numpy as np  # noqa: E402

from kuiper_core import limits  # noqa: E402
from kuiper_core.errors import KuiperError  # noqa: E402
from kuiper_core.passes import optimize  # noqa: E402
from kuiper_core.pnnx import load_weights, parse_param  # noqa: E402
from kuiper_core.runtime import RuntimeGraph  # noqa: E402


def _outputs(graph, inputs: list[np.ndarray]) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    with np.errstate(all="ignore"):
        return [np.asarray(y) for y in RuntimeGraph.from_graph(graph).build().forward(*inputs)]


def _differs(a: np.ndarray, b: np.ndarray) -> str | None:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{a.shape} became {b.dtype}{b.shape}"
    if a.dtype.kind not in "fc":
        return None if np.array_equal(a, b) else "values differ"
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return "NaN positions differ"
    finite = np.isfinite(a)
    if not np.array_equal(a[~finite & ~np.isnan(a)], b[~finite & ~np.isnan(a)]):
        return "infinities differ"
    # Fused or reordered float arithmetic: relative to the output's scale (squares of ~30 are ~1e3)
    scale = max(1.0, float(np.abs(a[finite]).max())) if finite.any() else 1.0
    err = float(np.abs(a[finite].astype(np.float64) - b[finite]).max()) if finite.any() else 0.0
    return None if err <= 1e-4 * scale else f"values differ: max |Δ| {err:.3g} (max |y| {scale:.3g})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", action="append", default=[], help="only cases whose path contains this (repeatable)")
    ap.add_argument("--per-case", type=int, default=30, help="mutants per case (default 30)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mem-mb", type=int, default=3000)
    args = ap.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_AS, (args.mem_mb << 20, args.mem_mb << 20))
    rng = random.Random(args.seed)
    cases = sorted({p.parent for g in CASE_GLOBS for p in DATA.glob(g) if (p.parent / "inputs.npz").exists()})
    cases = [c for c in cases if not args.k or any(k in str(c.relative_to(DATA)) for k in args.k)]
    small = limits.DEFAULT.replace(max_tensor_elements=1 << 22)
    findings: list[str] = []
    graphs = ran = 0
    t0 = time.time()
    for case in cases:
        text = (case / "model.pnnx.param").read_text()
        with np.load(case / "inputs.npz") as z:
            inputs = [z[f"in{i}"] for i in range(len(z.files))]
        jobs = jobs_for(case, rng, 40)
        for job in [None] + rng.sample(jobs, min(args.per_case, len(jobs))):
            graphs += 1
            what = f"{case.relative_to(DATA)} " + (f"{job[2]}={job[3][:40]!r}" if job else "intact")
            with limits.use(small):
                try:
                    graph = parse_param(text if job is None else mutate(text, job[0], job[2], job[3]), "m.pnnx.param")
                    load_weights(graph, case / "model.pnnx.bin")
                    before = _outputs(graph, inputs)
                except Exception:  # noqa: BLE001  -- a mutant that does not run: fuzz_params's business
                    continue
                ran += 1
                for level in (1, 2):
                    try:
                        after = _outputs(optimize(graph, level).after, inputs)
                    except KuiperError as e:
                        if e.__cause__ is not None and not isinstance(e.__cause__, KuiperError):
                            findings.append(f"{what} -O{level}: wrapped {type(e.__cause__).__name__}: {str(e)[:200]}")
                        elif job is None:
                            findings.append(f"{what} -O{level}: no longer runs: {str(e)[:200]}")
                        continue
                    except Exception as e:  # noqa: BLE001  -- a finding
                        findings.append(f"{what} -O{level}: {type(e).__name__}: {str(e)[:200]}")
                        continue
                    bad = (
                        f"{len(before)} outputs became {len(after)}"
                        if len(after) != len(before)
                        else next(
                            (f"out{i} {d}" for i, (a, b) in enumerate(zip(before, after)) if (d := _differs(a, b))),
                            None,
                        )
                    )
                    if bad:
                        findings.append(f"{what} -O{level}: {bad}")
    print(f"{graphs} graphs ({len(cases)} cases), {ran} ran, {len(findings)} findings in {time.time() - t0:.0f}s")
    for f in findings:
        print("  " + f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
