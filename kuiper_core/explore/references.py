"""What the Forward page compares with: a user's .npz, a saved run, PyTorch's tensors.

A reference file is keyed however its author could make it (an operand number, `out0`, an
operator name or PyTorch module path: compare.key_operand reads them all); `match_keys` adds
how each key matched and why each other one did not, so nothing is dropped silently.
kuiper_core.references.hooks writes such a file from a torch model.

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

from ..graph import Graph
from . import compare

# How a key was matched (the page counts them).
BY_OPERAND, BY_OUTPUT, BY_OPERATOR = "operand number", "model output", "operator name or module path"
_OUT = re.compile(r"out(\d+)$")


@dataclass
class KeyMatch:
    """What an .npz's keys matched, for the page: compare.match_references (the one reader of
    reference keys) plus, per key, how it matched or why it did not."""

    refs: dict[str, np.ndarray]  # operand -> array
    keys: int  # arrays in the file
    unmatched: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # unmatched key -> why
    how: dict[str, str] = field(default_factory=dict)  # matched key -> BY_*
    duplicates: list[str] = field(default_factory=list)  # keys for an operand another key already gave
    hint: str | None = None  # compare's word on why many keys matched nothing

    @property
    def matched(self) -> int:
        return self.keys - len(self.unmatched)

    def counts(self) -> dict[str, int]:
        """Matched keys per kind, e.g. {'operand number': 40, 'model output': 1}."""
        return dict(Counter(self.how.values()))


def match_keys(graph: Graph, npz: Mapping[str, Any]) -> KeyMatch:
    """compare.match_references, with how each key matched and why the others did not."""
    match = compare.match_references(graph, npz)
    outputs = compare.output_operand_names(graph)
    how = {k: _kind(graph, k) for k in match.operands}
    given: set[str] = set()
    duplicates = []
    for k, operand in match.operands.items():  # in compare's order: the first key of an operand gave it
        if operand in given:
            duplicates.append(k)
        given.add(operand)
    names = {op.name: op for op in graph.operators}  # once, not per key
    reasons = {
        k: (
            f"pnnx fused this module with the BatchNorm after it into {match.fused_into[k]} (compared with the "
            "BatchNorm's tensor): its own output exists nowhere in the converted model"
            if k in match.fused_into
            else _why(graph, k, outputs, names)
        )
        for k in match.unmatched
    }
    return KeyMatch(match.refs, match.keys, match.unmatched, reasons, how, duplicates, match.hint)


def _kind(graph: Graph, key: str) -> str:
    if key in graph.operands or (key.startswith("v_") and key[2:] in graph.operands):
        return BY_OPERAND
    return BY_OUTPUT if _OUT.match(key) else BY_OPERATOR


def _why(graph: Graph, key: str, outputs: list[str], names: Mapping[str, Any]) -> str:
    """Why `key` names nothing in `graph` (compare.key_operand said so)."""
    out = _OUT.match(key)
    if out is not None:
        n = len(outputs)
        return f"the model has {n} output{'s' if n != 1 else ''} (out0…out{n - 1})"
    base, _, index = key.rpartition(":")
    if not (base and index.isdigit()):
        base, index = key, ""
    op = names.get(base)
    if op is not None:
        n = len(op.outputs)
        if index:
            return f"the operator {base} has {n} output{'s' if n != 1 else ''}"
        return f"the operator {base} has {n} outputs: key them {base}:0 … {base}:{n - 1}"
    if "#" in base and base.split("#", 1)[0] in names:
        return (
            f"the operator {base.split('#', 1)[0]} runs once in this graph (pnnx renames a module's later calls, "
            "e.g. pnnx_unique_N)"
        )
    if base.isdigit() or (base.startswith("v_") and base[2:].isdigit()):
        return "this model has no operand of this number (a run of another model, or an optimisation removed it)"
    return (
        "no operand, output or operator has this name (pnnx fuses Conv2d + BatchNorm2d into convbn2d_N, inlines others)"
    )


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


# -- what the Forward page compares with --------------------------------------------------------------
BUNDLED, FRAMEWORK, UPLOADED = "bundled", "framework", "upload"  # the choices besides saved runs ("run:LABEL")
NCNN = "ncnn"  # the deployed ncnn model: ncnn's own run of the files pnnx wrote (references/ncnn_deployed.py)


@dataclass
class ActiveReferences:
    """The references in use: operand -> array, where they come from (for sentences), how an
    uploaded file's keys matched (None for bundled ones), and a token that changes when they do
    (with the model: the bundled references of one model never change)."""

    refs: dict[str, np.ndarray]
    source: str
    match: KeyMatch | None
    token: tuple[Any, ...]
    onnx_nodes: dict[str, str] = field(default_factory=dict)  # operator -> its ONNX node (computed from an .onnx)


def operator_onnx_nodes(graph: Graph, operand_nodes: Mapping[str, str]) -> dict[str, str]:
    """Each operator's ONNX node name ('/layer1/layer1.0/conv1/Conv'), from the node that made
    its first output operand that has one; pnnx.Output (no outputs) takes the node making the
    model's output it passes on. pnnx renames operators (conv2d_1): the .onnx's names are what
    its author knows."""
    out: dict[str, str] = {}
    for op in graph.operators:
        operands = op.inputs if op.type == "pnnx.Output" else op.outputs
        node = next((operand_nodes[o.name] for o in operands if o.name in operand_nodes), None)
        if node is not None:
            out[op.name] = node
    return out


def reference_choices(
    bundled: bool, uploaded: bool, runs: list[SavedRun], framework: bool = False, ncnn: bool = False
) -> list[str]:
    """The sources the page offers, the bundled references first; an upload is always offered;
    `framework`: references computed from the model's own framework can be (or were) made;
    `ncnn`: the model has a deployed ncnn model that ncnn can run here."""
    return (
        ([BUNDLED] if bundled else [])
        + ([FRAMEWORK] if framework else [])
        + ([NCNN] if ncnn else [])
        + [UPLOADED]
        + [f"run:{r.label}" for r in runs]
    )


def choose_references(
    graph: Graph,
    choice: str | None,
    *,
    bundled: Mapping[str, np.ndarray] | None,
    uploaded: tuple[str, Mapping[str, np.ndarray]] | None,
    runs: list[SavedRun],
    framework: tuple[str, dict[str, np.ndarray]] | None = None,
    ncnn: dict[str, np.ndarray] | None = None,
) -> ActiveReferences:
    """The references for `choice`. `bundled` (PyTorch's, keyed by operand and outN) applies
    only to the sample input; `uploaded` is (file name, arrays); `framework` (what computed
    them, operand -> array) the model's own framework's for this input; `ncnn` ncnn's values of
    our operands (the deployed model's run on this input)."""
    if choice == BUNDLED and bundled:
        return ActiveReferences(compare.references_for(graph, bundled), "PyTorch (sample input)", None, (BUNDLED,))
    if choice == FRAMEWORK and framework is not None:
        source, computed = framework
        return ActiveReferences(computed, source, None, (FRAMEWORK, id(computed)))
    if choice == NCNN and ncnn is not None:
        return ActiveReferences(ncnn, "ncnn (the deployed model)", None, (NCNN, id(ncnn)))
    if choice == UPLOADED and uploaded is not None:
        name, arrays = uploaded
        match = match_keys(graph, arrays)
        return ActiveReferences(match.refs, f"the uploaded {name}", match, (UPLOADED, name, id(arrays)))
    run = next((r for r in runs if choice == f"run:{r.label}"), None)
    if run is not None:
        match = match_keys(graph, run.arrays)
        return ActiveReferences(match.refs, f"the saved run '{run.label}'", match, ("run", run.label, id(run.arrays)))
    return ActiveReferences({}, "", None, ())
