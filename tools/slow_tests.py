"""Report the fast tier's tests (`pytest -m "not slow"`) that take over a time budget.

Runs the fast tier once with --durations=0 and prints every test (parametrized case) whose
setup + call + teardown took over BUDGET seconds, scaled by --scale for a machine slower than
a quiet 2-core one, slowest first, with the tier's wall time. It writes nothing: a test found
too slow gets `@pytest.mark.slow` where it is written (or `slow_cases(...)` in its parametrize
list, tests/conftest.py), by hand.

    python tools/slow_tests.py                  # budget 1 s
    python tools/slow_tests.py --budget 0.5 --scale 2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 1.0  # seconds per test on a quiet 2-core machine


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=BUDGET, help="seconds a fast test may take on a quiet machine")
    ap.add_argument("--scale", type=float, default=1.0, help="how much slower this machine runs than a quiet one")
    args = ap.parse_args(argv)
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider", "--durations=0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - start
    seconds: dict[str, float] = defaultdict(float)
    for line in run.stdout.splitlines():
        m = re.match(r"^([0-9.]+)s (call|setup|teardown)\s+(tests/\S+)", line)
        if m:
            seconds[m.group(3)] += float(m.group(1))
    if not seconds:
        print(run.stdout[-3000:], run.stderr[-2000:], file=sys.stderr)
        return 1
    limit = args.budget * args.scale
    over = sorted(((s, t) for t, s in seconds.items() if s > limit), reverse=True)
    print(f"fast tier: {wall:.0f} s wall, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{len(over)} fast tests over {limit:g} s:")
    for s, t in over:
        print(f"  {s:6.2f} s  {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
