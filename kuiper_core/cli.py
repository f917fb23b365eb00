"""The `kuiper` command: run a model on .npy inputs, or print its operator table.

    kuiper run MODEL.pnnx.param [--bin MODEL.pnnx.bin] --input X.npy [--input …] --output Y.npy [--output …]
               [--accept-disagreement]
    kuiper inspect MODEL.pnnx.param [--bin …] [--order dfs|kahn]
    kuiper print MODEL.pnnx.param | FILE.kir [--allow-unregistered]
    kuiper opt IN.pnnx.param [--bin …] [-O 0|1|2] -o OUT.pnnx.param [--disable NAME] [--require NAME]
               [--passes A,B] [--print-after NAME] [--check X.npy] [-v] [--list]

    kuiper convert IN.onnx|IN.pt [-o DIR] [--inputshape [1,3,224,224]] [--optlevel N]
    kuiper compare MODEL [--input X.npy] [--reference R.npz | --framework] [--against OTHER] [--rtol R --atol A]

MODEL is any format the engine reads, told by content (kuiper_core.formats): a .pnnx.param,
textual IR (`.kir`, docs/ir.md), an ONNX `.onnx` or a TorchScript `.pt` (converted by the
`pnnx` converter: --inputshape, --inputshape2, --optlevel; docs/own_model.md).

Bad input exits with status 2 and `error: <located message>` on stderr, never a
traceback (`--debug` shows one). A converted model is checked against its framework once
(references/conversion_check.py): every command says the verdict on stderr, and `run` on a
conversion that disagrees with the original exits 3 without running it, unless
--accept-disagreement.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import traceback
from pathlib import Path
from collections.abc import Sequence

import numpy as np

from . import limits
from .errors import ConversionDisagreement, InputError, KuiperError, ModelError, ParseError
from .graph import FIXED_INPUT_PARAM, format_shape
from .cli_models import add_compare_command, add_convert_command, add_model_options, open_from_args
from .npy import read_npy, write_npy


def _cmd_run(args: argparse.Namespace) -> int:
    from .output_files import check_targets

    # before the (maybe long) run: no directory, FIFO or input as an output
    targets = check_targets([("--output", p) for p in args.output], [*_model_files(args.model, args.bin), *args.input])
    arrays = [read_npy(p) for p in args.input]
    model = open_from_args(args, inputs=arrays)  # converted at these shapes, checked on these arrays
    if model.check is not None and model.check.disagrees and not args.accept_disagreement:
        raise ConversionDisagreement(
            f"{model.name}: not run: the converted model does not compute what the original does on this input "
            f"({model.check.headline().removeprefix('conversion ')}). See `kuiper compare --framework`; "
            "pass --accept-disagreement to run it anyway"
        )
    runtime = model.build(release_weights=True)
    outputs = runtime.forward(*arrays)
    if args.output and len(args.output) != len(outputs):
        raise InputError(f"the model has {len(outputs)} output(s) but {len(args.output)} --output path(s) were given")
    for i, value in enumerate(outputs):
        y = np.asarray(value)  # an optlevel-0 graph may output a Python number
        if y.dtype.kind not in "biufc":
            raise InputError(f"output {i} is {type(value).__name__} {str(value)[:60]!r}, not an array of numbers")
        if args.output:
            written = write_npy(targets[i], y)  # exactly this path: np.save would add '.npy'
            print(f"{written}: {format_shape(y.shape, str(y.dtype))}")
        else:
            print(f"output {i}: {format_shape(y.shape, str(y.dtype))}{_range(y)}")
    return 0


def _range(y: np.ndarray) -> str:
    """' min=… max=…' of an output, '' when it has no values to compare."""
    if y.size == 0 or y.dtype.kind == "c":
        return ""
    lo, hi = (v.item() for v in (y.min(), y.max()))
    return f" min={lo:.6g} max={hi:.6g}" if y.dtype.kind != "b" else f" min={lo} max={hi}"


def _cmd_inspect(args: argparse.Namespace) -> int:
    runtime = open_from_args(args).build(args.order, release_weights=True)
    graph = runtime.graph
    assert graph is not None  # built from one
    rows = []
    for rop in runtime.order:
        op = rop.op
        outs = " ".join(f"{o.name}{format_shape(o.shape, o.dtype) if o.shape is not None else ''}" for o in op.outputs)
        ins = " ".join(o.name for o in op.inputs)
        rows.append((str(rop.index), op.type, op.name, ins, outs))
    widths = [max(len(r[i]) for r in rows + [("#", "type", "name", "inputs", "outputs")]) for i in range(5)]
    head = ("#", "type", "name", "inputs", "outputs")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    folded = sum(1 for rop in runtime.order if rop.folded)
    print(
        f"\n{len(graph.operators)} operators, {len(graph.operands)} operands, "
        f"{graph.parameter_count():,} parameters ({graph.weight_bytes() / 1e6:.2f} MB), order: {args.order}"
        + (f", {folded} folded at build (depend only on constants)" if folded else "")
    )
    for note in graph.notes:
        print(f"note: {note}")
    for op in graph.inputs:
        if FIXED_INPUT_PARAM in op.params:
            print(
                f"note: input {op.name} is fixed at {op.params[FIXED_INPUT_PARAM]}: the file was converted for that "
                "value of it (control flow or a shape read it), and a run with another value is refused"
            )
    return 0


def _cmd_print(args: argparse.Namespace) -> int:
    """The model as textual IR (docs/ir.md); printing the printed text gives the same text."""
    from . import ir

    model = open_from_args(args, weights=False, allow_unregistered=args.allow_unregistered, check_layers=True)
    sys.stdout.write(ir.print_graph(model.graph))
    return 0


def _read_graph(args: argparse.Namespace):
    """The model's Graph with its weights, any format (kuiper_core.formats), not built."""
    return open_from_args(args).graph


def _model_files(model: str, bin_path: str | None) -> list[Path]:
    """The files a model is read from: its text and its weights (given, or each sibling it may read)."""
    from . import ir
    from .pnnx.writer import default_bin_path

    path = Path(model)
    if bin_path:
        return [path, Path(bin_path)]
    if path.suffix == ir.SUFFIX:
        return [path, path.with_suffix(".bin"), path.with_suffix(".pnnx.bin")]
    return [path, default_bin_path(path)]


def _opt_targets(path: str) -> list[tuple[str, Path]]:
    """`.kir` → text + `NAME.bin`; anything else → `.param` + its sibling `.bin`."""
    from . import ir
    from .pnnx.writer import default_bin_path

    out = Path(path)
    weights = out.with_suffix(".bin") if out.suffix == ir.SUFFIX else default_bin_path(out)
    return [("-o", out), (f"{out.name}'s weights", weights)]


def _encode_graph(graph, text_path: Path) -> bytes:
    """The model's text as it will be written: `.kir` or a `.param` the reader reads back as the
    same graph (names and strings `.param` cannot hold are a ModelError, before any file is opened)."""
    from . import ir
    from .pnnx import parse_param
    from .pnnx.writer import format_param

    if text_path.suffix == ir.SUFFIX:
        return ir.print_graph(graph).encode("utf-8")
    text = format_param(graph)
    back = parse_param(text, str(text_path), limits.DEFAULT.replace(max_param_bytes=1 << 62, max_line_chars=1 << 62))
    if [(op.type, op.name) for op in back.operators] != [(op.type, op.name) for op in graph.operators]:
        raise ModelError(f"the optimised model does not read back from {text_path} as written (an engine bug)")
    return text.encode("utf-8")


def _cmd_opt(args: argparse.Namespace) -> int:
    """Optimise a model with the graph passes; print what each pass did; save the result.

    Nothing is written unless the optimised model builds and (with --check) gives the
    original's numbers; the outputs never replace an input without --in-place (output_files.py)."""
    from .output_files import check_targets, write_files
    from .passes import PrintAfter, optimize, pass_table
    from .pnnx.writer import write_bin
    from .runtime import RuntimeGraph

    if args.list:
        for row in pass_table():
            print(
                f"{row['name']:<24} O{row['level']}  {row['what']}"
                + (f" (requires {row['requires']})" if row["requires"] else "")
            )
        return 0
    if args.model is None or args.output is None:
        raise InputError("give the model to optimise and -o OUTPUT (or --list)")
    text_path, bin_path = check_targets(
        _opt_targets(args.output), [*_model_files(args.model, args.bin), *(args.check or [])], args.in_place
    )
    graph = _read_graph(args)
    instruments = [PrintAfter(args.print_after, sys.stdout)] if args.print_after else []
    passes = [n for item in args.passes for n in item.split(",") if n] if args.passes else None
    result = optimize(
        graph, args.O, disabled=args.disable, required=args.require, passes=passes, instruments=instruments
    )
    sys.stdout.write(result.log.text(changes_per_pass=None if args.verbose else 5, only_changed=not args.verbose))
    try:
        optimised = RuntimeGraph.from_graph(result.after).build()
    except KuiperError as e:
        raise ModelError(f"the optimised model does not build, so nothing was written: {e}") from e
    if args.check and not _check(args, graph, optimised):
        return 1
    text = _encode_graph(result.after, text_path)
    written = write_files([(text_path, lambda f: f.write(text)), (bin_path, lambda f: write_bin(result.after, f))])
    print(
        f"\n{len(graph.operators)} → {len(result.after.operators)} operators "
        f"({result.log.total_seconds * 1000:.1f} ms in passes); wrote {', '.join(map(str, written))}"
    )
    return 0


def _check(args: argparse.Namespace, graph, optimised) -> bool:
    """Run both models on the --check inputs: False (and why, on stderr) when the optimised
    one changes an answer beyond what the level allows (passes/exactness.py); at -O2, beyond
    what float32 rounding does to the original on these inputs (passes/sensitivity.py)."""
    from .passes.exactness import ROUNDING, outputs_difference
    from .passes.sensitivity import SENSITIVITY_FACTOR, o2_difference, scales
    from .runtime import RuntimeGraph

    x = [read_npy(p) for p in args.check]
    with np.errstate(all="ignore"):
        after = optimised.forward(*x)
        try:
            original = RuntimeGraph.from_graph(graph).build()
            before = [np.array(y) if isinstance(y, np.ndarray) else y for y in original.forward(*x)]
        except KuiperError as e:
            print(f"check: the optimised model runs; the original does not ({e})")
            return True
    worst = max((_difference(a, b) for a, b in zip(after, before)), default=0.0)
    if args.O < 2:
        why, sensitivity = outputs_difference(before, list(after), exact=True), None
    else:
        why, sensitivity = o2_difference(graph, x, before, list(after), original)
    rounding = ""
    if sensitivity is not None:
        allowed = sensitivity.allowed(scales(before))
        if why is None:
            print(
                f"check: {len(after)} output(s), max |optimised − original| = {worst:.3g}: more than float "
                f"rounding usually moves them ({ROUNDING:g} of their scale), but this input amplifies float32 "
                f"rounding: for the original, {sensitivity.text()}. The optimised model stays within "
                f"{SENSITIVITY_FACTOR:g}x of that: rounding, not an error (-O2 allows it; a better-conditioned "
                "input checks the passes more tightly)"
            )
            return True
        rounding = (
            f" (float32 rounding explains up to {max(allowed):.3g} here: {sensitivity.text()})" if allowed else ""
        )
    if why is not None:
        promised = "the same numbers (-O1)" if args.O < 2 else "the same numbers within float rounding (-O2)"
        print(
            f"error: check failed: the optimised model changes an answer, {why}; -O{args.O} promises {promised}"
            f"{rounding}. Nothing was written (this is an engine bug: please report it with the model)",
            file=sys.stderr,
        )
        return False
    print(f"check: {len(after)} output(s), max |optimised − original| = {worst:.3g} (-O{args.O} allows it)")
    return True


def _difference(a: object, b: object) -> float:
    """Largest |a - b| of two outputs (inf if their shapes differ; optlevel-0 graphs may give
    Python values: 0 or inf as they are equal or not)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype.kind not in "biufc" or y.dtype.kind not in "biufc":
        return 0.0 if repr(a) == repr(b) else float("inf")
    if x.shape != y.shape:
        return float("inf")
    if not x.size:
        return 0.0
    x, y = x.astype(np.complex128), y.astype(np.complex128)
    same = (x == y) | (np.isnan(x) & np.isnan(y))  # NaN or inf where the original has it too: no difference
    with np.errstate(invalid="ignore"):
        d = np.where(same, 0.0, np.abs(x - y))
    return float(np.nan_to_num(d, nan=np.inf, posinf=np.inf).max())


def _add_opt_command(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    opt = sub.add_parser("opt", help="optimise a model with the graph passes and save it")
    opt.add_argument("model", nargs="?", help="IN.pnnx.param, IN.kir, IN.onnx or IN.pt")
    opt.add_argument("--bin", help="weights (default: the input's sibling .bin)")
    opt.add_argument("-o", "--output", help="OUT.pnnx.param (+ OUT.pnnx.bin) or OUT.kir (+ OUT.bin)")
    opt.add_argument("-O", type=int, choices=[0, 1, 2], default=2, help="opt level: 0 none, 1 safe clean-ups, 2 all")
    opt.add_argument("--disable", action="append", default=[], metavar="NAME", help="never run this pass")
    opt.add_argument("--require", action="append", default=[], metavar="NAME", help="run this pass whatever the level")
    opt.add_argument("--passes", action="append", metavar="A,B", help="run only these passes, in this order")
    opt.add_argument("--print-after", action="append", default=[], metavar="NAME", help="print the IR after this pass")
    opt.add_argument(
        "--check",
        action="append",
        metavar="X.npy",
        help="run both models on this input; on a difference exit 1 and write nothing",
    )
    opt.add_argument("--in-place", action="store_true", help="allow -o to replace the input model or its weights")
    opt.add_argument("-v", "--verbose", action="store_true", help="every pass and every change")
    opt.add_argument("--list", action="store_true", help="list the passes and exit")
    opt.set_defaults(func=_cmd_opt)
    return opt


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kuiper", description="Run and inspect PNNX models with NumPy.")
    ap.add_argument("--debug", action="store_true", help="show a traceback on errors")
    ap.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_limit_arg,
        help="change a safety limit, e.g. --limit max_tensor_elements=1000000000 (docs/limits.md)",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model on .npy inputs")
    run.add_argument("model", help="MODEL.pnnx.param, FILE.kir, MODEL.onnx or MODEL.pt")
    run.add_argument("--bin", help="weights (default: the .param's sibling .bin)")
    run.add_argument("--input", action="append", default=[], required=True, help="an input .npy (repeat per input)")
    run.add_argument("--output", action="append", default=[], help="where to write each output .npy")
    run.add_argument(
        "--accept-disagreement",
        action="store_true",
        help="run a converted model even where the conversion check found it disagrees with the original",
    )
    run.set_defaults(func=_cmd_run)
    ins = sub.add_parser("inspect", help="print the operator table in execution order")
    ins.add_argument("model", help="MODEL.pnnx.param, FILE.kir, MODEL.onnx or MODEL.pt")
    ins.add_argument("--bin", help="weights (default: the .param's sibling .bin)")
    ins.add_argument("--order", choices=["dfs", "kahn"], default="dfs", help="ordering algorithm")
    ins.set_defaults(func=_cmd_inspect)
    pr = sub.add_parser("print", help="print the model as textual IR (docs/ir.md)")
    pr.add_argument("model", help="MODEL.pnnx.param, FILE.kir, MODEL.onnx or MODEL.pt")
    pr.add_argument(
        "--allow-unregistered",
        action="store_true",
        help="accept op types and dialects the engine does not know (printed as they are)",
    )
    pr.set_defaults(func=_cmd_print)
    opt = _add_opt_command(sub)
    for p in (run, ins, pr, opt):
        add_model_options(p)
    conv = add_convert_command(sub)
    cmp = add_compare_command(sub)
    for p in (run, ins, pr, opt, conv, cmp):
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return ap


def _limit_arg(text: str) -> tuple[str, int]:
    """`NAME=VALUE` for --limit: a Limits field and an int (underscores allowed)."""
    name, _, value = text.partition("=")
    fields = limits.DEFAULT.__dataclass_fields__
    if name not in fields:
        raise argparse.ArgumentTypeError(f"unknown limit {name!r}: expected one of {', '.join(fields)}")
    try:
        number = int(value.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit {name} needs a whole number, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"--limit {name} must be >= 0")
    return name, number


# A write to the standard output that failed (a full disk, a closed pipe): not an engine bug.
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EPIPE}


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a model's names may hold anything: never a UnicodeEncodeError
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    try:
        with limits.use(**dict(args.limit)):
            code = int(args.func(args))
            sys.stdout.flush()  # a full disk under `> out.txt` fails here or in a print: said, exit 2
            return code
    except OSError as e:
        if e.filename is not None or e.errno not in _OUTPUT_ERRNOS:
            if args.debug:
                raise
            print(f"error: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)", file=sys.stderr)
            return 1
        try:  # what is still buffered cannot be written either: not again at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        print(f"error: cannot write to the standard output: {e.strerror or e}", file=sys.stderr)
        return 2
    except ConversionDisagreement as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
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
