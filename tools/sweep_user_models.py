"""Put every model of a folder written by tools/export_user_models.py through the user's path:
convert (the real pnnx), run, match PyTorch's output, compare layer by layer (onnxruntime for
.onnx, torch for .pt), and print a Markdown table of what works and where it stops.

    python tools/export_user_models.py --full --out /tmp/full
    python tools/sweep_user_models.py /tmp/full [NAME …]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sweep_one(folder: Path, name: str, ext: str) -> dict[str, str]:
    from kuiper_core.errors import KuiperError
    from kuiper_core.formats import open_model
    from kuiper_core.references.compare import compare

    row = {"model": f"{name}.{ext}", "convert": "", "run": "", "output": "", "layers": ""}
    x = np.load(folder / f"{name}.input.npy")
    started = time.perf_counter()
    try:
        model = open_model(folder / f"{name}.{ext}", cache_dir=folder / "cache")
    except KuiperError as e:
        row["convert"] = "fails: " + str(e).splitlines()[0][:160]
        return row
    c = model.conversion
    row["convert"] = f"{len(model.graph.operators)} ops, {time.perf_counter() - started:.1f} s" + (
        f" ({c.note})" if c is not None and c.note else ""
    )
    try:
        runtime = model.build()
        started = time.perf_counter()
        ys = runtime.forward(x)
        row["run"] = f"{time.perf_counter() - started:.2f} s"
    except KuiperError as e:
        row["run"] = "fails: " + " ".join(str(e).split())[:200]
        return row
    with np.load(folder / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    errors = [float(np.abs(np.asarray(y, np.float64) - e).max()) for y, e in zip(ys, expected)]
    scale = max(1.0, *(float(np.abs(e).max()) for e in expected))
    row["output"] = ("ok" if max(errors) <= 1e-4 * scale else "WRONG") + f" (max err {max(errors):.2g})"
    try:
        methods = ["onnxruntime"] if ext == "onnx" else None
        report = compare(model, [x], framework=methods or True)
        first = report.first
        verdict = "ok" if report.ok else f"diverges at {first.operator} ({first.type})" if first else "nothing compared"
        row["layers"] = f"{verdict}: {len(report.rows)}/{report.computed} operands compared"
    except KuiperError as e:
        row["layers"] = "fails: " + str(e).splitlines()[0][:160]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    listed = args.folder / "manifest.json"
    names = list(json.loads(listed.read_text())) if listed.exists() else []
    names = names or sorted(p.name.removesuffix(".input.npy") for p in args.folder.glob("*.input.npy"))
    rows = []
    for name in args.names or names:
        for ext in ("onnx", "pt"):
            if (args.folder / f"{name}.{ext}").exists():
                rows.append(sweep_one(args.folder, name, ext))
                print(" | ".join(rows[-1].values()), file=sys.stderr, flush=True)
    head = list(rows[0]) if rows else []
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(v.replace("|", "/") for v in r.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
