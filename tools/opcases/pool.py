"""Pooling: max / average / adaptive, nn.* and F.*, 1-D and 2-D, every option.

Inputs are non-square with sizes that do not divide evenly, so ceil_mode, padding and
adaptive windows of unequal length all matter; batch 2 throughout.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn, Wrap


class MaxWithIndices(nn.Module):
    """Both outputs used, so pnnx keeps the int64 indices."""

    def __init__(self, pool: nn.Module):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        y, i = self.pool(x)
        return y, i


X2 = (2, 3, 11, 10)
X1 = (2, 3, 23)


def case(module, shape=X2):
    return lambda: (module, [torch.randn(*shape)])


CASES = {
    # max
    "pool_max2d_basic": case(Wrap(nn.MaxPool2d(2))),
    "pool_max2d_pad_ceil": case(Wrap(nn.MaxPool2d(3, 2, 1, ceil_mode=True))),
    "pool_max2d_asym_dilation": case(Wrap(nn.MaxPool2d((2, 3), (1, 2), (1, 0), dilation=(2, 1)))),
    "pool_max2d_dilation_ceil": case(Wrap(nn.MaxPool2d(3, 2, 1, dilation=2, ceil_mode=True))),
    "pool_max2d_resnet_stem": case(Wrap(nn.MaxPool2d(3, 2, 1)), (1, 8, 112, 112)),
    "pool_max2d_indices": case(MaxWithIndices(nn.MaxPool2d(3, 2, 1, return_indices=True))),
    "pool_max1d": case(Wrap(nn.MaxPool1d(3, 2, 1, ceil_mode=True)), X1),
    "pool_max1d_dilation": case(Wrap(nn.MaxPool1d(2, 3, dilation=3)), X1),
    "pool_max2d_unbatched": case(Wrap(nn.MaxPool2d(3, 2)), (3, 11, 10)),
    "pool_f_max_pool2d": case(Fn(F.max_pool2d, 2)),
    "pool_f_max_pool2d_opts": case(Fn(F.max_pool2d, 3, 2, 1, dilation=1, ceil_mode=True)),
    "pool_f_max_pool1d": case(Fn(F.max_pool1d, 4, 3, 2), X1),
    # average
    "pool_avg2d_basic": case(Wrap(nn.AvgPool2d(2))),
    "pool_avg2d_pad_ceil_exclude": case(Wrap(nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False))),
    "pool_avg2d_pad_ceil_include": case(Wrap(nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=True))),
    "pool_avg2d_divisor_override": case(Wrap(nn.AvgPool2d((3, 2), None, (1, 1), divisor_override=5))),
    "pool_avg2d_asym": case(Wrap(nn.AvgPool2d((3, 4), (2, 1), (1, 2)))),
    "pool_avg1d": case(Wrap(nn.AvgPool1d(3, 2, 1, ceil_mode=True)), X1),
    "pool_avg1d_exclude": case(Wrap(nn.AvgPool1d(4, 3, 2, count_include_pad=False)), X1),
    "pool_f_avg_pool2d": case(Fn(F.avg_pool2d, 3, 1, 1, count_include_pad=False)),
    "pool_f_avg_pool2d_override": case(Fn(F.avg_pool2d, 2, ceil_mode=True, divisor_override=3)),
    "pool_f_avg_pool1d": case(Fn(F.avg_pool1d, 3), X1),
    # adaptive average
    "pool_adaptive_avg2d": case(Wrap(nn.AdaptiveAvgPool2d((3, 4)))),
    "pool_adaptive_avg2d_global": case(Wrap(nn.AdaptiveAvgPool2d(1))),
    "pool_adaptive_avg2d_none": case(Wrap(nn.AdaptiveAvgPool2d((None, 3)))),
    "pool_adaptive_avg2d_upsize": case(Wrap(nn.AdaptiveAvgPool2d((13, 7)))),
    "pool_adaptive_avg1d": case(Wrap(nn.AdaptiveAvgPool1d(5)), X1),
    "pool_f_adaptive_avg_pool2d": case(Fn(F.adaptive_avg_pool2d, (2, 3))),
    "pool_f_adaptive_avg_pool2d_global": case(Fn(F.adaptive_avg_pool2d, 1)),
    "pool_f_adaptive_avg_pool1d": case(Fn(F.adaptive_avg_pool1d, 4), X1),
    # adaptive max
    "pool_adaptive_max2d": case(Wrap(nn.AdaptiveMaxPool2d((3, 4)))),
    "pool_adaptive_max2d_none": case(Wrap(nn.AdaptiveMaxPool2d((3, None)))),
    "pool_adaptive_max2d_indices": case(MaxWithIndices(nn.AdaptiveMaxPool2d((4, 3), return_indices=True))),
    "pool_adaptive_max1d": case(Wrap(nn.AdaptiveMaxPool1d(6)), X1),
    "pool_f_adaptive_max_pool2d": case(Fn(F.adaptive_max_pool2d, (2, 3))),
    "pool_f_adaptive_max_pool1d": case(Fn(F.adaptive_max_pool1d, 5), X1),
}
