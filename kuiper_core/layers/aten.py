"""TorchScript's arithmetic, as pnnx leaves it at optlevel 0: `aten::add`, `aten::mul`, …

At optlevel 1 and 2 pnnx fuses these into pnnx.Expression operators; at optlevel 0 each
is its own operator with TorchScript's positional arguments, e.g. `aten::add self other
alpha` (alpha a prim::Constant). Each layer here is that expression written in the
pnnx.Expression language (`add(@0,mul(@1,2))`) and run by the same compiled plan, so the
semantics (broadcasting, PyTorch's type promotion, Python arithmetic on sizes) are the
Expression layer's. Parameters (`alpha`, div's `rounding_mode`, round's `decimals`) are
resolved by the runtime (see `arg_names`) and written into the expression as constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expression import BINARY_NAMES, UNARY_NAMES
from ..graph import Operator
from .expression import Expression
from .registry import BoundOperator, Layer, register

# aten name -> expression function, where the names differ.
_RENAMED = {
    "__and__": "and",
    "__or__": "or",
    "__xor__": "xor",
    "__lshift__": "lshift",
    "__rshift__": "rshift",
    "clamp_min": "max",
    "clamp_max": "min",
}
_UNARY = {f"aten::{n}": n for n in UNARY_NAMES if n != "tanh"}  # pnnx writes aten::tanh as F.tanh
_WITH_ALPHA = ("aten::add", "aten::sub", "aten::rsub")
_BINARY = {f"aten::{n}": n for n in BINARY_NAMES if n not in ("and", "or", "xor", "lshift", "rshift")}
_BINARY.update({f"aten::{a}": b for a, b in _RENAMED.items()})
for _name in _WITH_ALPHA:
    _BINARY.pop(_name, None)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    raise ValueError(f"a number is needed, got {value!r}")


class _Aten(Layer):
    """An aten op as a pnnx.Expression over its tensor/number inputs."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        try:
            expr = self.expression(len(op.inputs))
        except ValueError as e:
            raise self.error(str(e)) from None
        inner = BoundOperator(op.type, op.name, list(op.inputs), list(op.outputs), {"expr": expr}, line=op.line)
        inner.input_names = [""] * len(op.inputs)
        self.expr = expr
        self.inner = Expression(inner)

    def expression(self, n_inputs: int) -> str:
        raise NotImplementedError

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        return self.inner.forward(inputs, out)

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        return self.inner.flops(inputs, outputs)


@register(*_WITH_ALPHA)
class AddSub(_Aten):
    """`aten::add(self, other, alpha)` = self + alpha·other; sub: self − alpha·other;
    rsub: other − alpha·self."""

    arg_names = ("", "", "alpha")

    def expression(self, n_inputs: int) -> str:
        if n_inputs != 2:
            raise ValueError(f"expected 2 tensor/number inputs and alpha, got {n_inputs} inputs")
        alpha = self.param("alpha", 1)
        a, b = ("@1", "@0") if self.type == "aten::rsub" else ("@0", "@1")
        if alpha != 1:
            b = f"mul({b},{_literal(alpha)})"
        return f"{'add' if self.type == 'aten::add' else 'sub'}({a},{b})"


@register(*_BINARY)
class Binary(_Aten):
    """`aten::mul(self, other)` and the other two-argument functions; div's
    `rounding_mode` ('trunc' or 'floor') as trunc(div()) or floor_divide."""

    arg_names = ("", "", "rounding_mode")

    def expression(self, n_inputs: int) -> str:
        if n_inputs != 2:
            raise ValueError(f"expected 2 tensor/number inputs, got {n_inputs}")
        name = _BINARY[self.type]
        mode = self.param("rounding_mode", None)
        if name == "div" and mode == "floor":
            return "floor_divide(@0,@1)"
        if name == "div" and mode == "trunc":
            return "trunc(div(@0,@1))"
        if mode is not None:
            raise ValueError(f"rounding_mode {mode!r} is not 'trunc', 'floor' or None")
        return f"{name}(@0,@1)"


@register(*_UNARY)
class Unary(_Aten):
    """`aten::exp(self)` and the other one-argument functions (round's `decimals` = 0 only)."""

    arg_names = ("", "decimals")

    def expression(self, n_inputs: int) -> str:
        if n_inputs != 1:
            raise ValueError(f"expected 1 tensor/number input, got {n_inputs}")
        if self.param("decimals", 0) != 0:
            raise ValueError(f"round with decimals={self.param('decimals')} is not supported (only 0)")
        return f"{_UNARY[self.type]}(@0)"


@register("aten::addcmul", "aten::addcdiv")
class AddCMulDiv(_Aten):
    """`torch.addcmul(self, t1, t2, value)` = self + value·t1·t2; addcdiv: self + value·t1/t2."""

    arg_names = ("", "", "", "value")

    def expression(self, n_inputs: int) -> str:
        if n_inputs != 3:
            raise ValueError(f"expected 3 tensor inputs and value, got {n_inputs} inputs")
        term = f"{'mul' if self.type == 'aten::addcmul' else 'div'}(@1,@2)"
        value = self.param("value", 1)
        return f"add(@0,{term if value == 1 else f'mul({term},{_literal(value)})'})"


@register("aten::lerp")
class Lerp(_Aten):
    """`torch.lerp(start, end, weight)` = start + weight·(end − start); weight a number or a tensor."""

    arg_names = ("", "", "weight")

    def expression(self, n_inputs: int) -> str:
        if n_inputs == 3:
            return "add(@0,mul(@2,sub(@1,@0)))"
        if n_inputs != 2:
            raise ValueError(f"expected start, end and weight, got {n_inputs} inputs")
        return f"add(@0,mul({_literal(self.param('weight'))},sub(@1,@0)))"
