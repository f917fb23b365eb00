"""Tensor ops: cat/stack, the multi-output splitters (chunk, split, tensor_split, unbind),
comparisons (gt/lt/ge/le/eq/ne), where, masked_fill, embedding lookups, and the factories
(zeros/ones/full, *_like, Tensor.new_*).

The splitters are multi-output operators: one output operand per piece, each a view of
the input. Piece sizes are computed from the actual size of the split axis, so splitting
along a non-batch axis works at any batch size.
"""

from __future__ import annotations

import copy
import math
from functools import partial

from typing import Any, Literal

import numpy as np

from ..errors import LimitError, short
from ..graph import Operator
from .halves import SplitRequest, halves_call
from .registry import Layer, Prepared, register
from .torch_args import declared_dtype, input_index, normalize_axis, torch_dtype


def _usable(buf: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether a runtime `out` buffer fits this result (it is None or planned for the
    declared shapes, which another batch size does not match)."""
    return buf is not None and buf.shape == shape and buf.dtype == dtype


# -- joining -----------------------------------------------------------------------------------
class _Join(Layer):
    """torch.cat / torch.stack: inputs (possibly the same operand twice) along `dim`.

    Batch rule: pnnx folds batch-independent branches into constants traced at the traced
    batch B0, e.g. a ViT's `cls_token.expand(x.size(0), -1, -1)` becomes a (1,1,64)
    pnnx.Attribute concatenated with the (B,64,64) patch tokens. When all inputs were
    traced with dim 0 = B0 and, at run time, some have k·B0 while the others still have
    B0, the others are tiled k times along dim 0: the result of k stacked runs at the
    traced batch. (Not for torch.cat along dim 0, where sizes legitimately differ.)
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if not op.inputs:
            raise self.error("needs at least one input")
        self.dim = self.int_param("dim", 0)
        self.dtype = declared_dtype(op)
        traced = {o.shape[0] if o.shape else None for o in op.inputs}
        self.traced_batch = traced.pop() if len(traced) == 1 else None
        if not isinstance(self.traced_batch, int) or self.traced_batch < 1:
            self.traced_batch = None

    def follow_batch(self, inputs: list[np.ndarray], axis: int) -> list[np.ndarray]:
        """Inputs with the batch rule above applied (unchanged when it does not apply)."""
        b0 = self.traced_batch
        if b0 is None or (axis == 0 and isinstance(self, Cat)) or any(x.ndim == 0 for x in inputs):
            return inputs
        grown = {x.shape[0] for x in inputs} - {b0}
        if len(grown) != 1:
            return inputs
        b = grown.pop()
        if b % b0:
            return inputs
        reps = b // b0
        return [x if x.shape[0] == b else np.concatenate([x] * reps, axis=0) for x in inputs]

    def axis(self, inputs: list[np.ndarray]) -> int:
        raise NotImplementedError

    def result_shape(self, inputs: list[np.ndarray]) -> tuple[int, ...]:
        raise NotImplementedError

    def join(self, inputs: list[np.ndarray], axis: int, y: np.ndarray) -> None:
        raise NotImplementedError

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        axis = self.axis(inputs)
        inputs = self.follow_batch(inputs, axis)
        dtype = self.dtype or np.result_type(*inputs)
        shape = self.result_shape(inputs)
        y = out[0] if _usable(out[0], shape, dtype) else np.empty(shape, dtype)
        assert y is not None
        self.join(inputs, axis, y)
        return [y]


@register("torch.cat")
class Cat(_Join):
    splittable = True
    concatenates = True

    def axis(self, inputs: list[np.ndarray]) -> int:
        return normalize_axis(self, self.dim, inputs[0].ndim)

    def result_shape(self, inputs: list[np.ndarray]) -> tuple[int, ...]:
        d = self.axis(inputs)
        first = inputs[0].shape
        for x in inputs[1:]:
            if x.ndim != len(first) or x.shape[:d] + x.shape[d + 1 :] != first[:d] + first[d + 1 :]:
                raise self.error(f"cannot concatenate shapes {[a.shape for a in inputs]} along dim {self.dim}")
        return first[:d] + (sum(x.shape[d] for x in inputs),) + first[d + 1 :]

    def join(self, inputs: list[np.ndarray], axis: int, y: np.ndarray) -> None:
        np.concatenate(inputs, axis=axis, out=y, casting="unsafe")

    def prepare(self, inputs: list[Any], out: list[np.ndarray], split: SplitRequest | None = None) -> Prepared | None:
        """Asked to split: where the inputs lie one after another in the output (no dim before
        `dim` above 1: a batch-1 concat of channels) as two halves of the output's elements,
        each copying its parts of the inputs (DenseNet's concats); else None (forward)."""
        y = out[0]
        if (
            split is None
            or not all(isinstance(x, np.ndarray) for x in inputs)
            or y.size < 2 * split.sizes.min_elements(cheap=True)
        ):
            return None
        axis = self.axis(inputs)
        if self.follow_batch(inputs, axis) is not inputs or math.prod(y.shape[:axis]) != 1 or not y.flags.c_contiguous:
            return None
        if y.shape != self.result_shape(inputs):
            return None
        if not all(x.dtype == y.dtype and x.flags.c_contiguous for x in inputs):
            return None
        flat, starts = y.reshape(-1), np.cumsum([0] + [x.size for x in inputs])
        mid = y.size // 2
        halves = []
        for lo, hi in ((0, mid), (mid, y.size)):
            pieces = []
            for x, a, b in zip(inputs, starts[:-1], starts[1:]):
                s, e = max(lo, a), min(hi, b)
                if s < e:
                    pieces.append((x.reshape(-1)[s - a : e - a], flat[s:e]))
            halves.append(partial(_copy_pieces, pieces))
        return halves_call(split, halves[0], halves[1], inputs, out)


def _copy_pieces(pieces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for src, dst in pieces:
        np.copyto(dst, src)


@register("torch.stack")
class Stack(_Join):
    def axis(self, inputs: list[np.ndarray]) -> int:
        return normalize_axis(self, self.dim, inputs[0].ndim + 1)

    def result_shape(self, inputs: list[np.ndarray]) -> tuple[int, ...]:
        first = inputs[0].shape
        if any(x.shape != first for x in inputs[1:]):
            raise self.error(f"cannot stack different shapes {[a.shape for a in inputs]}")
        d = self.axis(inputs)
        return first[:d] + (len(inputs),) + first[d:]

    def join(self, inputs: list[np.ndarray], axis: int, y: np.ndarray) -> None:
        np.stack(inputs, axis=axis, out=y, casting="unsafe")


# -- splitting (multi-output) -------------------------------------------------------------------
class _Split(Layer):
    """Cuts the input along `dim` into len(outputs) views; subclasses give the cut points."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", 0)
        self._points: dict[int, list[int]] = {}

    def cut_points(self, n: int) -> list[int]:
        """Where to cut an axis of size n (np.split indices)."""
        raise NotImplementedError

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        d = normalize_axis(self, self.dim, x.ndim)
        n = x.shape[d]
        points = self._points.get(n)
        if points is None:
            points = self._points[n] = self.cut_points(n)
            if len(points) + 1 != len(self.op.outputs):
                raise self.error(
                    f"splitting dim {self.dim} of size {n} gives {len(points) + 1} pieces, "
                    f"the graph declares {len(self.op.outputs)} outputs"
                )
        return np.split(x, points, axis=d)


def _cuts_every(size: int, n: int) -> list[int]:
    return list(range(size, n, size)) if n else []


@register("torch.chunk")
class Chunk(_Split):
    """`torch.chunk(x, chunks, dim)`: pieces of ceil(n/chunks), the last one smaller (so
    there may be fewer than `chunks` pieces, as in PyTorch)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.chunks = self.int_param("chunks")
        if self.chunks < 1:
            raise self.error(f"chunks must be >= 1, got {self.chunks}")

    def cut_points(self, n: int) -> list[int]:
        return _cuts_every(-(-n // self.chunks), n)


@register("aten::unsafe_chunk")
class UnsafeChunk(Chunk):
    """TorchScript's `unsafe_chunk(self, chunks, dim)` (positional; LSTMCell and GRUCell
    decompose into it at every optlevel): torch.chunk without the aliasing checks."""

    arg_names = ("self", "chunks", "dim")


@register("torch.split")
class Split(_Split):
    """`torch.split(x, split_size_or_sections, dim)`: an int size (last piece smaller) or a
    list of sizes that add up to the axis size."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        value = self.param("split_size_or_sections")
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise self.error(f"split_size_or_sections must be >= 1, got {value}")
            self.size: int | None = value
            self.sections: tuple[int, ...] = ()
        else:
            self.size = None
            self.sections = self.ints_param("split_size_or_sections")
            if any(s < 0 for s in self.sections):
                raise self.error(f"split sections must be >= 0, got {self.sections}")

    def cut_points(self, n: int) -> list[int]:
        if self.size is not None:
            return _cuts_every(self.size, n)
        if sum(self.sections) != n:
            raise self.error(
                f"split sections {self.sections} add up to {sum(self.sections)}, dim {self.dim} has size {n}"
            )
        return list(np.cumsum(self.sections[:-1]))


@register("torch.tensor_split")
class TensorSplit(_Split):
    """`torch.tensor_split(x, sections | indices, dim)`: `sections=k` gives k nearly equal
    pieces (the first n % k one longer); `indices=(i, j)` cuts before those indices."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if "indices" in op.params:
            self.indices: tuple[int, ...] | None = self.ints_param("indices")
            self.sections = 0
        else:
            self.indices = None
            self.sections = self.int_param("sections")
            if self.sections < 1:
                raise self.error(f"sections must be >= 1, got {self.sections}")
        pieces = self.sections or len(self.indices or ()) + 1
        if pieces != len(op.outputs):
            raise self.error(f"tensor_split makes {pieces:,} pieces, the graph declares {len(op.outputs)} outputs")

    def cut_points(self, n: int) -> list[int]:
        if self.indices is not None:
            return [min(max(i + n if i < 0 else i, 0), n) for i in self.indices]
        q, r = divmod(n, self.sections)
        sizes = [q + 1] * r + [q] * (self.sections - r)
        return list(np.cumsum(sizes[:-1]))


@register("torch.unbind")
class Unbind(Layer):
    """`torch.unbind(x, dim)`: one output per index of `dim`, that axis removed (views)."""

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", 0)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        d = normalize_axis(self, self.dim, x.ndim)
        if x.shape[d] != len(self.op.outputs):
            raise self.error(f"dim {self.dim} has size {x.shape[d]}, the graph declares {len(self.op.outputs)} outputs")
        return list(np.moveaxis(x, d, 0))


# -- comparisons ----------------------------------------------------------------------------------------
_COMPARISONS: dict[str, np.ufunc] = {
    "torch.gt": np.greater,
    "torch.lt": np.less,
    "torch.ge": np.greater_equal,
    "torch.le": np.less_equal,
    "torch.eq": np.equal,
    "torch.ne": np.not_equal,
    # logical ops: any dtype, read as truth values, a bool result
    "torch.logical_and": np.logical_and,
    "torch.logical_or": np.logical_or,
    "torch.logical_xor": np.logical_xor,
}


@register(*_COMPARISONS)
class Compare(Layer):
    """torch.gt/lt/ge/le/eq/ne and logical_and/or/xor: `other` is an operand (`$other`, broadcast) or a number param
    (`other=0.25`). The result is bool (NumPy compares float32 with a Python float in
    float32, as PyTorch does)."""

    UFUNCS = _COMPARISONS

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.ufunc = self.UFUNCS[op.type]
        self.other = input_index(op, "other")
        if self.other is None:
            if len(op.inputs) > 1:
                self.other = 1
            else:
                value = self.param("other")
                if isinstance(value, list) or value is None:
                    raise self.error(f"parameter 'other' must be a number (or a $other operand), got {value!r}")
                self.value = self.number_param("other")  # also 'inf', '-inf', 'nan'
        source = input_index(op, "input")
        self.source = 0 if source is None else source

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[self.source]
        other = inputs[self.other] if self.other is not None else self.value
        shape = np.broadcast_shapes(x.shape, np.shape(other))
        y = out[0] if _usable(out[0], shape, np.dtype(np.bool_)) else None
        return [self.ufunc(x, other, out=y) if y is not None else np.asarray(self.ufunc(x, other))]


@register("aten::logical_and", "aten::logical_or", "aten::logical_xor")
class AtenLogical(Compare):
    """logical_and/or/xor as pnnx 20240226 wrote them: TorchScript's aten::logical_*(self, other)."""

    UFUNCS = {f"aten::{n}": _COMPARISONS[f"torch.{n}"] for n in ("logical_and", "logical_or", "logical_xor")}
    arg_names = ("input", "other")


_BITWISE: dict[str, np.ufunc] = {
    "torch.bitwise_and": np.bitwise_and,
    "torch.bitwise_or": np.bitwise_or,
    "torch.bitwise_xor": np.bitwise_xor,
}


@register(*_BITWISE)
class Bitwise(Compare):
    """torch.bitwise_and/or/xor of bool or integer tensors (pnnx writes the functions so at
    every optlevel; `a & b` becomes aten::__and__ or a pnnx.Expression): `other` as for
    Compare; the result has the promoted dtype, as in PyTorch."""

    UFUNCS = _BITWISE

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[self.source])
        other = inputs[self.other] if self.other is not None else self.value
        for v in (x, other):
            if np.asarray(v).dtype.kind not in "biu":
                raise self.error(f"{self.type} needs bool or integer inputs, got {np.asarray(v).dtype}")
        return [np.asarray(self.ufunc(x, other))]


@register("aten::isnan", "aten::isinf", "torch.bitwise_not")
class Predicate(Layer):
    """isnan / isinf (bool), and `~x` (torch.bitwise_not: logical not of a bool tensor,
    bitwise not of an integer one)."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if self.type == "torch.bitwise_not":
            if x.dtype.kind not in "biu":
                raise self.error(f"bitwise_not needs a bool or integer tensor, got {x.dtype}")
            return [np.invert(x)]
        if x.dtype.kind != "f":
            return [np.zeros(x.shape, np.bool_)]
        return [np.isnan(x) if self.type == "aten::isnan" else np.isinf(x)]


@register("aten::nan_to_num")
class NanToNum(Layer):
    """`torch.nan_to_num(x, nan, posinf, neginf)`: NaN -> nan (0 by default), ±inf -> the
    given values or the dtype's largest finite ones."""

    arg_names = ("self", "nan", "posinf", "neginf")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if x.dtype.kind != "f":
            return [x.copy()]
        info = np.finfo(x.dtype)

        def pick(key: str, default: float) -> float:
            return default if self.param(key, None) is None else self.number_param(key)

        return [
            np.nan_to_num(x, nan=pick("nan", 0.0), posinf=pick("posinf", info.max), neginf=pick("neginf", info.min))
        ]


# -- where --------------------------------------------------------------------------------------------
def _scalar_dtype(value: Any, tensors: list[np.ndarray]) -> np.dtype:
    """PyTorch's result dtype for tensors mixed with a Python scalar: the tensors' dtype,
    except that a float scalar makes integer/bool tensors float32 (torch's default)."""
    base = np.result_type(*tensors) if tensors else None
    if isinstance(value, float) and (base is None or base.kind in "iub"):
        return np.dtype(np.float32)
    if isinstance(value, int) and not isinstance(value, bool) and (base is None or base.kind == "b"):
        return np.dtype(np.int64)
    return base if base is not None else np.dtype(np.bool_)


@register("torch.where")
class Where(Layer):
    """`torch.where(condition, input, other)`; input/other are operands (`$input`, `$other`)
    or scalar params (`input=-1.0`, `other=0.5`). Broadcasts all three."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        cond = input_index(op, "condition")
        self.cond = 0 if cond is None else cond
        self.branches: list[tuple[int | None, Any]] = []
        for key in ("input", "other"):
            idx = input_index(op, key)
            if idx is None:
                value = self.param(key)
                if isinstance(value, list) or value is None:
                    raise self.error(f"parameter '{key}' must be a number (or a ${key} operand), got {value!r}")
                self.branches.append((None, self.number_param(key)))  # also 'inf', '-inf' (a mask's fill)
            else:
                self.branches.append((idx, None))
        self.dtype = declared_dtype(op)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        cond = inputs[self.cond]
        if cond.dtype != np.bool_:
            cond = cond.astype(np.bool_)
        a, b = (inputs[i] if i is not None else v for i, v in self.branches)
        for key, v in zip(("input", "other"), (a, b)):  # an optlevel-0 operand may hold any constant
            if not isinstance(v, (np.ndarray, bool, int, float)):
                raise self.error(f"${key} must be a tensor or a number, got {type(v).__name__} {short(repr(v))}")
        tensors = [t for t in (a, b) if isinstance(t, np.ndarray)]
        dtype = self.dtype
        if dtype is None:
            scalars = [v for v in (a, b) if not isinstance(v, np.ndarray)]
            dtype = _scalar_dtype(scalars[0], tensors) if scalars else np.result_type(*tensors)
        try:
            shape = np.broadcast_shapes(cond.shape, *(np.shape(t) for t in (a, b)))
        except ValueError:
            raise self.error(
                f"cannot broadcast condition {cond.shape}, input {np.shape(a)} and other {np.shape(b)}"
            ) from None
        y = out[0] if _usable(out[0], shape, dtype) else np.empty(shape, dtype)
        assert y is not None
        np.copyto(y, b, casting="unsafe")
        np.copyto(y, a, casting="unsafe", where=cond)
        return [y]


@register("aten::where")
class AtenWhere(Where):
    """TorchScript's aten::where, positional. With three arguments torch.where, as pnnx
    20240226 wrote it (a number `other` arrives as a param, a number `self` as an input).
    With one, `nonzero(condition, as_tuple=True)`: the indices of the true elements, one
    tensor per dim (a tuple split by prim::ListUnpack: detection post-processing)."""

    arg_names = ("condition", "input", "other")

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return len(op.inputs) == 1

    def __init__(self, op: Operator) -> None:
        self.indices = len(op.inputs) == 1
        if self.indices:
            Layer.__init__(self, op)
            return
        bound = copy.copy(op)  # (a BoundOperator: keeps its source)
        bound.input_names = list(self.arg_names[: len(op.inputs)])
        super().__init__(bound)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        if not self.indices:
            return super().forward(inputs, out)
        cond = np.asarray(inputs[0])
        idx = np.nonzero(cond if cond.dtype == np.bool_ else cond != 0)
        if len(idx) != len(self.op.outputs) and cond.ndim:
            raise self.error(
                f"a {cond.ndim}-D condition gives {cond.ndim} index tensors, the file has {len(self.op.outputs)}"
            )
        return [i.astype(np.int64) for i in idx] if cond.ndim else [np.zeros(int(bool(cond)), np.int64)]


@register("Tensor.masked_fill")
class MaskedFill(Layer):
    """`x.masked_fill(mask, value)`: value where the (broadcast) mask is true. `value` is a
    number param or a 0-d tensor input ($value)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        mask = input_index(op, "mask")
        self.mask = 1 if mask is None else mask
        self.value_input = input_index(op, "value")
        self.value = None if self.value_input is not None else self.number_param("value")
        self.source = input_index(op, "input") or 0

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, mask = inputs[self.source], np.asarray(inputs[self.mask])
        value = inputs[self.value_input] if self.value_input is not None else self.value
        if mask.dtype != np.bool_:
            raise self.error(f"the mask must be a bool tensor, got {mask.dtype}")
        try:
            shape = np.broadcast_shapes(x.shape, mask.shape)
        except ValueError:
            shape = None
        if shape != x.shape:
            raise self.error(f"mask of shape {mask.shape} does not broadcast to the input's {x.shape}")
        y = out[0] if _usable(out[0], x.shape, x.dtype) else np.empty(x.shape, x.dtype)
        assert y is not None
        with np.errstate(invalid="ignore", over="ignore"):
            np.copyto(y, x)
            np.copyto(y, np.asarray(value).astype(x.dtype), where=mask)
        return [y]


@register("nn.Embedding")
class Embedding(Layer):
    """A row of @weight (num_embeddings, embedding_dim) per integer index. With max_norm,
    rows longer than max_norm (in the norm_type norm) are scaled to it, as PyTorch does to
    the rows it looks up (doing it to every row at build gives the same outputs)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        w = self.weight("weight")
        assert w is not None
        if w.ndim != 2:
            raise self.error(f"expected @weight of shape (num_embeddings, embedding_dim), got {w.shape}")
        if self.param("max_norm", None) is not None:
            max_norm = self.float_param("max_norm")
            p = self.float_param("norm_type", 2.0)
            norms = np.linalg.norm(w.astype(np.float64), ord=p, axis=1, keepdims=True)
            scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            w = (w * scale).astype(w.dtype)
        self.table = w

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        ids = np.asarray(inputs[0])
        if ids.dtype.kind not in "iu":
            raise self.error(f"expected integer indices, got {ids.dtype}")
        n = self.table.shape[0]
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise self.error(f"index {bad} is out of range for {n} embeddings")
        shape = ids.shape + (self.table.shape[1],)
        y = out[0] if _usable(out[0], shape, self.table.dtype) else None
        return [np.take(self.table, ids, axis=0, out=y)]


# -- factories -----------------------------------------------------------------------------------------
class _Fill(Layer):
    """A new tensor filled with one value.

    Shape: the `size` param (which may be computed at run time, e.g. from a pnnx.Expression
    `[size(@0,0),3]`), or the input's shape for *_like. Dtype: `dtype=torch.X`, else the declared output
    dtype, else the input's (Tensor.new_*, *_like), else torch's default for the value.
    """

    like = False  # shape from the input (torch.*_like)
    from_input_dtype = False  # default dtype is the input's (Tensor.new_*, *_like)
    value: Any = None  # None: from the fill_value param

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if self.value is None:
            value = self.param("fill_value")
            if isinstance(value, list) or value is None:
                raise self.error(f"fill_value must be a number, got {value!r}")
            self.value = self.number_param("fill_value")  # also 'nan', 'inf', '-inf'
        self.dtype = torch_dtype(self) or declared_dtype(op)
        self.size: tuple[int, ...] | None = None
        if not self.like:
            self.size = self.ints_param("size")
            if any(s < 0 for s in self.size):
                raise self.error(f"size must be >= 0, got {self.size}")
            self.check_size(self.size)
        self.source = input_index(op, "input")
        if (self.like or self.from_input_dtype) and self.source is None:
            self.source = 0 if op.inputs else None
            if self.source is None:
                raise self.error("needs an input tensor ($input)")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        src = inputs[self.source] if self.source is not None else None
        if self.like:
            assert src is not None
            shape = src.shape
        else:
            assert self.size is not None
            shape = self.size
        dtype = self.dtype
        if dtype is None:
            if self.from_input_dtype and src is not None:
                dtype = src.dtype
            else:
                dtype = _scalar_dtype(self.value, [])
        y = out[0] if _usable(out[0], tuple(shape), dtype) else np.empty(shape, dtype)
        assert y is not None
        y.fill(self.value)
        return [y]


@register("aten::meshgrid")
class Meshgrid(Layer):
    """`torch.meshgrid(tensors, indexing=…)` (pnnx keeps aten::meshgrid): one grid per 1-D
    input. The tensors arrive spliced from a prim::ListConstruct, or as one list (a
    `pnnx.Expression expr=[@0,@1]` of a dynamic-shape export), read at run time."""

    arg_names = ("tensors", "indexing")
    value_inputs = ("tensors",)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        indexing = self.param("indexing", "ij")
        if indexing not in ("ij", "xy"):
            raise self.error(f"parameter 'indexing' must be 'ij' or 'xy', got {indexing!r}")
        self.indexing: Literal["ij", "xy"] = "ij" if indexing == "ij" else "xy"

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        tensors: list[np.ndarray] = []
        for x in inputs:
            tensors.extend(x if isinstance(x, list) else [x])
        if any(np.ndim(t) > 1 for t in tensors):
            raise self.error(f"expected 0-d or 1-D tensors, got shapes {[np.shape(t) for t in tensors]}")
        grids = np.meshgrid(*[np.reshape(t, -1) for t in tensors], indexing=self.indexing)
        if len(grids) != len(self.op.outputs):
            raise self.error(f"{len(grids)} grids for {len(self.op.outputs)} outputs")
        return [np.ascontiguousarray(g) for g in grids]


@register("aten::triu", "aten::tril")
class Triangle(Layer):
    """`torch.triu(x, diagonal)` / `torch.tril`: the upper / lower triangle of the last two
    dims, zeros elsewhere (TorchScript's positional self, diagonal at every optlevel)."""

    arg_names = ("self", "diagonal")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.diagonal = self.int_param("diagonal", 0)
        self.fn = np.triu if op.type.endswith("triu") else np.tril

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim < 2:
            raise self.error(f"expected a tensor of rank 2 or more, got shape {x.shape}")
        return [self.fn(x, self.diagonal)]


@register("aten::unfold")
class Frames(Layer):
    """`x.unfold(dimension, size, step)` (TorchScript's Tensor.unfold, which pnnx keeps as
    aten::unfold): every window of `size` entries along `dimension`, one every `step`; that dim
    becomes the window count (n - size) // step + 1 and the window is a new last dim."""

    arg_names = ("self", "dimension", "size", "step")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dimension")
        self.size = self.int_param("size", low=0)
        self.step = self.int_param("step", low=1)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        d = normalize_axis(self, self.dim, max(x.ndim, 1))
        n = x.shape[d] if x.ndim else 1
        if self.size > n:
            raise self.error(f"size {self.size} is larger than dim {d} of the input, {n}")
        windows = np.lib.stride_tricks.sliding_window_view(x.reshape(x.shape or (1,)), self.size, axis=d)
        taken = windows[(slice(None),) * d + (slice(None, None, self.step),)]
        return [np.ascontiguousarray(taken if x.ndim else taken[0])]


@register("aten::one_hot")
class OneHot(Layer):
    """`F.one_hot(ids, num_classes)` (TorchScript's aten::one_hot at every optlevel): an int64
    (…, num_classes) tensor; num_classes=-1 means max(ids) + 1, as in PyTorch."""

    arg_names = ("self", "num_classes")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.classes = self.int_param("num_classes", -1, low=-1, high=self.size_limit)

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        classes = op.params.get("num_classes", -1)  # absent: computed at run time
        return not (isinstance(classes, int) and classes >= 0)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        ids = np.asarray(inputs[0])
        if ids.dtype.kind not in "iu":
            raise self.error(f"expected integer class indices, got {ids.dtype}")
        n = self.classes if self.classes >= 0 else (int(ids.max()) + 1 if ids.size else 0)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise self.error(f"class values must be in 0..{n - 1}, got {int(ids.min())}..{int(ids.max())}")
        self.check_size(ids.shape + (n,))
        return [(ids[..., None] == np.arange(n)).astype(np.int64)]


@register("torch.arange")
class Arange(Layer):
    """`torch.arange(start=0, end, step=1, dtype=None)`: int64 when every bound is an int,
    else float32 (torch's default), unless `dtype` (or the declared output) says otherwise.
    The bounds are often computed at run time (`$end` from `size(@0,1)`)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        given = [self.param(k, d) for k, d in (("start", 0), ("end", None), ("step", 1))]
        bounds = [b for b in given if isinstance(b, (int, float)) and not isinstance(b, bool)]
        if len(bounds) != 3:
            raise self.error(f"start, end and step must be numbers, got {given}")
        if not all(np.isfinite(bounds)):
            raise self.error(f"start, end and step must be finite, got {bounds}")  # torch: unsupported range
        self.start, self.end, self.step = bounds
        if self.step == 0:
            raise self.error("step must not be 0")
        default = np.dtype(np.int64) if all(isinstance(b, int) for b in bounds) else np.dtype(np.float32)
        self.dtype = torch_dtype(self) or declared_dtype(op) or default
        count = np.ceil((self.end - self.start) / self.step)  # inf for (-1e308, 1e308)
        if not np.isfinite(count):
            raise self.error(f"arange({self.start}, {self.end}, {self.step}) has no finite length")
        if count > self.size_limit:  # (said as a float: 5e307 is 308 digits long)
            raise LimitError(
                f"arange({self.start}, {self.end}, {self.step}) would have {count:.4g} elements",
                limit="max_tensor_elements",
                maximum=self.size_limit,
                operator=op.name,
                op_type=op.type,
            )
        self.check_size((max(0, int(count)),))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.arange(self.start, self.end, self.step).astype(self.dtype, copy=False)]


@register("torch.zeros")
class Zeros(_Fill):
    value = 0.0


@register("torch.ones")
class Ones(_Fill):
    value = 1.0


@register("torch.full")
class Full(_Fill):
    pass


@register("torch.zeros_like")
class ZerosLike(_Fill):
    like = from_input_dtype = True
    value = 0.0


@register("torch.ones_like")
class OnesLike(_Fill):
    like = from_input_dtype = True
    value = 1.0


@register("torch.full_like")
class FullLike(_Fill):
    like = from_input_dtype = True


@register("Tensor.new_zeros")
class NewZeros(_Fill):
    from_input_dtype = True
    value = 0.0


@register("Tensor.new_ones")
class NewOnes(_Fill):
    from_input_dtype = True
    value = 1.0
