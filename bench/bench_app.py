"""The app's latency budget in a real browser (headless Chromium via Playwright).

Each measurement runs from the user's action (a click, a key, a link, a URL) to the page
*settled*: what the user waits for is on screen (the new step's status line and highlight,
the detail panel's heading, the page's drawing) and Streamlit has finished the run (no
status widget, no element still stale). Each is repeated and the median reported with the
budget of issue 23:

- Step / Back on Forward, a walkthrough step on Execution order, a click -> detail panel
  on Graph: <= 300 ms on digits_cnn and resnet18, <= 600 ms on deep1500;
- Home, first load of a new session: <= 1.5 s; any page by its sidebar link: <= 2 s;
- no queued-click stall: 5 quick clicks on Step settle within 5 budgets.

Also reported: a deep link to yolov5s_mini's last step, the Passes page at level 2 on
deep1500, deep1500's "Open all modules", the Expressions page by URL (budget 2 s, a page).

The server runs through bench/timed_streamlit.py, which logs each script run's wall and CPU
time: a measurement's "script run" is the time the server spent running the page script for
it (the rest is transfer and the browser drawing).

    python bench/bench_app.py [--runs 5] [--json bench/results/app_latency.json] [--md /tmp/table.md]
    python bench/bench_app.py --only home forward quick   # some groups of measurements (GROUPS)

The machine may be shared: medians of several runs, and the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from app_server import IDLE_JS, browser_missing, chromium_page, pick_bundled_model, streamlit_server  # noqa: E402

VIEW = ".kx-view"
IDLE = IDLE_JS
OPEN_ALL = "deep1500 'Open all modules', drawn on readable nodes"
WALK = "walkthrough step (Kahn, KuiperInfer's example)"
STEP_MS = {"digits_cnn": 300, "resnet18": 300, "deep1500": 600}
PAGES = {  # sidebar slug -> what says the page is drawn
    "graph": f"document.querySelector('{VIEW} .kx-stage svg g.node')",
    "order": f"document.querySelector('{VIEW} .kx-stage svg g.node')",
    "expressions": f"document.querySelector('{VIEW} .kx-stage svg g.node')",
    "forward": f"document.querySelector('{VIEW} .kx-stage svg g.node')",
    "profile": "[...document.querySelectorAll('h1')].some(h => h.textContent.startsWith('Profile of'))",
    "ir": "document.querySelector('.kx-ir')",
    "passes": "[...document.querySelectorAll('h3')].some(h => h.textContent.includes('Outputs checked'))",
}


def settle(page, cond: str, timeout_ms: int = 120_000) -> float:
    """Wait until `cond` (a JS expression) holds and the app is idle, twice 120 ms apart
    (a run that has not shown its status widget yet is not 'settled'); return the time of
    the first observation (perf_counter)."""
    while True:
        page.wait_for_function(f"() => ({cond}) && {IDLE}", polling="raf", timeout=timeout_ms)
        seen = time.perf_counter()
        page.wait_for_timeout(120)
        if page.evaluate(f"() => !!({cond}) && {IDLE}"):
            return seen


RUN_LOG = Path(tempfile.gettempdir()) / f"kx_runs_{os.getpid()}.log"  # bench/timed_streamlit.py writes it
SPLITS: dict[str, list[tuple[float, float]]] = {}  # label -> per action (script wall s, script CPU s)


def script_runs(t0: float, t1: float) -> tuple[float, float]:
    """Wall and CPU seconds of the script runs that ended between t0 and t1."""
    wall = cpu = 0.0
    if RUN_LOG.exists():
        for line in RUN_LOG.read_text().splitlines():
            end, w, c = (float(x) for x in line.split())
            if t0 <= end <= t1:
                wall, cpu = wall + w, cpu + c
    return wall, cpu


def timed(page, action: Callable[[], None], cond: str, label: str) -> float:
    t0 = time.perf_counter()
    action()
    done = settle(page, cond)
    SPLITS.setdefault(label, []).append(script_runs(t0, done + 0.01))
    return done - t0


def status_step(page) -> int:
    line = (
        page.locator(".kx-panel .kx-fw-status").filter(has_text=re.compile(r"^Operator \d+ of")).first
    )  # the step panel
    return int(re.match(r"Operator (\d+)", line.inner_text()).group(1)) if line.count() else 0


def forward_cond(k: int) -> str:
    return (
        f"[...document.querySelectorAll('.kx-panel .kx-fw-status')].some(e => e.innerText.startsWith('Operator {k} of'))"
        f" && document.querySelector('{VIEW}') && document.querySelector('{VIEW}').dataset.highlight"
    )


def forward_steps(page, url: str, model: str, n: int) -> tuple[list[float], list[float]]:
    page.goto(f"{url}/forward?model={model}")
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
    settle(page, "true")
    page.get_by_role("button", name="Step", exact=True).click()  # the first step (a cold one) is not counted
    settle(page, forward_cond(1))
    steps, backs = [], []
    for _ in range(n):
        k = status_step(page)
        steps.append(
            timed(
                page,
                lambda: page.get_by_role("button", name="Step", exact=True).click(),
                forward_cond(k + 1),
                f"Forward Step ({model})",
            )
        )
    for _ in range(min(n, 3)):
        k = status_step(page)
        backs.append(
            timed(
                page,
                lambda: page.get_by_role("button", name="Back", exact=True).click(),
                forward_cond(k - 1),
                f"Forward Back ({model})",
            )
        )
    return steps, backs


def queued_clicks(page, url: str, model: str, clicks: int = 5) -> tuple[float, int]:
    """5 quick Step clicks: seconds until the app is idle again with the step moved, and how
    many steps they made (Streamlit merges the clicks that arrive while a run is going on)."""
    page.goto(f"{url}/forward?model={model}")
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
    settle(page, "true")
    k = status_step(page)
    button = page.get_by_role("button", name="Step", exact=True)
    t0 = time.perf_counter()
    for _ in range(clicks):
        button.click(timeout=10_000)
    moved = (
        "(() => { const e = [...document.querySelectorAll('.kx-panel .kx-fw-status')]"
        ".find(e => /^Operator \\d+ of/.test(e.innerText));"
        f" return e && +e.innerText.match(/^Operator (\\d+)/)[1] > {k}; }})()"
    )
    done = settle(page, moved)
    page.wait_for_timeout(500)  # a merged click may still start one more run
    done = settle(page, moved) if not page.evaluate(f"() => {IDLE}") else done
    return done - t0, status_step(page) - k


def walkthrough_steps(page, url: str, source: str, n: int, label: str) -> list[float]:
    from urllib.parse import quote_plus

    page.goto(f"{url}/order?graph={quote_plus(source)}&algo=kahn")
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
    settle(page, "true")
    out = []
    for k in range(1, n + 1):
        cond = (
            f"[...document.querySelectorAll('p, strong')].some(e => e.textContent.startsWith('Step {k} of'))"
            f" && document.querySelector('{VIEW}').dataset.syncs"
        )
        out.append(timed(page, lambda: page.get_by_role("button", name="Step", exact=True).click(), cond, label))
    return out


def deep1500_module_mates(at: int = 800) -> list[str]:
    """An operator in the middle of deep1500 and the operators of its module (opened by the link)."""
    from kuiper_core.explore.modules import module_paths
    from kuiper_core.pnnx import read_param

    graph = read_param(ROOT / "sample_models" / "deep1500.pnnx.param")
    paths = module_paths(graph)
    link = graph.operators[at].name
    return [link] + [op.name for op in graph.operators if paths[op.name] == paths[link] and op.name != link][:4]


def click_details(page, url: str, model: str, names: list[str]) -> list[float]:
    page.goto(f"{url}/graph?model={model}&op={names[0]}")  # the link opens the modules around it
    page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
    settle(page, "true")
    out = []
    for name in names[1:]:

        def click(name: str = name) -> None:
            page.locator(VIEW).first.evaluate("(v, t) => v.kxCentre(t)", name)
            g = page.locator(f"{VIEW} .kx-stage svg g.node").filter(has=page.locator(f"title:text-is('{name}')"))
            g.first.click()

        cond = (
            f"[...document.querySelectorAll('h3')].some(h => h.textContent.trim() === {json.dumps(name)})"
            f" && document.querySelector('{VIEW}').dataset.highlight === {json.dumps(name)}"
        )
        out.append(timed(page, click, cond, f"click -> detail panel ({model})"))
    return out


def page_links(page, url: str, model: str) -> dict[str, float]:
    page.goto(url)
    settle(page, "document.querySelector('h1')")
    pick_bundled_model(page, model)
    out = {}
    for slug, cond in PAGES.items():
        link = lambda s=slug: page.click(f'[data-testid="stSidebarNav"] a[href*="/{s}"]')  # noqa: E731
        out[slug] = timed(page, link, cond, f"{slug} page by link ({model})")
        settle(page, "true")
    return out


def by_url(page, link: str, cond: str) -> float:
    t0 = time.perf_counter()
    page.goto(link)
    return settle(page, cond) - t0


GROUPS = ("home", "links", "forward", "quick", "walk", "click", "urls", "openall")


def median_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="repeats of each page-level measurement")
    ap.add_argument("--steps", type=int, default=6, help="steps per Step/Back measurement")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path, help="write the table as Markdown here")
    ap.add_argument("--only", nargs="+", choices=GROUPS, help="measure these groups only")
    args = ap.parse_args()

    def want(group: str) -> bool:
        return args.only is None or group in args.only

    why = browser_missing()
    if why:
        print(f"skipped: {why}")
        return 0
    rows: list[tuple[str, list[float], float | None, int | None, int | None]] = []  # what, s, budget, split ms

    def report(what: str, xs: list[float], budget: float | None, split: bool = True) -> None:
        parts = SPLITS.pop(what, []) if split else []
        server = round(statistics.median(p[0] for p in parts) * 1000) if parts else None
        cpu = round(statistics.median(p[1] for p in parts) * 1000) if parts else None
        rows.append((what, xs, budget, server, cpu))
        verdict = "" if budget is None else ("ok" if statistics.median(xs) <= budget else "OVER")
        more = f" [script {server} ms ({cpu} ms CPU)]" if parts else ""
        print(
            f"{what:58s} median {median_ms(xs):6d} ms  (n={len(xs)}, max {max(xs) * 1000:.0f}){more} {verdict}",
            flush=True,
        )

    print(f"load average before: {os.getloadavg()}")
    RUN_LOG.unlink(missing_ok=True)
    os.environ["KX_RUN_LOG"] = str(RUN_LOG)
    launcher = [sys.executable, str(ROOT / "bench" / "timed_streamlit.py")]
    with streamlit_server(timeout=120, launcher=launcher) as url:
        with chromium_page(1280, 720) as page:  # warm the server: imports, model caches
            page.goto(url)
            settle(page, "document.querySelector('h1')")
        home = []
        for _ in range(args.runs if want("home") else 0):
            with chromium_page(1280, 720) as page:  # a new browser, a new session
                t0 = time.perf_counter()
                page.goto(url)
                home.append(
                    settle(page, "[...document.querySelectorAll('h2')].some(h => h.textContent.includes('Summary of'))")
                    - t0
                )
        if home:
            report("Home, first load (new session)", home, 1.5, split=False)
        with chromium_page(1280, 720) as page:
            for model in ("digits_cnn", "resnet18") if want("links") else ():
                links: dict[str, list[float]] = {}
                for _ in range(args.runs):
                    for slug, s in page_links(page, url, model).items():
                        links.setdefault(slug, []).append(s)
                for slug, xs in links.items():
                    report(f"{slug} page by link ({model})", xs, 2.0)
            for model in STEP_MS if want("forward") else ():
                steps, backs = forward_steps(page, url, model, args.steps)
                report(f"Forward Step ({model})", steps, STEP_MS[model] / 1000)
                report(f"Forward Back ({model})", backs, STEP_MS[model] / 1000)
            for model in ("digits_cnn", "resnet18") if want("quick") else ():
                stall = [queued_clicks(page, url, model) for _ in range(max(1, args.runs - 1))]
                made = ", ".join(str(n) for _, n in stall)
                report(
                    f"5 quick Step clicks until idle ({model}; steps made: {made})",
                    [t for t, _ in stall],
                    5 * STEP_MS[model] / 1000,
                    split=False,
                )
            if want("walk"):
                report(WALK, walkthrough_steps(page, url, "KuiperInfer's worked example", args.steps, WALK), 0.3)
            for model, names in (
                (
                    ("digits_cnn", ["convbn2d_0", "relu", "convbn2d_1", "pool", "fc1", "fc2"]),
                    ("resnet18", ["convbn2d_1", "layer2.0.relu", "pnnx_expr_10", "fc", "convbn2d_17", "maxpool"]),
                    ("deep1500", deep1500_module_mates()),
                )
                if want("click")
                else ()
            ):
                report(
                    f"click -> detail panel ({model})", click_details(page, url, model, names), STEP_MS[model] / 1000
                )
            for what, link, cond in (
                (
                    (
                        "deep link: yolov5s_mini Forward step 166",
                        "/forward?model=yolov5s_mini&step=166",
                        forward_cond(166),
                    ),
                    ("Expressions by URL (expr_zoo)", "/expressions?model=expr_zoo", PAGES["expressions"]),
                    (
                        "Passes at level 2 on deep1500, by URL",
                        "/passes?model=deep1500&start=current&level=2",
                        PAGES["passes"],
                    ),
                )
                if want("urls")
                else ()
            ):
                report(what, [by_url(page, url + link, cond) for _ in range(args.runs)], 2.0, split=False)
            opened = []
            for _ in range(args.runs if want("openall") else 0):
                page.goto(f"{url}/graph?model=deep1500")
                page.wait_for_selector(f"{VIEW} .kx-stage svg g.node")
                settle(page, "true")
                page.get_by_role("button", name="Modules").click()
                cond = f"+document.querySelector('{VIEW}').dataset.nodes > 1500 && +document.querySelector('{VIEW}').dataset.inView > 0"
                opened.append(
                    timed(page, lambda: page.get_by_role("button", name="Open all modules").click(), cond, OPEN_ALL)
                )
                page.keyboard.press("Escape")
            if opened:
                report(OPEN_ALL, opened, 2.0)
    print(f"load average after: {os.getloadavg()}")
    result = [
        {
            "what": w,
            "median_ms": median_ms(xs),
            "max_ms": round(max(xs) * 1000),
            "n": len(xs),
            "budget_ms": None if b is None else round(b * 1000),
            "script_ms": server,
            "script_cpu_ms": cpu,
        }
        for w, xs, b, server, cpu in rows
    ]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.md:
        lines = [
            "| measurement | median | max | n | script run (CPU) | budget | |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in result:
            over = r["budget_ms"] is not None and r["median_ms"] > r["budget_ms"]
            ok = "" if r["budget_ms"] is None else f"**over by {r['median_ms'] - r['budget_ms']} ms**" if over else "ok"
            split = f"{r['script_ms']} ms ({r['script_cpu_ms']})" if r["script_ms"] is not None else "—"
            budget = f"{r['budget_ms']} ms" if r["budget_ms"] else "—"
            lines.append(
                f"| {r['what']} | {r['median_ms']} ms | {r['max_ms']} ms | {r['n']} | {split} | {budget} | {ok} |"
            )
        args.md.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
