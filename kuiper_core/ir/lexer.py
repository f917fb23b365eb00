"""Tokens of the textual IR, each with its span in the source.

A `Source` holds the text and turns a span into `path:line:col` and a caret (as a
`ParseError`). The `Lexer` reads tokens lazily with any lookahead (`peek(k)`); every
call advances at least one character, so no input can make it loop.

    %name  %"any name"      a value (a PNNX operand)           VALUE
    @name  @"any name"      an operator's PNNX name or a weight SYMBOL
    $name  $"any name"      an input's argument name           ARG
    name.with.dots          keys, attribute kinds, types, true  IDENT
    3  -2                   integers                            INT
    0.5  1e-05  -inf        floats (`inf`/`nan` alone are IDENTs) FLOAT
    "text"                  strings (JSON-like escapes)         STRING
    <...>                   a dialect type's or attribute's body, one token (balanced)
    ( ) { } [ ] , : = ->    punctuation
    // to the end of the line is a comment
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from ..errors import ParseError, short


class Span(NamedTuple):
    """Characters [start, end) of the source."""

    start: int
    end: int


class Source:
    """IR text with its path; makes located errors in MLIR's format."""

    def __init__(self, text: str, path: str | None = None) -> None:
        self.text = text
        self.path = path
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        i = bisect.bisect_right(self._line_starts, offset) - 1
        return i + 1, offset - self._line_starts[i] + 1

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)].rstrip("\r")

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def error(self, span: Span, message: str) -> ParseError:
        """`path:line:col: error: message`, the source line and a caret under the span
        (cut at the end of the span's first line)."""
        line, col = self.line_col(span.start)
        text = self.line_text(line)
        length = max(1, min(span.end, span.start + len(text) - col + 1) - span.start)
        return ParseError(
            message, path=self.path, line=line, column=col, source_line=text, length=length, severity="error"
        )


class Kind(str, Enum):
    VALUE = "value"
    SYMBOL = "symbol"
    ARG = "arg"
    IDENT = "ident"
    INT = "int"
    FLOAT = "float"
    STRING = "string"
    BODY = "body"
    LPAREN = "("
    RPAREN = ")"
    LBRACE = "{"
    RBRACE = "}"
    LBRACKET = "["
    RBRACKET = "]"
    COMMA = ","
    COLON = ":"
    EQUAL = "="
    ARROW = "->"
    EOF = "end of input"


@dataclass(slots=True)  # not frozen: a frozen dataclass is slow to build, and there is one per token
class Token:
    kind: Kind
    text: str  # exactly as written
    span: Span
    value: str = ""  # the name of VALUE/SYMBOL/ARG, a STRING's content, a BODY's inside

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind is Kind.EOF:
            return "end of input"
        text = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return f"'{text}'"


_PUNCT = {
    "(": Kind.LPAREN,
    ")": Kind.RPAREN,
    "{": Kind.LBRACE,
    "}": Kind.RBRACE,
    "[": Kind.LBRACKET,
    "]": Kind.RBRACKET,
    ",": Kind.COMMA,
    ":": Kind.COLON,
    "=": Kind.EQUAL,
}
_SIGILS = {"%": Kind.VALUE, "@": Kind.SYMBOL, "$": Kind.ARG}
_SPACE = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_BARE_NAME = re.compile(r"[A-Za-z0-9_.]+")
_NUMBER = re.compile(r"-?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|inf\b|nan\b)")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "/": "/"}


class Lexer:
    """Tokens of `source.text[start:end]` on demand, with lookahead."""

    def __init__(self, source: Source, start: int = 0, end: int | None = None) -> None:
        self.source = source
        self.pos = start
        self.end = len(source.text) if end is None else end
        self._ahead: list[Token] = []
        self.last_end = start  # end of the last token lexed: where EOF is reported

    # -- the parser's interface -------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        while len(self._ahead) <= k:
            self._ahead.append(self._lex())
        return self._ahead[k]

    def next(self) -> Token:
        tok = self.peek()
        self._ahead.pop(0)
        return tok

    def error(self, span: Span, message: str) -> ParseError:
        return self.source.error(span, message)

    # -- scanning ------------------------------------------------------------------------------
    def _lex(self) -> Token:
        text, end = self.source.text, self.end
        m = _SPACE.match(text, self.pos, end)
        if m:
            self.pos = m.end()
        start = self.pos
        if start >= end:
            # Reported just after the last token, so a caret shows where the text stops.
            return Token(Kind.EOF, "", Span(self.last_end, self.last_end))
        ch = text[start]
        if ch in _PUNCT:
            tok = self._make(_PUNCT[ch], start, start + 1)
        elif ch == "-" and text.startswith("->", start):
            tok = self._make(Kind.ARROW, start, start + 2)
        elif ch in _SIGILS:
            tok = self._sigil(start)
        elif ch == '"':
            value, stop = self._string(start)
            tok = self._make(Kind.STRING, start, stop, value)
        elif ch == "<":
            tok = self._body(start)
        elif ch.isdigit() or ch in "-.":
            tok = self._number(start)
        elif _IDENT.match(text, start, end):
            m = _IDENT.match(text, start, end)
            assert m is not None
            tok = self._make(Kind.IDENT, start, m.end())
        elif ch == "/":
            raise self.error(Span(start, start + 1), "unexpected '/': comments start with '//'")
        else:
            raise self.error(Span(start, start + 1), f"unexpected character {ch!r}")
        self.pos = tok.span.end
        self.last_end = tok.span.end
        return tok

    def _make(self, kind: Kind, start: int, stop: int, value: str = "") -> Token:
        return Token(kind, self.source.text[start:stop], Span(start, stop), value)

    def _sigil(self, start: int) -> Token:
        text, kind = self.source.text, _SIGILS[self.source.text[start]]
        if start + 1 < self.end and text[start + 1] == '"':
            value, stop = self._string(start + 1)
            if value == "":
                raise self.error(Span(start, stop), f"empty name after '{text[start]}'")
            return self._make(kind, start, stop, value)
        m = _BARE_NAME.match(text, start + 1, self.end)
        if m is None:
            what = {Kind.VALUE: "a value", Kind.SYMBOL: "a name", Kind.ARG: "an argument name"}[kind]
            raise self.error(
                Span(start, start + 1),
                f"expected {what} after '{text[start]}' (a name like {text[start]}x or {text[start]}\"any text\")",
            )
        return self._make(kind, start, m.end(), m.group())

    def _number(self, start: int) -> Token:
        text = self.source.text
        m = _NUMBER.match(text, start, self.end)
        if m is None:
            raise self.error(Span(start, start + 1), f"unexpected character {text[start]!r}")
        stop = m.end()
        # A number glued to letters (`3x`, `1.5e`) is one bad token, not two.
        if stop < self.end and (text[stop].isalnum() or text[stop] in "_."):
            bad = stop
            while bad < self.end and (text[bad].isalnum() or text[bad] in "_.-+"):
                bad += 1
            raise self.error(Span(start, bad), f"malformed number '{short(text[start:bad])}'")
        word = m.group()  # `-inf`/`-nan` are FLOATs; plain `inf`/`nan` lex as IDENTs
        kind = Kind.FLOAT if any(c in word for c in ".eEn") else Kind.INT
        return self._make(kind, start, stop)

    def _string(self, start: int) -> tuple[str, int]:
        """The content of the string starting at `start` (a '"') and the offset past it."""
        text = self.source.text
        out: list[str] = []
        i = start + 1
        while True:
            j = i
            while j < self.end and text[j] not in '"\\\n':
                j += 1
            out.append(text[i:j])
            if j >= self.end or text[j] == "\n":
                raise self.error(Span(start, j), "unterminated string: expected '\"' before the end of the line")
            if text[j] == '"':
                return "".join(out), j + 1
            # an escape
            esc = text[j + 1] if j + 1 < self.end else ""
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i = j + 2
            elif esc in ("u", "U"):
                n = 4 if esc == "u" else 8
                digits = text[j + 2 : j + 2 + n]
                if len(digits) != n or not re.fullmatch(r"[0-9a-fA-F]+", digits) or int(digits, 16) > 0x10FFFF:
                    raise self.error(
                        Span(j, min(j + 2 + n, self.end)), f"bad escape: expected \\{esc} and {n} hex digits"
                    )
                out.append(chr(int(digits, 16)))
                i = j + 2 + n
            else:
                raise self.error(
                    Span(j, j + 2), f"unknown escape '\\{esc}' in a string: use \\\" \\\\ \\n \\t \\r or \\uXXXX"
                )

    def _body(self, start: int) -> Token:
        """`<...>` up to its matching '>' on the same line."""
        text = self.source.text
        depth, i = 0, start
        while i < self.end and text[i] != "\n":
            if text[i] == "<":
                depth += 1
            elif text[i] == ">" and not (i > start and text[i - 1] == "-"):
                depth -= 1
                if depth == 0:
                    return self._make(Kind.BODY, start, i + 1, text[start + 1 : i])
            i += 1
        raise self.error(Span(start, i), "expected '>' to close '<' on the same line")


def tokenize(text: str) -> list[Token]:
    """Every token of `text` (EOF excluded); raises a ParseError at the first bad one."""
    lexer = Lexer(Source(text))
    out = []
    while (tok := lexer.next()).kind is not Kind.EOF:
        out.append(tok)
    return out
