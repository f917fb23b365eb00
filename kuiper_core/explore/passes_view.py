"""What the Passes page shows, as plain data: a run of the pass pipeline with its log, the
operators each side of it changed (for highlighting both graphs), the text diff of every
pass, and a check that the optimised graph computes what the original did.

    view = optimise_view(graph, opt_level=2)
    view.rows            per-pass log (name, level, ms, operators before/after, summary)
    view.diff            GraphDiff: removed / added / changed operator names
    view.before_dot(), view.after_dot()   the two graphs, changed operators coloured
    view.pass_diffs      [(pass, unified diff of the text before/after it)]
    check_outputs(view.before, view.after, inputs, expected)
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

from ..bundles import numbered
from ..errors import KuiperError
from ..graph import Graph, Operator
from ..passes import OptimizeResult, optimize
from .dot import graph_view
from .overlay import Overlay

REMOVED_COLOR = "#f4a3a3"  # before: gone after the passes
CHANGED_COLOR = "#ffd166"  # both sides: rewritten (params, weights, inputs or type)
ADDED_COLOR = "#9ee09e"  # after: new

# The page's presets: optlevel-1 exports made by tools/export_pass_models.py.
PRESETS: dict[str, dict[str, str]] = {
    "conv_bn_relu": {
        "title": "Conv + BN + ReLU (the simplenet of a TVM Relay pass walkthrough)",
        "text": "The simplenet that a walkthrough of TVM Relay's passes optimises: conv2d (32 channels, 3×3, stride 2) → batch_norm → relu, exported by pnnx "
        "at optlevel 1. FoldBatchNorm turns three operators into two, as TVM's FoldScaleAxis and pnnx's "
        "fuse_conv2d_batchnorm2d do.",
    },
    "pass_zoo": {
        "title": "Pass zoo (every pass has work)",
        "text": "A model built so that each pass finds something at optlevel 1: parameters as operands, computed "
        "reshape shapes, a constant subgraph, dropout and other no-ops, a conv called twice, BatchNorm after "
        "Conv, ConvTranspose and Linear, pads before convs, slices that tile a dim, elementwise chains.",
    },
}


@dataclass
class Preset:
    name: str
    title: str
    text: str
    param: Path
    bin: Path
    input: np.ndarray
    expected: list[np.ndarray]
    pnnx_o2_operators: int | None


def load_preset(directory: Path, name: str) -> tuple[Preset, Graph]:
    from ..pnnx import load_graph, read_param

    meta = PRESETS[name]
    param, bin_path = directory / f"{name}.o1.pnnx.param", directory / f"{name}.o1.pnnx.bin"
    o2 = directory / f"{name}.o2.pnnx.param"
    expected = numbered(directory / f"{name}.expected.npz", "out")
    preset = Preset(
        name,
        meta["title"],
        meta["text"],
        param,
        bin_path,
        np.load(directory / f"{name}.input.npy"),
        expected,
        len(read_param(o2).operators) if o2.exists() else None,
    )
    return preset, load_graph(param, bin_path)


@dataclass
class GraphDiff:
    """Operators by name: gone, new, and present on both sides but rewritten."""

    removed: set[str] = field(default_factory=set)
    added: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)


def _signature(op: Operator) -> tuple[Any, ...]:
    return (
        op.type,
        repr(sorted(op.params.items())),
        tuple((k, a.dtype, tuple(a.shape), a.identity) for k, a in sorted(op.attrs.items())),
        tuple(o.name for o in op.inputs),
        tuple(o.name for o in op.outputs),
    )


def diff_graphs(before: Graph, after: Graph) -> GraphDiff:
    """Compare two graphs by operator name (weights by identity: passes never write into
    an array, they replace it)."""
    old = {op.name: op for op in before.operators}
    new = {op.name: op for op in after.operators}
    changed = {n for n in old.keys() & new.keys() if _signature(old[n]) != _signature(new[n])}
    return GraphDiff(set(old) - set(new), set(new) - set(old), changed)


def text_diff(before: str, after: str, name: str, context: int = 2) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"before {name}", f"after {name}", n=context
        )
    )


@dataclass
class PassesView:
    result: OptimizeResult
    diff: GraphDiff
    rows: list[dict[str, Any]]
    pass_diffs: list[tuple[str, str]]

    @property
    def before(self) -> Graph:
        return self.result.before

    @property
    def after(self) -> Graph:
        return self.result.after

    def colors(self, side: str) -> dict[str, str]:
        colors = {n: CHANGED_COLOR for n in self.diff.changed}
        if side == "before":
            colors.update({n: REMOVED_COLOR for n in self.diff.removed})
        else:
            colors.update({n: ADDED_COLOR for n in self.diff.added})
        return colors

    def before_dot(self, **options: Any) -> str:
        return graph_view(self.before, node_colors=self.colors("before"), **options).dot

    def after_dot(self, **options: Any) -> str:
        return graph_view(self.after, node_colors=self.colors("after"), **options).dot

    def changes_in_order(self) -> list[str]:
        """Every changed operator once, in the order a reader meets them: the original graph's
        removed and rewritten ones, then the optimised graph's new ones ("Next change")."""
        gone = self.diff.removed | self.diff.changed
        return [op.name for op in self.before.operators if op.name in gone] + [
            op.name for op in self.after.operators if op.name in self.diff.added
        ]

    def overlay(self, side: str, current: str | None = None) -> Overlay:
        """What the viewer paints on one side: the changed operators in their colours, the
        rest neutral, and the legend; `current` (a change being shown) ringed where it is."""
        graph = self.before if side == "before" else self.after
        here = current if current is not None and any(op.name == current for op in graph.operators) else None
        gone_or_new = (
            ("removed by the passes", REMOVED_COLOR) if side == "before" else ("added by the passes", ADDED_COLOR)
        )
        return Overlay(
            colors=self.colors(side),
            neutral=True,
            legend=[gone_or_new, ("rewritten", CHANGED_COLOR)],
            note="grey: unchanged",
            highlight=here,
            highlight_label="this change" if here else None,
        )

    def changes_of(self, pass_name: str) -> list[str]:
        return [str(c) for r in self.result.log.rows if r.name == pass_name for c in r.changes]


def optimise_view(
    graph: Graph,
    opt_level: int = 2,
    *,
    disabled: Sequence[str] = (),
    required: Sequence[str] = (),
    passes: Sequence[str] | None = None,
) -> PassesView:
    result = optimize(graph, opt_level, disabled=disabled, required=required, passes=passes, snapshots=True)
    rows = [
        {
            "step": i + 1,
            "pass": r.name,
            "level": r.opt_level,
            "time_ms": r.seconds * 1e3,
            "operators before": r.ops_before,
            "operators after": r.ops_after,
            "what changed": r.summary,
        }
        for i, r in enumerate(result.log.rows)
    ]
    assert result.snapshots is not None
    pass_diffs = [(s.name, text_diff(s.before, s.after, s.name)) for s in result.snapshots.snapshots]
    return PassesView(result, diff_graphs(graph, result.after), rows, pass_diffs)


@dataclass
class OutputCheck:
    index: int
    shape: tuple[int, ...]
    vs_original: float | None  # max |optimised − original|; None when the original cannot run
    vs_reference: float | None  # max |optimised − PyTorch| when PyTorch's output is known
    ok: bool | None  # None: nothing to compare with


def check_outputs(
    before: Graph,
    after: Graph,
    inputs: Sequence[np.ndarray],
    expected: Sequence[np.ndarray] | None = None,
    rel: float = 1e-4,
) -> tuple[list[OutputCheck], str | None]:
    """Run both graphs on `inputs`; each output of the optimised graph against the
    original's (and PyTorch's, when given). Returns the checks and, when the original
    graph cannot run, why (an optlevel-1 export may need the passes to run at all)."""
    from ..passes import clone_graph
    from ..runtime import RuntimeGraph

    ys = RuntimeGraph.from_graph(clone_graph(after)).build().forward(*inputs)
    original_error = None
    try:
        ref = RuntimeGraph.from_graph(clone_graph(before)).build().forward(*inputs)
    except KuiperError as e:
        ref, original_error = None, str(e)
    checks = []
    for i, y in enumerate(ys):
        y = np.asarray(y)
        scale = max(1.0, float(np.abs(y).max(initial=0.0))) if y.dtype.kind == "f" else 1.0
        vs_orig = _max_diff(y, np.asarray(ref[i])) if ref is not None and i < len(ref) else None
        vs_ref = _max_diff(y, np.asarray(expected[i])) if expected is not None and i < len(expected) else None
        known = [d for d in (vs_orig, vs_ref) if d is not None]
        ok = all(d <= rel * scale for d in known) if known else None
        checks.append(OutputCheck(i, tuple(y.shape), vs_orig, vs_ref, ok))
    return checks, original_error


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def saved_files(graph: Graph, name: str) -> dict[str, bytes]:
    """The optimised model as `.pnnx.param` text and `.pnnx.bin` bytes, for downloads."""
    import io

    from ..pnnx.writer import format_param, save_bin

    buf = io.BytesIO()
    save_bin(graph, buf)
    return {f"{name}.opt.pnnx.param": format_param(graph).encode(), f"{name}.opt.pnnx.bin": buf.getvalue()}
