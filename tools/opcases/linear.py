"""Matrix products: nn.Linear, F.linear, torch.matmul (every rank combination), torch.mm,
torch.bmm, torch.addmm, torch.baddbmm."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from opcases._common import Fn, Wrap


class FLinearInputs(nn.Module):
    def forward(self, x, w, b):
        return F.linear(x, w, b), F.linear(x, w)


class FLinearParam(nn.Module):
    """Parameter weights: pnnx turns F.linear into nn.Linear."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5))
        self.b = nn.Parameter(torch.randn(6))

    def forward(self, x):
        return F.linear(x, self.w, self.b)


class MatMul(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class MatMulAt(nn.Module):
    def forward(self, a, b):
        return a @ b


class MatMulParam(nn.Module):
    """matmul with a parameter operand: a pnnx.Attribute input."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        return torch.matmul(x, self.w)


class MM(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)


class BMM(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b), torch.bmm(b.transpose(1, 2), a.transpose(1, 2))


class AddMM(nn.Module):
    def forward(self, c, a, b):
        return torch.addmm(c, a, b), torch.addmm(c[0], a, b, beta=0.5, alpha=2.0)


class BAddBMM(nn.Module):
    def forward(self, c, a, b):
        return torch.baddbmm(c, a, b), torch.baddbmm(c, a, b, beta=-1.5, alpha=0.25)


class EinsumParam(nn.Module):
    """torch.einsum with a parameter (pnnx.Attribute) operand."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 6))

    def forward(self, x):
        return torch.einsum("bij,jk->bik", x, self.w)


def mm_case(module, *shapes):
    return lambda: (module, [torch.randn(*s) for s in shapes])


CASES = {
    "linear_basic": lambda: (Wrap(nn.Linear(5, 4)), [torch.randn(3, 5)]),
    "linear_nd": lambda: (Wrap(nn.Linear(5, 4)), [torch.randn(2, 3, 2, 5)]),
    "linear_nobias": lambda: (Wrap(nn.Linear(5, 7, bias=False)), [torch.randn(2, 3, 5)]),
    "linear_1d_input": lambda: (Wrap(nn.Linear(5, 4)), [torch.randn(5)]),
    "linear_f_param": lambda: (FLinearParam(), [torch.randn(2, 3, 5)]),
    "linear_f_inputs": lambda: (FLinearInputs(), [torch.randn(2, 3, 5), torch.randn(4, 5), torch.randn(4)]),
    "linear_matmul_2d": mm_case(MatMul(), (3, 5), (5, 4)),
    "linear_matmul_nd_2d": mm_case(MatMul(), (2, 3, 4, 5), (5, 6)),
    "linear_matmul_2d_nd": mm_case(MatMul(), (4, 5), (2, 5, 3)),
    "linear_matmul_broadcast": mm_case(MatMul(), (2, 1, 3, 5), (4, 5, 6)),
    "linear_matmul_1d_nd": mm_case(MatMul(), (5,), (2, 5, 4)),
    "linear_matmul_nd_1d": mm_case(MatMul(), (2, 3, 5), (5,)),
    "linear_matmul_1d_1d": mm_case(MatMul(), (5,), (5,)),
    "linear_matmul_1d_2d": mm_case(MatMul(), (5,), (5, 3)),
    "linear_matmul_at": mm_case(MatMulAt(), (2, 3, 4), (2, 4, 5)),
    "linear_matmul_param": mm_case(MatMulParam(), (2, 4, 5)),
    "linear_mm": mm_case(MM(), (3, 5), (5, 4)),
    "linear_bmm": mm_case(BMM(), (2, 3, 4), (2, 4, 5)),
    "linear_addmm": mm_case(AddMM(), (3, 4), (3, 5), (5, 4)),
    "linear_baddbmm": mm_case(BAddBMM(), (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    # einsum: at optlevel 0 the equation and the operand list are operands
    "linear_einsum_param": mm_case(EinsumParam(), (2, 3, 5)),
    "linear_einsum_three": mm_case(
        Fn(lambda a, b, c: torch.einsum("bi,bj,bk->bijk", a, b, c) * 2), (2, 3), (2, 4), (2, 2)
    ),
    "linear_einsum_trace": mm_case(Fn(lambda a: torch.einsum("bii->b", a) + 1), (3, 4, 4)),
}
