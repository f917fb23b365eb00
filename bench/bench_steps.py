"""What a walkthrough step costs in the browser now that it steps there (issue 38).

    python bench/bench_steps.py                      # its own server, one Chromium tab
    python bench/bench_steps.py --url http://127.0.0.1:8501 --md /tmp/steps.md

For each walk (Execution order: Kahn and DFS on KuiperInfer's example, both side by side;
Expressions on expr_zoo; Forward on digits_cnn, yolov5s_mini and deep1500, once every
operator has run), every step forward and back is timed in the page itself: from the
key press (a → / ← keydown, what a clicker sends) to the first animation frame after the
step was painted (the controls, the panel and the graph's overlay all changed in that task).
No server run is involved (the position is reported once, after a pause), so the figure is
the browser's own work; what loads it is the machine's CPU, printed beside each figure as the
1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from app_server import chromium_page, streamlit_server, wait_caught_up, wait_idle  # noqa: E402

WALKS = {
    "Execution order, Kahn (KuiperInfer's example)": "/order?graph=KuiperInfer%27s+worked+example&algo=kahn",
    "Execution order, DFS (KuiperInfer's example)": "/order?graph=KuiperInfer%27s+worked+example&algo=dfs",
    "Execution order, both side by side": "/order?graph=KuiperInfer%27s+worked+example&algo=both",
    "Expressions (expr_zoo), stack machine": "/expressions?model=expr_zoo&step=1",
    "Forward, digits_cnn (12 operators)": "/forward?model=digits_cnn",
    "Forward, yolov5s_mini (166 operators)": "/forward?model=yolov5s_mini",
    "Forward, deep1500 (1,502 operators; the first 200 steps)": "/forward?model=deep1500",
}
LIMIT = 200  # steps timed each way on a long walk

# One step timed in the page: keydown -> painted -> the next frame.
STEP_JS = """async (key) => {
  const t0 = performance.now();
  document.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t0;
}"""


def run_forward(page) -> None:
    """Forward's frames exist for the operators run: End runs them all (the server), Reset
    goes back to step 0 in the browser."""
    page.locator(".st-key-fw_end button").click()
    page.wait_for_function(
        "() => /^Operator (\\d+) of \\1:/.test(document.querySelector('.kx-panel .kx-fw-status')?.innerText || '')",
        timeout=300_000,
    )
    wait_caught_up(page)
    page.locator(".st-key-fw_reset button").click()
    page.wait_for_timeout(1500)  # the pause: the server draws step 0
    wait_caught_up(page)


def measure(page, url: str, path: str) -> list[float]:
    page.goto(url + path)
    page.locator(".kx-steps").wait_for(timeout=120_000)
    wait_idle(page)
    page.wait_for_function("() => document.querySelector('.kx-view')?.dataset.nodes > 0")
    if path.startswith("/forward"):
        run_forward(page)
    total = int(page.evaluate("() => +document.querySelector('.kx-steps input[type=range]').max"))
    at = int(page.evaluate("() => +document.querySelector('.kx-steps').dataset.step"))
    n = min(total - at, LIMIT)
    out = []
    for key in ("ArrowRight", "ArrowLeft"):
        for _ in range(n):
            out.append(page.evaluate(STEP_JS, key))
    assert int(page.evaluate("() => +document.querySelector('.kx-steps').dataset.step")) == at
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running app instead of starting one")
    ap.add_argument("--md", help="write the table (Markdown) here")
    ap.add_argument("--label", default="", help="what else ran (printed in the table)")
    ap.add_argument("--only", nargs="*", default=[], help="walks whose name contains one of these words")
    args = ap.parse_args()
    rows = []
    with (
        streamlit_server(timeout=120) if args.url is None else _given(args.url) as url,
        chromium_page(1280, 720) as page,
    ):
        for name, path in WALKS.items():
            if args.only and not any(w.lower() in name.lower() for w in args.only):
                continue
            load = os.getloadavg()[0]
            times = measure(page, url, path)
            times.sort()
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            rows.append((name, len(times), statistics.median(times), p95, max(times), load))
            print(
                f"{name}: n={len(times)} median {rows[-1][2]:.1f} ms p95 {p95:.1f} ms max {max(times):.1f} ms (load {load:.1f})"
            )
    table = [
        "| walk | steps timed | median | p95 | max | load average (1 min) |"
        + (" what else ran |" if args.label else ""),
        "|---|---:|---:|---:|---:|---:|" + ("---|" if args.label else ""),
    ]
    for name, n, med, p95, mx, load in rows:
        table.append(
            f"| {name} | {n} | {med:.1f} ms | {p95:.1f} ms | {mx:.1f} ms | {load:.1f} |"
            + (f" {args.label} |" if args.label else "")
        )
    if args.md:
        Path(args.md).write_text("\n".join(table) + "\n")
    print("\n".join(table))


class _given:
    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
