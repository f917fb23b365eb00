"""The model graph as Graphviz DOT for the browser renderer (viz.js via st.graphviz_chart).

Nodes are operators coloured by category, labelled with name, type and a few key params;
edges carry the operand's shape. Operators are grouped by module path (modules.py): an
open module is a dashed cluster (click it to close), a closed one a single folder node
(click it to open), so a 1,500-operator model opens as its top-level modules. A view can
be narrowed by type/name filters, a focus (k hops around one operator) or a window of file
positions. What changes while someone watches (the current node, state colours, the
legend) is not in the DOT: it is an `Overlay` the viewer paints without a new layout.

Every name and label is quoted and escaped, so any PNNX name (dots, colons, quotes) is a
valid DOT id. Group and cluster ids contain a space, which PNNX names never do.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable, Sequence

from ..graph import Graph, Operator, shape_label
from ..layers.registry import value_shaped_operands
from .categories import CATEGORY_COLORS, category
from .modules import ModuleGroup, ancestors, default_expanded, module_tree, unit_count
from .overlay import category_legend
from .labels import param_lines

__all__ = [
    "graph_dot",
    "graph_view",
    "GraphView",
    "neighbourhood",
    "select_operators",
    "quote",
    "group_id",
    "cluster_id",
    "parse_click",
]

OVERVIEW_BUDGET = 60  # a big model opens with whole module levels while this many nodes are drawn
CLUSTER_LIMIT = 300  # above this many drawn nodes open modules get no frame (dot's cluster layout
# of 1,500 nodes in 300 nested frames takes ~45 s in the browser; without frames a few seconds)
GROUP_PREFIX, CLUSTER_PREFIX = "group ", "cluster "  # PNNX names never contain spaces

_GRAPH_HEAD = (
    'graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontname="Helvetica", bgcolor="transparent"];\n'
    'node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, color="#555555", penwidth=1];\n'
    'edge [fontname="Helvetica", fontsize=10, color="#777777", fontcolor="#444444", arrowsize=0.6];\n'  # node text's size
)


def quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as \\n."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(**kw: object) -> str:
    return ", ".join(f"{k}={quote(str(v))}" for k, v in kw.items() if v is not None)


def node_label(op: Operator) -> str:
    """name / type / the parameters its layer reads that differ from their defaults (labels.py)."""
    name = op.name if len(op.name) <= 40 else op.name[:39] + "…"
    return "\n".join([name, op.type, *param_lines(op)])


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
            or (
                (not types or op.type in types)
                and (not needle or needle in op.name.lower() or needle in op.type.lower())
            )
        ]
    return ops


# -- views ----------------------------------------------------------------------------------
def group_id(group: ModuleGroup) -> str:
    """The DOT id of a closed module's node."""
    return GROUP_PREFIX + group.id


def cluster_id(group: ModuleGroup) -> str:
    """The DOT id of an open module's cluster (must start with 'cluster')."""
    return CLUSTER_PREFIX + group.id


def parse_click(title: str) -> tuple[str, str]:
    """What a click in the viewer hit: ('open', module), ('close', module) or ('operator', name)."""
    if title.startswith(GROUP_PREFIX):
        return "open", title[len(GROUP_PREFIX) :]
    if title.startswith(CLUSTER_PREFIX):
        return "close", title[len(CLUSTER_PREFIX) :]
    return "operator", title


@dataclass
class GraphView:
    dot: str
    shown: list[str]  # operators drawn as nodes, file order
    selected: int  # operators that matched the selection
    total: int  # operators in the model
    tree: ModuleGroup | None = None  # the module tree of the selection
    expanded: set[str] = field(default_factory=set)  # open modules
    unit_of: dict[str, str] = field(default_factory=dict)  # operator -> the node showing it
    categories: list[str] = field(default_factory=list)  # categories of the drawn nodes
    frames: bool = True  # open modules drawn as frames (False above CLUSTER_LIMIT nodes)

    @property
    def closed_groups(self) -> int:
        return sum(1 for u in set(self.unit_of.values()) if u.startswith(GROUP_PREFIX))

    def node_for(self, name: str | None) -> str | None:
        """The node title that shows operator `name` (itself, or its closed module)."""
        return None if name is None else self.unit_of.get(name)

    def legend(self) -> list[tuple[str, str]]:
        return category_legend(self.categories)


def _group_label(g: ModuleGroup) -> str:
    kinds = ", ".join(f"{t.rsplit('.', 1)[-1]} ×{n}" for t, n in g.by_type[:3])
    more = f" +{len(g.by_type) - 3} types" if len(g.by_type) > 3 else ""
    return f"{g.label}  ▸\n{len(g.ops)} operators\n{kinds}{more}"


def _dot(
    graph: Graph,
    ops: Sequence[Operator],
    tree: ModuleGroup,
    expanded: set[str],
    focus: str | None,
    edge_labels: bool,
    node_colors: dict[str, str] | None = None,
    frames: bool = True,
) -> tuple[str, dict[str, str], list[str]]:
    """(DOT, operator -> drawn node, categories drawn). frames=False draws open modules
    without their cluster frame."""
    by_name = {op.name: op for op in ops}
    unit_of: dict[str, str] = {}
    cats: list[str] = []
    out = ["digraph pnnx {", _GRAPH_HEAD.rstrip("\n")]

    def operator_node(op: Operator, indent: str) -> None:
        unit_of[op.name] = op.name
        cat = category(op.type)
        cats.append(cat)
        style: dict[str, object] = {"fillcolor": (node_colors or {}).get(op.name, CATEGORY_COLORS[cat])}
        if any(n.name not in by_name for n in graph.successors(op) + graph.predecessors(op)):
            style["style"] = "rounded,filled,dashed"  # more graph beyond this node
        if op.name == focus:
            style["peripheries"] = 2
        out.append(
            f"{indent}{quote(op.name)} [{_attrs(label=node_label(op), tooltip=f'{op.type} {op.name}', **style)}];"
        )

    def emit(g: ModuleGroup, indent: str) -> None:
        for name in g.direct:
            operator_node(by_name[name], indent)
        for c in g.children:
            if c.id in expanded and not frames:
                emit(c, indent)
            elif c.id in expanded:
                out.append(f"{indent}subgraph {quote(cluster_id(c))} {{")
                out.append(
                    f"{indent}  graph [{_attrs(label=f'{c.label}  ▾', tooltip=f'{c.id}: click the name to close', labeljust='l', style='rounded,dashed', color='#9a9a9a', fontcolor='#444444', fontsize=11, penwidth=1.2)}];"
                )
                emit(c, indent + "  ")
                out.append(f"{indent}}}")
            else:
                node = group_id(c)
                for n in c.ops:
                    unit_of[n] = node
                cats.append(c.category)
                attrs = _attrs(
                    label=_group_label(c),
                    tooltip=f"{c.id}: click to open",
                    shape="folder",
                    style="filled",
                    fillcolor=CATEGORY_COLORS[c.category],
                )
                out.append(f"{indent}{quote(node)} [{attrs}];")

    emit(tree, "")
    # Operator -> operator: one edge per operand, labelled with its shape. Edges touching a
    # closed module are merged per pair of nodes and counted.
    merged: Counter[tuple[str, str]] = Counter()
    seen: set[tuple[str, str, str]] = set()
    loose = value_shaped_operands(graph.operators)
    for op in ops:
        for operand in op.outputs:
            tip = f"{operand.name}: {shape_label(operand.shape)}" + (f" {operand.dtype}" if operand.dtype else "")
            if operand.name in loose:
                tip += (
                    ": its size follows the input values (one_hot, a mask's selection…); pnnx wrote the "
                    "size it saw with its own dummy data"
                )
            for consumer in operand.consumers:
                if consumer.name not in by_name or (op.name, consumer.name, operand.name) in seen:
                    continue
                seen.add((op.name, consumer.name, operand.name))
                a, b = unit_of[op.name], unit_of[consumer.name]
                if a == op.name and b == consumer.name:
                    label = (
                        shape_label(operand.shape) + (" (varies)" if operand.name in loose else "")
                        if edge_labels
                        else None
                    )
                    out.append(f"{quote(a)} -> {quote(b)} [{_attrs(label=label, tooltip=tip)}];")
                elif a != b:
                    merged[(a, b)] += 1
    for (a, b), n in merged.items():
        out.append(f"{quote(a)} -> {quote(b)} [{_attrs(label=f'{n} edges' if n > 1 else None)}];")
    out.append("}")
    return "\n".join(out) + "\n", unit_of, cats


def graph_view(
    graph: Graph,
    *,
    focus: str | None = None,
    hops: int = 2,
    max_nodes: int = 400,
    type_filter: Iterable[str] | None = None,
    name_filter: str = "",
    window: tuple[int, int] | None = None,
    expanded: Iterable[str] | None = None,
    show: Iterable[str | None] = (),
    edge_labels: bool = True,
    node_colors: dict[str, str] | None = None,
) -> GraphView:
    """The DOT of a selection of the graph, grouped by module, plus what it shows.

    focus/hops: only operators within `hops` edges of `focus` (drawn with a double border).
    type_filter/name_filter: keep matching operators. window: file positions [start, stop).
    expanded: the open modules (ids); None opens everything when at most `max_nodes`
    operators are selected, else whole top levels within OVERVIEW_BUDGET nodes. show:
    operators that must be visible (their modules are opened too: the current step, the
    selection).
    """
    ops = select_operators(
        graph, focus=focus, hops=hops, type_filter=type_filter, name_filter=name_filter, window=window
    )
    tree = module_tree(graph, ops)
    if expanded is None:
        if len(ops) <= max_nodes:
            opened = {g.id for g in tree.walk() if g.id}
        else:
            opened = default_expanded(tree, OVERVIEW_BUDGET)
    else:
        opened = set(expanded)
    for name in show:
        if name is not None:
            opened |= {g.id for g in ancestors(tree, name)}
    frames = unit_count(tree, opened) <= CLUSTER_LIMIT
    dot, unit_of, cats = _dot(graph, ops, tree, opened, focus, edge_labels, node_colors, frames)
    shown = [op.name for op in ops if unit_of.get(op.name) == op.name]
    return GraphView(dot, shown, len(ops), len(graph.operators), tree, opened, unit_of, sorted(set(cats)), frames)


def graph_dot(graph: Graph, **options: Any) -> str:
    """DOT text of the model graph: graph_view(graph, **options).dot (options: see graph_view)."""
    return graph_view(graph, **options).dot
