"""pnnx.Expression: the arithmetic pnnx fuses into one operator, `expr=add(mul(@0,2),@1)`.

The expression is parsed and compiled into a NumPy plan once, at build (see
kuiper_core.expression.evaluate); forward only runs the plan's kernels and writes the last
one into the preallocated output buffer.

Errors: a malformed `expr` is a ModelError naming the operator whose message holds the
ParseError's rendering; the ParseError (with its column inside the expr text, not the
.param line) is kept as `__cause__`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..errors import ModelError, ParseError
from ..expression import Node, Plan, VType, compile_plan, depth, parse, walk
from ..expression.parser import Call, OperandRef
from ..graph import Operator, numpy_dtype
from . import clamp
from .halves import SplitRequest, split_flat, split_leading
from .registry import Layer, Prepared, read_as_tensor, register


@register("pnnx.Expression")
class Expression(Layer):
    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        expr = self.param("expr")
        # A constant expression (`expr=False`, `expr=0.2`, `expr=None`, `expr=[1,1]`, e.g.
        # F.dropout's p/training or a permute's dims at optlevel 1) reads as a typed .param
        # value: turn it back into expression text.
        if expr is None or isinstance(expr, (bool, int, float)):
            expr = str(expr)
        elif isinstance(expr, list) and all(v is None or isinstance(v, (bool, int, float, str)) for v in expr):
            # `[7,7]`, or `[None,@0]` (Tensor.index's list at optlevel 1): the .param reader
            # made a list of it; the text is the same items joined again.
            expr = "[" + ",".join(map(str, expr)) + "]"
        if not isinstance(expr, str):
            raise self.error(f"parameter 'expr' must be expression text, got {expr!r}")
        self.expr = expr
        # A string constant (an einsum equation, a mode) folded by pnnx at optlevel 1 reads
        # `expr=bij,jk->bik`: no inputs, a value output, and text that is no expression.
        self.text: str | None = None
        try:
            self.ast: Node = parse(expr)
        except ParseError as e:
            if not op.inputs and len(op.outputs) == 1 and op.outputs[0].shape is None:
                self.text = expr
                return
            where = f" (.param line {op.line})" if op.line else ""
            raise self.error(f"bad expr{where}: {e}") from e
        used = max((n.index for n in walk(self.ast) if isinstance(n, OperandRef)), default=-1)
        if used >= len(op.inputs):
            raise self.error(f"expr uses @{used} but the operator has {len(op.inputs)} input(s)")
        if len(op.outputs) != 1:
            raise self.error(f"expected 1 output, got {len(op.outputs)}")
        self._plans: dict[tuple[Any, ...], Plan] = {}
        self.out_dtype = numpy_dtype(op.outputs[0].dtype) if op.outputs[0].dtype else None
        # No `#` annotation: the result is a value (a size, a list of sizes, a constant),
        # kept as the Python object the expression gives, like TorchScript's ints; unless an
        # operator reads it as its tensor operand (`torch.unsqueeze $input=size(@0,0)`, from
        # ONNX's Shape -> Gather -> Unsqueeze): then it is the 0-d tensor ONNX had there.
        self.value_output = op.outputs[0].shape is None and not read_as_tensor(op.outputs[0])
        # An operand a call computes with (`add(@0,@1)`), not one a list holds: when its value
        # is a list, it is the tensor ONNX had there. pnnx writes a small ONNX constant
        # (swift-f0's `[-1,0,1]` added to an ArgMax) as an input-less Expression, unannotated.
        self.computed_with = sorted(
            {a.index for n in walk(self.ast) if isinstance(n, Call) for a in n.args if isinstance(a, OperandRef)}
        )
        declared = [numpy_dtype(o.dtype) if o.dtype else None for o in op.inputs]
        if all(d is not None for d in declared):  # compile now: type errors surface at build
            self._plan([VType("tensor", d) for d in declared])

    def _plan(self, types: list[VType]) -> Plan:
        key = tuple(types)
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = compile_plan(self.ast, types, source=self.expr)
            except ModelError:
                raise
            except Exception as e:  # InputError/ParseError from typing the expression
                raise self.error(f"cannot evaluate expr={self.expr}: {e}") from e
            self._plans[key] = plan
        return plan

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        if self.text is not None:
            return [self.text]  # type: ignore[list-item]  # a text value (a dtype, an equation), as the runtime's values may be
        if any(isinstance(inputs[i], list) for i in self.computed_with):
            inputs = [_as_tensor(x) if i in self.computed_with else x for i, x in enumerate(inputs)]
        types = [VType("tensor", x.dtype) if isinstance(x, np.ndarray) else _scalar_type(x) for x in inputs]
        plan = self._plan(types)
        dst = out[0] if out else None
        result = plan.run(inputs, out=dst)
        if isinstance(result, np.ndarray):
            if any(result is x for x in inputs):  # `expr=@0`: never hand out an input
                result = result.copy() if dst is None or dst.shape != result.shape else _copy_into(dst, result)
            return [result]
        if self.value_output:
            return [result]
        # Scalars (size arithmetic) and lists (shapes) for a declared tensor: small arrays.
        dtype = self.out_dtype
        if dtype is None:
            dtype = np.dtype(np.float32) if isinstance(result, float) else None
        try:
            arr = np.asarray(result, dtype=dtype)
        except (ValueError, OverflowError, TypeError) as e:  # int(nan), 1e308 as int64, ragged lists
            raise self.error(f"expr={self.expr} gives {result!r}, which is not a {dtype or 'tensor'}: {e}") from None
        declared = self.op.outputs[0].shape
        if arr.ndim == 0 and declared and all(d == 1 for d in declared):
            # optlevel 1 writes torch.tensor([0.5]) as `expr=0.5 #21=(1)f32` (every dim is 1)
            arr = arr.reshape((1,) * len(declared))
        return [arr]

    def prepare(self, inputs: list[Any], out: list[np.ndarray], split: SplitRequest | None = None) -> Prepared | None:
        f = self._prepare_whole(inputs, out)
        if f is None or split is None:
            return f
        return (
            split_flat(split, self._prepare_whole, inputs, out, cheap=True)
            or split_leading(split, self._prepare_whole, inputs, out, cheap=True)
            or f
        )

    def prepare_with_relu(
        self, inputs: list[Any], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        """The prepared function, then a ReLU on its float output (a residual add and the ReLU
        after it in one call: one pass less over the output)."""
        with_relu = partial(_with_relu, self._prepare_whole)
        f = with_relu(inputs, out) if out[0].dtype.kind == "f" else None
        if f is None or split is None:
            return f
        return (
            split_flat(split, with_relu, inputs, out, cheap=True)
            or split_leading(split, with_relu, inputs, out, cheap=True)
            or f
        )

    def _prepare_whole(self, inputs: list[Any], out: list[np.ndarray]) -> Prepared | None:
        if not all(isinstance(x, np.ndarray) for x in inputs):
            return None
        plan = self._plan([VType("tensor", x.dtype) for x in inputs])
        if plan.result == 0 or not plan.steps:  # `expr=@0` and constants: no step to repeat
            return None
        return plan.bind(inputs, out[0])

    def overwritable_inputs(self) -> tuple[int, ...]:
        plan = next(iter(self._plans.values()), None)  # compiled at build for the declared dtypes
        if plan is None or not plan.steps or not all(step.elementwise for step in plan.steps):
            return ()
        return tuple(range(len(self.op.inputs)))  # every step reads x[i] to write y[i]

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        if self.text is not None:
            return 0
        n = int(np.prod(outputs[0])) if outputs and outputs[0] else 1
        return n * sum(1 for node in walk(self.ast) if isinstance(node, Call))

    @property
    def depth(self) -> int:
        return 0 if self.text is not None else depth(self.ast)


def _with_relu(prepare: Any, inputs: list[Any], out: list[np.ndarray]) -> Prepared | None:
    f = prepare(inputs, out)
    return None if f is None else partial(_run_with_relu, f)


def _run_with_relu(f: Prepared, inputs: list[Any], out: list[np.ndarray]) -> None:
    f(inputs, out)
    clamp.maximum(out[0], out[0].dtype.type(0), out[0])


def _copy_into(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    np.copyto(dst, src, casting="unsafe")
    return dst


def _as_tensor(x: Any) -> Any:
    """A list of numbers as torch.tensor makes it (int64, float32 or bool); anything else as is."""
    if not isinstance(x, list):
        return x
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        return arr.astype(np.float32)
    return arr.astype(np.int64) if arr.dtype.kind in "iu" else arr


def _scalar_type(x: Any) -> VType:
    from ..expression import type_of

    return type_of(x)
