"""pnnx.Expression as the app shows it: tokens, the AST as DOT, reverse Polish, the stack.

The language itself (lexer, parser, RPN, traced evaluation) is `kuiper_core.expression`;
this module lays its results out as rows and DOT text. Operands `@N` are labelled with the
operator's real input operands (`@0 = %17 (1,4,16,16)`) so the tree reads like the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

import numpy as np

from .. import expression as ex
from ..errors import LimitError
from ..graph import Graph, Operator, format_shape
from .app_limits import EXPRESSION_WALK_NODES
from .dot import quote
from .tensor_view import value_preview

AST_COLORS = {"call": "#fbb4c4", "operand": "#9ecae1", "constant": "#e0e0e0", "list": "#fff2ae"}
# (apart from each other and from the grey of "not evaluated yet" in lightness too: tests/test_palette.py)
ON_STACK = "#eacc79"  # evaluated, its value is on the stack now
USED = "#6eb978"  # evaluated and already consumed by its parent's call
STACK_LEGEND = [("value on the stack", ON_STACK), ("evaluated and used", USED)]


def expression_operators(graph: Graph) -> list[Operator]:
    """Every pnnx.Expression in file order."""
    return [op for op in graph.operators if op.type == "pnnx.Expression"]


def expression_text(op: Operator) -> str:
    return str(op.params.get("expr", ""))


def operand_labels(op: Operator | None, n: int | None = None) -> list[str]:
    """`@i` -> 'name (shape)' for each input of the operator (n names with no operator)."""
    if op is None:
        return [f"input {i}" for i in range(n or 0)]
    labels = []
    for o in op.inputs:
        labels.append(f"%{o.name} {format_shape(o.shape)}")
    return labels


def check_walkable(ast: ex.Node) -> None:
    """LimitError if the Expressions page would walk more than EXPRESSION_WALK_NODES steps."""
    n = sum(1 for _ in ex.walk(ast))
    if n > EXPRESSION_WALK_NODES:
        raise LimitError(
            f"the expression has {n:,} nodes, more than the Expressions page walks one step each",
            limit="EXPRESSION_WALK_NODES",
            maximum=EXPRESSION_WALK_NODES,
            value=n,
        )


def token_rows(text: str) -> list[dict[str, Any]]:
    """The token table: number (from 1), kind, text, 1-based column span (raises ParseError)."""
    return [
        {"#": i + 1, "kind": t.kind.value, "text": t.text, "columns": f"{t.start + 1}-{t.end}"}
        for i, t in enumerate(ex.tokens(text))
    ]


def _kind(node: ex.Node) -> str:
    if isinstance(node, ex.OperandRef):
        return "operand"
    if isinstance(node, ex.Constant):
        return "constant"
    if isinstance(node, ex.Call):
        return "call"
    return "list"


def _node_label(node: ex.Node, labels: Sequence[str]) -> str:
    if isinstance(node, ex.OperandRef):
        name = labels[node.index] if node.index < len(labels) else "(no such input)"
        return f"@{node.index}\n{name}"
    if isinstance(node, ex.ListExpr):
        return f"[ ] ({len(node.items)})"
    return ex.label(node)


@dataclass
class AstDot:
    dot: str
    shown: int  # nodes drawn
    total: int  # nodes in the tree
    ids: dict[int, str]  # id(AST node) -> DOT node id (for the overlay)

    def overlay_colors(self, trace: ex.Trace, step: int) -> tuple[dict[str, str], str | None]:
        """After stack step `step` (0-based): fills for evaluated nodes (on the stack, or
        used by a call) and the DOT id of the node the step is about."""
        on_stack = {id(e.node) for e in trace.steps[step].stack}
        colors = {}
        for s in trace.steps[: step + 1]:
            node_id = self.ids.get(id(s.node))
            if node_id is not None:
                colors[node_id] = ON_STACK if id(s.node) in on_stack else USED
        return colors, self.ids.get(id(trace.steps[step].node))


def ast_dot(ast: ex.Node, labels: Sequence[str] = (), *, max_nodes: int = 300, numbered: bool = True) -> AstDot:
    """The AST top-down, children in argument order; each node numbered by its RPN position
    (unless `numbered` is False: a quiz asks for that order) and coloured by kind (calls are
    ellipses). Trees larger than `max_nodes` are cut breadth-first, with a '…' leaf where
    children were dropped. The evaluation state is an overlay (AstDot.overlay_colors), so the
    tree is laid out once per expression."""
    rpn_pos = {id(n): i + 1 for i, n in enumerate(ex.to_rpn(ast))}
    ids: dict[int, str] = {}
    order: list[ex.Node] = []
    queue = [ast]
    while queue and len(order) < max_nodes:  # breadth-first, so a cut keeps the top of the tree
        nxt = []
        for n in queue:
            if len(order) >= max_nodes:
                break
            ids[id(n)] = f"n{len(order)}"
            order.append(n)
            nxt.extend(ex.children(n))
        queue = nxt
    lines = [
        "digraph ast {",
        '  graph [rankdir=TB, ordering=out, nodesep=0.25, ranksep=0.35, bgcolor="transparent"];',
        '  node [style="rounded,filled", shape=box, fontname="Helvetica", fontsize=13];',
        '  edge [arrowsize=0.6, color="#555555"];',
    ]
    for n in order:
        kind = _kind(n)
        label = _node_label(n, labels) + (f"\n#{rpn_pos[id(n)]}" if numbered else "")
        attrs = [f"label={quote(label)}", f"fillcolor={quote(AST_COLORS[kind])}", f"tooltip={quote(kind)}"]
        if kind == "call":
            attrs.append("shape=ellipse")
        lines.append(f"  {ids[id(n)]} [{', '.join(attrs)}];")
    cut = 0
    for n in order:
        for child in ex.children(n):
            if id(child) in ids:
                lines.append(f"  {ids[id(n)]} -> {ids[id(child)]};")
            else:
                cut += 1
                lines.append(f'  cut{cut} [label="…", shape=plaintext, style=""];')
                lines.append(f"  {ids[id(n)]} -> cut{cut} [style=dashed];")
    lines.append("}")
    return AstDot("\n".join(lines), len(order), sum(1 for _ in ex.walk(ast)), ids)


def rpn_rows(ast: ex.Node, labels: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Reverse Polish order: what the stack machine does with each node."""
    rows = []
    for i, n in enumerate(ex.to_rpn(ast)):
        k = len(ex.children(n))
        if isinstance(n, ex.OperandRef):
            action = "push input " + (labels[n.index] if n.index < len(labels) else f"@{n.index}")
        elif isinstance(n, ex.Constant):
            action = f"push constant {n.text}"
        else:
            action = f"pop {k}, apply {ex.label(n)}, push the result"
        rows.append({"#": i + 1, "token": ex.label(n), "action": action})
    return rows


def _entry_text(entry: ex.StackEntry, labels: Sequence[str]) -> str:
    node = entry.node
    if isinstance(node, ex.OperandRef) and node.index < len(labels):
        return f"@{node.index} {labels[node.index]} = {ex.describe_value(entry.value)}"
    return entry.describe()


STACK_SHOWN = 12  # values of a stack a walk's step shows, top first (a right-leaning chain 2,000 deep
#                   held 2,000 at its deepest step: 280 MB of steps for the browser)


def stack_text(trace: ex.Trace, step: int, labels: Sequence[str] = (), width: int = 60) -> str:
    """The stack after `step` as a tall picture, top first: two lines per value (what
    produced it with its type, then its first numbers), at most STACK_SHOWN of them. Long
    names are shortened."""
    lines = []
    for r in stack_rows(trace, step, labels, most=STACK_SHOWN):
        name = r["value of"] if len(r["value of"]) <= width else r["value of"][: width - 1] + "…"
        lines.append(f"{'top ▸ ' if r[''] else '      '}{name}  {r['type']}")
        lines.append(f"      {r['values']}")
    below = trace.steps[step].depth - STACK_SHOWN
    if below > 0:
        lines.append(f"      … and {below:,} more below")
    return "\n".join(lines) if lines else "(empty)"


def stack_rows(trace: ex.Trace, step: int, labels: Sequence[str] = (), most: int | None = None) -> list[dict[str, Any]]:
    """The stack after `step` (0-based), top first (its top `most` values): what produced each
    value, its type and shape, and the numbers themselves (the first few)."""
    rows = []
    entries = trace.steps[step].stack
    for depth, e in enumerate(reversed(entries[-most:] if most else entries)):
        v = e.value
        node = e.node
        what = (
            f"@{node.index} {labels[node.index]}"
            if isinstance(node, ex.OperandRef) and node.index < len(labels)
            else e.label
        )
        rows.append(
            {
                "": "top" if depth == 0 else "",
                "value of": what,
                "type": format_shape(v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else type(v).__name__,
                "values": value_preview(v),
            }
        )
    return rows


def trace_rows(trace: ex.Trace, labels: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The stack evaluation step by step: the action and the stack after it (top last)."""
    return [
        {
            "#": s.index + 1,
            "token": s.token,
            "action": s.describe(),
            "stack (bottom → top)": "  |  ".join(_entry_text(e, labels) for e in s.stack),
            "depth": s.depth,
        }
        for s in trace.steps
    ]


def stack_at(trace: ex.Trace, step: int, labels: Sequence[str] = ()) -> list[str]:
    """The stack after `step` (0-based), top first, for a vertical stack picture."""
    return [_entry_text(e, labels) for e in reversed(trace.steps[step].stack)]


def example_inputs(n: int, shape: tuple[int, ...] = (2, 3)) -> list[np.ndarray]:
    """Small readable float32 inputs for a typed expression with no operator behind it."""
    size = int(np.prod(shape))
    return [((np.arange(size, dtype=np.float32) - size / 2) / 2 + i).reshape(shape) for i in range(n)]


def max_operand_index(ast: ex.Node) -> int:
    """Highest @N in the tree (-1 without operands)."""
    return max((n.index for n in ex.walk(ast) if isinstance(n, ex.OperandRef)), default=-1)


def result_rows(value: Any) -> dict[str, Any]:
    """A short description of an evaluation result (tensor, scalar or list)."""
    if isinstance(value, np.ndarray):
        return {"kind": "tensor", "shape": tuple(value.shape), "dtype": str(value.dtype)}
    return {"kind": type(value).__name__, "value": repr(value)}
