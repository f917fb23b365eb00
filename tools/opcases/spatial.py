"""Spatial rearrangements: unfold/fold (im2col/col2im) with padding, dilation and stride,
affine_grid + grid_sample (modes, padding modes, align_corners), and the logical ops."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn, Wrap
from opcases.shape import case


def _warp(mode, padding_mode, align_corners):
    """A spatial transformer step: grid from theta (a model input), then sampling."""

    def fn(x, theta):
        grid = F.affine_grid(theta, [x.size(0), x.size(1), 5, 7], align_corners=align_corners)
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners) * 2

    return lambda: (Fn(fn), [torch.randn(2, 3, 6, 8), torch.randn(2, 2, 3) * 0.7])


CASES = {
    "spatial_unfold": case(lambda x: F.unfold(x, 3) * 2, (2, 3, 5, 6)),
    "spatial_unfold_pad_dil_stride": case(
        lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)) * 2, (1, 2, 7, 8)
    ),
    "spatial_fold_overlap": case(lambda x: F.fold(x, (5, 6), 3, padding=1) * 2, (2, 18, 30)),
    "spatial_fold_stride": case(lambda x: F.fold(x * 2, (6, 8), (2, 2), stride=2), (1, 12, 12)),
    "spatial_grid_bilinear_zeros": _warp("bilinear", "zeros", False),
    "spatial_grid_bilinear_border_align": _warp("bilinear", "border", True),
    "spatial_grid_nearest": _warp("nearest", "zeros", False),
    "spatial_grid_nearest_border_align": _warp("nearest", "border", True),
    "spatial_lp_pool2d": lambda: (Wrap(nn.LPPool2d(2, 2)), [torch.randn(2, 3, 6, 8)]),
    "spatial_lp_pool2d_p3_ceil": case(
        lambda x: F.lp_pool2d(x.abs(), 3.0, (2, 3), stride=2, ceil_mode=True) * 2, (1, 2, 7, 8)
    ),
    "spatial_logical_and": case(lambda x, y: torch.logical_and(x > 0, y > 0).float() * 2, (2, 3, 4), (2, 3, 4)),
    "spatial_logical_or_xor": case(
        lambda x, y: torch.logical_or(x > 0.5, torch.logical_xor(x > 0, y < 0)).float() + x, (2, 3, 4), (1, 3, 1)
    ),
}
