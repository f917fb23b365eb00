"""Recursive-descent parser of the textual IR into a `Graph` (docs/ir.md has the format).

    module        := '{' operation* '}'
    operation     := '(' [VALUE (',' VALUE)*] ')' '=' STRING SYMBOL
                     '(' [operand (',' operand)*] ')' [attr-dict] ':' function-type
    operand       := [ARG '='] VALUE
    attr-dict     := '{' [entry (',' entry)*] '}'
    entry         := (IDENT | STRING | SYMBOL) ':' attribute       SYMBOL keys (@weight) hold weights
    attribute     := '(' kind ')' value       builtin kinds Bool Int32 Int64 Double String None Array,
                                              or `dialect.kind` read by that dialect's hook
    function-type := '(' [type (',' type)*] ')' '->' (type | '(' [type (',' type)*] ')')
    type          := IDENT [BODY]             pnnx.tensor<1x3x?xf32>, pnnx.any

Method names follow xDSL: `parse_X` reads an X or raises a located error, `parse_optional_X`
returns None when the next token cannot start an X. Semantic errors (undefined or redefined
values, count and type mismatches, duplicate keys, unknown dialects and ops) point at the
token concerned. Arrays nest without Python recursion (an explicit stack).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

from ..errors import LimitError, ParseError, short
from ..graph import Attribute, Graph, Operand, Operator
from ..limits import current as current_limits
from .dialects import BUILTIN_KINDS, INT32, INT64, DialectRegistry, bare_onnx_op, default_registry, op_dialect
from .lexer import Kind, Lexer, Source, Span, Token
from .types import TensorType


@dataclass
class OpLocation:
    """Where one operation's parts are in the source (for errors, highlighting, the app)."""

    span: Span  # from the result list to the last type
    type_span: Span  # the quoted op type
    name_span: Span  # @name
    operand_spans: list[Span] = field(default_factory=list)
    attr_spans: dict[str, tuple[Span, Span]] = field(default_factory=dict)  # key as written -> (key, value)

    def key_span(self, key: str) -> Span | None:
        """The value span of a parameter (`key`) or weight (`@key`)."""
        spans = self.attr_spans.get(key)
        return spans[1] if spans else None


@dataclass
class IRModule:
    """A parsed module: the graph and where each operator came from."""

    graph: Graph
    source: Source
    locations: list[OpLocation]  # parallel to graph.operators
    open_span: Span  # the module's '{'

    def error(self, span: Span, message: str) -> ParseError:
        return self.source.error(span, message)

    def op_index(self, name: str) -> int | None:
        return next((i for i, op in enumerate(self.graph.operators) if op.name == name), None)

    def line_of(self, index: int) -> int:
        return self.source.line_col(self.locations[index].span.start)[0]


class Parser:
    def __init__(
        self,
        text: str,
        path: str | None = None,
        *,
        registry: DialectRegistry | None = None,
        allow_unregistered: bool = False,
    ) -> None:
        self.source = Source(text, path)
        self.lexer = Lexer(self.source)
        self.registry = registry if registry is not None else default_registry()
        self.allow_unregistered = allow_unregistered
        self._defined: dict[str, tuple[Operand, TensorType, Span]] = {}
        self.limits = current_limits()

    # -- tokens -------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        return self.lexer.peek(k)

    def error(self, span: Span, message: str) -> ParseError:
        return self.source.error(span, message)

    def limit_error(self, span: Span, message: str, limit: str, value: int) -> LimitError:
        """A LimitError located like `error`."""
        e = self.source.error(span, message)
        return LimitError(
            message,
            limit=limit,
            maximum=getattr(self.limits, limit),
            value=value,
            path=e.path,
            line=e.line,
            column=e.column,
            source_line=e.source_line,
            length=e.length,
        )

    def parse_optional_token(self, kind: Kind) -> Token | None:
        return self.lexer.next() if self.peek().kind is kind else None

    def parse_token(self, kind: Kind, expected: str) -> Token:
        tok = self.peek()
        if tok.kind is not kind:
            raise self.error(tok.span, f"expected {expected}, got {tok.describe()}")
        return self.lexer.next()

    def body_error(self, body: Token) -> Callable[[int, int, str], ParseError]:
        """An error maker for offsets inside a BODY token's `<…>`."""
        base = body.span.start + 1

        def make(start: int, end: int, message: str) -> ParseError:
            return self.error(Span(base + start, base + max(end, start + 1)), message)

        return make

    # -- module ---------------------------------------------------------------------------------
    def parse_module(self) -> IRModule:
        graph = Graph(source=self.source.path)
        opening = self.parse_token(Kind.LBRACE, "'{' to open the module")
        locations: list[OpLocation] = []
        while self.parse_optional_token(Kind.RBRACE) is None:
            if self.peek().kind is Kind.EOF:
                raise self.error(
                    self.peek().span,
                    f"expected '}}' to close the module opened on line "
                    f"{self.source.line_col(opening.span.start)[0]}, got end of input",
                )
            if len(graph.operators) >= self.limits.max_operators:  # checked before each one is read
                raise self.limit_error(
                    self.peek().span,
                    f"more than {self.limits.max_operators:,} operations",
                    "max_operators",
                    len(graph.operators) + 1,
                )
            op, loc = self.parse_operation(graph)
            graph.operators.append(op)
            locations.append(loc)
        extra = self.peek()
        if extra.kind is not Kind.EOF:
            raise self.error(extra.span, f"unexpected {extra.describe()} after the end of the module")
        return IRModule(graph, self.source, locations, opening.span)

    # -- operation ------------------------------------------------------------------------------
    def parse_operation(self, graph: Graph) -> tuple[Operator, OpLocation]:
        first = self.parse_token(Kind.LPAREN, "an operation: '(' to start its result list, like (%1) = …")
        so_far: dict[str, Token] = {}  # this operation's results by name: a set, not a scan (16,000 results took 5.7 s)
        results = self._parse_list(Kind.RPAREN, lambda: self._parse_result(so_far), "a result value like %1")
        self.parse_token(Kind.EQUAL, "'=' after the result list")
        type_tok = self.parse_token(Kind.STRING, 'the op type in quotes, like "nn.Conv2d"')
        self._check_op(type_tok)
        name_tok = self.parse_token(Kind.SYMBOL, "the operator's name, like @conv1")
        self.parse_token(Kind.LPAREN, "'(' to start the operand list")
        operands = self._parse_list(Kind.RPAREN, self.parse_operand, "an operand like %0 or $input=%0")
        entries = self.parse_optional_attr_dict() or []
        self.parse_token(Kind.COLON, "':' and the function type, like : (pnnx.tensor<…>) -> pnnx.tensor<…>")
        in_types, out_types, in_span, out_span = self.parse_function_type()
        end = self.lexer.last_end

        if len(in_types) != len(operands):
            raise self.error(in_span, f"{len(operands)} operand(s) but {len(in_types)} operand type(s)")
        if len(out_types) != len(results):
            raise self.error(out_span, f"{len(results)} result(s) but {len(out_types)} result type(s)")

        line = self.source.line_col(first.span.start)[0]
        op = Operator(type_tok.value, name_tok.value, line=line)
        loc = OpLocation(Span(first.span.start, end), type_tok.span, name_tok.span)
        for (arg, value_tok), (t, t_span) in zip(operands, in_types):
            operand, declared, def_span = self._defined[value_tok.value]
            if t != declared:
                def_line = self.source.line_col(def_span.start)[0]
                raise self.error(
                    t_span,
                    f"%{value_tok.value} is {self.registry.print_type(declared)} where it is defined (line "
                    f"{def_line}), but {self.registry.print_type(t)} here",
                )
            op.inputs.append(operand)
            op.input_names.append(arg.value if arg is not None else "")
            operand.consumers.append(op)
            loc.operand_spans.append(value_tok.span)
        for key_tok, value, value_span in entries:
            loc.attr_spans[_written_key(key_tok)] = (key_tok.span, value_span)
            if key_tok.kind is Kind.SYMBOL:
                op.attrs[key_tok.value] = value
            else:
                op.params[_key_name(key_tok)] = value
        for value_tok, (t, _) in zip(results, out_types):
            operand = Operand(value_tok.value, t.shape, t.dtype, producer=op)
            graph.operands[operand.name] = operand
            self._defined[operand.name] = (operand, t, value_tok.span)
            op.outputs.append(operand)
        return op, loc

    def _parse_list(self, close: Kind, item: Callable[[], Any], what: str) -> list[Any]:
        """`item (',' item)* close` or just `close` (the opening bracket is already read)."""
        items: list[Any] = []
        if self.parse_optional_token(close) is not None:
            return items
        while True:
            items.append(item())
            if self.parse_optional_token(Kind.COMMA) is None:
                self.parse_token(close, f"',' or '{close.value}'")
                return items

    def _parse_result(self, so_far: dict[str, Token]) -> Token:
        tok = self.parse_token(Kind.VALUE, "a result value like %1")
        earlier = self._defined[tok.value][2] if tok.value in self._defined else None
        earlier = earlier or (so_far[tok.value].span if tok.value in so_far else None)
        if earlier is not None:
            line, col = self.source.line_col(earlier.start)
            raise self.error(tok.span, f"value %{tok.value} is already defined at {line}:{col}")
        so_far[tok.value] = tok
        return tok

    def _check_op(self, tok: Token) -> None:
        """The op type names a registered dialect and an op of it."""
        op_type = tok.value
        prefix = op_dialect(op_type)
        if prefix is None and bare_onnx_op(op_type):
            return  # an ONNX op type pnnx keeps as it is (no torch form), e.g. Gather
        if prefix is None:
            raise self.error(
                tok.span, f"op type '{op_type}' has no dialect prefix (like nn.Conv2d or prim::TupleConstruct)"
            )
        dialect = self.registry.get(prefix)
        prefix_span = Span(tok.span.start + 1, tok.span.start + 1 + max(1, len(prefix)))
        if dialect is None:
            if self.allow_unregistered:
                return
            raise self.error(prefix_span, self.registry.unknown_dialect(prefix, f"op '{op_type}'"))
        if not self.allow_unregistered and not dialect.has_op(op_type):
            raise self.error(tok.span, self.registry.unknown_op(dialect, op_type))

    def parse_operand(self) -> tuple[Token | None, Token]:
        """`%x` or `$argname=%x`; the value must be defined by an earlier operation."""
        arg = self.parse_optional_token(Kind.ARG)
        if arg is not None:
            self.parse_token(Kind.EQUAL, f"'=' after the argument name ${arg.value}")
        tok = self.parse_token(Kind.VALUE, "an operand value like %0" if arg is None else "a value like %0")
        if tok.value not in self._defined:
            raise self.error(
                tok.span, f"use of undefined value %{tok.value} (values are defined by an earlier operation)"
            )
        return arg, tok

    # -- attributes --------------------------------------------------------------------------------
    def parse_optional_attr_dict(self) -> list[tuple[Token, Any, Span]] | None:
        if self.parse_optional_token(Kind.LBRACE) is None:
            return None
        seen: dict[str, Token] = {}

        def entry() -> tuple[Token, Any, Span]:
            key = self.peek()
            if key.kind not in (Kind.IDENT, Kind.STRING, Kind.SYMBOL):
                raise self.error(
                    key.span, f"expected an attribute name (like kernel_size, or @weight), got {key.describe()}"
                )
            self.lexer.next()
            written = _written_key(key)
            if written in seen:
                line, col = self.source.line_col(seen[written].span.start)
                raise self.error(key.span, f"duplicate attribute '{written}' (first given at {line}:{col})")
            seen[written] = key
            self.parse_token(Kind.COLON, f"':' after the attribute name '{written}'")
            value, span = self.parse_attribute()
            is_weight = isinstance(value, Attribute)
            if key.kind is Kind.SYMBOL and not is_weight:
                raise self.error(span, f"weight '{written}' needs a (pnnx.weight)<shape x dtype> value")
            if key.kind is not Kind.SYMBOL and is_weight:
                raise self.error(key.span, f"a (pnnx.weight) value needs an '@' name: @{written}")
            return key, value, span

        return self._parse_list(Kind.RBRACE, entry, "an attribute like kernel_size:(Int32)3")

    def parse_attribute_kind(self) -> tuple[str, Span]:
        """`(Kind)` or `(dialect.kind)`: the name and its span."""
        self.parse_token(Kind.LPAREN, "'(' and an attribute kind, like (Int32)3 or (Bool)true")
        kind = self.parse_token(Kind.IDENT, "an attribute kind (Bool, Int32, Int64, Double, String, None, Array)")
        self.parse_token(Kind.RPAREN, f"')' after the attribute kind '{kind.text}'")
        return kind.text, kind.span

    def parse_attribute(self) -> tuple[Any, Span]:
        """A typed value; nested arrays are read with an explicit stack, not recursion."""
        start = self.peek().span.start
        stack: list[list[Any]] = []
        while True:
            kind, kind_span = self.parse_attribute_kind()
            if kind == "Array":
                self.parse_token(Kind.LBRACKET, "'[' to start the array")
                if self.parse_optional_token(Kind.RBRACKET) is None:
                    if len(stack) >= self.limits.max_param_depth:  # layers, writers and passes recurse
                        raise self.limit_error(
                            kind_span,
                            f"arrays nest deeper than {len(stack):,} levels",
                            "max_param_depth",
                            len(stack) + 1,
                        )
                    stack.append([])
                    continue
                value: Any = []
            else:
                value = self._parse_attribute_value(kind, kind_span)
                if stack and isinstance(value, Attribute):  # weights belong to the operator, one per @name
                    raise self.error(
                        Span(kind_span.start - 1, self.lexer.last_end), "a (pnnx.weight) cannot be an array element"
                    )
            while True:  # hand the finished value to its enclosing arrays
                if not stack:
                    return value, Span(start, self.lexer.last_end)
                stack[-1].append(value)
                if self.parse_optional_token(Kind.COMMA) is not None:
                    break
                self.parse_token(Kind.RBRACKET, "',' or ']' in the array")
                value = stack.pop()

    def _parse_attribute_value(self, kind: str, kind_span: Span) -> Any:
        if "." in kind:
            prefix, name = kind.split(".", 1)
            dialect = self.registry.get(prefix)
            if dialect is None:
                raise self.error(kind_span, self.registry.unknown_dialect(prefix, f"attribute kind '{kind}'"))
            return dialect.parse_attribute(self, name, kind_span)
        tok = self.peek()
        if kind == "Bool":
            if tok.kind is Kind.IDENT and tok.text in ("true", "false"):
                self.lexer.next()
                return tok.text == "true"
            raise self.error(tok.span, f"expected true or false after (Bool), got {tok.describe()}")
        if kind in ("Int32", "Int64"):
            tok = self.parse_token(Kind.INT, f"an integer after ({kind})")
            low, high = INT32 if kind == "Int32" else INT64
            sign, digits = ("-", tok.text[1:]) if tok.text[:1] in "+-" else ("", tok.text)
            digits = digits.lstrip("0") or "0"  # (Int32)000…01 is 1, however many zeros
            # int() refuses very long digit strings: more than 20 digits is out of any range
            number = int(sign + digits) if len(digits) <= 20 else None
            if number is None or not low <= number <= high:
                shown = number if number is not None else f"{sign}{digits[:12]}… ({len(digits):,} digits)"
                raise self.error(tok.span, f"{shown} is out of range for ({kind}) [{low}, {high}]")
            return number
        if kind == "Double":
            if tok.kind in (Kind.FLOAT, Kind.INT) or (tok.kind is Kind.IDENT and tok.text in ("inf", "nan")):
                self.lexer.next()
                value = float(tok.text)
                if math.isinf(value) and "inf" not in tok.text:
                    raise self.error(tok.span, f"{short(tok.text)} is out of range for (Double)")
                return value
            raise self.error(
                tok.span, f"expected a number (like 0.5, 1e-05, inf or nan) after (Double), got {tok.describe()}"
            )
        if kind == "String":
            return self.parse_token(Kind.STRING, 'a quoted string after (String), like "zeros"').value
        if kind == "None":
            if tok.kind is Kind.IDENT and tok.text == "none":
                self.lexer.next()
                return None
            raise self.error(tok.span, f"expected none after (None), got {tok.describe()}")
        raise self.error(
            kind_span,
            f"unknown attribute kind '{kind}': builtin kinds are {', '.join(BUILTIN_KINDS)}; "
            "a dialect's are written dialect.kind",
        )

    # -- types ----------------------------------------------------------------------------------------
    def parse_function_type(self) -> tuple[list[tuple[TensorType, Span]], list[tuple[TensorType, Span]], Span, Span]:
        """`(in types) -> out type | (out types)`, with the spans of both lists."""
        opening = self.parse_token(Kind.LPAREN, "'(' to start the operand types")
        ins = self._parse_list(Kind.RPAREN, self.parse_type, "a type like pnnx.tensor<1x3xf32>")
        in_span = Span(opening.span.start, self.lexer.last_end)
        self.parse_token(Kind.ARROW, "'->' and the result types")
        out_start = self.peek().span.start
        if self.parse_optional_token(Kind.LPAREN) is not None:
            outs = self._parse_list(Kind.RPAREN, self.parse_type, "a type like pnnx.tensor<1x3xf32>")
        else:
            outs = [self.parse_type()]
        return ins, outs, in_span, Span(out_start, self.lexer.last_end)

    def parse_type(self) -> tuple[TensorType, Span]:
        tok = self.parse_token(Kind.IDENT, "a type like pnnx.tensor<1x3xf32> or pnnx.any")
        if "." not in tok.text:
            raise self.error(tok.span, f"unknown type '{tok.text}': value types are pnnx.tensor<…> and pnnx.any")
        prefix, name = tok.text.split(".", 1)
        dialect = self.registry.get(prefix)
        if dialect is None:
            raise self.error(tok.span, self.registry.unknown_dialect(prefix, f"type '{tok.text}'"))
        t = dialect.parse_type(self, name, tok)
        return t, Span(tok.span.start, self.lexer.last_end)


def _key_name(tok: Token) -> str:
    """An attribute key's name: IDENT text, or the content of a STRING or SYMBOL."""
    return tok.text if tok.kind is Kind.IDENT else tok.value


def _written_key(tok: Token) -> str:
    """The key as OpLocation.attr_spans and messages name it: `@name` for weights."""
    return "@" + tok.value if tok.kind is Kind.SYMBOL else _key_name(tok)
