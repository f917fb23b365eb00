"""FusePatterns: small subgraphs that one operator of the engine computes (pnnx's pattern
fusions at optlevel 2).

- Channel shuffle (ShuffleNet): reshape (N, C, *S) → (N, g, C/g, *S), swap axes 1 and 2,
  reshape back to (N, C, *S) is `nn.ChannelShuffle(groups=g)` (fuse_channel_shuffle).
- Pixel unshuffle (space to depth): reshape (N, C, H, W) → (N, C, H/r, r, W/r, r), permute
  (0, 1, 3, 5, 2, 4), reshape to (N, C·r², H/r, W/r) is `nn.PixelUnshuffle(r)`; the inverse
  ((N, C·r², H, W) → (N, C, r, r, H, W), permute (0, 1, 4, 2, 5, 3), reshape to
  (N, C, H·r, W·r)) is `nn.PixelShuffle(r)` (fuse_pixel_unshuffle, fuse_pixel_shuffle).
- RMSNorm written out: `x * rsqrt(mean(x², -1, keepdim) + eps) [* w]` (or `x / sqrt(…)`)
  is `nn.RMSNorm` holding `w` (fuse_rmsnorm).

Matched on the operands' declared shapes, so it does not depend on how the reshapes
were written (a computed shape, `-1`, or literal sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expression.parser import Call, Constant, Node, OperandRef
from ..graph import Graph, Operator
from .expr_tools import expr_of
from .manager import graph_pass, record
from .op_kinds import PERMUTE_TYPES, RESHAPE_TYPES
from .rewrite import add_input, remove_input, remove_operator, set_input, set_weight, sole_consumer


@dataclass
class _Chain:
    """reshape `first` → `mid` (a permutation of axes) → reshape `last`, each read only by
    the next, with the static shapes around them."""

    first: Operator
    mid: Operator
    last: Operator
    perm: list[int]
    x: tuple[int, ...]  # the input of `first`
    split: tuple[int, ...]  # the output of `first`
    y: tuple[int, ...]  # the output of `last`


def _reshape_permute_reshape(last: Operator) -> _Chain | None:
    if last.type not in RESHAPE_TYPES or len(last.inputs) != 1:
        return None
    mid = last.inputs[0].producer
    if mid is None or len(mid.inputs) != 1 or sole_consumer(last.inputs[0]) is not last:
        return None
    first = mid.inputs[0].producer
    if (
        first is None
        or first.type not in RESHAPE_TYPES
        or len(first.inputs) != 1
        or sole_consumer(mid.inputs[0]) is not mid
    ):
        return None
    perm = _permutation(mid)
    x, split, y = first.inputs[0].static_shape, first.outputs[0].static_shape, last.outputs[0].static_shape
    if perm is None or x is None or split is None or y is None:
        return None
    return _Chain(first, mid, last, perm, x, split, y)


def _permutation(op: Operator) -> list[int] | None:
    """The full permutation a permute or a transpose applies (a transpose needs a known rank)."""
    rank = len(op.inputs[0].shape) if op.inputs[0].shape is not None else None
    if op.type in PERMUTE_TYPES:
        dims = op.params.get("dims")
        if isinstance(dims, list) and rank == len(dims) and all(isinstance(d, int) for d in dims):
            return [d % rank for d in dims]
        return None
    if op.type == "torch.transpose" and rank is not None:
        d0, d1 = op.params.get("dim0"), op.params.get("dim1")
        if isinstance(d0, int) and isinstance(d1, int) and -rank <= min(d0, d1) and max(d0, d1) < rank:
            perm = list(range(rank))
            perm[d0 % rank], perm[d1 % rank] = perm[d1 % rank], perm[d0 % rank]
            return perm
    return None


def _replace_chain(graph: Graph, chain: _Chain, op_type: str, params: dict) -> None:
    first, mid, last = chain.first, chain.mid, chain.last
    set_input(last, 0, first.inputs[0])
    last.type, last.params, last.input_names = op_type, params, ["input"]
    remove_operator(graph, mid)
    remove_operator(graph, first)
    record(
        "fused",
        last.name,
        f"{first.name} → {mid.name} → {last.name}: {op_type}(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")",
    )


def _channel_shuffle(graph: Graph, chain: _Chain) -> bool:
    perm, x, grouped = chain.perm, chain.x, chain.split
    if len(perm) < 3 or perm != [0, 2, 1] + list(range(3, len(perm))) or chain.y != x or len(x) < 2:
        return False
    if len(grouped) != len(x) + 1 or grouped[0] != x[0] or grouped[1] * grouped[2] != x[1] or grouped[3:] != x[2:]:
        return False
    _replace_chain(graph, chain, "nn.ChannelShuffle", {"groups": grouped[1]})
    return True


def _pixel_shuffles(graph: Graph, chain: _Chain) -> bool:
    perm, x, split, y = chain.perm, chain.x, chain.split, chain.y
    if len(x) != 4 or len(split) != 6:
        return False
    n, c, h, w = x
    if perm == [0, 1, 3, 5, 2, 4]:  # (N, C, H/r, r, W/r, r) → (N, C, r, r, H/r, W/r)
        r = split[3]
        if (
            r > 1
            and split == (n, c, h // r, r, w // r, r)
            and h % r == 0
            and w % r == 0
            and y == (n, c * r * r, h // r, w // r)
        ):
            _replace_chain(graph, chain, "nn.PixelUnshuffle", {"downscale_factor": r})
            return True
    if perm == [0, 1, 4, 2, 5, 3]:  # (N, C, r, r, H, W) → (N, C, H, r, W, r)
        r = split[2]
        if (
            r > 1
            and c % (r * r) == 0
            and split == (n, c // (r * r), r, r, h, w)
            and y == (n, c // (r * r), h * r, w * r)
        ):
            _replace_chain(graph, chain, "nn.PixelShuffle", {"upscale_factor": r})
            return True
    return False


# -- RMSNorm ---------------------------------------------------------------------------------------
def _factors(node: Node) -> list[Node | tuple[str, Node]] | None:
    """The factors of a product: operand references and ("rsqrt", s) for rsqrt(s) or a
    division by sqrt(s); None for anything else."""
    out: list[Node | tuple[str, Node]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Call) and n.name == "mul" and len(n.args) == 2:
            stack += n.args
        elif isinstance(n, Call) and n.name == "div" and len(n.args) == 2:
            d = n.args[1]
            if not (isinstance(d, Call) and d.name == "sqrt" and len(d.args) == 1):
                return None
            out.append(("rsqrt", d.args[0]))
            stack.append(n.args[0])
        elif isinstance(n, Call) and n.name == "rsqrt" and len(n.args) == 1:
            out.append(("rsqrt", n.args[0]))
        elif isinstance(n, OperandRef):
            out.append(n)
        else:
            return None
    return out


def _mean_plus_eps(node: Node) -> tuple[int, float] | None:
    """(operand index, eps) of `add(@k, eps)` in either order."""
    if not (isinstance(node, Call) and node.name == "add" and len(node.args) == 2):
        return None
    a, b = node.args
    if isinstance(b, OperandRef):
        a, b = b, a
    if (
        isinstance(a, OperandRef)
        and isinstance(b, Constant)
        and isinstance(b.value, (int, float))
        and not isinstance(b.value, bool)
    ):
        return a.index, float(b.value)
    return None


_SQUARES = frozenset({"pow(@0,2)", "mul(@0,@0)", "square(@0)", "pow(@0,2.0)"})


def _rmsnorm(graph: Graph, op: Operator) -> bool:
    if op.type != "pnnx.Expression":
        return False
    tree = expr_of(op)
    factors = _factors(tree) if tree is not None else None
    if not factors:
        return False
    roots = [f[1] for f in factors if isinstance(f, tuple)]
    refs = sorted(f.index for f in factors if isinstance(f, OperandRef))
    me = _mean_plus_eps(roots[0]) if len(roots) == 1 else None
    if me is None or len(refs) not in (1, 2) or len(set(refs)) != len(refs) or me[0] in refs:
        return False
    mean = op.inputs[me[0]].producer
    if mean is None or mean.type != "torch.mean" or len(mean.inputs) != 1 or sole_consumer(op.inputs[me[0]]) is not op:
        return False
    square = mean.inputs[0].producer
    if (
        square is None
        or square.type != "pnnx.Expression"
        or len(square.inputs) != 1
        or str(square.params.get("expr")) not in _SQUARES
    ):
        return False
    x = square.inputs[0]
    shape = x.static_shape
    dims = mean.params.get("dim")
    dims = dims if isinstance(dims, list) else [dims]
    if shape is None or not shape or mean.params.get("keepdim") is not True or dims not in ([-1], [len(shape) - 1]):
        return False
    if sole_consumer(mean.inputs[0]) is not mean or op.outputs[0].static_shape != shape:
        return False
    xs = [i for i in refs if op.inputs[i] is x]
    ws = [i for i in refs if op.inputs[i] is not x]
    if len(xs) != 1:
        return False
    weight = None
    if ws:
        w_op = op.inputs[ws[0]].producer
        attr = w_op.attrs.get("data") if w_op is not None and w_op.type == "pnnx.Attribute" else None
        if attr is None or attr.data is None or tuple(attr.data.shape) != (shape[-1],):
            return False
        weight = attr.data
    w_source = op.inputs[ws[0]].producer if ws else None
    for i in reversed(range(len(op.inputs))):
        remove_input(op, i)
    add_input(op, x, "input")
    op.type = "nn.RMSNorm"
    op.params = {"elementwise_affine": weight is not None, "eps": me[1], "normalized_shape": [shape[-1]]}
    if weight is not None:
        set_weight(op, "weight", weight)
    remove_operator(graph, mean)
    remove_operator(graph, square)
    if w_source is not None and not w_source.outputs[0].consumers:
        remove_operator(graph, w_source)
    record(
        "fused",
        op.name,
        f"{square.name} → {mean.name} → {op.name}: nn.RMSNorm(normalized_shape=({shape[-1]}), eps={me[1]:g})",
    )
    return True


@graph_pass(
    "FusePatterns", 2, description="channel shuffle, pixel (un)shuffle and RMSNorm written out → one nn.* operator"
)
def fuse_patterns(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for op in list(reversed(graph.operators)):
        if op.outputs and op.outputs[0].producer is op:  # still in the graph
            chain = _reshape_permute_reshape(op)
            if chain is not None:
                changed |= _channel_shuffle(graph, chain) or _pixel_shuffles(graph, chain)
            else:
                changed |= _rmsnorm(graph, op)
    return graph, changed
