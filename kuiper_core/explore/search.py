"""Finding operators in a graph by what a reader knows of them (the Graph page's search).

- a word: a substring of the operator's name or type (`conv`, `blocks.3`, `relu`);
- a shape: `64x56x56`, `1x?x7x7` (a part of an input, output or weight shape, `?` unknown);
- a parameter: `stride=2`, `kernel_size=3,3`, `groups=32` (key exact, value as written in
  .param, parentheses optional); `weight=64x3x7x7` names a weight and its shape.
"""

from __future__ import annotations

import re

from ..graph import Graph, Operator, shape_label

_SHAPE = re.compile(r"^[\d?]+(x[\d?]+)+$")
MAX_QUERY = 200  # characters of a search (a text box's content: untrusted)


def _value_text(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_value_text(v) for v in value)
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def _shapes(op: Operator) -> list[str]:
    out = [shape_label(o.shape) for o in (*op.inputs, *op.outputs)]
    return out + [shape_label(a.shape) for a in op.attrs.values()]


def _part_of(shape: str, wanted: str) -> bool:
    """`wanted` as whole consecutive dimensions of `shape` (`64x56` is in `1x64x56x56`, `4x5` not in `14x56`)."""
    return f"x{wanted}x" in f"x{shape}x"


def matches(graph: Graph, text: str) -> list[str]:
    """Names of the operators `text` finds, in graph order (see the module's docstring)."""
    needle = text.strip()[:MAX_QUERY]
    if not needle:
        return []
    if "=" in needle:
        key, _, value = (p.strip() for p in needle.partition("="))
        value = value.strip("()[] ").replace(" ", "")
        found = []
        for op in graph.operators:
            if key in op.params and (not value or _value_text(op.params[key]).replace(" ", "") == value):
                found.append(op.name)
            elif key in op.attrs and (not value or _part_of(shape_label(op.attrs[key].shape), value)):
                found.append(op.name)
        return found
    low = needle.lower()
    if _SHAPE.match(low):
        return [op.name for op in graph.operators if any(_part_of(s, low) for s in _shapes(op))]
    return [op.name for op in graph.operators if low in op.name.lower() or low in op.type.lower()]
