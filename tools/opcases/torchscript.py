"""Operators pnnx 20261020 leaves as TorchScript's aten::* at every optlevel (positional
arguments), and a few torch.* ones they found alongside: triu/tril, one_hot, broadcast_to,
var_mean/std_mean, unsafe_chunk (LSTMCell), sort, meshgrid, view_as, tile, repeat_interleave,
Tensor.unfold (aten::unfold)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn, Wrap
from opcases.shape import case, cli, dynamic


def _ids(fn, shape, high):
    return lambda: (Fn(fn), [torch.randint(0, high, shape)])


CASES = {
    "aten_triu": dynamic(lambda x: torch.triu(x, 1) * 2, [(2, 4, 5)], [(3, 6, 5)]),
    "aten_tril_neg": dynamic(lambda x: torch.tril(x, -1) + x, [(4, 4)], [(6, 3)]),
    # Tensor.unfold: frames along a dim (an audio framing), kept as aten::unfold
    "aten_unfold_frames": dynamic(lambda x: x.unfold(-1, 4, 3) * 2, [(2, 3, 11)], [(3, 2, 9)]),
    "aten_unfold_dim1": cli(case(lambda x: x.unfold(1, 3, 2) + 1, (2, 7, 4))),  # pnnx cannot run its own Python
    "aten_one_hot": _ids(lambda i: F.one_hot(i, 5) * 2, (2, 3), 5),
    # F.one_hot(i) without num_classes: pnnx annotates the class count of its own dummy
    # input (#=(2,6,2)); tools/export_value_shapes.py exports it with several input sets.
    "aten_broadcast_to": case(lambda x: torch.broadcast_to(x, (2, 3, 4)) * 2, (3, 1)),
    "aten_var_mean": case(lambda x: torch.cat(torch.var_mean(x, dim=1, keepdim=True), 1) * 2, (2, 3, 4)),
    "aten_std_mean_unbiased_false": case(
        lambda x: torch.stack(torch.std_mean(x, dim=(1, 2), unbiased=False)) * 2, (2, 3, 4)
    ),
    # at optlevel 0/1 only: optlevel 2 folds LSTMCell's zero-state half wrongly (a pnnx bug,
    # tests/data/optlevel/README.md), so tests/data/ops has no copy
    "aten_unsafe_chunk_lstm_cell": lambda: (Wrap(nn.LSTMCell(4, 3)), [torch.randn(2, 4)]),
    "aten_sort": case(lambda x: tuple(t * 2 for t in torch.sort(x, dim=1)), (2, 5, 3)),
    "aten_sort_descending": case(lambda x: tuple(t * 2 for t in torch.sort(x, descending=True)), (3, 6)),
    "aten_meshgrid_xy": case(lambda x, y: tuple(g * 2 for g in torch.meshgrid(x, y, indexing="xy")), (3,), (4,)),
    "aten_view_as": dynamic(lambda x, y: (x * 2).view_as(y), [(2, 12), (2, 3, 4)], [(3, 12), (3, 3, 4)]),
    "aten_argsort_descending": case(lambda x: torch.argsort(x, dim=1, descending=True) * 2, (2, 5, 3)),
    "aten_median_dim": case(lambda x: tuple(t * 2 for t in torch.median(x, dim=-1)), (2, 3, 6)),
    "aten_median_keepdim": case(lambda x: torch.median(x, 1, keepdim=True)[0] * 2, (2, 5, 3)),
    "aten_kthvalue": case(lambda x: tuple(t * 2 for t in torch.kthvalue(x, 2, dim=1, keepdim=True)), (2, 5, 3)),
    "aten_addcmul": case(lambda x, y, z: torch.addcmul(x, y, z, value=-0.5), (2, 3), (2, 3), (1, 3)),
    "aten_addcdiv": case(lambda x, y, z: torch.addcdiv(x, y, z.abs() + 1, value=2.0), (2, 3), (2, 3), (2, 3)),
    "aten_lerp_scalar": case(lambda x, y: torch.lerp(x, y, 0.3), (2, 3), (2, 3)),
    "aten_lerp_tensor": case(lambda x, y, w: torch.lerp(x, y, w.sigmoid()), (2, 3), (2, 3), (2, 3)),
    "aten_cdist": case(lambda x, y: torch.cdist(x, y) * 2, (2, 4, 3), (2, 5, 3)),
    "aten_cdist_p1": case(lambda x, y: torch.cdist(x, y, p=1.0) * 2, (3, 3), (4, 3)),
    "aten_cosine_similarity": case(lambda x, y: F.cosine_similarity(x, y, dim=1) * 2, (2, 5, 3), (2, 5, 1)),
    "f_pairwise_distance": case(lambda x, y: F.pairwise_distance(x, y) * 2, (4, 6), (4, 6)),
    "f_pairwise_distance_p1_keepdim": case(
        lambda x, y: F.pairwise_distance(x, y, p=1.0, keepdim=True) * 2, (4, 6), (1, 6)
    ),
    "torch_t": case(lambda x: torch.t(x) * 2, (3, 5)),
    "tensor_tile": case(lambda x: torch.tile(x, (2,)) * 2, (2, 3)),
    "tensor_tile_more_dims": case(lambda x: torch.tile(x, (2, 1, 3)) * 2, (3, 2)),
    "tensor_repeat_interleave_flat": case(lambda x: torch.repeat_interleave(x, 3) * 2, (2, 3)),
    "tensor_repeat_interleave_dim": case(lambda x: x.repeat_interleave(2, dim=-1) * 2, (2, 3, 2)),
}
