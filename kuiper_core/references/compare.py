"""Compare a model's run, operand by operand, with references: a user's .npz, the framework
the model came from, or another model's run (`kuiper compare`, `kuiper_core.compare`).

    report = kuiper_core.compare("resnet18.onnx", x, framework=True)
    print(report.text())          # the table, the first divergence, the counts
    report.ok                     # nothing over tolerance, no shape mismatch

Every statement is backed by a count (explore/compare.py's rule): operands compared,
operands with no reference, keys that matched nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, LimitError
from ..explore import compare as explore_compare
from ..formats import OpenedModel, open_model
from ..graph import shape_label
from . import engine_values, framework_references

ModelLike = str | Path | bytes | OpenedModel


@dataclass(frozen=True)
class Row:
    """One compared operand."""

    index: int  # the operator's execution position, 0-based
    operator: str
    type: str
    operand: str
    comparison: explore_compare.Comparison

    @property
    def failed(self) -> bool:
        return self.comparison.status in (explore_compare.OVER, explore_compare.SHAPE)


@dataclass
class CompareReport:
    rows: list[Row]  # every compared operand, in execution order
    operators: int  # operators run
    computed: int  # operands computed (the ones a reference could cover)
    sources: list[str]  # where the references came from
    unmatched_keys: list[str] = field(default_factory=list)  # reference keys naming nothing here
    unchecked: list[str] = field(default_factory=list)  # computed operands with no reference
    notes: list[str] = field(default_factory=list)
    input_note: str = ""  # what the input was when none was given
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # our run: every computed operand

    @property
    def first(self) -> Row | None:
        """The first divergence, in execution order."""
        return next((r for r in self.rows if r.failed), None)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and self.first is None

    def table(self, every: bool = True) -> str:
        """The rows as aligned text (only the failing ones unless `every`)."""
        head = ("#", "operator", "type", "operand", "shape", "max |error|", "relative", "tolerance", "status")
        lines = [head]
        for r in self.rows:
            if not every and not r.failed:
                continue
            c = r.comparison
            shape = (
                shape_label(c.shape)
                if c.status != explore_compare.SHAPE
                else f"{shape_label(c.shape)} vs {shape_label(c.ref_shape)}"
            )
            rel = c.relative_error
            lines.append(
                (
                    str(r.index + 1),
                    r.operator,
                    r.type,
                    r.operand,
                    shape,
                    "" if c.max_error is None else f"{c.max_error:.3g}",
                    "" if rel is None else f"{rel:.3g}",
                    f"{c.tolerance:.3g}",
                    c.status,
                )
            )
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in lines)

    def summary(self) -> str:
        over = sum(r.comparison.status == explore_compare.OVER for r in self.rows)
        shape = sum(r.comparison.status == explore_compare.SHAPE for r in self.rows)
        lines = [
            f"{len(self.rows)} of {self.computed} computed operands compared "
            f"({self.operators} operators run): {len(self.rows) - over - shape} within tolerance"
            + (f", {over} over tolerance" if over else "")
            + (f", {shape} with a shape mismatch" if shape else "")
        ]
        lines += [self.input_note] if self.input_note else []
        lines += [f"references: {s}" for s in self.sources]
        first = self.first
        if first is not None:
            c = first.comparison
            if c.status == explore_compare.SHAPE:
                lines.append(
                    f"first divergence: operator {first.operator} ({first.type}), operand {first.operand}: {c.text()}"
                )
            else:
                rel = c.relative_error
                lines.append(
                    f"first divergence: operator {first.operator} ({first.type}), operand {first.operand}: "
                    f"max |error| {c.max_error:.3g} (tolerance {c.tolerance:.3g}), relative {rel:.3g}, {c.where_text()}"
                )
        elif self.rows:
            lines.append("no divergence: every compared operand is within tolerance")
        else:
            lines.append("nothing was compared: no reference names an operand of this model")
        if self.unchecked:
            lines.append(f"no reference for {len(self.unchecked)} operand(s): {_names(self.unchecked)}")
        if self.unmatched_keys:
            lines.append(f"{len(self.unmatched_keys)} reference key(s) matched nothing: {_names(self.unmatched_keys)}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def text(self, every: bool = True) -> str:
        return self.table(every) + "\n\n" + self.summary()


def _names(names: Sequence[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _opened(model: ModelLike, options: Mapping[str, Any]) -> OpenedModel:
    return model if isinstance(model, OpenedModel) else open_model(model, **options)


def _arrays(inputs: Any) -> list[np.ndarray]:
    """Arrays from an array, a .npy path, or a list of either."""
    from ..npy import read_npy

    items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    return [read_npy(x) if isinstance(x, (str, Path)) else np.asarray(x) for x in items]


def _npz(reference: str | Path | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    if isinstance(reference, Mapping):
        return {k: np.asarray(v) for k, v in reference.items()}
    try:
        with np.load(reference, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise InputError(f"{reference} is one array, not an .npz of named references")
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the references {reference}: {e}") from None


def random_inputs(graph: Any, seed: int = 0) -> tuple[list[np.ndarray], str]:
    """Seeded standard-normal inputs of the model's declared shapes (open dims: see
    explore.inputs.input_specs), and a sentence saying so."""
    from ..explore.inputs import fixed_values, input_specs, synthetic_input

    specs, fixed = input_specs(graph), fixed_values(graph)  # an input fixed at conversion keeps its value
    arrays = [
        fixed[name] if name in fixed else synthetic_input("random", shape, dtype, seed + i)
        for i, (name, shape, dtype) in enumerate(specs)
    ]
    shapes = ", ".join(f"{shape_label(shape)} {dtype}" for _, shape, dtype in specs)
    return arrays, f"input: seeded random (standard normal, seed {seed}) of shape {shapes}"


def _events_within(run: Iterable[Any], seconds: float | None) -> list[Any]:
    """Every step's event, stopping with a LimitError once the run has taken `seconds` (checked
    after each operator: a conversion check in the app must not hold a session unbounded)."""
    if seconds is None:
        return list(run)
    deadline = time.monotonic() + seconds
    events = []
    for event in run:
        events.append(event)
        if time.monotonic() > deadline:
            raise LimitError(
                f"the engine's run took more than {seconds:g} s (stopped after {len(events)} operators)",
                limit="max_child_seconds",
                maximum=int(seconds),
            )
    return events


def compare(
    model: ModelLike,
    inputs: Any = None,
    *,
    reference: str | Path | Mapping[str, np.ndarray] | None = None,
    framework: bool | Sequence[str] = False,
    against: ModelLike | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    relative: float | None = None,
    reference_timeout: float | None = None,
    engine_timeout: float | None = None,
    **options: Any,
) -> CompareReport:
    """Run `model` (a path, bytes or an OpenedModel; `options` go to open_model) on `inputs`
    (arrays or .npy paths; None: seeded random ones of the declared shapes) and compare every operand that has a reference: from `reference` (an .npz or a mapping
    keyed by operand number, operator name, module path or outN), from the framework
    (`framework=True`, or a list of methods: kuiper_core.references), or from `against`, another model run on the
    same inputs (operands compared where names match, outputs by position). With none of
    them, the framework's references when this machine can compute them. A reference's
    tolerance is atol + rtol * max|reference| when either is given, else the project's
    (1e-4 * max(1, max|reference|)); `relative`: each element within atol + relative * |its
    reference| instead (probability-valued outputs). Seconds: `reference_timeout` for the framework's
    child (None: KUIPER_REFERENCE_TIMEOUT or 300), `engine_timeout` for the engine (_events_within)."""
    opened = _opened(model, options)
    input_note = ""
    if inputs is None:
        arrays, input_note = random_inputs(opened.graph)
    else:
        arrays = _arrays(inputs)
    if reference is None and against is None and not framework:
        if not opened.references.available:
            raise InputError(
                f"nothing to compare {opened.name} with: give a reference .npz, another model, or install what "
                f"computes references for it ({opened.references.text()})"
            )
        framework = True
    runtime = opened.build()
    run = runtime.steps(*arrays)
    events = _events_within(run, engine_timeout)
    ours = dict(run.values)
    inputs_ = {o.name for op in opened.graph.inputs for o in op.outputs}
    computed = [n for e in events for n in e.outputs if n not in inputs_ and isinstance(ours.get(n), np.ndarray)]
    refs: dict[str, np.ndarray] = {}
    sources: list[str] = []
    unmatched: list[str] = []
    notes: list[str] = []
    if reference is not None:
        match = explore_compare.match_references(opened.graph, _npz(reference))
        refs.update(match.refs)
        unmatched = list(match.unmatched)
        where = reference if not isinstance(reference, Mapping) else "the given arrays"
        sources.append(f"{where}: {match.matched} of {match.keys} key(s) name an operand")
        if match.hint:
            notes.append(match.hint)
    if framework:
        methods = None if framework is True else list(framework)
        got = framework_references(opened, arrays, ours=ours, methods=methods, timeout=reference_timeout)
        for k, v in got.refs.items():
            refs.setdefault(k, v)
        sources += got.sources
        notes += got.notes
    if against is not None:
        other = _opened(against, options)
        theirs = engine_values(other, arrays)
        outs_ours, outs_theirs = (
            explore_compare.output_operand_names(opened.graph),
            explore_compare.output_operand_names(other.graph),
        )
        same = [n for n in computed if n in theirs and n not in outs_ours]
        for n in same:
            refs.setdefault(n, theirs[n])
        for a, b in zip(outs_ours, outs_theirs):
            if isinstance(theirs.get(b), np.ndarray):
                refs.setdefault(a, theirs[b])
        sources.append(
            f"{other.name} run on the same input: {len(same)} operand(s) by name, "
            f"{min(len(outs_ours), len(outs_theirs))} output(s) by position"
        )
    checks = explore_compare.check_events(events, refs, explore_compare.tolerance_for(rtol, atol, relative))
    rows = [
        Row(c.index, c.name, c.type, operand, comparison)
        for c in checks
        for operand, comparison in c.outputs.items()
        if operand not in inputs_ and c.type != "pnnx.Output"  # (its check repeats its input's: one row an operand)
    ]
    unchecked = [n for n in computed if n not in refs]
    values = {n: ours[n] for n in computed}
    return CompareReport(rows, len(events), len(computed), sources, unmatched, unchecked, notes, input_note, values)
