"""Arithmetic that pnnx fuses into pnnx.Expression (checked by tests/test_expression_pnnx.py
against PyTorch's outputs, and by tests/test_ops.py through the whole runtime)."""

import torch

from opcases._common import Fn


def x4(*shape):
    return torch.randn(*shape) if shape else torch.randn(1, 4, 8, 8)


def case(f, *inputs):
    return lambda: (Fn(f), [t() if callable(t) else t for t in inputs])


CASES = {
    # the flagship: six inputs, nested add/sub/mul/div/pow with a constant
    "expr_nested_six": case(
        lambda a, b, c, d, e, f: (a + b) * (c - d) / (e * e + 1.0) + f**2,
        x4,
        x4,
        x4,
        x4,
        x4,
        x4,
    ),
    "expr_exp_neg_abs": case(lambda x: torch.exp(-torch.abs(x)) * 3.0, x4),
    "expr_sqrt_sub_neg": case(lambda x, y: torch.sqrt(torch.abs(x)) - (-y), x4, x4),
    "expr_rsqrt_eps": case(lambda x: x * torch.rsqrt(x * x + 1e-5), x4),
    "expr_floor_square": case(lambda x: torch.floor(x * 4.0) + torch.square(x), x4),
    "expr_remainder_fmod": case(lambda x: torch.remainder(x * 3.0, -1.5) + torch.fmod(x * 3.0, 1.5), x4),
    "expr_floor_divide": case(lambda x: torch.floor_divide(x * 5.0, 2.0), x4),
    "expr_maximum_minimum": case(lambda x, y: torch.maximum(x, y) - torch.minimum(x, y * 0.5), x4, x4),
    "expr_broadcast": case(
        lambda x, s, t: x * s + t - 0.25,
        x4,
        lambda: torch.randn(1, 4, 1, 1),
        lambda: torch.randn(1, 1, 8, 8),
    ),
    "expr_trig_log": case(
        lambda x: torch.sin(x) * torch.cos(x) + torch.log(torch.abs(x) + 1.0) + torch.tanh(x) + torch.atan(x), x4
    ),
    "expr_round_trunc_ceil_sign": case(
        lambda x: torch.round(x * 2.5) + torch.trunc(x * 3.0) + torch.ceil(x) + torch.sign(x), x4
    ),
    "expr_reciprocal_pow": case(lambda x: torch.reciprocal(torch.abs(x) + 1.0) + torch.pow(torch.abs(x), 1.5), x4),
    "expr_atan2_exp_log10": case(lambda x, y: torch.atan2(x, y) + torch.log10(torch.exp(x) + 1.0), x4, x4),
    "expr_rsub_alpha": case(lambda x, y: 1.0 - torch.add(x, y, alpha=2.0), x4, x4),
    "expr_batch2": case(
        lambda x, y: (x - y) * (x + y) / 2.0, lambda: torch.randn(2, 3, 5), lambda: torch.randn(2, 3, 5)
    ),
    "expr_size_reshape": case(lambda x: x.reshape(x.size(0), -1) * 2.0, lambda: torch.randn(2, 3, 4)),
    "expr_size_div": case(lambda x: x.reshape(x.size(0) * 3, x.size(2) // 2, -1) + 1.0, lambda: torch.randn(2, 3, 4)),
    "expr_int_bitwise": case(
        lambda a, b: ((a & b) | (a ^ 5)) + (a << 2) - (b >> 1),
        lambda: torch.randint(0, 100, (2, 8)),
        lambda: torch.randint(0, 100, (2, 8)),
    ),
    "expr_int_times_float": case(lambda a: a * 0.5 + a // 3 + a % 7, lambda: torch.randint(-50, 50, (3, 8))),
}


def dynamic(f, shapes, shapes2):
    """Converted with a second shape per input (pnnx inputshape2): pnnx keeps size() inside
    expressions (`mul(@0,size(@0,0))`, `[size(@0,0),-1]`) instead of folding it."""
    return lambda: (Fn(f), [torch.randn(*s) for s in shapes], {"inputshape2": shapes2})


CASES.update(
    {
        "expr_dyn_size_arith": dynamic(
            lambda x: x * x.size(0) + x / x.size(2) - (x.size(2) // 2), [(2, 3, 4)], [(5, 3, 6)]
        ),
        "expr_dyn_size_list": dynamic(
            lambda x: x.reshape(x.size(0), x.size(1) * x.size(2)) * 2, [(2, 3, 4)], [(5, 3, 6)]
        ),
    }
)
