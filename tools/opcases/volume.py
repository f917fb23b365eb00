"""3-D (volumetric) convolution and pooling over (N, C, D, H, W)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Wrap
from opcases.shape import case


def _conv(**kwargs):
    def build():
        torch.manual_seed(3)
        return Wrap(nn.Conv3d(**kwargs)), [torch.randn(2, kwargs["in_channels"], 5, 6, 7)]

    return build


CASES = {
    "volume_conv3d": _conv(in_channels=2, out_channels=3, kernel_size=3),
    "volume_conv3d_stride_pad": _conv(
        in_channels=2, out_channels=4, kernel_size=(1, 3, 2), stride=(1, 2, 2), padding=(0, 1, 1)
    ),
    "volume_conv3d_groups_dilation_nobias": _conv(
        in_channels=4, out_channels=6, kernel_size=2, groups=2, dilation=2, bias=False
    ),
    # numbers, 'same' and every padding_mode since Conv3d runs on conv.py's 2-D kernels
    "volume_conv3d_same_reflect": _conv(
        in_channels=3, out_channels=4, kernel_size=(3, 3, 2), padding="same", padding_mode="reflect"
    ),
    "volume_conv3d_pad_circular": _conv(
        in_channels=2, out_channels=3, kernel_size=3, padding=(1, 2, 1), padding_mode="circular"
    ),
    "volume_conv3d_pad_replicate_stride": _conv(
        in_channels=2, out_channels=3, kernel_size=3, stride=2, padding=1, padding_mode="replicate"
    ),
    "volume_conv3d_depthwise": _conv(in_channels=8, out_channels=8, kernel_size=3, padding=1, groups=8),
    "volume_conv3d_valid_dilation": _conv(
        in_channels=3, out_channels=5, kernel_size=2, padding="valid", dilation=(2, 1, 2)
    ),
    "volume_conv_transpose3d": lambda: (Wrap(nn.ConvTranspose3d(3, 2, 2, stride=2)), [torch.randn(2, 3, 2, 3, 4)]),
    "volume_conv_transpose3d_pad_outpad_groups": lambda: (
        Wrap(nn.ConvTranspose3d(4, 6, 3, stride=(1, 2, 2), padding=1, output_padding=(0, 1, 0), groups=2)),
        [torch.randn(1, 4, 3, 4, 5)],
    ),
    "volume_conv_transpose3d_dilation_nobias": lambda: (
        Wrap(nn.ConvTranspose3d(2, 3, 2, dilation=2, bias=False)),
        [torch.randn(1, 2, 3, 3, 2)],
    ),
    "volume_max_pool3d": case(lambda x: F.max_pool3d(x, 2) * 2, (2, 3, 4, 6, 7)),
    "volume_max_pool3d_pad_ceil_dil": case(
        lambda x: F.max_pool3d(x, 3, stride=2, padding=1, dilation=(1, 1, 2), ceil_mode=True) * 2, (1, 2, 5, 6, 9)
    ),
    "volume_avg_pool3d": case(lambda x: F.avg_pool3d(x, (1, 2, 2)) * 2, (2, 3, 4, 6, 6)),
    "volume_avg_pool3d_pad_exclude_ceil": case(
        lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False) * 2, (1, 2, 5, 6, 8)
    ),
    "volume_avg_pool3d_divisor": case(lambda x: F.avg_pool3d(x, 2, divisor_override=3) * 2, (1, 2, 4, 4, 6)),
    "volume_adaptive_avg_pool3d": case(lambda x: F.adaptive_avg_pool3d(x, (2, 3, None)) * 2, (2, 3, 5, 7, 4)),
    "volume_adaptive_avg_pool3d_global": lambda: (Wrap(nn.AdaptiveAvgPool3d(1)), [torch.randn(2, 3, 4, 5, 6)]),
    "volume_adaptive_max_pool3d": case(lambda x: F.adaptive_max_pool3d(x, (3, 2, 2)) * 2, (2, 3, 5, 7, 4)),
    "volume_adaptive_max_pool3d_indices": case(
        lambda x: tuple(t * 2 for t in F.adaptive_max_pool3d(x, 2, True)), (1, 2, 5, 3, 4)
    ),
}
