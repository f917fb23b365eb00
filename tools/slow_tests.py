"""Rewrite tests/slow_tests.txt: the tests the fast tier (`pytest -m "not slow"`) leaves out.

Runs the whole suite once with --durations=0 and lists every test (parametrized case) whose
setup + call + teardown took over THRESHOLD seconds, scaled by the machine's load: the list
is meant for a quiet 2-core machine, where the fast tier must stay within 90 s.

    python tools/slow_tests.py              # the suite, then the list
    python tools/slow_tests.py --scale 3    # on a machine about 3x slower than a quiet one
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "tests" / "slow_tests.txt"
THRESHOLD = 0.3  # seconds on a quiet machine
HEADER = (
    '# The tests left out of the fast tier (pytest -m "not slow"), besides the browser tests and the fuzzers:\n'
    "# each took over 0.3 s on a quiet 2-core machine. Regenerate: python tools/slow_tests.py (runs the suite once).\n"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="how much slower this machine runs than a quiet one")
    args = ap.parse_args(argv)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", "-o", "addopts="],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds: dict[str, float] = defaultdict(float)
    for line in run.stdout.splitlines():
        m = re.match(r"^([0-9.]+)s (call|setup|teardown)\s+tests/(\S+)", line)
        if m:
            seconds[m.group(3)] += float(m.group(1))
    if not seconds:
        print(run.stdout[-3000:], run.stderr[-2000:], file=sys.stderr)
        return 1
    slow = sorted(
        t
        for t, s in seconds.items()
        if s > THRESHOLD * args.scale and not t.startswith(("test_browser", "test_fuzz.py"))
    )
    LIST.write_text(HEADER + "".join(t + "\n" for t in slow))
    print(f"{len(slow)} slow tests written to {LIST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
