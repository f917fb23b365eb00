"""TorchScript's plumbing, as pnnx writes it at optlevel 0 (and some at 1): constants,
lists, sizes and number conversions.

These operators make *values* (ints, floats, bools, None, lists), not tensors: their
outputs carry no `#` annotation. Values are plain Python objects here, as in TorchScript,
so that arithmetic on them follows Python's rules and a tensor op treats them as weak
scalars (`x * x.size(1)` keeps x's dtype). When a value feeds another operator's parameter
(`$shape=…`), the runtime turns it into that parameter (kuiper_core/runtime/binding.py).
Constants are folded at build: forward() never runs a prim::Constant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph import Operator
from .registry import Layer, register


@register("prim::Constant")
class Constant(Layer):
    """`value=…`: an int, float, bool, None, string or list (a `(1,2)` tuple reads as a list)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if len(op.outputs) != 1 or op.inputs:
            raise self.error(f"expected no input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
        self.value = self.param("value", None)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        value = self.value
        return [list(value) if isinstance(value, list) else value]  # a fresh list: consumers may keep it


@register("prim::ListConstruct")
class ListConstruct(Layer):
    """Its inputs as one list: ints for a shape (`[x.size(0), -1]`) or tensors for torch.cat
    (the runtime gives torch.cat the tensors themselves)."""

    returns_views = True  # the list holds its input arrays themselves

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        return [list(inputs)]


@register("pnnx.SliceIndexes")
class SliceIndexes(Layer):
    """pnnx's list of slice bounds for a slice over several dims whose bounds are computed
    (`indexes=(@0,@1)` of sizes, read by Tensor.slice's `$ends`; dynamic-shape exports): a
    list of its inputs (`@k`) and constant numbers, in the order given."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        raw = self.param("indexes")  # `(@0,@1)`: the .param reader keeps lists of operands as text
        items = raw.strip("()[]").split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else [raw]
        self.entries: list[tuple[bool, Any]] = []  # (is an input, input index or number)
        for v in items:
            v = v.strip() if isinstance(v, str) else v
            if isinstance(v, str) and v.lstrip("-").isdigit():
                v = int(v)
            if isinstance(v, str) and v.startswith("@") and v[1:].isdigit() and int(v[1:]) < len(op.inputs):
                self.entries.append((True, int(v[1:])))
            elif isinstance(v, int) and not isinstance(v, bool):
                self.entries.append((False, v))
            else:
                raise self.error(f"parameter 'indexes' must list @k inputs and ints, got {raw!r}")

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        return [[_number(self, inputs[v]) if is_input else v for is_input, v in self.entries]]


@register("prim::NumToTensor")
class NumToTensor(Layer):
    """A number as a 0-d tensor. TorchScript's result is a "wrapped number" that type
    promotion treats like the Python number, so the number itself is kept."""

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        return [_number(self, inputs[0])]


@register("aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit")
class ToNumber(Layer):
    """`int(x)` (toward zero, like Python), `float(x)`, `bool(x)` of a number or a
    one-element tensor; ScalarImplicit keeps the number's own type."""

    CASTS: dict[str, Callable[[Any], Any]] = {
        "aten::Int": int,
        "aten::Float": float,
        "aten::Bool": bool,
        "aten::ScalarImplicit": lambda v: v,
    }

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.cast = self.CASTS[op.type]

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        value = _number(self, inputs[0])
        if self.cast is int and isinstance(value, float) and not np.isfinite(value):
            raise self.error(f"cannot convert {value} to an integer")  # torch: RuntimeError
        return [self.cast(value)]


@register("aten::detach")
class Detach(Layer):
    """`x.detach()`: the same tensor (there are no gradients here)."""

    returns_views = True

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        return [inputs[0]]


@register("Tensor.size")
class Size(Layer):
    """`x.size(dim)` (`dim=` param) as an int, or `x.size()` as a list of ints."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        dim = self.param("dim", None)
        self.dim = None if dim is None else self.int_param("dim")

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        shape = np.shape(inputs[0])
        if self.dim is None:
            return [list(shape)]
        if not -len(shape) <= self.dim < len(shape):
            raise self.error(f"dim {self.dim} is out of range for a tensor of shape {shape}")
        return [int(shape[self.dim])]


def _number(layer: Layer, value: Any) -> int | float | bool:
    """A Python number from a number or a one-element tensor."""
    if isinstance(value, (bool, int, float)):
        return value
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        raise layer.error(f"expected a number or a one-element tensor, got {arr.dtype} of shape {arr.shape}")
    return arr.reshape(()).item()
