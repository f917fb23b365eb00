"""Constants: parameters that arrived as operands, static shapes, constant subgraphs.

FoldConstantParams (O1)  pnnx's fuse_constant_expression: `torch.flatten $start_dim=38`
                         where 38 is `pnnx.Expression expr=1` becomes `start_dim=1`.
FoldStaticShapes (O2)    pnnx's eval_expression + eliminate_reshape_shape_expression:
                         `size(@0,2)` of an operand whose shape is static becomes its value;
                         a reshape/view/expand whose shape is computed takes its declared
                         output shape instead. Bakes the exported shape in, as pnnx does,
                         except that a reshape computed as `[size(@k,0), …]` keeps `-1` for
                         the batch, so the model still runs at another batch size.
FoldConstants (O2)       operators whose inputs are all constant are computed once (with the
                         engine's own layers) and become one `pnnx.Attribute` (or a literal
                         expression for scalars and lists); constant parts of expressions
                         (literal arithmetic, subtrees over weights) are folded too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import limits
from ..expression import evaluate, to_text, walk
from ..expression.parser import Call, Constant, ListExpr, Node, OperandRef
from ..graph import Graph, Operand, Operator, format_shape, numpy_dtype
from ..runtime.binding import UNPACKERS, is_value
from .batch_probe import fixed_dims, shapes_at_batch2
from .expr_tools import (
    constant_param,
    copy_node,
    expr_of,
    fold_constant_calls,
    rebuild,
    set_expr_dropping_unused,
    substitute,
)
from .manager import graph_pass, record
from .op_kinds import IO_TYPES, RESHAPE_TYPES, is_pure
from .rewrite import add_input, add_weight, attribute_of, remove_input, remove_operator, replace_all_uses

# A folded tensor larger than this stays computed at run time (it would bloat the .bin).
MAX_FOLDED_ELEMENTS = 1 << 24
_MISSING = object()


# -- FoldConstantParams --------------------------------------------------------------------------
@graph_pass("FoldConstantParams", 1, description="literal operands ($dim=, $shape=…) become operator parameters")
def fold_constant_params(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for producer in list(graph.operators):
        ok, value = constant_param(producer)
        if not ok:
            ok, value = string_literal(producer)
        if not ok:
            continue
        out = producer.outputs[0]
        for op in list(dict.fromkeys(out.consumers)):
            if op.type in IO_TYPES or op.type == "pnnx.Expression":
                continue
            for i, key in reversed(_param_slots(op, out)):
                op.params[key] = value
                remove_input(op, i)
                record("folded", op.name, f"{key}={_short(value)} (from operand {out.name})")
                changed = True
        if not out.consumers:
            remove_operator(graph, producer)
            record("removed", producer.name, f"literal {_short(value)} now a parameter")
            changed = True  # (also a literal nobody read: the graph changed all the same)
    return graph, changed


def _param_slots(op: Operator, operand: Operand) -> list[tuple[int, str]]:
    """(slot, param name) of every slot of `op` where the literal `operand` is a parameter
    (runtime/binding.py's rule): a `$key` slot, or a positional slot of a TorchScript op
    that the layer names with `arg_names` (`aten::meshgrid tensors indexing`). A positional
    slot is folded only when every value slot after it goes too, so the values left keep
    their positional names (a tensor is an input wherever it stands); `$input`/`$self` stay
    inputs even when they are numbers (a layer reads them as its first input), and so do the
    layer's `value_inputs` (index lists)."""
    from ..layers.registry import layer_class

    cls = layer_class(op.type)
    arg_names = cls.arg_names if cls is not None else None
    value_inputs = cls.value_inputs if cls is not None else ()
    slots: list[tuple[int, str]] = []
    trailing = True  # every later positional value slot is folded
    for i in reversed(range(len(op.inputs))):
        named = op.input_name(i)
        key = named or (arg_names[i] if arg_names is not None and i < len(arg_names) else "")
        foldable = (
            op.inputs[i] is operand
            and key not in ("", "input", "self")
            and key not in value_inputs
            and key not in op.params
            and (named != "" or trailing)
        )
        if foldable:
            slots.append((i, key))
        elif named == "" and is_value(op.inputs[i]):
            trailing = False  # (a tensor stays an input at any position: it does not block)
    return sorted(slots)


def string_literal(op: Operator) -> tuple[bool, str | None]:
    """(True, text) for a string constant: pnnx writes torch.einsum's equation, meshgrid's
    indexing or a padding mode at optlevel 1 as `pnnx.Expression expr=ij,jk->ik` /
    `expr=ij` — no inputs, an unannotated output, text that is no expression (the
    runtime's pnnx.Expression reads it the same way)."""
    expr = op.params.get("expr")
    if op.type != "pnnx.Expression" or op.inputs or len(op.outputs) != 1 or not isinstance(expr, str):
        return False, None
    if op.outputs[0].shape is not None or expr_of(op) is not None:
        return False, None
    return True, expr


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value) if not isinstance(value, list) else "(" + ",".join(map(str, value)) + ")"
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- FoldStaticShapes -----------------------------------------------------------------------------
def static_export(graph: Graph) -> bool:
    """Every graph input has a fully known shape: the export was static, so every int dim
    of a `#` annotation is the dim at run time (pnnx folds the same)."""
    return all(op.outputs and op.outputs[0].static_shape is not None for op in graph.inputs)


def _trusted_dim(graph: Graph, operand: Operand, dim: int, static: bool, loose: frozenset[str]) -> int | None:
    shape = operand.shape
    if shape is None or not -len(shape) <= dim < len(shape) or operand.name in loose:
        return None  # `loose`: a size that follows the values, annotated from pnnx's dummy data
    d = shape[dim]
    if not isinstance(d, int):
        return None
    producer = operand.producer.type if operand.producer else ""
    if producer == "pnnx.Attribute":
        return d
    if producer == "pnnx.Input" and dim % len(shape) != 0:
        return d
    # In a dynamic export only inputs and weights have dims that cannot vary (pnnx's rule); in a
    # static one, a dim that follows the batch (batch_probe.py) is no constant either.
    fixed = fixed_dims(graph, operand) if static else None
    return d if fixed is not None and fixed[dim] else None


def _fold_sizes(graph: Graph, op: Operator, static: bool, loose: frozenset[str]) -> bool:
    ast = expr_of(op)
    if ast is None:
        return False
    replaced = 0

    def visit(node: Node, kids: list[Node]) -> Node:
        nonlocal replaced
        new = copy_node(node, kids)
        if isinstance(new, Call) and new.name == "size" and isinstance(new.args[0], OperandRef):
            operand = op.inputs[new.args[0].index] if new.args[0].index < len(op.inputs) else None
            if operand is None:
                return new
            if len(new.args) == 2 and isinstance(new.args[1], Constant) and isinstance(new.args[1].value, int):
                d = _trusted_dim(graph, operand, new.args[1].value, static, loose)
                if d is not None:
                    replaced += 1
                    return Constant(d)
            elif len(new.args) == 1 and operand.shape is not None:
                dims = [_trusted_dim(graph, operand, i, static, loose) for i in range(len(operand.shape))]
                if all(d is not None for d in dims):
                    replaced += 1
                    return ListExpr([Constant(d) for d in dims])
        if isinstance(new, Call) and new.name == "int" and isinstance(new.args[0], Constant):
            if isinstance(new.args[0].value, int) and not isinstance(new.args[0].value, bool):
                return new.args[0]
        return new

    new_ast = rebuild(ast, visit)
    if not replaced:
        return False
    new_ast, _ = fold_constant_calls(new_ast)
    set_expr_dropping_unused(op, new_ast)
    record("folded", op.name, f"{replaced} static size(…) → expr={_short(to_text(new_ast), 60)}")
    return True


_SHAPE_PARAM = {"Tensor.reshape": "shape", "Tensor.view": "shape", "Tensor.expand": "sizes"}


def _static_shape_param(graph: Graph, op: Operator, loose: frozenset[str]) -> bool:
    """reshape/view/expand whose shape is an operand: use the declared output shape."""
    key = _SHAPE_PARAM.get(op.type)
    if key is None or key in op.params or not op.outputs or op.outputs[0].shape is None or op.outputs[0].name in loose:
        return False
    slots = [i for i in range(len(op.inputs)) if op.input_name(i) == key]
    if len(slots) != 1:
        return False
    out = op.outputs[0]
    assert out.shape is not None
    fixed = fixed_dims(graph, out) or [False] * len(out.shape)
    # a dim that follows the batch is no constant: reshape infers it (one -1), expand keeps
    # the input's dim (-1) where that is the same symbol, else it cannot be baked in
    dims = [d if isinstance(d, int) and ok else -1 for d, ok in zip(out.shape, fixed)]
    if op.type in RESHAPE_TYPES:
        if dims.count(-1) > 1:
            return False
    elif -1 in dims and not _kept_from_input(graph, op, dims):
        return False
    source = op.inputs[slots[0]]
    if op.type in RESHAPE_TYPES and dims and -1 not in dims and _batch_first(source):
        dims[0] = -1  # the batch follows the input, as the computed shape did
    remove_input(op, slots[0])
    op.params[key] = dims
    record("folded", op.name, f"{key}={_short(dims)} from the declared output shape (was operand {source.name})")
    return True


def _kept_from_input(graph: Graph, op: Operator, dims: list[int]) -> bool:
    """Every -1 of an expand's sizes keeps an input dim that is the output's, as a symbol."""
    source, out = op.inputs[0], op.outputs[0]
    if source.shape is None or out.shape is None or len(source.shape) > len(out.shape):
        return False
    offset = len(out.shape) - len(source.shape)
    fixed_in, probe = fixed_dims(graph, source), shapes_at_batch2(graph)
    for i in (i for i, d in enumerate(dims) if d == -1):
        j = i - offset
        if j < 0 or not isinstance(source.shape[j], int) or source.shape[j] != out.shape[i]:
            return False
        if probe is not None:
            a, b = probe.get(source.name), probe.get(out.name)
            if a is None or b is None or len(a) != len(source.shape) or a[j] != b[i]:
                return False
        elif fixed_in is None:
            return False
    return True


def _batch_first(shape_operand: Operand) -> bool:
    """The computed shape is `[size(@k,0), …]` with no other item reading a dim 0: a
    reshape that keeps the batch, whatever it is, and fixes the other dims."""
    producer = shape_operand.producer
    if producer is None or producer.type != "pnnx.Expression":
        return False
    ast = expr_of(producer)
    if not isinstance(ast, ListExpr) or not ast.items:
        return False

    def is_dim0(n: Node) -> bool:
        return (
            isinstance(n, Call)
            and n.name == "size"
            and len(n.args) == 2
            and isinstance(n.args[1], Constant)
            and n.args[1].value == 0
        )

    first = ast.items[0]
    if isinstance(first, Call) and first.name == "int" and first.args:
        first = first.args[0]
    return is_dim0(first) and not any(is_dim0(n) for item in ast.items[1:] for n in walk(item))


def _static_size_op(graph: Graph, op: Operator, static: bool, loose: frozenset[str]) -> bool:
    """optlevel 0's `Tensor.size dim=2` of a dim that cannot vary becomes the literal
    (`pnnx.Expression expr=4`), as optlevel 1's `size(@0,2)` does in an expression."""
    if op.type != "Tensor.size" or len(op.inputs) != 1 or len(op.outputs) != 1 or op.outputs[0].shape is not None:
        return False
    operand, dim = op.inputs[0], op.params.get("dim")
    if operand.shape is None or (dim is not None and (isinstance(dim, bool) or not isinstance(dim, int))):
        return False
    dims = [
        _trusted_dim(graph, operand, d, static, loose) for d in (range(len(operand.shape)) if dim is None else [dim])
    ]
    if any(d is None for d in dims):
        return False
    literal = to_text(Constant(dims[0]) if dim is not None else ListExpr([Constant(d) for d in dims]))
    _become_literal(op, literal)
    record("folded", op.name, f"size of {operand.name} → expr={_short(literal, 60)}")
    return True


def _become_literal(op: Operator, text: str) -> None:
    """`op` (same name, same output operand) becomes `pnnx.Expression expr=text`, no inputs."""
    for i in reversed(range(len(op.inputs))):
        remove_input(op, i)
    op.type, op.params, op.input_names, op.attrs = "pnnx.Expression", {"expr": text}, [], {}


@graph_pass("FoldStaticShapes", 2, description="static size(…) values and reshape shapes baked in, as pnnx does")
def fold_static_shapes(graph: Graph) -> tuple[Graph, bool]:
    from ..layers.registry import value_shaped_operands

    static = static_export(graph)
    loose = value_shaped_operands(graph.operators)
    changed = False
    # Shapes first (they read the expressions that compute them), then sizes in expressions.
    for op in list(graph.operators):
        if op.type in _SHAPE_PARAM:
            changed |= _static_shape_param(graph, op, loose)
        elif op.type == "Tensor.size":
            changed |= _static_size_op(graph, op, static, loose)
    for op in list(graph.operators):
        if op.type == "pnnx.Expression" and op.inputs:
            changed |= _fold_sizes(graph, op, static, loose)
    changed |= _remove_dead(graph, [op for op in graph.operators if op.type == "pnnx.Expression"])
    return graph, changed


def _remove_dead(graph: Graph, candidates: list[Operator]) -> bool:
    """Remove candidates nobody reads, then the pure feeders that leaves unread."""
    present = {id(op) for op in graph.operators}
    removed = False
    todo = list(candidates)
    while todo:
        op = todo.pop()
        if id(op) not in present or op.type in IO_TYPES or not is_pure(op) or not op.outputs:
            continue
        if any(o.consumers for o in op.outputs):
            continue
        feeders = [o.producer for o in op.inputs if o.producer is not None]
        remove_operator(graph, op)
        present.discard(id(op))
        record("removed", op.name, "no longer used")
        removed = True
        todo.extend(feeders)
    return removed


# -- FoldConstants ----------------------------------------------------------------------------------
def _evaluate(op: Operator, args: list[Any], extra: dict[str, Any] | None = None) -> list[Any]:
    """The outputs of `op` for constant inputs: expressions by the evaluator (scalars stay
    Python values, lists lists), everything else by the engine's layer. `extra`: values of
    the operands the layer also reads (`Layer.extra_inputs`: a Tensor.copy's base)."""
    if op.type == "pnnx.Expression":
        ast = expr_of(op)
        if ast is None:
            raise ValueError("expr does not parse")
        return [evaluate(ast, args)]
    from ..layers.registry import create_layer, layer_class
    from ..runtime.binding import bind, bound_operator, to_param

    # As the runtime does: TorchScript's positional parameters (aten::triu's diagonal) and
    # named value operands become params, the rest inputs (see runtime/binding.py).
    b = bind(op, layer_class(op.type))
    value = {**(extra or {}), **{o.name: a for o, a in zip(op.inputs, args)}}
    layer = create_layer(bound_operator(b, {k: to_param(value[o.name]) for k, o in b.params.items()}))
    # Any, as the runtime's values: a list operand (TorchScript's Tensor[]) reaches the layer as a list
    arrays: list[Any] = [
        a if isinstance(a, (np.ndarray, list)) else np.asarray(a) for a in (value[o.name] for o in b.inputs)
    ]
    outs = list(layer.forward(arrays, [None] * len(b.outputs)))
    # A TorchScript op returning several tensors (aten::meshgrid) writes one list operand
    # that a prim::ListUnpack splits: its value is that list.
    return [outs] if b.packed else outs


_CONSTRUCTS = ("prim::ListConstruct",)  # (a TupleConstruct is how a model returns several outputs)


def _unpacked(op: Operator, values: dict[str, Any]) -> list[Any] | None:
    """The items of a constant list/tuple a prim::ListUnpack/TupleUnpack splits."""
    if op.type not in UNPACKERS or len(op.inputs) != 1:
        return None
    items = values.get(op.inputs[0].name)
    return list(items) if isinstance(items, (list, tuple)) and len(items) == len(op.outputs) else None


def _fits(operand: Operand, value: Any) -> bool:
    """A computed tensor may replace `operand` only with its declared shape and dtype."""
    if not isinstance(value, np.ndarray) or value.size > MAX_FOLDED_ELEMENTS:
        return False
    if operand.dtype is None or operand.dtype == "bf16" or value.dtype != numpy_dtype(operand.dtype):
        return False
    shape = operand.shape
    if shape is None or len(shape) != value.ndim:
        return False
    return all(not isinstance(d, int) or d == n for d, n in zip(shape, value.shape))


def _literal_node(value: Any) -> Node | None:
    """A literal for a scalar or a flat list of numbers (shape arithmetic results)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float)):
        return Constant(value)
    if isinstance(value, (list, tuple)):
        items = [v.item() if isinstance(v, np.generic) else v for v in value]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            return ListExpr([Constant(v) for v in items])
    return None


# Their output depends on the input's dtype (and for *_like its shape), never its values.
_SHAPE_ONLY = frozenset({"Tensor.new_zeros", "Tensor.new_ones", "Tensor.new_full"})
_LIKE = frozenset(
    {"torch.zeros_like", "torch.ones_like", "torch.full_like", "Tensor.fill", "aten::_shape_as_tensor"}
)  # (Tensor.fill: of torch.empty((), …), torchvision's anchor strides at optlevel 0)


def _stand_in(graph: Graph, op: Operator, static: bool, loose: frozenset[str]) -> np.ndarray | None:
    """For a computed input of a new_*/*_like operator: an array with what the operator reads
    of it (its dtype; for *_like its shape too, when that cannot vary), else None. Swin's
    shifted-window mask starts as `x.new_zeros((H, W))` of the activations."""
    x = op.inputs[0]
    if op.type not in _SHAPE_ONLY | _LIKE or x.dtype is None or x.dtype == "bf16":
        return None
    if op.type in _SHAPE_ONLY:
        return np.zeros((), numpy_dtype(x.dtype))
    if x.shape is None:
        return None
    dims = [_trusted_dim(graph, x, i, static, loose) for i in range(len(x.shape))]
    known = [d for d in dims if d is not None]
    return np.zeros(known, numpy_dtype(x.dtype)) if len(known) == len(dims) else None


def _constant_values(graph: Graph) -> tuple[dict[str, Any], list[Operator]]:
    """Values of every constant operand, and the operators computed from constants only."""
    from ..layers.registry import layer_class, value_shaped_operands

    static, loose = static_export(graph), value_shaped_operands(graph.operators)
    values: dict[str, Any] = {}
    computed: list[Operator] = []
    budget = limits.Budget("max_folded_bytes", "the values FoldConstants computes (they depend only on weights)")
    for op in graph.operators:
        if op.type == "pnnx.Attribute":
            attr = op.attrs.get("data")
            if attr is not None and attr.data is not None and len(op.outputs) == 1:
                values[op.outputs[0].name] = attr.data
            continue
        ok, value = constant_param(op)
        if not ok:
            ok, value = string_literal(op)
        if ok:
            values[op.outputs[0].name] = value
            continue
        items = _unpacked(op, values)
        if items is not None:
            values.update((o.name, v) for o, v in zip(op.outputs, items))
            computed.append(op)
            continue
        if op.type in _CONSTRUCTS and len(op.outputs) == 1 and all(o.name in values for o in op.inputs):
            values[op.outputs[0].name] = [values[o.name] for o in op.inputs]  # (tensors: optlevel 0's meshgrid input)
            computed.append(op)
            continue
        # prim:: ops pack and unpack (above); NumToTensor only passes a number on
        if not is_pure(op) or (op.type.startswith("prim::") and op.type != "prim::NumToTensor") or not op.outputs:
            continue
        args = [values.get(o.name, _MISSING) for o in op.inputs]
        if args and args[0] is _MISSING:
            stand_in = _stand_in(graph, op, static, loose)
            args[0] = _MISSING if stand_in is None else stand_in
        if any(a is _MISSING for a in args):
            continue
        cls = layer_class(op.type)
        extra = cls.extra_inputs(op) if cls is not None else {}
        if any(o.name not in values for o in extra.values()):
            continue
        try:
            outs = _evaluate(op, args, {o.name: values[o.name] for o in extra.values()})
        except Exception as e:  # no layer, or params still operands: keep it computed
            record("kept", op.name, f"constant but not computable now ({type(e).__name__}: {str(e)[:80]})")
            continue
        budget.add(outs, op.name, op.type)  # all are kept until the pass ends: a 1.4 KB model folded 2 GB
        for o, v in zip(op.outputs, outs):
            # an unannotated output is a TorchScript number: a Python scalar, whose type
            # never promotes a tensor's (a 0-d float64 array would make f32 arithmetic f64)
            values[o.name] = (
                v.item() if o.shape is None and isinstance(v, (np.ndarray, np.generic)) and np.ndim(v) == 0 else v
            )
        computed.append(op)
    return values, computed


def _materialise(graph: Graph, op: Operator, values: dict[str, Any], computed_ids: set[int]) -> bool:
    """Replace the outputs of a computed constant operator that non-constant operators read:
    a tensor becomes a pnnx.Attribute, a scalar or list (shape arithmetic) a literal."""
    changed = False
    for o in op.outputs:
        if all(id(c) in computed_ids for c in o.consumers):
            continue
        value = values[o.name]
        if not isinstance(value, np.ndarray):
            # a number or list of numbers (shape arithmetic: an expression, or optlevel 0's
            # aten::floor_divide / aten::Int / prim::NumToTensor of sizes)
            node = _literal_node(value)
            if node is None or len(op.outputs) != 1 or (o.shape is not None and op.type != "pnnx.Expression"):
                continue
            if o.shape and not isinstance(value, list):  # a literal is 0-d: not what a (1)-shaped operand holds
                continue
            what = "expression" if op.type == "pnnx.Expression" else op.type
            _become_literal(op, to_text(node))
            record("folded", op.name, f"constant {what} → literal {_short(to_text(node), 60)}")
            return True
        if not _fits(o, value):
            record(
                "kept",
                op.name,
                f"computed {format_shape(value.shape, str(value.dtype))} does not match the declared "
                f"{format_shape(o.shape, o.dtype)}",
            )
            continue
        if len(op.outputs) == 1:
            # The operator itself becomes the weight: same name, same operand.
            for i in reversed(range(len(op.inputs))):
                remove_input(op, i)
            op.type, op.params, op.input_names = "pnnx.Attribute", {}, []
            op.attrs = {"data": attribute_of(value)}
            record("folded", op.name, f"constant subgraph → pnnx.Attribute {format_shape(value.shape, o.dtype)}")
            return True
        new = add_weight(graph, value, f"{op.name}_{o.name}", before=op)
        new.shape, new.dtype = o.shape, o.dtype
        replace_all_uses(o, new)
        record("folded", op.name, f"output {o.name} → pnnx.Attribute {new.producer.name if new.producer else ''}")
        changed = True
    return changed


def _fold_expression_parts(op: Operator, values: dict[str, Any], graph: Graph) -> bool:
    """Inside one expression: inline literal inputs, fold literal arithmetic, and
    precompute subtrees that read only constant tensors into a new weight."""
    ast = expr_of(op)
    if ast is None:
        return False
    text_before = to_text(ast)
    # 1. literal inputs (`@1` fed by `expr=2.0`) become literals
    literal_inputs: dict[int, Node | int] = {}
    for i, o in enumerate(op.inputs):
        v = values.get(o.name)
        if (
            o.producer is not None
            and constant_param(o.producer)[0]
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
        ):
            literal_inputs[i] = Constant(v)
    if literal_inputs:
        ast = substitute(ast, literal_inputs)
    ast, _ = fold_constant_calls(ast)
    # 2. subtrees over constant tensors only (with some arithmetic) → a new weight
    const_inputs = {i for i, o in enumerate(op.inputs) if isinstance(values.get(o.name), np.ndarray)}
    new_inputs: list[Operand] = []
    if const_inputs and len(const_inputs) < len(op.inputs):
        ast = _hoist_constant_subtrees(op, ast, const_inputs, values, graph, new_inputs)
    if to_text(ast) == text_before and not new_inputs:
        return False
    for operand in new_inputs:
        add_input(op, operand)
    set_expr_dropping_unused(op, ast)
    record("folded", op.name, f"expr {_short(text_before, 50)} → {_short(op.params['expr'], 50)}")
    return True


def _hoist_constant_subtrees(
    op: Operator, ast: Node, const_inputs: set[int], values: dict[str, Any], graph: Graph, new_inputs: list[Operand]
) -> Node:
    # constness of every node, bottom-up
    const: dict[int, bool] = {}

    def mark(node: Node, kids: list[Node]) -> Node:
        new = copy_node(node, kids)
        if isinstance(new, OperandRef):
            const[id(new)] = new.index in const_inputs
        elif isinstance(new, Constant):
            const[id(new)] = True
        else:
            const[id(new)] = all(const[id(k)] for k in kids) and not (isinstance(new, Call) and new.name == "size")
        return new

    ast = rebuild(ast, mark)

    def worth(node: Node) -> bool:
        return isinstance(node, Call) and any(isinstance(n, OperandRef) for n in walk(node))

    def hoist(node: Node) -> Node:
        refs = sorted({n.index for n in walk(node) if isinstance(n, OperandRef)})
        sub = substitute(node, {old: new for new, old in enumerate(refs)})
        value = evaluate(sub, [values[op.inputs[i].name] for i in refs])
        if not isinstance(value, np.ndarray) or value.size > MAX_FOLDED_ELEMENTS:
            return node
        operand = add_weight(graph, value, f"{op.name}_const", before=op)
        new_inputs.append(operand)
        return OperandRef(len(op.inputs) + len(new_inputs) - 1)

    if const.get(id(ast)):
        return ast  # the whole expression is constant: FoldConstants' operator path handles it
    stack: list[Node] = [ast]
    while stack:
        node = stack.pop()
        kids = node.args if isinstance(node, Call) else node.items if isinstance(node, ListExpr) else []
        for j, k in enumerate(kids):
            if const.get(id(k)) and worth(k):
                kids[j] = hoist(k)
            else:
                stack.append(k)
    return ast


# An index list longer than this stays an operand (its text would swamp the .param line).
MAX_INDEX_TEXT_ELEMENTS = 1024


def _index_list_text(value: Any) -> str | None:
    """pnnx's optlevel-2 text for a constant index list (`[None,[0,2]]`): None or integer
    / bool index tensors, else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    items: list[str] = []
    total = 0
    for v in value:
        if v is None:
            items.append("None")
            continue
        a = np.asarray(v)
        if a.dtype.kind not in "iub" or a.ndim == 0:
            return None
        total += a.size
        items.append(repr(a.tolist()).replace(" ", ""))
    return "[" + ",".join(items) + "]" if total <= MAX_INDEX_TEXT_ELEMENTS else None


def _fold_value_inputs(op: Operator, values: dict[str, Any]) -> bool:
    """A constant index list read as a value input (Tensor.index's `$expr` made by
    `pnnx.Expression expr=[None,@0]` of a constant tensor) becomes the operator's text
    parameter, as pnnx's optlevel 2 writes it: `Tensor.index expr=[None,[0,2]]`."""
    from ..layers.registry import layer_class

    cls = layer_class(op.type)
    if cls is None or not cls.value_inputs:
        return False
    changed = False
    for i in reversed(range(len(op.inputs))):
        key = op.input_name(i)
        text = _index_list_text(values.get(op.inputs[i].name)) if key in cls.value_inputs else None
        if text is None or key in op.params:
            continue
        source = remove_input(op, i)
        op.params[key] = text
        record("folded", op.name, f"{key}={_short(text, 60)} (constant index list {source.name})")
        changed = True
    return changed


@graph_pass(
    "FoldConstants",
    2,
    required=("FoldConstantParams",),
    description="constant subgraphs computed once into pnnx.Attribute; constant parts of expressions folded",
)
def fold_constants(graph: Graph) -> tuple[Graph, bool]:
    values, computed = _constant_values(graph)
    computed_ids = {id(op) for op in computed}
    changed = False
    candidates: list[Operator] = list(computed)
    for op in list(graph.operators):
        if id(op) not in computed_ids and op.inputs:
            changed |= _fold_value_inputs(op, values)
    for op in computed:
        changed |= _materialise(graph, op, values, computed_ids)
    for op in list(graph.operators):
        if op.type == "pnnx.Expression" and op.inputs and id(op) not in computed_ids:
            feeders = [o.producer for o in op.inputs if o.producer is not None]
            if _fold_expression_parts(op, values, graph):
                changed = True
                candidates += feeders
    changed |= _remove_dead(graph, candidates)
    return graph, changed
