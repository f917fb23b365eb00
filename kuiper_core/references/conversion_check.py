"""The check of a conversion: the original runs in its framework (references/) and the
converted file in the engine, on a probe input, and every output is compared
(kuiper_core/formats/conversion_check.py holds the verdict, the probe and where verdicts are
stored; this module runs the check, which needs the framework references above the formats).

The formats open a converted model and call the check they are given (`checker=`), never this
module: `open_model` here is the formats' open_model with this check passed in, as
`kuiper_core.open_model` and `kuiper_core.load` give it.

    model = open_model("resnet18.onnx")     # converted, then checked once (cached)
    model.check.headline()
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, KuiperError, LimitError
from ..graph import Graph, numpy_dtype, shape_label
from ..explore import compare as explore_compare
from ..explore.inputs import fixed_values, input_specs
from ..formats import OpenedModel, open_cached as open_cached_unchecked, open_model as open_model_unchecked
from ..formats.base import Source
from ..formats.conversion_check import (
    AGREES,
    DISAGREES,
    ENV_CHECK,
    NOT_CHECKED,
    ConversionCheck,
    Departure,
    SEED,
    OutputCheck,
    not_checked,
    probe_key,
    store_check,
    stored_check,
)
from ..formats.convert import ENV_TIMEOUT as CONVERT_TIMEOUT
from ..formats.convert import converter_timeout
from . import ReferenceError
from .compare import compare
from .isolated import ChildTimeout, IsolatedRunError


def open_model(source: Source, **options: Any) -> OpenedModel:
    """kuiper_core.formats.open_model with the conversion checked (`check=False`: not checked)."""
    return open_model_unchecked(source, checker=checked, **options)


def open_cached(key: str, *, name: str | None = None, cache_dir: str | Path | None = None) -> OpenedModel | None:
    """kuiper_core.formats.open_cached with the conversion's verdict (stored when first opened)."""
    return open_cached_unchecked(key, name=name, cache_dir=cache_dir, checker=checked)


TIMED_OUT = "timed out"  # the start of a verdict's reason when the framework ran past the time limit
DEFAULT_INT_RANGE = 10  # integers of a probe where nothing in the graph indexes with them: 0..9
BYTE_RANGE = 256  # … but an unindexed u8 (an image's pixels) takes all its values

# Operators that index with an integer input, and where the graph says how far it may go.
_EMBEDDINGS = {"nn.Embedding", "nn.EmbeddingBag"}
_INDEXING = {
    "F.embedding", "torch.gather", "torch.index_select", "Tensor.index_select", "torch.take",
    "Tensor.index", "Tensor.index_put", "torch.take_along_dim", "F.one_hot", "torch.scatter",
    "Tensor.scatter", "torch.scatter_add", "Tensor.scatter_add", "nn.EmbeddingBag", "nn.Embedding",
    "Gather", "GatherElements", "GatherND", "ScatterND", "OneHot",
}  # fmt: skip
# Operators an integer passes through unchanged in value (its range is its consumers').
_PASS_THROUGH = {
    "Tensor.to", "Tensor.long", "Tensor.int", "Tensor.type_as", "Tensor.reshape", "Tensor.view",
    "torch.squeeze", "torch.unsqueeze", "torch.flatten", "Tensor.contiguous", "torch.transpose",
    "torch.permute", "Tensor.permute", "Tensor.expand", "torch.clone", "Tensor.clone", "torch.cat",
    "torch.stack", "Tensor.slice", "Tensor.select", "pnnx.Attribute",
}  # fmt: skip


class ProbeError(KuiperError):
    """No probe input can be made from the graph alone (the message says why)."""


# -- the probe: seeded inputs of the declared shapes --------------------------------------------------
def _index_bound(graph: Graph, name: str) -> tuple[int | None, str]:
    """How far an integer input may index: (exclusive bound, '') from the operators it indexes
    with, (None, '') when nothing indexes with it, (None, why) when an operator indexes with it
    and the graph does not say how far, or with values an operator in between changed
    (`emb(ids + 45)`: 0..49 would index past the table)."""
    operand = graph.operands.get(name)
    bounds: list[int] = []
    seen: set[str] = set()
    todo: list[tuple[Any, Any]] = [(operand, None)] if operand is not None else []  # (operand, what changed it)
    while todo:
        current, changed = todo.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        for op in current.consumers:
            if op.type in _INDEXING:
                bound = None if changed is not None else _bound_of(op, current)
                if bound is None:
                    how = (
                        f" through operator {changed.name} ({changed.type}), which changes its values"
                        if changed
                        else ""
                    )
                    return (
                        None,
                        f"integer input {name} indexes with operator {op.name} ({op.type}){how}, "
                        "and the file does not say what range that input may take",
                    )
                bounds.append(bound)
            elif op.type in _PASS_THROUGH or _packs_indices(op):
                todo.extend((o, changed) for o in op.outputs)
            else:  # arithmetic on the integers (an offset, a clamp): followed while its results are integers
                todo.extend((o, changed or op) for o in op.outputs if o.dtype is not None and o.dtype[:1] in "iu")
    return (min(bounds) if bounds else None), ""


def _packs_indices(op: Any) -> bool:
    """pnnx's `expr=[@0]` (Tensor.index's list of index tensors): the values pass unchanged."""
    expr = op.params.get("expr") if op.type == "pnnx.Expression" else None
    return isinstance(expr, str) and re.fullmatch(r"\[@\d+(,@\d+)*\]", expr) is not None


def _bound_of(op: Any, index: Any) -> int | None:
    if op.type in _EMBEDDINGS:
        n = op.params.get("num_embeddings")
        return int(n) if isinstance(n, int) else None
    if op.type in ("F.one_hot", "OneHot"):
        n = op.params.get("num_classes")
        return int(n) if isinstance(n, int) and n > 0 else None
    others = [o for o in op.inputs if o is not index and o.shape]
    weights = [a for a in op.attrs.values() if a.shape]
    shapes = [o.shape for o in others] + [a.shape for a in weights]
    dim = op.params.get("dim", op.params.get("axis", 0))  # torch's dim, ONNX's axis
    if not shapes or not isinstance(dim, int):
        return None
    shape = shapes[0]
    if op.type in ("torch.take", "GatherND", "ScatterND"):  # (an index into many dims: the least of them)
        sizes = [d for d in shape if isinstance(d, int)]
        if len(sizes) != len(shape) or not sizes:
            return None
        return int(np.prod(sizes)) if op.type == "torch.take" else min(sizes)
    d = shape[dim] if -len(shape) <= dim < len(shape) else None
    return int(d) if isinstance(d, int) and d > 0 else None


def _guessed_sizes(graph: Graph, guessed: str | None) -> dict[str, dict[int, int]]:
    """The sizes pnnx chose for the open dims (`[1,3,128,128]f32,…`), by input operand and dim."""
    if not guessed:
        return {}
    shapes = [[int(d) for d in m.split(",")] for m in re.findall(r"\[([\d,]+)\]", guessed)]
    sizes: dict[str, dict[int, int]] = {}
    for op, dims in zip(graph.inputs, shapes):
        operand = op.outputs[0]
        if operand.shape is not None and len(operand.shape) == len(dims):
            sizes[operand.name] = {i: n for i, (d, n) in enumerate(zip(operand.shape, dims)) if not isinstance(d, int)}
    return sizes


_TRACED = re.compile(r"get inputshape from traced inputs\s*\n\s*inputshape = (\S+)")


def traced_shapes(graph: Graph, log: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """(shape, dtype) pnnx read from the original file (its log: 'get inputshape from traced
    inputs', then `inputshape = [1,5]f32,[]f32`) for the inputs its .param declares no shape of:
    a 0-d input, for which pnnx writes none."""
    found = _TRACED.search(log or "")
    if found is None:
        return {}
    shapes = re.findall(r"\[([\d,]*)\]([a-z]+\d*)", found.group(1))
    if len(shapes) != len(graph.inputs):
        return {}
    return {
        op.outputs[0].name: (tuple(int(d) for d in dims.split(",") if d), dtype)
        for op, (dims, dtype) in zip(graph.inputs, shapes)
        if op.outputs[0].shape is None
    }


def probe_inputs(
    graph: Graph, seed: int = SEED, guessed: str | None = None, log: str = ""
) -> tuple[list[np.ndarray], str]:
    """Seeded inputs of the declared shapes and dtypes: floats standard normal, integers within
    the range the graph can index with them (an embedding's size; 0..9 where nothing indexes),
    booleans half true; open dims at the sizes pnnx converted at (`guessed`, Conversion.guessed);
    an input the .param gives no shape (0-d) at the one pnnx's `log` read from the original.
    ProbeError when an input's shape or an integer's range is not known."""
    try:
        specs = input_specs(graph, sizes=_guessed_sizes(graph, guessed), declared=traced_shapes(graph, log))
    except InputError as e:
        why = str(e).split(": upload", 1)[0]  # (the app's advice; the check's is below)
        raise ProbeError(
            f"no probe input: {why}; check it on your own input (--input; in the app, an uploaded .npy)"
        ) from None
    arrays: list[np.ndarray] = []
    said: list[str] = []
    fixed = fixed_values(graph)
    for i, (name, shape, dtype) in enumerate(specs):
        rng = np.random.default_rng(seed + i)
        dt = numpy_dtype(dtype)
        if name in fixed:  # the one value the file was converted for (formats/onnx_given.py)
            arrays.append(fixed[name])
            said.append(f"{shape_label(shape)} {dtype} = {fixed[name].tolist()} (converted for it)")
        elif dt.kind in "iu":
            bound, why = _index_bound(graph, name)
            if why:
                raise ProbeError(
                    f"no probe input: {why}; check it on your own input (--input; in the app, an uploaded .npy)"
                )
            high = bound if bound is not None else BYTE_RANGE if dt == np.uint8 else DEFAULT_INT_RANGE
            arrays.append(rng.integers(0, max(1, high), size=shape).astype(dt))
            said.append(f"{shape_label(shape)} {dtype} in 0..{max(1, high) - 1}")
        elif dt.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
            said.append(f"{shape_label(shape)} bool")
        else:
            arrays.append(rng.standard_normal(shape).astype(dt))
            said.append(f"{shape_label(shape)} {dtype} standard normal")
    return arrays, f"seeded random (seed {seed}): {', '.join(said)}"


# -- the check --------------------------------------------------------------------------------------
def _methods(model: OpenedModel) -> tuple[list[str], list[str], str]:
    """The reference methods that run the *original* model (the verdict's), those that also
    name the operands in between (to find the first departing one), or ([], [], why not)."""
    info = model.references
    if model.format == "onnx":
        if "onnxruntime" in info.methods:
            return ["onnxruntime"], ["onnxruntime"], ""
        return [], [], "onnxruntime is not installed (pip install onnxruntime onnx)"
    if "torchscript" in info.methods:
        # The original module gives its outputs only; pnnx's code of the converted file gives the
        # operands in between (the original's outputs win where both give one).
        return ["torchscript"], [m for m in ("pnnx_py", "torchscript") if m in info.methods], ""
    if model.files is None or model.files.source is None:
        return [], [], "the original TorchScript file is not kept"
    return [], [], "torch is not installed (pip install torch), which runs the original TorchScript module"


def check_conversion(
    model: OpenedModel, inputs: Sequence[np.ndarray] | None = None, *, timeout: float | None = None
) -> ConversionCheck:
    """Run the original in its framework and the converted graph in the engine on `inputs`
    (None: the seeded probe) and compare every output; on a disagreement, find the first
    departing operand. The framework runs in a child under the conversion's limits: `timeout`
    seconds (None: the converter's, KUIPER_CONVERT_TIMEOUT or the current limits'
    max_child_seconds, lower in the app) and its memory limit; past the time, 'not checked:
    timed out'."""
    if os.environ.get(ENV_CHECK, "1") == "0":
        return not_checked(f"{ENV_CHECK}=0")
    methods, locating, why = _methods(model)
    if not methods:
        return not_checked(why)
    try:
        if inputs is None:
            conversion = model.conversion
            guessed, log = (conversion.guessed, conversion.log) if conversion is not None else (None, "")
            arrays, probe = probe_inputs(model.graph, guessed=guessed, log=log)
        else:
            arrays = [np.asarray(x) for x in inputs]
            probe = "the given input: " + ", ".join(f"{x.shape} {x.dtype}" for x in arrays)
    except ProbeError as e:
        return not_checked(str(e))
    limit = converter_timeout(timeout)
    started = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            report = compare(model, arrays, framework=methods, reference_timeout=limit, engine_timeout=limit)
    except (ReferenceError, IsolatedRunError, InputError) as e:
        if isinstance(e, ChildTimeout) or isinstance(e.__cause__, ChildTimeout):
            return not_checked(
                f"{TIMED_OUT}: {methods[0]} ran past the conversion's time limit of {limit:g} s on the probe "
                f"(set {CONVERT_TIMEOUT} or the timeout option for more)"
            )
        return not_checked(f"the framework could not run the original on the probe: {e}")
    except KuiperError as e:
        return _engine_failed(model, e)
    seconds = time.perf_counter() - started
    by_operand = {r.operand: r for r in report.rows}
    names = explore_compare.output_operand_names(model.graph)
    outputs: list[OutputCheck] = []
    for i, name in enumerate(names):
        row = by_operand.get(name)
        if row is None:
            outputs.append(OutputCheck(i, name, "missing", detail="the original model gives no such output"))
            continue
        c = row.comparison
        detail = c.text() if c.status == explore_compare.SHAPE else c.where_text()
        check = OutputCheck(i, name, c.status, c.max_error, c.relative_error, c.tolerance, detail)
        outputs.append(_labels_at_ties(model.graph, check, by_operand) or check)
    source = next((s for s in report.sources if "original" in s), report.sources[0] if report.sources else "")
    failed = any(o.failed for o in outputs) or not outputs
    if not failed:
        return ConversionCheck(AGREES, source, probe, tuple(outputs), seconds=seconds)
    reason = "" if outputs else "the converted model has no outputs to compare"
    if locating != methods:  # the operands in between, from pnnx's code of the converted file
        try:
            with np.errstate(all="ignore"):
                report = compare(model, arrays, framework=locating, reference_timeout=limit)
        except KuiperError as e:
            reason = f"the operands in between could not be compared: {e}"
    departure = None
    first = report.first
    if first is not None:
        c = first.comparison
        text = c.text() if c.status == explore_compare.SHAPE else f"{c.text()}, {c.where_text()}".rstrip(", ")
        departure = Departure(first.index, first.operator, first.type, first.operand, text)
        if locating != methods and first.operand in names:
            reason = (
                "pnnx's own code of the converted file computes every operand before it as the engine does: "
                "the converter changed the model's meaning (docs/own_model.md)" + _optlevel_hint(model)
            )
    return ConversionCheck(DISAGREES, source, probe, tuple(outputs), departure, reason, time.perf_counter() - started)


def _engine_failed(model: OpenedModel, e: KuiperError) -> ConversionCheck:
    """'not checked' for the engine's failure on the probe: its time limit (compare's
    engine_timeout), or its error's first line (said in full where the model is run)."""
    if isinstance(e, LimitError) and e.limit == "max_child_seconds":
        return not_checked(
            f"{TIMED_OUT}: {e.message} on the probe (set {CONVERT_TIMEOUT} or the timeout option for more)"
        )
    said = str(e).splitlines()[0] if str(e) else type(e).__name__
    hint = "" if isinstance(e, LimitError) else _optlevel_hint(model)  # (a model too big is not pnnx's rewrite)
    return not_checked(f"the engine could not run the converted model on the probe: {said[:300]}{hint}")


def _optlevel_hint(model: OpenedModel) -> str:
    """What to try when a file pnnx converted at optlevel 2 does not run or changed meaning: its
    optlevel-2 rewrites are the likeliest cause (swin_v2_t's zeroed key bias, docs/coverage.md)."""
    conversion = model.conversion
    if conversion is None or conversion.optlevel != 2:
        return ""
    return "; it was converted at pnnx's optlevel 2, whose rewrites are the likeliest cause: try optlevel 1 (`--optlevel 1` on the command line)"


# Operators whose integer output is the position of a maximum or minimum along an axis.
ARG_EXTREMES = frozenset({"torch.argmax", "torch.argmin", "ArgMax", "ArgMin"})


def _labels_at_ties(graph: Graph, out: OutputCheck, rows: dict[str, Any]) -> OutputCheck | None:
    """An argmax's labels that differ from the original's although the scores it took them from
    agree within tolerance: passing, said so. Where every score is within e of the original's, a
    label can differ only where the original's two candidates are within 2e of each other (a
    near-tie); onnxruntime's own graph optimisations move segmentation scores by more than that
    (kelp-o-matic's LRASPP: 20 of 1,048,576 pixels). None where that does not apply."""
    if out.status != explore_compare.OVER:
        return None
    producer = next((op for op in graph.operators if any(o.name == out.operand for o in op.outputs)), None)
    if producer is None or producer.type not in ARG_EXTREMES or not producer.inputs:
        return None
    scores = rows.get(producer.inputs[0].name)
    if scores is None or scores.comparison.status != explore_compare.OK:
        return None
    e = scores.comparison.max_error or 0.0
    return replace(
        out,
        status=explore_compare.OK,
        max_error=None,  # (the labels' own error is a class number apart: the detail says why it passes)
        relative=None,
        detail=(
            f"labels of {producer.type} '{producer.name}' differ ({out.detail}), only where scores tie: its scores "
            f"(operand {producer.inputs[0].name}) are within {e:.3g} of the original's, so each differing label's "
            f"two candidates are within {2 * e:.3g}"
        ),
    )


def checked(
    model: OpenedModel, inputs: Sequence[np.ndarray] | None = None, timeout: float | None = None
) -> ConversionCheck | None:
    """The model's verdict for `inputs`: from its cache entry when checked before, else
    checked now and stored. None for a model that was not converted."""
    conversion = model.conversion
    if conversion is None:
        return None
    key = probe_key(inputs)
    found = stored_check(conversion.directory, key)
    if found is not None:
        return found
    verdict = check_conversion(model, inputs, timeout=timeout)
    if verdict.status != NOT_CHECKED or verdict.reason.startswith("the engine"):
        store_check(conversion.directory, key, verdict)  # a framework installed (or less busy) later: checked then
    elif inputs is not None and verdict.reason.startswith("the framework"):
        # The original does not take this input (a file fixed at batch 1, run by the engine's batch
        # rule at another): the verdict on the seeded probe of the declared shapes, said so.
        seeded = checked(model, None, timeout)
        if seeded is not None and seeded.status != NOT_CHECKED:
            why = verdict.reason.split(": ", 1)[-1]
            return replace(
                seeded,
                reason=" ".join(
                    filter(
                        None,
                        [
                            seeded.reason,
                            f"(checked on the seeded probe: the original does not run on the given input: {why[:200]})",
                        ],
                    )
                ),
            )
    return verdict
