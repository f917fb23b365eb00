"""Reductions (mean/sum/prod/max/min/amax/amin/argmax/argmin/norm/std/var/logsumexp),
topk and clamp. torch.max/min with a dim return (values, indices): a two-output operator."""

import torch

from opcases.shape import case, cli

CASES = {
    # mean / sum / prod
    "reduce_mean": case(lambda x: torch.mean(x, 1), (2, 3, 4)),
    "reduce_mean_keepdim": case(lambda x: torch.mean(x, (2, 3), keepdim=True), (2, 3, 4, 5)),
    "reduce_mean_all": case(lambda x: torch.mean(x) + x, (2, 3, 4)),
    "reduce_mean_neg": case(lambda x: x.mean(-1), (2, 3, 4)),
    "reduce_sum": case(lambda x: torch.sum(x, 1), (2, 3, 4)),
    "reduce_sum_keepdim": case(lambda x: torch.sum(x, (1, -1), keepdim=True), (2, 3, 4, 5)),
    "reduce_sum_int": case(lambda x: torch.sum((x * 4).long(), 1), (2, 3, 4)),
    "reduce_sum_all": case(lambda x: torch.sum(x) * x, (2, 3, 4)),
    "reduce_prod": case(lambda x: torch.prod(x, 1), (2, 3, 4)),
    "reduce_prod_keepdim": case(lambda x: torch.prod(x, -1, keepdim=True), (2, 3, 4)),
    # torch.prod(x) without a dim: pnnx 20261020 leaves it as aten::prod (not converted).
    # max / min
    "reduce_max_all": case(lambda x: torch.max(x) * x, (2, 3, 4)),
    "reduce_min_all": case(lambda x: torch.min(x) * x, (2, 3, 4)),
    "reduce_max_dim": case(lambda x: torch.max(x, 1), (2, 3, 4)),
    "reduce_max_keepdim": case(lambda x: torch.max(x, -1, keepdim=True), (2, 3, 4)),
    "reduce_max_values": case(lambda x: torch.max(x, 1)[0] * 2, (2, 3, 4)),
    "reduce_max_indices": case(lambda x: torch.max(x, 2)[1] + 1, (2, 3, 4)),
    "reduce_min_dim": case(lambda x: torch.min(x, 2), (2, 3, 4)),
    "reduce_min_keepdim": case(lambda x: x.min(1, keepdim=True), (2, 3, 4)),
    # torch.max(x, y) and torch.maximum(x, y) become pnnx.Expression max/maximum (not here).
    "reduce_amax": case(lambda x: torch.amax(x, (1, 2)), (2, 3, 4, 5)),
    "reduce_amax_keepdim": case(lambda x: torch.amax(x, -1, keepdim=True), (2, 3, 4)),
    "reduce_amin": case(lambda x: torch.amin(x, 1), (2, 3, 4)),
    "reduce_argmax": case(lambda x: torch.argmax(x, 1), (2, 3, 4)),
    "reduce_argmax_keepdim": case(lambda x: torch.argmax(x, -1, keepdim=True), (2, 3, 4)),
    "reduce_argmax_all": case(lambda x: torch.argmax(x), (2, 3, 4)),
    "reduce_argmin": case(lambda x: torch.argmin(x, 2), (2, 3, 4)),
    # clamp
    "reduce_clamp": case(lambda x: torch.clamp(x, -0.5, 0.5), (2, 3, 4)),
    "reduce_clamp_min": case(lambda x: torch.clamp(x, min=0.1), (2, 3, 4)),
    "reduce_clamp_max": case(lambda x: torch.clamp(x, max=-0.2), (2, 3, 4)),
    "reduce_clamp_method": case(lambda x: x.clamp(0, 6), (2, 3, 4)),
    "reduce_clamp_tensor": case(lambda x, y, z: torch.clamp(x, min=y, max=z), (2, 3, 4), (2, 3, 4), (1, 3, 1)),
    "reduce_clamp_repeated": case(lambda x, y: torch.clamp(x, min=y, max=y), (2, 3), (2, 3)),
    "reduce_clip": case(lambda x: torch.clip(x, -1.0, 1.0), (2, 3, 4)),
    # norm / std / var / logsumexp
    "reduce_norm": case(lambda x: torch.norm(x, dim=1), (2, 3, 4)),
    "reduce_norm_p1": case(lambda x: torch.norm(x, p=1, dim=-1, keepdim=True), (2, 3, 4)),
    "reduce_norm_inf": cli(case(lambda x: torch.norm(x, p=float("inf"), dim=1), (2, 3, 4))),
    "reduce_norm_p3": case(lambda x: torch.norm(x, p=3, dim=(1, 2)), (2, 3, 4)),
    "reduce_norm_fro": case(lambda x: torch.norm(x, p="fro", dim=(1, 2)), (2, 3, 4)),
    "reduce_norm_all": case(lambda x: torch.norm(x) * x, (2, 3, 4)),
    "reduce_linalg_vector_norm": case(lambda x: torch.linalg.vector_norm(x, 2, dim=(1, 2)), (2, 3, 4)),
    "reduce_std": case(lambda x: torch.std(x, 1), (2, 3, 4)),
    "reduce_std_unbiased_false": case(lambda x: torch.std(x, -1, unbiased=False, keepdim=True), (2, 3, 4)),
    "reduce_var": case(lambda x: torch.var(x, 2), (2, 3, 4)),
    # pnnx writes correction=0 as unbiased=0 (an int), which its own generated Python then
    # rejects: export through the CLI (which does not run that Python) without operands.
    "reduce_var_correction": cli(case(lambda x: torch.var(x, (1, 2), correction=0), (2, 3, 4))),
    "reduce_logsumexp": case(lambda x: torch.logsumexp(x, 1), (2, 3, 4)),
    # topk: (values, indices), a two-output operator
    "reduce_topk": case(lambda x: tuple(t * 1 for t in torch.topk(x, 2)), (2, 3, 5)),
    "reduce_topk_smallest_dim": case(lambda x: torch.topk(x, 3, dim=1, largest=False)[0] * 2, (2, 4, 3)),
}
