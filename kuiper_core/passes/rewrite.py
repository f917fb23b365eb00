"""Graph-rewriting helpers every pass shares: clone, rewire, remove, insert, add a weight.

`kuiper_core.graph` stays the plain data model; the edits a pass makes go through these
functions, which keep the invariants the verifier checks (each operand produced once,
`consumers` listing one entry per input slot, file order a valid execution order).

Weights are never modified in place: a pass that changes one sets a new array (clones
share the arrays of the graph they were made from).
"""

from __future__ import annotations

import copy
import heapq
import itertools
from collections.abc import Iterable

import numpy as np

from ..graph import Attribute, Graph, Operand, Operator, ParamValue, dtype_name


# -- copies --------------------------------------------------------------------------------
def clone_graph(graph: Graph) -> Graph:
    """A structural copy: new operators and operands, params deep-copied, weight arrays shared."""
    new = Graph(source=graph.source)
    operands = {name: Operand(o.name, o.shape, o.dtype) for name, o in graph.operands.items()}
    for op in graph.operators:
        attrs = {k: a.copy() for k, a in op.attrs.items()}
        c = Operator(op.type, op.name, [], [], copy.deepcopy(op.params), attrs, list(op.input_names), op.line)
        for o in op.inputs:
            operand = operands.setdefault(o.name, Operand(o.name, o.shape, o.dtype))
            c.inputs.append(operand)
            operand.consumers.append(c)
        for o in op.outputs:
            operand = operands.setdefault(o.name, Operand(o.name, o.shape, o.dtype))
            c.outputs.append(operand)
            operand.producer = c
        new.operators.append(c)
    new.operands = {name: operands[name] for name in graph.operands}
    return new


# -- names ----------------------------------------------------------------------------------
def fresh_operator_name(graph: Graph, base: str) -> str:
    """`base`, or `base_1`, `base_2`, … : a name no operator of the graph has."""
    taken = {op.name for op in graph.operators}
    if base not in taken:
        return base
    return next(f"{base}_{i}" for i in itertools.count(1) if f"{base}_{i}" not in taken)


def fresh_operand_name(graph: Graph, base: str) -> str:
    if base not in graph.operands:
        return base
    return next(f"{base}_{i}" for i in itertools.count(1) if f"{base}_{i}" not in graph.operands)


# -- edges -----------------------------------------------------------------------------------
def replace_all_uses(old: Operand, new: Operand) -> list[Operator]:
    """Every input slot reading `old` reads `new` instead (pnnx.Output included).
    Returns the operators rewired."""
    users = list(dict.fromkeys(old.consumers))
    for op in users:
        for i, o in enumerate(op.inputs):
            if o is old:
                op.inputs[i] = new
                new.consumers.append(op)
    old.consumers.clear()
    return users


def set_input(op: Operator, index: int, new: Operand) -> None:
    old = op.inputs[index]
    old.consumers.remove(op)
    op.inputs[index] = new
    new.consumers.append(op)


def remove_input(op: Operator, index: int) -> Operand:
    """Detach input slot `index` (and its `$name`). Returns the operand it read."""
    operand = op.inputs.pop(index)
    if index < len(op.input_names):
        op.input_names.pop(index)
    operand.consumers.remove(op)
    return operand


def add_input(op: Operator, operand: Operand, name: str = "") -> None:
    op.inputs.append(operand)
    while len(op.input_names) < len(op.inputs) - 1:
        op.input_names.append("")
    op.input_names.append(name)
    operand.consumers.append(op)


# -- operators ----------------------------------------------------------------------------------
def remove_operator(graph: Graph, op: Operator) -> None:
    """Remove `op` and its outputs. Its outputs must have no consumers left."""
    for o in op.outputs:
        if o.consumers:
            users = ", ".join(dict.fromkeys(c.name for c in o.consumers))
            raise ValueError(f"cannot remove '{op.name}': its output '{o.name}' is still read by {users}")
    for o in list(op.inputs):
        o.consumers.remove(op)
    op.inputs.clear()
    op.input_names.clear()
    for o in op.outputs:
        o.producer = None
        graph.operands.pop(o.name, None)
    graph.operators.remove(op)


def remove_operators(graph: Graph, ops: Iterable[Operator]) -> None:
    """Remove several operators whose outputs nobody outside them reads, in one sweep of
    the operator list (remove_operator one by one is quadratic on long graphs)."""
    doomed = {id(op): op for op in ops}
    for op in doomed.values():
        for o in op.inputs:
            o.consumers.remove(op)
        op.inputs.clear()
        op.input_names.clear()
    for op in doomed.values():
        for o in op.outputs:
            if o.consumers:
                users = ", ".join(dict.fromkeys(c.name for c in o.consumers))
                raise ValueError(f"cannot remove '{op.name}': its output '{o.name}' is still read by {users}")
            o.producer = None
            graph.operands.pop(o.name, None)
    graph.operators[:] = [op for op in graph.operators if id(op) not in doomed]


def bypass(graph: Graph, op: Operator, source: Operand | int = 0) -> Operand:
    """Remove a one-output operator whose result equals `source` (an operand, or the index
    of one of its inputs): its readers read that instead. Returns the operand they read now."""
    operand = op.inputs[source] if isinstance(source, int) else source
    replace_all_uses(op.outputs[0], operand)
    remove_operator(graph, op)
    return operand


def insert_operator(
    graph: Graph,
    op_type: str,
    name: str,
    inputs: Iterable[Operand],
    outputs: Iterable[Operand],
    *,
    params: dict[str, ParamValue] | None = None,
    attrs: dict[str, Attribute] | None = None,
    input_names: list[str] | None = None,
    before: Operator | None = None,
) -> Operator:
    """A new operator, placed before `before` (default: after the last producer of its
    inputs, so that the file order stays an execution order). Output operands must be new
    (no producer); they are added to the graph."""
    op = Operator(op_type, fresh_operator_name(graph, name), params=dict(params or {}), attrs=dict(attrs or {}))
    for o in inputs:
        op.inputs.append(o)
        o.consumers.append(op)
    op.input_names = list(input_names) if input_names is not None else [""] * len(op.inputs)
    for o in outputs:
        if o.producer is not None:
            raise ValueError(f"operand '{o.name}' already has a producer ('{o.producer.name}')")
        o.producer = op
        op.outputs.append(o)
        graph.operands[o.name] = o
    if before is not None:
        graph.operators.insert(graph.operators.index(before), op)
    else:
        producers = {id(o.producer) for o in op.inputs if o.producer is not None}
        last = max((i for i, x in enumerate(graph.operators) if id(x) in producers), default=-1)
        graph.operators.insert(last + 1, op)
    return op


def new_operand(graph: Graph, base: str, shape: tuple | None = None, dtype: str | None = None) -> Operand:
    """An operand with a fresh name (not yet in the graph: insert_operator adds it)."""
    return Operand(fresh_operand_name(graph, base), tuple(shape) if shape is not None else None, dtype)


def attribute_of(array: np.ndarray) -> Attribute:
    data = np.ascontiguousarray(array)
    return Attribute(dtype_name(data.dtype), tuple(int(d) for d in data.shape), data)


def set_weight(op: Operator, key: str, array: np.ndarray) -> None:
    """Give `op` the weight `@key` (a new Attribute; never writes into the old array)."""
    op.attrs[key] = attribute_of(array)


def add_weight(graph: Graph, array: np.ndarray, name: str, *, before: Operator) -> Operand:
    """A `pnnx.Attribute` operator holding `array`, placed before `before`; returns its operand."""
    attr = attribute_of(array)
    out = new_operand(graph, name, attr.shape, attr.dtype)
    insert_operator(graph, "pnnx.Attribute", name, [], [out], attrs={"data": attr}, before=before)
    return out


def sole_consumer(operand: Operand) -> Operator | None:
    """The one operator reading `operand` through exactly one input slot, else None."""
    if len(operand.consumers) == 1:
        return operand.consumers[0]
    return None


def toposort(graph: Graph) -> bool:
    """Reorder operators into an execution order that keeps file order where it can
    (Kahn's algorithm taking the earliest ready operator). Returns whether anything moved."""
    index = {id(op): i for i, op in enumerate(graph.operators)}
    indegree = {id(op): len({id(o.producer) for o in op.inputs if o.producer is not None}) for op in graph.operators}
    ready = [(index[id(op)], op) for op in graph.operators if indegree[id(op)] == 0]
    heapq.heapify(ready)
    order: list[Operator] = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for succ in graph.successors(op):
            indegree[id(succ)] -= 1
            if indegree[id(succ)] == 0:
                heapq.heappush(ready, (index[id(succ)], succ))
    if len(order) != len(graph.operators):
        return False  # a cycle: leave the order alone, the verifier reports it
    moved = any(a is not b for a, b in zip(order, graph.operators))
    graph.operators[:] = order
    return moved
