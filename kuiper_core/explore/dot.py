"""The model graph as Graphviz DOT for the browser renderer (viz.js via st.graphviz_chart).

Nodes are operators coloured by category (legend included), labelled with name, type and
a few key params; edges carry the operand's shape. A view can be narrowed by type/name
filters, a focus (k hops around one operator) or a window of file positions; when more
than `max_nodes` operators remain, an overview is drawn instead: consecutive operators
folded into groups, so a 1,500-operator model still renders in a moment.

Every name and label is quoted and escaped, so any PNNX name (dots, colons, quotes) is a
valid DOT id.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..graph import Graph, Operator
from .categories import CATEGORY_COLORS, category
from .summary import param_text, shape_text

__all__ = [
    "graph_dot", "graph_view", "GraphView", "Group", "category", "CATEGORY_COLORS", "legend_dot",
    "neighbourhood", "select_operators", "quote", "HIGHLIGHT_COLOR",
]

HIGHLIGHT_COLOR = "#d62728"
HIGHLIGHT_CLASS = "kx-current"
OVERVIEW_GROUPS = 40  # an overview draws about this many group nodes
LEGEND_ID = "kx legend"  # PNNX names never contain spaces: no clash with an operator

# Params worth a place in a node label, in the order they are shown.
KEY_PARAMS = (
    "out_channels", "kernel_size", "stride", "padding", "groups", "dilation", "out_features", "num_features",
    "normalized_shape", "embed_dim", "num_heads", "hidden_size", "num_layers", "output_size", "scale_factor",
    "size", "mode", "dim", "start_dim", "end_dim", "shape", "dims", "sections", "indices", "chunks", "p",
    "negative_slope", "min_val", "max_val", "expr",
)
MAX_LABEL_PARAMS = 3
MAX_PARAM_CHARS = 36

_GRAPH_HEAD = (
    'graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontname="Helvetica", bgcolor="transparent"];\n'
    'node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, color="#555555", penwidth=1];\n'
    'edge [fontname="Helvetica", fontsize=8, color="#777777", fontcolor="#555555", arrowsize=0.6];\n'
)


def quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(**kw: object) -> str:
    return ", ".join(f"{k}={quote(str(v))}" for k, v in kw.items() if v is not None)


def _short(text: str, limit: int = MAX_PARAM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_label(op: Operator) -> str:
    """name / type / up to three key params (one per line)."""
    lines = [_short(op.name, 40), op.type]
    shown = 0
    for key in KEY_PARAMS:
        if key in op.params and shown < MAX_LABEL_PARAMS:
            lines.append(_short(f"{key}={param_text(op.params[key])}"))
            shown += 1
    return "\n".join(lines)


# -- selection -----------------------------------------------------------------------------
def neighbourhood(graph: Graph, name: str, hops: int) -> set[str]:
    """Operators at most `hops` edges from `name`, following edges both ways."""
    start = graph.operator(name)  # KeyError for an unknown name
    seen = {start.name}
    frontier = deque([(start, 0)])
    while frontier:
        op, d = frontier.popleft()
        if d >= hops:
            continue
        for nxt in graph.successors(op) + graph.predecessors(op):
            if nxt.name not in seen:
                seen.add(nxt.name)
                frontier.append((nxt, d + 1))
    return seen


def select_operators(
    graph: Graph,
    *,
    focus: str | None = None,
    hops: int = 2,
    type_filter: Iterable[str] | None = None,
    name_filter: str = "",
    window: tuple[int, int] | None = None,
) -> list[Operator]:
    """The operators a view draws, in file order.

    window: file positions [start, stop). focus: only its k-hop neighbourhood (the focus
    itself always stays). type_filter: keep these types (None/empty: all). name_filter:
    case-insensitive substring of the name or the type.
    """
    ops = graph.operators
    if window is not None:
        ops = ops[max(0, window[0]) : max(0, window[1])]
    if focus is not None:
        near = neighbourhood(graph, focus, hops)
        ops = [op for op in ops if op.name in near]
    types = set(type_filter or ())
    needle = name_filter.strip().lower()
    if types or needle:
        ops = [
            op
            for op in ops
            if op.name == focus
            or ((not types or op.type in types) and (not needle or needle in op.name.lower() or needle in op.type.lower()))
        ]
    return ops


# -- views ----------------------------------------------------------------------------------
@dataclass
class Group:
    """Consecutive operators (file positions [start, stop)) folded into one overview node."""

    index: int
    start: int
    stop: int
    names: list[str]
    by_type: list[tuple[str, int]]
    category: str  # the most common category in the group

    @property
    def node_id(self) -> str:
        return f"group {self.index}"

    @property
    def label(self) -> str:
        head = f"operators {self.start}–{self.stop - 1} ({len(self.names)})"
        kinds = ", ".join(f"{t.rsplit('.', 1)[-1]} ×{n}" for t, n in self.by_type[:3])
        more = f" +{len(self.by_type) - 3} types" if len(self.by_type) > 3 else ""
        return f"{head}\n{kinds}{more}"


@dataclass
class GraphView:
    dot: str
    shown: list[str]  # operators drawn as nodes (empty in an overview)
    selected: int  # operators that matched the selection
    total: int  # operators in the model
    overview: bool = False
    groups: list[Group] = field(default_factory=list)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _legend(categories: Iterable[str]) -> str:
    """One plaintext node holding an HTML table of colour chips (categories present only)."""
    present = set(categories)
    cats = [c for c in CATEGORY_COLORS if c in present]
    if not cats:
        return ""
    cells = "".join(f'<TD BGCOLOR="{CATEGORY_COLORS[c]}">{_html(c)}</TD>' for c in cats)
    table = f'<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3"><TR>{cells}</TR></TABLE>'
    return f'{quote(LEGEND_ID)} [shape=plaintext, style="", fontsize=9, label=<{table}>, tooltip="operator categories"];\n'


def legend_dot(categories: Iterable[str]) -> str:
    """A stand-alone legend (the same chips the graph carries)."""
    return "digraph legend {\n" + _GRAPH_HEAD + _legend(categories) + "}\n"


def _node_style(name: str, base_fill: str, highlight: str | None, node_colors: dict[str, str] | None) -> dict[str, object]:
    style: dict[str, object] = {"fillcolor": (node_colors or {}).get(name, base_fill)}
    if name == highlight:
        style.update(color=HIGHLIGHT_COLOR, penwidth=4, fontcolor="#000000")
        style["class"] = HIGHLIGHT_CLASS
    return style


def _detail_dot(
    graph: Graph,
    ops: Sequence[Operator],
    highlight: str | None,
    node_colors: dict[str, str] | None,
    focus: str | None,
    edge_labels: bool,
) -> str:
    shown = {op.name for op in ops}
    out = ["digraph pnnx {", _GRAPH_HEAD.rstrip("\n")]
    for op in ops:
        hidden_neighbour = any(n.name not in shown for n in graph.successors(op) + graph.predecessors(op))
        style = _node_style(op.name, CATEGORY_COLORS[category(op.type)], highlight, node_colors)
        if hidden_neighbour and op.name != highlight:
            style["style"] = "rounded,filled,dashed"  # more graph beyond this node
        if op.name == focus:
            style["peripheries"] = 2
        out.append(f"{quote(op.name)} [{_attrs(label=node_label(op), tooltip=f'{op.type} {op.name}', **style)}];")
    for op in ops:
        done: set[tuple[str, str]] = set()
        for operand in op.outputs:
            for consumer in operand.consumers:
                if consumer.name not in shown or (operand.name, consumer.name) in done:
                    continue
                done.add((operand.name, consumer.name))
                label = shape_text(operand.shape) if edge_labels else None
                tip = f"{operand.name}: {shape_text(operand.shape)}" + (f" {operand.dtype}" if operand.dtype else "")
                out.append(f"{quote(op.name)} -> {quote(consumer.name)} [{_attrs(label=label, tooltip=tip)}];")
    out.append(_legend(category(op.type) for op in ops).rstrip("\n"))
    out.append("}")
    return "\n".join(line for line in out if line) + "\n"


def overview_groups(graph: Graph, ops: Sequence[Operator], n_groups: int = OVERVIEW_GROUPS) -> list[Group]:
    """Fold `ops` (file order) into about n_groups runs of consecutive operators."""
    position = {op.name: i for i, op in enumerate(graph.operators)}
    size = max(1, math.ceil(len(ops) / max(1, n_groups)))
    groups = []
    for gi, k in enumerate(range(0, len(ops), size)):
        chunk = ops[k : k + size]
        counts = Counter(op.type for op in chunk)
        cats = Counter(category(op.type) for op in chunk)
        groups.append(
            Group(
                index=gi,
                start=position[chunk[0].name],
                stop=position[chunk[-1].name] + 1,
                names=[op.name for op in chunk],
                by_type=sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])),
                category=cats.most_common(1)[0][0],
            )
        )
    return groups


def _overview_dot(graph: Graph, ops: Sequence[Operator], groups: list[Group], highlight: str | None) -> str:
    group_of = {name: g for g in groups for name in g.names}
    out = ["digraph pnnx_overview {", _GRAPH_HEAD.rstrip("\n")]
    for g in groups:
        style = {"fillcolor": CATEGORY_COLORS[g.category]}
        if highlight is not None and highlight in g.names:
            style.update(color=HIGHLIGHT_COLOR, penwidth=4)
            style["class"] = HIGHLIGHT_CLASS
        out.append(f"{quote(g.node_id)} [{_attrs(label=g.label, tooltip=f'{g.names[0]} … {g.names[-1]}', **style)}];")
    links: Counter[tuple[int, int]] = Counter()
    for op in ops:
        src = group_of[op.name]
        for operand in op.outputs:
            for consumer in operand.consumers:
                dst = group_of.get(consumer.name)
                if dst is not None and dst.index != src.index:
                    links[(src.index, dst.index)] += 1
    for (a, b), n in sorted(links.items()):
        label = f"{n} edges" if n > 1 else None
        out.append(f"{quote(groups[a].node_id)} -> {quote(groups[b].node_id)} [{_attrs(label=label)}];")
    out.append(_legend(g.category for g in groups).rstrip("\n"))
    out.append("}")
    return "\n".join(line for line in out if line) + "\n"


def graph_view(
    graph: Graph,
    *,
    highlight: str | None = None,
    node_colors: dict[str, str] | None = None,
    focus: str | None = None,
    hops: int = 2,
    max_nodes: int = 400,
    type_filter: set[str] | None = None,
    name_filter: str = "",
    window: tuple[int, int] | None = None,
    edge_labels: bool = True,
) -> GraphView:
    """The DOT of a selection of the graph plus what it shows.

    highlight: operator drawn with a thick red border (class "kx-current" in the SVG).
    node_colors: {operator name: fill colour} overriding the category colour (error maps).
    focus/hops: only operators within `hops` edges of `focus`. type_filter/name_filter:
    keep matching operators. window: file positions [start, stop). More than `max_nodes`
    operators selected -> an overview of groups of consecutive operators.
    """
    ops = select_operators(graph, focus=focus, hops=hops, type_filter=type_filter, name_filter=name_filter, window=window)
    total = len(graph.operators)
    if len(ops) > max_nodes:
        groups = overview_groups(graph, ops)
        return GraphView(_overview_dot(graph, ops, groups, highlight), [], len(ops), total, True, groups)
    dot = _detail_dot(graph, ops, highlight, node_colors, focus, edge_labels)
    return GraphView(dot, [op.name for op in ops], len(ops), total)


def graph_dot(graph: Graph, **options: Any) -> str:
    """DOT text of the model graph: graph_view(graph, **options).dot (options: see graph_view)."""
    return graph_view(graph, **options).dot
