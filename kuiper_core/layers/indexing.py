"""Indexing layers: gather (torch's and ONNX's), index_select, advanced indexing (`x[:, [0, 2]]`), flip, roll,
cumulative sums and products.

Each reads its arguments as params whatever the optlevel (`dim=3` at optlevel 2,
`$dim=140` from a prim::Constant at 0/1: the runtime resolves those). The index tensors are
inputs (`$index`), or for Tensor.index part of its `expr` list: a string at optlevel 2
(`expr=[None,[0,2]]`), the resolved list at optlevel 0/1 (`$expr` made by
prim::ListConstruct of None and a constant tensor).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from ..graph import Operand, Operator
from ._common import check_index
from .registry import Layer, register
from .torch_args import axes_param, input_index, normalize_axis


class _InputAndIndex(Layer):
    """A layer of `input` and an integer `index` operand along `dim`."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim")
        self.source = input_index(op, "input") or 0
        index = input_index(op, "index")
        self.index = (1 - self.source) if index is None else index
        if len(op.inputs) != 2:
            raise self.error(f"expected 2 inputs (input, index), got {len(op.inputs)}")

    def operands(self, inputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
        x, index = inputs[self.source], np.asarray(inputs[self.index])
        return x, index, normalize_axis(self, self.dim, max(x.ndim, 1))


@register("torch.gather")
class Gather(_InputAndIndex):
    """`torch.gather(x, dim, index)`: out[i][j][k] = x[i][index[i][j][k]][k] for dim 1."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index, d = self.operands(inputs)
        if index.ndim != x.ndim:
            raise self.error(f"index has rank {index.ndim}, the input {x.ndim}: gather needs the same rank")
        if any(index.shape[k] > x.shape[k] for k in range(x.ndim) if k != d):
            raise self.error(f"index of shape {index.shape} is larger than the input {x.shape} outside dim {d}")
        check_index(self, index, x.shape[d], "index")
        # torch lets the index be smaller than the input on the other dims: cut the input to it.
        cut = x[tuple(slice(0, n) if k != d else slice(None) for k, n in enumerate(index.shape))]
        return [np.take_along_axis(cut, index.astype(np.intp), axis=d)]


@register("torch.index_select")
class IndexSelect(_InputAndIndex):
    """`torch.index_select(x, dim, index)`: the entries of a 1-D index along dim."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index, d = self.operands(inputs)
        if index.ndim > 1:
            raise self.error(f"index must be 1-D, got shape {index.shape}")
        check_index(self, index, x.shape[d], "index")
        return [np.take(x, index.reshape(-1), axis=d)]


@register("Gather")
class OnnxGather(Layer):
    """ONNX's `Gather(data, indices, axis)`, which pnnx keeps as is where it has no torch form:
    np.take (the result has indices' shape in place of the axis). torch.onnx.export's dynamo
    exporter writes a view (convnext's `x.view(...)` after the pooling) as Reshape + Gather with
    constant indices."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.axis = self.int_param("axis", 0)
        if len(op.inputs) != 2:
            raise self.error(f"expected 2 inputs (data, indices), got {len(op.inputs)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, index = np.asarray(inputs[0]), np.asarray(inputs[1])
        axis = normalize_axis(self, self.axis, max(x.ndim, 1))
        check_index(self, index, x.shape[axis], "indices")
        return [np.take(x, index.astype(np.intp), axis=axis)]


@register("Tensor.index")
class Index(Layer):
    """`x[idx0, idx1, …]` with index tensors (torch's aten::index): a list with one entry
    per leading dim, None for "all of it" (not NumPy's new axis), else an integer or bool
    index. pnnx writes the list as text when it is constant (`expr=[None,[0,2]]`), else as
    a list operand (`$expr`, from `pnnx.Expression expr=[None,@0]` or prim::ListConstruct),
    which the layer reads at run time. NumPy's advanced indexing places the result dims as
    torch does (together where the indices are, in front when they are apart)."""

    value_inputs = ("expr",)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.source = input_index(op, "input") or 0
        self.list_input = input_index(op, "expr")
        self.key: tuple[Any, ...] = ()  # the constant key, when the list is not an input
        if self.list_input is None:
            expr = self.param("expr")
            if isinstance(expr, str):
                try:
                    expr = ast.literal_eval(expr)
                except (ValueError, SyntaxError):
                    raise self.error(f"cannot read the index list expr={expr!r}") from None
            self.key = self._key(expr)

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        """A bool mask selects as many entries as it holds True. A list given at run time
        holds the operands its maker (pnnx.Expression, prim::ListConstruct) reads: any of
        them bool, or of undeclared dtype and not a constant (None, an int), may be a mask."""
        k = input_index(op, "expr")
        if k is None:  # a constant key: its masks are fixed
            return False
        maker = op.inputs[k].producer
        return maker is None or any(_may_be_mask(o) for o in maker.inputs)

    def _key(self, entries: Any) -> tuple[Any, ...]:
        if not isinstance(entries, (list, tuple)):
            raise self.error(f"expected a list of indices, got {entries!r}")
        key: list[Any] = []
        for e in entries:
            if e is None:
                key.append(slice(None))
                continue
            index = np.asarray(e)
            if index.dtype.kind not in "iub":
                raise self.error(f"an index must hold integers or bools, got {index.dtype}")
            key.append(index)
        return tuple(key)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[self.source]
        key = self.key if self.list_input is None else self._key(inputs[self.list_input])
        if len(key) > x.ndim:
            raise self.error(f"{len(key)} indices for an input of rank {x.ndim}")
        for d, k in enumerate(key):
            if isinstance(k, np.ndarray) and k.dtype.kind in "iu":
                check_index(self, k, x.shape[d], f"index on dim {d}")
        try:
            return [np.asarray(x[key])]
        except IndexError as e:
            raise self.error(f"cannot index an input of shape {x.shape}: {e}") from None


def _may_be_mask(o: Operand) -> bool:
    if o.dtype is not None:
        return o.dtype == "bool"
    p = o.producer
    return p is None or not (p.type == "prim::Constant" or (p.type == "pnnx.Expression" and not p.inputs))


@register("torch.flip")
class Flip(Layer):
    """`torch.flip(x, dims)`: reversed along each of dims (a copy in torch; a view here)."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        dims = axes_param(self, "dims")
        if dims is None:
            raise self.error("parameter 'dims' must list the axes to flip")
        self.dims = dims

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        axes = tuple(normalize_axis(self, d, max(x.ndim, 1)) for d in self.dims)
        return [np.flip(x, axis=axes) if x.ndim else x]


@register("torch.roll")
class Roll(Layer):
    """`torch.roll(x, shifts, dims)`; without dims, the flattened tensor rolled and reshaped."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        shifts = self.param("shifts")
        self.shifts = tuple(shifts) if isinstance(shifts, list) else (shifts,)
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in self.shifts):
            raise self.error(f"parameter 'shifts' must be ints, got {shifts!r}")
        self.dims = axes_param(self, "dims", None)
        if self.dims is not None and len(self.dims) != len(self.shifts):
            raise self.error(f"{len(self.shifts)} shifts for {len(self.dims)} dims")
        if self.dims is None and len(self.shifts) != 1:
            raise self.error("without dims, shifts must be one number")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if self.dims is None:
            return [np.roll(x, self.shifts[0])]
        axes = tuple(normalize_axis(self, d, max(x.ndim, 1)) for d in self.dims)
        return [np.roll(x, self.shifts, axis=axes)]


@register("torch.cumsum", "torch.cumprod")
class Cumulative(Layer):
    """Running sum / product along dim; integer and bool inputs give int64, as in torch."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim")
        self.fn = np.cumprod if op.type.endswith("cumprod") else np.cumsum
        self.source = input_index(op, "input") or 0

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[self.source])
        dtype = np.int64 if x.dtype.kind in "iub" else x.dtype
        if x.ndim == 0:
            return [x.astype(dtype)]
        return [self.fn(x, axis=normalize_axis(self, self.dim, x.ndim), dtype=dtype)]
