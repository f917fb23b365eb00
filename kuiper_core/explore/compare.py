"""The engine's tensors against reference tensors (PyTorch's, or a user's .npz).

What the Forward page says about correctness comes from here, so every statement is backed
by a count: how many operators were compared at all (an operator without a reference is
not "within tolerance", it is unchecked), which references have the wrong shape (a shape
mismatch, not an infinite error), and which keys of an uploaded .npz name nothing.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..graph import Graph, Operand, Operator, shape_label
from .fused_keys import absorbed_note, fused_keys

# Comparison statuses, worst last (an operator's status is its worst output's).
OK, OVER, SHAPE, NO_REF = "within tolerance", "over tolerance", "shape mismatch", "no reference"
_RANK = {NO_REF: 0, OK: 1, OVER: 2, SHAPE: 3}

# A reference's tolerance (default: `tolerance`): one bound, or one per element (--relative).
Tolerance = Callable[[np.ndarray], "float | np.ndarray"]

# Fill colours of the graph's error view: states only (operators not compared are neutral).
# Darker as worse, so pass and fail differ in lightness too: apart under every colour-vision
# deficiency and in greyscale (tests/test_palette.py).
ERROR_COLORS = {OK: "#92dd9a", OVER: "#d67169", SHAPE: "#aea0f2", "first bad": "#b3514e"}


# -- one tensor ----------------------------------------------------------------------------------
def tolerance(reference: np.ndarray) -> float:
    """The project's tolerance: 1e-4 * max(1, max|y|) (as tests/test_ops.py)."""
    ref = np.asarray(reference)
    if ref.dtype.kind not in "fc" or ref.size == 0:
        return 0.0 if ref.dtype.kind in "iub" else 1e-4
    finite = np.abs(ref[np.isfinite(ref)])
    return 1e-4 * max(1.0, float(finite.max()) if finite.size else 1.0)


def difference(value: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|value - reference| elementwise in float64 (same shapes only). Values that agree
    exactly (inf == inf, NaN and NaN) count 0; a NaN on one side only counts inf."""
    v, r = np.asarray(value), np.asarray(reference)
    if v.shape != r.shape:
        raise ValueError(f"shapes differ: {v.shape} vs {r.shape}")
    if v.dtype.kind == "b" or r.dtype.kind == "b":
        return (v != r).astype(np.float64)
    kind = np.result_type(v, r).kind
    if kind not in "fc":
        return np.abs(v.astype(np.int64) - r.astype(np.int64)).astype(np.float64)
    dt = np.complex128 if kind == "c" else np.float64
    v64, r64 = v.astype(dt), r.astype(dt)
    with np.errstate(invalid="ignore"):  # inf - inf
        diff = np.abs(v64 - r64)
    same = (v64 == r64) | (np.isnan(v64) & np.isnan(r64))
    return np.where(same, 0.0, np.where(np.isnan(diff), np.inf, diff))


def max_abs_error(value: np.ndarray, reference: np.ndarray) -> float:
    """Largest |value - reference|; inf when shapes differ (use `compare` to tell why)."""
    v, r = np.asarray(value), np.asarray(reference)
    if v.shape != r.shape:
        return float("inf")
    return float(difference(v, r).max()) if v.size else 0.0


@dataclass(frozen=True)
class Comparison:
    """One output against its reference."""

    status: str  # OK, OVER or SHAPE
    max_error: float | None  # None for a shape mismatch
    tolerance: float
    shape: tuple[int, ...]
    ref_shape: tuple[int, ...]
    where: tuple[int, ...] | None = None  # index of the largest error (None: no error, or shapes differ)
    value_at: complex | float | None = None  # ours there
    reference_at: complex | float | None = None  # the reference's there

    @property
    def ratio(self) -> float | None:
        """max_error / tolerance (above 1 fails); None without an error."""
        if self.max_error is None:
            return None
        if self.tolerance > 0:
            return self.max_error / self.tolerance
        return 0.0 if self.max_error == 0 else float("inf")

    @property
    def relative_error(self) -> float | None:
        """|error| / |reference| at the largest error (inf where the reference is 0)."""
        if self.max_error is None or self.reference_at is None:
            return None
        if self.max_error == 0:
            return 0.0
        ref = abs(self.reference_at)
        return self.max_error / ref if ref > 0 else float("inf")

    def text(self) -> str:
        if self.status == SHAPE:
            return f"shape mismatch: the engine made {shape_label(self.shape)}, the reference is {shape_label(self.ref_shape)}"
        return f"max |error| {self.max_error:.3g} (tolerance {self.tolerance:.3g}): {self.status}"

    def where_text(self) -> str:
        """'at [0, 3, 5, 1]: ours 1.23, reference 1.11' ('' without an error)."""
        if self.where is None or not self.max_error:
            return ""
        return f"at {list(self.where)}: ours {self.value_at:.6g}, reference {self.reference_at:.6g}"


def compare(value: np.ndarray, reference: np.ndarray, tol: float | np.ndarray | None = None) -> Comparison:
    """`value` against `reference`: within `tol` (default: the project's tolerance of it); an
    array `tol` bounds each element (the reported error is the one furthest past its bound)."""
    v, r = np.asarray(value), np.asarray(reference)
    tol = tolerance(r) if tol is None else tol
    if np.ndim(tol):
        if v.shape != r.shape or not v.size:
            scalar = float(np.min(tol)) if np.size(tol) else 0.0
            return compare(v, r, scalar)
        return _compare_each(v, r, np.broadcast_to(np.asarray(tol, np.float64), r.shape))
    tol = float(tol)
    if v.shape != r.shape:
        return Comparison(SHAPE, None, tol, tuple(v.shape), tuple(r.shape))
    if not v.size:
        return Comparison(OK, 0.0, tol, tuple(v.shape), tuple(r.shape))
    diff = difference(v, r)
    flat = int(np.argmax(diff))
    err = float(diff.reshape(-1)[flat])
    where = tuple(int(i) for i in np.unravel_index(flat, v.shape))
    status = OK if err <= tol else OVER
    return Comparison(status, err, tol, tuple(v.shape), tuple(r.shape), where, v[where].item(), r[where].item())


def _compare_each(v: np.ndarray, r: np.ndarray, bound: np.ndarray) -> Comparison:
    diff = difference(v, r)
    with np.errstate(invalid="ignore"):
        past = np.where(diff == 0, -np.inf, diff - bound)  # an exact match is within any bound (inf == inf too)
    past = np.nan_to_num(past, nan=np.inf, posinf=np.inf)  # an infinite error past an infinite bound: past it
    flat = int(np.argmax(past))
    where = tuple(int(i) for i in np.unravel_index(flat, v.shape))
    err, tol = float(diff.reshape(-1)[flat]), float(bound.reshape(-1)[flat])
    status = OK if past.reshape(-1)[flat] <= 0 else OVER
    return Comparison(status, err, tol, tuple(v.shape), tuple(r.shape), where, v[where].item(), r[where].item())


def tolerance_for(
    rtol: float | None = None, atol: float | None = None, relative: float | None = None
) -> Tolerance | None:
    """A reference's tolerance from --rtol/--atol: atol + rtol * max|reference| (None: the
    project's default, `tolerance`). `relative` (--relative): each element's own bound,
    atol + relative * |its reference|, for probability-valued outputs whose small values matter
    (1e-4 of the largest value passes any error in a 1e-6 probability)."""
    if relative is not None:
        a = atol or 0.0

        def each(reference: np.ndarray) -> float | np.ndarray:
            ref = np.asarray(reference)
            if ref.dtype.kind not in "fc" or ref.size == 0:
                return a
            with np.errstate(invalid="ignore"):
                return a + relative * np.abs(ref.astype(np.float64))

        return each
    if rtol is None and atol is None:
        return None
    r, a = rtol or 0.0, atol or 0.0

    def bound(reference: np.ndarray) -> float:
        ref = np.asarray(reference)
        if ref.dtype.kind not in "fc" or ref.size == 0:
            return a
        finite = np.abs(ref[np.isfinite(ref)])
        return a + r * (float(finite.max()) if finite.size else 0.0)

    return bound


# -- which references apply ------------------------------------------------------------------------
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


def _out_index(key: str) -> int | None:
    return int(key[3:]) if key.startswith("out") and key[3:].isdigit() else None


@dataclass
class ReferenceMatch:
    """An .npz's arrays keyed by the operand each one is compared with."""

    refs: dict[str, np.ndarray]
    keys: int  # arrays in the file
    unmatched: list[str] = field(default_factory=list)  # keys naming no operand (nor outN, nor an operator)
    operands: dict[str, str] = field(default_factory=dict)  # each matched key -> the operand it names
    hint: str | None = None  # why keys may have matched nothing (e.g. pnnx fused a BatchNorm away)
    fused_into: dict[str, str] = field(default_factory=dict)  # a convolution's key -> the operator its BatchNorm joined

    @property
    def matched(self) -> int:
        return self.keys - len(self.unmatched)


# The names pnnx gives operators itself (conv2d_0, F.relu_3, torch.mean_0, pnnx_unique_2).
_PNNX_NAME = re.compile(r"(?:[A-Za-z]+\.)?[A-Za-z0-9_]+_\d+")
# Prefixes a wrapper adds to PyTorch module paths (nn.DataParallel's `module.`).
_WRAPPERS = ("module.", "model.", "_orig_mod.")


def key_operand(
    graph: Graph, key: str, outputs: Sequence[str] | None = None, names: OperatorNames | None = None
) -> str | None:
    """The operand a reference key names, or None. Keys are, in this order: an operand name
    ("17"); pnnx's Python name of one ("v_17"); forward()'s N-th output ("out0"); an operator
    name, which for a TorchScript model converted by pnnx is the module path a PyTorch forward
    hook sees ("layer1.0.conv1", "fc"), or an operator key ("relu#2"): its output, or its i-th
    output as "NAME:i"; the same with a wrapper's prefix ("module.fc") dropped."""
    if key in graph.operands:
        return key
    if key.startswith("v_") and key[2:] in graph.operands:
        return key[2:]
    i = _out_index(key)
    if i is not None:
        outs = output_operand_names(graph) if outputs is None else outputs
        return outs[i] if i < len(outs) else None
    name, _, index = key.rpartition(":")
    if not (name and index.isdigit()):
        name, index = key, ""
    names = names or OperatorNames(graph)
    for candidate in (name, *(name[len(p) :] for p in _WRAPPERS if name.startswith(p))):
        op = names.get(candidate)
        if op is None:
            continue
        if index:
            return op.outputs[int(index)].name if int(index) < len(op.outputs) else None
        return op.outputs[0].name if len(op.outputs) == 1 else None
    return None


class OperatorNames:
    """Operators by name (the first of a repeated name) and by key: `relu#2` is the second
    operator pnnx named `relu` (it repeats a reused module's name at optlevel 0; the hook
    snippet keys a module's second call so). Built once for all of a file's keys: looking each
    up by a scan was quadratic (100,000 keys of a 20,000-operator graph)."""

    def __init__(self, graph: Graph) -> None:
        self.by_name: dict[str, Operator] = {}
        for op in graph.operators:
            self.by_name.setdefault(op.name, op)
        self._graph = graph
        self._by_key: dict[str, Operator] | None = None

    def get(self, name: str) -> Operator | None:
        op = self.by_name.get(name)
        if op is None and "#" in name:
            if self._by_key is None:
                self._by_key = dict(zip(self._graph.operator_keys(), self._graph.operators))
            op = self._by_key.get(name)
        return op


def match_references(graph: Graph, npz: Mapping[str, np.ndarray]) -> ReferenceMatch:
    """Map an .npz's keys (see key_operand: operand names, outN, operator names and module
    paths) to operand names; keys that name nothing are reported, not dropped silently. An
    operand named directly wins over the same operand named another way."""
    outputs = output_operand_names(graph)
    refs: dict[str, np.ndarray] = {}
    operands: dict[str, str] = {}
    unmatched: list[str] = []
    names = OperatorNames(graph)
    direct = [k for k in npz if k in graph.operands]
    for k in direct + [k for k in npz if k not in graph.operands]:
        operand = key_operand(graph, k, outputs, names)
        if operand is None:
            unmatched.append(k)
            continue
        operands[k] = operand
        refs.setdefault(operand, np.asarray(npz[k]))
    # module paths pnnx fused away (a BatchNorm into its convolution): placed by the keys' order
    fused = fused_keys(graph, npz, operands) if unmatched else None
    if fused is not None and fused.operands:
        for k, operand in fused.operands.items():
            operands[k] = operand
            refs.setdefault(operand, np.asarray(npz[k]))
        unmatched = [k for k in unmatched if k not in fused.operands]
        hint = absorbed_note(fused.absorbed, list(fused.operands))
        rest = [k for k in unmatched if k not in fused.absorbed]
        more = _unmatched_hint(graph, rest) if rest else None
        said = " ".join(h for h in (hint, more) if h)
        return ReferenceMatch(refs, len(npz), unmatched, operands, said, dict(fused.absorbed))
    return ReferenceMatch(refs, len(npz), unmatched, operands, _unmatched_hint(graph, unmatched))


def _unmatched_hint(graph: Graph, unmatched: Sequence[str]) -> str | None:
    if not unmatched:
        return None
    fused = [op.name for op in graph.operators if op.name.startswith("convbn")]
    if fused and any("bn" in k.lower() or "norm" in k.lower() for k in unmatched):
        return (
            "pnnx fused each BatchNorm into the convolution before it (operators "
            f"{', '.join(fused[:3])}{', …' if len(fused) > 3 else ''}): a BatchNorm's or its convolution's "
            "module path names no operator; key those tensors by operand number"
        )
    named = [op.name for op in graph.operators if op.type not in ("pnnx.Input", "pnnx.Output")]
    if named and all(_PNNX_NAME.fullmatch(n) for n in named):
        return (
            "this model's operator names are pnnx's own (conv2d_0, F.relu_3): module paths match only a "
            "TorchScript model converted by pnnx; key tensors by operand number (the Graph page shows them)"
        )
    return None


def references_for(graph: Graph, npz: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return match_references(graph, npz).refs


# -- per operator --------------------------------------------------------------------------------
@dataclass
class OperatorCheck:
    index: int  # execution position, 0-based (shown 1-based)
    name: str
    type: str
    status: str  # the worst output's status; NO_REF when no output has a reference
    outputs: dict[str, Comparison]

    @property
    def worst(self) -> Comparison | None:
        if not self.outputs:
            return None
        return max(self.outputs.values(), key=lambda c: (_RANK[c.status], c.ratio or 0.0))

    @property
    def failed(self) -> bool:
        return self.status in (OVER, SHAPE)


def check_operator(
    index: int,
    name: str,
    op_type: str,
    outputs: Mapping[str, Any],
    references: Mapping[str, np.ndarray],
    tolerance_of: Tolerance | None = None,
) -> OperatorCheck:
    per = {
        o: compare(v, references[o], None if tolerance_of is None else tolerance_of(references[o]))
        for o, v in outputs.items()
        if o in references and not isinstance(v, (tuple, list))
    }
    status = max((c.status for c in per.values()), key=_RANK.__getitem__, default=NO_REF)
    return OperatorCheck(index, name, op_type, status, per)


def checked_values(event: Any) -> Mapping[str, Any]:
    """What an operator's check compares: its outputs; pnnx.Output has none and is the model's
    output node, so the values it passes on (the model's outputs) are its own (it was the one
    grey 'not compared' node of a fully compared model)."""
    return event.inputs if event.type == "pnnx.Output" and not event.outputs else event.outputs


def check_events(
    events: Iterable[Any], references: Mapping[str, np.ndarray], tolerance_of: Tolerance | None = None
) -> list[OperatorCheck]:
    """One OperatorCheck per StepEvent (index, name, type, outputs; inputs of pnnx.Output)."""
    return [check_operator(e.index, e.name, e.type, checked_values(e), references, tolerance_of) for e in events]


class CheckCache:
    """The checks of a run's events against one set of references, each computed once: a
    Forward step then compares only the new operator (ResNet-18's 50 comparisons took
    0.24 s, on every step). `token` names the references; another token starts afresh."""

    def __init__(self) -> None:
        self.token: Any = None
        self._by_event: dict[int, tuple[Any, OperatorCheck]] = {}  # id(event) -> (the event, its check)

    def checks(self, events: Sequence[Any], references: Mapping[str, np.ndarray], token: Any) -> list[OperatorCheck]:
        if token != self.token:
            self.token, self._by_event = token, {}
        out = []
        for e in events:
            hit = self._by_event.get(id(e))
            if hit is None or hit[0] is not e:  # the event itself is kept, so its id is never reused
                hit = self._by_event[id(e)] = (
                    e,
                    check_operator(e.index, e.name, e.type, checked_values(e), references),
                )
            out.append(hit[1])
        if len(self._by_event) > 2 * len(events) + 64:  # a reset or replay made new events: drop the old
            live = {id(e) for e in events}
            self._by_event = {k: v for k, v in self._by_event.items() if k in live}
        return out


def first_bad(checks: Sequence[OperatorCheck]) -> OperatorCheck | None:
    """The first operator (in execution order) over tolerance or with a wrong shape."""
    return next((c for c in checks if c.failed), None)


@dataclass(frozen=True)
class CheckSummary:
    run: int  # operators run so far
    compared: int  # of those, with at least one reference
    ok: int
    over: int
    shape: int

    @property
    def unchecked(self) -> int:
        return self.run - self.compared


def summarize(checks: Sequence[OperatorCheck]) -> CheckSummary:
    n = {s: 0 for s in _RANK}
    for c in checks:
        n[c.status] += 1
    return CheckSummary(len(checks), len(checks) - n[NO_REF], n[OK], n[OVER], n[SHAPE])


def verdict(s: CheckSummary, source: str) -> tuple[str, str]:
    """(level, sentence) for the page: 'success' only when something was compared and
    nothing failed; 'warning' when nothing was compared; 'error' otherwise."""
    counted = f"{s.compared} of {s.run} operators run so far compared with {source}"
    if s.run == 0:
        return "info", "Nothing has run yet."
    if s.compared == 0:
        return "warning", (
            f"0 of {s.run} operators run so far have a reference tensor: nothing was compared "
            "(no operand of this model is in the references)."
        )
    unchecked = f"; {s.unchecked} {'has' if s.unchecked == 1 else 'have'} no reference" if s.unchecked else ""
    if s.over == 0 and s.shape == 0:
        every = "within tolerance" if s.compared == 1 else f"all {s.compared} within tolerance"
        return "success", f"{counted}: {every}{unchecked}."
    parts = [f"{s.ok} within tolerance"] + ([f"{s.over} over tolerance"] if s.over else [])
    parts += [f"{s.shape} with a shape mismatch"] if s.shape else []
    return "error", f"{counted}: " + ", ".join(parts) + unchecked + "."


def check_rows(checks: Sequence[OperatorCheck], onnx_nodes: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The error table: one row per operator, numbered from 1 like the stepper; with
    `onnx_nodes` (operator -> ONNX node name) a column of the .onnx's own names."""
    rows = []
    for c in checks:
        w = c.worst
        rows.append(
            {
                "#": c.index + 1,
                "operator": c.name,
                **({"ONNX node": onnx_nodes.get(c.name, "")} if onnx_nodes else {}),
                "type": c.type,
                "status": c.status,
                "max |error|": None if w is None else w.max_error,
                "tolerance": None if w is None else w.tolerance,
                "error / tolerance": None if w is None else w.ratio,
                "detail": "" if w is None or w.status != SHAPE else w.text(),
            }
        )
    return rows


def error_colors(checks: Sequence[OperatorCheck]) -> dict[str, str]:
    """Node fills for the error view: compared operators only (others stay neutral)."""
    colors = {c.name: ERROR_COLORS[c.status] for c in checks if c.status != NO_REF}
    bad = first_bad(checks)
    if bad is not None:
        colors[bad.name] = ERROR_COLORS["first bad"]
    return colors


ERROR_LEGEND = [
    (OK, ERROR_COLORS[OK]),
    (OVER, ERROR_COLORS[OVER]),
    (SHAPE, ERROR_COLORS[SHAPE]),
    ("first failure", ERROR_COLORS["first bad"]),
]


def rows_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as CSV text (header from the first row)."""
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
    return buf.getvalue()
