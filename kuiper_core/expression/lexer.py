"""Tokens of the pnnx.Expression language: `mul(exp(neg(abs(@0))),3.0)`.

Every token keeps its text and its [start, end) character offsets in the source, so the
app can colour them and errors can put a caret under the culprit. Columns shown to people
are 1-based (`Token.column`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ..errors import ParseError


class Kind(str, Enum):
    NAME = "name"  # function names, torch.float, True/False/None
    OPERAND = "operand"  # @N: the operator's N-th input
    NUMBER = "number"  # 2, -3, 0.5, 1.000000e-05, inf, nan
    LPAREN = "("
    RPAREN = ")"
    LBRACKET = "["
    RBRACKET = "]"
    COMMA = ","
    END = "end"  # after the last character; only the parser sees it


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    start: int  # 0-based offset of the first character
    end: int  # 0-based offset one past the last character

    @property
    def column(self) -> int:
        """1-based column of the first character."""
        return self.start + 1

    def __repr__(self) -> str:
        return f"Token({self.kind.value}, {self.text!r}, {self.start}:{self.end})"


# Order matters: numbers before names so that `inf`/`nan` (as pnnx's %e prints them) and
# `-3` are numbers; names may contain dots (`torch.float`).
_NUMBER = r"-?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?![\w.])|nan(?![\w.]))"
_TOKEN = re.compile(
    rf"(?P<number>{_NUMBER})"
    r"|(?P<operand>@\d+)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.]*)"
    r"|(?P<punct>[()\[\],])"
    r"|(?P<space>\s+)"
)
_PUNCT = {"(": Kind.LPAREN, ")": Kind.RPAREN, "[": Kind.LBRACKET, "]": Kind.RBRACKET, ",": Kind.COMMA}


def error_at(text: str, start: int, end: int, message: str) -> ParseError:
    """A ParseError with a caret under text[start:end] (at least one character)."""
    return ParseError(message, column=start + 1, source_line=text, length=max(1, end - start))


def tokenize(text: str) -> list[Token]:
    """All tokens of `text` followed by one END token; whitespace is skipped."""
    out: list[Token] = []
    pos, n = 0, len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            hint = " ('@' must be followed by an input number, e.g. @0)" if ch == "@" else ""
            if ch == "+" and out and out[-1].kind is Kind.NUMBER and out[-1].end == pos:
                hint = " (complex constants such as 1.0e+00+2.0e+00j are not supported)"
            raise error_at(text, pos, pos + 1, f"unexpected character {ch!r}{hint}")
        group = m.lastgroup
        if group == "number":
            # A number glued to a name or operand (`2x`, `1@0`) is one bad token, not two.
            if m.end() < n and (text[m.end()].isalpha() or text[m.end()] in "_@"):
                end = m.end()
                while end < n and (text[end].isalnum() or text[end] in "_.@"):
                    end += 1
                raise error_at(text, pos, end, f"malformed number {text[pos:end]!r}")
            out.append(Token(Kind.NUMBER, m.group(), pos, m.end()))
        elif group == "operand":
            out.append(Token(Kind.OPERAND, m.group(), pos, m.end()))
        elif group == "name":
            out.append(Token(Kind.NAME, m.group(), pos, m.end()))
        elif group == "punct":
            out.append(Token(_PUNCT[m.group()], m.group(), pos, m.end()))
        pos = m.end()
    out.append(Token(Kind.END, "", n, n))
    return out


def tokens(text: str) -> list[Token]:
    """The tokens of `text` as the app shows them (kind, text, start/end), without END."""
    return tokenize(text)[:-1]
