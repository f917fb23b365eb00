"""Convolutions: nn.Conv1d/2d, nn.ConvTranspose1d/2d and the F.* forms, every option.

Weights and biases are torch's random init (seeded by the exporter); inputs are
non-square and batch 2 where the layer allows, so a transposed axis or a dropped batch
fails. What pnnx writes for each option is listed in kuiper_core/layers/conv.py.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Wrap


def conv2d(x_shape=(2, 4, 11, 9), **kw):
    kw.setdefault("in_channels", x_shape[1])
    return lambda: (Wrap(nn.Conv2d(**kw)), [torch.randn(*x_shape)])


def conv1d(x_shape=(2, 4, 13), **kw):
    kw.setdefault("in_channels", x_shape[1])
    return lambda: (Wrap(nn.Conv1d(**kw)), [torch.randn(*x_shape)])


class FConv2dParamWeight(nn.Module):
    """F.conv2d with parameter weights: pnnx turns it into nn.Conv2d."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 2, 3, 3))
        self.b = nn.Parameter(torch.randn(6))

    def forward(self, x):
        return F.conv2d(x, self.w, self.b, stride=(2, 1), padding=(1, 2), groups=2)


class FConv2dInputs(nn.Module):
    """F.conv2d whose weight/bias are graph inputs: stays F.conv2d with $weight/$bias."""

    def forward(self, x, w, b):
        return (
            F.conv2d(x, w, b, stride=2, padding=1, groups=2),
            F.conv2d(x, w, None, padding="same", dilation=(1, 2), groups=2),
            F.conv2d(x, w, b, padding="valid", groups=2),
        )


class FConv2dSharedWeight(nn.Module):
    """A weight parameter used twice: does pnnx keep it as a pnnx.Attribute operand?"""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 3, 3, 3))

    def forward(self, x):
        return F.conv2d(x, self.w, stride=1, padding=1), F.conv2d(x, self.w, stride=2)


class FConv2dComputedWeight(nn.Module):
    """A weight that depends on the input: F.conv2d fed by pnnx.Attribute -> pnnx.Expression."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 3, 3, 3))

    def forward(self, x):
        return F.conv2d(x, self.w * x.mean(), stride=1, padding=1)


class FConv1dInputs(nn.Module):
    def forward(self, x, w, b):
        return F.conv1d(x, w, b, stride=2, padding=1, dilation=2), F.conv1d(x, w, None, padding="same")


class FConvTransposeInputs(nn.Module):
    def forward(self, x, w1, w2, b2):
        y1 = F.conv_transpose1d(x, w1, stride=2, padding=1, output_padding=1)
        y2 = F.conv_transpose2d(x.unsqueeze(2).repeat(1, 1, 3, 1), w2, b2, stride=(1, 2), padding=(0, 1), groups=2)
        return y1, y2


class ConvUnbatched(nn.Module):
    """torch accepts (C, H, W) without a batch: pnnx keeps the 3-D shapes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.conv1 = nn.Conv1d(3, 4, 3)

    def forward(self, x):
        return self.conv(x), self.conv1(x[:, 0])


CASES = {
    # nn.Conv2d
    "conv_2d_basic": conv2d(out_channels=6, kernel_size=3),
    "conv_2d_pad_stride": conv2d(out_channels=5, kernel_size=3, stride=2, padding=1),
    "conv_2d_asym": conv2d(out_channels=5, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    "conv_2d_nobias": conv2d(out_channels=6, kernel_size=3, padding=1, bias=False),
    "conv_2d_wide": conv2d(out_channels=24, kernel_size=3, padding=1),
    "conv_2d_wide_dilation_reflect": conv2d(
        out_channels=20, kernel_size=3, padding=(2, 1), dilation=(2, 1), padding_mode="reflect"
    ),
    "conv_2d_groups": conv2d(out_channels=6, kernel_size=3, padding=1, groups=2),
    "conv_2d_depthwise": conv2d(x_shape=(2, 6, 11, 9), out_channels=6, kernel_size=3, padding=1, groups=6),
    "conv_2d_depthwise_mult": conv2d(out_channels=8, kernel_size=3, stride=2, padding=1, groups=4),
    "conv_2d_dilation": conv2d(out_channels=4, kernel_size=3, padding=2, dilation=2),
    "conv_2d_pointwise": conv2d(out_channels=7, kernel_size=1),
    "conv_2d_pointwise_stride": conv2d(out_channels=7, kernel_size=1, stride=2, bias=False),
    "conv_2d_pointwise_groups": conv2d(out_channels=6, kernel_size=1, groups=2),
    "conv_2d_large_kernel": conv2d(x_shape=(1, 3, 32, 30), out_channels=8, kernel_size=7, stride=2, padding=3),
    "conv_2d_reflect": conv2d(out_channels=5, kernel_size=3, padding=1, padding_mode="reflect"),
    "conv_2d_replicate": conv2d(out_channels=5, kernel_size=(3, 5), padding=(1, 2), padding_mode="replicate"),
    "conv_2d_circular": conv2d(out_channels=5, kernel_size=3, padding=2, padding_mode="circular"),
    "conv_2d_same": conv2d(out_channels=5, kernel_size=3, padding="same"),
    "conv_2d_same_even": conv2d(out_channels=5, kernel_size=4, padding="same"),
    "conv_2d_same_even_reflect": conv2d(
        out_channels=5, kernel_size=(2, 3), padding="same", dilation=(1, 2), padding_mode="reflect"
    ),
    "conv_2d_valid": conv2d(out_channels=5, kernel_size=3, padding="valid", padding_mode="circular"),
    "conv_2d_unbatched": lambda: (ConvUnbatched(), [torch.randn(3, 7, 6)]),
    # nn.Conv1d
    "conv_1d_basic": conv1d(out_channels=6, kernel_size=3, padding=1),
    "conv_1d_stride_dil_groups": conv1d(out_channels=8, kernel_size=3, stride=2, dilation=2, groups=2, bias=False),
    "conv_1d_same_even_reflect": conv1d(out_channels=4, kernel_size=4, padding="same", padding_mode="reflect"),
    "conv_1d_circular": conv1d(out_channels=4, kernel_size=3, padding=1, padding_mode="circular"),
    # nn.ConvTranspose2d / 1d
    "conv_transpose_2d_basic": lambda: (Wrap(nn.ConvTranspose2d(4, 6, 3)), [torch.randn(2, 4, 5, 7)]),
    "conv_transpose_2d_stride_pad": lambda: (
        Wrap(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)),
        [torch.randn(2, 4, 5, 7)],
    ),
    "conv_transpose_2d_asym_groups": lambda: (
        Wrap(
            nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(0, 2), groups=2, bias=False)
        ),
        [torch.randn(2, 4, 5, 7)],
    ),
    "conv_transpose_2d_dilation": lambda: (
        Wrap(nn.ConvTranspose2d(4, 4, 3, stride=2, padding=2, dilation=2, output_padding=1, groups=4)),
        [torch.randn(2, 4, 5, 7)],
    ),
    "conv_transpose_2d_k2s2": lambda: (Wrap(nn.ConvTranspose2d(8, 4, 2, stride=2)), [torch.randn(1, 8, 6, 5)]),
    "conv_transpose_1d": lambda: (
        Wrap(nn.ConvTranspose1d(4, 3, 3, stride=2, padding=1, output_padding=1)),
        [torch.randn(2, 4, 9)],
    ),
    # F.* forms
    "conv_f_conv2d_param_weight": lambda: (FConv2dParamWeight(), [torch.randn(2, 4, 9, 8)]),
    "conv_f_conv2d_inputs": lambda: (
        FConv2dInputs(),
        [torch.randn(2, 4, 9, 8), torch.randn(6, 2, 3, 3), torch.randn(6)],
    ),
    "conv_f_conv2d_computed_weight": lambda: (FConv2dComputedWeight(), [torch.randn(1, 3, 8, 8)]),
    "conv_f_conv2d_shared_weight": lambda: (FConv2dSharedWeight(), [torch.randn(1, 3, 8, 8)]),
    "conv_f_conv1d_inputs": lambda: (FConv1dInputs(), [torch.randn(2, 4, 12), torch.randn(5, 4, 3), torch.randn(5)]),
    "conv_f_conv_transpose_inputs": lambda: (
        FConvTransposeInputs(),
        [torch.randn(2, 4, 6), torch.randn(4, 3, 3), torch.randn(4, 3, 2, 3), torch.randn(6)],
    ),
}
