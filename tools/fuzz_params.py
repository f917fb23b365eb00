"""Fuzz every layer's params: single-param mutations of the op cases in tests/data/ops.

Each mutation replaces one `key=value` token of one operator line (or drops it) with a
hostile value (0, -1, huge ints, 4,400-digit ints, nan/inf, empty and overlong tuples,
strings, ...), then parses, builds and runs the model on the case's inputs. Only a
`KuiperError` may come out; anything else, a hang or a memory blow-up is a finding.

    python tools/fuzz_params.py                         # every case, ~40,000 mutations
    python tools/fuzz_params.py -k resize -k pad -v     # cases whose name contains these
    python tools/fuzz_params.py --mem-mb 1500 --timeout 10

Workers run one at a time in a subprocess under an RLIMIT_AS memory limit; a worker that
stops answering for `--timeout` seconds is killed, the mutation recorded as a hang, and a
new worker continues after it. Needs no torch (dev-only tool, not part of the suite; the
suite's fuzz tests are tests/test_fuzz_*.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "tests" / "data" / "ops"

HUGE_DIGITS = "9" * 4400  # past Python's 4,300-digit int-conversion limit

INT_VALUES = ["0", "-1", "1", "2", "-2", "3", "7", "-7", "64", "1000", "300000000", "-300000000", "2147483648",
              "9223372036854775807", "9223372036854775808", "-9223372036854775809", "100000000000000000000",
              HUGE_DIGITS, "-" + HUGE_DIGITS]
FLOAT_VALUES = ["0.0", "-0.0", "-1.0", "0.5", "1e-30", "1e308", "1e309", "-1e308", "nan", "inf", "-inf", "3e8",
                "20000.0", "1.0e-05"]
OTHER_VALUES = ["None", "True", "False", "abc", "", "()", "(,)", "(1,)", "(())", "[]", "(None)", "(a,b)", "(1.5,2.5)",
                "(0,0)", "(-1,-1)", "(20000,20000)", "(300000000)", "(1,1,1,1,1,1,1,1,1)", "(nan)", "(inf,-inf)",
                f"({HUGE_DIGITS})", "%x", "@0", "mul(@0,@0)", "(1,2,3,4,5,6,7,8,9,10,11,12)", "(0)", "(-1)",
                "nearest", "bilinear", "reflect", "circular", "replicate", "constant", "tanh", "relu", "x" * 5000]


def mutations_of(value: str, rng: random.Random, per_param: int) -> list[str]:
    """Hostile replacements for one param value (the text after '=')."""
    out: set[str] = set()
    out.update(INT_VALUES)
    out.update(FLOAT_VALUES)
    out.update(OTHER_VALUES)
    if value.startswith("(") and value.endswith(")"):
        items = value[1:-1].split(",") if value != "()" else []
        for i in range(len(items)):
            for v in INT_VALUES + FLOAT_VALUES + ["None", "abc", ""]:
                out.add("(" + ",".join(items[:i] + [v] + items[i + 1:]) + ")")
        out.add("(" + ",".join(items[:-1]) + ")")
        out.add("(" + ",".join(items + items[-1:]) + ")")
        out.add("(" + ",".join(items * 3) + ")")
    elif re.fullmatch(r"-?\d+", value):
        n = int(value)
        out.update(str(x) for x in (n + 1, n - 1, -n, n * 1000, n * 10**9, n + 10**6))
        out.update(f"({x})" for x in (n, n, n + 1))
    out.discard(value)
    ordered = sorted(out)
    rng.shuffle(ordered)
    return ordered[:per_param]


def jobs_for(case: Path, rng: random.Random, per_param: int) -> list[tuple[int, str, str, str]]:
    """(line index, op type, key, new value or '\\0drop') for every param of every operator."""
    lines = (case / "model.pnnx.param").read_text().split("\n")
    jobs = []
    for i, line in enumerate(lines[2:], start=2):
        toks = line.split()
        if len(toks) < 4 or toks[0] in ("pnnx.Input", "pnnx.Output"):
            continue
        for tok in toks[4:]:
            if "=" not in tok or tok[0] in "@$#":
                continue
            key, value = tok.split("=", 1)
            jobs.append((i, toks[0], key, "\0drop"))
            jobs += [(i, toks[0], key, v) for v in mutations_of(value, rng, per_param)]
    return jobs


def mutate(text: str, line: int, key: str, value: str) -> str:
    lines = text.split("\n")
    toks = lines[line].split(" ")
    for j, tok in enumerate(toks):
        if tok.startswith(key + "="):
            toks[j] = "" if value == "\0drop" else f"{key}={value}"
            break
    lines[line] = " ".join(toks)
    return "\n".join(lines)


# -- the worker ------------------------------------------------------------------------------------


def _worker(jobs: list[dict], start: int, mem_mb: int, max_elements: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from kuiper_core import limits

    limits._current.set(limits.current().replace(max_tensor_elements=max_elements))
    from kuiper_core.errors import KuiperError
    from kuiper_core.pnnx import load_weights, parse_param
    from kuiper_core.runtime import RuntimeGraph

    cache: dict[str, tuple[str, list]] = {}
    for job in jobs[start:]:
        case = Path(job["case"])
        if job["case"] not in cache:
            with np.load(case / "inputs.npz") as z:
                inputs = [z[f"in{i}"] for i in range(len(z.files))]
            cache.clear()
            cache[job["case"]] = ((case / "model.pnnx.param").read_text(), inputs)
        text, inputs = cache[job["case"]]
        mutated = mutate(text, job["line"], job["key"], job["value"])
        t0 = time.perf_counter()
        stage = "parse"
        try:
            graph = parse_param(mutated, "model.pnnx.param")
            load_weights(graph, case / "model.pnnx.bin")
            stage = "build"
            rg = RuntimeGraph.from_graph(graph).build()
            stage = "forward"
            ys = rg.forward(*inputs)
            for y in ys:
                if isinstance(y, np.ndarray) and y.size:
                    float(np.asarray(y.min()).real)  # what the CLI prints; must not hang
            kind, msg = "ok", ""
        except KuiperError as e:
            cause = e.__cause__
            if cause is not None and not isinstance(cause, KuiperError):
                kind, msg = f"wrapped:{type(cause).__name__}", str(e).split("\n")[0][:200]
            elif "ran out of memory" in str(e):  # the runtime's net, not a check before allocating
                kind, msg = "oom-net", str(e).split("\n")[0][:200]
            else:
                kind, msg = f"kuiper:{type(e).__name__}", str(e).split("\n")[0][:200]
        except BaseException as e:  # noqa: BLE001  -- a finding
            kind, msg = f"escaped:{type(e).__name__}", f"{e}"[:200]
        dt = time.perf_counter() - t0
        print(json.dumps({"id": job["id"], "kind": kind, "stage": stage, "msg": msg, "seconds": round(dt, 3)}), flush=True)


# -- the parent -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", action="append", default=[], help="only cases whose name contains this (repeatable)")
    ap.add_argument("--per-param", type=int, default=40, help="mutations per param (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mem-mb", type=int, default=2000, help="worker address-space limit (MB)")
    ap.add_argument("--max-elements", type=int, default=1 << 24,
                    help="the engine's max_tensor_elements in the worker (default 2^24, a few such tensors fit --mem-mb)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds one mutation may take")
    ap.add_argument("--slow", type=float, default=2.0, help="report mutations slower than this")
    ap.add_argument("--json", help="write every finding here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each finding as it comes")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # run jobs from this index
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    cases = sorted(p.parent for p in OPS.glob("*/model.pnnx.param"))
    if args.k:
        cases = [c for c in cases if any(k in c.name for k in args.k)]
    jobs = []
    for case in cases:
        for line, op_type, key, value in jobs_for(case, rng, args.per_param):
            jobs.append({"id": len(jobs), "case": str(case), "line": line, "op": op_type, "key": key, "value": value})
    if args.worker is not None:
        _worker(jobs, args.worker, args.mem_mb, args.max_elements)
        return 0
    print(f"{len(jobs)} mutations of {len(cases)} cases", flush=True)

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    results: dict[int, dict] = {}
    pos = 0
    t_start = time.time()
    while pos < len(jobs):
        cmd = [sys.executable, __file__, "--worker", str(pos), "--mem-mb", str(args.mem_mb), "--seed", str(args.seed),
               "--per-param", str(args.per_param), "--max-elements", str(args.max_elements)] + [f"-k{k}" for k in args.k]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert proc.stdout is not None
        while pos < len(jobs):
            ready, _, _ = select.select([proc.stdout], [], [], args.timeout)
            if not ready:
                results[pos] = {"id": pos, "kind": "hang", "stage": "?", "msg": f"no answer in {args.timeout}s", "seconds": args.timeout}
                proc.kill()
                pos += 1
                break
            line = proc.stdout.readline()
            if not line:  # the worker died (killed by the kernel, a segfault, ...)
                proc.wait()
                results[pos] = {"id": pos, "kind": f"died:{proc.returncode}", "stage": "?", "msg": "", "seconds": 0}
                pos += 1
                break
            r = json.loads(line)
            results[r["id"]] = r
            pos = r["id"] + 1
            if pos % 2000 == 0:
                print(f"  {pos}/{len(jobs)} ({time.time() - t_start:.0f}s)", flush=True)
            if args.verbose and _is_finding(r, args.slow):
                _print_finding(jobs[r["id"]], r)
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    kinds = Counter(r["kind"] for r in results.values())
    findings = [(jobs[i], r) for i, r in sorted(results.items()) if _is_finding(r, args.slow)]
    print(f"\n{len(jobs)} mutations in {time.time() - t_start:.0f}s: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    groups: dict[tuple, list] = defaultdict(list)
    for job, r in findings:
        groups[(r["kind"], r["stage"], job["op"], job["key"])].append((job, r))
    print(f"{len(findings)} findings in {len(groups)} groups")
    for (kind, stage, op_type, key), items in sorted(groups.items()):
        job, r = items[0]
        print(f"  {kind:22} {stage:8} {op_type:24} {key:16} x{len(items):<4} {Path(job['case']).name}  e.g. {key}={job['value'][:40]!r}: {r['msg'][:120]}")
    if args.json:
        Path(args.json).write_text(json.dumps([{**j, **r} for j, r in findings], indent=1))
    return 1 if findings else 0


def _is_finding(r: dict, slow: float) -> bool:
    return not (r["kind"] == "ok" or r["kind"].startswith("kuiper:")) or r["seconds"] > slow


def _print_finding(job: dict, r: dict) -> None:
    print(f"  {r['kind']} {r['stage']} {Path(job['case']).name} {job['key']}={job['value'][:40]!r} "
          f"({r['seconds']}s): {r['msg'][:160]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
