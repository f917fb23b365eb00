"""Writes into part of a tensor (`y[..., 0:2] = …`, `y[:, 1] = 0.5`), as pnnx makes them
functional: the output is a new tensor; no input is ever changed.

- optlevel 2: `Tensor.slice_copy` ($self, $src, Tensor.slice's params): a copy of self with
  the slice replaced by src; `Tensor.clone` (a copy) and `Tensor.fill` (a tensor of the
  input's shape, filled with one value) around it.
- optlevel 0/1: `Tensor.copy` ($self, $src): $self is a view — a chain of slices, selects,
  reshapes… — cut from a base tensor, and the output is that base with the viewed region
  replaced by src (its declared shape is the base's). The layer reads the base as an extra
  input (`extra_inputs`), and finds the region where the view's elements sit in the base's
  memory: the view layers return NumPy views, so the same strides address the copy.

YOLOv5's Detect head decodes boxes this way (`y[..., 0:2] = (y[..., 0:2] * 2 + grid) * stride`).
"""

from __future__ import annotations

from typing import TypeGuard

import numpy as np
from numpy.lib.array_utils import byte_bounds
from numpy.lib.stride_tricks import as_strided

from ..graph import Operand, Operator
from .registry import Layer, register
from .shape import slice_key
from .torch_args import input_index

# Operators whose output is a view of their first input (what a Tensor.copy's $self may be cut with).
VIEW_TYPES = frozenset(
    {
        "Tensor.slice",
        "Tensor.select",
        "torch.narrow",
        "Tensor.view",
        "Tensor.reshape",
        "torch.transpose",
        "Tensor.permute",
        "torch.permute",
        "torch.squeeze",
        "torch.unsqueeze",
        "torch.flatten",
        "Tensor.expand",
    }
)


def _usable(out: np.ndarray | None, like: np.ndarray) -> TypeGuard[np.ndarray]:
    return out is not None and out.shape == like.shape and out.dtype == like.dtype


@register("Tensor.clone", "torch.clone")
class Clone(Layer):
    """`x.clone()`, `torch.clone(x)`: a copy (Swin V2 clones its qkv bias before zeroing a part)."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if _usable(out[0], x):
            np.copyto(out[0], x)
            return [out[0]]
        return [np.array(x, copy=True)]


@register("aten::zero")
class Zero(Layer):
    """`x.zero_()` made functional (pnnx keeps TorchScript's aten::zero): zeros of x's shape and
    dtype. Swin V2 zeroes the key part of its qkv bias (`qkv_bias[E:2E].zero_()`), which optlevel
    0/1 write as aten::zero of that slice, then Tensor.copy into the bias."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        y = out[0] if _usable(out[0], x) else np.empty(x.shape, x.dtype)
        assert y is not None
        y.fill(0)
        return [y]


@register("Tensor.fill")
class Fill(Layer):
    """`x.fill_(value)` made functional: a tensor of x's shape and dtype, all `value`
    (a number param, or a one-element tensor input $value)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.value_input = input_index(op, "value")
        self.value = None if self.value_input is not None else self.number_param("value")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[input_index(self.op, "input") or 0]
        value = self.value if self.value_input is None else np.asarray(inputs[self.value_input]).reshape(()).item()
        y = out[0] if _usable(out[0], x) else np.empty(x.shape, x.dtype)
        assert y is not None
        with np.errstate(invalid="ignore", over="ignore"):
            y.fill(value)
        return [y]


@register("Tensor.slice_copy")
class SliceCopy(Layer):
    """`self[key] = src` on a copy of self: key from Tensor.slice's params, src broadcast
    and cast to self's dtype."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.key = slice_key(self)
        self.target = input_index(op, "self") or 0
        src = input_index(op, "src")
        self.src = 1 if src is None else src

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, src = inputs[self.target], inputs[self.src]
        y = out[0] if _usable(out[0], x) else np.empty(x.shape, x.dtype)
        assert y is not None
        np.copyto(y, x)
        try:
            np.copyto(y[self.key], src, casting="unsafe")
        except (IndexError, ValueError) as e:
            raise self.error(f"cannot write a {np.shape(src)} source into {x.shape}[{self.key}]: {e}") from None
        return [y]


def _base_of(operand: Operand) -> Operand:
    """The tensor a chain of view operators starts from."""
    while operand.producer is not None and operand.producer.type in VIEW_TYPES and operand.producer.inputs:
        operand = operand.producer.inputs[0]
    return operand


@register("Tensor.copy")
class Copy(Layer):
    """`view.copy_(src)`, functional: the base of $self with the view's region set to src
    (see the module docstring)."""

    @classmethod
    def extra_inputs(cls, op: Operator) -> dict[str, Operand]:
        target = op.named_input("self") or (op.inputs[0] if op.inputs else None)
        return {"base": _base_of(target)} if target is not None else {}

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        target, src, base_index = input_index(op, "self"), input_index(op, "src"), input_index(op, "base")
        if target is None or src is None or base_index is None:
            raise self.error("expected the inputs $self (a view of a tensor) and $src")
        self.target, self.src, self.base = target, src, base_index
        base, declared = op.inputs[self.base], op.outputs[0].shape if op.outputs else None
        if declared is not None and base.shape is not None and len(declared) != len(base.shape):
            raise self.error(
                f"the tensor $self is cut from ({base.name}) has rank {len(base.shape)}, "
                f"the output is declared with rank {len(declared)}"
            )

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        view, src, base = inputs[self.target], inputs[self.src], inputs[self.base]
        if not isinstance(src, (np.ndarray, bool, int, float)):  # an optlevel-0 operand may hold any constant
            raise self.error(f"$src must be a tensor or a number, got {type(src).__name__}")
        try:  # PyTorch's copy_ needs a source that broadcasts to the view
            fits = np.broadcast_shapes(np.shape(view), np.shape(src)) == np.shape(view)
        except ValueError:
            fits = False
        if not fits:
            raise self.error(f"cannot copy a source of shape {np.shape(src)} into $self of shape {np.shape(view)}")
        if view is base:  # x.copy_(src) on a whole tensor
            y = np.empty(base.shape, base.dtype)
            np.copyto(y, src, casting="unsafe")
            return [y]
        lo, hi = byte_bounds(base)
        vlo, vhi = byte_bounds(view)
        item = base.itemsize
        if view.dtype != base.dtype or vlo < lo or vhi > hi or (vlo - lo) % item:
            raise self.error(f"$self ({view.shape}) is not a view of the tensor it was cut from ({base.shape})")
        buf = np.empty((hi - lo) // item, base.dtype)  # the base's memory layout, copied

        def same_place(a: np.ndarray) -> np.ndarray:
            offset = (a.__array_interface__["data"][0] - lo) // item
            return as_strided(buf[offset:], a.shape, a.strides)

        y = same_place(base)
        np.copyto(y, base)
        np.copyto(same_place(view), src, casting="unsafe")
        if _usable(out[0], base):
            np.copyto(out[0], y)
            return [out[0]]
        return [np.ascontiguousarray(y)]
