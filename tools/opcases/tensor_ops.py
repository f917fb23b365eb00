"""Tensor ops: cat/stack, the multi-output splitters (chunk/split/unbind), where,
masked_fill, embeddings, and tensor factories (ones/zeros/full and their *_like forms)."""

import torch
import torch.nn as nn

from opcases._common import Fn
from opcases.shape import case, dynamic


class ClsToken(nn.Module):
    """A ViT-style class token: pnnx folds `cls.expand(x.size(0), -1, -1)` into a constant
    of the traced batch, which torch.cat then joins with the batch-sized tokens."""

    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 4))

    def forward(self, x):
        return torch.cat((self.cls.expand(x.size(0), -1, -1), x), dim=1) * 2


class PositionalEncoding(nn.Module):
    """A sinusoidal table made in forward from torch.arange and written into slices of a
    torch.zeros (pnnx folds it into a constant at optlevel 2 with static shapes)."""

    def forward(self, x):
        t = torch.arange(x.size(1), dtype=torch.float32)
        freq = torch.exp(torch.arange(0, x.size(2), 2, dtype=torch.float32) * (-9.210340371976184 / x.size(2)))
        pe = torch.zeros(x.size(1), x.size(2))
        pe[:, 0::2] = torch.sin(t[:, None] * freq)
        pe[:, 1::2] = torch.cos(t[:, None] * freq)
        return x + pe.unsqueeze(0)


class CausalMask(nn.Module):
    """Attention scores with a causal mask from a buffer (a GPT-style block)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(6, 6)))

    def forward(self, x):
        t = x.size(1)
        att = (x @ x.transpose(-2, -1)).masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        return torch.softmax(att, dim=-1)


class Embed(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.emb = nn.Embedding(20, 6, **kwargs)
        with torch.no_grad():
            self.emb.weight.mul_(3.0)  # some rows longer than max_norm

    def forward(self, ids):
        return self.emb(ids) * 2


def _split_sum(parts):
    # Use every part so that pnnx keeps all outputs of the multi-output operator.
    return tuple(p * (i + 1) for i, p in enumerate(parts))


CASES = {
    # cat / stack
    "tensor_cat": case(lambda x, y: torch.cat((x, y), 1) * 2, (2, 3, 4), (2, 5, 4)),
    "tensor_cat_neg": case(lambda x, y: torch.cat([x, y, x], dim=-1) * 2, (2, 3, 4), (2, 3, 2)),
    "tensor_cat_same": case(lambda x: torch.cat((x, x), 0) * 2, (2, 3)),
    "tensor_cat_batch": case(lambda x, y: torch.cat((x * 2, y), 0), (2, 3, 4), (1, 3, 4)),
    "tensor_cat_cls_batch1": lambda: (ClsToken(), [torch.randn(1, 3, 4)]),
    "tensor_cat_cls_batch2": lambda: (ClsToken(), [torch.randn(2, 3, 4)]),
    "tensor_stack": case(lambda x, y: torch.stack((x, y), 1) * 2, (2, 3, 4), (2, 3, 4)),
    "tensor_stack_neg": case(lambda x, y: torch.stack((x, y, x), -1) * 2, (2, 3), (2, 3)),
    # chunk
    "tensor_chunk": case(lambda x: _split_sum(torch.chunk(x, 2, 1)), (2, 4, 3)),
    "tensor_chunk_uneven": case(lambda x: _split_sum(torch.chunk(x, 3, 1)), (2, 7, 3)),
    "tensor_chunk_method": case(lambda x: _split_sum(x.chunk(4, -1)), (2, 3, 10)),
    # split
    "tensor_split_int": case(lambda x: _split_sum(torch.split(x, 2, 1)), (2, 5, 3)),
    "tensor_split_list": case(lambda x: _split_sum(torch.split(x, [1, 3, 2], dim=2)), (2, 3, 6)),
    "tensor_split_method": case(lambda x: _split_sum(x.split(3, -1)), (2, 3, 6)),
    "tensor_tensor_split_indices": case(lambda x: _split_sum(torch.tensor_split(x, (1, 4), dim=-1)), (2, 3, 6)),
    "tensor_tensor_split": case(lambda x: _split_sum(torch.tensor_split(x, 3, dim=1)), (2, 7, 3)),
    # unbind
    "tensor_unbind": case(lambda x: _split_sum(torch.unbind(x, 1)), (2, 3, 4)),
    "tensor_unbind_batch": case(lambda x: _split_sum(x.unbind(0)), (3, 4)),
    # where
    "tensor_where": case(lambda x, y: torch.where(x > 0, x, y), (2, 3, 4), (2, 3, 4)),
    "tensor_where_scalar_other": case(lambda x: torch.where(x > 0, x, 0.5), (2, 3, 4)),
    "tensor_where_scalar_self": case(lambda x: torch.where(x > 0, -1.0, x * 2), (2, 3, 4)),
    "tensor_where_scalars": case(lambda x: torch.where(x > 0, 1.0, 0.0) + x, (2, 3, 4)),
    # the condition made by Tensor.to(torch.bool) (pnnx cannot take bool model inputs)
    "tensor_where_bool_cast": lambda: (
        Fn(lambda c, x, y: torch.where(c.bool(), x, y)),
        [torch.randint(0, 2, (2, 3, 4)).float(), torch.randn(2, 3, 4), torch.randn(1, 3, 1)],
    ),
    # one operand feeding two arguments: pnnx writes `3 1 2 1 1 3 $condition=2 $input=1 $other=1`
    "tensor_where_same_operand": case(lambda x, y: torch.where(x > 0, y, y) * 2, (2, 3), (2, 3)),
    "tensor_where_broadcast": case(lambda x, y: torch.where(x > 0, x, y), (2, 3, 4), (1, 3, 1)),
    # comparisons (bool results; the usual condition of torch.where)
    "tensor_gt": case(lambda x: (x > 0.25).float() * x, (2, 3, 4)),
    "tensor_lt_tensor": case(lambda x, y: torch.where(x < y, x, y * 2), (2, 3, 4), (1, 3, 1)),
    "tensor_ge": case(lambda x: torch.ge(x, -0.5).long(), (2, 3, 4)),
    "tensor_le_int": case(lambda x: torch.le((x * 3).long(), 1).float(), (2, 3, 4)),
    "tensor_eq": case(lambda x: torch.eq(torch.round(x), 0).float(), (2, 3, 4)),
    "tensor_ne_tensor": case(lambda x, y: torch.ne(torch.round(x), torch.round(y)).float(), (2, 3, 4), (2, 3, 4)),
    # arange (computed sizes), a constant tensor, writes into slices
    "tensor_arange_posenc": lambda: (
        PositionalEncoding(),
        [torch.randn(2, 5, 8)],  # no operands: see shape_setitem_*
        {"inputshape2": [(3, 7, 8)], "capture_operands": False},
    ),
    "tensor_constant_to": case(lambda x: torch.cat([x, x.new_zeros(x.size(0), 2)], 1) * torch.tensor(2.0), (3, 4)),
    # masked_fill
    "tensor_masked_fill": case(lambda x: x.masked_fill(x > 0.5, 0.25) * 2, (2, 3, 4)),
    "tensor_masked_fill_causal": lambda: (CausalMask(), [torch.randn(2, 6, 5)]),
    # embedding lookups (int64 indices)
    "tensor_embedding": lambda: (Embed(), [torch.randint(0, 20, (2, 7))]),
    "tensor_embedding_max_norm": lambda: (Embed(max_norm=2.0), [torch.randint(0, 20, (3, 4))]),
    # factories: with static shapes pnnx folds them into pnnx.Attribute constants, so they
    # are converted with dynamic shapes (inputshape2), where pnnx keeps the operators
    "tensor_zeros": dynamic(lambda x: torch.cat((x, torch.zeros(x.size(0), 2)), 1), [(2, 3)], [(5, 3)]),
    "tensor_ones": dynamic(lambda x: torch.ones(x.size(0), x.size(1), dtype=torch.long) + x, [(2, 3)], [(5, 3)]),
    "tensor_full": dynamic(lambda x: torch.full((x.size(0), 3), 2.5) * x, [(2, 3)], [(5, 3)]),
    "tensor_ones_like": dynamic(lambda x: torch.ones_like(x) * 2 + x, [(2, 3)], [(5, 3)]),
    "tensor_zeros_like": dynamic(lambda x: torch.zeros_like(x, dtype=torch.long) - x, [(2, 3)], [(5, 3)]),
    "tensor_full_like": dynamic(lambda x: torch.full_like(x, 3.0) * x, [(2, 3)], [(5, 3)]),
    "tensor_new_zeros": dynamic(lambda x: x.new_zeros((x.size(0), 3)) + x, [(2, 3)], [(5, 3)]),
    "tensor_new_ones": dynamic(lambda x: x.new_ones((x.size(0), 3)) * 2 + x, [(2, 3)], [(5, 3)]),
    # x.new_full(...): pnnx 20261020 leaves it as aten::new_full (not converted).
}
