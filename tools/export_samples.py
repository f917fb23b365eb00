"""Export the bundled sample models into sample_models/ with the real pnnx converter.

Models are defined in plain torch in tools/samples/. For each model NAME this writes
  NAME.pnnx.param, NAME.pnnx.bin   what pnnx wrote (optlevel 2)
  NAME.input.npy                   the example input (the model's only input)
  NAME.expected.npz                out0, out1, … PyTorch outputs of the original module
  NAME.operands.npz                (when small) every operand as computed by pnnx's NAME_pnnx.py
and merges NAME's entry into sample_models/models.json (description, task, shapes,
preprocessing, operator count and types, file sizes).

    python tools/export_samples.py               # every model
    python tools/export_samples.py resnet18 unet # only these

Needs the `export` extra (torch==2.13.0 + pnnx, scikit-learn for the digits models).
Seeds are fixed per model, so a re-export reproduces the same files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from pnnx_export import export_module  # noqa: E402

OUT = ROOT / "sample_models"
MANIFEST = OUT / "models.json"
# Skip operand references larger than this (compressed). resnet18's (17.7 MiB) and deep1500's (2.7 MiB)
# are kept: with them every operator of every sample is compared, within the +25 MB that
# issue 22 allowed sample_models/ for it.
MAX_OPERANDS_BYTES = 20 * 1024 * 1024


def param_summary(param: Path) -> tuple[int, list[str]]:
    """Operator count (line 2) and the sorted set of operator types of a .param file."""
    lines = param.read_text().splitlines()
    count = int(lines[1].split()[0])
    types = sorted({line.split()[0] for line in lines[2:] if line.strip()})
    return count, types


def export_one(name: str, sample: Any) -> dict[str, Any]:
    import torch

    # nn.MultiheadAttention's inference fast path makes torch.jit.trace's check run differ
    # from the first trace (pnnx.export then fails); the slow path computes the same thing.
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    module, x = sample.build()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        export_module(module.eval(), [x], tmp_path, name=name, capture_operands=sample.capture_operands)
        for suffix in (".pnnx.param", ".pnnx.bin"):
            shutil.move(tmp_path / f"{name}{suffix}", OUT / f"{name}{suffix}")
        with np.load(tmp_path / "inputs.npz") as inputs:
            np.save(OUT / f"{name}.input.npy", inputs["in0"])
        shutil.move(tmp_path / "expected.npz", OUT / f"{name}.expected.npz")
        operands = OUT / f"{name}.operands.npz"
        operands.unlink(missing_ok=True)
        note = None
        refs = tmp_path / "operands.npz"
        if not sample.capture_operands:
            note = "not captured (too many operators to be useful as a fixture)"
        elif not refs.exists():
            note = "pnnx wrote no *_pnnx.py to compute them"
        elif refs.stat().st_size > MAX_OPERANDS_BYTES:
            note = f"skipped: {refs.stat().st_size / 2**20:.1f} MiB compressed, over the {MAX_OPERANDS_BYTES // 2**20} MiB limit"
        else:
            shutil.move(refs, operands)
    if sample.extras is not None:
        sample.extras(OUT)

    count, types = param_summary(OUT / f"{name}.pnnx.param")
    files = {p.name: p.stat().st_size for p in sorted(OUT.glob(f"{name}.*"))}
    entry = dict(sample.meta)
    entry.setdefault("default", False)
    entry.update(
        operators=count,
        operator_types=types,
        operands=operands.name if operands.exists() else None,
        files=files,
    )
    if note:
        entry["operands_note"] = note
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="models to export (default: all)")
    args = ap.parse_args(argv)

    from samples import all_samples

    samples = all_samples()
    unknown = set(args.names) - set(samples)
    if unknown:
        ap.error(f"unknown model(s): {', '.join(sorted(unknown))}; known: {', '.join(samples)}")
    OUT.mkdir(exist_ok=True)
    manifest: dict[str, Any] = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    failed: list[str] = []
    for name in args.names or list(samples):
        try:
            manifest[name] = export_one(name, samples[name])
        except Exception:  # report every failing model, keep going
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", file=sys.stderr)
            continue
        e = manifest[name]
        size = sum(e["files"].values()) / 2**20
        print(f"ok   {name}: {e['operators']} operators, {size:.1f} MiB, types: {' '.join(e['operator_types'])}")
    # Keep the manifest in the definition order, dropping models no longer defined.
    ordered = {n: manifest[n] for n in samples if n in manifest}
    MANIFEST.write_text(json.dumps(ordered, indent=2) + "\n")
    if failed:
        print(f"{len(failed)} model(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
