"""Differential fuzzing of the graph passes (`kuiper opt`): every real export with inputs
(the op cases at each optlevel and the optlevel models, as tools/fuzz_params.py finds them),
intact and with single-param mutations that still run, is optimised at -O1 and -O2, built and
run. Each graph runs at batch 1, at batch 2 (every input's dim 0 doubled: a rewrite right only at
the traced size shows there) and with -0.0/±inf/NaN in its float inputs. A finding: anything
but a KuiperError out of the passes, an intact model that no longer runs, a KuiperError the
runtime's safety net made of another exception, or outputs that differ from the unoptimised
graph's (passes/exactness.py: at -O1 any bit, signed zeros and NaN positions included; at -O2
beyond float rounding, passes/sensitivity.py where the input amplifies it).

    python tools/fuzz_passes.py                  # ~20,000 graphs, a few minutes
    python tools/fuzz_passes.py --per-case 6 -k ops_o0
    python tools/fuzz_passes.py --per-case 0 --each-pass   # every pass alone on every export
    python tools/fuzz_passes.py --per-case 0 -k styles /tmp/full --max-elements 100000000  # + full-size exports

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
from kuiper_core.passes import optimize, pass_table  # noqa: E402
from kuiper_core.passes.exactness import outputs_difference  # noqa: E402
from kuiper_core.passes.sensitivity import o2_difference  # noqa: E402
from kuiper_core.pnnx import load_weights, parse_param  # noqa: E402
from kuiper_core.runtime import RuntimeGraph  # noqa: E402


def _outputs(graph, inputs: list[np.ndarray]) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    with np.errstate(all="ignore"):
        return [np.asarray(y) for y in RuntimeGraph.from_graph(graph).build().forward(*inputs)]


def input_sets(inputs: list[np.ndarray]) -> dict[str, list[np.ndarray]]:
    """The inputs as given (batch 1), at batch 2 (every input's dim 0 doubled: the second half
    other values) and with IEEE's special values: -0.0, ±inf and NaN in every float input."""
    rng = np.random.default_rng(7)

    def doubled(x: np.ndarray) -> np.ndarray:
        if x.ndim == 0:
            return x
        other = (x * 0.5 + 0.25).astype(x.dtype) if x.dtype.kind == "f" else x
        return np.concatenate([x, other], 0)

    def special(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind != "f" or x.size == 0:
            return x
        y = x.copy().reshape(-1)
        picks = rng.permutation(y.size)
        for value, at in zip((-0.0, np.inf, -np.inf, np.nan, 0.0), picks):
            y[at] = value
        y[picks[5::3]] = -0.0  # zeros of both signs everywhere, not only at one place
        return y.reshape(x.shape)

    return {"batch 1": inputs, "batch 2": [doubled(x) for x in inputs], "-0/inf/nan": [special(x) for x in inputs]}


def differences(graph, level: int, inputs: list[np.ndarray], only: str | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    """What -O`level` (or the pass `only` alone, with the passes it requires) changes in
    `graph`'s answers, for each input set on which the original runs (passes/exactness.py:
    -O1 exactly the same numbers, -O2 within float rounding)."""
    found = []
    optimised = optimize(graph, level, passes=[only] if only else None, required=[only] if only else ()).after
    for what, xs in input_sets(inputs).items():
        try:
            before = _outputs(graph, xs)
        except KuiperError:
            continue  # the original does not run on these inputs (a fixed batch): nothing to keep
        try:
            after = _outputs(optimised, xs)
        except KuiperError as e:
            found.append(f"{what}: the original runs, the optimised does not: {str(e)[:200]}")
            continue
        # -O2: beyond float rounding, judged by what rounding does to the original on these
        # inputs where they amplify it (efficientnet_precision/o0: passes/sensitivity.py)
        why = outputs_difference(before, after, exact=True) if level < 2 else o2_difference(graph, xs, before, after)[0]
        if why is not None:
            found.append(f"{what}: {why}")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", action="append", default=[], help="only cases whose path contains this (repeatable)")
    ap.add_argument("--per-case", type=int, default=30, help="mutants per case (default 30)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--each-pass", action="store_true", help="also run every pass alone on each intact export")
    ap.add_argument("--mem-mb", type=int, default=3000)
    ap.add_argument("--max-elements", type=int, default=1 << 22, help="largest tensor (full-size models need more)")
    ap.add_argument("folders", nargs="*", type=Path, help="other exports: every model.pnnx.param under these folders")
    args = ap.parse_args(argv)
    if args.mem_mb:  # 0: no limit (a test calling main in its own process)
        resource.setrlimit(resource.RLIMIT_AS, (args.mem_mb << 20, args.mem_mb << 20))
    rng = random.Random(args.seed)
    # + the pass-style exports (size_arith …) and other people's styles (Swin, detection heads …)
    globs = (*CASE_GLOBS, "passes/*/*/model.pnnx.param", "styles/*/*/model.pnnx.param")
    found = [p for g in globs for p in DATA.glob(g)] + [p for f in args.folders for p in f.rglob("model.pnnx.param")]
    cases = sorted({p.parent for p in found if (p.parent / "inputs.npz").exists()})
    cases = [c for c in cases if not args.k or any(k in str(c) for k in args.k)]
    small = limits.DEFAULT.replace(max_tensor_elements=args.max_elements)
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
            what = f"{case.relative_to(DATA) if case.is_relative_to(DATA) else case} " + (
                f"{job[2]}={job[3][:40]!r}" if job else "intact"
            )
            with limits.use(small):
                try:
                    graph = parse_param(text if job is None else mutate(text, job[0], job[2], job[3]), "m.pnnx.param")
                    load_weights(graph, case / "model.pnnx.bin")
                    _outputs(graph, inputs)  # a mutant that does not run at batch 1 is not a pass case
                except Exception:  # noqa: BLE001  -- a mutant that does not run: fuzz_params's business
                    continue
                ran += 1
                runs: list[tuple[int, str | None]] = [(1, None), (2, None)]
                if args.each_pass and job is None:  # every pass alone too, exact at its own level
                    runs += [(int(row["level"]), str(row["name"])) for row in pass_table()]  # type: ignore[call-overload]
                for level, only in runs:
                    what_run = f"-O{level}" if only is None else only
                    try:
                        bad = differences(graph, level, inputs, only)
                    except KuiperError as e:
                        if e.__cause__ is not None and not isinstance(e.__cause__, KuiperError):
                            findings.append(f"{what} {what_run}: wrapped {type(e.__cause__).__name__}: {str(e)[:200]}")
                        elif job is None:
                            findings.append(f"{what} {what_run}: no longer runs: {str(e)[:200]}")
                        continue
                    except Exception as e:  # noqa: BLE001  -- a finding
                        findings.append(f"{what} {what_run}: {type(e).__name__}: {str(e)[:200]}")
                        continue
                    findings += [f"{what} {what_run} {b}" for b in bad]
    print(f"{graphs} graphs ({len(cases)} cases), {ran} ran, {len(findings)} findings in {time.time() - t0:.0f}s")
    for f in findings:
        print("  " + f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
