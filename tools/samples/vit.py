"""A tiny Vision Transformer on 32x32 images.

Even blocks use nn.MultiheadAttention(batch_first=True); odd blocks spell attention out
with q/k/v linears, matmul and softmax, so both forms appear in one graph. The hand-written
form scales the scores by a learned per-head temperature: without it pnnx recognises the
textbook pattern and fuses it into nn.MultiheadAttention too.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import IMAGENET_PREPROCESS, Sample


class HandAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        # per-head temperature, starting near the usual 1/sqrt(head_dim)
        self.temperature = nn.Parameter(self.head_dim**-0.5 * (0.8 + 0.4 * torch.rand(1, heads, 1, 1)))
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q = self.q(x).reshape(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.k(x).reshape(b, n, self.heads, self.head_dim).permute(0, 2, 3, 1)
        v = self.v(x).reshape(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)
        attn = torch.softmax(torch.matmul(q, k) * self.temperature, dim=-1)
        out = torch.matmul(attn, v).permute(0, 2, 1, 3).reshape(b, n, c)
        return self.proj(out)


class TorchAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hand_written: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = HandAttention(dim, heads) if hand_written else TorchAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * 2)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(dim * 2, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ViTTiny(nn.Module):
    def __init__(
        self, img: int = 32, patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4, num_classes: int = 10
    ) -> None:
        super().__init__()
        n = (img // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, hand_written=i % 2 == 1) for i in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        with torch.no_grad():  # non-trivial LayerNorm affine parameters
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # B, N, C
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(6)
    return ViTTiny().eval(), torch.randn(1, 3, 32, 32)


SAMPLES = {
    "vit_tiny": Sample(
        build,
        {
            "description": "A tiny Vision Transformer: 4x4 patch embedding, class token and position embedding, "
            "four pre-norm blocks (nn.MultiheadAttention and hand-written q/k/v attention "
            "alternate) with GELU MLPs, and a 10-way head. Random weights.",
            "task": "classification",
            "input_shape": [1, 3, 32, 32],
            "image": True,
            "preprocess": IMAGENET_PREPROCESS,
            "labels": None,
            "trained": False,
        },
    ),
}
