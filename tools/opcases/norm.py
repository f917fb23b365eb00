"""Normalisation layers: BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RMSNorm and F.* forms.

pnnx folds a BatchNorm that follows a conv into the conv at optlevel 2, so these cases put
the norm right after the input or after a ReLU. Every affine weight, bias and running
statistic is randomised so that a layer ignoring one of them fails.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn


def randomise(m: nn.Module) -> nn.Module:
    """Non-trivial affine parameters and running statistics."""
    with torch.no_grad():
        for name, p in list(m.named_parameters()) + list(m.named_buffers()):
            if name.endswith("weight"):
                p.copy_(torch.rand_like(p) + 0.5)
            elif name.endswith("bias") or name.endswith("running_mean"):
                p.copy_(torch.randn_like(p))
            elif name.endswith("running_var"):
                p.copy_(torch.rand_like(p) * 2 + 0.1)
    return m


class Wrap(nn.Module):
    def __init__(self, layer: nn.Module, after_relu: bool = False):
        super().__init__()
        self.layer = randomise(layer)
        self.after_relu = after_relu

    def forward(self, x):
        if self.after_relu:
            x = torch.relu(x)
        return self.layer(x)


class FBatchNorm(nn.Module):
    def __init__(self, c: int, affine: bool = True):
        super().__init__()
        self.register_buffer("mean", torch.randn(c))
        self.register_buffer("var", torch.rand(c) + 0.2)
        self.weight = nn.Parameter(torch.rand(c) + 0.5) if affine else None
        self.bias = nn.Parameter(torch.randn(c)) if affine else None

    def forward(self, x):
        return F.batch_norm(x, self.mean, self.var, self.weight, self.bias, False, 0.1, 1e-3)


class FLayerNorm(nn.Module):
    def __init__(self, shape: tuple[int, ...], affine: bool = True):
        super().__init__()
        self.shape = shape
        self.weight = nn.Parameter(torch.rand(shape) + 0.5) if affine else None
        self.bias = nn.Parameter(torch.randn(shape)) if affine else None

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.weight, self.bias, 1e-4)


class FGroupNorm(nn.Module):
    def __init__(self, groups: int, c: int, affine: bool = True):
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(torch.rand(c) + 0.5) if affine else None
        self.bias = nn.Parameter(torch.randn(c)) if affine else None

    def forward(self, x):
        return F.group_norm(x, self.groups, self.weight, self.bias, 1e-3)


class FInstanceNorm(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(c) + 0.5)
        self.bias = nn.Parameter(torch.randn(c))

    def forward(self, x):
        return F.instance_norm(x, weight=self.weight, bias=self.bias, eps=1e-3)


def x4(n: int = 2, c: int = 4) -> torch.Tensor:
    return torch.randn(n, c, 5, 6) * 3.0 + 1.0


CASES = {
    "norm_bn1d_2d": lambda: (Wrap(nn.BatchNorm1d(6)), [torch.randn(3, 6) * 2 + 1]),
    "norm_bn1d_3d": lambda: (Wrap(nn.BatchNorm1d(6, eps=1e-3), after_relu=True), [torch.randn(2, 6, 7)]),
    "norm_bn2d": lambda: (Wrap(nn.BatchNorm2d(4)), [x4()]),
    "norm_bn2d_after_relu": lambda: (Wrap(nn.BatchNorm2d(4, eps=1e-2), after_relu=True), [x4()]),
    "norm_bn2d_noaffine": lambda: (Wrap(nn.BatchNorm2d(4, affine=False)), [x4()]),
    "norm_bn3d": lambda: (Wrap(nn.BatchNorm3d(3)), [torch.randn(2, 3, 4, 5, 3)]),
    "norm_f_batch_norm": lambda: (FBatchNorm(4), [x4()]),
    "norm_f_batch_norm_noaffine": lambda: (FBatchNorm(4, affine=False), [x4()]),
    "norm_layernorm_last": lambda: (Wrap(nn.LayerNorm(6)), [x4()]),
    "norm_layernorm_3d": lambda: (Wrap(nn.LayerNorm(8, eps=1e-3)), [torch.randn(2, 5, 8) * 3]),
    "norm_layernorm_multi": lambda: (Wrap(nn.LayerNorm((5, 6))), [x4()]),
    "norm_layernorm_noaffine": lambda: (Wrap(nn.LayerNorm((4, 5, 6), elementwise_affine=False)), [x4()]),
    # Not here: nn.LayerNorm(bias=False) -- pnnx writes elementwise_affine=False and drops the weight.
    "norm_f_layer_norm": lambda: (FLayerNorm((6,)), [x4()]),
    "norm_f_layer_norm_noaffine": lambda: (FLayerNorm((5, 6), affine=False), [x4()]),
    "norm_groupnorm": lambda: (Wrap(nn.GroupNorm(2, 4)), [x4()]),
    # pnnx's generated Python for an affine-less GroupNorm does not run (it omits num_channels):
    # convert with the CLI and skip the per-operand references.
    "norm_groupnorm_noaffine": lambda: (
        Wrap(nn.GroupNorm(3, 6, eps=1e-3, affine=False)),
        [x4(c=6)],
        {"optlevel": 2, "capture_operands": False},
    ),
    "norm_groupnorm_3d": lambda: (Wrap(nn.GroupNorm(4, 8)), [torch.randn(2, 8, 7)]),
    "norm_groupnorm_2d": lambda: (Wrap(nn.GroupNorm(2, 6)), [torch.randn(3, 6)]),
    "norm_f_group_norm": lambda: (FGroupNorm(2, 4), [x4()]),
    "norm_instancenorm2d": lambda: (Wrap(nn.InstanceNorm2d(4)), [x4()]),
    "norm_instancenorm2d_affine": lambda: (Wrap(nn.InstanceNorm2d(4, affine=True)), [x4()]),
    "norm_instancenorm2d_track": lambda: (Wrap(nn.InstanceNorm2d(4, track_running_stats=True)), [x4()]),
    "norm_instancenorm2d_affine_track": lambda: (
        Wrap(nn.InstanceNorm2d(4, eps=1e-3, affine=True, track_running_stats=True)),
        [x4()],
    ),
    "norm_instancenorm1d": lambda: (Wrap(nn.InstanceNorm1d(6, affine=True)), [torch.randn(2, 6, 9)]),
    "norm_f_instance_norm": lambda: (FInstanceNorm(4), [x4()]),
    "norm_f_group_norm_noaffine": lambda: (Fn(lambda x: F.group_norm(x, 2, eps=1e-4)), [x4()]),
    "norm_f_instance_norm_noaffine": lambda: (Fn(lambda x: F.instance_norm(x)), [x4()]),
    "norm_f_rms_norm": lambda: (Fn(lambda x: F.rms_norm(x, (6,), eps=1e-4)), [x4()]),
    "norm_f_local_response_norm": lambda: (Fn(lambda x: F.local_response_norm(x, 4)), [torch.randn(2, 7, 5)]),
    # weights and statistics as graph inputs ($weight=, $bias=, $running_mean=, ...)
    "norm_f_layer_norm_inputs": lambda: (
        Fn(lambda x, w, b: F.layer_norm(x, (5, 6), w, b)),
        [x4(), torch.rand(5, 6) + 0.5, torch.randn(5, 6)],
    ),
    "norm_f_batch_norm_inputs": lambda: (
        Fn(lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, False, 0.1, 1e-4)),
        [x4(), torch.randn(4), torch.rand(4) + 0.2, torch.rand(4) + 0.5, torch.randn(4)],
    ),
    "norm_f_group_norm_inputs": lambda: (
        Fn(lambda x, w, b: F.group_norm(x, 2, w, b)),
        [x4(), torch.rand(4) + 0.5, torch.randn(4)],
    ),
    "norm_f_instance_norm_inputs": lambda: (
        Fn(lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
        [x4(), torch.rand(4) + 0.5, torch.randn(4)],
    ),
    # Not here: F.instance_norm(use_input_stats=False) -- pnnx leaves it as aten::instance_norm.
    "norm_f_rms_norm_inputs": lambda: (Fn(lambda x, w: F.rms_norm(x, (6,), w)), [x4(), torch.rand(6) + 0.5]),
    "norm_f_normalize": lambda: (Fn(lambda x: F.normalize(x)), [x4()]),
    "norm_f_normalize_p1_last": lambda: (Fn(lambda x: F.normalize(x, p=1.0, dim=-1, eps=1e-3)), [x4()]),
    "norm_rmsnorm": lambda: (Wrap(nn.RMSNorm(6, eps=1e-5)), [x4()]),
    "norm_rmsnorm_multi_noaffine": lambda: (Wrap(nn.RMSNorm((5, 6), elementwise_affine=False)), [x4()]),
    "norm_localresponsenorm": lambda: (Wrap(nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0)), [x4(c=6)]),
}
