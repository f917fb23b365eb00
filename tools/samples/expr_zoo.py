"""Arithmetic that pnnx fuses into long pnnx.Expression operators, between a few convolutions.

Every operation is chosen to stay well defined for any input (denominators >= 1, square
roots of |x| + 1, exp of -|x|), and floor is applied to the raw input times a power of
two only, so rounding at an integer boundary cannot make engine and PyTorch disagree.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import Sample


class ExprZoo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, 8, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 8, 1)
        self.conv_d = nn.Conv2d(3, 10, 1)
        self.conv_c = nn.Conv2d(4, 4, 3, padding=1)
        self.conv_out = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        # Two-channel pieces (torch.tensor_split) as distinct expression inputs. Each piece
        # feeds one fused expression at most twice: pnnx 20261020 crashes now and then
        # (fuse_expression) when an operand appears three times in one expression.
        a0, a1, a2, a3 = torch.tensor_split(self.conv_a(x), 4, dim=1)
        b0, b1, b2, b3 = torch.tensor_split(self.conv_b(x), 4, dim=1)
        d0, d1, d2, d3, d4 = torch.tensor_split(self.conv_d(x), 5, dim=1)
        # add(div(mul(add(@0,@1),sub(@2,@3)),add(mul(@4,@4),1.0)),pow(@5,2)) and friends
        y1 = (a0 + a1) * (b0 - b1) / (a2 * a2 + 1.0) + b2**2
        y2 = torch.exp(-torch.abs(a3)) * 3.0 - torch.sqrt(torch.abs(b3) + 1.0)
        y3 = torch.rsqrt(d0 * d0 + 1.0) + torch.maximum(d1, d2) - torch.minimum(d3, d4) * 0.5
        y4 = torch.floor(x[:, 0:2] * 4.0) * 0.25 - 2.0 * x[:, 1:3] + 1.0
        h = torch.cat((y1 + y2, y3 * y4), dim=1)
        h = torch.relu(self.conv_c(h))
        # instance normalisation spelled out as mean + expression
        centred = h - h.mean(dim=(2, 3), keepdim=True)
        z = centred * torch.rsqrt((centred * centred).mean(dim=(2, 3), keepdim=True) + 1e-3)
        return self.conv_out(torch.tanh(z) * 0.5 + torch.sigmoid(h) - 0.25)


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(7)
    return ExprZoo().eval(), torch.randn(1, 3, 16, 16)


SAMPLES = {
    "expr_zoo": Sample(
        build,
        {
            "description": "A zoo of element-wise arithmetic (add, sub, mul, div, pow, exp, neg, abs, sqrt, rsqrt, "
            "floor, maximum, minimum) that pnnx fuses into long pnnx.Expression operators, between convolutions.",
            "task": "feature-map",
            "input_shape": [1, 3, 16, 16],
            "image": False,
            "preprocess": None,
            "labels": None,
            "trained": False,
        },
    ),
}
