"""Elementwise activations, softmax, dropout and identity: nn.* modules and their F.* forms.

Inputs use batch 2 and values spread over the interesting ranges (negatives, the
Hardswish/Hardtanh knees, Softplus thresholds) so that every branch is exercised.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn, Wrap


class AfterRelu(nn.Module):
    """A layer after a ReLU, for layers pnnx would otherwise drop or fold into the input."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(torch.relu(x) - 0.5)


class FPrelu(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) * 0.5)

    def forward(self, x):
        return F.prelu(x, self.weight)


OPTLEVEL1 = {"optlevel": 1}


def x4() -> torch.Tensor:
    return torch.randn(2, 4, 5, 6) * 4.0


def x3() -> torch.Tensor:
    return torch.randn(2, 4, 7) * 4.0


def x2() -> torch.Tensor:
    return torch.randn(3, 10) * 4.0


def _prelu_c():
    m = nn.PReLU(4)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.1, -0.3, 0.7, 0.25]))
    return Wrap(m), [x4()]


CASES = {
    # nn.* modules
    "act_relu": lambda: (Wrap(nn.ReLU()), [x4()]),
    "act_relu6": lambda: (Wrap(nn.ReLU6()), [x4()]),
    "act_leaky_relu": lambda: (Wrap(nn.LeakyReLU(0.2)), [x4()]),
    "act_leaky_relu_default": lambda: (Wrap(nn.LeakyReLU()), [x2()]),
    "act_prelu_1": lambda: (Wrap(nn.PReLU()), [x4()]),
    "act_prelu_c": _prelu_c,
    "act_prelu_c_3d": lambda: (Wrap(nn.PReLU(4, init=0.3)), [x3()]),
    "act_elu": lambda: (Wrap(nn.ELU(alpha=0.7)), [x4()]),
    "act_selu": lambda: (Wrap(nn.SELU()), [x4()]),
    "act_celu": lambda: (Wrap(nn.CELU(alpha=1.5)), [x4()]),
    "act_gelu": lambda: (Wrap(nn.GELU()), [x4()]),
    "act_gelu_tanh": lambda: (Wrap(nn.GELU(approximate="tanh")), [x4()]),
    "act_silu": lambda: (Wrap(nn.SiLU()), [x4()]),
    "act_mish": lambda: (Wrap(nn.Mish()), [x4() * 5.0]),
    "act_sigmoid": lambda: (Wrap(nn.Sigmoid()), [x4() * 10.0]),
    "act_tanh": lambda: (Wrap(nn.Tanh()), [x4()]),
    "act_hardtanh": lambda: (Wrap(nn.Hardtanh(-2.0, 3.0)), [x4()]),
    "act_hardtanh_default": lambda: (Wrap(nn.Hardtanh()), [x3()]),
    "act_hardswish": lambda: (Wrap(nn.Hardswish()), [x4()]),
    "act_hardsigmoid": lambda: (Wrap(nn.Hardsigmoid()), [x4()]),
    "act_softplus": lambda: (Wrap(nn.Softplus()), [x4() * 10.0]),
    "act_softplus_beta": lambda: (Wrap(nn.Softplus(beta=2.0, threshold=5.0)), [x4()]),
    "act_softmax_dim1": lambda: (Wrap(nn.Softmax(dim=1)), [x4() * 10.0]),
    "act_softmax_last": lambda: (Wrap(nn.Softmax(dim=-1)), [x3() * 10.0]),
    "act_softmax_dim0": lambda: (Wrap(nn.Softmax(dim=0)), [x2()]),
    "act_log_softmax_dim1": lambda: (Wrap(nn.LogSoftmax(dim=1)), [x4() * 10.0]),
    "act_log_softmax_last": lambda: (Wrap(nn.LogSoftmax(dim=-1)), [x2() * 10.0]),
    # optlevel 2 removes dropout (and every level drops nn.Identity): keep them at optlevel 1.
    "act_dropout": lambda: (AfterRelu(nn.Dropout(0.3)), [x4()], OPTLEVEL1),
    "act_dropout2d": lambda: (AfterRelu(nn.Dropout2d(0.3)), [x4()], OPTLEVEL1),
    "act_dropout_removed": lambda: (AfterRelu(nn.Dropout(0.3)), [x4()]),
    # F.* and torch.* forms
    "act_f_relu": lambda: (Fn(F.relu), [x4()]),
    "act_torch_relu": lambda: (Fn(torch.relu), [x4()]),
    "act_f_sigmoid": lambda: (Fn(F.sigmoid), [x4()]),
    "act_torch_sigmoid": lambda: (Fn(torch.sigmoid), [x4()]),
    "act_f_tanh": lambda: (Fn(F.tanh), [x4()]),
    "act_torch_tanh": lambda: (Fn(torch.tanh), [x4()]),
    "act_f_silu": lambda: (Fn(F.silu), [x4()]),
    "act_f_gelu": lambda: (Fn(F.gelu), [x4()]),
    "act_f_gelu_tanh": lambda: (Fn(lambda x: F.gelu(x, approximate="tanh")), [x4()]),
    "act_f_softmax": lambda: (Fn(lambda x: F.softmax(x, dim=2)), [x4()]),
    "act_f_log_softmax": lambda: (Fn(lambda x: F.log_softmax(x, dim=-1)), [x3()]),
    "act_f_hardswish": lambda: (Fn(F.hardswish), [x4()]),
    "act_f_hardsigmoid": lambda: (Fn(F.hardsigmoid), [x4()]),
    "act_f_leaky_relu": lambda: (Fn(lambda x: F.leaky_relu(x, 0.15)), [x4()]),
    "act_f_elu": lambda: (Fn(lambda x: F.elu(x, alpha=0.5)), [x4()]),
    "act_f_dropout": lambda: (Fn(lambda x: F.dropout(torch.relu(x) - 0.5, 0.2, training=False)), [x4()], OPTLEVEL1),
    "act_f_relu6": lambda: (Fn(F.relu6), [x4()]),
    "act_f_mish": lambda: (Fn(F.mish), [x4()]),
    "act_f_hardtanh": lambda: (Fn(lambda x: F.hardtanh(x, -0.5, 1.5)), [x4()]),
    "act_f_softplus": lambda: (Fn(lambda x: F.softplus(x, beta=0.5, threshold=3.0)), [x4()]),
    "act_f_prelu": lambda: (FPrelu(4), [x4()]),
    "act_f_selu": lambda: (Fn(F.selu), [x4()]),
    "act_f_celu": lambda: (Fn(lambda x: F.celu(x, alpha=0.5)), [x4()]),
    "act_f_logsigmoid": lambda: (Fn(F.logsigmoid), [x4()]),
    "act_logsigmoid": lambda: (Wrap(nn.LogSigmoid()), [x4()]),
    "act_softsign": lambda: (Wrap(nn.Softsign()), [x4()]),
    "act_tanhshrink": lambda: (Wrap(nn.Tanhshrink()), [x4()]),
    "act_softshrink": lambda: (Wrap(nn.Softshrink(0.7)), [x4()]),
    "act_hardshrink": lambda: (Wrap(nn.Hardshrink(0.7)), [x4()]),
    "act_threshold": lambda: (Wrap(nn.Threshold(0.5, -2.0)), [x4()]),
    "act_f_softsign": lambda: (Fn(F.softsign), [x4()]),
    "act_f_tanhshrink": lambda: (Fn(F.tanhshrink), [x4()]),
    "act_f_softshrink": lambda: (Fn(lambda x: F.softshrink(x, 1.5)), [x4()]),
    "act_f_hardshrink": lambda: (Fn(lambda x: F.hardshrink(x, 1.5)), [x4()]),
    "act_f_threshold": lambda: (Fn(lambda x: F.threshold(x, -0.5, 3.0)), [x4()]),
    "act_relu_inplace": lambda: (AfterRelu(nn.ReLU(inplace=True)), [x4()]),
    "act_rrelu": lambda: (Wrap(nn.RReLU(0.1, 0.3)), [x4()]),
    "act_glu": lambda: (Wrap(nn.GLU(dim=1)), [x4()]),
    "act_f_glu": lambda: (Fn(lambda x: F.glu(x, -1)), [x4()]),
    "act_softmin": lambda: (Wrap(nn.Softmin(dim=1)), [x4()]),
    "act_f_softmin": lambda: (Fn(lambda x: F.softmin(x, dim=-1)), [x3()]),
    "act_softmax2d": lambda: (Wrap(nn.Softmax2d()), [x4()]),
}
