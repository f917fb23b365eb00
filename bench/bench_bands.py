"""Batch 1 at two threads: the whole prepared forward against the row-sharded one (kuiper_core
only, one process, alternated call by call).

    python bench/bench_bands.py                       # ResNet-18, 2 BLAS threads, 5 x 20 calls each
    python bench/bench_bands.py --model sample_models/unet.pnnx.param --rounds 3

Prints, per round, the median wall time of each and their ratio, the load average, and the
critical path the bands would have on two free cores: per segment the slower band's thread
CPU time, plus the rest of the forward at one BLAS thread (CPU time). On a busy machine the
wall times mean little; the CPU-time path says what the split costs and saves. The segments
are the ones RowShardedForward.make picks (forced where its estimate would refuse).
Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, as compare.py does.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import batch1  # noqa: E402
import kuiper_core  # noqa: E402
from kuiper_core.runtime.prepared import PreparedForward  # noqa: E402
from kuiper_core.runtime.row_sharded import RowShardedForward  # noqa: E402
from kuiper_core.threads import blas_threads, one_blas_thread  # noqa: E402


def critical_path(banded: RowShardedForward, x: np.ndarray) -> tuple[float, float]:
    """(the slower bands' thread CPU time summed over segments, the rest at one BLAS thread), s."""
    bands = 0.0
    source = x
    with one_blas_thread():
        for j in range(len(banded.segments)):
            times = []
            for k in (0, 1):
                t = time.thread_time()
                banded._band(j, k, source)
                times.append(time.thread_time() - t)
            bands += max(times)
            source = banded.joins[j]
        t = time.thread_time()
        banded.whole.run_from(banded.rest)
        rest = time.thread_time() - t
    return bands, rest


def main() -> None:
    ap = batch1.parser(__doc__)
    args = ap.parse_args()
    program, x = batch1.model_and_input(args)
    with kuiper_core.limits.use(program.limits):
        whole = PreparedForward.build(program, [x])
        banded = RowShardedForward.make(program, [x], whole, force=True)
        if banded is None:
            sys.exit(f"{args.model.name}: no banded prefix")
        for seg in banded.segments:
            print(
                f"segment {seg.source} -> {seg.cut}: input rows {seg.inputs}, cut rows {seg.rows} split at {seg.split}"
            )
        for _ in range(3):
            whole.run([x])
            banded.run_in_parallel([x])
        print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} BLAS threads {blas_threads()}")
        for r in range(args.rounds):
            times: dict[str, list[float]] = {"whole": [], "banded": []}
            for _ in range(args.runs):
                for name, run in (("whole", whole.run), ("banded", banded.run_in_parallel)):
                    t = time.perf_counter()
                    run([x])
                    times[name].append(time.perf_counter() - t)
            w, b = (statistics.median(times[k]) * 1e3 for k in ("whole", "banded"))
            t = time.thread_time()
            with one_blas_thread():
                whole.run([x])
            one = time.thread_time() - t
            bands, rest = critical_path(banded, x)
            print(
                f"round {r}: whole {w:.2f} ms, banded {b:.2f} ms, banded/whole {b / w:.3f}; "
                f"CPU at one thread: whole {one * 1e3:.2f} ms, banded critical path {bands * 1e3:.2f} + rest "
                f"{rest * 1e3:.2f} = {(bands + rest) * 1e3:.2f} ms ({(bands + rest) / one:.3f}); "
                f"load average {os.getloadavg()[0]:.2f}"
            )


if __name__ == "__main__":
    main()
