"""The `kuiper` command's model opening (every command reads any format through
kuiper_core.formats) and the `convert` command.

    kuiper convert IN.onnx|IN.pt [-o DIR] [--inputshape [1,3,224,224]] [--inputshape2 …] [--optlevel 0|1|2]
    kuiper compare MODEL [--input X.npy] [--reference R.npz | --framework] [--against OTHER] [--rtol R | --relative R] [--atol A]
                   [--failed] [--csv FILE] [--save RUN.npz]

`compare` exits 1 when an operand is over tolerance or has the wrong shape, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .errors import InputError, KuiperError
from .formats import OpenedModel
from .references.conversion_check import open_model


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The options every command that opens a model takes for .onnx / TorchScript inputs."""
    group = parser.add_argument_group("ONNX and TorchScript models (converted with pnnx)")
    group.add_argument(
        "--inputshape",
        metavar="SHAPES",
        help="input shape(s) for the converter, e.g. [1,3,224,224] or [1,3,224,224],[1,10]i64 "
        "(TorchScript needs it unless traced with torch >= 2; ONNX reads it from the file)",
    )
    group.add_argument("--inputshape2", metavar="SHAPES", help="a second size per input: dims that differ stay dynamic")
    group.add_argument(
        "--optlevel", type=int, choices=[0, 1, 2], default=None, help="the converter's optimisation level (default 2)"
    )
    group.add_argument("--converter-log", action="store_true", help="show the converter's log as it runs (stderr)")


def _log_to_stderr(line: str) -> None:
    print(f"pnnx| {line}", file=sys.stderr, flush=True)


def open_from_args(args: argparse.Namespace, **options: Any) -> OpenedModel:
    """The command's model (args.model, args.bin and the conversion options), any format.
    A converted model gets one note on stderr (stdout stays the command's own output)."""
    kwargs: dict[str, Any] = {
        "bin_path": getattr(args, "bin", None),
        "inputshape": getattr(args, "inputshape", None),
        "inputshape2": getattr(args, "inputshape2", None),
        "optlevel": getattr(args, "optlevel", None),
        "on_log": _log_to_stderr if getattr(args, "converter_log", False) else None,
    }
    model = open_model(args.model, **{**kwargs, **options})
    if model.conversion is not None:
        print(f"note: {model.describe()}", file=sys.stderr)
    if model.check is not None:
        if model.check.disagrees:
            print("warning: " + model.check.text().replace("\n", "\n  "), file=sys.stderr)
        else:
            print(f"note: {model.check.headline()}", file=sys.stderr)
    return model


def _cmd_convert(args: argparse.Namespace) -> int:
    """Convert an ONNX or TorchScript model to PNNX with the real pnnx converter."""
    from .formats.convert import export_files

    from .npy import read_npy

    source = Path(args.model)
    arrays = [read_npy(p) for p in args.input] or None  # converted at their shapes, for their small values
    model = open_from_args(args, inputs=arrays, on_log=None if args.quiet else _log_to_stderr)
    if model.conversion is None or model.files is None:
        raise InputError(
            f"{args.model} is already {model.format.upper() if model.format == 'pnnx' else 'textual IR'}: "
            "nothing to convert (`kuiper opt` writes .param or .kir)"
        )
    stem = args.name or source.name.rsplit(".", 1)[0] or "model"
    if args.name is not None and (Path(args.name).name != args.name or args.name in ("", ".", "..")):
        raise InputError(f"--name {args.name!r} is a file stem, not a path: give the folder with -o")
    out_dir = Path(args.output) if args.output else source.parent
    written = export_files(model.files, out_dir, stem, inputs=[source])
    print(f"wrote {', '.join(map(str, written))}")
    ncnn_param = next((p for p in written if p.name.endswith(".ncnn.param")), None)
    if ncnn_param is not None:
        print(
            f"ncnn: {ncnn_param} and its .bin, as pnnx wrote them (kuiper compare {ncnn_param} --ncnn --input CHW.npy)"
        )
    print(model.describe())
    if model.check is not None:
        print(model.check.text())
    print(f"cache: {model.conversion.directory}")
    try:
        model.build()
    except KuiperError as e:
        print(f"note: the engine cannot run it yet: {e}")
    return 0


def add_convert_command(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    conv = sub.add_parser("convert", help="convert an ONNX or TorchScript model to PNNX (.param + .bin) with pnnx")
    conv.add_argument("model", help="IN.onnx or a TorchScript IN.pt")
    conv.add_argument("-o", "--output", metavar="DIR", help="folder for the files (default: beside the input)")
    conv.add_argument("--name", help="stem of the written files (default: the input's, e.g. resnet18)")
    conv.add_argument("-q", "--quiet", action="store_true", help="do not show the converter's log")
    conv.add_argument(
        "--input",
        action="append",
        default=[],
        help="an input .npy (repeat per input): converted at its shape, an If or shape reading a small integer input "
        "fixed at its value",
    )
    add_model_options(conv)
    conv.set_defaults(func=_cmd_convert)
    return conv


def _cmd_compare(args: argparse.Namespace) -> int:
    """Run a model and compare every operand that has a reference (references/compare.py)."""
    from .npy import read_npy
    from .references.compare import compare

    if getattr(args, "ncnn", False):
        from .cli_ncnn import cmd_compare_ncnn

        return cmd_compare_ncnn(args)
    if args.reference and args.framework:
        raise InputError("give --reference or --framework, not both")
    if args.relative is not None and args.rtol is not None:
        raise InputError("give --rtol (of the largest reference value) or --relative (of each element), not both")
    from .output_files import check_targets, write_files

    # the files it writes, checked before the (maybe long) run: no FIFO, directory or input
    inputs_read = [args.model, args.bin, args.against, args.against_bin, args.reference, *(args.input or [])]
    wanted = [(flag, path) for flag, path in (("--save", args.save), ("--csv", args.csv)) if path]
    targets = dict(zip((flag for flag, _ in wanted), check_targets(wanted, [p for p in inputs_read if p])))
    inputs = [read_npy(p) for p in args.input] if args.input else None
    model = open_from_args(args, inputs=inputs)  # a converted model: at these shapes, checked on them
    against = None
    if args.against:
        other = argparse.Namespace(**{**vars(args), "model": args.against, "bin": args.against_bin})
        against = open_from_args(other)
    report = compare(
        model,
        inputs,
        reference=args.reference,
        framework=args.framework,
        against=against,
        rtol=args.rtol,
        atol=args.atol,
        relative=args.relative,
    )
    print(report.text(every=not args.failed))
    if args.save:
        import numpy as np

        arrays: dict[str, Any] = dict(report.values)  # (NumPy's stub types savez's keywords as allow_pickle's)
        # exactly this path (np.savez would add '.npz'), written whole or not at all
        write_files([(targets["--save"], lambda f: np.savez(f, **arrays))])
        print(f"wrote {len(report.values)} operand(s) of this run to {args.save} (a --reference for another run)")
    if args.csv:
        from .explore.compare import rows_csv

        rows = [
            {
                "#": r.index + 1,
                "operator": r.operator,
                "type": r.type,
                "operand": r.operand,
                "status": r.comparison.status,
                "max_abs_error": r.comparison.max_error,
                "relative_error": r.comparison.relative_error,
                "tolerance": r.comparison.tolerance,
                "where": "" if r.comparison.where is None else list(r.comparison.where),
            }
            for r in report.rows
        ]
        csv = rows_csv(rows).encode("utf-8")
        write_files([(targets["--csv"], lambda f: f.write(csv))])
    if not report.rows:
        return 1  # nothing was compared: no verdict to give
    return 0 if report.ok else 1


def add_compare_command(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    cmp = sub.add_parser(
        "compare", help="run a model and compare every operand with references (exit 1 over tolerance)"
    )
    cmp.add_argument("model", help="MODEL.pnnx.param, FILE.kir, MODEL.onnx or MODEL.pt")
    cmp.add_argument("--bin", help="weights (default: the .param's sibling .bin)")
    cmp.add_argument(
        "--input",
        action="append",
        default=[],
        help="an input .npy (repeat per input; default: seeded random inputs of the declared shapes)",
    )
    cmp.add_argument(
        "--reference",
        metavar="R.npz",
        help="reference tensors keyed by operand number, operator name, module path (forward hooks) or outN",
    )
    cmp.add_argument(
        "--framework",
        action="store_true",
        help="compute references with the model's framework (torch for TorchScript and pnnx's code, "
        "onnxruntime for ONNX); the default when no other reference is given",
    )
    cmp.add_argument("--against", metavar="OTHER", help="another model (e.g. after kuiper opt) run on the same input")
    cmp.add_argument("--against-bin", metavar="BIN", help="the other model's weights")
    cmp.add_argument("--rtol", type=float, help="tolerance = atol + rtol * max|reference| (default: 1e-4 * max(1, …))")
    cmp.add_argument("--atol", type=float, help="see --rtol")
    cmp.add_argument(
        "--relative",
        type=float,
        metavar="R",
        help="each element within atol + R * |its reference| (probability-valued outputs, whose small "
        "values the default 1e-4 * max|reference| does not check)",
    )
    cmp.add_argument("--failed", action="store_true", help="list only the operands over tolerance")
    cmp.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    cmp.add_argument("--save", metavar="RUN.npz", help="write every operand of this run (keyed by operand name)")
    from .cli_ncnn import add_ncnn_options

    add_ncnn_options(cmp)
    add_model_options(cmp)
    cmp.set_defaults(func=_cmd_compare)
    return cmp
