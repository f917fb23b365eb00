"""The `kuiper` command: run a model on .npy inputs, or print its operator table.

    kuiper run MODEL.pnnx.param [--bin MODEL.pnnx.bin] --input X.npy [--input …] --output Y.npy [--output …]
    kuiper inspect MODEL.pnnx.param [--bin …] [--order dfs|kahn]
    kuiper print MODEL.pnnx.param | FILE.kir [--allow-unregistered]

MODEL may also be a textual IR file (`.kir`, docs/ir.md) wherever a .param is accepted.

Bad input exits with status 2 and `error: <located message>` on stderr, never a
traceback (`--debug` shows one).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import InputError, KuiperError, ParseError


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)  # never unpickle user files
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (ValueError, OSError) as e:
        raise InputError(f"{path}: not a .npy array file ({e})") from None


def _cmd_run(args: argparse.Namespace) -> int:
    from . import load

    graph = load(args.model, args.bin)
    arrays = [_load_npy(p) for p in args.input]
    outputs = graph.forward(*arrays)
    if args.output and len(args.output) != len(outputs):
        raise InputError(f"the model has {len(outputs)} output(s) but {len(args.output)} --output path(s) were given")
    for i, y in enumerate(outputs):
        if args.output:
            np.save(args.output[i], y)
            print(f"{args.output[i]}: {y.dtype} {tuple(y.shape)}")
        else:
            print(f"output {i}: {y.dtype} {tuple(y.shape)} min={y.min():.6g} max={y.max():.6g}")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from . import load
    from .pnnx.param import format_shape

    graph = load(args.model, args.bin, algorithm=args.order)
    g = graph.graph
    assert g is not None
    rows = []
    for rop in graph.order:
        op = rop.op
        outs = " ".join(f"{o.name}{format_shape(o.shape, o.dtype) if o.shape is not None else ''}" for o in op.outputs)
        ins = " ".join(o.name for o in op.inputs)
        rows.append((str(rop.index), op.type, op.name, ins, outs))
    widths = [max(len(r[i]) for r in rows + [("#", "type", "name", "inputs", "outputs")]) for i in range(5)]
    head = ("#", "type", "name", "inputs", "outputs")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(
        f"\n{len(g.operators)} operators, {len(g.operands)} operands, "
        f"{g.parameter_count():,} parameters ({g.weight_bytes() / 1e6:.2f} MB), order: {args.order}"
    )
    return 0


def _cmd_print(args: argparse.Namespace) -> int:
    """The model as textual IR (docs/ir.md); printing the printed text gives the same text."""
    from . import ir
    from .pnnx import read_param

    if Path(args.model).suffix == ".param":
        graph = read_param(args.model)
    else:
        graph = ir.read_module(args.model, allow_unregistered=args.allow_unregistered).graph
    sys.stdout.write(ir.print_graph(graph))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kuiper", description="Run and inspect PNNX models with NumPy.")
    ap.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model on .npy inputs")
    run.add_argument("model", help="MODEL.pnnx.param or FILE.kir")
    run.add_argument("--bin", help="weights (default: the .param's sibling .bin)")
    run.add_argument("--input", action="append", default=[], required=True, help="an input .npy (repeat per input)")
    run.add_argument("--output", action="append", default=[], help="where to write each output .npy")
    run.set_defaults(func=_cmd_run)
    ins = sub.add_parser("inspect", help="print the operator table in execution order")
    ins.add_argument("model", help="MODEL.pnnx.param or FILE.kir")
    ins.add_argument("--bin", help="weights (default: the .param's sibling .bin)")
    ins.add_argument("--order", choices=["dfs", "kahn"], default="dfs", help="ordering algorithm")
    ins.set_defaults(func=_cmd_inspect)
    pr = sub.add_parser("print", help="print the model as textual IR (docs/ir.md)")
    pr.add_argument("model", help="MODEL.pnnx.param or FILE.kir")
    pr.add_argument("--allow-unregistered", action="store_true",
                    help="accept op types and dialects the engine does not know (printed as they are)")
    pr.set_defaults(func=_cmd_print)
    for p in (run, ins, pr):
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KuiperError as e:
        if args.debug:
            traceback.print_exc()
        # IR errors already read `path:line:col: error: …` (MLIR's format).
        print(str(e) if isinstance(e, ParseError) and e.severity else f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # an engine bug, not bad input: still no bare traceback
        if args.debug:
            raise
        print(f"error: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
