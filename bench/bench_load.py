"""A classroom on one server: N students at once on the app, each acting every few seconds.

    python bench/bench_load.py                  # 30 students on one app process, then on two behind nginx
                                                # (~7 min); writes docs/classroom_server.md
    python bench/bench_load.py --processes 1    # one app process only
    python bench/bench_load.py --sessions 5 --duration 30 --processes 1 --out -   # a smoke test
    python bench/bench_load.py --url ws://127.0.0.1:8501 --out -       # a server started elsewhere (no RSS)

Each student (one websocket session speaking Streamlit's own protocol, `st_client.py`; no
browser) opens Home with `?model=resnet18`, picks seeded random input with a seed of its own,
then, one action every `--interval` seconds: Step on "Step through Forward" six times (the
position the browser reports to the server, as after a pause: stepping itself is in the browser), over
to "Execution order" (the loaded model), Step there six times, back to Forward, and so on
(Reset at the end). An action's latency is from the request to the server's
`script_finished`: the server's whole work for it (the browser's drawing is not counted).

What each student sees is checked against what it did alone: the Forward page names its own
position (its Go-to picker at operator k of 51) and its own seed, the tensor on screen has the min/max that
operand has for its seed (computed here by the engine on the same input), and the Execution
order page shows its own step. Any other is a cross-session leak.

Phases: warm-up (one session loads the model), baseline (one session, `--probe-actions`
Forward steps), load (N sessions over `--duration` s, started over `--ramp` s), recovery (all
disconnect; after `--settle` s, RSS again and one fresh session's latency). The server's RSS
is sampled every second. The app runs on loopback only (`--server.address 127.0.0.1`), with
`server.disconnectedSessionTTL` = `--session-ttl` so that closed sessions are let go of within
the run (Streamlit's default keeps them 120 s for a reconnect).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from st_client import ProtocolError, Session  # noqa: E402
from timing import median, quantile  # noqa: E402

FORWARD_RE = re.compile(r"^(\d+)\. (\S+) \(")  # the Go-to picker at the step the server drew
ORDER_RE = re.compile(r"^\*\*Step (\d+) of (\d+):\*\*")  # the loaded model's panel (the server draws it)
OPERAND_RE = re.compile(r"^`([^`]+)`: shape")
SEED_RE = re.compile(r"seeded random numbers \(seed (\d+)\)")
STEPS_PER_PAGE = 6  # a student's Steps on one page before going to the other (--steps-per-page)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--interval", type=float, default=3.0, help="seconds between one student's actions")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of load after the ramp")
    ap.add_argument("--ramp", type=float, default=30.0, help="seconds over which students arrive")
    ap.add_argument(
        "--settle",
        type=float,
        default=45.0,
        help="seconds after the load before recovery (the app frees sessions within their TTL + 20 s: pages/server.py)",
    )
    ap.add_argument("--session-ttl", type=int, default=5, help="server.disconnectedSessionTTL for the bench")
    ap.add_argument("--probe-actions", type=int, default=12, help="Forward steps of the lone session")
    ap.add_argument("--steps-per-page", type=int, default=STEPS_PER_PAGE, help="Steps on a page before the other")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[1, 2],
        help="app processes, one run per value: 1 alone, 2+ behind nginx (deploy/nginx.conf); default 1 then 2",
    )
    ap.add_argument("--port", type=int, default=8700, help="first port used (nginx, then the apps)")
    ap.add_argument("--url", help="ws://host:port of a running server instead of starting one (no RSS)")
    ap.add_argument("--seed", type=int, default=1, help="students' seeds are seed*1000 + i")
    ap.add_argument("--out", default=str(ROOT / "docs" / "classroom_server.md"), help="report ('-': none)")
    ap.add_argument("--json", default=str(BENCH / "results" / "load.json"))
    ap.add_argument("--max-seconds", type=float, default=900.0, help="hard limit for the whole run")
    args = ap.parse_args(argv)
    args.processes_all = list(args.processes)
    if args.url:
        args.processes = [1]
    if not 1 <= args.sessions <= 200:
        ap.error("--sessions must be 1..200")
    if args.duration > 1800 or args.ramp > 600:
        ap.error("--duration at most 1800 s, --ramp 600 s")
    return args


# -- servers -----------------------------------------------------------------------------------
@dataclass
class Servers:
    url: str
    pids: list[int] = field(default_factory=list)  # the app processes (RSS)
    ports: list[int] = field(default_factory=list)  # their ports
    procs: list[subprocess.Popen] = field(default_factory=list)
    tmp: Any = None
    describe: str = ""

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.tmp is not None:
            self.tmp.cleanup()


def _wait_healthy(port: int, proc: subprocess.Popen, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the server on port {port} did not answer within {seconds:.0f} s")


def start_servers(args: argparse.Namespace) -> Servers:
    if args.url:
        return Servers(url=args.url, describe=f"a running server at {args.url}")
    tmp = tempfile.TemporaryDirectory(prefix="kuiper-load-")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    servers = Servers(url="", tmp=tmp)
    app_ports = [args.port + 1 + i for i in range(args.processes)]
    try:
        for port in app_ports:
            cmd = [sys.executable, str(ROOT / "deploy" / "run_app.py"), "--port", str(port)]
            cmd += ["--", f"--server.disconnectedSessionTTL={args.session_ttl}"]
            log = open(Path(tmp.name) / f"app-{port}.log", "w")
            p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            servers.procs.append(p)
            servers.pids.append(p.pid)
        servers.ports = app_ports
        for port, p in zip(app_ports, servers.procs):
            _wait_healthy(port, p)
        if args.processes == 1:
            servers.url = f"ws://127.0.0.1:{app_ports[0]}"
            servers.describe = "one app process (deploy/run_app.py)"
            return servers
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(nginx).exists():
            raise RuntimeError("nginx not found (Debian: apt-get install nginx-light)")
        conf = Path(tmp.name) / "nginx.conf"
        conf.write_text(nginx_main_conf(tmp.name, f"127.0.0.1:{args.port}", [f"127.0.0.1:{p}" for p in app_ports]))
        p = subprocess.Popen(
            [nginx, "-p", tmp.name, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        servers.procs.append(p)
        _wait_healthy(args.port, p)
        servers.url = f"ws://127.0.0.1:{args.port}"
        servers.describe = (
            f"{args.processes} app processes behind nginx (deploy/nginx.conf: sticky by cookie, websockets proxied)"
        )
        return servers
    except BaseException:
        servers.stop()
        raise


def nginx_main_conf(prefix: str, listen: str, upstreams: list[str]) -> str:
    """deploy/nginx.conf (a site file) in a main config of its own, on loopback: its upstream's
    servers and its listen address rewritten, nginx in the foreground with files under `prefix`."""
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    body = "\n".join(f"    server {u};" for u in upstreams)
    site, n = re.subn(r"(upstream kuiper_app \{\s*hash [^;]+;\n)(?:\s*server [^;]+;\n)+", rf"\g<1>{body}\n", site)
    site, m = re.subn(r"listen 80;", f"listen {listen};", site)
    if n != 1 or m != 1:
        raise RuntimeError("deploy/nginx.conf: no 'upstream kuiper_app { hash ...; server ...; }' or 'listen 80;'")
    return (
        f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n  access_log off;\n  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n"
        f"{site}\n}}\n"
    )


def established_by_port(ports: list[int]) -> dict[int, int]:
    """Established TCP connections whose local port is one of `ports` (/proc/net/tcp*)."""
    counts = dict.fromkeys(ports, 0)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            port = int(f[1].rsplit(":", 1)[1], 16)
            if port in counts and f[3] == "01":  # ESTABLISHED
                counts[port] += 1
    return counts


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of the processes so far (/proc/PID/stat)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# -- what each student should see --------------------------------------------------------------
class Expected:
    """Per seed: the min/max of every operand, as the Forward page would show them (the app's
    own input maker and the engine, in this process)."""

    def __init__(self, model: str) -> None:
        import numpy as np

        from kuiper_core.explore import inputs as kx_inputs
        from kuiper_core.pnnx import load_graph
        from kuiper_core.runtime import RuntimeGraph

        samples = ROOT / "sample_models"
        meta = json.loads((samples / "models.json").read_text()).get(model, {})
        self.graph = load_graph(samples / f"{model}.pnnx.param", samples / f"{model}.pnnx.bin")
        self.rt = RuntimeGraph.from_graph(self.graph).build()
        self.specs = kx_inputs.input_specs(self.graph, meta.get("input_shape"))
        self.order = [r.name for r in self.rt.order]
        self._np = np
        self._inputs = kx_inputs
        self._cache: dict[int, dict[str, tuple[float, float]]] = {}

    def stats(self, seed: int) -> dict[str, tuple[float, float]]:
        if seed not in self._cache:
            arrays = [
                self._inputs.synthetic_input("random", shape, dtype, seed + i)
                for i, (_, shape, dtype) in enumerate(self.specs)
            ]
            gen = self.rt.steps(*arrays)
            out: dict[str, tuple[float, float]] = {}
            for _ in gen:
                pass
            for name, value in gen.values.items():
                a = self._np.asarray(value)
                if a.dtype.kind == "f" and a.size:
                    out[name] = (float(a.min()), float(a.max()))
            self._cache[seed] = out
        return self._cache[seed]


# -- a student ---------------------------------------------------------------------------------
@dataclass
class Record:
    session: int
    action: str
    start: float  # seconds since the run's start
    seconds: float
    received: int


@dataclass
class Student:
    index: int
    seed: int
    url: str
    expected: Expected
    t0: float
    records: list[Record] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    forward_pos: int = 0
    order_step: int | None = None
    page: str = ""
    steps_per_page: int = STEPS_PER_PAGE
    media: list[int] = field(default_factory=list)  # HTTP status of each picture fetched

    def _note(self, action: str, t_start: float, run: Any) -> None:
        self.records.append(Record(self.index, action, t_start - self.t0, run.seconds, run.received))

    def _leak(self, text: str) -> None:
        self.leaks.append(f"session {self.index} (seed {self.seed}): {text}")

    def check_forward(self, s: Session) -> None:
        texts = s.texts()
        seeds = {int(m.group(1)) for t in texts for m in SEED_RE.finditer(t)}
        if seeds != {self.seed}:
            self._leak(f"the page names seeds {sorted(seeds)}")
        shown = FORWARD_RE.match(s.current_option("Go to operator") or "")
        if self.forward_pos == 0:
            if shown is not None:
                self._leak(f"expected nothing run, the page shows operator {shown.group(1)}")
            return
        if shown is None:
            self._leak(f"expected operator {self.forward_pos}, the page shows none")
            return
        k, name = int(shown.group(1)), shown.group(2)
        if k != self.forward_pos or name != self.expected.order[k - 1]:
            self._leak(f"expected operator {self.forward_pos}, the page shows {k} ({name})")
            return
        operand = next((m.group(1) for t in texts if (m := OPERAND_RE.match(t))), None)
        frames = s.find_all("dataframe")
        if operand is None or not frames:
            return  # an operator without a tensor shown (none at ResNet-18)
        want = self.expected.stats(self.seed).get(operand)
        row = frames[0].table()[0]
        got = (float(row["min"]), float(row["max"]))
        if want is not None and not all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(got, want)):
            self._leak(f"operand {operand}: min/max {got} on screen, {want} for this seed")

    def check_order(self, s: Session) -> None:
        try:  # the walk's controls (steps in the browser) say the step the server drew
            k = int(s.component("kx_step_controls")["step"])
        except (ProtocolError, KeyError, TypeError, ValueError):
            self._leak("the Execution order page shows no step")
            return
        if k and not any(ORDER_RE.match(t) and int(ORDER_RE.match(t).group(1)) == k for t in s.texts()):
            self._leak(f"the Execution order panel does not show step {k}")
            return
        if self.order_step is not None and k != self.order_step:
            self._leak(f"expected Execution order step {self.order_step}, the page shows {k}")
        self.order_step = k

    async def fetch_media(self, s: Session) -> None:
        """The browser then fetches the page's pictures from the same server (Streamlit keeps
        them in the process that drew them): through a proxy, a miss means lost stickiness."""
        urls = s.image_urls()
        if urls:
            self.media.append(await s.fetch(urls[0] if urls[0].startswith("/") else "/" + urls[0]))

    async def act(self, s: Session, action: str, coro: Any) -> None:
        t = time.perf_counter()
        run = await coro
        self._note(action, t, run)

    async def setup(self, s: Session) -> None:
        t = time.perf_counter()
        self._note("open Home", t, await s.connect(""))
        await self.act(s, "choose input", s.choose("Input to use", "seeded random"))
        await self.act(s, "set seed", s.set_number("Seed", self.seed))
        await self.act(s, "open Forward", s.goto("forward"))
        self.page = "forward"
        self.check_forward(s)

    async def next_action(self, s: Session, n: int) -> None:
        per_page = self.steps_per_page
        if n % (per_page + 1) == per_page:  # the sidebar link to the other page
            if self.page == "forward":
                await self.act(s, "open Execution order", s.goto("order"))
                self.page = "order"
                if "The loaded model" not in (s.current_option("Graph") or "") or self.order_step is None:
                    await self.act(s, "pick the model", s.choose("Graph", "The loaded model"))
                    self.order_step = None  # a new walkthrough: its step is what the page says
                self.check_order(s)
            else:
                await self.act(s, "open Forward", s.goto("forward"))
                self.page = "forward"
                self.check_forward(s)
            return
        if self.page == "forward":
            # Steps move in the browser (pages/step_controls.py); the server hears the position
            # when the student pauses, or at once past the operators it has run: that report is
            # what a Step costs the server.
            if self.forward_pos >= len(self.expected.order):
                await self.act(s, "Forward: Reset", s.set_component_state("kx_step_controls", step=0))
                self.forward_pos = 0
            else:
                await self.act(s, "Forward: Step", forward_report(s, self.forward_pos + 1))
                self.forward_pos += 1
            self.check_forward(s)
            await self.fetch_media(s)
        else:
            # The loaded model's walk: the browser moves the position and reports it at once
            # (pages/step_controls.py); the server draws it.
            walk = s.component("kx_step_controls")
            if walk["step"] >= walk["total"]:
                await self.act(s, "Order: Reset", s.set_component_state("kx_step_controls", step=0))
                self.order_step = 0
            else:
                await self.act(s, "Order: Step", s.set_component_state("kx_step_controls", step=walk["step"] + 1))
                self.order_step = walk["step"] + 1
            self.check_order(s)

    async def run(self, start_delay: float, until: float, interval: float) -> None:
        await asyncio.sleep(start_delay)
        s = Session(self.url, query=f"model={self.expected_model}")
        try:
            await self.setup(s)
            n = 0
            next_at = time.perf_counter() + interval
            while True:
                now = time.perf_counter()
                if next_at > until:
                    break
                if next_at > now:
                    await asyncio.sleep(next_at - now)
                start = time.perf_counter()
                await self.next_action(s, n)
                n += 1
                next_at = max(start + interval, time.perf_counter())
        except (ProtocolError, TimeoutError, OSError, Exception) as e:  # a broken session is a result, not a crash
            self.errors.append(f"session {self.index}: {type(e).__name__}: {e}")
        finally:
            try:
                await s.close()
            except Exception:
                pass

    expected_model: str = "resnet18"


def forward_report(s: Session, step: int) -> Any:
    """What the Forward page's browser controls send the server for `step` (a pause on it)."""
    return s.set_component_state("kx_step_controls", step=step)


# -- phases ------------------------------------------------------------------------------------
async def lone_session(url: str, model: str, expected: Expected, seed: int, steps: int, t0: float) -> Student:
    """One student alone: open Forward, then `steps` Steps one after the other (no pause)."""
    st_ = Student(index=-1, seed=seed, url=url, expected=expected, t0=t0)
    st_.expected_model = model
    s = Session(url, query=f"model={model}")
    try:
        await st_.setup(s)
        for _ in range(steps):
            await st_.act(s, "Forward: Step", forward_report(s, st_.forward_pos + 1))
            st_.forward_pos += 1
            st_.check_forward(s)
            await asyncio.sleep(0.2)
    except Exception as e:
        st_.errors.append(f"lone session: {type(e).__name__}: {e}")
    finally:
        await s.close()
    return st_


async def sample_rss(pids: list[int], t0: float, samples: list[tuple[float, float]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append((time.perf_counter() - t0, rss_mib(pids)))
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


def summarize(records: list[Record]) -> dict[str, Any]:
    secs = [r.seconds for r in records]
    return {
        "actions": len(secs),
        "p50": median(secs) if secs else None,
        "p95": quantile(secs, 0.95) if secs else None,
        "max": max(secs) if secs else None,
        "kib_per_action": (sum(r.received for r in records) / len(records) / 1024) if records else None,
    }


async def run_bench(args: argparse.Namespace, servers: Servers) -> dict[str, Any]:
    expected = Expected(args.model)
    t0 = time.perf_counter()
    rss: list[tuple[float, float]] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(servers.pids, t0, rss, stop))
    phases: dict[str, Any] = {}
    marks: dict[str, float] = {}
    try:
        marks["start"] = 0.0
        warm = await lone_session(servers.url, args.model, expected, args.seed * 1000 + 999, 1, t0)
        phases["warm-up (first visit, model load)"] = summarize(warm.records)
        marks["rss_before"] = rss_mib(servers.pids)
        base = await lone_session(servers.url, args.model, expected, args.seed * 1000 + 998, args.probe_actions, t0)
        phases["one session, before"] = summarize([r for r in base.records if r.action == "Forward: Step"])
        marks["load_start"] = time.perf_counter() - t0
        load_before = loadavg()
        cpu_at: dict[str, float] = {}

        async def mark_cpu() -> None:  # the server's CPU time over the steady part of the load
            await asyncio.sleep(args.ramp)
            cpu_at["steady_start"] = cpu_seconds(servers.pids)
            cpu_at["steady_start_t"] = time.perf_counter()

        students = [
            Student(index=i, seed=args.seed * 1000 + i, url=servers.url, expected=expected, t0=t0)
            for i in range(args.sessions)
        ]
        seeds = [s.seed for s in students] + [args.seed * 1000 + 997]
        # Before the load (the checks must not hold up this client's event loop), in a thread
        # (the RSS sampler keeps running).
        await asyncio.to_thread(lambda: [expected.stats(seed) for seed in seeds])
        client_cpu0 = time.process_time()
        for s in students:
            s.expected_model = args.model
            s.steps_per_page = args.steps_per_page
        until = time.perf_counter() + args.ramp + args.duration
        rng = random.Random(args.seed)
        delays = sorted(rng.uniform(0, args.ramp) for _ in students)
        connections: dict[int, int] = {}

        async def count_connections() -> None:  # which app process holds how many websockets
            await asyncio.sleep(max(0.0, until - time.perf_counter() - args.interval * 2))
            connections.update(established_by_port(servers.ports))

        await asyncio.gather(
            count_connections(), mark_cpu(), *(s.run(d, until, args.interval) for s, d in zip(students, delays))
        )
        cpu_at["steady_end"] = cpu_seconds(servers.pids)
        client_cpu = time.process_time() - client_cpu0
        marks["load_end"] = time.perf_counter() - t0
        load_during = loadavg()
        steady_from = marks["load_start"] + args.ramp
        records = [r for s in students for r in s.records]
        steady = [
            r for r in records if r.start >= steady_from and not r.action.startswith(("open Home", "choose", "set"))
        ]
        phases[f"{args.sessions} sessions, all actions (steady, after the ramp)"] = summarize(steady)
        for kind in ("Forward: Step", "Order: Step", "open Forward", "open Execution order"):
            phases[f"{args.sessions} sessions, {kind}"] = summarize([r for r in steady if r.action == kind])
        phases[f"{args.sessions} sessions, arriving (open Home, input, seed)"] = summarize(
            [r for r in records if r.action in ("open Home", "choose input", "set seed")]
        )
        await asyncio.sleep(args.settle)
        marks["rss_after_settle"] = rss_mib(servers.pids)
        after = await lone_session(servers.url, args.model, expected, args.seed * 1000 + 997, args.probe_actions, t0)
        phases["one session, after"] = summarize([r for r in after.records if r.action == "Forward: Step"])
        marks["rss_after"] = rss_mib(servers.pids)
        marks["end"] = time.perf_counter() - t0
    finally:
        stop.set()
        await sampler
    everyone = [warm, base, *students, after]
    media = [code for s in everyone for code in s.media]
    leaks = [x for s in everyone for x in s.leaks]
    errors = [x for s in everyone for x in s.errors]
    during = [m for t, m in rss if marks["load_start"] <= t <= marks["load_end"]]
    steady_cpu = cpu_at["steady_end"] - cpu_at.get("steady_start", cpu_at["steady_end"])
    return {
        "client_cpu_share": client_cpu / max(1e-9, marks["load_end"] - marks["load_start"]),
        "server_cpu_steady": steady_cpu,
        "cpu_ms_per_action": 1e3 * steady_cpu / len(steady) if steady and servers.pids else None,
        "server_cores_used": steady_cpu / max(1e-9, marks["load_end"] + t0 - cpu_at.get("steady_start_t", 0))
        if servers.pids
        else None,
        "phases": phases,
        "marks": marks,
        "rss": rss,
        "rss_peak": max((m for _, m in rss), default=None),
        "rss_during_max": max(during, default=None),
        "leaks": leaks,
        "media_fetched": len(media),
        "media_failed": sum(1 for c in media if c != 200),
        "connections": connections,
        "errors": errors,
        "load_before": load_before,
        "load_during": load_during,
        "actions_per_second": len(steady) / max(1e-9, marks["load_end"] - steady_from),
    }


# -- report ------------------------------------------------------------------------------------
def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x * 1e3:.0f}"


def write_report(res: dict[str, Any], out: Path) -> None:
    a = res["args"]
    m = res["marks"]
    title = "One app process" if a["processes"] == 1 and not a["url"] else "Behind nginx" if not a["url"] else "Server"
    lines = [
        f"### {title}: {a['sessions']} students",
        "",
        f"Generated by `python bench/bench_load.py{res['argv']}` on {res['date']}. Do not edit by hand: rerun the "
        "command.",
        "",
        f"- Server: {res['servers']}; {a['sessions']} students, one action every {a['interval']:g} s each, "
        f"{a['duration']:g} s of load after a {a['ramp']:g} s ramp; model `{a['model']}`",
        f"- Machine: {res['machine']}; load average (1/5/15 min) {res['load_before']} before the load, "
        f"{res['load_during']} at its end ({res['cores']} cores, shared with other jobs)",
        "- Latency: from the request to the server's `script_finished` (Streamlit's own protocol, no browser "
        "drawing); p50/p95/max over the actions",
        "",
        "| phase | actions | p50 ms | p95 ms | max ms | KiB sent per action |",
        "|---|---|---|---|---|---|",
    ]
    for name, p in res["phases"].items():
        kib = "–" if p["kib_per_action"] is None else f"{p['kib_per_action']:.0f}"
        lines.append(f"| {name} | {p['actions']} | {_ms(p['p50'])} | {_ms(p['p95'])} | {_ms(p['max'])} | {kib} |")
    lines += [
        "",
        f"Actions served during the steady load: {res['actions_per_second']:.1f} per second"
        + (
            f"; the server's CPU time per action {res['cpu_ms_per_action']:.0f} ms (user + system, all its threads), "
            f"{res['server_cores_used']:.2f} cores busy on average. The load client itself (this script, one "
            f"process) kept {res['client_cpu_share']:.2f} cores busy."
            if res.get("cpu_ms_per_action")
            else "."
        ),
        "",
        "**Server memory** (RSS of the app processes, MiB): "
        + (
            f"{m.get('rss_before', 0):.0f} after the first visit, peak {res['rss_during_max'] or 0:.0f} under load, "
            f"{m.get('rss_after_settle', 0):.0f} {a['settle']:g} s after the students left (sessions kept "
            f"{a['session_ttl']} s for a reconnect), {m.get('rss_after', 0):.0f} after one more visit."
            if res["rss"] and res["rss"][-1][1]
            else "not measured (a server started elsewhere)."
        ),
        "",
        f"**Cross-session leaks**: {len(res['leaks'])}"
        + (" (every page showed its own student's position, seed and values)." if not res["leaks"] else ":"),
    ]
    lines += [f"- {x}" for x in res["leaks"][:20]]
    if res["media_fetched"]:
        lines += [
            "",
            f"**Pictures fetched over HTTP** after Forward steps (as the browser does; they live in the process "
            f"that drew them): {res['media_fetched']}, {res['media_failed']} failed"
            + (
                ". Websocket connections per app process near the end of the load: "
                + ", ".join(f"port {p}: {n}" for p, n in res["connections"].items())
                if len(res["connections"]) > 1
                else ""
            )
            + ".",
        ]
    lines += ["", f"**Sessions that broke**: {len(res['errors'])}" + ("." if not res["errors"] else ":")]
    lines += [f"- {x}" for x in res["errors"][:20]]
    if res["rss"] and res["rss"][-1][1]:
        lines += [
            "",
            f"RSS over the run (every 10 s; the load from {m['load_start']:.0f} s to {m['load_end']:.0f} s):",
            "",
        ]
        lines += ["| s | " + " | ".join(f"{t:.0f}" for t, _ in res["rss"][::10]) + " |"]
        lines += ["|---|" + "---|" * len(res["rss"][::10])]
        lines += ["| MiB | " + " | ".join(f"{v:.0f}" for _, v in res["rss"][::10]) + " |"]
    splice(out, f"load-{a['processes']}" if not a["url"] else "load-url", "\n".join(lines))


def splice(out: Path, name: str, block: str) -> None:
    """Put `block` between `<!-- NAME begin -->` and `<!-- NAME end -->` in `out` (the rest of
    the page is written by hand), or at its end; a file that does not exist is made."""
    begin, end = f"<!-- {name} begin -->", f"<!-- {name} end -->"
    text = out.read_text() if out.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + begin + "\n" + block + "\n" + end + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + begin + "\n" + block + "\n" + end + "\n"
    out.write_text(text)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return cpu


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = 0
    for processes in args.processes:  # one server set-up after the other, each its own report
        one = argparse.Namespace(**{**vars(args), "processes": processes})
        if processes > 1 and not args.url and not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
            print(f"{processes} processes: skipped, nginx is not installed (Debian: apt-get install nginx-light)")
            continue
        status = max(status, run_one(one))
    return status


def run_one(args: argparse.Namespace) -> int:
    servers = start_servers(args)
    try:
        res = asyncio.run(asyncio.wait_for(run_bench(args, servers), args.max_seconds))
    finally:
        servers.stop()
    res.update(
        args=vars(args),
        argv=" " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "",
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        servers=servers.describe,
        machine=machine(),
        cores=os.cpu_count(),
    )
    json_path = Path(args.json)
    if len(args.processes_all) > 1:
        json_path = json_path.with_name(f"{json_path.stem}-{args.processes}{json_path.suffix}")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"-- {servers.describe}")
    for name, p in res["phases"].items():
        print(f"{name:60s} n={p['actions']:4d} p50={_ms(p['p50']):>6s} ms p95={_ms(p['p95']):>6s} ms")
    if res.get("cpu_ms_per_action"):
        print(
            f"server CPU per action {res['cpu_ms_per_action']:.0f} ms; server cores busy {res['server_cores_used']:.2f}; "
            f"client cores busy {res['client_cpu_share']:.2f}"
        )
    print(
        f"RSS peak {res['rss_peak']} MiB; leaks {len(res['leaks'])}; broken sessions {len(res['errors'])}; "
        f"pictures {res['media_fetched']} fetched, {res['media_failed']} failed; connections {res['connections']}"
    )
    for x in (res["leaks"] + res["errors"])[:10]:
        print("  ", x)
    if args.out != "-":
        write_report(res, Path(args.out))
        print(f"report: {args.out}")
    return 1 if res["leaks"] or res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
