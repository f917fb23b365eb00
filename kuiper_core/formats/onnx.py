"""ONNX: a protobuf ModelProto, converted to PNNX by the `pnnx` converter (convert.py).

Detected by its first protobuf fields: `ir_version` (field 1, a varint) first, then only
fields a ModelProto has, with their wire types (as Netron's onnx.js reads the tags)."""

from __future__ import annotations

from .base import Context, OpenedModel
from .converted import open_converted

NAME = "onnx"
SUFFIXES = (".onnx",)

# ModelProto's fields: number -> wire type (0 varint, 2 length-delimited).
_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}


def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None


def looks_like_onnx(head: bytes) -> bool:
    """True when `head` (a file's start) reads as an ONNX ModelProto's first fields."""
    pos, seen = 0, list[int]()
    while pos < len(head):
        tag = _varint(head, pos)
        if tag is None:
            break
        key, pos = tag
        number, wire = key >> 3, key & 7
        if _FIELDS.get(number) != wire:
            return False
        value = _varint(head, pos)
        if value is None:
            break
        n, pos = value
        if not seen and (number != 1 or not 1 <= n <= 100):  # ir_version first, a small number
            return False
        seen.append(number)
        if wire == 2:
            pos += n  # past the head: the walk stops there
    return len(seen) >= 2  # ir_version alone is no model


def match(context: Context) -> bool:
    return looks_like_onnx(context.head)


def open(context: Context) -> OpenedModel:
    return open_converted(context, NAME)
