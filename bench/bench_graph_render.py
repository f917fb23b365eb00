"""How fast the app answers in a real browser (headless Chromium via Playwright).

Starts `streamlit run app.py` on a free port and measures, each from the user's action to
what the user waits for being on screen:

- graph page first render of the 1,502-operator model (budget 3 s), and the same graph
  with every module opened (1,502 nodes);
- the operator detail panel after a click on a node of the graph (target under 1 s), on
  resnet18 and on an operator inside an opened module of deep1500;
- one Forward step (click Step until the status line and the graph's highlight moved), on
  resnet18 and deep1500;
- the Expressions page's largest tree (expr_zoo) on a 1280x720 screen.

    python bench/bench_graph_render.py [--runs 3] [--json bench/results/app_latency.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from app_server import (  # noqa: E402
    VIEW,
    VIEW_SVG,
    browser_missing,
    chromium_page,
    click_node,
    graph_render_seconds,
    streamlit_server,
    wait_highlight,
    wait_idle,
)

from kuiper_core.explore.modules import module_paths  # noqa: E402
from kuiper_core.pnnx import read_param  # noqa: E402

MODEL = "deep1500"
BUDGET_S = 3.0
DETAIL_TARGET_S = 1.0


def full_detail_seconds(page) -> tuple[float, int]:
    """Open every module of the already-open Graph page and time the full redraw."""
    page.get_by_role("button", name="Modules").click()
    t0 = time.perf_counter()
    page.get_by_role("button", name="Open all modules").click()
    page.wait_for_function(f"() => document.querySelectorAll('{VIEW_SVG} g.node').length > 1500", timeout=300_000)
    seconds = time.perf_counter() - t0
    nodes = page.locator(f"{VIEW_SVG} g.node").count()
    page.keyboard.press("Escape")
    wait_idle(page)
    return seconds, nodes


def fit(page) -> None:
    page.locator(f"{VIEW} .kx-tools button[data-act=fit]").click()


def detail_seconds(page, names: list[str]) -> list[float]:
    """Click each node and wait for its detail panel (heading) and highlight."""
    out = []
    for name in names:
        fit(page)
        t0 = time.perf_counter()
        click_node(page, name)
        page.get_by_role("heading", name=name).wait_for()
        wait_highlight(page, name)
        out.append(time.perf_counter() - t0)
        wait_idle(page)
    return out


def step_seconds(page, n: int) -> list[float]:
    """Press Step n times, timing each until the status line and the highlight moved."""
    out = []
    for _ in range(n):
        line = page.locator('[data-testid="stMarkdown"]').filter(has_text=re.compile(r"^Operator \d+ of")).first
        k = int(re.match(r"Operator (\d+)", line.inner_text()).group(1)) if line.count() else 0
        t0 = time.perf_counter()
        page.get_by_role("button", name="Step", exact=True).click()
        page.get_by_text(re.compile(rf"^Operator {k + 1} of")).wait_for()
        page.wait_for_function(
            f"""() => {{ const v = document.querySelector('{VIEW}'); return v && v.dataset.highlight &&
                        [...v.querySelectorAll('g.node.kx-current')].length > 0; }}"""
        )
        out.append(time.perf_counter() - t0)
        wait_idle(page)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-full", action="store_true", help="skip the full-detail render")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    why = browser_missing()
    if why:
        print(f"skipped: {why}")
        return 0
    first: list[float] = []
    full = None
    result: dict[str, object] = {"model": MODEL, "budget_s": BUDGET_S, "detail_target_s": DETAIL_TARGET_S}
    with streamlit_server(timeout=120) as url:
        for run in range(args.runs):
            with chromium_page() as page:  # a fresh browser profile = a new session
                page.goto(url)
                page.get_by_text("Kuiper Explorer").first.wait_for()
                wait_idle(page)
                seconds, nodes = graph_render_seconds(page, MODEL)
                first.append(seconds)
                print(f"run {run + 1}: graph page first render {seconds:.2f} s ({nodes} SVG nodes, modules closed)")
                if run == 0 and not args.no_full:
                    full = full_detail_seconds(page)
                    print(f"        every module open: {full[0]:.2f} s ({full[1]} SVG nodes)")
        with chromium_page() as page:
            page.goto(url + "/graph?model=resnet18")
            page.wait_for_selector(f"{VIEW_SVG} g.node")
            wait_idle(page)
            resnet = detail_seconds(
                page, ["convbn2d_1", "layer2.0.relu", "pnnx_expr_10", "fc", "convbn2d_17", "maxpool"]
            )
            graph = read_param(ROOT / "sample_models" / "deep1500.pnnx.param")
            paths = module_paths(graph)
            link = graph.operators[800].name
            near = [op.name for op in graph.operators if paths[op.name] == paths[link] and op.name != link][:3]
            page.goto(url + f"/graph?model=deep1500&op={link}")  # its module opened by the link
            page.wait_for_selector(f"{VIEW_SVG} g.node")
            wait_idle(page)
            deep = detail_seconds(page, near)
            print(
                f"detail panel after a click: resnet18 median {statistics.median(resnet):.2f} s "
                f"(max {max(resnet):.2f}), deep1500 median {statistics.median(deep):.2f} s (max {max(deep):.2f})"
            )
            result.update(detail_resnet18_s=resnet, detail_deep1500_s=deep)
            for model in ("resnet18", "deep1500"):
                page.goto(url + f"/forward?model={model}")
                page.wait_for_selector(f"{VIEW_SVG} g.node")
                wait_idle(page)
                steps = step_seconds(page, 6)
                print(f"forward step ({model}): median {statistics.median(steps):.2f} s (max {max(steps):.2f})")
                result[f"step_{model}_s"] = steps
        with chromium_page(width=1280, height=720) as page:
            t0 = time.perf_counter()
            page.goto(url + "/expressions?model=expr_zoo")
            page.wait_for_selector(f"{VIEW_SVG} g.node")
            ast = time.perf_counter() - t0
            print(f"expressions page with its largest tree, from the link: {ast:.2f} s")
            result["expressions_first_s"] = ast
    result.update(
        first_render_s=first,
        first_render_median_s=statistics.median(first),
        full_detail_s=full[0] if full else None,
        full_detail_nodes=full[1] if full else None,
    )
    print(f"median first render: {result['first_render_median_s']:.2f} s (budget {BUDGET_S} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["first_render_median_s"] <= BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
