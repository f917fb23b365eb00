"""RemoveNoOps: operators that return their input unchanged, and pairs that cancel.

Removed (readers read the input instead): Dropout and Identity (inference), a reshape or
other view-like op whose output has the input's shape and dtype, a full slice, a
one-input cat, a ×1 upsample, a zero pad, an expression that is `@0`, `x*1`, `x/1`,
`x+0`, `x-0` (when dtype and shape stay). Rewired: a reshape of a reshape reads the first
one's input; a permute (or transpose) of a permute reads the first one's input with the
composed order, and disappears when the two cancel.
"""

from __future__ import annotations

from collections.abc import Callable

from ..expression.parser import Call, Constant, OperandRef
from ..graph import Graph, Operand, Operator
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


def _why_noop(op: Operator) -> str | None:
    """Why `op` returns input 0 unchanged (None if it does not, or we cannot tell)."""
    if len(op.outputs) != 1 or not op.inputs:
        return None
    t, p = op.type, op.params
    if t in DROPOUT_TYPES:
        if p.get("training") is True or "training" in op.input_names:  # True, or only known at run time
            return None
        return "dropout does nothing at inference"
    if t == "torch.cat" and len(op.inputs) == 1 and _same_shape_and_dtype(op.inputs[0], op.outputs[0]):
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
        if _same_shape_and_dtype(op.inputs[0], op.outputs[0]):
            return "resize to the same size"
        return None
    if t == "Tensor.slice" and _full_slice(op):
        return "full slice"
    if t in _VIEW_LIKE and _same_shape_and_dtype(op.inputs[0], op.outputs[0]):
        return f"output has the input's shape {op.outputs[0].static_shape}"
    if t == "pnnx.Expression" and len(op.inputs) == 1:
        return _noop_expression(op)
    return None


def _full_slice(op: Operator) -> bool:
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
    return isinstance(end, int) and isinstance(size, int) and end >= size


_NEUTRAL = {"mul": 1, "div": 1, "add": 0, "sub": 0, "pow": 1}


def _noop_expression(op: Operator) -> str | None:
    ast = expr_of(op)
    if ast is None or not _same_shape_and_dtype(op.inputs[0], op.outputs[0]):
        return None
    if isinstance(ast, OperandRef) and ast.index == 0:
        return "expression @0"
    if isinstance(ast, Call) and ast.name in _NEUTRAL and len(ast.args) == 2:
        a, b = ast.args
        unit = _NEUTRAL[ast.name]
        if isinstance(a, OperandRef) and isinstance(b, Constant) and b.value == unit and not isinstance(b.value, bool):
            return f"expression {ast.name}(@0,{b.text})"
        if ast.name in ("mul", "add") and isinstance(b, OperandRef) and isinstance(a, Constant) and a.value == unit:
            return f"expression {ast.name}({a.text},@0)"
    return None


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
        why = _why_noop(op)
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
