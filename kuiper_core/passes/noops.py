"""RemoveNoOps: operators that return their input unchanged, and pairs that cancel.

Removed (readers read the input instead): Dropout and Identity (inference), a reshape or
other view-like op whose output has the input's shape and dtype as symbols (equal at the
traced batch and at batch 2, batch_probe.py: an expand_as to a batch-sized operand is no
no-op though the shapes agree at batch 1), a full slice (of a dim that does not follow the batch), a
one-input cat, a ×1 upsample, a zero pad, an expression that is `@0`, `x*1`, `x/1`,
`x-0.0`, `x+(-0.0)` (when dtype and shape stay; `x+0.0` is not `x`: it turns -0.0 into +0.0),
`x+0` and `x-0` on integers. Rewired: a reshape of a reshape reads the first
one's input; a permute (or transpose) of a permute reads the first one's input with the
composed order, and disappears when the two cancel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..expression.parser import Call, Constant, OperandRef
from ..graph import Graph, Operand, Operator
from .batch_probe import fixed_dims, same_symbolic_shape
from .expr_tools import expr_of
from .manager import graph_pass, record
from .op_kinds import DROPOUT_TYPES, PERMUTE_TYPES, RESHAPE_TYPES
from .rewrite import bypass, remove_operator, set_input

INT_MAX = 2**31 - 1  # what pnnx writes for an open-ended slice end (`x[1:]`)

# Ops that, when the output has exactly the input's shape and dtype, are the identity.
_VIEW_LIKE = frozenset(
    {
        "Tensor.reshape",
        "Tensor.view",
        "torch.reshape",
        "torch.flatten",
        "torch.squeeze",
        "torch.unsqueeze",
        "Tensor.expand",
        "Tensor.expand_as",
        "Tensor.reshape_as",
        "Tensor.repeat",
        "torch.tile",
        "Tensor.contiguous",
        "torch.clone",
        "Tensor.clone",
        "Tensor.to",
        "Tensor.type_as",
        "Tensor.slice",
        "torch.narrow",  # (not torch.roll: same shape, entries moved)
    }
)
_RESIZE_TYPES = frozenset(
    {
        "nn.Upsample",
        "F.interpolate",
        "F.upsample",
        "F.upsample_nearest",
        "nn.UpsamplingNearest2d",
        "nn.UpsamplingBilinear2d",
    }
)
_PAD_TYPES = frozenset(  # the pad modules pnnx keeps (it writes the others as F.pad)
    {"F.pad", "nn.ZeroPad2d", "nn.ReflectionPad1d", "nn.ReflectionPad2d"}
    | {f"nn.{k}Pad{d}d" for k in ("Constant", "Replication") for d in (1, 2, 3)}
)
# Views of contiguous data whose element order is row-major: a reshape after them can
# read their input directly.
_RESHAPE_LIKE = RESHAPE_TYPES | {
    "torch.reshape",
    "torch.flatten",
    "torch.squeeze",
    "torch.unsqueeze",
    "Tensor.unflatten",
}


def _same_shape_and_dtype(a: Operand, b: Operand) -> bool:
    sa, sb = a.static_shape, b.static_shape
    return sa is not None and sa == sb and a.dtype is not None and a.dtype == b.dtype


def _why_noop(graph: Graph, op: Operator) -> str | None:
    """Why `op` returns input 0 unchanged at every batch (None if it does not, or we cannot
    tell). Shapes count as equal only as symbols (batch_probe.py): equal at the traced batch
    and at batch 2, so an expand_as to a batch-sized operand stays."""
    if len(op.outputs) != 1 or not op.inputs:
        return None
    t, p = op.type, op.params
    if t in DROPOUT_TYPES:
        if p.get("training") is True or "training" in op.input_names:  # True, or only known at run time
            return None
        return "dropout does nothing at inference"
    if t == "torch.cat" and len(op.inputs) == 1 and _same_symbolic(graph, op.inputs[0], op.outputs[0]):
        return "cat of one input"  # (at optlevel 0 the one input is a list of tensors: shapes differ)
    if t in _PAD_TYPES:
        pads = p.get("pad", p.get("padding"))
        pads = [pads] if isinstance(pads, int) else pads
        if isinstance(pads, list) and pads and all(v == 0 for v in pads):
            return "zero padding"
        return None
    if t in _RESIZE_TYPES:
        scale = p.get("scale_factor")
        scales = scale if isinstance(scale, list) else [scale]
        if scale is not None and all(isinstance(s, (int, float)) and float(s) == 1.0 for s in scales):
            return "×1 upsample"
        if _same_symbolic(graph, op.inputs[0], op.outputs[0]):
            return "resize to the same size"
        return None
    if t == "Tensor.slice" and _full_slice(graph, op):
        return "full slice"
    if t in _VIEW_LIKE and _same_symbolic(graph, op.inputs[0], op.outputs[0]):
        return f"output has the input's shape {op.outputs[0].static_shape}"
    if t == "pnnx.Expression" and len(op.inputs) == 1:
        return _noop_expression(op)
    return None


def _same_symbolic(graph: Graph, a: Operand, b: Operand) -> bool:
    return _same_shape_and_dtype(a, b) and same_symbolic_shape(graph, a, b)


def _full_slice(graph: Graph, op: Operator) -> bool:
    if len(op.inputs) != 1:  # a bound given as an operand ($end=…) is only known at run time
        return False
    p = op.params
    start, end, step, dim = p.get("start", 0), p.get("end"), p.get("step", 1), p.get("dim")
    if start not in (0, None) or step not in (1, None) or not isinstance(dim, int):
        return False
    if end is None or (isinstance(end, int) and end >= INT_MAX):
        return True
    shape = op.inputs[0].shape
    size = shape[dim] if shape is not None and -len(shape) <= dim < len(shape) else None
    fixed = fixed_dims(graph, op.inputs[0])  # `end` = the traced size cuts a dim that grows with the batch
    return isinstance(end, int) and isinstance(size, int) and end >= size and fixed is not None and fixed[dim]


_NEUTRAL = {"mul": 1, "div": 1, "add": 0, "sub": 0, "pow": 1}


def _neutral(name: str, value: object, floating: bool) -> bool:
    """`@0 <name> value` is `@0` for every value of @0, IEEE signed zero included: x + 0.0
    turns -0.0 into +0.0 (so 1/x flips from -inf to +inf), x + (-0.0) and x - 0.0 do not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != _NEUTRAL[name]:
        return False
    if name in ("add", "sub") and floating:
        negative = math.copysign(1.0, value) < 0
        return negative if name == "add" else not negative
    return True


def _noop_expression(op: Operator) -> str | None:
    ast = expr_of(op)
    if ast is None or not _same_shape_and_dtype(op.inputs[0], op.outputs[0]):
        return None
    if isinstance(ast, OperandRef) and ast.index == 0:
        return "expression @0"
    if isinstance(ast, Call) and ast.name in _NEUTRAL and len(ast.args) == 2:
        a, b = ast.args
        floating = op.inputs[0].dtype not in _INTEGER_DTYPES
        if isinstance(a, OperandRef) and isinstance(b, Constant) and _neutral(ast.name, b.value, floating):
            return f"expression {ast.name}(@0,{b.text})"
        if ast.name in ("mul", "add") and isinstance(b, OperandRef) and isinstance(a, Constant):
            if _neutral(ast.name, a.value, floating):
                return f"expression {ast.name}({a.text},@0)"
    return None


_INTEGER_DTYPES = frozenset({"i8", "i16", "i32", "i64", "u8", "bool"})


# -- pairs -------------------------------------------------------------------------------------
def _perm_of(op: Operator) -> list[int] | None:
    """The axis order a permute/transpose applies (None if unknown)."""
    shape = op.inputs[0].shape if op.inputs else None
    if shape is None:
        return None
    rank = len(shape)
    if op.type in PERMUTE_TYPES:
        dims = op.params.get("dims")
        if isinstance(dims, list) and len(dims) == rank and all(isinstance(d, int) for d in dims):
            return [d % rank for d in dims]
        return None
    if op.type == "torch.transpose":
        a, b = op.params.get("dim0"), op.params.get("dim1")
        if isinstance(a, int) and isinstance(b, int) and rank:
            perm = list(range(rank))
            perm[a % rank], perm[b % rank] = perm[b % rank], perm[a % rank]
            return perm
    return None


def _fold_permute_pair(graph: Graph, op: Operator) -> bool:
    if op.type not in PERMUTE_TYPES | {"torch.transpose"} or len(op.inputs) != 1:
        return False
    first = op.inputs[0].producer
    if first is None or first.type not in PERMUTE_TYPES | {"torch.transpose"} or len(first.inputs) != 1:
        return False
    p1, p2 = _perm_of(first), _perm_of(op)
    if p1 is None or p2 is None:
        return False
    composed = [p1[i] for i in p2]
    source = first.inputs[0]
    if composed == list(range(len(composed))):
        bypass(graph, op, source)
        record("removed", op.name, f"cancels {first.name} (orders {tuple(p1)} then {tuple(p2)})")
    else:
        set_input(op, 0, source)
        op.type, op.params = "Tensor.permute", {"dims": composed}
        op.input_names = ["input"]
        record("fused", op.name, f"with {first.name}: one permute {tuple(composed)}")
    _drop_if_unused(graph, first)
    return True


def _fold_reshape_pair(graph: Graph, op: Operator) -> bool:
    if op.type not in RESHAPE_TYPES or len(op.inputs) != 1 or not isinstance(op.params.get("shape"), list):
        return False
    first = op.inputs[0].producer
    if first is None or first.type not in _RESHAPE_LIKE or not first.inputs:
        return False
    set_input(op, 0, first.inputs[0])
    record("rewired", op.name, f"reshapes {first.name}'s input directly")
    _drop_if_unused(graph, first)
    return True


def _drop_if_unused(graph: Graph, op: Operator) -> None:
    if not any(o.consumers for o in op.outputs):
        remove_operator(graph, op)
        record("removed", op.name, "no longer used")


_PAIR_RULES: list[Callable[[Graph, Operator], bool]] = [_fold_permute_pair, _fold_reshape_pair]


@graph_pass(
    "RemoveNoOps",
    1,
    required=("FoldConstantParams",),
    description="dropout, identities, same-shape views, full slices, ×1 resizes, zero pads, cancelling pairs",
)
def remove_noops(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for op in list(graph.operators):
        # Rules remove `op` or operators before it, never one still to come.
        why = _why_noop(graph, op)
        if why is not None:
            bypass(graph, op)
            record("removed", op.name, f"{op.type}: {why}")
            changed = True
            continue
        for rule in _PAIR_RULES:
            if rule(graph, op):
                changed = True
                break
    return graph, changed
