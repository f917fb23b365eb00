"""Check issue 22's promise on full-size models nobody here wrote, through the command a user
types: export each (torch.onnx.export and torch.jit.trace, random weights, seeded), then

    python -m kuiper_core.cli run X.onnx --input in.npy --output y.npy      # vs PyTorch's own output
    python -m kuiper_core.cli compare X.onnx --input in.npy --framework     # every operator

and the same for X.pt, and print a Markdown table: does it convert, run to PyTorch's answer, and
compare layer by layer (how many operands compared; for ONNX how many onnxruntime values mapped).

    python tools/check_user_models.py                    # every model, into /tmp/kuiper_check
    python tools/check_user_models.py densenet121 lstm_module --out DIR --formats onnx
    python tools/check_user_models.py --dynamo --formats onnx --out DIR   # torch.onnx.export's default exporter

Models are written once per folder (delete them to export again); conversions are cached in
DIR/cache (KUIPER_CACHE), so a re-run measures the engine, not pnnx. Needs torch, torchvision
(tools/torchvision_cpu.py), onnx, onnxruntime and pnnx.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the models of issue 22's "Done when" (tools/export_user_models.py builds them)
CHECKED = [
    "squeezenet1_1",
    "shufflenet_v2_x0_5",
    "mobilenet_v2_full",
    "efficientnet_b0",
    "regnet_y_400mf",
    "densenet121",
    "googlenet_full",
    "convnext_tiny",
    "lraspp_mobilenet_v3_large",
    "fcn_resnet50",
    "encoder_default",
    "lstm_module",
]
TIMEOUT = 1800  # seconds per command (densenet121's pnnx run and references on 2 shared cores)


def _cli(args: list[str], cache: Path) -> tuple[int, str, str, float]:
    env = {**os.environ, "KUIPER_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kuiper_core.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return -1, "", f"timed out after {TIMEOUT} s", float(TIMEOUT)
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - started


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[-1].split())[:200] if lines else ""


def check(folder: Path, name: str, ext: str) -> dict[str, str]:
    """One model file through `run` and `compare`: a row of the table."""
    row = {"model": name, "format": ext, "run (s)": "", "output vs PyTorch": "", "layers compared": "", "ONNX": ""}
    model, x = folder / f"{name}.{ext}", folder / f"{name}.input.npy"
    with np.load(folder / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    outs = [folder / "out" / f"{name}.{ext}.out{i}.npy" for i in range(len(expected))]
    outs[0].parent.mkdir(exist_ok=True)
    cache = folder / "cache"
    code, out, err, seconds = _cli(["run", str(model), "--input", str(x), *(f"--output={p}" for p in outs)], cache)
    row["run (s)"] = f"{seconds:.0f}"
    if code != 0:
        row["output vs PyTorch"] = f"fails (exit {code}): {_last_line(err or out)}"
        return row
    errors = [float(np.abs(np.load(p).astype(np.float64) - e).max()) for p, e in zip(outs, expected)]
    scale = max(1.0, *(float(np.abs(e).max()) for e in expected))
    row["output vs PyTorch"] = ("ok" if max(errors) <= 1e-4 * scale else "WRONG") + f" ({max(errors):.1g})"
    code, out, err, seconds = _cli(["compare", str(model), "--input", str(x), "--framework", "--failed"], cache)
    summary = re.search(r"^(\d+) of (\d+) computed operands compared \((\d+) operators run\): (.*)$", out, re.M)
    if summary is None:
        row["layers compared"] = f"fails (exit {code}): {_last_line(err or out)}"
        return row
    compared, computed, _, verdict = summary.groups()
    first = re.search(r"^first divergence: operator (\S+) \((\S+)\)", out, re.M)
    row["layers compared"] = f"{compared}/{computed}" + (
        f", diverges at {first.group(1)} ({first.group(2)})" if first else ", ok" if code == 0 else f", exit {code}"
    )
    mapped = re.search(r"running the original \.onnx: (\d+) of (\d+) operands", out)
    if mapped:
        row["ONNX"] = f"{mapped.group(1)}/{mapped.group(2)} mapped"
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models (default: {', '.join(CHECKED)})")
    ap.add_argument("--out", type=Path, default=Path("/tmp/kuiper_check"))
    ap.add_argument("--formats", default="onnx,pt", help="onnx,pt (default both)")
    ap.add_argument(
        "--dynamo",
        action="store_true",
        help="export .onnx with torch.onnx.export's default (the dynamo exporter: needs onnxscript; weights in "
        "NAME.onnx.data); use another --out",
    )
    args = ap.parse_args(argv)
    from tools.export_user_models import FULL, MODELS, export

    names = args.names or CHECKED
    unknown = [n for n in names if n not in {**MODELS, **FULL}]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}: see tools/export_user_models.py")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        if not all((args.out / f"{name}.{e}").exists() for e in ("onnx", "pt", "input.npy", "expected.npz")):
            export(name, args.out, dynamo=args.dynamo)
        for ext in args.formats.split(","):
            rows.append(check(args.out, name, ext))
            print(" | ".join(rows[-1].values()), file=sys.stderr, flush=True)
    head = list(rows[0]) if rows else []
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(v.replace("|", "/") for v in r.values()) + " |")
    good = all(r["output vs PyTorch"].startswith("ok") and r["layers compared"].endswith(", ok") for r in rows)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
