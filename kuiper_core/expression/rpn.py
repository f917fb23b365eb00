"""Reverse Polish order: children before their call (seed 001's stack evaluation order).

`add(mul(@0,@1),@2)` -> `@0 @1 mul @2 add`. A stack machine reading this left to right
pushes operands and constants, and for a call pops its k arguments and pushes the result.
"""

from __future__ import annotations

from .parser import Call, Constant, ListExpr, Node, OperandRef, children


def to_rpn(ast: Node) -> list[Node]:
    """Post-order list of the nodes of `ast` (iterative: any depth)."""
    out: list[Node] = []
    todo: list[tuple[Node, bool]] = [(ast, False)]
    while todo:
        node, expanded = todo.pop()
        kids = children(node)
        if expanded or not kids:
            out.append(node)
            continue
        todo.append((node, True))
        todo.extend((child, False) for child in reversed(kids))
    return out


def label(node: Node) -> str:
    """How a node shows in reverse Polish text: `@0`, `3.0`, `add`, `[]/3`."""
    if isinstance(node, OperandRef):
        return f"@{node.index}"
    if isinstance(node, Constant):
        return node.text
    if isinstance(node, Call):
        return node.name
    assert isinstance(node, ListExpr)
    return f"[]/{len(node.items)}"


def rpn_text(ast: Node) -> str:
    """The reverse Polish order as one line: `@0 @1 mul @2 add`."""
    return " ".join(label(n) for n in to_rpn(ast))
