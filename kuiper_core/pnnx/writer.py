"""Writer of a Graph back to `.param` + `.bin` in pnnx's own layout (Graph::save),
so that pnnx's tools and Netron read it and load -> save -> load gives the same graph.

`.param` has no quoting and no escapes (pnnx's reader, ir.cpp Graph::load, splits a line at
whitespace and a token at its first '='; Parameter::parse_from_string reads a value that
starts with a digit as a number). So a name or a string that would not read back as itself
(a space or a newline would inject tokens or whole operator lines, `=` would split a key,
`(String)"1"` would come back as the integer 1) is refused with a ModelError naming the
operator and the field, never written. Every value is checked by reading its text back with
the reader's own code.
"""

from __future__ import annotations

import math
import unicodedata
import zipfile
from pathlib import Path
from typing import IO

import numpy as np

from ..errors import ModelError, short
from ..graph import DTYPES, Graph, Operator, ParamValue, file_dtype, float32_to_bf16, format_shape, numpy_dtype
from .param import MAGIC, _LineParser, _Token, string_value_starts

_WHITESPACE = frozenset(" \t\n\r\f\v")  # what pnnx's istream splits tokens at
_NON_FINITE = frozenset({"nan", "inf", "-inf"})


def encode_value(value: ParamValue) -> str:
    """A param value as .param text (floats in shortest round-trip form)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        # pnnx reads a number as float only if it has '.' or 'e'.
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(encode_value(v) for v in value) + ")"
    raise TypeError(f"cannot encode parameter value {value!r}")


def shown(text: str) -> str:
    """A name as a message can print it: control characters and lone surrogates escaped."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") else ch
        for ch in short(text, 60)
    )


def _token_problem(text: str) -> str | None:
    """Why `text` cannot be one whitespace-free .param token (None if it can)."""
    if text == "":
        return "it is empty"
    for i, ch in enumerate(text):
        if ch in _WHITESPACE:
            return f"it holds whitespace ({ch!r} at character {i + 1}), which would split it"
        kind = unicodedata.category(ch)
        if kind in ("Cc", "Cs", "Zl", "Zp"):
            what = "a lone surrogate" if kind == "Cs" else "a control character"
            return f"it holds {what} ({ch.encode('unicode_escape').decode('ascii')} at character {i + 1})"
    return None


def _value_problem(text: str, is_string: bool) -> str | None:
    """Why `text` cannot be a parameter's value. A string may hold single spaces between
    words, as pnnx writes einsum equations (param.py joins such words back): starting with a
    letter, no space at its ends or two in a row, and no '=' after the first word."""
    if not is_string or " " not in text:
        return _token_problem(text)
    words = text.split(" ")
    if not string_value_starts(words[0]):
        return "it holds spaces and its first word is not a string's (a letter first, not True/False/None)"
    if "" in words:
        return "it holds spaces at its ends or two in a row, which the reader would not give back"
    for w in words:
        if (why := _token_problem(w)) is not None:
            return why
    if any("=" in w for w in words[1:]):
        return "a word after a space holds '=', which the reader takes for key=value"
    return None


def _refuse(op: Operator, field: str, text: str, why: str) -> ModelError:
    return ModelError(
        f"cannot be written as .param: {field} '{shown(text)}': {why}; .param has no quoting or escapes "
        "(rename it, or save as .kir)",
        operator=shown(op.name),
        op_type=shown(op.type),
    )


def _check_name(op: Operator, field: str, text: str, *, key: bool = False) -> None:
    why = _token_problem(text)
    if why is None and "=" in text:
        why = "it holds '=', which the reader takes for key=value"
    if why is None and key and text[0] in "@$#":
        why = f"it starts with '{text[0]}', which marks a weight, an argument or a shape"
    if why is not None:
        raise _refuse(op, field, text, why)


def _same(a: object, b: object) -> bool:
    """Equal and of the same type (1 is not True, not 1.0, not "1"; NaN equals NaN). A float
    NaN or infinity reads back as the string 'nan'/'inf': pnnx writes them so too, and every
    layer reads that string as the float."""
    if isinstance(a, float) and not math.isfinite(a) and isinstance(b, str):
        return b == encode_value(a)
    if isinstance(a, str) and a in _NON_FINITE and isinstance(b, float):
        return encode_value(b) == a  # the reader's own spelling of pnnx's `nan.0`: the float, as layers read it
    if type(a) is not type(b):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and _same(list(a), list(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):  # b: a's type
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def _checked_param(op: Operator, key: str, value: ParamValue) -> str:
    """`key=value` as a token that the reader reads back as exactly `value`."""
    _check_name(op, "parameter name", key, key=True)
    try:
        text = encode_value(value)
    except TypeError:
        raise _refuse(op, f"parameter '{key}'", repr(value), "no .param value has this type") from None
    why = _value_problem(text, isinstance(value, str))
    if why is None:
        token = f"{key}={text}"
        try:
            back = _LineParser(None, 0, token).param_value(key, _Token(token, 1), len(key) + 1)
        except Exception as e:  # noqa: BLE001  -- any reader error: it does not read back
            why = f"it does not read back ({e})"
        else:
            if key == "expr" and isinstance(value, str) and isinstance(back, (int, float)):
                # an expression that is a number reads back as the number, the expression's value: pnnx's own text
                if not isinstance(back, bool) and _same(float(back), float(value)):
                    back = value
            if not _same(value, back):
                why = f"it would read back as {type(back).__name__} {short(repr(back), 60)}"
    if why is not None:
        raise _refuse(op, f"parameter '{key}' = {type(value).__name__}", text, why)
    return f"{key}={text}"


def _checked_shape(op: Operator, name: str, shape: tuple, dtype: str | None, weight: bool) -> str:
    if dtype not in DTYPES:
        raise _refuse(op, f"the dtype of '{name}'", str(dtype), f"expected one of {' '.join(DTYPES)}")
    for d in shape:
        if isinstance(d, str):
            _check_name(op, f"the symbolic dim of '{name}'", d)
            if any(c in d for c in ",()%?"):
                raise _refuse(op, f"the symbolic dim of '{name}'", d, "it holds one of , ( ) % ?")
        elif d is not None and not (isinstance(d, int) and not isinstance(d, bool) and d >= 0):
            raise _refuse(op, f"the shape of '{name}'", repr(shape), "a dim is not a non-negative int")
        elif d is None and weight:
            raise _refuse(op, f"the shape of weight '{name}'", repr(shape), "a weight's dims must be known")
    return format_shape(shape, dtype)


def format_operator(op: Operator) -> str:
    """One operator line, every name and value checked to read back as itself."""
    _check_name(op, "operator type", op.type, key=True)
    _check_name(op, "operator name", op.name)
    for o in op.inputs + op.outputs:
        _check_name(op, "operand name", o.name)
    parts = [f"{op.type:<24} {op.name:<24} {len(op.inputs)} {len(op.outputs)}"]
    parts += [o.name for o in op.inputs] + [o.name for o in op.outputs]
    parts += [_checked_param(op, k, v) for k, v in sorted(op.params.items())]
    for k, a in sorted(op.attrs.items()):
        _check_name(op, "weight name", k)
        parts.append(f"@{k}={_checked_shape(op, '@' + k, tuple(a.shape), a.dtype, True)}")
    names = [n for n in op.input_names if n]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise _refuse(op, "argument name", twice, "two inputs have this name; the reader would keep one")
    for n, o in zip(op.input_names, op.inputs):
        if n:
            _check_name(op, "argument name", n)
            parts.append(f"${n}={o.name}")
    parts += [
        f"#{o.name}={_checked_shape(op, o.name, tuple(o.shape), o.dtype, False)}"
        for o in op.inputs + op.outputs
        if o.shape is not None
    ]
    return " ".join(parts)


def format_param(graph: Graph) -> str:
    lines = [MAGIC, f"{len(graph.operators)} {len(graph.operands)}"]
    lines += [format_operator(op) for op in graph.operators]
    return "\n".join(lines) + "\n"


def save(graph: Graph, param_path: str | Path, bin_path: str | Path | None = None) -> list[Path]:
    """Write `.param` and its `.bin` (default: the sibling pnnx writes) safely (see
    kuiper_core/output_files.py): both complete, or neither touched."""
    from ..output_files import check_targets, write_files

    param_path = Path(param_path)
    bin_path = Path(bin_path) if bin_path is not None else default_bin_path(param_path)
    text = format_param(graph).encode("utf-8")  # checked before any file is opened
    param_path, bin_path = check_targets([("the .param", param_path), ("the .bin", bin_path)])
    return write_files([(param_path, lambda f: f.write(text)), (bin_path, lambda f: write_bin(graph, f))])


def write_bin(graph: Graph, fp: IO[bytes]) -> None:
    """The weights as pnnx's store-only zip, into an open binary file."""
    with zipfile.ZipFile(fp, "w", compression=zipfile.ZIP_STORED) as zf:
        for op in graph.operators:
            for key, attr in sorted(op.attrs.items()):
                data = attr.data if attr.data is not None else np.zeros(attr.shape, numpy_dtype(attr.dtype))
                raw = (
                    float32_to_bf16(data)
                    if attr.dtype == "bf16"
                    else np.ascontiguousarray(data, file_dtype(attr.dtype))
                )
                zf.writestr(f"{op.name}.{key}", raw.tobytes())


def save_bin(graph: Graph, bin_path: str | Path | IO[bytes]) -> None:
    """The weights alone (for a graph saved as text elsewhere): to a path (safely), or an open file."""
    if isinstance(bin_path, (str, Path)):
        from ..output_files import check_targets, write_files

        write_files([(check_targets([("the .bin", bin_path)])[0], lambda f: write_bin(graph, f))])
    else:
        write_bin(graph, bin_path)


def default_bin_path(param_path: str | Path) -> Path:
    """`m.pnnx.param` -> `m.pnnx.bin` (the sibling pnnx writes)."""
    p = Path(param_path)
    return p.with_suffix(".bin") if p.suffix == ".param" else p.with_name(p.name + ".bin")
