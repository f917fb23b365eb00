"""Attention: nn.MultiheadAttention and F.scaled_dot_product_attention as pnnx writes them.

Where pnnx's generated *_pnnx.py computes something else than the model (a lone attn_weights
output is taken for attn_output; average_attn_weights=False is dropped), the case keeps no
operand references: {"capture_operands": False}.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

NO_OPERANDS = {"capture_operands": False}


@contextlib.contextmanager
def slow_mha() -> Iterator[None]:
    """Pin nn.MultiheadAttention to its slow path (same math) while tracing.

    Tracing runs with grad enabled (slow path) but check_trace re-runs under no_grad, where
    batch_first self-attention takes the fused fast path: the two traces differ and the
    export fails.
    """
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


class MHA(nn.Module):
    """Call `attn(query, key, value, ...)`; `pattern` says which example inputs fill q, k, v.

    pattern "qqq" = self-attention, "qkk" = key is value, "qkv" = three inputs; with
    mask=True the last example input is attn_mask. returns: "both", "output" or "weights".
    """

    def __init__(
        self,
        attn: nn.MultiheadAttention,
        pattern: str = "qqq",
        mask: bool = False,
        returns: str = "both",
        average: bool = True,
    ):
        super().__init__()
        self.attn = attn
        self.pattern, self.mask, self.returns, self.average = pattern, mask, returns, average

    def forward(self, *xs):
        named = dict(zip("qkv", xs))
        q, k, v = (named[c] for c in self.pattern)
        mask = xs[-1] if self.mask else None
        with slow_mha():
            y, w = self.attn(
                q, k, v, attn_mask=mask, need_weights=self.returns != "output", average_attn_weights=self.average
            )
        return {"both": (y, w), "output": y, "weights": w}[self.returns]


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer: pnnx keeps its self-attention as one nn.MultiheadAttention."""

    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(E, 4, dim_feedforward=32, dropout=0.0, batch_first=True)

    def forward(self, x):
        with slow_mha():
            return self.enc(x)


class SDPA(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.kwargs)


E = 16


def _seq(L: int, B: int, dim: int = E, batch_first: bool = False) -> torch.Tensor:
    return torch.randn(B, L, dim) if batch_first else torch.randn(L, B, dim)


CASES = {
    # nn.MultiheadAttention
    "attn_mha_self": lambda: (MHA(nn.MultiheadAttention(E, 4)), [_seq(5, 2)]),
    "attn_mha_self_bf_output": lambda: (
        MHA(nn.MultiheadAttention(E, 4, batch_first=True), returns="output"),
        [_seq(5, 3, batch_first=True)],
    ),
    "attn_mha_cross_bf_nobias": lambda: (
        MHA(nn.MultiheadAttention(E, 2, bias=False, batch_first=True), "qkk"),
        [_seq(5, 2, batch_first=True), _seq(7, 2, batch_first=True)],
    ),
    "attn_mha_kdim_vdim": lambda: (
        MHA(nn.MultiheadAttention(E, 4, kdim=6, vdim=10, batch_first=True), "qkv"),
        [_seq(5, 2, batch_first=True), _seq(7, 2, 6, True), _seq(7, 2, 10, True)],
    ),
    "attn_mha_qkv_distinct": lambda: (
        MHA(nn.MultiheadAttention(E, 4), "qkv"),
        [_seq(4, 2), _seq(6, 2), _seq(6, 2)],
    ),
    "attn_mha_float_mask": lambda: (
        MHA(nn.MultiheadAttention(E, 4, batch_first=True), "qkk", mask=True),
        [_seq(5, 2, batch_first=True), _seq(7, 2, batch_first=True), torch.randn(5, 7)],
    ),
    "attn_mha_mask_3d": lambda: (
        MHA(nn.MultiheadAttention(E, 4), "qqq", mask=True),
        [_seq(5, 2), torch.randn(2 * 4, 5, 5)],
    ),
    "attn_mha_head_weights": lambda: (
        MHA(nn.MultiheadAttention(E, 4, batch_first=True), "qkk", average=False),
        [_seq(5, 2, batch_first=True), _seq(6, 2, batch_first=True)],
        NO_OPERANDS,  # pnnx's *_pnnx.py drops average_attn_weights=False
    ),
    "attn_mha_weights_only": lambda: (
        MHA(nn.MultiheadAttention(E, 4), "qkk", returns="weights"),
        [_seq(5, 2), _seq(6, 2)],
        NO_OPERANDS,
    ),
    "attn_mha_unbatched": lambda: (MHA(nn.MultiheadAttention(E, 4)), [torch.randn(5, E)]),
    "attn_mha_bias_kv_zero_attn": lambda: (
        MHA(nn.MultiheadAttention(E, 4, add_bias_kv=True, add_zero_attn=True), "qkk", mask=True),
        [_seq(5, 2), _seq(6, 2), torch.randn(5, 6)],
    ),
    "attn_transformer_encoder_layer": lambda: (EncoderLayer(), [_seq(6, 2, batch_first=True)]),
    # F.scaled_dot_product_attention
    "attn_sdpa": lambda: (SDPA(), [torch.randn(2, 4, 5, 8), torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 6)]),
    "attn_sdpa_causal_scale": lambda: (
        SDPA(is_causal=True, scale=0.3),
        [torch.randn(2, 4, 5, 8), torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 8)],
    ),
    "attn_sdpa_float_mask": lambda: (
        SDPA(),
        [torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 1, 5, 6)],
    ),
    "attn_sdpa_3d": lambda: (SDPA(), [torch.randn(3, 5, 8), torch.randn(3, 6, 8), torch.randn(3, 6, 8)]),
    "attn_sdpa_gqa": lambda: (
        SDPA(enable_gqa=True),
        [torch.randn(2, 4, 5, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)],
    ),
}
