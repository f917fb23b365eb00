"""Which operand each reference tensor belongs to: the keys of a user's .npz, a saved run.

A reference file is keyed however its author could make it: by pnnx operand number (`"17"`,
what pnnx's generated `*_pnnx.py` computes), by forward()'s output (`out0`, `out1`, …), or by
operator name, which for the modules pnnx keeps is the PyTorch module path a forward hook
sees (`layer1.0.relu`, `fc`). `match_references` maps every key to an operand or says why it
could not; nothing is dropped silently. `HOOK_SNIPPET` writes such a file from a torch model.

A run of the engine (`run_arrays`) is saved keyed by operand name plus `outN`, so the same file
can be uploaded back as a reference, or compared with a run of another model (before and
after `kuiper opt`) where operand names or outputs agree.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph import Graph, Operand, Operator

# How a key was matched (the page counts them).
BY_OPERAND, BY_OUTPUT, BY_OPERATOR = "operand number", "model output", "operator name or module path"
_OUT = re.compile(r"out(\d+)$")
_ELEMENT = re.compile(r"(.+):(\d+)$")  # NAME:i, the i-th output of a module returning a tuple


def output_operand_names(graph: Graph) -> list[str]:
    """The operands behind forward()'s outputs out0, out1, ...: pnnx.Output's inputs in
    order, a prim::TupleConstruct expanded into its elements (as forward() flattens it)."""
    names: list[str] = []

    def flat(operand: Operand) -> None:
        producer = operand.producer
        if producer is not None and producer.type == "prim::TupleConstruct":
            for o in producer.inputs:
                flat(o)
        else:
            names.append(operand.name)

    for op in graph.outputs:
        for o in op.inputs:
            flat(o)
    return names


@dataclass
class ReferenceMatch:
    """An .npz's arrays keyed by the operand each one is compared with."""

    refs: dict[str, np.ndarray]
    keys: int  # arrays in the file
    unmatched: list[str] = field(default_factory=list)  # keys naming no operand (nor outN, nor an operator)
    reasons: dict[str, str] = field(default_factory=dict)  # unmatched key -> why
    how: dict[str, str] = field(default_factory=dict)  # matched key -> BY_*
    duplicates: list[str] = field(default_factory=list)  # keys for an operand another key already gave
    stripped_prefix: str = ""  # a wrapper's prefix removed from every key ("module." of DataParallel)

    @property
    def matched(self) -> int:
        return self.keys - len(self.unmatched)

    def counts(self) -> dict[str, int]:
        """Matched keys per kind, e.g. {'operand number': 40, 'model output': 1}."""
        return dict(Counter(self.how.values()))


def _operators_by_key(graph: Graph) -> dict[str, Operator]:
    return dict(zip(graph.operator_keys(), graph.operators))


def _common_prefix(keys: list[str], graph: Graph, operators: Mapping[str, Operator]) -> str:
    """`module.` when every key but operands and outputs starts with it and removing it
    names more operators than keeping it (hooks put on a DataParallel or another wrapper)."""
    named = [k for k in keys if k not in graph.operands and not _OUT.match(k)]
    heads = {k.split(".", 1)[0] if "." in k else None for k in named}
    if len(named) < 2 or len(heads) != 1 or None in heads:
        return ""
    prefix = f"{heads.pop()}."

    def known(name: str) -> bool:
        element = _ELEMENT.match(name)
        return name in operators or (element is not None and element.group(1) in operators)

    stripped = sum(known(k[len(prefix) :]) for k in named)
    return prefix if stripped > sum(known(k) for k in named) else ""


def match_references(graph: Graph, npz: Mapping[str, Any]) -> ReferenceMatch:
    """Map each key of an .npz to the operand it is a reference for.

    Accepted keys, tried in this order: an operand name (`17`); `outN`, forward()'s N-th
    output; an operator name or key (`layer1.0.relu`, `detect#2` for the second operator pnnx
    gave that name), meaning its only output; `NAME:i`, that operator's i-th output. When
    every key carries one wrapper prefix (`module.layer1.0.relu`) it is removed. Keys that
    match nothing are listed with the reason; two keys for one operand keep the first (an
    operand name wins over every other kind)."""
    operators = _operators_by_key(graph)
    outputs = output_operand_names(graph)
    keys = list(npz)
    prefix = _common_prefix(keys, graph, operators)
    found: dict[str, tuple[str, str]] = {}  # key -> (operand, how)
    reasons: dict[str, str] = {}
    for k in keys:
        target = _resolve(k, graph, operators, outputs, prefix)
        if isinstance(target, tuple):
            found[k] = target
        else:
            reasons[k] = target
    refs: dict[str, np.ndarray] = {}
    how: dict[str, str] = {}
    duplicates: list[str] = []
    for rank in (BY_OPERAND, BY_OPERATOR, BY_OUTPUT):  # an operand's own name wins
        for k, (operand, kind) in found.items():
            if kind != rank:
                continue
            if operand in refs:
                duplicates.append(k)
            else:
                refs[operand] = np.asarray(npz[k])
            how[k] = kind
    unmatched = [k for k in keys if k in reasons]
    return ReferenceMatch(refs, len(keys), unmatched, reasons, how, duplicates, prefix)


def _resolve(
    key: str, graph: Graph, operators: Mapping[str, Operator], outputs: list[str], prefix: str
) -> tuple[str, str] | str:
    """(operand, how) for a key, or the reason it names nothing."""
    if key in graph.operands:
        return key, BY_OPERAND
    out = _OUT.match(key)
    if out is not None:
        i = int(out.group(1))
        if i < len(outputs):
            return outputs[i], BY_OUTPUT
        return f"the model has {len(outputs)} output{'s' if len(outputs) != 1 else ''} (out0…out{len(outputs) - 1})"
    name = key[len(prefix) :] if prefix and key.startswith(prefix) else key
    element = _ELEMENT.match(name)
    base, index = (element.group(1), int(element.group(2))) if element else (name, None)
    op = operators.get(base)
    if op is None:
        if "#" in base and base.split("#", 1)[0] in operators:
            return (
                f"the operator {base.split('#', 1)[0]} runs once in this graph (pnnx renames a module's later calls, "
                "e.g. pnnx_unique_N)"
            )
        if base.isdigit():
            return "this model has no operand of this number (a run of another model, or an optimisation removed it)"
        return "no operand, output or operator has this name (pnnx fuses Conv2d + BatchNorm2d into convbn2d_N, inlines others)"
    if index is None:
        if len(op.outputs) == 1:
            return op.outputs[0].name, BY_OPERATOR
        return f"the operator {base} has {len(op.outputs)} outputs: key them {base}:0 … {base}:{len(op.outputs) - 1}"
    if index < len(op.outputs):
        return op.outputs[index].name, BY_OPERATOR
    return f"the operator {base} has {len(op.outputs)} output{'s' if len(op.outputs) != 1 else ''}"


def references_for(graph: Graph, npz: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return match_references(graph, npz).refs


# -- a run as a reference ---------------------------------------------------------------------------
def run_arrays(values: Mapping[str, Any], outputs: list[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every tensor of a run keyed by operand name, plus `outN` for the outputs when the run
    finished. A tuple-valued operand (prim::TupleConstruct's) is left out: its elements are
    operands of their own."""
    arrays = {name: v for name, v in values.items() if isinstance(v, np.ndarray)}
    for i, y in enumerate(outputs or []):
        arrays.setdefault(f"out{i}", y)
    return arrays


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An uncompressed .npz in memory (fast; float32 activations hardly compress)."""
    buf = io.BytesIO()
    named = {k: np.asarray(v) for k, v in arrays.items()}
    np.savez(buf, **named)  # type: ignore[arg-type]  # NumPy's stubs match **kwds against allow_pickle: bool
    return buf.getvalue()


@dataclass
class SavedRun:
    """A run kept to compare a later one with (another input, another export, after `kuiper opt`)."""

    label: str
    model: str
    arrays: dict[str, np.ndarray]
    operators: int  # operators it had run
    total: int  # operators of its model

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def describe(self) -> str:
        done = "complete" if self.operators >= self.total else f"{self.operators} of {self.total} operators"
        return f"{self.label} ({self.model}, {done}, {len(self.arrays)} tensors, {self.nbytes / 2**20:.1f} MB)"


def keep_runs(runs: list[SavedRun], new: SavedRun, max_runs: int, max_bytes: int) -> tuple[list[SavedRun], list[str]]:
    """`runs` + `new`, the oldest dropped until both bounds hold (the new one is always kept);
    also the labels dropped."""
    kept = [r for r in runs if r.label != new.label] + [new]
    dropped: list[str] = []
    while len(kept) > 1 and (len(kept) > max_runs or sum(r.nbytes for r in kept) > max_bytes):
        dropped.append(kept.pop(0).label)
    return kept, dropped


HOOK_SNIPPET = '''\
import numpy as np
import torch


def save_references(model: torch.nn.Module, inputs: tuple, path: str = "references.npz") -> None:
    """Every module's output for `inputs`, keyed by module path (what Kuiper Explorer matches
    with operator names), plus out0, out1, ... for the model's outputs."""
    arrays, calls = {}, {}

    def flat(value):
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (tuple, list)):
            return [t for v in value for t in flat(v)]
        return []

    def hook(name):
        def record(module, args, output):
            calls[name] = calls.get(name, 0) + 1
            key = name if calls[name] == 1 else f"{name}#{calls[name]}"  # a module called again
            tensors = flat(output)
            for i, t in enumerate(tensors):
                arrays[key if len(tensors) == 1 else f"{key}:{i}"] = t.detach().cpu().numpy()

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    try:
        with torch.no_grad():
            outputs = flat(model.eval()(*inputs))
    finally:
        for h in handles:
            h.remove()
    arrays.update({f"out{i}": t.detach().cpu().numpy() for i, t in enumerate(outputs)})
    np.savez(path, **arrays)


# e.g. save_references(model, (torch.from_numpy(np.load("input.npy")),))
'''


# -- what the Forward page compares with --------------------------------------------------------------
BUNDLED, UPLOADED = "bundled", "upload"  # reference choices besides saved runs ("run:LABEL")


@dataclass
class ActiveReferences:
    """The references in use: operand -> array, where they come from (for sentences), how an
    uploaded file's keys matched (None for bundled ones), and a token that changes when they do
    (with the model: the bundled references of one model never change)."""

    refs: dict[str, np.ndarray]
    source: str
    match: ReferenceMatch | None
    token: tuple[Any, ...]


def reference_choices(bundled: bool, uploaded: bool, runs: list[SavedRun]) -> list[str]:
    """The sources the page offers, the bundled references first; an upload is always offered."""
    return ([BUNDLED] if bundled else []) + [UPLOADED] + [f"run:{r.label}" for r in runs]


def choose_references(
    graph: Graph,
    choice: str | None,
    *,
    bundled: Mapping[str, np.ndarray] | None,
    uploaded: tuple[str, Mapping[str, np.ndarray]] | None,
    runs: list[SavedRun],
) -> ActiveReferences:
    """The references for `choice`. `bundled` (PyTorch's, keyed by operand and outN) applies
    only to the sample input; `uploaded` is (file name, arrays)."""
    if choice == BUNDLED and bundled:
        return ActiveReferences(references_for(graph, bundled), "PyTorch (sample input)", None, (BUNDLED,))
    if choice == UPLOADED and uploaded is not None:
        name, arrays = uploaded
        match = match_references(graph, arrays)
        return ActiveReferences(match.refs, f"the uploaded {name}", match, (UPLOADED, name, id(arrays)))
    run = next((r for r in runs if choice == f"run:{r.label}"), None)
    if run is not None:
        match = match_references(graph, run.arrays)
        return ActiveReferences(match.refs, f"the saved run '{run.label}'", match, ("run", run.label, id(run.arrays)))
    return ActiveReferences({}, "", None, ())
