"""Reader of PNNX `.param` text into a `Graph`.

Format (see shared/notes/pnnx.md and pnnx's ir.cpp Graph::load):

    7767517
    <operator count> <operand count>
    type name n_in n_out in… out… key=value… @attr=(shape)dtype… $arg=operand… #operand=(shape)dtype…

Unlike pnnx's own loader (which trusts its input), every problem is a ParseError with the
file, line and column of the offending token and a caret under it.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from .. import limits as _limits
from ..errors import LimitError, ParseError, short
from ..files import decode_utf8, read_regular
from ..graph import DTYPES, Attribute, Graph, Operand, Operator, ParamValue, Shape, format_shape, known_dims

MAGIC = "7767517"

_INT = re.compile(r"-?\d+\Z")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?\Z|-?(inf|nan)\Z")
# The common shape: plain dims of up to 18 digits (they always fit in int64).
_PLAIN_SHAPE = re.compile(r"\(((?:\d{1,18},)*\d{1,18})?\)")
# A value pnnx treats as a number starts with a digit, or '-' then a digit.
_NUMERIC_START = re.compile(r"-?\d")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int64(text: str) -> int | None:
    """The int of `text` (already matched by _INT) if it fits in int64, else None.

    Checked by length first: int() of more than 4,300 digits raises instead of parsing."""
    digits = text.lstrip("-").lstrip("0")
    if len(digits) > 19:
        return None
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else None


@dataclass
class _Token:
    text: str
    column: int  # 1-based


_TOKEN = re.compile(r"[^ \t\n\r\f\v]+")  # ASCII whitespace only, as pnnx's C++ istream: NBSP is part of a name


def _split(line: str) -> list[_Token]:
    return [_Token(m.group(), m.start() + 1) for m in _TOKEN.finditer(line)]


def string_value_starts(word: str) -> bool:
    """A parameter value's first word that makes it a string the reader may continue with the
    words after it: a letter first, and not a bool or None."""
    return word[:1].isalpha() and word not in ("True", "False", "None")


def _string_param(text: str) -> bool:
    eq = text.find("=")
    return eq > 0 and text[0] not in "@$#" and string_value_starts(text[eq + 1 :])


def _join_spaced_values(toks: list[_Token]) -> list[_Token]:
    """pnnx writes some strings as they are, spaces and all (MaxViT's einsum equations at
    optlevel 0/1: `expr=B G H I J, B G H J D -> B G H I D`), which the format splits into
    tokens; pnnx's generated Python keeps the string whole. Tokens with no `=` that follow a
    parameter's `key=value` whose value is a string (starts with a letter: not a number, list,
    bool or None) are that value's continuation (single spaces, as pnnx wrote them). Anything
    else without `=` stays for the caller to refuse (`k=1 junk`)."""
    out: list[_Token] = []
    for t in toks:
        prev = out[-1] if out else None
        if "=" not in t.text and prev is not None and _string_param(prev.text):
            out[-1] = _Token(f"{prev.text} {t.text}", prev.column)
        else:
            out.append(t)
    return out


class _LineParser:
    """Parses one source line; all errors point into it."""

    def __init__(self, path: str | None, lineno: int, text: str) -> None:
        self.path = path
        self.lineno = lineno
        self.text = text

    def error(self, message: str, column: int = 1, length: int = 1) -> ParseError:
        return ParseError(
            message, path=self.path, line=self.lineno, column=column, source_line=self.text, length=length
        )

    def token_error(self, message: str, tok: _Token, offset: int = 0, length: int | None = None) -> ParseError:
        return self.error(message, tok.column + offset, length if length is not None else len(tok.text) - offset)

    # -- values ------------------------------------------------------------------------
    def scalar(self, text: str, tok: _Token, offset: int) -> ParamValue:
        if text == "None":
            return None
        if text in ("True", "False"):
            return text == "True"
        if text in ("nan.0", "inf.0", "-inf.0"):
            return text[:-2]  # pnnx prints a float NaN/infinity so at optlevel 0/1 and dyn: the usual 'nan'
        if "%" in text or not _NUMERIC_START.match(text):
            return text  # a bare string: pnnx writes strings unquoted
        if _INT.match(text):
            value = _int64(text)
            if value is None:
                raise self.token_error(f"integer '{short(text)}' does not fit in 64 bits", tok, offset, len(text))
            return value
        if _FLOAT.match(text):
            return float(text)
        raise self.token_error(f"malformed number '{short(text)}'", tok, offset, len(text))

    def value(self, tok: _Token, offset: int) -> ParamValue:
        text = tok.text[offset:]
        if text == "":
            raise self.error("expected a value after '='", tok.column + offset - 1)
        if text[0] in "([":
            close = ")" if text[0] == "(" else "]"
            inner = text[1:-1]
            if "(" in inner or "[" in inner or ")" in inner or "]" in inner:
                return text  # nested brackets: an expression-like string such as [int(size(@0,0)),-1]
            if "@" in inner:
                return text  # a list of operands, `expr=[None,@0]`: expression text, kept as written
            if text[-1] != close:
                raise self.token_error(f"expected '{close}' to close the list", tok, len(tok.text) - 1, 1)
            if inner == "":
                return []
            items: list[ParamValue] = []
            pos = offset + 1
            for part in inner.split(","):
                if part == "":
                    raise self.error("empty element in list", tok.column + pos)
                items.append(self.scalar(part, tok, pos))
                pos += len(part) + 1
            return items
        return self.scalar(text, tok, offset)

    def param_value(self, key: str, tok: _Token, offset: int) -> ParamValue:
        """The value of `key=…` in `tok` (from tok.text[offset])."""
        if key == "expr" and tok.text[offset : offset + 1] == "[":
            return tok.text[offset:]  # a list-valued expression (`[2,3,4]`, `[None,@0]`): text, as written
        return self.value(tok, offset)

    def shape_dtype(self, tok: _Token, offset: int, allow_unknown: bool) -> tuple[Shape, str]:
        """Parse `(1,3,?,%n)f32` starting at tok.text[offset]."""
        plain = _PLAIN_SHAPE.match(tok.text, offset)
        if plain is not None:  # fast path (the parser's hot spot); anything else, errors: below
            dims_text, dtype = plain.group(1), tok.text[plain.end() :]
            shape = tuple(map(int, dims_text.split(","))) if dims_text else ()
            if dtype in DTYPES and _limits.elements(shape) <= INT64_MAX:
                return shape, dtype
        text = tok.text[offset:]
        if not text.startswith("("):
            raise self.token_error("expected '(' to start a shape like (1,3,224,224)f32", tok, offset, 1)
        close = text.find(")")
        if close < 0:
            raise self.token_error("expected ')' to close the shape", tok, len(tok.text) - 1, 1)
        inner = text[1:close]
        dims: list[int | None | str] = []
        pos = offset + 1
        if inner != "":
            for part in inner.split(","):
                if _INT.match(part) and not part.startswith("-"):
                    dim = _int64(part)
                    if dim is None:
                        raise self.error(
                            f"dimension '{short(part)}' does not fit in 64 bits", tok.column + pos, len(part)
                        )
                    dims.append(dim)
                elif allow_unknown and part == "?":
                    dims.append(None)
                elif allow_unknown and part.startswith("%") and len(part) > 1:
                    dims.append(part[1:])
                else:
                    want = "a non-negative int, '?' or '%name'" if allow_unknown else "a non-negative int"
                    raise self.error(
                        f"bad dimension '{short(part)}': expected {want}", tok.column + pos, max(1, len(part))
                    )
                pos += len(part) + 1
        dtype = text[close + 1 :]
        if dtype not in DTYPES:
            raise self.token_error(
                f"unknown dtype '{short(dtype)}': expected one of {' '.join(DTYPES)}", tok, offset + close + 1
            )
        known = [d for d in dims if isinstance(d, int)]
        if len(known) == len(dims) and _limits.elements(known) > INT64_MAX:
            raise self.token_error("the shape has more elements than fit in 64 bits", tok, offset, close + 1)
        return tuple(dims), dtype


def parse_param(text: str, path: str | None = None, limits: _limits.Limits | None = None) -> Graph:
    """Parse .param text into a Graph (attributes with shapes/dtypes; no weight data).

    Sizes are checked against `limits` (default: `kuiper_core.limits.current()`)."""
    lim = limits or _limits.current()
    _limits.check_text(text, path, lim)
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark some editors write
    lines = text.split("\n")
    graph = Graph(source=path)
    first = lines[0].rstrip("\r") if lines else ""
    lp = _LineParser(path, 1, first)
    if first.strip() != MAGIC:
        tok = _split(first)
        col = tok[0].column if tok else 1
        raise lp.error(f"expected the magic number {MAGIC} on the first line", col, len(tok[0].text) if tok else 1)

    second = lines[1].rstrip("\r") if len(lines) > 1 else ""
    lp = _LineParser(path, 2, second)
    counts = _split(second)
    if len(counts) != 2 or not all(
        _INT.match(t.text) and _int64(t.text) is not None and t.text[0] != "-" for t in counts
    ):
        col = counts[0].column if counts else 1
        raise lp.error("expected '<operator count> <operand count>' (two non-negative ints)", col, max(1, len(second)))
    n_ops, n_operands = int(counts[0].text), int(counts[1].text)
    if n_ops > lim.max_operators:
        raise LimitError(
            f"line 2 declares {n_ops:,} operators",
            limit="max_operators",
            maximum=lim.max_operators,
            value=n_ops,
            path=path,
            line=2,
            column=counts[0].column,
            source_line=second,
            length=len(counts[0].text),
        )

    produced_at: dict[str, int] = {}
    lineno = 2
    with _limits.use(lim):  # the weight-size check in _parse_operator
        for raw in lines[2:]:
            lineno += 1
            line = raw.rstrip("\r")
            if not line.strip():
                continue
            lp = _LineParser(path, lineno, line)
            if len(graph.operators) == n_ops:
                raise lp.error(f"more operators than the {n_ops} declared on line 2", _split(line)[0].column)
            graph.operators.append(_parse_operator(lp, graph, produced_at))

    if len(graph.operators) != n_ops:
        lp = _LineParser(path, 2, second)
        raise lp.error(
            f"line 2 declares {n_ops} operators but the file has {len(graph.operators)}",
            counts[0].column,
            len(counts[0].text),
        )
    if len(graph.operands) != n_operands:
        # pnnx's own loader (ir.cpp Graph::load) reads this count and never uses it, and pnnx
        # writes a count that includes operands it dropped (at optlevel 0, e.g. the unused
        # indices of torch.max): tolerated, with a note. The operator count stays an error.
        graph.notes.append(
            f"line 2 declares {n_operands} operands, the operators use {len(graph.operands)}; "
            "pnnx's own loader ignores this count, and so does Kuiper"
        )
    return graph


def _parse_operator(lp: _LineParser, graph: Graph, produced_at: dict[str, int]) -> Operator:
    toks = _split(lp.text)
    if len(toks) < 4:
        col = toks[-1].column + len(toks[-1].text) if toks else 1
        raise lp.error("expected 'type name n_in n_out' at the start of an operator line", col)
    op_type, name, n_in_tok, n_out_tok = toks[:4]
    for t, what in ((n_in_tok, "input"), (n_out_tok, "output")):
        if not _INT.match(t.text) or t.text[0] == "-" or _int64(t.text) is None:
            raise lp.token_error(f"expected the {what} count (a non-negative int), got '{short(t.text)}'", t)
    n_in, n_out = int(n_in_tok.text), int(n_out_tok.text)
    if op_type.text.startswith(("@", "$", "#")) or "=" in op_type.text:
        raise lp.token_error("expected an operator type", op_type)

    op = Operator(op_type.text, name.text, line=lp.lineno)
    operand_toks = toks[4 : 4 + n_in + n_out]
    # n_in/n_out must match the operand names given before the first key=value.
    names_given = next((i for i, t in enumerate(toks[4:]) if "=" in t.text), len(toks) - 4)
    if names_given != n_in + n_out:
        at = toks[4 + names_given] if 4 + names_given < len(toks) else None
        col = at.column if at else toks[-1].column + len(toks[-1].text)
        raise lp.error(
            f"n_in={n_in} and n_out={n_out} need {n_in + n_out} operand name(s), found {names_given}",
            col if names_given < n_in + n_out else toks[4 + n_in + n_out].column,
        )
    for t in operand_toks[:n_in]:
        operand = graph.operands.get(t.text)
        if operand is None or operand.producer is None:
            raise lp.token_error(f"operand '{short(t.text)}' is used before any operator produces it", t)
        op.inputs.append(operand)
        operand.consumers.append(op)
    for t in operand_toks[n_in:]:
        if t.text in produced_at:
            raise lp.token_error(f"operand '{short(t.text)}' is already produced on line {produced_at[t.text]}", t)
        operand = graph.operands.get(t.text) or Operand(t.text)
        graph.operands[t.text] = operand
        operand.producer = op
        produced_at[t.text] = lp.lineno
        op.outputs.append(operand)
    op.input_names = [""] * n_in

    # Operands by name, once per line: a 1 MB line has ~100,000 of them (a scan per key was quadratic).
    slots_of: dict[str, list[int]] = {}
    for i, o in enumerate(op.inputs):
        slots_of.setdefault(o.name, []).append(i)
    unnamed_of = {name: deque(slots) for name, slots in slots_of.items()}  # input slots with no `$` name yet
    own = {o.name for o in op.outputs} | slots_of.keys()
    seen: dict[str, _Token] = {}
    for t in _join_spaced_values(toks[4 + n_in + n_out :]):
        eq = t.text.find("=")
        if eq <= 0:
            raise lp.token_error("expected key=value", t)
        key = t.text[:eq]
        if key in seen and key[0] != "#":  # pnnx writes `#x=` once per use of x: the same shape, checked below
            what = {"@": "weight", "$": "argument name"}.get(key[0], "parameter")
            raise lp.token_error(
                f"{what} '{short(key)}' is given twice on this line (first at column {seen[key].column}); "
                "pnnx keeps the last, Kuiper refuses to guess",
                t,
                0,
                eq,
            )
        seen[key] = t
        if key[0] == "@":
            declared, dtype = lp.shape_dtype(t, eq + 1, allow_unknown=False)
            weight_shape = known_dims(declared)
            assert weight_shape is not None  # allow_unknown=False: every dim an int
            lim = _limits.current()
            n = _limits.elements(weight_shape)
            if n > lim.max_tensor_elements:
                raise LimitError(
                    f"weight '{key}' has {n:,} elements",
                    limit="max_tensor_elements",
                    maximum=lim.max_tensor_elements,
                    value=n,
                    path=lp.path,
                    line=lp.lineno,
                    column=t.column,
                    source_line=lp.text,
                    length=len(t.text),
                )
            op.attrs[key[1:]] = Attribute(dtype, weight_shape)
        elif key[0] == "$":
            # An operand may feed several arguments (`$input=1 $other=1`): name the first
            # input slot holding it that has no name yet.
            slots = slots_of.get(t.text[eq + 1 :], [])
            unnamed = unnamed_of.get(t.text[eq + 1 :])
            idx = unnamed.popleft() if unnamed else (slots[0] if slots else None)
            if idx is None:
                raise lp.token_error(
                    f"'{key}' names operand '{t.text[eq + 1 :]}', which is not an input of this operator", t, eq + 1
                )
            op.input_names[idx] = key[1:]
        elif key[0] == "#":
            operand_name = key[1:]
            if operand_name not in own:
                raise lp.token_error(f"'#{operand_name}' is not an input or output of this operator", t, 0, eq)
            shape, dtype = lp.shape_dtype(t, eq + 1, allow_unknown=True)
            operand = graph.operands[operand_name]
            if operand.shape is not None and (operand.shape, operand.dtype) != (shape, dtype):
                raise lp.token_error(
                    f"operand '{operand_name}' was declared {format_shape(operand.shape, operand.dtype)} earlier, "
                    f"here {format_shape(shape, dtype)}",
                    t,
                    eq + 1,
                )
            operand.shape, operand.dtype = shape, dtype
        else:
            op.params[key] = lp.param_value(key, t, eq + 1)
    return op


def read_param(path: str | Path, limits: _limits.Limits | None = None) -> Graph:
    lim = limits or _limits.current()
    where = str(path)
    raw = read_regular(
        path,
        lambda why: ParseError(f"cannot read .param file: {why}", path=where),
        max_bytes=lim.max_param_bytes,
        limit="max_param_bytes",
    )
    return parse_param_bytes(raw, where, lim)


def parse_param_bytes(raw: bytes, path: str | None = None, limits: _limits.Limits | None = None) -> Graph:
    """Parse the bytes of a .param file (UTF-8, a byte-order mark allowed)."""
    lim = limits or _limits.current()
    if len(raw) > lim.max_param_bytes:
        raise LimitError(
            f"the .param file is {len(raw):,} bytes",
            limit="max_param_bytes",
            maximum=lim.max_param_bytes,
            value=len(raw),
            path=path,
        )
    return parse_param(decode_utf8(raw, path), path, lim)
