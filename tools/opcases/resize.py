"""Resizing and padding: Upsample / interpolate (nearest, linear family, bicubic), pixel
shuffle, and the padding modules and F.pad.

Sizes are chosen odd and non-multiples so that index rounding, align_corners and
recompute_scale_factor all change the answer.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn, Wrap


def x4(n: int = 2, c: int = 3, h: int = 5, w: int = 7) -> torch.Tensor:
    return torch.randn(n, c, h, w)


def x3(n: int = 2, c: int = 3, w: int = 7) -> torch.Tensor:
    return torch.randn(n, c, w)


def x5() -> torch.Tensor:
    return torch.randn(2, 2, 3, 4, 5)


def interp(**kw) -> Fn:
    return Fn(lambda x: F.interpolate(x, **kw))


def pad(p, mode="constant", value=None) -> Fn:
    if value is None:
        return Fn(lambda x: F.pad(x, p, mode=mode))
    return Fn(lambda x: F.pad(x, p, mode=mode, value=value))


CASES = {
    # nn.Upsample and friends
    "resize_upsample_nearest_x2": lambda: (Wrap(nn.Upsample(scale_factor=2, mode="nearest")), [x4()]),
    "resize_upsample_nearest_size": lambda: (Wrap(nn.Upsample(size=(8, 11), mode="nearest")), [x4()]),
    "resize_upsample_nearest_down": lambda: (Wrap(nn.Upsample(size=(3, 4), mode="nearest")), [x4()]),
    "resize_upsample_nearest_frac": lambda: (Wrap(nn.Upsample(scale_factor=1.7, mode="nearest")), [x4()]),
    "resize_upsample_nearest_xy": lambda: (Wrap(nn.Upsample(scale_factor=(2.0, 3.0))), [x4()]),
    "resize_upsample_bilinear_x2": lambda: (Wrap(nn.Upsample(scale_factor=2, mode="bilinear")), [x4()]),
    "resize_upsample_bilinear_x2_ac": lambda: (
        Wrap(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)),
        [x4()],
    ),
    "resize_upsample_bilinear_size": lambda: (Wrap(nn.Upsample(size=(9, 4), mode="bilinear")), [x4()]),
    "resize_upsample_bilinear_size_ac": lambda: (
        Wrap(nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True)),
        [x4()],
    ),
    "resize_upsample_bilinear_frac": lambda: (Wrap(nn.Upsample(scale_factor=1.3, mode="bilinear")), [x4()]),
    "resize_upsample_bicubic": lambda: (Wrap(nn.Upsample(scale_factor=2, mode="bicubic")), [x4()]),
    "resize_upsample_bicubic_ac": lambda: (
        Wrap(nn.Upsample(size=(7, 10), mode="bicubic", align_corners=True)),
        [x4()],
    ),
    "resize_upsample_linear_1d": lambda: (Wrap(nn.Upsample(scale_factor=2.5, mode="linear")), [x3()]),
    "resize_upsample_nearest_1d": lambda: (Wrap(nn.Upsample(size=12, mode="nearest")), [x3()]),
    "resize_upsample_trilinear": lambda: (Wrap(nn.Upsample(scale_factor=2, mode="trilinear")), [x5()]),
    "resize_upsample_nearest_3d": lambda: (Wrap(nn.Upsample(size=(4, 6, 7), mode="nearest")), [x5()]),
    "resize_upsampling_nearest2d": lambda: (Wrap(nn.UpsamplingNearest2d(scale_factor=3)), [x4()]),
    "resize_upsampling_nearest2d_size": lambda: (Wrap(nn.UpsamplingNearest2d(size=(6, 9))), [x4()]),
    "resize_upsampling_bilinear2d": lambda: (Wrap(nn.UpsamplingBilinear2d(scale_factor=2)), [x4()]),
    "resize_upsampling_bilinear2d_size": lambda: (Wrap(nn.UpsamplingBilinear2d(size=(8, 5))), [x4()]),
    # F.interpolate and the deprecated F.upsample*
    "resize_f_interpolate_nearest": lambda: (interp(scale_factor=2, mode="nearest"), [x4()]),
    "resize_f_interpolate_nearest_size": lambda: (interp(size=(7, 10)), [x4()]),
    "resize_f_interpolate_nearest_frac": lambda: (interp(scale_factor=1.6), [x4()]),
    "resize_f_interpolate_nearest_frac_recompute": lambda: (
        interp(scale_factor=1.6, recompute_scale_factor=True),
        [x4()],
    ),
    "resize_f_interpolate_nearest_exact": lambda: (interp(scale_factor=1.6, mode="nearest-exact"), [x4()]),
    "resize_f_interpolate_bilinear": lambda: (interp(scale_factor=2, mode="bilinear"), [x4()]),
    "resize_f_interpolate_bilinear_ac": lambda: (
        interp(size=(11, 6), mode="bilinear", align_corners=True),
        [x4()],
    ),
    "resize_f_interpolate_bilinear_frac": lambda: (interp(scale_factor=(1.7, 0.6), mode="bilinear"), [x4()]),
    "resize_f_interpolate_bilinear_frac_recompute": lambda: (
        interp(scale_factor=(1.7, 0.6), mode="bilinear", recompute_scale_factor=True),
        [x4()],
    ),
    "resize_f_interpolate_bilinear_down": lambda: (interp(size=(3, 3), mode="bilinear"), [x4()]),
    "resize_f_interpolate_bicubic": lambda: (interp(scale_factor=1.5, mode="bicubic"), [x4()]),
    "resize_f_interpolate_linear": lambda: (interp(size=13, mode="linear", align_corners=True), [x3()]),
    "resize_f_upsample": lambda: (Fn(lambda x: F.upsample(x, scale_factor=2, mode="bilinear")), [x4()]),
    "resize_f_upsample_nearest": lambda: (Fn(lambda x: F.upsample_nearest(x, scale_factor=2)), [x4()]),
    "resize_f_upsample_bilinear": lambda: (Fn(lambda x: F.upsample_bilinear(x, size=(7, 9))), [x4()]),
    "resize_f_interpolate_like_other": lambda: (
        Fn(lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="bilinear", align_corners=False) + y),
        [x4(), x4(h=9, w=12)],
    ),
    "resize_f_interpolate_nearest_like_other": lambda: (
        Fn(lambda x, y: F.interpolate(x, size=(y.size(2), y.size(3))) * y),
        [x4(), x4(h=9, w=12)],
    ),
    # pixel shuffle
    "resize_pixelshuffle": lambda: (Wrap(nn.PixelShuffle(2)), [x4(c=8, h=3, w=4)]),
    "resize_pixelunshuffle": lambda: (Wrap(nn.PixelUnshuffle(2)), [x4(c=3, h=4, w=6)]),
    "resize_f_pixel_shuffle": lambda: (Fn(lambda x: F.pixel_shuffle(x, 3)), [x4(c=9, h=2, w=3)]),
    "resize_f_pixel_unshuffle": lambda: (Fn(lambda x: F.pixel_unshuffle(x, 3)), [x4(c=2, h=6, w=3)]),
    # channel shuffle (ShuffleNet)
    "resize_channelshuffle": lambda: (Wrap(nn.ChannelShuffle(3)), [x4(c=6, h=3, w=4)]),
    # padding modules
    "resize_zeropad2d": lambda: (Wrap(nn.ZeroPad2d((1, 2, 0, 3))), [x4()]),
    "resize_constantpad2d": lambda: (Wrap(nn.ConstantPad2d(2, 1.5)), [x4()]),
    "resize_constantpad1d": lambda: (Wrap(nn.ConstantPad1d((3, 1), -1.0)), [x3()]),
    "resize_constantpad3d": lambda: (Wrap(nn.ConstantPad3d((1, 0, 2, 1, 0, 1), 0.5)), [x5()]),
    "resize_reflectionpad2d": lambda: (Wrap(nn.ReflectionPad2d((2, 1, 3, 0))), [x4()]),
    "resize_reflectionpad1d": lambda: (Wrap(nn.ReflectionPad1d(2)), [x3()]),
    "resize_replicationpad2d": lambda: (Wrap(nn.ReplicationPad2d((0, 3, 1, 2))), [x4()]),
    "resize_replicationpad1d": lambda: (Wrap(nn.ReplicationPad1d((1, 4))), [x3()]),
    "resize_replicationpad3d": lambda: (Wrap(nn.ReplicationPad3d(1)), [x5()]),
    "resize_zeropad1d": lambda: (Wrap(nn.ZeroPad1d((2, 1))), [x3()]),
    "resize_zeropad3d": lambda: (Wrap(nn.ZeroPad3d((1, 0, 0, 2, 1, 1))), [x5()]),
    "resize_reflectionpad3d": lambda: (Wrap(nn.ReflectionPad3d((1, 2, 0, 1, 2, 1))), [x5()]),
    "resize_circularpad1d": lambda: (Wrap(nn.CircularPad1d((2, 3))), [x3()]),
    "resize_circularpad3d": lambda: (Wrap(nn.CircularPad3d(1)), [x5()]),
    "resize_circularpad2d": lambda: (Wrap(nn.CircularPad2d((1, 2, 2, 1))), [x4()]),
    # F.pad
    "resize_f_pad_constant": lambda: (pad((1, 2, 3, 4), value=0.25), [x4()]),
    "resize_f_pad_last_dim": lambda: (pad((2, 3)), [x4()]),
    "resize_f_pad_channels": lambda: (pad((1, 1, 0, 2, 1, 0), value=-2.0), [x4()]),
    "resize_f_pad_batch_too": lambda: (pad((0, 0, 0, 0, 0, 0, 1, 1)), [x4()]),
    "resize_f_pad_negative": lambda: (pad((-1, 2, 1, -2)), [x4()]),
    "resize_f_pad_2d_input": lambda: (pad((1, 2, 2, 0), value=3.0), [torch.randn(3, 4)]),
    "resize_f_pad_reflect": lambda: (pad((2, 3, 1, 4), mode="reflect"), [x4()]),
    "resize_f_pad_reflect_1d": lambda: (pad((3, 2), mode="reflect"), [x3()]),
    "resize_f_pad_replicate": lambda: (pad((3, 0, 2, 5), mode="replicate"), [x4()]),
    "resize_f_pad_replicate_3d": lambda: (pad((1, 2, 0, 1, 2, 0), mode="replicate"), [x5()]),
    "resize_f_pad_circular": lambda: (pad((2, 1, 1, 3), mode="circular"), [x4()]),
    "resize_f_pad_circular_1d": lambda: (pad((3, 2), mode="circular"), [x3()]),
    "resize_f_pad_replicate_negative": lambda: (pad((2, -1, -2, 3), mode="replicate"), [x4()]),
    "resize_f_pad_circular_negative": lambda: (pad((-1, 2, 3, -2), mode="circular"), [x4()]),
    "resize_f_pad_reflect_negative": lambda: (pad((-1, 2, 2, -1), mode="reflect"), [x4()]),
}
