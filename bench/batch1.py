"""What the batch-1 two-thread benches (bench_bands.py, bench_halves.py) share: their common
options, and the model with its bundled input at the chosen BLAS thread count."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kuiper_core  # noqa: E402
from kuiper_core.threads import set_blas_threads  # noqa: E402


def parser(doc: str | None) -> argparse.ArgumentParser:
    """--model (a sample's .pnnx.param beside its .input.npy), --rounds, --runs, --threads."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "sample_models" / "resnet18.pnnx.param")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    return ap


def model_and_input(args: argparse.Namespace) -> tuple[Any, np.ndarray]:
    """The built program of args.model and its sample input, the BLAS at args.threads."""
    set_blas_threads(args.threads)
    graph = kuiper_core.load(args.model)
    x = np.load(args.model.with_name(args.model.name.replace(".pnnx.param", ".input.npy")))
    program = graph.program
    assert program is not None
    return program, x
