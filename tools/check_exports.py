"""Run every pnnx export under some folders and compare with PyTorch's recorded outputs.

An export is a folder with model.pnnx.param (+ .bin), inputs.npz (in0, in1, …) and
expected.npz (out0, out1, …), as tools/pnnx_export.py writes them; a folder may also hold
inputs_K.npz / expected_K.npz pairs (other input sizes, tools/export_optlevels.py's dyn).
Each is loaded, run with forward() and compared with the project's tolerance (max abs
error <= 1e-4 * max(1, max|ref|)). Needs only the engine (no torch).

    python tools/check_exports.py tests/data/optlevel           # the optlevel test set
    python tools/check_exports.py /tmp/o0 /tmp/o1 --quiet       # e.g. every op case at o0/o1
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import kuiper_core  # noqa: E402
from conftest import max_err_ok  # noqa: E402


def _arrays(path: Path, prefix: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"{prefix}{i}"] for i in range(len(z.files))]


def check(folder: Path) -> tuple[str, str]:
    """('ok' | 'wrong' | 'error', detail) for one export folder."""
    try:
        g = kuiper_core.load(folder / "model.pnnx.param")
        runs = [("", folder / "inputs.npz", folder / "expected.npz")]
        runs += [
            (f" size {p.stem[7:]}", p, folder / f"expected_{p.stem[7:]}.npz")
            for p in sorted(folder.glob("inputs_*.npz"))
        ]
        for label, ins, exp in runs:
            ys = g.forward(*_arrays(ins, "in"))
            refs = _arrays(exp, "out")
            if len(ys) != len(refs):
                return "wrong", f"{len(ys)} outputs, PyTorch has {len(refs)}{label}"
            for k, (y, ref) in enumerate(zip(ys, refs)):
                ok, err, bound = max_err_ok(y, ref)
                if not ok:
                    return (
                        "wrong",
                        f"out{k}{label}: shape {np.shape(y)} vs {ref.shape}, max abs err {err:.3g} > {bound:.3g}",
                    )
        return "ok", ""
    except kuiper_core.KuiperError as e:
        return "error", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--quiet", action="store_true", help="print only what is not ok, and the totals")
    args = ap.parse_args(argv)
    exports = sorted(
        {p.parent for f in args.folders for p in f.glob("**/model.pnnx.param") if (p.parent / "expected.npz").exists()}
    )
    totals: Counter[str] = Counter()
    t0 = time.perf_counter()
    for folder in exports:
        status, detail = check(folder)
        totals[status] += 1
        if status != "ok" or not args.quiet:
            print(f"{status:5s} {folder}" + (f": {detail}" if detail else ""))
    print(
        f"{len(exports)} exports: "
        + ", ".join(f"{n} {s}" for s, n in sorted(totals.items()))
        + f" ({time.perf_counter() - t0:.1f} s)"
    )
    return 0 if totals["ok"] == len(exports) else 1


if __name__ == "__main__":
    sys.exit(main())
