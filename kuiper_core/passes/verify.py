"""The graph verifier the pass manager runs after every pass, so a broken pass fails
where it breaks instead of three passes later or at run time.

Structure: each operator listed once; each operand produced exactly once and registered in
`graph.operands`; every input produced by an operator earlier in file order (so the
graph is a DAG and the file order an execution order); `consumers` lists one entry per
input slot reading the operand; `$names` one per input; weights hold arrays of their
declared shape and dtype.

Shapes: where the `#` annotations of an operator's operands are known, they must agree
with what the operator does (same-shape ops, conv/linear channels against their weights,
batch norm features, reshape element counts, permutations, concatenation, broadcasting of
elementwise expressions). Unknown dims (`?`, `%sym`) match anything.
"""

from __future__ import annotations

from collections import Counter
from math import prod
from collections.abc import Callable

import numpy as np

from ..errors import ModelError
from ..expression import walk
from ..expression.parser import Call, ListExpr, OperandRef
from ..graph import Graph, Operand, Operator, Shape, format_shape, numpy_dtype
from .expr_tools import expr_of


class GraphVerifyError(ModelError):
    """The graph breaks an invariant; names the operator (and operand) at fault."""


def verify_graph(graph: Graph) -> None:
    """Raise GraphVerifyError on the first broken invariant (see the module docstring)."""
    _check_structure(graph)
    for op in graph.operators:
        _check_weights(op)
        rule = _SHAPE_RULES.get(op.type)
        if rule is None and op.type in SAME_SHAPE_TYPES:
            rule = _same_shape
        if rule is not None:
            problem = rule(op)
            if problem:
                raise GraphVerifyError(f"inconsistent shapes: {problem}", operator=op.name, op_type=op.type)


def _err(message: str, op: Operator | None = None) -> GraphVerifyError:
    return GraphVerifyError(message, operator=op.name if op else None, op_type=op.type if op else None)


def _check_structure(graph: Graph) -> None:
    # Operator names are not required to be unique: pnnx repeats them at optlevel 0.
    position: dict[int, int] = {}
    for i, op in enumerate(graph.operators):
        if id(op) in position:
            raise _err("listed twice in the graph's operators", op)
        position[id(op)] = i
    produced_by: dict[str, Operator] = {}
    reads: Counter[tuple[int, int]] = Counter()  # (operand id, operator id) -> input slots
    for i, op in enumerate(graph.operators):
        if len(op.input_names) != len(op.inputs):
            raise _err(f"{len(op.inputs)} inputs but {len(op.input_names)} input names", op)
        for o in op.outputs:
            if o.name in produced_by:
                raise _err(f"operand '{o.name}' is produced twice (also by '{produced_by[o.name].name}')", op)
            produced_by[o.name] = op
            if o.producer is not op:
                other = o.producer.name if o.producer else "nothing"
                raise _err(f"output '{o.name}' names {other} as its producer", op)
            if graph.operands.get(o.name) is not o:
                raise _err(f"output '{o.name}' is not the graph's operand of that name", op)
        for o in op.inputs:
            reads[(id(o), id(op))] += 1
            if graph.operands.get(o.name) is not o:
                raise _err(f"input '{o.name}' is not the graph's operand of that name", op)
            if o.producer is None or id(o.producer) not in position:
                raise _err(f"input '{o.name}' has no producer in the graph", op)
            if position[id(o.producer)] >= i:
                if _has_cycle(graph):
                    raise _err(f"the graph has a cycle through operand '{o.name}'", op)
                raise _err(
                    f"reads '{o.name}' before '{o.producer.name}' produces it (file order must be an execution order)",
                    op,
                )
    by_operand: dict[int, Counter[int]] = {}
    for (oid, op_id), n in reads.items():
        by_operand.setdefault(oid, Counter())[op_id] = n
    for name, o in graph.operands.items():
        if name not in produced_by:
            raise _err(f"operand '{name}' is in the graph but no operator produces it")
        listed = Counter(id(c) for c in o.consumers)
        if listed != by_operand.get(id(o), Counter()):
            raise _err(
                f"operand '{name}' lists consumers {sorted(c.name for c in o.consumers)} "
                "but other operators read it (or some listed do not)",
                o.producer,
            )


def _has_cycle(graph: Graph) -> bool:
    """Kahn's algorithm: operators left unprocessed sit on a cycle."""
    indegree = {id(op): len({id(o.producer) for o in op.inputs if o.producer is not None}) for op in graph.operators}
    ready = [op for op in graph.operators if indegree[id(op)] == 0]
    done = 0
    while ready:
        op = ready.pop()
        done += 1
        for succ in graph.successors(op):
            indegree[id(succ)] -= 1
            if indegree[id(succ)] == 0:
                ready.append(succ)
    return done != len(graph.operators)


def _check_weights(op: Operator) -> None:
    for key, attr in op.attrs.items():
        if attr.data is None:
            continue
        if tuple(attr.data.shape) != tuple(attr.shape):
            raise _err(
                f"weight '@{key}' declares shape {format_shape(attr.shape)} but holds {format_shape(attr.data.shape)}",
                op,
            )
        if attr.dtype != "bf16" and attr.data.dtype != numpy_dtype(attr.dtype):
            raise _err(f"weight '@{key}' declares {attr.dtype} but holds {attr.data.dtype}", op)


# -- shape rules: each returns a problem description or None --------------------------------
def _static(o: Operand) -> tuple[int, ...] | None:
    return o.static_shape


def _agree(a: Shape | None, b: Shape | None) -> bool:
    """Same rank and equal where both dims are known ints (None shapes agree with anything)."""
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(not (isinstance(x, int) and isinstance(y, int)) or x == y for x, y in zip(a, b))


def _same_shape(op: Operator) -> str | None:
    if not op.inputs or not op.outputs:
        return None
    a, b = op.inputs[0].shape, op.outputs[0].shape
    if not _agree(a, b):
        return f"output '{op.outputs[0].name}' {format_shape(b)} should have the input's shape {format_shape(a)}"
    return None


def _dim(shape: Shape | None, axis: int) -> int | None:
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    d = shape[axis]
    return d if isinstance(d, int) else None


def _weight_shape(op: Operator, key: str) -> tuple[int, ...] | None:
    attr = op.attrs.get(key)
    return tuple(attr.shape) if attr is not None else None


def _conv(op: Operator) -> str | None:
    w = _weight_shape(op, "weight")
    if w is None or not op.inputs or not op.outputs:
        return None
    groups = op.params.get("groups", 1)
    groups = groups if isinstance(groups, int) else 1
    transposed = "Transpose" in op.type
    out_ch = w[1] * groups if transposed else w[0]
    in_ch = w[0] if transposed else w[1] * groups
    # channels are dim 1 of (N, C, *spatial), dim 0 of an unbatched (C, *spatial) input
    axis = 0 if op.inputs[0].shape is not None and len(op.inputs[0].shape) == len(w) - 1 else 1
    c_in, c_out = _dim(op.inputs[0].shape, axis), _dim(op.outputs[0].shape, axis)
    if c_in is not None and c_in != in_ch:
        return f"input has {c_in} channels, the weight {w} (groups={groups}) takes {in_ch}"
    if c_out is not None and c_out != out_ch:
        return f"output has {c_out} channels, the weight {w} (groups={groups}) makes {out_ch}"
    b = _weight_shape(op, "bias")
    if b is not None and b != (out_ch,):
        return f"bias {b} does not match {out_ch} output channels"
    return None


def _linear(op: Operator) -> str | None:
    w = _weight_shape(op, "weight")
    if w is None or len(w) != 2 or not op.inputs or not op.outputs:
        return None
    a, b = op.inputs[0].shape, op.outputs[0].shape
    if _dim(a, -1) not in (None, w[1]):
        return f"input's last dim {_dim(a, -1)} does not match the weight {w}"
    if _dim(b, -1) not in (None, w[0]):
        return f"output's last dim {_dim(b, -1)} does not match the weight {w}"
    if a is not None and b is not None and not _agree(a[:-1], b[:-1]):
        return f"output {format_shape(b)} should keep the input's leading dims {format_shape(a)}"
    bias = _weight_shape(op, "bias")
    if bias is not None and bias != (w[0],):
        return f"bias {bias} does not match {w[0]} output features"
    return None


def _batchnorm(op: Operator) -> str | None:
    problem = _same_shape(op)
    if problem:
        return problem
    mean = _weight_shape(op, "running_mean")
    c = _dim(op.inputs[0].shape, 1) if op.inputs else None
    if mean is not None and c is not None and mean != (c,):
        return f"running_mean {mean} does not match {c} channels"
    return None


def _reshape(op: Operator) -> str | None:
    if not op.inputs or not op.outputs:
        return None
    a, b = _static(op.inputs[0]), _static(op.outputs[0])
    if a is not None and b is not None and prod(a) != prod(b):
        return f"{format_shape(a)} has {prod(a)} elements, the output {format_shape(b)} {prod(b)}"
    shape = op.params.get("shape")
    if isinstance(shape, list) and b is not None and -1 not in shape and tuple(shape) != b:
        return f"shape={format_shape(tuple(shape))} but the output is declared {format_shape(b)}"
    return None


def _permute(op: Operator) -> str | None:
    dims = op.params.get("dims")
    if not isinstance(dims, list) or not op.inputs or not op.outputs:
        return None
    a, b = op.inputs[0].shape, op.outputs[0].shape
    if a is None or b is None:
        return None
    if len(dims) != len(a) or sorted(d % len(a) for d in dims) != list(range(len(a))):
        return f"dims={tuple(dims)} is not a permutation of {len(a)} axes"
    want = tuple(a[d] for d in dims)
    if not _agree(want, b):
        return f"permuting {format_shape(a)} by {tuple(dims)} gives {format_shape(want)}, the output is declared {format_shape(b)}"
    return None


def _cat(op: Operator) -> str | None:
    dim = op.params.get("dim")
    if not isinstance(dim, int) or not op.outputs or op.outputs[0].shape is None:
        return None
    shapes = [o.shape for o in op.inputs if o.shape is not None]
    out = op.outputs[0].shape
    if out is None or len(shapes) != len(op.inputs) or any(len(s) != len(out) for s in shapes):
        return None
    axis = dim % len(out) if out else 0
    for s in shapes:
        rest_a = tuple(d for i, d in enumerate(s) if i != axis)
        rest_b = tuple(d for i, d in enumerate(out) if i != axis)
        if not _agree(rest_a, rest_b):
            return f"input {format_shape(s)} does not fit the output {format_shape(out)} outside dim {dim}"
    sizes = [d for s in shapes if isinstance(d := s[axis], int)]
    total = out[axis]
    if len(sizes) == len(shapes) and isinstance(total, int) and sum(sizes) != total:
        return f"inputs add up to {sum(sizes)} along dim {dim}, the output has {total}"
    return None


def _expression(op: Operator) -> str | None:
    if not op.outputs or op.outputs[0].static_shape is None:
        return None
    if not isinstance(op.params.get("expr"), str):
        return None
    ast = expr_of(op)
    if ast is None:  # the layer reports a malformed expr at build
        return None
    if any(isinstance(n, ListExpr) or (isinstance(n, Call) and n.name in ("size", "int")) for n in walk(ast)):
        return None
    used = sorted({n.index for n in walk(ast) if isinstance(n, OperandRef)})
    declared = [op.inputs[i].static_shape for i in used if i < len(op.inputs)]
    shapes = [s for s in declared if s is not None]
    if len(shapes) != len(declared):
        return None
    try:
        want = np.broadcast_shapes(*shapes) if shapes else ()
    except ValueError:
        return f"input shapes {', '.join(format_shape(s) for s in shapes)} do not broadcast"
    out = op.outputs[0].static_shape
    if tuple(want) != out:
        return (
            f"elementwise inputs broadcast to {format_shape(tuple(want))}, the output is declared {format_shape(out)}"
        )
    return None


def _attribute(op: Operator) -> str | None:
    data = op.attrs.get("data")
    if data is None or not op.outputs:
        return None
    o = op.outputs[0]
    if o.shape is not None and not _agree(tuple(data.shape), o.shape):
        return f"@data {format_shape(data.shape)} but its operand is declared {format_shape(o.shape)}"
    if o.dtype is not None and o.dtype != data.dtype:
        return f"@data is {data.dtype} but its operand is declared {o.dtype}"
    return None


# Operators whose output has the shape of input 0.
SAME_SHAPE_TYPES = frozenset(
    {
        "nn.ReLU",
        "F.relu",
        "nn.ReLU6",
        "F.relu6",
        "nn.LeakyReLU",
        "F.leaky_relu",
        "nn.Sigmoid",
        "F.sigmoid",
        "nn.Tanh",
        "F.tanh",
        "nn.SiLU",
        "F.silu",
        "nn.GELU",
        "F.gelu",
        "nn.Hardswish",
        "F.hardswish",
        "nn.Hardsigmoid",
        "F.hardsigmoid",
        "nn.ELU",
        "F.elu",
        "nn.Mish",
        "F.mish",
        "nn.Softmax",
        "F.softmax",
        "nn.LogSoftmax",
        "F.log_softmax",
        "nn.Hardtanh",
        "F.hardtanh",
        "nn.Dropout",
        "nn.Dropout2d",
        "nn.Dropout3d",
        "nn.AlphaDropout",
        "F.dropout",
        "F.dropoutnd",
        "F.dropout2d",
        "F.dropout3d",
        "nn.LayerNorm",
        "F.layer_norm",
        "nn.GroupNorm",
        "F.group_norm",
        "nn.InstanceNorm1d",
        "nn.InstanceNorm2d",
        "nn.InstanceNorm3d",
        "Tensor.contiguous",
        "torch.clone",
    }
)

_SHAPE_RULES: dict[str, Callable[[Operator], str | None]] = {
    "pnnx.Attribute": _attribute,
    "pnnx.Expression": _expression,
    "nn.BatchNorm1d": _batchnorm,
    "nn.BatchNorm2d": _batchnorm,
    "nn.BatchNorm3d": _batchnorm,
    "nn.Linear": _linear,
    "Tensor.reshape": _reshape,
    "Tensor.view": _reshape,
    "Tensor.permute": _permute,
    "torch.permute": _permute,
    "torch.cat": _cat,
    **{
        t: _conv
        for t in (
            "nn.Conv1d",
            "nn.Conv2d",
            "nn.Conv3d",
            "nn.ConvTranspose1d",
            "nn.ConvTranspose2d",
            "nn.ConvTranspose3d",
        )
    },
}
