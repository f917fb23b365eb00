"""An ONNX file made fit for the pnnx converter, with onnx's own tools, before pnnx reads it.

pnnx reads ONNX through its own onnxruntime, and crashes or refuses on files the ONNX
standard allows: opset-6 files (the PyTorch 0.x exports of ONNX's backend test models)
segfault it; an IR version newer than its onnxruntime is refused; an input whose dims the
user gave but the file leaves dynamic is converted at pnnx's guessed size; `Shape→Gather→…`
chains and `If`s whose condition follows from the input shapes are left for it to fold, which
it cannot do for `If`; a 0-d input (`sr: int64 []`) cannot be written in its `inputshape=`.
On the copy in the conversion's folder, in order:

1. an opset below MIN_OPSET is upgraded to TARGET_OPSET (`onnx.version_converter`; opset
   6's channel-wise PRelu slope reshaped first, which the converter does not do);
2. initializers listed as graph inputs (IR < 4) are no longer inputs; an IR version past
   MAX_IR_VERSION is lowered to it;
3. the input shapes given are written into the graph's inputs (0-d ones too): pnnx then
   reads them from the file and needs no `inputshape=`;
4. shapes are inferred (`onnx.shape_inference`, with data propagation);
5. what is constant at those shapes is folded, node by node with `onnx.reference`: `Shape`
   and `Size` of tensors whose shape is known, nodes whose inputs are all constant and small
   (at most FOLD_ELEMENTS elements; in total within the max_folded_bytes limit), and `If`s
   whose condition became constant, replaced by the branch taken; repeated while it folds;
   an even `Split` is given its sizes (pnnx writes a sizeless one as `torch.split(x, None)`);
   nodes pnnx would rewrite to something else are made ones it converts right: lossy `Resize`s
   kept (onnx_resize.py), a `Clip(x, "", max)` whose max is computed made `Min(x, max)`, an
   opset < 13 `Softmax`/`LogSoftmax` before the last axis made the flatten it means, an
   `auto_pad=SAME_*` Conv or pool given the explicit pads it means;
6. control flow left (`If` on input values, `Loop`, `Scan`) is an error before pnnx runs,
   saying what the node is, its branches, and what the user can do; so are, before step 1,
   models the engine cannot hold at all (string, sequence or map values, training and
   quantized operators), on which pnnx crashes or fails with no reason.

onnxsim (0.8.1, a 9.7 MB compiled wheel) folds much the same with onnxruntime, but would be
a second compiled dependency for what these steps with the `onnx` package (already needed)
do: ONNX's backend models and the PyPI wheels' models (docs/coverage.md) need nothing more.
The work runs in a child process (`python -m kuiper_core.formats.onnx_prepare FOLDER`) in one
of the machine's child slots (children.py), under the converter's memory limit and the
conversion's time limit: a hostile or huge file can crash or exhaust the child, never the
caller. When the child fails, the file is converted as it was and the log says why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..children import set_rlimits, slot
from ..errors import ConversionError, InputError
from .onnx_fold import CONTROL_FLOW, FOLD_ELEMENTS, Folder, names_used, subgraphs, widen_f64_scalars
from .onnx_given import Given, can_be_fixed, fix_inputs, fixed_note, inputs_to_fix
from .onnx_resize import keep_lossy_resizes
from .scripted import scripted_argument_hint

MIN_OPSET = 11  # older default-domain opsets are upgraded: pnnx crashes on many opset 6-10 files (11-12 convert)
TARGET_OPSET = 17  # what torch's exporter writes by default; pnnx converts it
MAX_IR_VERSION = 10  # pnnx 20261020's onnxruntime refuses IR 14 files
FOLD_ROUNDS = 4  # fold, infer shapes again, fold what that made constant, …
_QUANTIZED = ("ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul")
_DTYPES = {"f32": 1, "u8": 2, "i8": 3, "i16": 5, "i32": 6, "i64": 7, "bool": 9, "f16": 10, "f64": 11, "bf16": 16}
_SHAPE = re.compile(r"\[([\d,]*)\]([a-z0-9]*)")


class _UserError(Exception):
    """Something the user must change (a control-flow node, input shapes that do not fit)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# -- the parent's side -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prepared:
    """What the normalisation tells the conversion."""

    inputshape: str | None  # for pnnx's inputshape= (None: the shapes are in the file)
    fixed: list[tuple[int, str, Any, str]] = field(default_factory=list)  # (index, name, value, dtype)


def zero_dim(inputshape: str | None) -> bool:
    """Whether a pnnx input-shape text names a 0-d input (`[]i64`), which pnnx cannot parse."""
    return bool(inputshape) and "[]" in (inputshape or "")


def prepare(
    model_file: Path,
    kind: str,
    inputshape: str | None,
    timeout: float,
    memory: int,
    *,
    name: str = "model",
    on_log: Callable[[str], None] | None = None,
    values: Given | None = None,
) -> Prepared:
    """Normalise `model_file` (an .onnx in the conversion's folder) in place, in a child
    process of `memory` bytes of address space that stops after `timeout` seconds. Returns
    the `inputshape=` to give pnnx (None once the shapes are in the file) and the inputs fixed
    at their given `values` (onnx_given.py).

    ConversionError for control flow pnnx cannot convert, InputError for shapes that do not
    fit the model's inputs; any other failure of the child leaves the file as it was."""
    log = on_log or (lambda line: None)
    if kind != "onnx":
        return Prepared(_torchscript_shapes(inputshape, name))
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        if zero_dim(inputshape):
            raise ConversionError(
                f"inputshape {inputshape}: a 0-d input ([]) is written into the ONNX file before pnnx reads it, "
                "which needs the onnx package: pip install onnx"
            )
        log("the onnx package is not installed: the file goes to pnnx as it is (pip install onnx to normalise it)")
        return Prepared(inputshape)
    folder = model_file.parent / "prepare"
    folder.mkdir(exist_ok=True)
    job: dict[str, Any] = {"source": str(model_file.resolve()), "target": str((folder / "prepared.onnx").resolve())}
    job |= {"inputshape": inputshape, "name": name, "values": values, "memory": memory, "cpu": int(timeout) + 1}
    _limits_into(job)
    (folder / "job.json").write_text(json.dumps(job))
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, *_child_args(folder)]
    log("normalising the ONNX file (onnx: opset, shapes, constants, If) …")
    try:
        with slot("the converter", on_log):  # a slot of the machine's (children.py), named as the app expects
            proc = subprocess.run(
                argv, env=env, cwd=folder, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        failed = None if proc.returncode == 0 else _how_it_ended(proc.returncode, proc.stderr)
    except subprocess.TimeoutExpired:
        failed = f"it ran past {timeout:g} s"
    except OSError as e:
        failed = f"it could not start: {e.strerror or e}"
    result = _read_result(folder / "result.json") if failed is None else None
    if result is None:
        failed = failed or "it wrote no result"
    elif result.get("error"):
        kind_, message = result["error"]
        if kind_ == "input":
            raise InputError(message)
        if kind_ in ("control_flow", "unsupported"):
            raise ConversionError(f"{message}", log="\n".join(result.get("notes", [])))
        failed = message
    if failed is not None or result is None:
        if zero_dim(inputshape):
            raise ConversionError(
                f"inputshape {inputshape}: a 0-d input ([]) must be written into the ONNX file before pnnx reads "
                f"it, and normalising the file failed ({failed})"
            )
        log(f"normalising the ONNX file failed ({failed}): it goes to pnnx as it is")
        return Prepared(inputshape)
    for note in result["notes"]:
        log(note)
    if result["changed"]:
        os.replace(folder / "prepared.onnx", model_file)
    fixed = [(int(i), str(n), v, str(d)) for i, n, v, d in result.get("fixed", [])]
    return Prepared(None if result["shapes_written"] else inputshape, fixed)


def _torchscript_shapes(inputshape: str | None, name: str) -> str | None:
    """A TorchScript file's inputshape as given: pnnx takes no 0-d one (ConversionError)."""
    if zero_dim(inputshape):
        raise ConversionError(
            f"{name}: inputshape {inputshape} gives a 0-d input, which the pnnx converter cannot give a "
            "TorchScript module (its inputshape= has no [], and it calls forward with tensors only: on an int "
            'argument it fails with "forward() is missing value for argument …"); '
            f"{scripted_argument_hint()}; a 0-d tensor argument: trace with a 1-element tensor"
        )

    return inputshape


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return result if isinstance(result, dict) else None


def _child_args(folder: Path) -> list[str]:
    return ["-m", "kuiper_core.formats.onnx_prepare", str(folder)]


def _limits_into(job: dict[str, Any]) -> None:
    from .. import limits

    now = limits.current()
    job["fold_elements"] = min(FOLD_ELEMENTS, now.max_tensor_elements)
    job["fold_bytes"] = now.max_folded_bytes


def _how_it_ended(code: int, stderr: bytes) -> str:
    tail = " | ".join(stderr.decode(errors="replace").strip().splitlines()[-2:])[-300:]
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    return f"{how}{': ' + tail if tail else ''}"


# -- the child's side: shapes ---------------------------------------------------------------------
def parse_shapes(text: str) -> list[tuple[list[int], str | None]]:
    """`[1,3,8,8]f32,[]i64` → [([1,3,8,8], 'f32'), ([], 'i64')] (the text convert.py checked)."""
    return [([int(d) for d in dims.split(",")] if dims else [], dtype or None) for dims, dtype in _SHAPE.findall(text)]


def _dims_text(tensor_type: Any) -> str:
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim]
    return "[" + ",".join(dims) + "]"


def _write_shapes(graph: Any, inputshape: str) -> None:
    """The given shapes into the graph's inputs, one per input in order; an InputError-kind
    _UserError when their number or a dtype does not fit."""
    import onnx

    shapes = parse_shapes(inputshape)
    inputs = list(graph.input)
    if len(shapes) != len(inputs):
        listed = ", ".join(
            f"{i.name}: {onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)} "
            f"{_dims_text(i.type.tensor_type)}"
            for i in inputs[:8]
        )
        raise _UserError(
            "input",
            f"inputshape {inputshape} gives {len(shapes)} shape(s), but the model has {len(inputs)} input(s): {listed}",
        )
    codes = {v: k for k, v in _DTYPES.items()}
    for value, (dims, dtype) in zip(inputs, shapes):
        tensor_type = value.type.tensor_type
        if dtype is not None and _DTYPES.get(dtype) != tensor_type.elem_type:
            have = codes.get(tensor_type.elem_type, str(tensor_type.elem_type))
            raise _UserError(
                "input", f"inputshape {inputshape}: input '{value.name}' is {have} in the model, not {dtype}"
            )
        declared = tensor_type.shape.dim
        if len(declared) and len(declared) != len(dims):
            raise _UserError(
                "input",
                f"inputshape {inputshape}: input '{value.name}' has {len(declared)} dims in the model "
                f"({_dims_text(tensor_type)}), the shape given has {len(dims)}",
            )
        tensor_type.shape.Clear()
        tensor_type.shape.SetInParent()  # a 0-d input keeps an empty shape (not "unknown rank")
        for d in dims:
            tensor_type.shape.dim.add().dim_value = d


# -- the child's side: control flow left ------------------------------------------------------------
def _branch_summary(graph: Any) -> str:
    ops: dict[str, int] = {}
    for n in graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    listed = ", ".join(f"{op}×{k}" if k > 1 else op for op, k in list(ops.items())[:6])
    more = ", …" if len(ops) > 6 else ""
    return f"{len(graph.node)} node(s) ({listed}{more}) giving {len(graph.output)} output(s)"


def _depends_on(graph: Any, name: str) -> tuple[list[str], list[str]]:
    """What a value is computed from: (graph inputs whose values it reads, tensors whose shape
    it reads through Shape/Size where shape inference did not know that shape)."""
    producer = {o: n for n in graph.node for o in n.output}
    inputs = {i.name for i in graph.input}
    seen: set[str] = set()
    stack, values, shapes = [name], set(), set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in inputs:
            values.add(v)
        elif v in producer:
            node = producer[v]
            if node.op_type in ("Shape", "Size"):
                shapes.add(node.input[0])
            else:
                stack.extend(names_used([node]))
    return sorted(values), sorted(shapes)


def control_flow_error(model: Any, name: str, shapes_given: bool) -> str | None:
    """The message for the first control-flow node left in the main graph, or None."""
    graph = model.graph
    for node in graph.node:
        if node.op_type not in CONTROL_FLOW or node.domain not in ("", "ai.onnx"):
            continue
        label = f"{name}: node '{node.name or node.output[0]}' ({node.op_type})"
        if node.op_type != "If":
            body = next(subgraphs(node), None)
            inner = f" whose body has {_branch_summary(body)}" if body is not None else ""
            return (
                f"{label} is a loop{inner}: the pnnx converter cannot convert control flow. Export the model "
                "with the loop unrolled (torch.onnx.export traces loops with a fixed trip count), or run it "
                "with onnxruntime"
            )
        branches = {a.name: a.g for a in node.attribute if a.name in ("then_branch", "else_branch")}
        values, shapes = _depends_on(graph, node.input[0])
        small = all(can_be_fixed(i) for i in graph.input if i.name in values)
        if values and small:
            why = (
                f"depends on the values of input(s) {', '.join(map(repr, values))}, not only on their shapes "
                f"(give {'their values' if len(values) > 1 else 'its value'} and the model is converted for "
                f"{'them' if len(values) > 1 else 'it'}: kuiper run MODEL --input … with every input, "
                f"{', '.join(map(repr, values))} included, e.g. a 0-d int64 .npy; kuiper convert MODEL --input … "
                f"writes files for it; in the app, Home's field for the values of integer inputs, e.g. "
                f"{values[0]}=16000; kuiper_core.load(MODEL, inputs=[…]) or load(MODEL, values={{{values[0]!r}: …}}))"
            )
        elif values:
            why = (
                f"depends on the values of input(s) {', '.join(map(repr, values))}: data (not a few integers), "
                "so the model cannot be converted for one given value of it, and each input takes its own branch"
            )
        elif shapes and not shapes_given:
            why = (
                f"depends on the shape of {', '.join(map(repr, shapes[:3]))}, not known from the file: give the "
                "input shapes (--inputshape, or run with --input) and it may fold"
            )
        elif shapes:
            why = (
                f"depends on the shape of {', '.join(map(repr, shapes[:3]))}, which onnx's shape inference could "
                "not work out at these input shapes"
            )
        else:
            why = "could not be computed here"
        then_b, else_b = branches.get("then_branch"), branches.get("else_branch")
        structure = (
            f"then-branch {_branch_summary(then_b) if then_b is not None else '(missing)'}; "
            f"else-branch {_branch_summary(else_b) if else_b is not None else '(missing)'}"
        )
        return (
            f"{label} is control flow (ONNX If): its condition '{node.input[0]}' {why}. {structure}. "
            "The pnnx converter cannot convert an If it cannot fold: export the model with the condition "
            "fixed (e.g. silero-vad's 16 kHz-only variant, or torch.onnx.export of the module with that "
            "argument a constant), so that only the branch you need is in the file"
        )
    return None


def _channel_slopes(graph: Any) -> None:
    """Opset 6's PRelu applies a 1-d slope along the channels (axis 1); from opset 7 it
    broadcasts from the right, and onnx's version converter leaves the slope as it was: a
    (C,) slope of an (N, C, L) input becomes (C, 1)."""
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in list(graph.input) + list(graph.value_info)}
    inits = {i.name: i for i in graph.initializer}
    for node in graph.node:
        if node.op_type != "PRelu" or len(node.input) < 2 or node.input[1] not in inits:
            continue
        slope, rank = inits[node.input[1]], ranks.get(node.input[0], 0)
        if len(slope.dims) == 1 and slope.dims[0] > 1 and rank > 2:
            slope.dims.extend([1] * (rank - 2))
            for value in graph.input:  # IR < 4 lists it as an input too
                if value.name == slope.name:
                    for _ in range(rank - 2):
                        value.type.tensor_type.shape.dim.add().dim_value = 1


def max_only_clips(graph: Any) -> list[str]:
    """pnnx 20261020 writes `Clip(x, "", max)` with a max it cannot read as a constant as
    `Clip(x, max)`, which reads the max as the min (ONNX's second input): 1.4 off onnxruntime on a
    ReduceMean's max. `Min(x, max)` computes the same (Clip's bounds are scalars) and pnnx keeps it
    right; a constant max stays a Clip (pnnx writes torch.clamp(max=…), right)."""
    constants = {i.name for i in graph.initializer}
    constants |= {o for node in graph.node if node.op_type == "Constant" for o in node.output}
    made = 0
    for node in graph.node:
        inputs = list(node.input)
        if node.op_type == "Clip" and node.domain in ("", "ai.onnx") and len(inputs) == 3 and inputs[1] == "":
            if inputs[2] and inputs[2] not in constants:
                node.op_type = "Min"
                del node.input[1]
                made += 1
    return (
        [f"{made} Clip(x, '', max) with a computed max made Min(x, max) (pnnx reads that max as a min)"] if made else []
    )


_SAME_PADDED = ("Conv", "MaxPool", "AveragePool", "LpPool")


def same_pads(model: Any) -> list[str]:
    """pnnx 20261020 writes ONNX's `auto_pad=SAME_UPPER/SAME_LOWER` wrong: a SAME_UPPER MaxPool's
    odd total padding on the wrong side (2.0 off onnxruntime on MTCNN's R-Net, a 3x3 stride-2 max
    pool of 22x22: ONNX pads 0 before and 1 after), an AveragePool's as if the padding counted,
    a Conv's as `padding='same'` (which PyTorch has at stride 1 only), and a SAME_LOWER Conv not
    at all. Where the input's spatial shape is known, the pads ONNX means are written instead
    (`pads`, auto_pad NOTSET), which pnnx converts right (an AveragePool's uneven ones it keeps
    as an ONNX node, which the engine names as unsupported)."""
    from onnx import helper

    shapes = _known_shapes(model.graph)
    made = 0
    for node in model.graph.node:
        attrs = {a.name: a for a in node.attribute}
        mode = helper.get_attribute_value(attrs["auto_pad"]) if "auto_pad" in attrs else b""
        shape = shapes.get(node.input[0]) if node.input else None
        if node.op_type not in _SAME_PADDED or mode not in (b"SAME_UPPER", b"SAME_LOWER") or shape is None:
            continue
        if node.op_type == "MaxPool" and mode == b"SAME_LOWER":  # pnnx pads these right, and not explicit ones
            continue
        spatial = shape[2:]
        kernel = list(helper.get_attribute_value(attrs["kernel_shape"])) if "kernel_shape" in attrs else None
        if kernel is None:  # a Conv's kernel is its weight's shape
            weight = shapes.get(node.input[1]) if len(node.input) > 1 else None
            kernel = weight[2:] if weight is not None else None
        if kernel is None or len(kernel) != len(spatial):
            continue
        strides = list(helper.get_attribute_value(attrs["strides"])) if "strides" in attrs else [1] * len(spatial)
        dilations = list(helper.get_attribute_value(attrs["dilations"])) if "dilations" in attrs else [1] * len(spatial)
        begins, ends = [], []
        for size, k, stride, dilation in zip(spatial, kernel, strides, dilations):
            total = max(0, (-(-size // stride) - 1) * stride + (k - 1) * dilation + 1 - size)
            small, large = total // 2, total - total // 2
            begins.append(small if mode == b"SAME_UPPER" else large)
            ends.append(large if mode == b"SAME_UPPER" else small)
        node.attribute.remove(attrs["auto_pad"])
        node.attribute.append(helper.make_attribute("pads", begins + ends))
        made += 1
    return (
        [f"{made} auto_pad=SAME_* node(s) given the explicit pads ONNX means (pnnx pads them otherwise)"]
        if made
        else []
    )


def _known_shapes(graph: Any) -> dict[str, list[int]]:
    """The fully known shapes of the graph's inputs, weights and inferred values."""
    shapes = {i.name: list(i.dims) for i in graph.initializer}
    for value in list(graph.input) + list(graph.value_info):
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = [d.dim_value for d in dims]
    return shapes


_FLATTENING = ("Softmax", "LogSoftmax")  # before opset 13: over the input flattened to 2-d at `axis`


def flattening_softmaxes(model: Any) -> list[str]:
    """Before opset 13, ONNX's Softmax and LogSoftmax flatten the input to 2-d at `axis` (default 1)
    and normalise over everything from it on; pnnx 20261020 writes them as F.softmax(dim=axis),
    over that one dim: 0.46 off onnxruntime on a (1,3,4) input at axis 1. Where the input's
    shape is known, made Flatten(axis) -> Softmax(axis=1) -> Reshape(shape), which pnnx writes
    right; where it is not, left for the conversion check to name."""
    import numpy as np
    from onnx import helper, numpy_helper

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None or opset >= 13:
        return []
    graph = model.graph
    shapes = _known_shapes(graph)
    taken = names_used(graph.node) | {o for n in graph.node for o in n.output} | {i.name for i in graph.initializer}
    nodes: list[Any] = []
    made = 0
    for node in graph.node:
        shape = shapes.get(node.input[0]) if node.op_type in _FLATTENING and node.domain in ("", "ai.onnx") else None
        rank = len(shape) if shape is not None else 0
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 1)
        if shape is None or not -rank <= axis < rank or axis % rank == rank - 1:  # (over the last axis: alike)
            nodes.append(node)
            continue
        flat, two_d, target = (_fresh(f"{node.output[0]}_{what}", taken) for what in ("flat", "2d", "shape"))
        graph.initializer.append(numpy_helper.from_array(np.array(shape, np.int64), target))
        nodes += [
            helper.make_node("Flatten", [node.input[0]], [flat], axis=axis % rank),
            helper.make_node(node.op_type, [flat], [two_d], axis=1, name=node.name),
            helper.make_node("Reshape", [two_d, target], [node.output[0]]),
        ]
        made += 1
    if made:
        del graph.node[:]
        graph.node.extend(nodes)
    return (
        [f"{made} opset-{opset} Softmax/LogSoftmax over all dims from its axis made Flatten, Softmax, Reshape"]
        if made
        else []
    )


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def out_of_reach(model: Any, name: str) -> str | None:
    """Why the engine cannot run the model at all, or None: string, sequence or map values
    (its tensors are numbers), training operators."""
    graph = model.graph
    for value in list(graph.input) + list(graph.output):
        which = value.type.WhichOneof("value")
        if which != "tensor_type":
            kind = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional"}.get(
                which, which
            )
            return f"{name}: {value.name!r} is {kind}, not a tensor: the engine's values are numeric tensors"
        if value.type.tensor_type.elem_type == 8:  # STRING
            return f"{name}: {value.name!r} is a string tensor: the engine's values are numeric tensors"
    for index, node in enumerate(graph.node):
        if node.op_type in _QUANTIZED or node.op_type.startswith("QLinear"):
            return (
                f"{name}: node {index} '{node.name}' ({node.op_type}) is a quantized operator (integer arithmetic, "
                "as onnxruntime.quantization writes it): the engine and pnnx run float models; convert the float "
                "model it was quantized from"
            )
        if node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx"):
            return (
                f"{name}: node {index} '{node.name}' (QuantizeLinear) rounds a tensor to 8-bit steps: the model is "
                "quantized in QDQ form (QuantizeLinear/DequantizeLinear pairs, as onnxruntime.quantization writes "
                "it), which the engine and pnnx do not run; convert the float model it was quantized from"
            )
        if node.domain == "ai.onnx.preview.training":
            return (
                f"{name}: node {index} '{node.name}' ({node.op_type}) is a training operator: the engine runs inference"
            )
        if "Sequence" in node.op_type or node.op_type == "ConcatFromSequence":
            return (
                f"{name}: node {index} '{node.name}' ({node.op_type}) works on an ONNX sequence (a list of tensors): "
                "the engine's values are tensors; export with the list unrolled (e.g. torch.split's parts used one by one)"
            )
    return None


# -- the child's side: the steps --------------------------------------------------------------------
def normalise(
    model: Any,
    inputshape: str | None,
    name: str,
    fold_elements: int,
    fold_bytes: int,
    values: Given | None = None,
) -> dict:
    """Steps 1-6 of the module docstring on a ModelProto, in place: {'notes', 'changed',
    'shapes_written', 'fixed'}; _UserError for what the user must change. `values`: per input,
    its given value where it is small (onnx_given.py), fixed where control flow or a shape reads it."""
    import onnx

    notes: list[str] = []
    changed = False
    graph = model.graph
    unreachable = out_of_reach(model, name)
    if unreachable is not None:
        raise _UserError("unsupported", unreachable)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is not None and opset < MIN_OPSET:
        if opset < 7:
            _channel_slopes(graph)
        try:
            upgraded = onnx.version_converter.convert_version(model, TARGET_OPSET)
            model.CopyFrom(upgraded)
            model.ir_version = max(model.ir_version, onnx.helper.find_min_ir_version_for(model.opset_import, True))
            graph = model.graph
            notes.append(f"opset {opset} upgraded to {TARGET_OPSET} (onnx.version_converter)")
            changed = True
        except Exception as e:  # noqa: BLE001  -- an op the converter has no adapter for
            notes.append(f"opset {opset} could not be upgraded to {TARGET_OPSET} ({str(e).splitlines()[0][:200]})")
    inits = {i.name for i in graph.initializer}
    if any(i.name in inits for i in graph.input):
        kept = [i for i in graph.input if i.name not in inits]
        notes.append(f"{len(graph.input) - len(kept)} weight(s) listed as graph inputs (IR < 4): inputs no more")
        del graph.input[:]
        graph.input.extend(kept)
        changed = True
    if model.ir_version > MAX_IR_VERSION:
        notes.append(f"IR version {model.ir_version} written as {MAX_IR_VERSION} (pnnx's onnxruntime reads up to that)")
        model.ir_version = MAX_IR_VERSION
        changed = True
    if inputshape:
        _write_shapes(graph, inputshape)
        changed = True
    folded, ifs, splits = _fold(model, notes, fold_elements, fold_bytes)
    fixed = _inputs_to_fix(model.graph, values)
    if fixed:  # a condition or a shape reads a small input the user gave: folded at its value
        fix_inputs(model.graph, fixed)
        more = _fold(model, notes, fold_elements, fold_bytes)
        folded, ifs, splits = folded + more[0], ifs + more[1], splits + more[2]
        notes.append(fixed_note(fixed))
    changed = changed or bool(folded or ifs or splits or fixed)
    graph = model.graph
    if folded or ifs:
        what = f"{folded} constant node(s) folded" + (f", {ifs} If(s) with a constant condition inlined" if ifs else "")
        notes.append(what + " at these input shapes")
    if splits:
        notes.append(f"{splits} Split or Expand node(s) given explicit sizes (an even Split, a two-way Expand)")
    widened = widen_f64_scalars(graph)
    if widened:
        notes.append(f"{widened} one-element float64 constant(s) repeated along the operand they broadcast with")
        changed = True
    resizes = keep_lossy_resizes(model)  # kept as Resize where pnnx's F.interpolate would answer otherwise
    clips = max_only_clips(graph) + flattening_softmaxes(model) + same_pads(model)
    notes += resizes + clips
    changed = changed or bool(resizes) or bool(clips)
    problem = control_flow_error(model, name, bool(inputshape))
    if problem is not None:
        raise _UserError("control_flow", problem)
    codes = {v: k for k, v in _DTYPES.items()}
    index = {value.name: i for i, value in enumerate(graph.input)}
    kept = [
        [index[n], n, a.tolist(), codes.get(onnx.helper.np_dtype_to_tensor_dtype(a.dtype), "i64")]
        for n, a in fixed.items()
    ]
    return {"notes": notes, "changed": changed, "shapes_written": bool(inputshape), "fixed": kept}


def _fold(model: Any, notes: list[str], fold_elements: int, fold_bytes: int) -> tuple[int, int, int]:
    """Step 5, repeated while it folds: (constant nodes folded, Ifs inlined, Splits given sizes)."""
    import onnx

    folded = ifs = splits = 0
    for _ in range(FOLD_ROUNDS):
        try:
            model.CopyFrom(onnx.shape_inference.infer_shapes(model, data_prop=True))
        except Exception as e:  # noqa: BLE001  -- inference is a help, not a requirement
            notes.append(f"shape inference failed ({str(e).splitlines()[0][:200]})")
        folder = Folder(model, fold_elements, fold_bytes)
        if not folder.run():
            break
        folded += folder.folded
        ifs += folder.ifs
        splits += folder.splits
    return folded, ifs, splits


def _inputs_to_fix(graph: Any, values: Given | None) -> dict[str, Any]:
    try:
        return inputs_to_fix(graph, values, _depends_on)
    except InputError as e:  # a value given for no input of the model: the parent raises it
        raise _UserError("input", str(e)) from None


def _child(folder: Path) -> None:
    job = json.loads((folder / "job.json").read_text())
    set_rlimits(job["memory"], job["cpu"])  # within the hard limits the parent runs under
    import onnx

    result: dict[str, Any]
    try:
        model = onnx.load(job["source"])
        result = normalise(
            model, job["inputshape"], job["name"], job["fold_elements"], job["fold_bytes"], job.get("values")
        )
        if result["changed"]:
            onnx.save(model, job["target"])
    except _UserError as e:
        result = {"error": [e.kind, str(e)], "notes": []}
    except Exception as e:  # noqa: BLE001  -- reported to the parent, which converts the file as it is
        result = {"error": ["failed", f"{type(e).__name__}: {str(e)[:300]}"], "notes": []}
    (folder / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
