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
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, KuiperError
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
from ..formats.convert import DEFAULT_TIMEOUT
from ..formats.convert import ENV_TIMEOUT as CONVERT_TIMEOUT
from . import ReferenceError
from .compare import compare
from .isolated import IsolatedRunError


def open_model(source: Source, **options: Any) -> OpenedModel:
    """kuiper_core.formats.open_model with the conversion checked (`check=False`: not checked)."""
    return open_model_unchecked(source, checker=checked, **options)


def open_cached(key: str, *, name: str | None = None, cache_dir: str | Path | None = None) -> OpenedModel | None:
    """kuiper_core.formats.open_cached with the conversion's verdict (stored when first opened)."""
    return open_cached_unchecked(key, name=name, cache_dir=cache_dir, checker=checked)


DEFAULT_INT_RANGE = 10  # integers of a probe where nothing in the graph indexes with them: 0..9

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
    and the graph does not say how far."""
    operand = graph.operands.get(name)
    bounds: list[int] = []
    seen: set[str] = set()
    todo = [operand] if operand is not None else []
    while todo:
        current = todo.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        for op in current.consumers:
            if op.type in _PASS_THROUGH:
                todo.extend(op.outputs)
                continue
            if op.type not in _INDEXING:
                continue
            bound = _bound_of(op, current)
            if bound is None:
                return (
                    None,
                    f"integer input {name} indexes with operator {op.name} ({op.type}), whose range the file does not say",
                )
            bounds.append(bound)
    return (min(bounds) if bounds else None), ""


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
    dim = op.params.get("dim", 0)
    if not shapes or not isinstance(dim, int):
        return None
    shape = shapes[0]
    if op.type == "torch.take":
        sizes = [d for d in shape if isinstance(d, int)]
        return int(np.prod(sizes)) if len(sizes) == len(shape) else None
    d = shape[dim] if -len(shape) <= dim < len(shape) else None
    return int(d) if isinstance(d, int) and d > 0 else None


def _guessed_sizes(graph: Graph, guessed: str | None) -> dict[str, dict[int, int]]:
    """The sizes pnnx chose for the open dims (`[1,3,128,128]f32,…`), by input operand and dim."""
    import re

    if not guessed:
        return {}
    shapes = [[int(d) for d in m.split(",")] for m in re.findall(r"\[([\d,]+)\]", guessed)]
    sizes: dict[str, dict[int, int]] = {}
    for op, dims in zip(graph.inputs, shapes):
        operand = op.outputs[0]
        if operand.shape is not None and len(operand.shape) == len(dims):
            sizes[operand.name] = {i: n for i, (d, n) in enumerate(zip(operand.shape, dims)) if not isinstance(d, int)}
    return sizes


def probe_inputs(graph: Graph, seed: int = SEED, guessed: str | None = None) -> tuple[list[np.ndarray], str]:
    """Seeded inputs of the declared shapes and dtypes: floats standard normal, integers within
    the range the graph can index with them (an embedding's size; 0..9 where nothing indexes),
    booleans half true; open dims at the sizes pnnx converted at (`guessed`, Conversion.guessed).
    ProbeError when an input's shape or an integer's range is not in the file."""
    try:
        specs = input_specs(graph, sizes=_guessed_sizes(graph, guessed))
    except InputError as e:
        raise ProbeError(f"no probe input: {e}") from None
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
                raise ProbeError(f"no probe input: {why}; give your own input (--input)")
            high = bound if bound is not None else DEFAULT_INT_RANGE
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
    departing operand. The framework runs in a child under `timeout` seconds (None: the
    conversion's, KUIPER_CONVERT_TIMEOUT or 600) and the conversion's memory limit."""
    if os.environ.get(ENV_CHECK, "1") == "0":
        return not_checked(f"{ENV_CHECK}=0")
    methods, locating, why = _methods(model)
    if not methods:
        return not_checked(why)
    try:
        if inputs is None:
            guessed = model.conversion.guessed if model.conversion is not None else None
            arrays, probe = probe_inputs(model.graph, guessed=guessed)
        else:
            arrays = [np.asarray(x) for x in inputs]
            probe = "the given input: " + ", ".join(f"{x.shape} {x.dtype}" for x in arrays)
    except ProbeError as e:
        return not_checked(str(e))
    limit = float(os.environ.get(CONVERT_TIMEOUT, DEFAULT_TIMEOUT)) if timeout is None else timeout
    started = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            report = compare(model, arrays, framework=methods, reference_timeout=limit)
    except (ReferenceError, IsolatedRunError, InputError) as e:
        return not_checked(f"the framework could not run the original on the probe: {e}")
    except KuiperError as e:  # said in full where the model is run; the verdict keeps its first line
        said = str(e).splitlines()[0] if str(e) else type(e).__name__
        return not_checked(f"the engine could not run the converted model on the probe: {said[:300]}")
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
        outputs.append(OutputCheck(i, name, c.status, c.max_error, c.relative_error, c.tolerance, detail))
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
                "the converter changed the model's meaning (docs/own_model.md)"
            )
    return ConversionCheck(DISAGREES, source, probe, tuple(outputs), departure, reason, time.perf_counter() - started)


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
