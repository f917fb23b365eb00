"""Printer of a `Graph` as textual IR: one operation a line, in the graph's order.

    {
      (%1) = "nn.Conv2d" @conv1 ($input=%0) {kernel_size:(Array)[(Int32)3,(Int32)3], …,
             @weight:(pnnx.weight)<16x3x3x3xf32>} : (pnnx.tensor<1x3x8x8xf32>) -> pnnx.tensor<1x16x8x8xf32>
    }

(one line in the output). Every parameter is typed so that the parser never guesses, floats
are printed in Python's shortest round-trip form, weights appear by name, shape and dtype
(their numbers stay in the .bin). Printing what the parser read gives the same text.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ModelError
from ..graph import Graph, Operand, Operator
from .dialects import INT32, INT64, DialectRegistry, default_registry
from .types import TensorType

_BARE_NAME = re.compile(r"[A-Za-z0-9_.]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(text: str) -> str:
    """A string literal; non-printable characters (and line separators) as \\uXXXX escapes."""
    out = []
    for ch in text:
        if ch in _ESC:
            out.append(_ESC[ch])
        elif ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def sigil_name(sigil: str, name: str) -> str:
    """`%0`, `@conv1`, `$input`; names outside [A-Za-z0-9_.] are quoted: `%"a b"`."""
    return sigil + (name if _BARE_NAME.fullmatch(name) else quote(name))


def format_key(key: str) -> str:
    return key if _IDENT.fullmatch(key) else quote(key)


class Printer:
    def __init__(self, registry: DialectRegistry | None = None) -> None:
        self.registry = registry if registry is not None else default_registry()

    # -- values ----------------------------------------------------------------------------
    def scalar(self, value: Any) -> str:
        dialect = self.registry.dialect_for_value(value)
        if dialect is not None:
            return dialect.print_attribute(value)
        if value is None:
            return "(None)none"
        if isinstance(value, bool):
            return f"(Bool){'true' if value else 'false'}"
        if isinstance(value, int):
            if INT32[0] <= value <= INT32[1]:
                return f"(Int32){value}"
            if INT64[0] <= value <= INT64[1]:
                return f"(Int64){value}"
            raise ValueError(f"{value} does not fit in a 64-bit integer")
        if isinstance(value, float):
            return f"(Double){value!r}"
        if isinstance(value, str):
            return f"(String){quote(value)}"
        raise ValueError(f"no attribute kind prints a {type(value).__name__} ({value!r})")

    def attribute(self, value: Any) -> str:
        """A typed value; arrays (however deep) are printed without recursion."""
        if not isinstance(value, (list, tuple)):
            return self.scalar(value)
        parts = ["(Array)["]
        stack = [iter(value)]
        first = [True]
        while stack:
            item = next(stack[-1], _END)
            if item is _END:
                stack.pop()
                first.pop()
                parts.append("]")
                continue
            if not first[-1]:
                parts.append(",")
            first[-1] = False
            if isinstance(item, (list, tuple)):
                parts.append("(Array)[")
                stack.append(iter(item))
                first.append(True)
            else:
                parts.append(self.scalar(item))
        return "".join(parts)

    def type_of(self, operand: Operand) -> str:
        if (operand.shape is None) != (operand.dtype is None):
            raise ModelError(
                f"operand '{operand.name}' has a shape without a dtype or a dtype without a shape; "
                "the IR types a value with both or neither"
            )
        return self.registry.print_type(TensorType(operand.shape, operand.dtype))

    # -- operations ------------------------------------------------------------------------------
    def operation(self, op: Operator) -> str:
        try:
            return self._operation(op)
        except ValueError as e:
            raise ModelError(f"cannot print: {e}", operator=op.name, op_type=op.type) from None

    def _operation(self, op: Operator) -> str:
        results = ", ".join(sigil_name("%", o.name) for o in op.outputs)
        operands = ", ".join(
            (sigil_name("$", op.input_name(i)) + "=" if op.input_name(i) else "") + sigil_name("%", o.name)
            for i, o in enumerate(op.inputs)
        )
        entries = [f"{format_key(k)}:{self.attribute(v)}" for k, v in op.params.items()]
        entries += [f"{sigil_name('@', k)}:{self.attribute(a)}" for k, a in op.attrs.items()]
        attrs = " {" + ", ".join(entries) + "}" if entries else ""
        ins = ", ".join(self.type_of(o) for o in op.inputs)
        outs = [self.type_of(o) for o in op.outputs]
        out_text = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
        return f"({results}) = {quote(op.type)} {sigil_name('@', op.name)} ({operands}){attrs} : ({ins}) -> {out_text}"

    def module(self, graph: Graph) -> str:
        lines = ["{"]
        lines += ["  " + self.operation(op) for op in graph.operators]
        lines.append("}")
        return "\n".join(lines) + "\n"


_END = object()


def print_graph(graph: Graph, registry: DialectRegistry | None = None) -> str:
    """The graph as textual IR (a module block, one operation a line)."""
    return Printer(registry).module(graph)


def print_attribute(value: Any, registry: DialectRegistry | None = None) -> str:
    """One typed value, as it appears in an attribute dictionary."""
    return Printer(registry).attribute(value)
