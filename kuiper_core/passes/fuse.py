"""FuseExpressions: chains of elementwise operators become one `pnnx.Expression`.

An expression whose result only one other expression reads (through one reference in its
tree) is inlined into it: `add(@0,@1)` → `max(@0,0)` is `max(add(@0,@1),0)`. Operators the
expression language writes exactly — ReLU (`max(@0,0)`), ReLU6, Hardtanh, clamp, Tanh —
join a chain when they sit next to an expression or to each other, and so do optlevel 0's
`aten::add/sub/rsub/mul/div/pow/…` on tensors. An operand read by two
operators is never inlined (that would compute it twice).
"""

from __future__ import annotations

from collections.abc import Callable

from ..expression.parser import Call, Constant, ListExpr, Node, OperandRef
from ..expression import walk
from ..graph import Graph, Operand, Operator
from .expr_tools import constant_param, copy_node, expr_of, rebuild, set_expr
from .manager import graph_pass, record
from .rewrite import remove_operators


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
    "torch.clamp": lambda p: (
        _clamp(p.get("min"), p.get("max")) if p.get("min") is not None or p.get("max") is not None else None
    ),
    "nn.Tanh": lambda p: Call("tanh", [OperandRef(0)]),
    "F.tanh": lambda p: Call("tanh", [OperandRef(0)]),
    "torch.tanh": lambda p: Call("tanh", [OperandRef(0)]),
}


# optlevel 0 writes arithmetic as aten:: operators (pnnx turns them into expressions at level 1)
_ATEN_UNARY = {
    f"aten::{n}": n
    for n in (
        "abs",
        "neg",
        "exp",
        "log",
        "log10",
        "log1p",
        "expm1",
        "sqrt",
        "rsqrt",
        "floor",
        "ceil",
        "trunc",
        "sign",
        "sin",
        "cos",
        "tan",
        "tanh",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "reciprocal",
        "square",
    )
}
_ATEN_BINARY = {f"aten::{n}": n for n in ("mul", "div", "pow", "maximum", "minimum", "atan2", "fmod", "remainder")}
# F.normalize at optlevel 0 (Swin V2's cosine attention): norm.clamp_min(eps), as layers/aten.py runs them
_ATEN_BINARY.update({"aten::clamp_min": "max", "aten::clamp_max": "min"})


def _aten_tree(op: Operator) -> Node | None:
    """aten::add(a, b, alpha) is add(@0,mul(@1,alpha)); rsub swaps; unary/binary map by name.
    Only tensor results (a declared shape and dtype): scalar shape arithmetic stays."""
    out = op.outputs[0] if len(op.outputs) == 1 else None
    if out is None or out.shape is None or out.dtype is None:
        return None
    refs: list[Node] = [OperandRef(i) for i in range(len(op.inputs))]
    # A positional argument FoldConstantParams made a param (alpha=2, rounding_mode='floor')
    # changes what the op computes: only alpha is expressible, rounding_mode only when None.
    params = {k: v for k, v in op.params.items() if not (k == "rounding_mode" and v is None)}
    if op.type in _ATEN_UNARY and len(refs) == 1 and not params:
        return Call(_ATEN_UNARY[op.type], refs)
    if op.type in _ATEN_BINARY and len(refs) == 2 and not params:
        return Call(_ATEN_BINARY[op.type], refs)
    if op.type in ("aten::add", "aten::sub", "aten::rsub") and len(refs) in (2, 3) and set(params) <= {"alpha"}:
        a, b = (refs[1], refs[0]) if op.type == "aten::rsub" else (refs[0], refs[1])
        alpha: object = params.get("alpha", 1)
        if len(refs) == 3 and "alpha" not in params:  # (a line param beats an operand)
            producer = op.inputs[2].producer
            alpha = constant_param(producer)[1] if producer is not None else None
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            return None
        if alpha != 1:
            b = Call("mul", [b, Constant(alpha)])
        return Call("add" if op.type == "aten::add" else "sub", [a, b])
    return None


def _tree(op: Operator) -> Node | None:
    """The expression `op` computes over its inputs, if it is elementwise and expressible."""
    if op.type == "pnnx.Expression":
        ast = expr_of(op)
        if ast is None or len(op.outputs) != 1 or not op.inputs:
            return None
        if any(isinstance(n, ListExpr) or (isinstance(n, Call) and n.name in ("size", "int")) for n in walk(ast)):
            return None  # shape arithmetic, not elementwise
        return ast
    if op.type.startswith("aten::"):
        return _aten_tree(op)
    make = _AS_EXPR.get(op.type)
    if make is None or len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    return make(op.params)


MAX_FUSED_NODES = 256  # nodes of one fused expression tree


def _size(ast: Node) -> int:
    return sum(1 for _ in walk(ast))


def _reference_counts(ast: Node) -> dict[int, int]:
    counts: dict[int, int] = {}
    for n in walk(ast):
        if isinstance(n, OperandRef):
            counts[n.index] = counts.get(n.index, 0) + 1
    return counts


def _absorbable(operand: Operand, references: int) -> Operator | None:
    """The producer of `operand` if it can be inlined where it is read: one reader, one
    reference in that reader's tree, one output, and itself an expressible elementwise op."""
    producer = operand.producer
    if producer is None or references != 1 or len(operand.consumers) != 1 or len(producer.outputs) != 1:
        return None
    return producer if _tree(producer) is not None else None


def _graft(tree: Node, mapping: dict[int, Node | int]) -> Node:
    """A copy of `tree` with `@k` replaced by mapping[k]: a subtree inserted as it is (each
    is fresh and used once, so no copy), or a new index."""

    def visit(node: Node, kids: list[Node]) -> Node:
        if isinstance(node, OperandRef):
            target = mapping[node.index]
            return OperandRef(target) if isinstance(target, int) else target
        return copy_node(node, kids)

    return rebuild(tree, visit)


def _fuse_upward(consumer: Operator, c_tree: Node) -> tuple[Node, list[Operand], list[Operator]] | None:
    """The consumer's tree with every absorbable producer above it inlined (within the node
    budget): (merged tree, its input operands, the producers absorbed). One pass over the
    nodes of the result, however long the chain."""
    trees: dict[int, Node] = {id(consumer): c_tree}
    edges: dict[tuple[int, int], Operator] = {}  # (operator id, input slot) -> absorbed producer
    read: dict[int, dict[int, int]] = {}  # operator id -> {input slot: references in its tree}
    found: list[Operator] = [consumer]
    budget = MAX_FUSED_NODES - _size(c_tree)
    todo = [consumer]
    while todo:
        op = todo.pop()
        counts = read[id(op)] = _reference_counts(trees[id(op)])
        for k, operand in enumerate(op.inputs):
            producer = _absorbable(operand, counts.get(k, 0))
            if producer is None:
                continue
            p_tree = _tree(producer)
            assert p_tree is not None
            cost = _size(p_tree) - 1
            if cost > budget:
                continue
            budget -= cost
            trees[id(producer)] = p_tree
            edges[(id(op), k)] = producer
            found.append(producer)
            todo.append(producer)
    if len(found) == 1 and not consumer.type.startswith("aten::"):
        return None  # (an aten operator alone still becomes the expression pnnx writes)
    leaves: dict[int, int] = {}  # operand id -> index in the merged expression
    inputs: list[Operand] = []
    for op in found:  # the consumer's own inputs first, then those the chain brings
        for k, operand in enumerate(op.inputs):
            if (id(op), k) not in edges and id(operand) not in leaves and read[id(op)].get(k):
                leaves[id(operand)] = len(inputs)
                inputs.append(operand)
    built: dict[int, Node] = {}
    for op in reversed(found):  # producers before the operators that absorbed them
        mapping: dict[int, Node | int] = {
            k: built.pop(id(edges[(id(op), k)])) if (id(op), k) in edges else leaves[id(operand)]
            for k, operand in enumerate(op.inputs)
            if read[id(op)].get(k)
        }
        built[id(op)] = _graft(trees[id(op)], mapping)
    return built[id(consumer)], inputs, found[1:]


@graph_pass("FuseExpressions", 2, description="chains of elementwise operators fused into one pnnx.Expression")
def fuse_expressions(graph: Graph) -> tuple[Graph, bool]:
    removed: list[Operator] = []
    gone: set[int] = set()
    rewritten = False
    # Last to first: each consumer swallows the chain above it at once.
    for consumer in list(reversed(graph.operators)):
        if id(consumer) in gone:
            continue
        c_tree = _tree(consumer)
        fused = _fuse_upward(consumer, c_tree) if c_tree is not None else None
        if fused is None:
            continue
        tree, inputs, producers = fused
        was = consumer.type
        for o in consumer.inputs:
            o.consumers.remove(consumer)
        consumer.inputs, consumer.input_names = inputs, [""] * len(inputs)
        for o in inputs:
            o.consumers.append(consumer)
        if consumer.type != "pnnx.Expression":
            consumer.type, consumer.params = "pnnx.Expression", {}
        set_expr(consumer, tree)
        rewritten = True
        if not producers:  # optlevel 0's lone aten operator
            record("changed", consumer.name, f"{was} → pnnx.Expression {consumer.params['expr']}")
        for p in producers:
            gone.add(id(p))
            removed.append(p)
            record("fused", consumer.name, f"{p.name} ({p.type}) into {consumer.name} ({was})")
    remove_operators(graph, removed)
    return graph, rewritten
