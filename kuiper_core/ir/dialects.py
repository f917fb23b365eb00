"""Dialects: namespaces of ops, types and attribute kinds, each with its printer and parser hooks.

As in the seed (Paddle's IR parser), a name says which dialect owns it: a type is written
`dialect.name` (`pnnx.tensor<…>`), an attribute `(dialect.kind)value` (`(pnnx.weight)<…>`),
an op `"dialect.Op"` or `"dialect::Op"`. Unprefixed attribute kinds belong to the builtin
dialect (Bool, Int32, Int64, Double, String, None, Array), which the parser reads itself.

A new dialect subclasses `Dialect`, overrides the hooks it needs and is registered in a
`DialectRegistry`:

    class TestDialect(Dialect):
        name = "tp"
        attribute_classes = (Char,)                     # Python values it prints
        def print_attribute(self, value): return f"(tp.char){value}"
        def parse_attribute(self, parser, kind, kind_span): ...   # reads the value's tokens

The PNNX type prefixes (nn, F, torch, Tensor, pnnx, prim, aten) are dialects whose ops are
the operator types the engine has layers for.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Protocol
from collections.abc import Callable, Iterable

from ..errors import ParseError
from ..graph import Attribute, known_dims
from .lexer import Kind, Span, Token
from .types import ANY, TensorType, format_body, parse_body


class Parser(Protocol):
    """What a dialect asks of the parser that calls it (parser.Parser is one): tokens, located
    errors. A protocol, so that the parser may import the dialects and not the reverse."""

    def error(self, span: Span, message: str) -> ParseError: ...

    def parse_token(self, kind: Kind, expected: str) -> Token: ...

    def body_error(self, body: Token) -> Callable[[int, int, str], ParseError]: ...


# Builtin attribute kinds for PNNX's parameter values (Array is structural: the parser and
# printer handle it without recursion).
BUILTIN_KINDS = ("Bool", "Int32", "Int64", "Double", "String", "None", "Array")
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

_OP_PREFIX = re.compile(r"([^.:]*)(?:\.|::)")


def op_dialect(op_type: str) -> str | None:
    """`nn.Conv2d` -> nn, `prim::TupleConstruct` -> prim; None without a prefix."""
    m = _OP_PREFIX.match(op_type)
    return m.group(1) if m else None


def bare_onnx_op(op_type: str) -> bool:
    """An ONNX op type that pnnx writes without a prefix where it has no torch form (e.g.
    `Gather` from an .onnx) and that a layer runs."""
    from ..layers.registry import is_supported

    return op_type.isidentifier() and op_type[:1].isupper() and is_supported(op_type)


class Dialect:
    """A namespace; every hook's default says the dialect has no such thing."""

    name = ""
    attribute_classes: tuple[type, ...] = ()  # Python classes of the values it prints

    # -- ops -----------------------------------------------------------------------------
    def op_names(self) -> Iterable[str]:
        return ()

    def has_op(self, op_type: str) -> bool:
        return op_type in set(self.op_names())

    # -- types -----------------------------------------------------------------------------
    def parse_type(self, parser: Parser, name: str, tok: Token) -> TensorType:
        """Called after the type's IDENT token `dialect.name` was read."""
        raise parser.error(tok.span, f"dialect '{self.name}' has no type '{name}'")

    def print_type(self, t: TensorType) -> str | None:
        return None

    # -- attributes --------------------------------------------------------------------------
    def parse_attribute(self, parser: Parser, kind: str, kind_span: Span) -> Any:
        """Called after `(dialect.kind)` was read; reads the value's tokens."""
        raise parser.error(kind_span, f"dialect '{self.name}' has no attribute kind '{kind}'")

    def print_attribute(self, value: Any) -> str:
        raise TypeError(f"dialect {self.name!r} cannot print {value!r}")


class OpsDialect(Dialect):
    """A PNNX type prefix: its ops are the registered layers' types with that prefix."""

    def __init__(self, name: str) -> None:
        self.name = name

    def op_names(self) -> Iterable[str]:
        from ..layers.registry import supported_types

        return [t for t in supported_types() if op_dialect(t) == self.name]

    def has_op(self, op_type: str) -> bool:
        from ..layers.registry import is_supported

        return op_dialect(op_type) == self.name and is_supported(op_type)


class PnnxDialect(OpsDialect):
    """pnnx: its ops (pnnx.Input, pnnx.Expression…), the tensor type and the weight attribute."""

    attribute_classes = (Attribute,)

    def __init__(self) -> None:
        super().__init__("pnnx")

    def parse_type(self, parser: Parser, name: str, tok: Token) -> TensorType:
        if name == "any":
            return ANY
        if name == "tensor":
            body = parser.parse_token(Kind.BODY, "'<' to start the tensor type's shape and dtype, like <1x3xf32>")
            shape, dtype = parse_body(body.value, parser.body_error(body), symbolic=True)
            return TensorType(shape, dtype)
        raise parser.error(tok.span, f"dialect 'pnnx' has no type '{name}': expected pnnx.tensor<…> or pnnx.any")

    def print_type(self, t: TensorType) -> str | None:
        if t.shape is None:
            return "pnnx.any"
        assert t.dtype is not None
        return f"pnnx.tensor<{format_body(t.shape, t.dtype)}>"

    def parse_attribute(self, parser: Parser, kind: str, kind_span: Span) -> Any:
        if kind != "weight":
            raise parser.error(kind_span, f"dialect 'pnnx' has no attribute kind '{kind}': expected pnnx.weight")
        body = parser.parse_token(Kind.BODY, "'<' to start the weight's shape and dtype, like <16x3x3x3xf32>")
        declared, dtype = parse_body(body.value, parser.body_error(body), symbolic=False)
        shape = known_dims(declared)
        assert shape is not None  # symbolic=False: every dim an int
        return Attribute(dtype, shape)

    def print_attribute(self, value: Any) -> str:
        return f"(pnnx.weight)<{format_body(value.shape, value.dtype)}>"


PNNX_PREFIXES = ("nn", "F", "torch", "Tensor", "prim", "aten", "torchvision")  # torchvision:: at optlevel 0


class DialectRegistry:
    """The dialects a parser and printer know, by name."""

    def __init__(self, dialects: Iterable[Dialect] = ()) -> None:
        self._dialects: dict[str, Dialect] = {}
        for d in dialects:
            self.register(d)

    def register(self, dialect: Dialect) -> Dialect:
        if not dialect.name or dialect.name in self._dialects:
            raise ValueError(f"dialect name {dialect.name!r} is empty or already registered")
        self._dialects[dialect.name] = dialect
        return dialect

    def copy(self) -> DialectRegistry:
        return DialectRegistry(self._dialects.values())

    def get(self, name: str) -> Dialect | None:
        return self._dialects.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._dialects)

    def dialect_for_value(self, value: Any) -> Dialect | None:
        """The dialect that prints `value` (by its Python class), if any."""
        for d in self._dialects.values():
            if d.attribute_classes and isinstance(value, d.attribute_classes):
                return d
        return None

    def print_type(self, t: TensorType) -> str:
        for d in self._dialects.values():
            text = d.print_type(t)
            if text is not None:
                return text
        raise TypeError(f"no dialect prints the type {t!r}")

    def unknown_dialect(self, name: str, what: str) -> str:
        """The message for an unknown dialect prefix."""
        return f"unknown dialect '{name}' in {what}: registered dialects are {', '.join(self.names)}"

    def unknown_op(self, dialect: Dialect, op_type: str) -> str:
        near = difflib.get_close_matches(op_type, list(dialect.op_names()), n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        return f"unknown op '{op_type}': dialect '{dialect.name}' has no such op{hint}"


def default_registry() -> DialectRegistry:
    """pnnx and the PNNX type prefixes (a fresh registry: register test dialects freely)."""
    return DialectRegistry([PnnxDialect(), *(OpsDialect(p) for p in PNNX_PREFIXES)])
