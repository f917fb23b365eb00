"""`kuiper compare MODEL.ncnn.param --ncnn`: every blob, ours vs ncnn vs PyTorch, and why ncnn's
answer differs (references/ncnn_compare.py). Exit 1 when our run is over tolerance against ncnn
or PyTorch, 2 on bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .errors import InputError


def cmd_compare_ncnn(args: argparse.Namespace) -> int:
    from .ncnn import load_ncnn
    from .npy import read_npy
    from .references.ncnn_compare import compare_ncnn

    param = Path(args.model)
    if not param.name.endswith(".param"):
        raise InputError(f"--ncnn compares an ncnn model: give its .ncnn.param, got {param.name}")
    if args.input:
        inputs = [read_npy(p) for p in args.input]
    else:
        raise InputError(
            "--ncnn needs the input blob: --input X.npy without the batch dim (ncnn's (c, h, w)); "
            "ncnn's .param does not record the shape pnnx converted with"
        )
    load_ncnn(param, args.bin)  # a bad file fails here, located, before ncnn runs
    expected: list[np.ndarray] = []
    if args.reference:
        with np.load(args.reference, allow_pickle=False) as z:
            expected = [z[f"out{i}"] for i in range(sum(k.startswith("out") for k in z.files)) if f"out{i}" in z.files]
    report = compare_ncnn(
        param,
        inputs,
        bin_path=args.bin,
        expected=expected,
        pnnx_param=args.pnnx,
        why=not args.no_why,
        jump=args.rtol if args.rtol is not None else 1e-4,
    )
    print(report.text())
    worst = [e for r in report.rows for e in (r.ours_vs_ncnn, r.ours_vs_torch) if e is not None]
    if not worst:
        return 1  # nothing was compared: no verdict
    tol = args.rtol if args.rtol is not None else 1e-4
    return 0 if max(worst) <= tol else 1


def add_ncnn_options(cmp: argparse.ArgumentParser) -> None:
    cmp.add_argument(
        "--ncnn",
        action="store_true",
        help="MODEL is an ncnn .ncnn.param: every blob ours vs ncnn (the binding) vs PyTorch (pnnx's NAME_pnnx.py "
        "beside it, or --reference's outN), and ncnn re-run with each option and weight storage: why it differs",
    )
    cmp.add_argument("--pnnx", metavar="M.pnnx.param", help="with --ncnn: the PNNX files of the same conversion")
    cmp.add_argument("--no-why", action="store_true", help="with --ncnn: run ncnn once (no option sweep)")
