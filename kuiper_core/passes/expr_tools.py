"""Rewriting `pnnx.Expression` trees: the helpers the passes share for expressions.

Trees are rebuilt bottom-up with an explicit stack (no recursion: pnnx expressions can be
deep). Nodes are never shared between the old and the new tree, and parsed trees are
cached per text, so no tree is ever modified in place.
"""

from __future__ import annotations

import functools
from typing import Any
from collections.abc import Callable

import numpy as np

from ..expression import evaluate, parse, to_text, walk
from ..expression.functions import FUNCTIONS, SIZE
from ..expression.parser import Call, Constant, ListExpr, Node, OperandRef, children
from ..graph import Operand, Operator, ParamValue, dtype_name, numpy_dtype

_NO_VALUE = object()


def expr_of(op: Operator) -> Node | None:
    """The parsed `expr` of a pnnx.Expression (None when it does not parse)."""
    expr = op.params.get("expr")
    if isinstance(expr, bool) or expr is None:
        text = str(expr)
    elif isinstance(expr, (int, float)):
        text = repr(expr)
    elif isinstance(expr, list):
        text = "[" + ",".join(repr(v) if not isinstance(v, str) else v for v in expr) + "]"
    elif isinstance(expr, str):
        text = expr
    else:
        return None
    return _parse(text)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Node | None:
    """Parsed once per text: passes and the verifier read the same expressions many times.
    Trees are shared, so nothing may modify one in place (the helpers here rebuild)."""
    try:
        return parse(text)
    except Exception:
        return None


def set_expr(op: Operator, node: Node) -> None:
    op.params["expr"] = to_text(node)


def set_expr_dropping_unused(op: Operator, ast: Node) -> None:
    """Set the expr and drop the inputs it no longer reads (renumbering the rest)."""
    from .rewrite import remove_input

    used = used_inputs(ast)
    if used != list(range(len(op.inputs))):
        ast = substitute(ast, {old: new for new, old in enumerate(used)})
        for i in reversed(range(len(op.inputs))):
            if i not in used:
                remove_input(op, i)
    set_expr(op, ast)


def literal_value(node: Node) -> Any:
    """The Python value of a literal (a number, bool, None, or a flat list of them), else
    `_NO_VALUE`."""
    if isinstance(node, Constant):
        return node.value
    if isinstance(node, ListExpr):
        values = [n.value for n in node.items if isinstance(n, Constant)]
        if len(values) == len(node.items):
            return values
    return _NO_VALUE


def constant_param(op: Operator) -> tuple[bool, ParamValue]:
    """(True, value) when `op` produces a literal that arrived as an operand: a
    pnnx.Expression without inputs whose expr is a literal (`expr=1`, `expr=[0,2,1,3]`,
    `expr=None`), or optlevel 0's `prim::Constant value=…` and a `prim::ListConstruct`
    of such literals."""
    if len(op.outputs) != 1 or op.outputs[0].shape is not None:
        return False, None  # an annotated output is a tensor (`expr=0.5 #21=(1)f32` at optlevel 1)
    if op.type == "prim::Constant" and not op.inputs and "value" in op.params:
        return True, op.params["value"]
    if op.type == "prim::ListConstruct" and op.inputs:
        items = [constant_param(o.producer) if o.producer is not None else (False, None) for o in op.inputs]
        if all(ok and isinstance(v, (int, float)) for ok, v in items):
            return True, [v for _, v in items]
        return False, None
    if op.type != "pnnx.Expression" or op.inputs:
        return False, None
    node = expr_of(op)
    if node is None:
        return False, None
    value = literal_value(node)
    if value is _NO_VALUE:
        return False, None
    return True, value


def rebuild(root: Node, visit: Callable[[Node, list[Node]], Node]) -> Node:
    """Post-order rebuild: `visit(node, new_children)` returns the node that replaces `node`
    (children already rebuilt)."""
    out: list[Node] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        kids = children(node)
        if kids and not expanded:
            stack.append((node, True))
            stack.extend((k, False) for k in reversed(kids))
            continue
        n = len(kids)
        new_kids = out[len(out) - n :] if n else []
        if n:
            del out[len(out) - n :]
        out.append(visit(node, new_kids))
    return out[0]


def copy_node(node: Node, new_children: list[Node]) -> Node:
    if isinstance(node, Call):
        return Call(node.name, new_children)
    if isinstance(node, ListExpr):
        return ListExpr(new_children)
    if isinstance(node, Constant):
        return Constant(node.value, node.text)
    assert isinstance(node, OperandRef)
    return OperandRef(node.index)


def substitute(root: Node, mapping: dict[int, Node | int]) -> Node:
    """Replace `@k` by `mapping[k]` (a tree, copied at each use, or a new index)."""

    def visit(node: Node, kids: list[Node]) -> Node:
        if isinstance(node, OperandRef) and node.index in mapping:
            target = mapping[node.index]
            if isinstance(target, int):
                return OperandRef(target)
            return rebuild(target, copy_node)
        return copy_node(node, kids)

    return rebuild(root, visit)


def used_inputs(root: Node) -> list[int]:
    return sorted({n.index for n in walk(root) if isinstance(n, OperandRef)})


def fold_constant_calls(root: Node) -> tuple[Node, int]:
    """Evaluate calls whose arguments are all numbers (`mul(2,3)` -> `6`, `sqrt(4.0)` -> `2.0`),
    as the expression evaluator would. Returns the new tree and how many calls folded."""
    folded = 0

    def visit(node: Node, kids: list[Node]) -> Node:
        nonlocal folded
        new = copy_node(node, kids)
        if (
            isinstance(new, Call)
            and FUNCTIONS[new.name].rule != SIZE
            and kids
            and all(
                isinstance(k, Constant) and isinstance(k.value, (int, float)) and not isinstance(k.value, bool)
                for k in kids
            )
        ):
            try:
                value = evaluate(new, [])
            except Exception:
                return new
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and value == value
                and abs(value) != float("inf")
            ):
                folded += 1
                return Constant(float(value) if isinstance(value, float) else int(value))
        return new

    return rebuild(root, visit), folded


def subtree_ids(root: Node) -> tuple[dict[int, int], dict[int, int]]:
    """For every node (by `id`): a small int equal for structurally equal subtrees
    (hash-consing), and how many calls its subtree holds. One pass over the tree."""
    ids: dict[int, int] = {}
    n_calls: dict[int, int] = {}
    table: dict[tuple, int] = {}

    def visit(node: Node, kids: list[Node]) -> Node:  # kids are the original children
        if isinstance(node, Call):
            sig: tuple = ("call", node.name, tuple(ids[id(k)] for k in kids))
        elif isinstance(node, ListExpr):
            sig = ("list", tuple(ids[id(k)] for k in kids))
        elif isinstance(node, Constant):
            sig = ("const", type(node.value).__name__, node.text)
        else:
            sig = ("ref", node.index)
        ids[id(node)] = table.setdefault(sig, len(table))
        n_calls[id(node)] = int(isinstance(node, Call)) + sum(n_calls[id(k)] for k in kids)
        return node

    rebuild(root, visit)
    return ids, n_calls


def result_type(root: Node, inputs: list[Operand]) -> tuple[tuple[int, ...] | None, str | None]:
    """Shape and dtype of an elementwise expression over these operands: the broadcast of
    their static shapes, and the dtype the evaluator gives (found on one-element arrays).
    (None, None) when an input's shape or dtype is unknown."""
    shapes = [s for o in inputs if (s := o.static_shape) is not None]
    dtypes = [d for o in inputs if (d := o.dtype) is not None and d != "bf16"]
    if len(shapes) != len(inputs) or len(dtypes) != len(inputs):
        return None, None
    try:
        shape = tuple(np.broadcast_shapes(*shapes)) if shapes else ()
        probes = [np.zeros((1,) * len(s), numpy_dtype(d)) for s, d in zip(shapes, dtypes)]
        with np.errstate(all="ignore"):
            value = evaluate(root, probes)
        if not isinstance(value, np.ndarray):
            return None, None
        return shape, dtype_name(value.dtype)
    except Exception:
        return None, None
