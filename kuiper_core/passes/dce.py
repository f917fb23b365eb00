"""RemoveUnused: dead code elimination (TVM's RemoveUnusedFunctions on a dataflow graph).

Walk back from the `pnnx.Output` operators; whatever the walk never reaches computes
nothing the model returns and is removed. Graph inputs are always kept (they are the
model's signature: removing one would change how it is called) and reported when unused;
unused weights (`pnnx.Attribute`) are removed and reported with their size. Operators with
side effects (in-place methods) count as used.
"""

from __future__ import annotations

from ..graph import Graph, Operator, format_shape
from .manager import graph_pass, record
from .op_kinds import is_pure
from .rewrite import remove_operator


def live_operators(graph: Graph) -> set[int]:
    """ids of the operators the outputs depend on (iterative: deep graphs are long)."""
    live: set[int] = set()
    todo: list[Operator] = [
        op for op in graph.operators if op.type == "pnnx.Output" or (op.type != "pnnx.Input" and not is_pure(op))
    ]
    while todo:
        op = todo.pop()
        if id(op) in live:
            continue
        live.add(id(op))
        todo.extend(o.producer for o in op.inputs if o.producer is not None and id(o.producer) not in live)
    return live


@graph_pass("RemoveUnused", 1, description="operators whose results nobody uses are removed (inputs kept)")
def remove_unused(graph: Graph) -> tuple[Graph, bool]:
    live = live_operators(graph)
    changed = False
    for op in reversed(list(graph.operators)):
        if id(op) in live:
            continue
        if op.type == "pnnx.Input":
            if not any(o.consumers for o in op.outputs):
                record("kept", op.name, "unused input kept: it is part of the model's signature")
            continue
        # In reverse file order every consumer of a dead operator is dead and gone already.
        if op.type == "pnnx.Attribute":
            nbytes = sum(a.nbytes for a in op.attrs.values())
            shapes = ", ".join(format_shape(a.shape, a.dtype) for a in op.attrs.values())
            record("removed", op.name, f"unused weight {shapes}, {nbytes:,} bytes")
        else:
            record("removed", op.name, f"{op.type}: result unused")
        remove_operator(graph, op)
        changed = True
    return graph, changed
