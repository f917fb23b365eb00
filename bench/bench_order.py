"""What ordering costs build(): the order algorithms with and without an observer.

build() orders every model it builds; the classroom observes the same algorithms. This
measures, on the 1,502-operator deep1500 (and any .param given), the median of many runs of:

- a reference DFS / Kahn with no observer hook at all (the floor),
- `execution_order(...)` as build() calls it (no observer: must cost what the floor costs),
- `execution_order(..., observe=OrderTrace())` as the walkthrough runs it.

    python bench/bench_order.py [--runs 200] [MODEL.pnnx.param ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kuiper_core.explore.order_state import OrderTrace  # noqa: E402
from kuiper_core.pnnx import read_param  # noqa: E402
from kuiper_core.runtime.order import execution_order, roots  # noqa: E402


def floor_dfs(nodes, succ) -> list[str]:
    """order.dfs_order without its observer checks."""
    visited: set[str] = set()
    output: list[str] = []
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in roots(nodes, succ):
        if root in visited:
            continue
        iters = [iter(succ.get(root, ()))]
        stack.append(root)
        on_stack.add(root)
        visited.add(root)
        while stack:
            node = stack[-1]
            nxt = next(iters[-1], None)
            if nxt is None:
                on_stack.discard(stack.pop())
                iters.pop()
                output.append(node)
            elif nxt in on_stack:
                raise ValueError("cycle")
            elif nxt not in visited:
                stack.append(nxt)
                on_stack.add(nxt)
                iters.append(iter(succ.get(nxt, ())))
                visited.add(nxt)
    output.reverse()
    return output


def floor_kahn(nodes, succ) -> list[str]:
    """order.kahn_order without its observer checks."""
    indeg = {n: 0 for n in nodes}
    for n in nodes:
        for s in succ.get(n, ()):
            indeg[s] += 1
    queue = deque(n for n in nodes if indeg[n] == 0)
    order = []
    while queue:
        n = queue.popleft()
        order.append(n)
        for s in succ.get(n, ()):
            indeg[s] -= 1
            if indeg[s] == 0:
                queue.append(s)
    return order


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _row(nodes: list[str], succ: dict[str, list[str]], algorithm: str, floor, runs: int) -> str:
    assert floor(nodes, succ) == execution_order(nodes, succ, algorithm)
    bare = median_ms(lambda: floor(nodes, succ), runs)
    off = median_ms(lambda: execution_order(nodes, succ, algorithm), runs)
    on = median_ms(lambda: execution_order(nodes, succ, algorithm, observe=OrderTrace()), runs)
    return f"no hook {bare:6.3f}   build (no observer) {off:6.3f}   observed {on:6.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=[str(ROOT / "sample_models" / "deep1500.pnnx.param")])
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args(argv)
    for path in args.models:
        g = read_param(path)
        nodes = [op.name for op in g.operators]
        succ = {op.name: [s.name for s in g.successors(op)] for op in g.operators}
        print(f"{Path(path).name}: {len(nodes)} operators, median of {args.runs} runs (ms)")
        for algorithm, floor in (("dfs", floor_dfs), ("kahn", floor_kahn)):
            print(f"  {algorithm:5s} " + _row(nodes, succ, algorithm, floor, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
