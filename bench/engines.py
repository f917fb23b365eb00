"""One engine per process: the benchmark's worker and probe processes.

    python bench/engines.py worker ENGINE                # serve timing commands on stdin
    python bench/engines.py probe ENGINE CASE_DIR        # fresh-process load time and memory

ENGINE is `kuiper` (kuiper_core on the case's .pnnx.param), `torch` (PyTorch eager on
pnnx's generated model_pnnx.py) or `ort` (onnxruntime on torch.onnx.export's model.onnx).
The parent sets the threads (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / KUIPER_BENCH_THREADS)
and the OpenBLAS variables in the environment before this process starts.

Worker protocol: one JSON command per stdin line, one JSON reply per stdout line:
  {"cmd": "load", "case": DIR}              -> {"outputs": NPZ}  load, check, warm up
  {"cmd": "time", "case": DIR, "runs": n}   -> {"times": [s, ...]}  one untimed run first
  {"cmd": "steps", "case": DIR, "runs": n}  -> kuiper only: forward and steps() alternated
  {"cmd": "parse", "param": PATH, "runs": n} -> kuiper only: seconds to parse a .param
  {"cmd": "footing"}                         -> the BLAS and thread pools loaded here (threadpoolctl)
Nothing here imports NumPy or an engine at module level: the probe times imports too.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # no `typing`/`pathlib` at run time: the probe's clock counts every import
    from typing import Any
    from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = int(os.environ.get("KUIPER_BENCH_THREADS", "2"))
# The clock of the timed runs: wall time, or (KUIPER_BENCH_CLOCK=cpu) this process's CPU
# time, which other jobs on a busy machine barely disturb (meaningful with one thread only:
# with more it also counts the threads' spinning).
CLOCK = time.process_time if os.environ.get("KUIPER_BENCH_CLOCK") == "cpu" else time.perf_counter
WARMUP_RUNS, WARMUP_SECONDS = 3, 0.3


class Engine:
    """A loaded model: `run()` computes its outputs for the case's input."""

    def __init__(self, case_dir: str) -> None:
        self.dir = case_dir
        self.run: Callable[[], Any] = lambda: None

    def outputs(self) -> list[Any]:
        raise NotImplementedError


class Kuiper(Engine):
    def __init__(self, case_dir: str) -> None:
        super().__init__(case_dir)
        import numpy as np

        import kuiper_core

        executor = os.environ.get("KUIPER_BENCH_EXECUTOR", "auto")  # compare.py --executor
        self.graph = kuiper_core.load(os.path.join(case_dir, "model.pnnx.param"), executor=executor, threads=THREADS)  # type: ignore[arg-type]
        self.x = np.load(os.path.join(case_dir, "input.npy"))
        self.run = lambda: self.graph.forward(self.x)

    def outputs(self) -> list[Any]:
        return list(self.graph.forward(self.x))


class Torch(Engine):
    def __init__(self, case_dir: str) -> None:
        super().__init__(case_dir)
        import importlib.util

        import numpy as np
        import torch

        torch.set_num_threads(THREADS)
        spec = importlib.util.spec_from_file_location(
            f"pnnx_model_{abs(hash(str(case_dir)))}", os.path.join(case_dir, "model_pnnx.py")
        )
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.model = mod.Model().float().eval()
        self.x = torch.from_numpy(np.load(os.path.join(case_dir, "input.npy")))

        def run() -> Any:
            with torch.inference_mode():
                return self.model(self.x)

        self.run = run

    def outputs(self) -> list[Any]:
        y = self.run()
        return [t.numpy() for t in (y if isinstance(y, (tuple, list)) else (y,))]


class Ort(Engine):
    def __init__(self, case_dir: str) -> None:
        super().__init__(case_dir)
        import numpy as np
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = THREADS
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            os.path.join(case_dir, "model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        feed = {self.session.get_inputs()[0].name: np.load(os.path.join(case_dir, "input.npy"))}
        self.run = lambda: self.session.run(None, feed)

    def outputs(self) -> list[Any]:
        return list(self.run())


ENGINES: dict[str, type[Engine]] = {"kuiper": Kuiper, "torch": Torch, "ort": Ort}


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def probe(engine: str, case_dir: str) -> dict[str, Any]:
    """Load in this fresh process (imports included), then run a few times: time and memory."""
    t0 = CLOCK()
    if engine == "kuiper":
        import kuiper_core  # noqa: F401  (what `load` needs: the engine and NumPy)
    elif engine == "torch":
        import torch  # noqa: F401
    else:
        import onnxruntime  # noqa: F401
    t_import = CLOCK() - t0
    rss_imported = _rss_kib("VmRSS")
    t1 = CLOCK()
    eng = ENGINES[engine](case_dir)
    t_load = CLOCK() - t1
    loaded_at = time.time()  # the parent subtracts its spawn time: interpreter start included
    for _ in range(3):
        eng.run()
    return {
        "loaded_at": loaded_at,
        "import_s": t_import,
        "load_s": t_load,
        "first_load_s": t_import + t_load,
        "rss_imported_kib": rss_imported,
        "peak_rss_kib": _rss_kib("VmHWM"),
    }


def _warm_up(run: Callable[[], Any]) -> None:
    start = time.perf_counter()
    i = 0
    while i < WARMUP_RUNS or time.perf_counter() - start < WARMUP_SECONDS:
        run()
        i += 1


def _timed(run: Callable[[], Any], runs: int) -> list[float]:
    run()  # untimed: this engine's threads wake up after another engine's block
    times = []
    for _ in range(runs):
        t0 = CLOCK()
        run()
        times.append(CLOCK() - t0)
    return times


def _steps_compare(eng: Kuiper, runs: int) -> dict[str, Any]:
    """forward() and a full steps() walk alternated; per-type and per-operator step times
    from a third walk, clocked per step. The forward here is the one that runs what a walk
    runs, one operator at a time in this process: the whole forward (executor "auto")."""
    import kuiper_core

    graph, x = kuiper_core.load(os.path.join(eng.dir, "model.pnnx.param"), executor="auto"), eng.x
    graph.forward(x)
    fwd, stp = [], []
    per_type: dict[str, list[float]] = {}
    per_op: dict[str, list[float]] = {}
    for _ in graph.steps(x):  # untimed: the first walks at a signature make its arenas
        pass
    for _ in range(runs):
        t0 = CLOCK()
        graph.forward(x)
        fwd.append(CLOCK() - t0)
        t0 = CLOCK()
        for _ in graph.steps(x):  # step mode as a caller walks it
            pass
        stp.append(CLOCK() - t0)
        # Each operator's time by CLOCK (StepEvent.seconds is wall time): from one event to
        # the next, i.e. the generator's work for that operator. A walk of its own: the
        # clock calls cost ~1 us a step.
        events, seconds = [], []
        last = CLOCK()
        for ev in graph.steps(x):
            now = CLOCK()
            events.append(ev)
            seconds.append(now - last)
            last = now
        acc: dict[str, float] = {}
        for ev, dt in zip(events, seconds):
            acc[ev.type] = acc.get(ev.type, 0.0) + dt
            per_op.setdefault(f"{ev.name} ({ev.type})", []).append(dt)
        for k, v in acc.items():
            per_type.setdefault(k, []).append(v)
    counts: dict[str, int] = {}
    for rop in graph.order:
        counts[rop.type] = counts.get(rop.type, 0) + 1
    return {"forward": fwd, "steps": stp, "per_type": per_type, "per_op": per_op, "counts": counts}


def _torch_profile(eng: Torch, runs: int) -> dict[str, Any]:
    """PyTorch's time per aten operator type over `runs` forwards (torch.profiler's self
    time, which counts the profiler's own ~µs per operator): seconds per forward, and calls
    per forward. The counterpart of kuiper_core's per-type profile in the report."""
    from torch.profiler import ProfilerActivity, profile

    eng.run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(runs):
            eng.run()
    per_type: dict[str, float] = {}
    counts: dict[str, int] = {}
    for event in prof.key_averages():
        per_type[event.key] = event.self_cpu_time_total / 1e6 / runs  # µs in total -> s per forward
        counts[event.key] = event.count // runs
    return {"per_type": per_type, "counts": counts}


def _footing(engine: str) -> dict[str, Any]:
    """What this process computes with, after a model was loaded: every native thread pool
    (threadpoolctl: OpenBLAS's kernel set ("architecture") and thread count, OpenMP, MKL)
    and the engine's own thread setting."""
    out: dict[str, Any] = {"pools": []}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        out["pools"] = "threadpoolctl is not installed (pip install -e '.[export]')"
    else:
        keys = ("user_api", "internal_api", "version", "num_threads", "architecture", "threading_layer")
        out["pools"] = [{k: info.get(k) for k in keys if info.get(k) is not None} for info in threadpool_info()]
    if engine == "torch":
        import torch

        out["engine_threads"] = torch.get_num_threads()
        out["engine"] = f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}"
    elif engine == "ort":
        out["engine_threads"] = THREADS  # intra_op_num_threads (Ort above)
        out["engine"] = "onnxruntime CPUExecutionProvider"
    else:
        from kuiper_core.threads import blas_threads

        out["engine_threads"] = blas_threads()
        import numpy as np

        out["engine"] = f"NumPy {np.__version__}"
    return out


def _parse_times(param: str, runs: int) -> list[float]:
    from kuiper_core.pnnx.param import parse_param

    with open(param) as f:
        text = f.read()
    times = []
    for _ in range(runs):
        t0 = CLOCK()
        parse_param(text, str(param))
        times.append(CLOCK() - t0)
    return times


def worker(engine: str) -> None:
    import json

    import numpy as np

    # Replies go to the original stdout; anything a library prints goes to stderr.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    loaded: dict[str, Engine] = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            reply: dict[str, Any]
            if cmd["cmd"] == "load":
                case = cmd["case"]
                eng = loaded[case] = ENGINES[engine](case)
                out = os.path.join(case, f"outputs.{cmd.get('tag', engine)}.npz")
                np.savez(out, **{f"out{i}": np.asarray(a) for i, a in enumerate(eng.outputs())})
                _warm_up(eng.run)
                reply = {"outputs": out}
            elif cmd["cmd"] == "time":
                reply = {"times": _timed(loaded[cmd["case"]].run, cmd["runs"])}
            elif cmd["cmd"] == "unload":
                loaded.pop(cmd["case"], None)
                reply = {}
            elif cmd["cmd"] == "steps":
                eng = loaded[cmd["case"]]
                assert isinstance(eng, Kuiper)
                reply = _steps_compare(eng, cmd["runs"])
            elif cmd["cmd"] == "profile":
                eng = loaded[cmd["case"]]
                assert isinstance(eng, Torch)
                reply = _torch_profile(eng, cmd["runs"])
            elif cmd["cmd"] == "footing":
                reply = _footing(engine)
            elif cmd["cmd"] == "parse":
                reply = {"times": _parse_times(cmd["param"], cmd["runs"])}
            else:
                reply = {"error": f"unknown command {cmd['cmd']!r}"}
        except Exception as e:  # report, keep serving
            reply = {"error": f"{type(e).__name__}: {e}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main(argv: list[str]) -> int:
    sys.path.insert(0, ROOT)
    if len(argv) == 2 and argv[0] == "worker":
        worker(argv[1])
        return 0
    if len(argv) == 3 and argv[0] == "probe":
        result = probe(argv[1], argv[2])
        import json

        print(json.dumps(result))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
