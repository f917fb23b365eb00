"""Every step of a finished Forward run, precomputed for the browser (issue 38).

Once the stepper holds every operator's result, the Forward page sends these once and
pages/step_controls.js moves through them with no server run. Step s (0 = before the first
operator, s = i + 1 after operator i) has:
- a graph frame: the current node, and the fills that step adds (ran / not yet run, or the
  comparison status) as a delta over the step before (`additive`): a 1,500-operator model's
  fills at every step would be 1,500 × 1,500 entries, its deltas one entry a step;
- a panel: "Operator i of N", name, type and kernel, its tensors' shapes, dtypes and small
  summaries (min/max/mean/std, NaN/Inf), the comparison with the active reference, the
  narration, as escaped HTML (operator and operand names are untrusted).
Only summaries go: a tensor's picture is drawn by the server for the step the user stops at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

import numpy as np

from ..graph import shape_label
from ..runtime import StepEvent
from . import compare, tensors
from .overlay import RAN

MAX_OPERATORS = 2_000  # frames above this: ~1.5 KB a step would make megabytes; the server steps
MAX_TENSORS = 8  # tensors summarised per operator (torch.cat may read dozens): as the page shows
FAILED = "#7a0000"  # the operator Forward stopped at
NAMES = 60  # operator and operand names are cut to this many characters in the panel


def tensor_items(event: StepEvent) -> list[tuple[str, str, np.ndarray]]:
    """(label, operand name, array) of an operator's inputs then outputs ('in %x', 'out %y[1]'),
    at most MAX_TENSORS: the first MAX_TENSORS - 1 and the last output."""
    items: list[tuple[str, str, np.ndarray]] = []
    for direction, values in (("in", event.inputs), ("out", event.outputs)):
        for name, value in values.items():
            arrays = tensors.as_arrays(value)
            for i, a in enumerate(arrays):
                suffix = f"[{i}]" if len(arrays) > 1 else ""
                items.append((f"{direction} %{name}{suffix}", name + (f"_{i}" if suffix else ""), a))
    return items if len(items) <= MAX_TENSORS else items[: MAX_TENSORS - 1] + [items[-1]]


def _cut(name: str) -> str:
    return name if len(name) <= NAMES else name[: NAMES - 1] + "…"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def _stats_row(label: str, a: np.ndarray, stats: dict[str, Any]) -> str:
    s = stats
    bad = f"{s['nan']} / {s['inf']}" if s["nan"] or s["inf"] else "0"
    cells = [
        label,
        shape_label(s["shape"]) if a.ndim else "scalar",
        s["dtype"],
        _num(s["min"]),
        _num(s["max"]),
        _num(s["mean"]),
        _num(s["std"]),
        bad,
    ]
    return "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"


_HEAD = "".join(f"<th>{h}</th>" for h in ("tensor", "shape", "dtype", "min", "max", "mean", "std", "NaN/Inf"))


def operator_html(
    event: StepEvent,
    total: int,
    *,
    next_name: str | None,
    kernel: str = "",
    check: compare.OperatorCheck | None = None,
    ref_source: str = "the reference",
    onnx_node: str | None = None,
    stats_of: Callable[[np.ndarray], dict[str, Any]] = tensors.tensor_stats,
) -> str:
    """The panel of operator `event`: the status line, its tensors' summaries, the comparison."""
    head = (
        f"<b>Operator {event.index + 1} of {total}: {escape(_cut(event.name))}</b> ({escape(event.type)}"
        + (f", {escape(kernel)}" if kernel else "")
        + f"), {event.seconds * 1e3:.3f} ms"
        + (f" · ONNX node <code>{escape(_cut(onnx_node))}</code>" if onnx_node else "")
        + (f" · next: <code>{escape(_cut(next_name))}</code>" if next_name else " · the last operator")
    )
    rows = "".join(_stats_row(_cut(label), a, stats_of(a)) for label, _, a in tensor_items(event))
    table = f'<table class="kx-s-table kx-fw-tensors"><thead><tr>{_HEAD}</tr></thead><tbody>{rows}</tbody></table>'
    html = f'<p class="kx-fw-status">{head}</p><div class="kx-fw-scroll">{table}</div>'
    if event.type == "pnnx.Input":
        html += '<p class="kx-s-caption">pnnx.Input passes the model\'s input through.</p>'
    for name, c in (check.outputs if check is not None else {}).items():
        kind = "kx-s-done" if c.status == compare.OK else "kx-s-error"
        html += (
            f'<div class="kx-s-box {kind}">%{escape(_cut(name))} against {escape(ref_source)}: {escape(c.text())}</div>'
        )
    return html


def start_html(first: str, has_refs: bool) -> str:
    """Step 0: before the first operator."""
    return (
        f'<div class="kx-s-box kx-s-info">Before the first operator, <b>{escape(_cut(first))}</b>: press <b>Step</b> '
        "(or →)."
        + ("" if has_refs else " To check each operator, choose references under <b>Compare with</b>, below the graph.")
        + "</div>"
    )


def panel_frames(
    events: Sequence[StepEvent],
    names: Sequence[str],
    *,
    kernel_of: Callable[[StepEvent], str],
    checks: Sequence[compare.OperatorCheck] = (),
    ref_source: str = "the reference",
    onnx_nodes: Mapping[str, str] | None = None,
    start: bool = True,
) -> list[str]:
    """The panel at each step 0..len(events) (start=False: only the events', to extend a run's
    frames as it goes on). Each operand's summary is computed once (an output is the next
    operator's input)."""
    cache: dict[int, tuple[np.ndarray, dict[str, Any]]] = {}

    def stats_of(a: np.ndarray) -> dict[str, Any]:
        hit = cache.get(id(a))
        if hit is None or hit[0] is not a:  # the array is kept in the entry, so its id is never reused
            hit = cache[id(a)] = (a, tensors.tensor_stats(a))
        return hit[1]

    frames = ([start_html(names[0], bool(checks))] if names else [""]) if start else []
    for e in events:
        frames.append(
            operator_html(
                e,
                len(names),
                next_name=names[e.index + 1] if e.index + 1 < len(names) else None,
                kernel=kernel_of(e),
                check=checks[e.index] if e.index < len(checks) else None,
                ref_source=ref_source,
                onnx_node=(onnx_nodes or {}).get(e.name),
                stats_of=stats_of,
            )
        )
    return frames


def graph_frames(
    events: Sequence[StepEvent],
    unit_of: Mapping[str, str],
    colors: Sequence[tuple[str, str]] | None,
    priority: Sequence[str],
    failed: str | None = None,
) -> list[dict[str, Any]]:
    """The viewer's frame at each step 0..len(events): the current node and the fills the
    step adds (frame 0: the stopped-at operator's). `colors`: (operator, fill) in execution
    order, what each step colours (None: no fills, the category view). A closed module takes
    the most important fill among its operators (overlay.roll_up's rule, applied a step at a
    time: a fill never goes back to a lower one, so each step adds at most one entry)."""
    rank = {c: i for i, c in enumerate(priority)}
    shown: dict[str, str] = {}

    def add(op: str, colour: str) -> dict[str, str]:
        unit = unit_of.get(op)
        if unit is None or (unit != op and unit in shown and rank.get(colour, -1) <= rank.get(shown[unit], -1)):
            return {}
        shown[unit] = colour
        return {unit: colour}

    first = add(failed, FAILED) if failed is not None else {}
    frames = [{"highlight": unit_of.get(failed) if failed else None, "colors": first}]
    by_name = dict(colors or ())
    for e in events:
        colour = by_name.get(e.name)
        frames.append({"highlight": unit_of.get(e.name), "colors": add(e.name, colour) if colour else {}})
    return frames


def progress_colors(events: Sequence[StepEvent]) -> list[tuple[str, str]]:
    """'run so far': every operator a step has run."""
    return [(e.name, RAN) for e in events]


def error_colors(checks: Sequence[compare.OperatorCheck]) -> list[tuple[str, str]]:
    """'error vs reference': compared operators by status, the first failure its own fill."""
    fills = compare.error_colors(checks)
    return [(c.name, fills[c.name]) for c in checks if c.name in fills]
