"""Recursive-descent parser of pnnx.Expression text into an AST, and the printer back.

    expr := NUMBER | OPERAND | True | False | None
          | NAME '(' expr (',' expr)* ')'          a call: add(@0,1.0), size(@0,1)
          | '[' [expr (',' expr)*] ']'              a list: [int(size(@0,0)),-1]

The descent is written with an explicit stack instead of Python recursion, so text nested
100,000 deep parses (and prints, and evaluates) without RecursionError. Every node keeps
its [start, end) span in the source for carets and for the app's highlighting.

Node objects compare by identity (a recursive __eq__ would overflow on deep trees); compare
trees with `same_tree(a, b)` or by their printed text.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from collections.abc import Iterator

from .. import limits as _limits
from ..errors import LimitError, ParseError
from .functions import FUNCTIONS, LITERAL_NAMES
from .lexer import Kind, Token, error_at, tokenize

Span = tuple[int, int]


@dataclass(eq=False)
class OperandRef:
    """`@N`: the operator's N-th input."""

    index: int
    span: Span = (0, 0)

    def __repr__(self) -> str:
        return f"@{self.index}"


@dataclass(eq=False)
class Constant:
    """A number or True/False/None, with its source text kept for exact printing."""

    value: int | float | bool | None
    text: str = ""
    span: Span = (0, 0)

    def __post_init__(self) -> None:
        if not self.text:
            self.text = _format_constant(self.value)

    def __repr__(self) -> str:
        return self.text


@dataclass(eq=False)
class Call:
    """`name(arg, ...)`: a function of the language applied to sub-expressions."""

    name: str
    args: list[Node] = field(default_factory=list)
    span: Span = (0, 0)

    def __repr__(self) -> str:
        return to_text(self)


@dataclass(eq=False)
class ListExpr:
    """`[a, b, ...]`: pnnx's list expressions (shapes such as `[int(size(@0,0)),-1]`)."""

    items: list[Node] = field(default_factory=list)
    span: Span = (0, 0)

    def __repr__(self) -> str:
        return to_text(self)


Node = OperandRef | Constant | Call | ListExpr


def _format_constant(value: object) -> str:
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"not an expression constant: {value!r}")


def _number(text: str, tok: Token) -> Constant:
    t = tok.text
    is_float = any(c in t for c in ".eEn")  # '.', exponent, inf, nan
    if not is_float and len(t.lstrip("-").lstrip("0")) > 19:  # int() refuses 4,300+ digits
        raise error_at(text, tok.start, tok.end, "integer constant does not fit in 64 bits")
    value: int | float = float(t) if is_float else int(t)
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
        raise error_at(text, tok.start, tok.end, "integer constant does not fit in 64 bits")
    return Constant(value, t, (tok.start, tok.end))


def _operand(text: str, tok: Token, lim: _limits.Limits) -> OperandRef:
    digits = tok.text[1:]
    index = int(digits) if len(digits.lstrip("0")) <= 19 else None
    if index is None or index > lim.max_expression_operand:
        raise LimitError(
            f"operand {tok.text[:24]}{'…' if len(tok.text) > 24 else ''} is beyond the highest input number allowed",
            limit="max_expression_operand",
            maximum=lim.max_expression_operand,
            value=index,
            line=1,
            column=tok.start + 1,
            source_line=text,
            length=tok.end - tok.start,
        )
    return OperandRef(index, (tok.start, tok.end))


def children(node: Node) -> list[Node]:
    if isinstance(node, Call):
        return node.args
    if isinstance(node, ListExpr):
        return node.items
    return []


# -- parsing ------------------------------------------------------------------------


class _Frame:
    """A call or list whose arguments are being parsed."""

    __slots__ = ("opener", "name_tok", "items")

    def __init__(self, opener: Token, name_tok: Token | None) -> None:
        self.opener = opener  # '(' of a call or '[' of a list
        self.name_tok = name_tok  # the function name; None for a list
        self.items: list[Node] = []


def _describe(tok: Token) -> str:
    return "the end of the expression" if tok.kind is Kind.END else repr(tok.text)


def _unknown_function(text: str, tok: Token) -> ParseError:
    names = list(FUNCTIONS) + list(LITERAL_NAMES)
    near = difflib.get_close_matches(tok.text, names, n=5, cutoff=0.6)

    # Ties in similarity go to the longest common prefix: 'ad' -> 'add', not 'and'.
    def key(n: str) -> tuple[float, int]:
        return difflib.SequenceMatcher(None, tok.text, n).ratio(), len(os.path.commonprefix([tok.text, n]))

    near.sort(key=key, reverse=True)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    return error_at(text, tok.start, tok.end, f"unknown function '{tok.text}'{hint}")


def _close(text: str, frame: _Frame, closer: Token) -> Node:
    if frame.name_tok is None:
        return ListExpr(frame.items, (frame.opener.start, closer.end))
    name = frame.name_tok
    fn = FUNCTIONS[name.text]
    n = len(frame.items)
    if not fn.min_args <= n <= fn.max_args:
        raise error_at(
            text,
            name.start,
            closer.end,
            f"'{fn.name}' takes {fn.arity_text}, got {n}",
        )
    return Call(name.text, frame.items, (name.start, closer.end))


def _push(stack: list[_Frame], frame: _Frame, text: str, tok: Token, lim: _limits.Limits) -> None:
    """Open a call or list, refusing nesting past max_expression_depth."""
    if len(stack) >= lim.max_expression_depth:
        raise LimitError(
            "the expression nests deeper than allowed",
            limit="max_expression_depth",
            maximum=lim.max_expression_depth,
            line=1,
            column=tok.start + 1,
            source_line=text,
            length=tok.end - tok.start,
        )
    stack.append(frame)


def parse(text: str, limits: _limits.Limits | None = None) -> Node:
    """Parse one expression; raise ParseError (column + caret) on any malformed text, and
    LimitError past max_expression_chars, max_expression_depth or max_expression_operand."""
    if not isinstance(text, str):
        raise TypeError(f"parse() takes expression text, got {type(text).__name__}")
    lim = limits or _limits.current()
    # before tokenizing: ~8 us and ~200 bytes a character to read and plan (a 9 MB paste on
    # the Expressions page took 71 s and 3 GB at every rerun)
    _limits.check_count(len(text), "the expression's length in characters", "max_expression_chars", lim)
    toks = tokenize(text)
    if toks[0].kind is Kind.END:
        raise error_at(text, 0, 1, "empty expression")
    i = 0
    stack: list[_Frame] = []
    while True:
        # 1. One operand: a leaf, or open a call/list and go on to its first argument.
        tok = toks[i]
        i += 1
        value: Node
        if tok.kind is Kind.NUMBER:
            value = _number(text, tok)
        elif tok.kind is Kind.OPERAND:
            value = _operand(text, tok, lim)
        elif tok.kind is Kind.NAME:
            nxt = toks[i]
            if tok.text in LITERAL_NAMES and nxt.kind is not Kind.LPAREN:
                value = Constant(LITERAL_NAMES[tok.text], tok.text, (tok.start, tok.end))
            elif tok.text not in FUNCTIONS:
                raise _unknown_function(text, tok)
            elif nxt.kind is not Kind.LPAREN:
                raise error_at(text, nxt.start, nxt.end, f"expected '(' after '{tok.text}', found {_describe(nxt)}")
            else:
                i += 1
                if toks[i].kind is Kind.RPAREN:  # `add()`: no function takes no arguments
                    _close(text, _Frame(nxt, tok), toks[i])
                _push(stack, _Frame(nxt, tok), text, tok, lim)
                continue
        elif tok.kind is Kind.LBRACKET:
            if toks[i].kind is Kind.RBRACKET:
                value = ListExpr([], (tok.start, toks[i].end))
                i += 1
            else:
                _push(stack, _Frame(tok, None), text, tok, lim)
                continue
        else:
            what = "an operand (@N), a number or a function call"
            raise error_at(text, tok.start, tok.end, f"expected {what}, found {_describe(tok)}")

        # 2. Hand the value to the enclosing calls, closing every one that ends here.
        while True:
            if not stack:
                end = toks[i]
                if end.kind is not Kind.END:
                    raise error_at(text, end.start, len(text), f"unexpected trailing text {text[end.start :]!r}")
                return value
            frame = stack[-1]
            frame.items.append(value)
            sep = toks[i]
            i += 1
            closer = Kind.RPAREN if frame.name_tok is not None else Kind.RBRACKET
            if sep.kind is Kind.COMMA:
                # pnnx 20261020 writes `add(@0,,mul(@1,2.0))` for torch.add(x, y, alpha=2.0)
                # at optlevel 1; its own reader (ir.cpp expand_expression) skips empty
                # tokens, so `,,` reads as `,`. So does this parser.
                while toks[i].kind is Kind.COMMA:
                    i += 1
                break
            if sep.kind is closer:
                stack.pop()
                value = _close(text, frame, sep)
                continue
            opened = frame.name_tok.text + "(" if frame.name_tok is not None else "["
            col = frame.opener.start + 1
            if sep.kind is Kind.END:
                msg = f"missing '{closer.value}' to close '{opened}' opened at column {col}"
            else:
                msg = f"expected ',' or '{closer.value}' in '{opened}' (opened at column {col}), found {_describe(sep)}"
            raise error_at(text, sep.start, sep.end, msg)


# -- walking and printing --------------------------------------------------------------


def walk(node: Node) -> Iterator[Node]:
    """Every node, parents before children, left to right (iterative)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(reversed(children(n)))


def to_text(node: Node, most: int | None = None) -> str:
    """Canonical text: no spaces, constants as written. `to_text(parse(t)) == t` for canonical t.
    `most`: stop once the text is longer than that (a label cut to 40 characters need not
    write a 30,000-node tree at every step of a walk)."""
    parts: list[str] = []
    # Work items: a node to print, or a literal string to emit.
    todo: list[Node | str] = [node]
    length = 0
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            text = item
        elif isinstance(item, OperandRef):
            text = f"@{item.index}"
        elif isinstance(item, Constant):
            text = item.text
        else:
            text, closer = (item.name + "(", ")") if isinstance(item, Call) else ("[", "]")
            todo.append(closer)
            kids = children(item)
            for k, child in enumerate(reversed(kids)):
                todo.append(child)
                if k != len(kids) - 1:
                    todo.append(",")
        parts.append(text)
        length += len(text)
        if most is not None and length > most:
            break
    return "".join(parts)


def same_tree(a: Node, b: Node) -> bool:
    """Structural equality (names, operand indices, constant values), iteratively."""
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, OperandRef) and isinstance(y, OperandRef) and x.index != y.index:
            return False
        if isinstance(x, Constant) and isinstance(y, Constant) and not _same_value(x.value, y.value):
            return False
        if isinstance(x, Call) and isinstance(y, Call) and x.name != y.name:
            return False
        cx, cy = children(x), children(y)
        if len(cx) != len(cy):
            return False
        pairs.extend(zip(cx, cy))
    return True


def _same_value(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def depth(node: Node) -> int:
    """Nesting depth (a leaf has depth 1)."""
    best = 0
    todo = [(node, 1)]
    while todo:
        n, d = todo.pop()
        best = max(best, d)
        todo.extend((c, d + 1) for c in children(n))
    return best


def inorder(node: Node) -> list[str]:
    """Seed 000's in-order display: `NUM: 0`, `MUL`, `NUM: 1`, `ADD`, `NUM: 2` for
    `add(mul(@0,@1),@2)`. A call shows after its first argument and before the rest
    (left, node, right for binary calls); constants show as `CONST: text`."""
    out: list[str] = []
    todo: list[Node | str] = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, OperandRef):
            out.append(f"NUM: {item.index}")
        elif isinstance(item, Constant):
            out.append(f"CONST: {item.text}")
        else:
            label = item.name.upper() if isinstance(item, Call) else "LIST"
            kids = children(item)
            for child in reversed(kids[1:]):
                todo.append(child)
            todo.append(label)
            if kids:
                todo.append(kids[0])
    return out


def span_text(text: str, node: Node) -> str:
    """The source text a node was parsed from."""
    return text[node.span[0] : node.span[1]]
