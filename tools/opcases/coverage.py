"""One real export for each registered type no other family reaches (tests/test_layer_index.py
checks that every registered type has one).

Most need a low optlevel (dropout and TorchScript's aten:: math survive only at optlevel 0/1),
a scripted module (aten::Float / aten::Bool: tracing folds float(t) into a constant) or an
older pnnx release (tools/old_pnnx.py: Tensor.view, Tensor.contiguous, aten::unflatten and
aten::_upsample_nearest_exact*d before late 2025; torch.permute, aten::where/tile/reshape_as/
logical_* in early 2024; the case's folder has a README.md saying which).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn


def case(fn, *shapes, **options):
    """fn of float inputs of these shapes, converted with these export options."""
    return lambda: (Fn(fn), [torch.randn(*s) for s in shapes], options)


class Twice(nn.Module):
    """layer(x) * 2: the layer a submodule (so pnnx sees the module), its output used."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x) * 2


def module(layer, shape, **options):
    """An nn layer applied to one input, times 2; its parameters (an affine norm's) random."""

    def build():
        for p in layer.parameters():
            nn.init.normal_(p)
        return Twice(layer), [torch.randn(*shape)], options

    return build


def ints(fn, shape, dtype=torch.int64, **options):
    """fn of two integer (or bool) tensors."""
    high = 2 if dtype == torch.bool else 16
    return lambda: (Fn(fn), [torch.randint(0, high, shape).to(dtype) for _ in range(2)], options)


def scripted(cls, shape, **options):
    """A torch.jit.script'ed module (export_module's trace leaves it as it is)."""
    return lambda: (torch.jit.script(cls()), [torch.randn(*shape)], options)


def in_unit(fn, shape, **options):
    """fn of one input in (-0.9, 0.9): the domain of acos, asin, atanh."""
    return lambda: (Fn(fn), [torch.rand(*shape) * 1.8 - 0.9], options)


class FloatOfSum(nn.Module):
    def forward(self, x):
        return x / float(x.abs().sum())  # aten::Float of a 0-d tensor


class FloatOfBool(nn.Module):
    def forward(self, x):
        return x * float(bool(x.size(1))) + 1  # aten::Bool of an int, then aten::Float


# O2 through the converter CLI: pnnx.export's own run of its generated Python fails on a
# syntax error (clamp_min) or on bool inputs it declares f32.
O0, O1, O2 = {"optlevel": 0}, {"optlevel": 1}, {"optlevel": 2}

CASES = {
    # dropout at inference: pnnx keeps it at optlevel 0/1 (F.dropoutnd is its optlevel-0 name for dropout1d)
    "cov_f_dropoutnd": case(lambda x: F.dropout1d(x, 0.3, training=False) * 2, (2, 3, 5), **O0),
    "cov_f_dropout2d_of_dropout1d": module(nn.Dropout1d(0.3), (2, 3, 5), **O1),
    "cov_f_dropout3d": case(lambda x: F.dropout3d(x, 0.3, training=False) * 2, (2, 3, 2, 3, 4), **O1),
    "cov_nn_dropout3d": module(nn.Dropout3d(0.3), (2, 3, 2, 3, 4), **O1),
    "cov_f_alpha_dropout": case(lambda x: F.alpha_dropout(x, 0.2, training=False) * 2, (2, 3, 5), **O1),
    "cov_f_feature_alpha_dropout": module(nn.FeatureAlphaDropout(0.2), (2, 3, 5), **O1),
    # F.rrelu at inference: leaky ReLU with slope (lower + upper) / 2
    "cov_f_rrelu": case(lambda x: F.rrelu(x, 0.1, 0.3) * 2, (2, 3, 5)),
    # 3-D modules (volume.py covers the F.* forms)
    "cov_nn_avg_pool3d": module(nn.AvgPool3d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 5, 6, 7)),
    "cov_nn_adaptive_max_pool3d": module(nn.AdaptiveMaxPool3d((2, 3, 2)), (2, 3, 5, 7, 4)),
    "cov_nn_instance_norm3d": module(nn.InstanceNorm3d(3, affine=True), (2, 3, 3, 4, 5)),
    # TorchScript math pnnx leaves as aten::* at optlevel 0
    "cov_aten_acos_asin_atanh": in_unit(lambda x: torch.acos(x) + torch.asin(x) * torch.atanh(x), (2, 3, 4), **O0),
    "cov_aten_acosh_asinh": case(lambda x: torch.acosh(x.abs() + 1) - torch.asinh(x), (2, 3, 4), **O0),
    "cov_aten_cosh_sinh_tan": case(lambda x: torch.cosh(x) - torch.sinh(x) * torch.tan(x), (2, 3, 4), **O0),
    "cov_aten_expm1_log1p": case(lambda x: torch.expm1(x) + torch.log1p(x.abs()), (2, 3, 4), **O0),
    "cov_aten_max_min_logaddexp": case(
        lambda x, y: torch.max(x, y) - torch.min(x, y) * torch.logaddexp(x, y), (2, 3, 4), (3, 1), **O0
    ),
    # torch.clamp_min / clamp_max stay aten:: at every optlevel
    "cov_aten_clamp_min_max": case(lambda x: torch.clamp_min(x, -0.5) + torch.clamp_max(x, 0.25), (2, 3, 4), **O2),
    "cov_aten_clamp_min_max_o0": case(lambda x: torch.clamp_max(torch.clamp_min(x, -0.5), 0.25), (2, 3, 4), **O0),
    # bitwise functions (a & b is aten::__and__, expression.py's expr_int_bitwise)
    "cov_torch_bitwise_int": ints(
        lambda a, b: torch.bitwise_xor(torch.bitwise_and(a, b), torch.bitwise_or(a, 5)), (2, 3, 4)
    ),
    "cov_torch_bitwise_bool": ints(
        lambda a, b: torch.bitwise_or(torch.bitwise_xor(a, b), torch.bitwise_and(a, b)), (2, 5), torch.bool, **O2
    ),
    # scalar conversions in scripted code
    "cov_aten_float_of_tensor": scripted(FloatOfSum, (2, 3, 4), **O1),
    "cov_aten_bool_float_of_size": scripted(FloatOfBool, (2, 3, 4), **O0),
    # what detection code traces at optlevel 0 (SSD's anchor strides: torch.empty(()).fill_)
    "cov_shape_as_tensor_empty_fill": case(
        lambda x: (
            x * 2
            + torch._shape_as_tensor(x)[-1].float() / torch.empty((), dtype=torch.int64).fill_(x.shape[-1] // 2).float()
        ),
        (2, 3, 8),
        **O0,
    ),
    # types only older pnnx releases write
    "cov_tensor_view_pnnx20250530": case(lambda x: x.view(2, 12) * 2, (2, 3, 4), pnnx="20250530"),
    "cov_tensor_contiguous_pnnx20250530": case(
        lambda x: x.transpose(1, 2).contiguous() * 2, (2, 3, 4), pnnx="20250530"
    ),
    "cov_aten_unflatten_pnnx20250530": case(lambda x: torch.unflatten(x * 2, 1, (3, 4)), (2, 12, 5), pnnx="20250530"),
    "cov_aten_nearest_exact1d_pnnx20250530": case(
        lambda x: F.interpolate(x, size=9, mode="nearest-exact") * 2, (2, 3, 5), pnnx="20250530"
    ),
    "cov_aten_nearest_exact2d_pnnx20250530": case(
        lambda x: F.interpolate(x, scale_factor=1.6, mode="nearest-exact") * 2, (2, 3, 5, 4), pnnx="20250530"
    ),
    "cov_aten_nearest_exact3d_pnnx20250530": case(
        lambda x: F.interpolate(x, size=(3, 5, 2), mode="nearest-exact") * 2, (1, 2, 2, 3, 4), pnnx="20250530"
    ),
    "cov_aten_nearest_exact3d_scales_pnnx20250530": case(
        lambda x: (
            F.interpolate(x, scale_factor=(1.5, 0.7, 2.2), mode="nearest-exact", recompute_scale_factor=False) * 2
        ),
        (1, 2, 2, 3, 4),
        pnnx="20250530",
    ),
    "cov_aten_logical_pnnx20240226": case(
        lambda x, y: torch.logical_xor(torch.logical_and(x > 0, y > 0), torch.logical_or(x, y < 0.5)).float(),
        (2, 3, 4),
        (3, 1),
        pnnx="20240226",
    ),
    "cov_aten_reshape_as_pnnx20240226": case(
        lambda x, y: (x * 2).reshape_as(y) + y, (2, 3, 4), (2, 12), pnnx="20240226"
    ),
    "cov_aten_tile_pnnx20240226": case(lambda x: torch.tile(x, (2, 1, 3)) * 2, (3, 2), pnnx="20240226"),
    "cov_aten_where_pnnx20240226": case(lambda x, y: torch.where(x > 0, x, y) * 2, (2, 3, 4), (3, 1), pnnx="20240226"),
    "cov_aten_where_scalars_pnnx20240226": case(
        lambda x: torch.where(x > 0, -1.0, x * 2) + torch.where(x < 0.5, x, 0.5) + torch.where(x > 1, 1.0, 0.0),
        (2, 3, 4),
        pnnx="20240226",
    ),
    "cov_torch_permute_pnnx20240226": case(lambda x: torch.permute(x, (0, 2, 3, 1)) * 2, (2, 3, 4, 5), pnnx="20240226"),
}
