"""Graph plumbing: inputs, outputs, tuples, constants as pnnx.Attribute."""

import torch
import torch.nn as nn


class TwoOutputs(nn.Module):
    def forward(self, x):
        return x.relu(), x.sigmoid()


class ConstAttr(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(1, 4, 1, 1))

    def forward(self, x):
        return x * 2 + self.bias


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x + y, x * y


CASES = {
    "io_tuple_outputs": lambda: (TwoOutputs(), [torch.randn(1, 4, 5, 5)]),
    "io_attribute_const": lambda: (ConstAttr(), [torch.randn(1, 4, 5, 5)]),
    "io_two_inputs": lambda: (TwoInputs(), [torch.randn(2, 3), torch.randn(2, 3)]),
}
