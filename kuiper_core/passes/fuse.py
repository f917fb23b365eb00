"""FuseExpressions: chains of elementwise operators become one `pnnx.Expression`.

An expression whose result only one other expression reads (through one reference in its
tree) is inlined into it: `add(@0,@1)` → `max(@0,0)` is `max(add(@0,@1),0)`. Operators the
expression language writes exactly — ReLU (`max(@0,0)`), ReLU6, Hardtanh, clamp, Tanh —
join a chain when they sit next to an expression or to each other. An operand read by two
operators is never inlined (that would compute it twice), and a fused expression stops
growing at MAX_FUSED_NODES: each fusion re-reads the tree, so an unbounded chain (20,000
ReLUs in a 600 KB file) made the pass quadratic and never finish.
"""

from __future__ import annotations

from typing import Callable

from ..expression.parser import Call, Constant, ListExpr, Node, OperandRef
from ..expression import walk
from ..graph import Graph, Operator
from .expr_tools import expr_of, set_expr, substitute, used_inputs
from .manager import graph_pass, record
from .rewrite import remove_operator

MAX_FUSED_NODES = 64


def _size(ast: Node) -> int:
    return sum(1 for _ in walk(ast))


def _num(value: object) -> Constant | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return Constant(value)


def _clamp(lo: object, hi: object) -> Node | None:
    node: Node = OperandRef(0)
    if lo is not None:
        c = _num(lo)
        if c is None:
            return None
        node = Call("max", [node, c])
    if hi is not None:
        c = _num(hi)
        if c is None:
            return None
        node = Call("min", [node, c])
    return node


# type -> params -> the expression it computes on @0 (None: not expressible)
_AS_EXPR: dict[str, Callable[[dict], Node | None]] = {
    "nn.ReLU": lambda p: Call("max", [OperandRef(0), Constant(0)]),
    "F.relu": lambda p: Call("max", [OperandRef(0), Constant(0)]),
    "nn.ReLU6": lambda p: _clamp(0, 6),
    "F.relu6": lambda p: _clamp(0, 6),
    "nn.Hardtanh": lambda p: _clamp(p.get("min_val", -1.0), p.get("max_val", 1.0)),
    "F.hardtanh": lambda p: _clamp(p.get("min_val", -1.0), p.get("max_val", 1.0)),
    "torch.clamp": lambda p: _clamp(p.get("min"), p.get("max")) if p.get("min") is not None or p.get("max") is not None else None,
    "nn.Tanh": lambda p: Call("tanh", [OperandRef(0)]),
    "F.tanh": lambda p: Call("tanh", [OperandRef(0)]),
    "torch.tanh": lambda p: Call("tanh", [OperandRef(0)]),
}


def _tree(op: Operator) -> Node | None:
    """The expression `op` computes over its inputs, if it is elementwise and expressible."""
    if op.type == "pnnx.Expression":
        ast = expr_of(op)
        if ast is None or len(op.outputs) != 1 or not op.inputs:
            return None
        if any(isinstance(n, ListExpr) or (isinstance(n, Call) and n.name in ("size", "int")) for n in walk(ast)):
            return None  # shape arithmetic, not elementwise
        return ast
    make = _AS_EXPR.get(op.type)
    if make is None or len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    return make(op.params)


def _references(ast: Node, index: int) -> int:
    return sum(1 for n in walk(ast) if isinstance(n, OperandRef) and n.index == index)


def _fuse_into(graph: Graph, producer: Operator, p_tree: Node, consumer: Operator, c_tree: Node) -> None:
    """Inline the producer's tree where the consumer reads its result."""
    out = producer.outputs[0]
    k = consumer.inputs.index(out)
    # the producer's inputs join the consumer's (one slot per operand)
    index_of = {id(o): i for i, o in enumerate(consumer.inputs) if i != k}
    mapping: dict[int, Node | int] = {}
    for j, o in enumerate(producer.inputs):
        if id(o) not in index_of:
            consumer.inputs.append(o)
            consumer.input_names.append("")
            o.consumers.append(consumer)
            index_of[id(o)] = len(consumer.inputs) - 1
        mapping[j] = index_of[id(o)]
    inlined = substitute(p_tree, mapping)
    merged = substitute(c_tree, {k: inlined})
    # drop the slots the merged tree no longer reads (the producer's among them), renumber
    used = used_inputs(merged)
    for i in reversed(range(len(consumer.inputs))):
        if i not in used:
            o = consumer.inputs.pop(i)
            consumer.input_names.pop(i)
            o.consumers.remove(consumer)
    merged = substitute(merged, {old: new for new, old in enumerate(used)})
    if consumer.type != "pnnx.Expression":
        consumer.type, consumer.params = "pnnx.Expression", {}
    set_expr(consumer, merged)
    consumer.input_names = [""] * len(consumer.inputs)
    remove_operator(graph, producer)


@graph_pass("FuseExpressions", 2, description="chains of elementwise operators fused into one pnnx.Expression")
def fuse_expressions(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    removed: set[int] = set()
    # Last to first: a consumer swallows its producers one by one, then the chain above them.
    for consumer in list(reversed(graph.operators)):
        if id(consumer) in removed:
            continue
        while True:
            c_tree = _tree(consumer)
            if c_tree is None:
                break
            target = next((k for k, o in enumerate(consumer.inputs) if _fusible(o, c_tree, k)), None)
            if target is None:
                break
            producer = consumer.inputs[target].producer
            assert producer is not None
            p_tree = _tree(producer)
            assert p_tree is not None
            if _size(c_tree) + _size(p_tree) > MAX_FUSED_NODES:
                break  # big enough: the chain above starts its own expression
            was = consumer.type
            _fuse_into(graph, producer, p_tree, consumer, c_tree)
            removed.add(id(producer))
            record("fused", consumer.name, f"{producer.name} ({producer.type}) into {consumer.name} ({was}):"
                   f" expr={consumer.params['expr'][:60]}")
            changed = True
    return graph, changed


def _fusible(operand, c_tree: Node, k: int) -> bool:
    producer = operand.producer
    if producer is None or len(operand.consumers) != 1 or len(producer.outputs) != 1:
        return False
    return _references(c_tree, k) == 1 and _tree(producer) is not None
