"""Fuzz every layer's params: single-param mutations of the real exports in tests/data
(the op cases at each optlevel, tests/data/ops*, and the optlevel models).

Each mutation replaces one `key=value` token of one operator line (or drops it) with a
hostile value (0, -1, huge ints, 4,400-digit ints, nan/inf, empty and overlong tuples,
strings, ...), then parses, builds and runs the model on the case's inputs. Only a
`KuiperError` may come out; anything else, a hang or a memory blow-up is a finding.

    python tools/fuzz_params.py                         # every case, ~90,000 mutations (~2 min)
    python tools/fuzz_params.py -k resize -k pad -v     # cases whose name contains these
    python tools/fuzz_params.py --mem-mb 1500 --timeout 10

Workers run one at a time in a subprocess under an RLIMIT_AS memory limit; a worker that
stops answering for `--timeout` seconds is killed, the mutation recorded as a hang, and a
new worker continues after it. Needs no torch (dev-only tool, not part of the suite; the
suite's fuzz tests are tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from _supervise import serve, supervise

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
# Every real export with its inputs: the op cases at each optlevel and the optlevel models.
CASE_GLOBS = ("ops/*/model.pnnx.param", "ops_o*/*/model.pnnx.param", "optlevel/*/*/model.pnnx.param")

HUGE_DIGITS = "9" * 4400  # past Python's 4,300-digit int-conversion limit

INT_VALUES = [
    "0",
    "-1",
    "1",
    "2",
    "-2",
    "3",
    "7",
    "-7",
    "64",
    "1000",
    "300000000",
    "-300000000",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "100000000000000000000",
    HUGE_DIGITS,
    "-" + HUGE_DIGITS,
]
FLOAT_VALUES = [
    "0.0",
    "-0.0",
    "-1.0",
    "0.5",
    "1e-30",
    "1e308",
    "1e309",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "3e8",
    "20000.0",
    "1.0e-05",
]
OTHER_VALUES = [
    "None",
    "True",
    "False",
    "abc",
    "",
    "()",
    "(,)",
    "(1,)",
    "(())",
    "[]",
    "(None)",
    "(a,b)",
    "(1.5,2.5)",
    "(0,0)",
    "(-1,-1)",
    "(20000,20000)",
    "(300000000)",
    "(1,1,1,1,1,1,1,1,1)",
    "(nan)",
    "(inf,-inf)",
    f"({HUGE_DIGITS})",
    "%x",
    "@0",
    "mul(@0,@0)",
    "(1,2,3,4,5,6,7,8,9,10,11,12)",
    "(0)",
    "(-1)",
    "nearest",
    "bilinear",
    "reflect",
    "circular",
    "replicate",
    "constant",
    "tanh",
    "relu",
    "x" * 5000,
]


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
                out.add("(" + ",".join(items[:i] + [v] + items[i + 1 :]) + ")")
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


def _runner(max_elements: int):  # type: ignore[no-untyped-def]
    """The worker's job function (imports the engine in the worker only)."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from kuiper_core import limits
    from kuiper_core.errors import KuiperError
    from kuiper_core.pnnx import load_weights, parse_param
    from kuiper_core.runtime import RuntimeGraph

    small = limits.current().replace(max_tensor_elements=max_elements)
    cache: dict[str, tuple[str, list]] = {}

    def run_one(job: dict) -> dict:
        case = Path(job["case"])
        if job["case"] not in cache:
            with np.load(case / "inputs.npz") as z:
                inputs = [z[f"in{i}"] for i in range(len(z.files))]
            cache.clear()
            cache[job["case"]] = ((case / "model.pnnx.param").read_text(), inputs)
        text, inputs = cache[job["case"]]
        mutated = mutate(text, job["line"], job["key"], job["value"])
        stage = "parse"
        try:
            with limits.use(small):
                graph = parse_param(mutated, "model.pnnx.param")
                load_weights(graph, case / "model.pnnx.bin")
                stage = "build"
                rg = RuntimeGraph.from_graph(graph).build()
            stage = "forward"
            for y in rg.forward(*inputs):
                if isinstance(y, np.ndarray) and y.size and y.dtype.kind in "biuf":
                    float(y.min())  # what the CLI prints; must not hang
            return {"kind": "ok", "stage": stage, "msg": ""}
        except KuiperError as e:
            msg = str(e).split("\n")[0][:200]
            cause = e.__cause__
            if cause is not None and not isinstance(cause, KuiperError):
                return {"kind": f"wrapped:{type(cause).__name__}", "stage": stage, "msg": msg}
            if "ran out of memory" in msg:  # the runtime's net, not a check before allocating
                return {"kind": "oom-net", "stage": stage, "msg": msg}
            return {"kind": f"kuiper:{type(e).__name__}", "stage": stage, "msg": msg}
        except BaseException as e:  # noqa: BLE001  -- a finding
            return {"kind": f"escaped:{type(e).__name__}", "stage": stage, "msg": f"{e}"[:200]}

    return run_one


# -- the parent -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", action="append", default=[], help="only cases whose name contains this (repeatable)")
    ap.add_argument("--per-param", type=int, default=40, help="mutations per param (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mem-mb", type=int, default=2000, help="worker address-space limit (MB)")
    ap.add_argument(
        "--max-elements",
        type=int,
        default=1 << 24,
        help="the engine's max_tensor_elements in the worker (default 2^24, a few such tensors fit --mem-mb)",
    )
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds one mutation may take")
    ap.add_argument("--slow", type=float, default=2.0, help="report mutations slower than this")
    ap.add_argument("--json", help="write every finding here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each finding as it comes")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # run jobs from this index
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    cases = sorted({p.parent for g in CASE_GLOBS for p in DATA.glob(g) if (p.parent / "inputs.npz").exists()})
    if args.k:
        cases = [c for c in cases if any(k in str(c.relative_to(DATA)) for k in args.k)]
    jobs = []
    for case in cases:
        for line, op_type, key, value in jobs_for(case, rng, args.per_param):
            jobs.append({"id": len(jobs), "case": str(case), "line": line, "op": op_type, "key": key, "value": value})
    if args.worker is not None:
        serve(jobs, args.worker, args.mem_mb, _runner(args.max_elements))
        return 0
    print(f"{len(jobs)} mutations of {len(cases)} cases", flush=True)

    def worker_argv(start: int) -> list[str]:
        return [
            sys.executable,
            __file__,
            "--worker",
            str(start),
            "--mem-mb",
            str(args.mem_mb),
            "--seed",
            str(args.seed),
            "--per-param",
            str(args.per_param),
            "--max-elements",
            str(args.max_elements),
        ] + [f"-k{k}" for k in args.k]

    def show(r: dict) -> None:
        if args.verbose and _is_finding(r, args.slow):
            _print_finding(jobs[r["id"]], r)

    t_start = time.time()
    results = supervise(len(jobs), worker_argv, timeout=args.timeout, on_result=show)
    kinds = Counter(r["kind"] for r in results.values())
    findings = [(jobs[i], r) for i, r in sorted(results.items()) if _is_finding(r, args.slow)]
    print(
        f"\n{len(jobs)} mutations in {time.time() - t_start:.0f}s: "
        + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
    )
    groups: dict[tuple, list] = defaultdict(list)
    for job, r in findings:
        groups[(r["kind"], r.get("stage", "?"), job["op"], job["key"])].append((job, r))
    print(f"{len(findings)} findings in {len(groups)} groups")
    for (kind, stage, op_type, key), items in sorted(groups.items()):
        job, r = items[0]
        print(
            f"  {kind:22} {stage:8} {op_type:24} {key:16} x{len(items):<4} {Path(job['case']).relative_to(DATA)}  e.g. {key}={job['value'][:40]!r}: {r['msg'][:120]}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps([{**j, **r} for j, r in findings], indent=1))
    return 1 if findings else 0


def _is_finding(r: dict, slow: float) -> bool:
    return not (r["kind"] == "ok" or r["kind"].startswith("kuiper:")) or r["seconds"] > slow


def _print_finding(job: dict, r: dict) -> None:
    print(
        f"  {r['kind']} {r.get('stage', '?')} {Path(job['case']).relative_to(DATA)} {job['key']}={job['value'][:40]!r} "
        f"({r['seconds']}s): {r['msg'][:160]}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
