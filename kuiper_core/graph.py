"""A format-neutral graph: operands, operators, attributes.

This is the plain data model that the .param reader fills, the writer saves, the runtime
builds from, and (later) the textual IR and the optimisation passes rewrite. It holds no
runtime state: no layers, no buffers.

Shapes are tuples whose entries are ints, `None` for an unknown dim (`?` in .param) or a
str for a symbolic dim (`%name`). An operand with no `#` annotation has `shape is None`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
import threading
import weakref
from typing import Any, Protocol
from collections.abc import Callable, Iterator, Sequence

import numpy as np

Dim = int | None | str  # a size, unknown (None: `?`), or a symbol (`%n`)
Shape = tuple[Dim, ...]


def known_dims(shape: Shape) -> tuple[int, ...] | None:
    """`shape` when every dim is a known int, else None."""
    dims = tuple(int(d) for d in shape if isinstance(d, int))
    return dims if len(dims) == len(shape) else None


def dim_text(d: Dim) -> str:
    return "?" if d is None else (f"%{d}" if isinstance(d, str) else str(d))


def format_shape(shape: Shape | None, dtype: str | None = None) -> str:
    """A shape as .param writes it, `(1,3,?,%n)f32` (without a dtype `(1,3,?,%n)`); an unknown
    shape `?`. The one formatter for messages; the app's labels use `shape_label`."""
    if shape is None:
        return "?"
    return "(" + ",".join(map(dim_text, shape)) + ")" + (dtype or "")


def shape_label(shape: Sequence[Dim] | None) -> str:
    """A shape for a label: `1x3x?x7`; unknown `?`; a scalar `()`."""
    if shape is None:
        return "?"
    return "x".join(map(dim_text, shape)) if len(shape) else "()"


# Parameter values as .param writes them: None, bool, int, float, str, or a list of
# ints/floats/strs (written as a tuple "(1,2)").
ParamValue = None | bool | int | float | str | list
# A pnnx.Input parameter: the one value of that input its file was converted for
# (formats/onnx_given.py writes it; runtime/inputs.py refuses any other value).
FIXED_INPUT_PARAM = "value"

# .param dtype names <-> NumPy dtypes of the bytes in the .bin. bf16 has no NumPy dtype:
# its bytes are uint16 bit patterns, widened to float32 when loaded (see numpy_dtype).
DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype("<u2"),
    "i64": np.dtype("<i8"),
    "i32": np.dtype("<i4"),
    "i16": np.dtype("<i2"),
    "i8": np.dtype("i1"),
    "u8": np.dtype("u1"),
    "bool": np.dtype("?"),
    "c64": np.dtype("<c8"),
    "c128": np.dtype("<c16"),
}


FLOAT32 = np.dtype("<f4")


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype tensors of this .param dtype have in memory (KeyError for unknown
    names): bf16 values are held as float32, which represents every one of them exactly."""
    return FLOAT32 if name == "bf16" else DTYPES[name]


def file_dtype(name: str) -> np.dtype:
    """The NumPy dtype of the .bin bytes of this .param dtype (bf16: uint16 bit patterns)."""
    return DTYPES[name]


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32: bf16 is the top half of a float32."""
    return (bits.astype("<u4") << 16).view(FLOAT32)


def float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), rounding to nearest even as torch does."""
    u = np.ascontiguousarray(values, FLOAT32).view("<u4")
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded).astype("<u2")


def dtype_name(dtype: np.dtype) -> str:
    """The .param dtype name for a NumPy dtype (bf16 cannot be told from u16: never returned)."""
    dtype = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).byteorder == ">" else np.dtype(dtype)
    for name, dt in DTYPES.items():
        if name != "bf16" and dt == dtype:
            return name
    raise KeyError(f"no .param dtype for {dtype}")


_RELOAD_LOCK = threading.Lock()


class WeightSource(Protocol):
    """Where a weight's bytes can be read again (the .bin entry it was loaded from)."""

    def read(self) -> np.ndarray:
        """The weight again, exactly as loaded; an error if the file no longer holds it."""
        ...


def _unread() -> None:
    """An Attribute's `_weak` before its first read (Attribute.defer): nothing alive yet."""
    return None


class Attribute:
    """A weight: `@name=(shape)dtype` in .param, its bytes in the .bin entry `op.name`.

    `data` is the row-major array of that shape (None until loaded). A weight loaded from a
    file knows its `source`; after `release()` the attribute holds it only while someone
    else does (a layer that computes with it) and reads it again when asked. Why: a layer
    that keeps only a transformed copy (Winograd's U) would otherwise keep both in memory
    (ResNet-18 at batch 4: 38 of its 47 MB of weights are then in memory only as U).
    """

    __slots__ = ("dtype", "shape", "_data", "_weak", "source")

    def __init__(self, dtype: str, shape: tuple[int, ...], data: np.ndarray | None = None) -> None:
        self.dtype = dtype
        self.shape = shape
        self._data = data
        # after release() or defer(): the array while it lives
        self._weak: weakref.ref[np.ndarray] | Callable[[], None] | None = None
        self.source: WeightSource | None = None

    @property
    def data(self) -> np.ndarray | None:
        if self._data is not None or self._weak is None:
            return self._data
        data = self._weak()
        if data is None:
            with _RELOAD_LOCK:  # one read for threads asking at once: they share its array
                data = self._weak() if self._weak is not None else self._data  # set meanwhile by another thread?
                if data is None:
                    assert self.source is not None
                    data = self.source.read()
                    self._weak = weakref.ref(data)
        return data

    @data.setter
    def data(self, value: np.ndarray | None) -> None:
        """A new array: held, and no longer the file's (a pass may have rewritten it)."""
        self._data, self._weak, self.source = value, None, None

    def load(self, data: np.ndarray, source: WeightSource | None) -> None:
        """The array as read from `source` (which can read it again after release())."""
        self._data, self._weak, self.source = data, None, source

    def defer(self, source: WeightSource) -> None:
        """Known only by where its bytes are: read when first asked for, then held only while
        someone else holds it, as after release() (a model's load reads no weight)."""
        self._data, self._weak, self.source = None, _unread, source

    def release(self) -> None:
        """Hold the data only while something else does, if it can be read again."""
        if self.source is not None and self._data is not None:
            self._weak, self._data = weakref.ref(self._data), None

    def data_if_held(self) -> np.ndarray | None:
        """The array if it is in memory now (never reads it)."""
        return self._data if self._data is not None or self._weak is None else self._weak()

    @property
    def released(self) -> bool:
        return self._weak is not None

    def copy(self) -> Attribute:
        """The same weight (the same array, source and release state)."""
        c = Attribute(self.dtype, self.shape, self._data)
        c._weak, c.source = self._weak, self.source
        return c

    @property
    def identity(self) -> tuple[str, int]:
        """Equal for copies of one weight, different after `data` is replaced (passes never
        write into an array, they replace it): a released weight's array comes and goes."""
        return (
            ("source", id(self.source)) if self._data is None and self.source is not None else ("data", id(self._data))
        )

    def __repr__(self) -> str:
        held = "released" if self.released else "loaded" if self._data is not None else "not loaded"
        return f"Attribute({self.dtype!r}, {self.shape}, {held})"

    def __getstate__(self) -> dict[str, Any]:  # a weakref cannot be pickled: the array itself
        return {"dtype": self.dtype, "shape": self.shape, "_data": self.data, "_weak": None, "source": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)

    @property
    def available(self) -> bool:
        """Its data is here or can be read (from its source)."""
        return self._data is not None or self.source is not None

    @property
    def array_dtype(self) -> np.dtype:
        """The dtype of `data` (bf16 weights are widened to float32 when read)."""
        return FLOAT32 if self.dtype == "bf16" else file_dtype(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of its .bin entry (a 0-d weight holds one value)."""
        return math.prod(self.shape) * file_dtype(self.dtype).itemsize

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attribute):
            return NotImplemented
        if self.dtype != other.dtype or tuple(self.shape) != tuple(other.shape):
            return False
        a, b = self.data, other.data
        if a is None or b is None:
            return a is None and b is None
        return a.tobytes() == b.tobytes()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


@dataclass(eq=False)
class Operand:
    """A value flowing between operators (an edge of the graph)."""

    name: str
    shape: Shape | None = None
    dtype: str | None = None
    producer: Operator | None = None
    consumers: list[Operator] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Operand({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape when every dim is a known int, else None."""
        return None if self.shape is None else known_dims(self.shape)


@dataclass(eq=False)
class Operator:
    """One operator line of .param: `type name n_in n_out inputs… outputs… key=value…`."""

    type: str
    name: str
    inputs: list[Operand] = field(default_factory=list)
    outputs: list[Operand] = field(default_factory=list)
    params: dict[str, ParamValue] = field(default_factory=dict)
    attrs: dict[str, Attribute] = field(default_factory=dict)
    # `$argname=operand`: the argument name of each input ('' where none is given).
    input_names: list[str] = field(default_factory=list)
    line: int | None = None  # .param line it came from, for error messages

    def __repr__(self) -> str:
        return f"Operator({self.type!r}, {self.name!r})"

    def named_input(self, key: str) -> Operand | None:
        for name, operand in zip(self.input_names, self.inputs):
            if name == key:
                return operand
        return None

    def input_name(self, index: int) -> str:
        return self.input_names[index] if index < len(self.input_names) else ""


def same_params(a: dict[str, ParamValue], b: dict[str, ParamValue]) -> bool:
    """Parameters equal with their Python types (True is not 1, 1 is not 1.0; NaN equals
    NaN); nested lists are compared without recursion."""
    if a.keys() != b.keys():
        return False
    pending = [(a[k], b[k]) for k in a]
    while pending:
        x, y = pending.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):  # y: x's type
            if len(x) != len(y):
                return False
            pending.extend(zip(x, y))
        elif x != y and not (isinstance(x, float) and x != x and y != y):
            return False
    return True


@dataclass(eq=False)
class Graph:
    """Operators in file order (a valid execution order) and their operands."""

    operators: list[Operator] = field(default_factory=list)
    operands: dict[str, Operand] = field(default_factory=dict)
    source: str | None = None  # path of the .param it was read from
    # What the reader tolerated in the file, one sentence each (`kuiper inspect` shows them).
    notes: list[str] = field(default_factory=list)

    # -- building -------------------------------------------------------------
    def add_operand(self, name: str) -> Operand:
        operand = Operand(name)
        self.operands[name] = operand
        return operand

    def add_operator(
        self,
        op_type: str,
        name: str,
        inputs: list[Operand] | None = None,
        outputs: list[Operand] | None = None,
        **params: ParamValue,
    ) -> Operator:
        """Append an operator and link producer/consumer edges of its operands."""
        op = Operator(op_type, name, list(inputs or []), list(outputs or []), dict(params))
        op.input_names = [""] * len(op.inputs)
        for operand in op.inputs:
            operand.consumers.append(op)
        for operand in op.outputs:
            operand.producer = op
        self.operators.append(op)
        return op

    # -- queries --------------------------------------------------------------
    def operator(self, name: str) -> Operator:
        for op in self.operators:
            if op.name == name:
                return op
        raise KeyError(name)

    def operator_keys(self) -> list[str]:
        """One unique key per operator, in file order: its name, and for a repeated name
        (pnnx repeats names at optlevel 0) `name#2`, `name#3`… for the later ones."""
        keys: list[str] = []
        taken = {op.name for op in self.operators}
        seen: dict[str, int] = {}
        for op in self.operators:
            n = seen[op.name] = seen.get(op.name, 0) + 1
            key = op.name
            while n > 1 and key in taken:
                key = f"{op.name}#{n}"
                n += 1
            taken.add(key)
            keys.append(key)
        return keys

    def by_type(self, op_type: str) -> Iterator[Operator]:
        return (op for op in self.operators if op.type == op_type)

    @property
    def inputs(self) -> list[Operator]:
        return [op for op in self.operators if op.type == "pnnx.Input"]

    @property
    def outputs(self) -> list[Operator]:
        return [op for op in self.operators if op.type == "pnnx.Output"]

    def successors(self, op: Operator) -> list[Operator]:
        """Operators that consume op's outputs, each once, in file order of first use."""
        seen: dict[int, Operator] = {}
        for out in op.outputs:
            for consumer in out.consumers:
                seen.setdefault(id(consumer), consumer)
        return list(seen.values())

    def predecessors(self, op: Operator) -> list[Operator]:
        seen: dict[int, Operator] = {}
        for operand in op.inputs:
            if operand.producer is not None:
                seen.setdefault(id(operand.producer), operand.producer)
        return list(seen.values())

    def parameter_count(self) -> int:
        return sum(math.prod(a.shape) for op in self.operators for a in op.attrs.values())

    def weight_bytes(self) -> int:
        return sum(a.nbytes for op in self.operators for a in op.attrs.values())

    def release_weights(self) -> None:
        """Hold the weights read from a file only while something else does (Attribute)."""
        for op in self.operators:
            for attr in op.attrs.values():
                attr.release()

    def equals(self, other: Graph) -> bool:
        """Structural equality: same operators, operands, params (with their Python types),
        attrs (incl. data)."""
        if len(self.operators) != len(other.operators) or set(self.operands) != set(other.operands):
            return False
        for a, b in zip(self.operators, other.operators):
            if (a.type, a.name, a.attrs) != (b.type, b.name, b.attrs) or not same_params(a.params, b.params):
                return False
            if [o.name for o in a.inputs] != [o.name for o in b.inputs]:
                return False
            if [o.name for o in a.outputs] != [o.name for o in b.outputs]:
                return False
            if a.input_names != b.input_names:
                return False
        for name, operand in self.operands.items():
            theirs = other.operands[name]
            if (operand.shape, operand.dtype) != (theirs.shape, theirs.dtype):
                return False
        return True
