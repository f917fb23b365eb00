"""FuseAttention: self-attention written out becomes one `nn.MultiheadAttention` (pnnx's
fuse_multiheadattention family at optlevel 2).

The chain it recognises, on static shapes (B batches, N tokens, E features, h heads of d):

    x (B, N, E) → nn.Linear(E, 3E) → reshape (B, N, 3, h, d) → permute (2, 0, 3, 1, 4)
      → torch.unbind(0) → q, k, v (B, h, N, d)
    scores = [q · a] @ kᵀ  (kᵀ: transpose(-2, -1) or permute (0, 1, 3, 2))
      → any chain of: expressions affine in the scores with constant terms (`mul(@0,0.35)`,
        `add(@0,@1)` with a weight: a position bias, a shifted-window mask), reshapes that
        only regroup the leading dims ((B, h, N, N) ↔ (1, B, h, N, N): Swin's windows)
      → F.softmax(dim=-1) → @ v → transpose (1, 2) or permute (0, 2, 1, 3)
      → reshape (B, N, E) → nn.Linear(E, E)

becomes `nn.MultiheadAttention(batch_first=True) $input=x $attn_mask=M`: in_proj from the qkv
Linear (the query rows scaled so that the layer's own 1/sqrt(d) gives the model's scale),
out_proj from the last Linear, and M the constant terms summed, broadcast to (B, h, N, N)
and written (B·h, N, N), or (N, N) when it is the same for every batch and head (then any
batch size still runs), or none when zero. This is how pnnx writes Swin's shifted-window
attention (fuse_multiheadattention_pass_17/18: the position bias and the window mask added
into one (windows·heads, N, N) attn_mask).

An expression counts as affine when, with every constant input fixed, f(s) = a·s + c for
one number a: read off f(0) and f(1) and checked at a third point, so `add(mul(@0,s),@1)`
and `mul(add(@0,@1),s)` fuse alike. Every intermediate result must have one reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from ..expression import evaluate
from ..graph import Graph, Operand, Operator
from .expr_tools import expr_of
from .batch_probe import fixed_dims
from .manager import graph_pass, record
from .op_kinds import PERMUTE_TYPES, RESHAPE_TYPES
from .rewrite import add_input, add_weight, remove_input, remove_operators, set_weight, sole_consumer

_SOFTMAX = ("F.softmax", "nn.Softmax")
_TRANSPOSE = ("torch.transpose", "Tensor.transpose")


@dataclass
class _Scores:
    """What happens to q @ kᵀ before the softmax: a scale and constant terms, in order."""

    scale: float = 1.0
    terms: list[np.ndarray] = field(default_factory=list)  # each broadcast to (B, h, N, N), already scaled
    ops: list[Operator] = field(default_factory=list)


def _const(operand: Operand) -> np.ndarray | None:
    p = operand.producer
    if p is None or p.type != "pnnx.Attribute":
        return None
    attr = p.attrs.get("data")
    return attr.data if attr is not None and attr.data is not None and attr.data.dtype.kind == "f" else None


def _static(operand: Operand) -> tuple[int, ...] | None:
    return operand.static_shape


def _perm(op: Operator, rank: int) -> list[int]:
    """A permute's dims modulo the rank ([] when they are not ints)."""
    dims = op.params.get("dims")
    if not isinstance(dims, list):
        return []
    ints = [d % rank for d in dims if isinstance(d, int)]
    return ints if len(ints) == len(dims) else []


def _swapped_last(op: Operator) -> bool:
    """A transpose of the last two dims of a 4-D operand."""
    shape = _static(op.inputs[0]) if op.inputs else None
    if shape is None or len(shape) != 4:
        return False
    if op.type in _TRANSPOSE:
        dims = {op.params.get("dim0"), op.params.get("dim1")}
        return dims in ({-2, -1}, {2, 3}, {-2, 3}, {2, -1})
    if op.type in PERMUTE_TYPES:
        return _perm(op, 4) == [0, 1, 3, 2]
    return False


def _heads_to_tokens(op: Operator) -> bool:
    """(B, h, N, d) → (B, N, h, d): transpose(1, 2) or permute (0, 2, 1, 3)."""
    shape = _static(op.inputs[0]) if op.inputs else None
    if shape is None or len(shape) != 4:
        return False
    if op.type in _TRANSPOSE:
        return {op.params.get("dim0"), op.params.get("dim1")} in ({1, 2}, {-3, 2}, {1, -2}, {-3, -2})
    if op.type in PERMUTE_TYPES:
        return _perm(op, 4) == [0, 2, 1, 3]
    return False


def _affine(op: Operator, chain: Operand) -> tuple[float, np.ndarray] | None:
    """(a, c) when the expression is a·chain + c over its constant inputs, else None."""
    ast = expr_of(op)
    shape = _static(chain)
    out = _static(op.outputs[0]) if len(op.outputs) == 1 else None
    if ast is None or shape is None or out != shape or op.inputs.count(chain) != 1:
        return None
    consts = [None if o is chain else _const(o) for o in op.inputs]
    if any(c is None for o, c in zip(op.inputs, consts) if o is not chain):
        return None

    def f(s: np.ndarray) -> np.ndarray | None:
        args = [s if o is chain else c for o, c in zip(op.inputs, consts)]
        with np.errstate(all="ignore"):
            try:
                y = evaluate(ast, args)
            except Exception:
                return None
        if not isinstance(y, np.ndarray) or y.dtype.kind != "f":
            return None
        return np.broadcast_to(y, shape).astype(np.float64)

    c, one = f(np.zeros(shape, np.float32)), f(np.ones(shape, np.float32))
    if c is None or one is None:
        return None
    finite = np.isfinite(c)
    if not finite.any():
        return None
    slopes = (one - c)[finite]
    a = float(slopes.flat[0])
    if not np.isfinite(a) or not np.allclose(slopes, a, rtol=1e-5, atol=1e-6) or a == 0:
        return None
    probe = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = f(probe)
    if got is None or not np.array_equal(np.isfinite(got), finite):
        return None
    want = a * probe.astype(np.float64) + c
    if not np.allclose(got[finite], want[finite], rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want[finite]).max()))):
        return None
    return a, c


def _scores_chain(softmax: Operator) -> tuple[Operator, _Scores] | None:
    """Walk back from the softmax to the q @ kᵀ matmul: its scale and constant terms."""
    x = softmax.inputs[0]
    shape = _static(x)
    if shape is None or len(shape) != 4:
        return None
    B, h, N, S = shape
    found = _Scores()
    later_scale = 1.0  # the product of the scales between this point and the softmax
    terms: list[tuple[np.ndarray, float]] = []
    while True:
        op = x.producer
        if op is None or sole_consumer(x) is None:
            return None
        if op.type == "torch.matmul":
            break
        here = _static(x)
        if here is None:
            return None
        if op.type in RESHAPE_TYPES and len(op.inputs) == 1:
            before = _static(op.inputs[0])
            if before is None or before[-2:] != (N, S) or math.prod(before) != math.prod(here):
                return None
        elif op.type == "pnnx.Expression":
            chain = [o for o in op.inputs if _const(o) is None]
            if len(chain) != 1:
                return None
            fit = _affine(op, chain[0])
            if fit is None:
                return None
            a, c = fit
            terms.append((np.broadcast_to(c, here).reshape(B, h, N, S), later_scale))
            later_scale *= a
            x = chain[0]
            found.ops.append(op)
            continue
        else:
            return None
        found.ops.append(op)
        x = op.inputs[0]
    if _static(x) != shape:
        return None
    found.scale = later_scale
    found.terms = [t * s for t, s in terms]
    return op, found


@dataclass
class _Match:
    x: Operand
    qkv: Operator
    out_proj: Operator
    heads: int
    embed_dim: int
    scale: float  # what q @ kᵀ is multiplied by in the model
    mask: np.ndarray | None  # (B, h, N, N) float64
    ops: list[Operator]


def _qkv_source(q: Operand, k: Operand, v: Operand) -> tuple[Operator, Operand, list[Operator], int] | None:
    """The unbind of the packed projection q, k, v come from: (qkv Linear, x, ops, heads)."""
    unbind = q.producer
    if unbind is None or unbind.type != "torch.unbind" or list(unbind.outputs) != [q, k, v]:
        return None
    if unbind.params.get("dim", 0) not in (0,) or any(len(o.consumers) != 1 for o in (q, k, v)):
        return None
    perm = unbind.inputs[0].producer
    if perm is None or perm.type not in PERMUTE_TYPES or sole_consumer(unbind.inputs[0]) is not unbind:
        return None
    if _perm(perm, 5) != [2, 0, 3, 1, 4]:
        return None
    reshape = perm.inputs[0].producer
    if reshape is None or reshape.type not in RESHAPE_TYPES or sole_consumer(perm.inputs[0]) is not perm:
        return None
    linear = reshape.inputs[0].producer
    if linear is None or linear.type != "nn.Linear" or sole_consumer(reshape.inputs[0]) is not reshape:
        return None
    x, split = linear.inputs[0], _static(reshape.outputs[0])
    xs = _static(x)
    if xs is None or split is None or len(xs) != 3 or len(split) != 5:
        return None
    B, N, E = xs
    if split[:3] != (B, N, 3) or split[3] * split[4] != E:
        return None
    w = linear.attrs.get("weight")
    if w is None or w.data is None or w.data.shape != (3 * E, E) or w.data.dtype != np.float32:
        return None
    return linear, x, [linear, reshape, perm, unbind], split[3]


def _match(softmax: Operator) -> _Match | None:
    dim = softmax.params.get("dim")
    shape = _static(softmax.inputs[0]) if softmax.inputs else None
    if shape is None or len(shape) != 4 or dim not in (-1, 3) or len(softmax.outputs) != 1:
        return None
    B, h, N, S = shape
    if N != S:
        return None
    walked = _scores_chain(softmax)
    if walked is None:
        return None
    qk, scores = walked
    if len(qk.inputs) != 2:
        return None
    # q side: the query, maybe scaled by an expression
    qa, kt = qk.inputs
    scale = scores.scale
    extra: list[Operator] = []
    if qa.producer is not None and qa.producer.type == "pnnx.Expression" and sole_consumer(qa) is qk:
        fit = _affine(qa.producer, qa.producer.inputs[0]) if len(qa.producer.inputs) == 1 else None
        if fit is None or np.any(fit[1] != 0):
            return None
        scale *= fit[0]
        extra.append(qa.producer)
        qa = qa.producer.inputs[0]
    tr = kt.producer
    if tr is None or not _swapped_last(tr) or sole_consumer(kt) is not qk:
        return None
    k = tr.inputs[0]
    # v side: softmax → matmul(probs, v) → heads back to tokens → reshape (B, N, E) → Linear
    probs = softmax.outputs[0]
    pv = sole_consumer(probs)
    if pv is None or pv.type != "torch.matmul" or len(pv.inputs) != 2 or pv.inputs[0] is not probs:
        return None
    v = pv.inputs[1]
    back = sole_consumer(pv.outputs[0])
    if back is None or not _heads_to_tokens(back):
        return None
    merge = sole_consumer(back.outputs[0])
    if merge is None or merge.type not in RESHAPE_TYPES:
        return None
    out_proj = sole_consumer(merge.outputs[0])
    if out_proj is None or out_proj.type != "nn.Linear":
        return None
    source = _qkv_source(qa, k, v)
    if source is None:
        return None
    qkv, x, qkv_ops, heads = source
    xs = _static(x)
    E = xs[2] if xs is not None else -1
    if (
        heads != h
        or xs != (B, N, E)
        or _static(merge.outputs[0]) != (B, N, E)
        or _static(out_proj.outputs[0]) != (B, N, E)
    ):
        return None
    wo = out_proj.attrs.get("weight")
    if wo is None or wo.data is None or wo.data.shape != (E, E) or wo.data.dtype != np.float32:
        return None
    mask = reduce(np.add, scores.terms) if scores.terms else None
    ops = qkv_ops + extra + [tr, qk] + scores.ops + [softmax, pv, back, merge]
    return _Match(x, qkv, out_proj, heads, E, scale, mask, ops)


def _rewrite(graph: Graph, m: _Match) -> None:
    """The out_proj Linear becomes the attention; the rest of the chain goes."""
    E = m.embed_dim
    d = E // m.heads
    op = m.out_proj
    w_in, wo = m.qkv.attrs["weight"].data, op.attrs["weight"].data
    assert w_in is not None and wo is not None  # _match checked both
    w_qkv = w_in.astype(np.float64)
    b_attr = m.qkv.attrs.get("bias")
    b_qkv = b_attr.data.astype(np.float64) if b_attr is not None and b_attr.data is not None else np.zeros(3 * E)
    # The layer scales q by 1/sqrt(d); the model by `scale`: the query projection makes up the rest.
    fix = m.scale * math.sqrt(d)
    w_qkv[:E] *= fix
    b_qkv[:E] *= fix
    bo = op.attrs.get("bias")
    set_weight(op, "in_proj_weight", w_qkv.astype(np.float32))
    set_weight(op, "in_proj_bias", b_qkv.astype(np.float32))
    set_weight(op, "out_proj.weight", wo)
    out_bias = bo.data if bo is not None and bo.data is not None else np.zeros(E, np.float32)
    set_weight(op, "out_proj.bias", out_bias)
    for key in ("weight", "bias"):
        op.attrs.pop(key, None)
    op.type = "nn.MultiheadAttention"
    op.params = {
        "add_bias_kv": False,
        "add_zero_attn": False,
        "batch_first": True,
        "bias": True,
        "embed_dim": E,
        "kdim": E,
        "num_heads": m.heads,
        "vdim": E,
    }
    remove_input(op, 0)
    add_input(op, m.x, "input")
    mask_text = "no mask"
    if m.mask is not None and np.any(m.mask != 0):
        B, h, N, S = m.mask.shape
        mask = m.mask.astype(np.float32)
        if np.all(mask == mask[:1, :1]):
            mask, mask_text = mask[0, 0], f"attn_mask ({N}, {S})"
        else:
            mask, mask_text = mask.reshape(B * h, N, S), f"attn_mask ({B * h}, {N}, {S}) = windows·heads"
        add_input(op, add_weight(graph, mask, f"{op.name}_attn_mask", before=m.ops[0]), "attn_mask")
    remove_operators(graph, m.ops)
    record(
        "fused",
        op.name,
        f"{len(m.ops) + 1} operators (qkv {m.qkv.name} … softmax … out_proj) → nn.MultiheadAttention "
        f"({m.heads} heads, {mask_text})",
    )


def _any_batch(graph: Graph, softmax: Operator, m: _Match) -> bool:
    """Whether the fused layer is right at every batch size. A mask that differs between the
    B attention batches or the heads is written (B·h, N, N) at the traced B: right only where
    B does not follow the batch. Swin's windows do (B = images × windows): fused, -O2 failed
    at batch 2 where the original runs ("attn_mask has shape (8, 16, 16)"), so it stays unfused
    there (pnnx's own optlevel-2 export fuses it, for its traced batch only)."""
    if m.mask is None or not np.any(m.mask != 0) or np.all(m.mask == m.mask[:1, :1]):
        return True
    fixed = fixed_dims(graph, softmax.inputs[0])
    return bool(fixed and fixed[0])


@graph_pass(
    "FuseAttention",
    2,
    required=("FoldConstants",),
    description="qkv Linear → heads → q kᵀ (+ constant bias/mask) → softmax → · v → out Linear is nn.MultiheadAttention",
)
def fuse_attention(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for softmax in [op for op in graph.operators if op.type in _SOFTMAX]:
        if not any(softmax is op for op in graph.operators):
            continue
        m = _match(softmax)
        if m is None or not _any_batch(graph, softmax, m):
            continue
        _rewrite(graph, m)
        changed = True
    return graph, changed
