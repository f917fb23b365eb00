"""Model summary, operator table and weight statistics, as plain data for the app."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph import Attribute, Graph, Operand, Operator, shape_label
from .categories import category
from .upload_names import code_span, md_text


@dataclass
class IOSpec:
    name: str  # operand name
    operator: str
    shape: tuple | None
    dtype: str | None


@dataclass
class ModelSummary:
    operators: int
    operands: int
    by_type: list[tuple[str, int]]  # most frequent first, then by name
    by_category: list[tuple[str, int]]
    parameters: int
    weight_bytes: int
    inputs: list[IOSpec] = field(default_factory=list)
    outputs: list[IOSpec] = field(default_factory=list)

    @property
    def weight_mb(self) -> float:
        return self.weight_bytes / 2**20


def _count(items: list[str]) -> list[tuple[str, int]]:
    return sorted(Counter(items).items(), key=lambda kv: (-kv[1], kv[0]))


def model_summary(graph: Graph) -> ModelSummary:
    """Operators by type and category, parameter count, weight bytes, input/output shapes."""
    ins = [IOSpec(op.outputs[0].name, op.name, op.outputs[0].shape, op.outputs[0].dtype) for op in graph.inputs]
    outs = [IOSpec(o.name, op.name, o.shape, o.dtype) for op in graph.outputs for o in op.inputs]
    return ModelSummary(
        operators=len(graph.operators),
        operands=len(graph.operands),
        by_type=_count([op.type for op in graph.operators]),
        by_category=_count([category(op.type) for op in graph.operators]),
        parameters=graph.parameter_count(),
        weight_bytes=graph.weight_bytes(),
        inputs=ins,
        outputs=outs,
    )


def param_text(value: Any) -> str:
    """A param value as .param writes it: (1,1), True, 0.5, strings verbatim."""
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(param_text(v) for v in value) + ")"
    if value is None:
        return "None"
    return str(value)


def operator_parameters(op: Operator) -> int:
    return sum(int(np.prod(a.shape)) for a in op.attrs.values() if a.shape)


def operator_table(graph: Graph) -> list[dict[str, Any]]:
    """One row per operator in file order: index, name, type, category, shapes, params."""
    rows = []
    for i, op in enumerate(graph.operators):
        rows.append(
            {
                "#": i,
                "name": op.name,
                "type": op.type,
                "category": category(op.type),
                "inputs": ", ".join(shape_label(o.shape) for o in op.inputs),
                "outputs": ", ".join(shape_label(o.shape) for o in op.outputs),
                "params": " ".join(f"{k}={param_text(v)}" for k, v in op.params.items()),
                "weights": operator_parameters(op),
            }
        )
    return rows


def type_table(summary: ModelSummary) -> list[dict[str, Any]]:
    return [{"type": t, "category": category(t), "count": n} for t, n in summary.by_type]


@dataclass
class WeightStats:
    name: str
    shape: tuple[int, ...]
    dtype: str
    count: int
    nbytes: int
    min: float
    max: float
    mean: float
    std: float
    zeros: int  # exact zeros (pruned / padded weights stand out)
    nonfinite: int


def weight_stats(name: str, attr: Attribute) -> WeightStats:
    """Statistics of one weight, computed in float64 so a float16 weight cannot overflow them."""
    data = attr.data
    if data is None:
        raise ValueError(f"weight '{name}' has no data loaded")
    x = np.asarray(data)
    if x.dtype.kind in "fiub":
        f = x.astype(np.float64, copy=False).ravel()
    else:  # complex: statistics of the magnitude
        f = np.abs(x).astype(np.float64).ravel()
    finite = f[np.isfinite(f)]
    if finite.size:
        mn, mx, mean, std = float(finite.min()), float(finite.max()), float(finite.mean()), float(finite.std())
    else:
        mn = mx = mean = std = float("nan")
    return WeightStats(
        name=name,
        shape=tuple(attr.shape),
        dtype=attr.dtype,
        count=int(x.size),
        nbytes=attr.nbytes,
        min=mn,
        max=mx,
        mean=mean,
        std=std,
        zeros=int(np.count_nonzero(f == 0)),
        nonfinite=int(f.size - finite.size),
    )


def weight_table(weights: list[WeightStats]) -> list[dict[str, str]]:
    """Weight statistics with one column per weight, so a narrow panel cuts no column."""
    rows: list[tuple[str, Any]] = [
        ("shape", lambda w: shape_label(w.shape)),
        ("dtype", lambda w: w.dtype),
        ("values", lambda w: f"{w.count:,}"),
        ("min", lambda w: f"{w.min:.4g}"),
        ("max", lambda w: f"{w.max:.4g}"),
        ("mean", lambda w: f"{w.mean:.4g}"),
        ("std", lambda w: f"{w.std:.4g}"),
        ("exact zeros", lambda w: f"{w.zeros:,}"),
        ("NaN/Inf", lambda w: f"{w.nonfinite:,}"),
    ]
    return [{"": label, **{w.name: fmt(w) for w in weights}} for label, fmt in rows]


@dataclass
class OperatorDetails:
    name: str
    type: str
    category: str
    line: int | None
    params: list[tuple[str, str]]
    inputs: list[tuple[str, str, str]]  # (argument name, operand, shape dtype)
    outputs: list[tuple[str, str]]  # (operand, shape dtype)
    weights: list[WeightStats]
    producers: list[str]
    consumers: list[str]


def operator_details(graph: Graph, name: str) -> OperatorDetails:
    """Everything the detail panel shows for one operator."""
    op = graph.operator(name)

    def io_text(o: Operand) -> str:
        return shape_label(o.shape) + (f" {o.dtype}" if o.dtype else "")

    return OperatorDetails(
        name=op.name,
        type=op.type,
        category=category(op.type),
        line=op.line,
        params=[(k, param_text(v)) for k, v in op.params.items()],
        inputs=[(op.input_name(i), o.name, io_text(o)) for i, o in enumerate(op.inputs)],
        outputs=[(o.name, io_text(o)) for o in op.outputs],
        weights=[weight_stats(k, a) for k, a in op.attrs.items() if a.data is not None],
        producers=[p.name for p in graph.predecessors(op)],
        consumers=[c.name for c in graph.successors(op)],
    )


def si_number(value: float, unit: str = "") -> str:
    """1814825984 -> '1.81 G'; 2368 -> '2.37 k'; small numbers as they are."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:g} {unit}".rstrip()


def markdown_table(rows: list[dict[str, Any]], code: tuple[str, ...] = ()) -> str:
    """rows as a GitHub-flavoured Markdown table (the columns of the first row; the `code`
    columns in code spans). Why: Home's two small tables as st.dataframe made a first visit
    fetch and parse the data grid's ~1.5 MB of JavaScript before it settled."""
    if not rows:
        return ""
    cols = list(rows[0])

    def cell(col: str, value: Any) -> str:
        # a model's names and types as written (upload_names: a type with a backtick left its
        # code span and was Markdown); a | would end the cell, even in code
        text = " ".join(str(value).split())
        return code_span(text).replace("|", "\\|") if col in code and text else md_text(text)

    lines = ["| " + " | ".join(c or " " for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(c, r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
