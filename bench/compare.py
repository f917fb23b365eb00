"""kuiper_core vs PyTorch eager vs onnxruntime on every bundled model: the benchmark command.

    python bench/compare.py                  # everything (~10 min); writes docs/BENCHMARKS.md's bundled section
    python bench/compare.py --quick          # fewer runs and probes, a smoke test
    python bench/compare.py --cases resnet18 unet --out /tmp/b.md
    python bench/compare.py --suite outside  # torchvision models not in the project;
                                             # writes its section of docs/BENCHMARKS.md (needs torchvision)

In one run, for every case of bench/cases.py (each bundled model, ResNet-18 also at batch 4):
- converts the torch module (tools/samples/) afresh: pnnx (the .pnnx.param kuiper_core runs
  and the model_pnnx.py PyTorch eager runs) and torch.onnx.export (what onnxruntime runs);
- times every engine in its own process (bench/engines.py), 2 threads each, in alternating
  blocks: `--rounds` rounds, each engine in turn (rotating the order) doing one untimed and
  `--runs` timed runs, after a warm-up; the median of all runs per engine, and the ratio of
  medians with its spread over the rounds;
- checks each engine's outputs against the torch module's;
- probes each engine `--probes` times in a fresh process: first load (imports included) and
  peak memory (VmHWM);
- kuiper_core only: steps() against forward() alternated (step overhead), time per operator
  type and the slowest operators, and the parser on a 10,000-operator .param.
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (they choose NumPy's BLAS kernels: a machine that sets
them may force older ones; a user's does not) are unset for every engine process of this run,
and only there; `--blas-env both` also runs kuiper_core as the environment says. The report
states the footing each engine ran on: the BLAS kernel set and the thread pools, read by
threadpoolctl inside the timed processes.

Needs the `export` extra (torch, pnnx) and onnxruntime + onnx.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from cases import CASES, OUTSIDE_CASES, PER_OPERATOR_CASE, Case, write_wide_param  # noqa: E402
from report import write_report  # noqa: E402
from timing import median  # noqa: E402

BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--suite",
        choices=["bundled", "outside"],
        default="bundled",
        help="bundled (default): the bundled models, against issue 26's targets; outside: torchvision models "
        "not in the project (bench/cases.py OUTSIDE_CASES; needs torchvision, tools/torchvision_cpu.py)",
    )
    ap.add_argument("--cases", nargs="+", choices=[c.name for c in CASES + OUTSIDE_CASES], help="default: the suite's")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per case (default 5)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per engine and round (default 10)")
    ap.add_argument("--probes", type=int, default=3, help="fresh-process load/memory probes per engine (default 3)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--executor",
        choices=["auto", "prepared", "interpreter", "sharded", "split"],
        default="auto",
        help="kuiper_core's executor (kuiper_core.load(..., executor=)); default auto, what a caller gets",
    )
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="time runs by wall clock (default) or by the process's CPU time: on a busy shared "
        "machine, with --threads 1, CPU time compares the engines where wall time cannot",
    )
    ap.add_argument("--quick", action="store_true", help="2 rounds x 5 runs, 1 probe")
    ap.add_argument(
        "--out",
        type=Path,
        help="the report ('-': none; default docs/BENCHMARKS.md, whose section for this suite the run rewrites)",
    )
    ap.add_argument("--json", type=Path, help="raw results (default bench/results/compare.json, compare-outside.json)")
    ap.add_argument(
        "--workdir",
        type=Path,
        help="keep the converted models here (default: a temp dir); cases already converted there are reused",
    )
    ap.add_argument(
        "--blas-env",
        choices=["unset", "both"],
        default="unset",
        help="unset (default): OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for every engine; both: also kuiper_core "
        "with the environment's values (a column of its own)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.runs, args.probes = 2, 5, 1
    suffix = "" if args.suite == "bundled" else "-" + args.suite
    args.out = args.out or ROOT / "docs" / "BENCHMARKS.md"
    args.json = args.json or BENCH / "results" / f"compare{suffix}.json"
    return args


def variants(
    threads: int, clock: str = "wall", blas_env: str = "unset", executor: str = "auto"
) -> list[tuple[str, str, dict[str, str]]]:
    """(tag, engine, environment) for every process kind the run uses.

    Imports use compiled bytecode, as after `pip install` (which compiles it): an
    environment's PYTHONDONTWRITEBYTECODE would make every fresh process compile
    kuiper_core from source and the load times measure the compiler."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base.update(
        {
            "OPENBLAS_NUM_THREADS": str(threads),
            "OMP_NUM_THREADS": str(threads),
            "KUIPER_BENCH_THREADS": str(threads),
            "KUIPER_BENCH_CLOCK": clock,
            "KUIPER_BENCH_EXECUTOR": executor,
            "PYTHONPATH": str(ROOT),
        }
    )
    unset = {k: v for k, v in base.items() if k not in BLAS_VARS}
    if blas_env == "both" and any(v in os.environ for v in BLAS_VARS):
        # 'kuiper' as the environment says, 'kuiper_blas_auto' with the variables unset
        return [
            ("kuiper", "kuiper", base),
            ("kuiper_blas_auto", "kuiper", unset),
            ("torch", "torch", unset),
            ("ort", "ort", unset),
        ]
    return [("kuiper", "kuiper", unset), ("torch", "torch", unset), ("ort", "ort", unset)]


class Worker:
    """One engine process serving JSON commands (bench/engines.py worker)."""

    def __init__(self, tag: str, engine: str, env: dict[str, str], log: Path) -> None:
        self.tag = tag
        self.engine = engine
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH / "engines.py"), "worker", engine],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            text=True,
        )

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.tag} worker died (see {self.log.name})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.tag}: {reply['error']}")
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.log.close()


def prepare_cases(cases: list[Case], workdir: Path) -> dict[str, dict]:
    """Convert every case in a subprocess of its own (pnnx prints a lot, and may crash)."""
    metas = {}
    for case in cases:
        folder = workdir / case.name
        if (folder / "case.json").exists():  # converted by an earlier run into this --workdir
            metas[case.name] = json.loads((folder / "case.json").read_text())
            metas[case.name]["reused"] = True
            continue
        t0 = time.perf_counter()
        with open(workdir / f"{case.name}.prepare.log", "w") as log:
            code = (
                f"import sys; sys.path.insert(0, {str(BENCH)!r}); from pathlib import Path; import cases; "
                f"cases.prepare(cases.Case({case.name!r}, {case.sample!r}, {case.batch}, {case.source!r}), "
                f"Path({str(folder)!r}))"
            )
            res = subprocess.run([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        if res.returncode != 0:
            raise RuntimeError(f"converting {case.name} failed: see {workdir / (case.name + '.prepare.log')}")
        metas[case.name] = json.loads((folder / "case.json").read_text())
        print(
            f"  converted {case.name} ({metas[case.name]['operators']} operators) in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
    return metas


def probe(engine: str, env: dict[str, str], folder: Path) -> dict[str, Any]:
    spawned = time.time()
    res = subprocess.run(
        [sys.executable, str(BENCH / "engines.py"), "probe", engine, str(folder)],
        capture_output=True,
        text=True,
        env=env,
    )
    if res.returncode != 0:
        raise RuntimeError(f"{engine} probe on {folder.name} failed:\n{res.stderr[-2000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["since_spawn_s"] = out.pop("loaded_at") - spawned
    return out


def output_error(folder: Path, tag: str) -> dict[str, float]:
    """Largest |engine - torch module| over all outputs, absolute and relative to max |reference|."""
    import numpy as np

    with np.load(folder / "expected.npz") as ref, np.load(folder / f"outputs.{tag}.npz") as got:
        if len(ref.files) != len(got.files):
            return {"abs": float("nan"), "rel": float("nan")}
        worst_abs, worst_rel = 0.0, 0.0
        for k in ref.files:
            r, g = ref[k].astype(np.float64), got[k].astype(np.float64)
            if r.shape != g.shape:
                return {"abs": float("nan"), "rel": float("nan")}
            d = float(np.abs(r - g).max()) if r.size else 0.0
            worst_abs = max(worst_abs, d)
            worst_rel = max(worst_rel, d / max(float(np.abs(r).max()) if r.size else 0.0, 1e-12))
        return {"abs": worst_abs, "rel": worst_rel}


# Before each engine's block the others rest this long: onnxruntime's intra-op pool spins after
# a run, OpenBLAS's after a threaded GEMM, each holding a core for tens of ms, which a user
# running one engine never meets (kuiper on yolov5s_mini right after onnxruntime's block took
# about twice its time after a 0.3 s rest). The same for every engine.
IDLE_GAP_S = 0.3


def time_case(workers: list[Worker], folder: Path, rounds: int, runs: int) -> dict[str, Any]:
    for w in workers:
        w.ask(cmd="load", case=str(folder), tag=w.tag)
    times: dict[str, list[list[float]]] = {w.tag: [] for w in workers}
    for r in range(rounds):
        k = r % len(workers)
        for w in workers[k:] + workers[:k]:  # rotate who goes first
            time.sleep(IDLE_GAP_S)
            times[w.tag].append(w.ask(cmd="time", case=str(folder), runs=runs)["times"])
    result: dict[str, Any] = {"times": times, "error": {w.tag: output_error(folder, w.tag) for w in workers}}
    steps = {}
    for w in workers:
        if w.tag.startswith("kuiper"):
            steps[w.tag] = w.ask(cmd="steps", case=str(folder), runs=max(5, rounds * runs // 2))
    result["steps"] = steps
    result["torch_profile"] = {
        w.tag: w.ask(cmd="profile", case=str(folder), runs=max(5, runs)) for w in workers if w.engine == "torch"
    }
    for w in workers:
        w.ask(cmd="unload", case=str(folder))
    return result


def machine() -> dict[str, Any]:
    import numpy as np

    info: dict[str, Any] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
    }
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(
            line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")
        )
        flags = next(line for line in cpuinfo.splitlines() if line.startswith("flags")).split()
        info["simd"] = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")
    except (OSError, StopIteration):
        info["cpu"], info["simd"] = "?", "?"
    versions = {"numpy": np.__version__}
    for mod in ("torch", "onnxruntime", "onnx", "pnnx"):
        try:
            versions[mod] = str(__import__(mod).__version__)
        except (ImportError, AttributeError):
            versions[mod] = "?"
    info["versions"] = versions
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    info["blas"] = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    info["blas_env"] = {k: os.environ[k] for k in BLAS_VARS if k in os.environ}
    return info


def blas_kernels(env: dict[str, str]) -> str:
    """The kernel set OpenBLAS picks in a process with this environment."""
    code = (
        "import ctypes, numpy\n"
        "p = next(l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l.lower() and l.rstrip().endswith('.so'))\n"
        "lib = ctypes.CDLL(p)\n"
        "for s in ('scipy_openblas_get_corename64_', 'scipy_openblas_get_corename', 'openblas_get_corename64_', 'openblas_get_corename'):\n"
        "    f = getattr(lib, s, None)\n"
        "    if f is not None:\n"
        "        f.restype = ctypes.c_char_p; print(f().decode()); break\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return res.stdout.strip() or "?"


def loadavg() -> list[float]:
    return list(os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    suite = CASES if args.suite == "bundled" else OUTSIDE_CASES
    cases = [c for c in CASES + OUTSIDE_CASES if c.name in args.cases] if args.cases else suite
    kinds = variants(args.threads, args.clock, args.blas_env, args.executor)
    results: dict[str, Any] = {
        "machine": machine(),
        "threads": args.threads,
        "executor": args.executor,
        "clock": args.clock,
        "rounds": args.rounds,
        "runs": args.runs,
        "load_before": loadavg(),
        "kernels": {},
        "footing": {},
        "argv": sys.argv[1:] if argv is None else list(argv),
        "suite": args.suite,
        "blas_env": args.blas_env,
        "cases": {},
        "probes": {},
    }
    for tag, engine, env in kinds:
        if engine == "kuiper":
            results["kernels"][tag] = blas_kernels(env)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "kuiper_core")],
        check=True,
        env=kinds[0][2],
        stdout=subprocess.DEVNULL,
    )  # the bytecode (see variants)
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kuiper-bench-")
        workdir = Path(tmp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(f"converting {len(cases)} case(s) into {workdir}", flush=True)
        metas = prepare_cases(cases, workdir)
        results["meta"] = metas

        results["load_timing"] = loadavg()
        workers = [Worker(tag, engine, env, workdir / f"worker.{tag}.log") for tag, engine, env in kinds]
        try:
            for case in cases:
                t0 = time.perf_counter()
                results["cases"][case.name] = time_case(workers, workdir / case.name, args.rounds, args.runs)
                meds = {
                    t: 1e3 * median([x for blk in v for x in blk])
                    for t, v in results["cases"][case.name]["times"].items()
                }
                print(
                    f"  {case.name:14s} "
                    + "  ".join(f"{t} {m:.2f} ms" for t, m in meds.items())
                    + f"  ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
            for w in workers:  # after the timed runs: every library the engine uses is loaded
                results["footing"][w.tag] = w.ask(cmd="footing")
            wide = workdir / "wide10000.pnnx.param"
            n = write_wide_param(wide)
            kuiper = next(w for w in workers if w.tag == "kuiper")
            results["parse"] = {"operators": n, "times": kuiper.ask(cmd="parse", param=str(wide), runs=7)["times"]}
        finally:
            for w in workers:
                w.close()
        print("probing first load and peak memory in fresh processes", flush=True)
        for case in cases:
            results["probes"][case.name] = {
                tag: [probe(engine, env, workdir / case.name) for _ in range(args.probes)] for tag, engine, env in kinds
            }
    finally:
        results["load_after"] = loadavg()
        if tmp is not None:
            tmp.cleanup()

    results["per_operator_case"] = PER_OPERATOR_CASE
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results) + "\n")
    print(f"raw results: {args.json}")
    if str(args.out) != "-":
        write_report(results, args.out)
        print(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
