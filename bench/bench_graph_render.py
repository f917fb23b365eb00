"""How long the Graph page takes to draw the 1,500-operator model in a real browser.

Starts `streamlit run app.py` on a free port, opens it in headless Chromium (Playwright),
picks `deep1500` on Home and clicks Graph: the time from that click until the graph's SVG
is in the page is the page's first render for the session (the budget is 3 s). Each run
uses a fresh browser session. It also times the same graph drawn in full detail (all
1,502 operators, overview cap lifted) to show why the page caps big graphs.

    python bench/bench_graph_render.py [--runs 3] [--json bench/results/graph_render.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from app_server import (  # noqa: E402
    GRAPH_SVG,
    browser_missing,
    chromium_page,
    graph_render_seconds,
    streamlit_server,
    wait_idle,
)

MODEL = "deep1500"
BUDGET_S = 3.0


def full_detail_seconds(page) -> tuple[float, int]:
    """Lift the overview cap on the already-open Graph page and time the full redraw."""
    box = page.get_by_label("Max nodes before overview")
    t0 = time.perf_counter()
    box.fill("3000")
    box.press("Enter")
    page.wait_for_function(
        f"() => document.querySelectorAll('{GRAPH_SVG} g.node').length > 1500", timeout=300_000
    )
    seconds = time.perf_counter() - t0
    nodes = page.locator(f"{GRAPH_SVG} g.node").count()
    wait_idle(page)
    return seconds, nodes


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
    with streamlit_server(timeout=120) as url:
        for run in range(args.runs):
            with chromium_page() as page:  # a fresh browser profile = a new session
                page.goto(url)
                page.get_by_text("Kuiper Explorer").first.wait_for()
                wait_idle(page)
                seconds, nodes = graph_render_seconds(page, MODEL)
                first.append(seconds)
                print(f"run {run + 1}: graph page first render {seconds:.2f} s ({nodes} SVG nodes, overview)")
                if run == 0 and not args.no_full:
                    full = full_detail_seconds(page)
                    print(f"        full detail (cap lifted): {full[0]:.2f} s ({full[1]} SVG nodes)")
    result = {
        "model": MODEL,
        "first_render_s": first,
        "first_render_median_s": statistics.median(first),
        "budget_s": BUDGET_S,
        "full_detail_s": full[0] if full else None,
        "full_detail_nodes": full[1] if full else None,
    }
    print(f"median first render: {result['first_render_median_s']:.2f} s (budget {BUDGET_S} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["first_render_median_s"] <= BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
