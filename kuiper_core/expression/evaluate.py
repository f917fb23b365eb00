"""Evaluating expressions: a compiled NumPy plan (fast path) and a traced stack machine.

Semantics are PyTorch's, as in the Python code pnnx generates for an expression:
- Tensors broadcast. Python scalars (constants, `size()` results) are "weak": a float32
  tensor with 0.5 stays float32, an int64 tensor times 0.5 becomes float32 (torch's default
  float), bool with 1 becomes int64. Tensors of different kinds take the higher kind's dtype
  (int32 + float16 -> float16), tensors of one kind promote (float32 + float64 -> float64).
- `div`, `atan2`, `logaddexp` and math functions (sqrt, exp, ...) give float32 on integers.
- `remainder` takes the divisor's sign, `fmod` the dividend's, `floor_divide` floors,
  `round` halves to even, `sign(nan)` is 0, `max`/`min` are elementwise and nan-propagating.
- Scalar-only arithmetic (`div(size(@0,0),2)`) is Python arithmetic and gives Python values.

`compile_plan` turns an AST plus the input types into a flat list of steps, each
(kernel, argument slots, result slot): forward runs NumPy kernels only, never per-element
Python. A step whose argument is a temporary of the same dtype and shape as its result
writes into it (`out=`), and the final step writes into the caller's `out` buffer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np

from .. import limits as _limits
from ..errors import InputError, KuiperError, ParseError
from ..graph import format_shape
from .functions import BITWISE, CAST, FLOAT, FUNCTIONS, INT, KEEP, SIZE, TRUE_DIV
from .lexer import error_at
from .parser import Call, Constant, ListExpr, Node, OperandRef, parse, to_text
from .rpn import to_rpn

Value = Any  # np.ndarray | int | float | bool | None | list | tuple
FLOAT32 = np.dtype(np.float32)
INT64 = np.dtype(np.int64)


# -- types known at compile time -----------------------------------------------------


@dataclass(frozen=True)
class VType:
    """What a value is, as far as the compiler knows: a tensor of a dtype, or a scalar."""

    kind: str  # 'tensor' | 'scalar' | 'none' | 'list' | 'shape'
    dtype: np.dtype | None = None  # tensor dtype
    pytype: type | None = None  # scalar: bool, int or float

    def __str__(self) -> str:
        if self.kind == "tensor":
            return f"{self.dtype} tensor"
        if self.kind == "scalar" and self.pytype is not None:
            return f"Python {self.pytype.__name__}"
        return self.kind


def type_of(value: Value) -> VType:
    """The VType of a runtime value (an input or a constant)."""
    if isinstance(value, np.ndarray):
        return VType("tensor", value.dtype)
    if isinstance(value, np.generic):
        return VType("tensor", value.dtype)
    if value is None:
        return VType("none")
    if isinstance(value, bool):
        return VType("scalar", pytype=bool)
    if isinstance(value, int):
        return VType("scalar", pytype=int)
    if isinstance(value, float):
        return VType("scalar", pytype=float)
    if isinstance(value, tuple):
        return VType("shape")
    if isinstance(value, list):
        return VType("list")
    raise InputError(f"an expression input must be an array or a number, got {type(value).__name__}")


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_PY_CATEGORY = {bool: 0, int: 1, float: 2}
_PY_OF_CATEGORY = {0: bool, 1: int, 2: float}


def _category(dtype: np.dtype) -> int:
    return _CATEGORY[dtype.kind]


def promote(types: Sequence[VType]) -> np.dtype:
    """torch.result_type for tensors and weak Python scalars (at least one tensor)."""
    tensors = [t.dtype for t in types if t.kind == "tensor" and t.dtype is not None]
    result = tensors[0]
    for d in tensors[1:]:
        if _category(d) > _category(result):
            result = d
        elif _category(d) == _category(result):
            result = np.promote_types(result, d)
    scalars = [_PY_CATEGORY[t.pytype] for t in types if t.kind == "scalar" and t.pytype is not None]
    if scalars and max(scalars) > _category(result):
        result = FLOAT32 if max(scalars) == 2 else INT64
    return np.dtype(result)


# -- the plan ----------------------------------------------------------------------------

StepFn = Callable[[list, np.ndarray | None], Value]


@dataclass(eq=False)
class Step:
    node: Node  # the call (or list) this step evaluates
    fn: StepFn  # fn(args, dst): the value; writes into dst when dst is given
    args: tuple[int, ...]  # slots of the arguments
    out: int  # slot of the result
    vtype: VType  # the result's type
    elementwise: bool = False  # broadcasting tensor op: may write into a buffer
    inplace: int | None = None  # position in args of a temporary it may overwrite
    buffer: int | None = None  # workspace buffer kept between runs (see Plan.run)


@dataclass(eq=False)
class Plan:
    """A compiled expression: run(inputs) executes the steps over a list of slots.

    Where a step's result must be a new array (it cannot overwrite an argument), it goes
    into a workspace buffer kept between runs, so a steady-state forward allocates nothing
    (fresh large arrays cost page faults that dwarf the arithmetic). The workspace is
    per thread; the final result is written into `out` or a fresh array, never into it.
    """

    ast: Node
    input_types: tuple[VType, ...]
    slots: list[Value]  # initial slot values: inputs (None here), then constants, then temps
    steps: list[Step]
    result: int
    result_type: VType
    by_node: dict[int, Step] = field(default_factory=dict)
    n_buffers: int = 0
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def run(self, inputs: Sequence[Value], out: np.ndarray | None = None) -> Value:
        n = len(self.input_types)
        if len(inputs) < n:
            raise InputError(f"the expression was compiled for {n} input(s), got {len(inputs)}")
        vals = self.slots.copy()
        vals[:n] = inputs[:n]
        workspace = getattr(self._local, "buffers", None)
        if workspace is None:
            workspace = self._local.buffers = [None] * self.n_buffers
        last = len(self.steps) - 1
        with np.errstate(all="ignore"):  # torch is silent on 0/0, log(-1), overflow
            for k, step in enumerate(self.steps):
                args = [vals[i] for i in step.args]
                dst = None
                if step.elementwise:
                    shape = _result_shape(args, step.node)
                    dtype = step.vtype.dtype
                    cand = out if k == last else (args[step.inplace] if step.inplace is not None else None)
                    if cand is not None and cand.shape == shape and cand.dtype == dtype:
                        dst = cand
                    elif step.buffer is not None:
                        dst = workspace[step.buffer]
                        if dst is None or dst.shape != shape or dst.dtype != dtype:
                            dst = workspace[step.buffer] = np.empty(shape, dtype)
                vals[step.out] = _apply(step, args, dst)
        return vals[self.result]

    def bind(self, inputs: Sequence[Value], out: np.ndarray) -> Callable[[list, list], None] | None:
        """f(inputs, out) running this plan for arrays shaped like these, writing the result
        into out[0], with every intermediate buffer made now (nothing runs yet). None when
        the plan has a non-elementwise step or its result is not `out`'s shape and dtype."""
        n = len(self.input_types)
        if not self.steps or not all(step.elementwise for step in self.steps) or len(inputs) < n:
            return None
        vals = self.slots.copy()
        vals[:n] = inputs[:n]
        last = len(self.steps) - 1
        dsts: list[np.ndarray | None] = []
        for k, step in enumerate(self.steps):
            args = [vals[i] for i in step.args]
            shape, dtype = _result_shape(args, step.node), step.vtype.dtype
            if k == last:
                if (shape, dtype) != (out.shape, out.dtype):
                    return None
                dst = None  # the caller's out[0]
            elif step.inplace is not None and step.args[step.inplace] >= n and args[step.inplace].shape == shape:
                dst = args[step.inplace]  # a temporary of this binding
            else:
                dst = np.empty(shape, dtype)
            vals[step.out] = out if dst is None else dst
            dsts.append(dst)
        kernel = getattr(self.steps[0].fn, "kernel", None)
        if len(self.steps) == 1 and kernel is not None and all(i < n for i in self.steps[0].args):
            # One plain kernel on the inputs (a residual add, a scale): call it directly,
            # 0.7 us less per call than the general loop below (1.4 -> 0.8 us for a (1, 65, 64) add).
            picks = tuple(self.steps[0].args)
            return partial(_run_kernel2, kernel, *picks) if len(picks) == 2 else partial(_run_kernel, kernel, picks)
        program = [(step.fn, step.args, step.out, dst) for step, dst in zip(self.steps, dsts)]
        return partial(_run_bound, self.slots, n, program)


def _run_kernel(kernel: Callable, picks: tuple[int, ...], inputs: list, out: list) -> None:
    kernel(*[inputs[i] for i in picks], out=out[0])


def _run_kernel2(kernel: Callable, i: int, j: int, inputs: list, out: list) -> None:
    kernel(inputs[i], inputs[j], out=out[0])


def _run_bound(slots: list, n: int, program: list, inputs: list, out: list) -> None:
    vals = slots.copy()
    vals[:n] = inputs[:n]
    for fn, arg_slots, out_slot, dst in program:
        if dst is None:
            dst = out[0]
        r = fn([vals[i] for i in arg_slots], dst)
        if r is not dst:  # a kernel without `out`: keep the chain on the bound buffers
            np.copyto(dst, r)
        vals[out_slot] = dst


def _apply(step: Step, args: list, dst: np.ndarray | None) -> Value:
    """One step; a value its kernel cannot take (int(nan), a huge shift) is an InputError
    naming the sub-expression, not a bare NumPy error."""
    try:
        return step.fn(args, dst)
    except KuiperError:
        raise
    except (ValueError, OverflowError, TypeError, ZeroDivisionError) as e:
        raise InputError(f"cannot evaluate '{_short(to_text(step.node, most=60))}': {e}") from None


def _result_shape(args: list, node: Node) -> tuple[int, ...]:
    shapes = [a.shape for a in args if isinstance(a, np.ndarray)]
    first = shapes[0]
    if len(shapes) == 1 or all(s == first for s in shapes):
        return first
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise InputError(
            f"'{_short(to_text(node, most=60))}': operands of shapes {', '.join(map(format_shape, shapes))} do not broadcast"
        ) from None
    _limits.check_elements(shape, f"the result of '{_short(to_text(node, most=60))}'")
    return shape


def _elementwise(kernel: Callable, converters: list[Callable | None]) -> StepFn:
    if not any(converters):
        if len(converters) == 1:

            def run1(args: list, dst: np.ndarray | None) -> Value:
                r = kernel(args[0]) if dst is None else kernel(args[0], out=dst)
                return r if isinstance(r, np.ndarray) else np.asarray(r)

            run1.kernel = kernel  # type: ignore[attr-defined]  # Plan.bind calls it directly
            return run1

        def run2(args: list, dst: np.ndarray | None) -> Value:
            r = kernel(*args) if dst is None else kernel(*args, out=dst)
            return r if isinstance(r, np.ndarray) else np.asarray(r)

        run2.kernel = kernel  # type: ignore[attr-defined]  # Plan.bind calls it directly
        return run2

    def run(args: list, dst: np.ndarray | None) -> Value:
        xs = [c(a) if c is not None else a for c, a in zip(converters, args)]
        r = kernel(*xs) if dst is None else kernel(*xs, out=dst)
        return r if isinstance(r, np.ndarray) else np.asarray(r)

    return run


def _first_arg(kernel: Callable) -> Callable:
    """A binary kernel that ignores its (constant) second argument."""

    def f(x: Any, _: Any, out: Any = None) -> Any:
        return kernel(x, out=out)

    return f


def _scalar_call(kernel: Callable, as_float: bool = False) -> StepFn:
    """Python-scalar arithmetic through the same kernel (e.g. div(size(@0,0),2) -> 1.5);
    `as_float`: computed in float64, as Python does for a float result
    (reciprocal(size(@0,2)) of 8 is 0.125, not the integer reciprocal 0)."""

    def run(args: list, dst: np.ndarray | None) -> Value:
        r = kernel(*[np.asarray(a, dtype=np.float64) if as_float else np.asarray(a) for a in args])
        return r.item() if hasattr(r, "item") else r

    return run


def _to_dtype(dtype: np.dtype) -> Callable[[Value], Value]:
    def convert(a: Value) -> Value:
        if isinstance(a, np.ndarray):
            return a.astype(dtype)
        return dtype.type(a)

    return convert


class _Compiler:
    def __init__(self, ast: Node, input_types: Sequence[VType], source: str | None, fold: bool, inplace: bool):
        self.ast = ast
        self.input_types = tuple(input_types)
        self.source = source
        self.fold = fold
        self.inplace = inplace
        self.slots: list[Value] = [None] * len(self.input_types)
        self.steps: list[Step] = []

    # -- errors
    def where(self, node: Node) -> str:
        if self.source is None:
            return f"in '{_short(to_text(node, most=60))}'"
        return f"in '{_short(self.source[node.span[0] : node.span[1]])}' at column {node.span[0] + 1}"

    def type_error(self, node: Node, message: str) -> InputError:
        return InputError(f"{message} ({self.where(node)})")

    # -- slots
    def new_slot(self, value: Value = None) -> int:
        self.slots.append(value)
        return len(self.slots) - 1

    def compile(self) -> Plan:
        # Entries: (slot, type, is_temporary, constant value or _NOT_CONST)
        stack: list[tuple[int, VType, bool, Any]] = []
        for node in to_rpn(self.ast):
            if isinstance(node, OperandRef):
                stack.append(self.operand(node))
            elif isinstance(node, Constant):
                stack.append((self.new_slot(node.value), type_of(node.value), False, node.value))
            else:
                k = len(node.args) if isinstance(node, Call) else len(node.items)
                args = stack[len(stack) - k :]
                del stack[len(stack) - k :]
                stack.append(self.call(node, args))
        (slot, vtype, _, _) = stack[0]
        return Plan(
            self.ast,
            self.input_types,
            self.slots,
            self.steps,
            slot,
            vtype,
            {id(s.node): s for s in self.steps},
            self.assign_buffers(),
        )

    def assign_buffers(self) -> int:
        """Give a workspace buffer to every elementwise step whose result only feeds another
        elementwise step (so no list or caller can keep it); the last step gets none."""
        if not self.inplace:
            return 0
        consumer: dict[int, Step] = {}
        for step in self.steps:
            for slot in step.args:
                consumer[slot] = step
        n = 0
        for step in self.steps[:-1]:
            user = consumer.get(step.out)
            if step.elementwise and user is not None and user.elementwise:
                step.buffer = n
                n += 1
            else:
                # Its result escapes (into a list, or to the caller): it must be a fresh
                # array, not an argument that may live in the workspace.
                step.inplace = None
        return n

    def operand(self, node: OperandRef) -> tuple[int, VType, bool, Any]:
        n = len(self.input_types)
        if node.index >= n:
            msg = f"@{node.index} refers to input {node.index}, but only {n} input(s) are given (@0..@{n - 1})"
            if n == 0:
                msg = f"@{node.index} refers to input {node.index}, but no inputs are given"
            if self.source is not None:
                raise error_at(self.source, node.span[0], node.span[1], msg)
            raise ParseError(msg)
        return (node.index, self.input_types[node.index], False, _NOT_CONST)

    def add_step(self, node: Node, fn: StepFn, args: list, vtype: VType, *, elementwise: bool = False) -> tuple:
        inplace = None
        if elementwise and self.inplace:
            for j, (_, t, temp, _) in enumerate(args):
                if temp and t.kind == "tensor" and t.dtype == vtype.dtype:
                    inplace = j
                    break
        consts = [c for (_, _, _, c) in args]
        if self.fold and vtype.kind != "tensor" and args and all(c is not _NOT_CONST for c in consts):
            try:
                with np.errstate(all="ignore"):
                    value = fn(consts, None)  # all-constant scalar arithmetic: fold at build time
            except (ValueError, OverflowError, TypeError, ZeroDivisionError) as e:  # 5 // 0, int(nan)
                raise self.type_error(node, f"cannot evaluate: {e}") from None
            return (self.new_slot(value), type_of(value), False, value)
        out = self.new_slot()
        self.steps.append(Step(node, fn, tuple(s for (s, _, _, _) in args), out, vtype, elementwise, inplace))
        return (out, vtype, vtype.kind == "tensor", _NOT_CONST)

    def call(self, node: Node, args: list) -> tuple:
        types = [t for (_, t, _, _) in args]
        if isinstance(node, ListExpr):
            return self.add_step(node, lambda a, dst: list(a), args, VType("list"))
        assert isinstance(node, Call)
        fn = FUNCTIONS[node.name]
        if fn.rule == SIZE:
            return self.size(node, args, types)
        if fn.rule == INT:
            return self.add_step(node, _make_int(self, node), args, VType("scalar", pytype=int))
        for t, arg in zip(types, node.args):
            if t.kind not in ("tensor", "scalar"):
                raise self.type_error(arg, f"'{node.name}' needs numbers or tensors, got {t}")
        if fn.rule == CAST:
            target = fn.target
            assert target is not None
            if types[0].kind == "scalar":
                pytype = _PY_OF_CATEGORY[min(_category(target), 2)]
                return self.add_step(node, lambda a, dst: pytype(a[0]), args, VType("scalar", pytype=pytype))

            def cast(a: list, dst: np.ndarray | None) -> np.ndarray:
                if dst is None:
                    return np.asarray(a[0]).astype(target)
                np.copyto(dst, a[0], casting="unsafe")
                return dst

            return self.add_step(node, cast, args, VType("tensor", target), elementwise=True)

        assert fn.kernel is not None
        if all(t.kind == "scalar" for t in types):
            cat = max(_PY_CATEGORY[t.pytype] for t in types)
            if fn.rule in (FLOAT, TRUE_DIV):
                cat = 2
            if fn.rule == BITWISE and cat == 2:
                raise self.type_error(node, f"bitwise '{node.name}' needs integers or bools, got a float")
            return self.add_step(
                node, _scalar_call(fn.kernel, cat == 2), args, VType("scalar", pytype=_PY_OF_CATEGORY[cat])
            )

        dtype = promote(types)
        if fn.rule in (FLOAT, TRUE_DIV) and dtype.kind in "biu":
            dtype = FLOAT32
        if fn.rule == BITWISE and dtype.kind not in "biu":
            raise self.type_error(node, f"bitwise '{node.name}' needs integer or bool tensors, got {dtype}")
        if fn.rule == KEEP and node.name == "neg" and dtype.kind == "b":
            raise self.type_error(node, "'neg' of a bool tensor is not defined (torch refuses it too)")
        converters: list[Callable | None] = []
        for t in types:
            if t.kind == "scalar" or t.dtype != dtype:
                converters.append(_to_dtype(dtype))
            else:
                converters.append(None)
        if node.name == "abs" and dtype.kind == "c":  # |z| of a complex tensor is real (torch.stft's magnitude)
            real = np.dtype(np.float64 if dtype == np.complex128 else np.float32)
            return self.add_step(
                node, _elementwise(fn.kernel, converters), args, VType("tensor", real), elementwise=True
            )
        if node.name == "pow" and dtype.kind == "f" and isinstance(node.args[1], Constant):
            # torch computes x**2 as x*x and x**0.5 as sqrt(x) (pow_tensor_scalar kernels)
            exponent = node.args[1].value
            special = {2: np.square, 0.5: np.sqrt}.get(exponent) if isinstance(exponent, (int, float)) else None
            if special is not None and types[0].kind == "tensor":
                return self.add_step(
                    node, _elementwise(_first_arg(special), converters), args, VType("tensor", dtype), elementwise=True
                )
        return self.add_step(node, _elementwise(fn.kernel, converters), args, VType("tensor", dtype), elementwise=True)

    def size(self, node: Call, args: list, types: list[VType]) -> tuple:
        if types[0].kind != "tensor":
            raise self.type_error(node.args[0], f"'size' needs a tensor, got {types[0]}")
        if len(args) == 1:
            return self.add_step(node, lambda a, dst: tuple(a[0].shape), args, VType("shape"))
        if types[1].kind != "scalar" or types[1].pytype is not int:
            raise self.type_error(node.args[1], f"'size' needs an int dim, got {types[1]}")
        where = self.where(node)

        def size(a: list, dst: np.ndarray | None) -> int:
            x, dim = a
            if not -x.ndim <= dim < max(x.ndim, 1):
                raise InputError(
                    f"size(): dim {dim} is out of range for a {x.ndim}-d tensor of shape {x.shape} ({where})"
                )
            return int(x.shape[dim]) if x.ndim else 1

        return self.add_step(node, size, args, VType("scalar", pytype=int))


_NOT_CONST = object()


def _make_int(compiler: _Compiler, node: Call) -> StepFn:
    where = compiler.where(node)

    def to_int(a: list, dst: np.ndarray | None) -> int:
        x = a[0]
        if isinstance(x, np.ndarray):
            if x.size != 1:
                raise InputError(f"int() needs one value, got a tensor of shape {x.shape} ({where})")
            x = x.reshape(()).item()
        if x is None:
            raise InputError(f"int() of None ({where})")
        return int(x)

    return to_int


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def compile_plan(
    ast: Node,
    input_types: Sequence[VType | np.dtype | str],
    *,
    source: str | None = None,
    fold: bool = True,
    inplace: bool = True,
) -> Plan:
    """Compile `ast` for inputs of these types (VTypes, NumPy dtypes, or 'scalar' for int).

    `source` (the text the AST came from) lets errors show a caret. `fold` evaluates
    constant-only scalar arithmetic now; `inplace` lets steps reuse temporaries.
    """
    types = [t if isinstance(t, VType) else VType("tensor", np.dtype(t)) for t in input_types]
    return _Compiler(ast, types, source, fold, inplace).compile()


def _prepare(text_or_ast: str | Node, inputs: Sequence[Value]) -> tuple[Node, str | None, list[Value]]:
    if isinstance(text_or_ast, str):
        ast, source = parse(text_or_ast), text_or_ast
    else:
        ast, source = text_or_ast, None
    values = [np.asarray(x) if isinstance(x, np.generic) else x for x in inputs]
    return ast, source, values


def evaluate(text_or_ast: str | Node, inputs: Sequence[Value], *, out: np.ndarray | None = None) -> Value:
    """The value of an expression for these inputs (@0 = inputs[0], ...).

    Tensors give an np.ndarray; scalar-only expressions (`size(@0,1)`) give Python values;
    list expressions give a list.
    """
    ast, source, values = _prepare(text_or_ast, inputs)
    plan = compile_plan(ast, [type_of(v) for v in values], source=source)
    return plan.run(values, out=out)


# -- the traced stack machine (for teaching) ------------------------------------------------


@dataclass(frozen=True)
class StackEntry:
    """One value on the stack: the node that produced it and the value."""

    node: Node
    value: Value

    @property
    def label(self) -> str:
        return _short(to_text(self.node, most=40), 40)

    def describe(self) -> str:
        return f"{self.label} = {describe_value(self.value)}"


class _Cons:
    """An immutable stack cell: snapshots share their lower part, so tracing stays O(n)."""

    __slots__ = ("entry", "below", "size")

    def __init__(self, entry: StackEntry, below: _Cons | None) -> None:
        self.entry = entry
        self.below = below
        self.size: int = 1 + (below.size if below is not None else 0)


@dataclass(frozen=True)
class TraceStep:
    """One step of seed 001's stack machine.

    kind 'push': an operand or constant is pushed. kind 'apply': `node`'s arguments are
    popped (`args`), its function applied, `result` pushed. `stack` is the stack after
    the step, bottom first.
    """

    index: int
    kind: str  # 'push' | 'apply'
    node: Node
    args: tuple[Value, ...]
    result: Value
    _top: _Cons | None = field(repr=False, default=None)

    @property
    def token(self) -> str:
        from .rpn import label

        return label(self.node)

    @property
    def stack(self) -> list[StackEntry]:
        out: list[StackEntry] = []
        cell = self._top
        while cell is not None:
            out.append(cell.entry)
            cell = cell.below
        return out[::-1]

    @property
    def depth(self) -> int:
        return self._top.size if self._top is not None else 0

    def describe(self) -> str:
        if self.kind == "push":
            return f"push {self.token} = {describe_value(self.result)}"
        return f"pop {len(self.args)}, apply {self.token}, push {describe_value(self.result)}"


@dataclass(frozen=True)
class Trace:
    steps: list[TraceStep]
    result: Value
    rpn: list[Node]


def describe_value(value: Value) -> str:
    if isinstance(value, np.ndarray):
        if value.size == 1:
            return f"{value.reshape(-1)[0]!r} ({value.dtype}{list(value.shape)})"
        return f"{value.dtype}{list(value.shape)}"
    return repr(value)


def evaluate_traced(text_or_ast: str | Node, inputs: Sequence[Value]) -> Trace:
    """Evaluate by reverse Polish order with a stack, recording every push and apply.

    No constant folding and no buffer reuse, so every recorded value stays as it was.
    """
    ast, source, values = _prepare(text_or_ast, inputs)
    plan = compile_plan(ast, [type_of(v) for v in values], source=source, fold=False, inplace=False)
    rpn = to_rpn(ast)
    steps: list[TraceStep] = []
    top: _Cons | None = None
    with np.errstate(all="ignore"):
        for i, node in enumerate(rpn):
            if isinstance(node, (OperandRef, Constant)):
                value = values[node.index] if isinstance(node, OperandRef) else node.value
                top = _Cons(StackEntry(node, value), top)
                steps.append(TraceStep(i, "push", node, (), value, top))
                continue
            step = plan.by_node[id(node)]
            popped: list[Value] = []
            for _ in range(len(step.args)):
                assert top is not None
                popped.append(top.entry.value)
                top = top.below
            args = popped[::-1]
            if step.elementwise:
                _result_shape(args, node)  # broadcast errors and sizes, before computing
            result = _apply(step, args, None)
            top = _Cons(StackEntry(node, result), top)
            steps.append(TraceStep(i, "apply", node, tuple(args), result, top))
    assert top is not None and top.below is None
    return Trace(steps, top.entry.value, rpn)
