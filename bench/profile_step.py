"""Where a Forward Step's time goes: server script run, websocket payload, browser main thread.

    python bench/profile_step.py [--model resnet18] [--steps 6] [--clicks 5]

For each Step on the Forward page (after a first, cold one): the latency to settled (as
bench/bench_app.py measures it), the script run's wall/CPU time (bench/timed_streamlit.py),
the bytes the server sent over the websocket and the elements in them (Streamlit's
ForwardMsg deltas, by type, with their sizes), and the browser's main-thread time split
by the DevTools Performance metrics (script, layout, style). Then the same for a burst of
quick clicks. The load average is printed: a shared machine slows the browser's part most.
"""

from __future__ import annotations

import argparse
import base64
import collections
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import bench_app  # noqa: E402
from app_server import chromium_page, streamlit_server  # noqa: E402

METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def _delta_kind(msg) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    """(what a ForwardMsg carries, e.g. 'delta:vega_lite_chart', its size in bytes)."""
    kind = msg.WhichOneof("type") or "?"
    if kind == "delta":
        d = msg.delta
        sub = d.WhichOneof("type") or "?"
        if sub == "new_element":
            sub = d.new_element.WhichOneof("type") or "?"
            if sub == "bidi_component":
                sub = "component:" + d.new_element.bidi_component.component_name.split(".")[-1]
        kind = f"delta:{sub}"
    return kind, msg.ByteSize()


class Wire:
    """The websocket frames the page receives (CDP Network events), decoded as ForwardMsgs."""

    def __init__(self, page) -> None:  # type: ignore[no-untyped-def]
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self._cls = ForwardMsg
        self.frames: list[bytes] = []
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.send("Performance.enable")
        self.cdp.on("Network.webSocketFrameReceived", self._on)

    def listen(self, on: bool) -> None:
        """Decode the frames (off while timing: the base64 copies cost the browser too)."""
        self.cdp.send("Network.enable" if on else "Network.disable")

    def _on(self, ev) -> None:  # type: ignore[no-untyped-def]
        r = ev["response"]
        if r.get("opcode") == 2:
            self.frames.append(base64.b64decode(r["payloadData"]))

    def take(self) -> tuple[int, collections.Counter, collections.Counter]:
        frames, self.frames = self.frames, []
        count: collections.Counter = collections.Counter()
        size: collections.Counter = collections.Counter()
        for f in frames:
            m = self._cls()
            m.ParseFromString(f)
            kind, n = _delta_kind(m)
            count[kind] += 1
            size[kind] += n
        return sum(len(f) for f in frames), count, size

    def metrics(self) -> dict[str, float]:
        got = {m["name"]: m["value"] for m in self.cdp.send("Performance.getMetrics")["metrics"]}
        return {k: got.get(k, 0.0) for k in METRICS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--clicks", type=int, default=5)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    bench_app.RUN_LOG.unlink(missing_ok=True)
    os.environ["KX_RUN_LOG"] = str(bench_app.RUN_LOG)
    launcher = [sys.executable, str(ROOT / "bench" / "timed_streamlit.py")]
    with streamlit_server(timeout=120, launcher=launcher) as url, chromium_page(1280, 720) as page:
        wire = Wire(page)
        page.goto(f"{url}/forward?model={args.model}")
        page.wait_for_selector(f"{bench_app.VIEW} .kx-stage svg g.node")
        bench_app.settle(page, "true")
        step = page.get_by_role("button", name="Step", exact=True)
        step.click()
        bench_app.settle(page, bench_app.forward_cond(1))
        wire.take()
        rows = []
        for _ in range(args.steps):  # timed, the network not watched
            k = bench_app.status_step(page)
            before = wire.metrics()
            t0 = time.perf_counter()
            step.click()
            done = bench_app.settle(page, bench_app.forward_cond(k + 1))
            after = wire.metrics()
            wall, cpu = bench_app.script_runs(t0, done + 0.01)
            browser = {m: round((after[m] - before[m]) * 1000) for m in METRICS}
            rows.append((done - t0, wall, cpu, browser))
            print(
                f"step {k + 1}: {(done - t0) * 1000:.0f} ms, script {wall * 1000:.0f} ms ({cpu * 1000:.0f} CPU); browser ms {browser}"
            )
        print(
            f"median: {statistics.median(r[0] for r in rows) * 1000:.0f} ms, script "
            f"{statistics.median(r[1] for r in rows) * 1000:.0f} ms "
            f"({statistics.median(r[2] for r in rows) * 1000:.0f} CPU), browser main thread "
            f"{statistics.median(r[3]['TaskDuration'] for r in rows)} ms"
        )
        wire.listen(True)  # one more step, its payload
        k = bench_app.status_step(page)
        step.click()
        bench_app.settle(page, bench_app.forward_cond(k + 1))
        total, count, size = wire.take()
        wire.listen(False)
        print(f"payload of step {k + 1}: {total / 1024:.1f} KB in {sum(count.values())} messages")
        for kind, n in size.most_common():
            print(f"    {kind:40s} x{count[kind]:3d} {n / 1024:8.1f} KB")
        if args.clicks:
            k = bench_app.status_step(page)
            before = wire.metrics()
            t0 = time.perf_counter()
            for _ in range(args.clicks):
                step.click(timeout=10_000)
            moved = f"(() => {{ const e = [...document.querySelectorAll('.kx-panel .kx-fw-status')].find(e => /^Operator \\d+ of/.test(e.innerText)); return e && +e.innerText.match(/^Operator (\\d+)/)[1] > {k}; }})()"
            done = bench_app.settle(page, moved)
            page.wait_for_timeout(500)
            if not page.evaluate(f"() => {bench_app.IDLE}"):
                done = bench_app.settle(page, moved)
            after = wire.metrics()
            wall, cpu = bench_app.script_runs(t0, done + 0.01)
            print(
                f"{args.clicks} quick clicks: {(done - t0) * 1000:.0f} ms, {bench_app.status_step(page) - k} steps, "
                f"script {wall * 1000:.0f} ms ({cpu * 1000:.0f} CPU), browser main thread "
                f"{round((after['TaskDuration'] - before['TaskDuration']) * 1000)} ms"
            )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
