"""EliminateCommonSubexpr (TVM's pass of that name, seed 003).

Two operators are the same computation when they have the same type, the same params,
the same weights (byte for byte) and read the same operands through the same argument
names: the later one is dropped and its readers read the earlier one's results. Operators
without inputs are merged only when they are constants (`pnnx.Attribute`, literal
expressions); random and in-place operators never are. A skip hook (TVM's `fskip`) in the
context config, `PassContext(config={"cse.fskip": lambda op: ...})`, exempts operators.

Inside one `pnnx.Expression`: an operand fed twice becomes one input (`add(@0,@1)` of
[a, a] reads `add(@0,@0)`); `mul(S,S)` becomes `square(S)` and `add(S,S)` `mul(S,2)` (both
exact); any other subtree with two or more calls that repeats is computed once by its own
expression operator and read twice (one more operator, its work done once).
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from collections.abc import Callable, Hashable

from ..expression import to_text, walk
from ..expression.parser import Call, Constant, Node, OperandRef
from ..graph import Graph, Operator
from .expr_tools import (
    copy_node,
    expr_of,
    rebuild,
    result_type,
    set_expr_dropping_unused,
    substitute,
    subtree_ids,
    used_inputs,
)
from .manager import PassContext, graph_pass, record
from .op_kinds import IO_TYPES, is_pure
from .rewrite import insert_operator, new_operand, remove_input, remove_operator, replace_all_uses

# A repeated subtree is hoisted into its own operator when it has at least this many calls.
HOIST_MIN_CALLS = 2


def _freeze(value: Any) -> Hashable:
    if isinstance(value, list):
        return ("list",) + tuple(_freeze(v) for v in value)
    if isinstance(value, float):
        return ("float", value)  # 1 and 1.0 differ as params (int vs float)
    return (type(value).__name__, value)


def _key(op: Operator) -> Hashable:
    return (
        op.type,
        tuple(sorted((k, _freeze(v)) for k, v in op.params.items())),
        tuple(id(o) for o in op.inputs),
        tuple(op.input_names),
        tuple(sorted((k, a.dtype, tuple(a.shape)) for k, a in op.attrs.items())),
        tuple((o.shape, o.dtype) for o in op.outputs),
    )


def _mergeable(op: Operator, fskip: Callable[[Operator], bool] | None) -> bool:
    if op.type in IO_TYPES or not is_pure(op) or not op.outputs:
        return False
    if not op.inputs and op.type not in ("pnnx.Attribute", "pnnx.Expression"):
        return False  # e.g. torch.zeros: cheap, and TVM skips argument-less calls too
    return not (fskip is not None and fskip(op))


@graph_pass("EliminateCommonSubexpr", 1, description="identical operators on identical inputs computed once")
def eliminate_common_subexpr(graph: Graph) -> tuple[Graph, bool]:
    fskip = PassContext.current().config.get("cse.fskip")
    changed = False
    seen: dict[Hashable, list[Operator]] = {}
    for op in list(graph.operators):
        if op.type == "pnnx.Expression" and op.inputs:
            changed |= _expression_cse(graph, op)
        if not _mergeable(op, fskip):
            continue
        key = _key(op)
        same = next((c for c in seen.get(key, []) if c.attrs == op.attrs), None)
        if same is None:
            seen.setdefault(key, []).append(op)
            continue
        for mine, theirs in zip(op.outputs, same.outputs):
            replace_all_uses(mine, theirs)
        remove_operator(graph, op)
        record("merged", op.name, f"same {op.type} as {same.name}")
        changed = True
    return graph, changed


# -- inside one expression ---------------------------------------------------------------------
def _expression_cse(graph: Graph, op: Operator) -> bool:
    ast = expr_of(op)
    if ast is None:
        return False
    changed = False
    # 1. one input per operand
    first: dict[int, int] = {}
    mapping: dict[int, Node | int] = {}
    for i, o in enumerate(op.inputs):
        j = first.setdefault(id(o), i)
        if j != i:
            mapping[i] = j
    if mapping:
        ast = substitute(ast, mapping)
        for i in sorted(mapping, reverse=True):
            remove_input(op, i)
        kept = used_inputs(ast)
        ast = substitute(ast, {old: new for new, old in enumerate(kept)})
        record("merged", op.name, f"{len(mapping)} repeated input operand(s) read once")
        changed = True
    # 2. mul(S,S) -> square(S), add(S,S) -> mul(S,2)
    n_rewritten = 0
    same, _ = subtree_ids(ast)

    def square(node: Node, kids: list[Node]) -> Node:
        nonlocal n_rewritten
        if (
            isinstance(node, Call)
            and len(node.args) == 2
            and isinstance(node.args[0], Call)
            and same[id(node.args[0])] == same[id(node.args[1])]
            and node.name in ("mul", "add")
        ):
            n_rewritten += 1
            return Call("square", [kids[0]]) if node.name == "mul" else Call("mul", [kids[0], Constant(2)])
        return copy_node(node, kids)

    ast = rebuild(ast, square)
    if n_rewritten:
        record("changed", op.name, f"{n_rewritten} repeated operand pair(s) written as square/mul(…,2)")
        changed = True
    # 3. other repeated subtrees with real work: computed once by a new operator
    ast, hoisted = _hoist_repeats(graph, op, ast)
    changed |= hoisted
    if changed:
        set_expr_dropping_unused(op, ast)
    return changed


def _hoist_repeats(graph: Graph, op: Operator, ast: Node) -> tuple[Node, bool]:
    ids, n_calls = subtree_ids(ast)
    counts: Counter[int] = Counter()
    first: dict[int, Node] = {}
    for n in walk(ast):
        if isinstance(n, Call) and n_calls[id(n)] >= HOIST_MIN_CALLS:
            counts[ids[id(n)]] += 1
            first.setdefault(ids[id(n)], n)
    repeated = [k for k, c in counts.items() if c >= 2]
    if not repeated:
        return ast, False
    # The largest repeated subtree first (its own repeats go with it).
    key = max(repeated, key=lambda k: n_calls[id(first[k])])
    sub = first[key]
    refs = used_inputs(sub)
    inner = substitute(sub, {old: new for new, old in enumerate(refs)})
    shape, dtype = result_type(inner, [op.inputs[i] for i in refs])
    out = new_operand(graph, f"{op.outputs[0].name}_cse", shape, dtype)
    new_op = insert_operator(
        graph,
        "pnnx.Expression",
        f"{op.name}_cse",
        [op.inputs[i] for i in refs],
        [out],
        params={"expr": to_text(inner)},
        before=op,
    )
    index = len(op.inputs)
    op.inputs.append(out)
    op.input_names.append("")
    out.consumers.append(op)
    hoisted = {id(n) for n in walk(ast) if ids.get(id(n)) == key}

    def visit(node: Node, kids: list[Node]) -> Node:
        return OperandRef(index) if id(node) in hoisted else copy_node(node, kids)

    ast = rebuild(ast, visit)
    record("added", new_op.name, f"computes {to_text(inner)[:60]} once for {op.name} (was {counts[key]}×)")
    return ast, True
