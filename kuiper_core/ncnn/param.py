"""Reader of ncnn's `.ncnn.param` text into layer records (no weights, no Graph yet).

Format (ncnn's Net::load_param, the text form pnnx writes beside its .pnnx.param):

    7767517
    <layer count> <blob count>
    Type name bottom_count top_count bottom… top… id=value…

A parameter id is 0..31 (`0=16`), or an array written as `-23300-id=n,v1,…,vn` (`-23309=1,0`
is array param 9 holding [0]). A value is a float when its text has `.`, `e` or `E` (as
ncnn's vstr_is_float decides), else an int; a value in double quotes is a string (newer
pnnx writes shape expressions such as Reshape's `6="0w,-1"`). Unlike ncnn (which reads garbage as 0), every
problem is a ParseError with file:line:col and a caret under the token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import limits as _limits
from ..errors import ParseError, short
from ..files import decode_utf8, read_regular

MAGIC = "7767517"
ARRAY_BASE = -23300  # `-23300-id` keys an array param
MAX_PARAM_ID = 31  # ncnn's NCNN_MAX_PARAM_COUNT is 32
MAX_ARRAY = 1 << 16  # entries of one array param (ncnn's are a few shapes or axes)

_TOKEN = re.compile(r"[^ \t\n\r\f\v]+")
_INT = re.compile(r"[-+]?\d+\Z")
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z|[-+]?(inf|nan)\Z", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PNNX_OP = re.compile(r"(nn|F|torch|Tensor|pnnx|aten|prim)\.[A-Za-z_][A-Za-z0-9_.]*\Z")

Number = int | float
ParamValue = Number | list[Number] | str


@dataclass
class NcnnLayer:
    """One layer line: its type, name, blobs by name, and params by ncnn id."""

    type: str
    name: str
    bottoms: list[str]
    tops: list[str]
    params: dict[int, ParamValue] = field(default_factory=dict)
    line: int = 0  # 1-based line in the file
    text: str = ""  # the line as written (for messages and the Graph page)


@dataclass
class NcnnParam:
    layers: list[NcnnLayer]
    blob_count: int
    path: str


def is_ncnn_text(lines: list[str]) -> bool:
    """The first lines of a file are ncnn's .param: the magic, two counts, then a layer line
    whose type is a bare name (`Input`, `Convolution`); pnnx's types carry a `.` or `::`
    (`pnnx.Input`, `nn.Conv2d`, `aten::add`), on the same line layout and magic."""
    if len(lines) < 3 or lines[0].strip() != MAGIC:
        return False
    counts = lines[1].split()
    words = lines[2].split()
    return len(counts) == 2 and all(_INT.match(c) for c in counts) and bool(words) and bool(_NAME.match(words[0]))


def _value(text: str) -> Number | None:
    """ncnn's rule: a float when the text has '.', 'e' or 'E' (inf/nan too), else an int."""
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return None


def _param_value(value: str, is_array: bool) -> ParamValue:
    """One param's value: a number, an array `count,v1,…` or a quoted string (ValueError: what
    is wrong with it)."""
    if is_array:
        items = value.split(",")
        count = _value(items[0])
        if not isinstance(count, int) or not 0 <= count <= MAX_ARRAY or count != len(items) - 1:
            raise ValueError(
                f"an array parameter is 'count,v1,…,vcount'; got {short(value)!r} ({len(items) - 1} value(s))"
            )
        values: list[Number] = []
        for item in items[1:]:
            v = _value(item)
            if v is None:
                raise ValueError(f"expected a number in the array, got {short(item)!r}")
            values.append(v)
        return values
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    number = _value(value)
    if number is None:
        raise ValueError(f"expected a number (int or float), got {short(value)!r}")
    return number


def parse_text(text: str, path: str = "<ncnn.param>") -> NcnnParam:
    _limits.check_text(text, path)
    lines = text.split("\n")

    def error(message: str, line: int, column: int = 1, length: int = 1) -> ParseError:
        source = lines[line - 1] if 0 < line <= len(lines) else None
        return ParseError(message, path=path, line=line, column=column, source_line=source, length=length)

    if not lines or lines[0].strip() != MAGIC:
        first = lines[0].strip() if lines else ""
        raise error(f"expected the magic number {MAGIC} on the first line of an ncnn .param, got {short(first)!r}", 1)
    if len(lines) < 2 or len(lines[1].split()) != 2:
        raise error("expected '<layer count> <blob count>' on line 2", 2)
    counts = [(m.group(), m.start() + 1) for m in _TOKEN.finditer(lines[1])]
    for tok, col in counts:
        if not _INT.match(tok) or int(tok) < 0:
            raise error(f"expected a count (a whole number >= 0), got {short(tok)!r}", 2, col, len(tok))
    layer_count, blob_count = int(counts[0][0]), int(counts[1][0])
    _limits.check_count(layer_count, f"{path}: the layer count on line 2", "max_operators")
    _limits.check_count(blob_count, f"{path}: the blob count on line 2", "max_operators")

    layers: list[NcnnLayer] = []
    produced: dict[str, int] = {}
    for number, line in enumerate(lines[2:], start=3):
        toks = [(m.group(), m.start() + 1) for m in _TOKEN.finditer(line)]
        if not toks:
            continue
        if len(layers) == layer_count:
            raise error(f"more layer lines than the {layer_count} that line 2 declares", number, toks[0][1])
        if len(toks) < 4:
            raise error("expected 'Type name bottom_count top_count bottoms… tops… id=value…'", number, toks[0][1])
        (ltype, tcol), (name, _ncol) = toks[0], toks[1]
        if _PNNX_OP.match(ltype):  # pnnx writes the operators it could not convert under their PNNX names
            raise error(
                f"{short(ltype)!r} is a PNNX operator pnnx left unconverted: ncnn cannot load this file either "
                "(run the model's .pnnx.param, or change the model so pnnx converts this operator)",
                number,
                tcol,
                len(ltype),
            )
        if not _NAME.match(ltype):
            raise error(
                f"expected a layer type (a name like Convolution), got {short(ltype)!r}", number, tcol, len(ltype)
            )
        n = []
        for tok, col in toks[2:4]:
            if not _INT.match(tok) or not 0 <= int(tok) <= 1_000_000:
                raise error(f"expected a blob count (a whole number >= 0), got {short(tok)!r}", number, col, len(tok))
            n.append(int(tok))
        n_bottom, n_top = n
        if len(toks) < 4 + n_bottom + n_top:
            raise error(
                f"the line lists {n_bottom} bottom and {n_top} top blob(s) but has only "
                f"{len(toks) - 4} name(s) after the counts",
                number,
                toks[-1][1],
                len(toks[-1][0]),
            )
        blobs = toks[4 : 4 + n_bottom + n_top]
        for tok, col in blobs:
            if "=" in tok:
                raise error(f"expected a blob name, got the parameter {short(tok)!r}", number, col, len(tok))
        bottoms = [t for t, _ in blobs[:n_bottom]]
        tops = [t for t, _ in blobs[n_bottom:]]
        for (tok, col), b in zip(blobs[:n_bottom], bottoms):
            if b not in produced:
                raise error(f"blob {short(b)!r} is used before any layer produces it", number, col, len(tok))
        for (tok, col), t in zip(blobs[n_bottom:], tops):
            if t in produced:
                raise error(f"blob {short(t)!r} is already produced by line {produced[t]}", number, col, len(tok))
            produced[t] = number
        params: dict[int, ParamValue] = {}
        for tok, col in toks[4 + n_bottom + n_top :]:
            key, eq, value = tok.partition("=")
            if not eq or not _INT.match(key):
                raise error(f"expected a parameter 'id=value' (id a number), got {short(tok)!r}", number, col, len(tok))
            pid = int(key)
            is_array = pid <= ARRAY_BASE
            index = ARRAY_BASE - pid if is_array else pid
            if not 0 <= index <= MAX_PARAM_ID:
                raise error(
                    f"parameter id {pid} is out of range: expected 0..{MAX_PARAM_ID}, or -23300..-23331 for an array",
                    number,
                    col,
                    len(key),
                )
            if index in params:
                raise error(f"parameter {index} is given twice", number, col, len(key))
            vcol = col + len(key) + 1
            try:
                params[index] = _param_value(value, is_array)
            except ValueError as e:
                raise error(str(e), number, vcol, len(value)) from None
        layers.append(NcnnLayer(ltype, name, bottoms, tops, params, number, line.strip()))
    if len(layers) != layer_count:
        raise error(f"line 2 declares {layer_count} layer(s), the file has {len(layers)}", 2, counts[0][1])
    if len(produced) > blob_count:
        raise error(
            f"line 2 declares {blob_count} blob(s), the layers produce {len(produced)}",
            2,
            counts[1][1],
            len(counts[1][0]),
        )
    return NcnnParam(layers, blob_count, path)


def read_param(path: str | Path) -> NcnnParam:
    lim = _limits.current()

    def fail(reason: str) -> ParseError:
        return ParseError(f"cannot read the ncnn .param: {reason}", path=str(path))

    raw = read_regular(path, fail, max_bytes=lim.max_param_bytes, limit="max_param_bytes")
    return parse_text(decode_utf8(raw, str(path)), str(path))


def parse_bytes(data: bytes, name: str) -> NcnnParam:
    lim = _limits.current()
    if len(data) > lim.max_param_bytes:
        raise _limits.LimitError(
            f"{name} is {len(data):,} bytes", limit="max_param_bytes", maximum=lim.max_param_bytes, value=len(data)
        )
    return parse_text(decode_utf8(data, name), name)
