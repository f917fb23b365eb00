"""FoldBatchNorm: a BatchNorm right after a Conv, ConvTranspose or Linear becomes part of
its weights (pnnx's fuse_conv2d_batchnorm2d and friends at optlevel 2).

At inference BN is `y = (x - mean) / sqrt(var + eps) * gamma + beta`, an affine map per
channel: with `s = gamma / sqrt(var + eps)` the producer's weight is scaled per output
channel and its bias becomes `(b - mean) * s + beta`. Computed in float64, stored in the
weight's dtype. The producer keeps its name; the BN's readers read the producer.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Operator
from .manager import graph_pass, record
from .op_kinds import BATCHNORM_TYPES, CONV_TRANSPOSE_TYPES, CONV_TYPES
from .rewrite import bypass, set_weight, sole_consumer


def _bn_scale_shift(bn: Operator) -> tuple[np.ndarray, np.ndarray] | None:
    mean, var = bn.attrs.get("running_mean"), bn.attrs.get("running_var")
    if mean is None or var is None or mean.data is None or var.data is None:
        return None
    eps = bn.params.get("eps", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        return None
    n = mean.data.size
    gamma = bn.attrs.get("weight")
    beta = bn.attrs.get("bias")
    g = gamma.data.astype(np.float64) if gamma is not None and gamma.data is not None else np.ones(n)
    b = beta.data.astype(np.float64) if beta is not None and beta.data is not None else np.zeros(n)
    scale = g / np.sqrt(var.data.astype(np.float64) + float(eps))
    return scale, b - mean.data.astype(np.float64) * scale


def _fold(prev: Operator, scale: np.ndarray, shift: np.ndarray) -> bool:
    w_attr = prev.attrs.get("weight")
    if w_attr is None or w_attr.data is None or w_attr.data.dtype.kind != "f":
        return False
    w = w_attr.data.astype(np.float64)
    if prev.type in CONV_TRANSPOSE_TYPES:
        groups = prev.params.get("groups", 1)
        groups = groups if isinstance(groups, int) and groups > 0 else 1
        # (in, out/g, k…): output channel g*(out/g)+j sits at [group g, :, j]
        per = w.shape[1]
        if per * groups != scale.size:
            return False
        shaped = w.reshape((groups, w.shape[0] // groups, per) + w.shape[2:])
        shaped = shaped * scale.reshape((groups, 1, per) + (1,) * (w.ndim - 2))
        new_w = shaped.reshape(w.shape)
    else:
        if w.shape[0] != scale.size:
            return False
        new_w = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    b_attr = prev.attrs.get("bias")
    if b_attr is not None and "bias" in prev.params and not prev.params["bias"]:
        return False  # `bias=False` yet an @bias: the layers refuse that file (Layer.bias_weight); a fold would hide it
    bias = b_attr.data.astype(np.float64) if b_attr is not None and b_attr.data is not None else np.zeros(scale.size)
    new_b = bias * scale + shift
    set_weight(prev, "weight", new_w.astype(w_attr.data.dtype))
    set_weight(prev, "bias", new_b.astype(w_attr.data.dtype))
    prev.params["bias"] = True
    return True


@graph_pass("FoldBatchNorm", 2, description="BatchNorm after Conv/ConvTranspose/Linear folded into its weights")
def fold_batchnorm(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for bn in [op for op in graph.operators if op.type in BATCHNORM_TYPES]:
        if len(bn.inputs) != 1 or len(bn.outputs) != 1:
            continue
        x = bn.inputs[0]
        prev = x.producer
        if prev is None or sole_consumer(x) is not bn or len(prev.inputs) != 1 or len(prev.outputs) != 1:
            continue
        if prev.type == "nn.Linear":
            # BatchNorm1d normalises dim 1: that is Linear's feature dim only for (N, C)
            if x.shape is None or len(x.shape) != 2:
                continue
        elif prev.type not in CONV_TYPES | CONV_TRANSPOSE_TYPES:
            continue
        ss = _bn_scale_shift(bn)
        if ss is None or not _fold(prev, *ss):
            continue
        bypass(graph, bn)
        record("folded", bn.name, f"{bn.type} into {prev.name} ({prev.type}) weights and bias")
        changed = True
    return graph, changed
