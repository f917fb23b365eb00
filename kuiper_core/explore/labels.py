"""Which parameters a node label shows, read off the layers themselves (no list per type).

A layer reads its parameters in `__init__` through `Layer.param`, `int_param`,
`ints_param` or a helper whose name says so (`float_param`, `axes_param`, `_pair`…), with
the key as a string literal and often a default. `param_schema` reads those calls from the
source of the layer class (and its bases) once per class: the keys the layer reads, in
order, with the default it declares. A label then shows the operator's parameters that its
layer reads and that differ from their default, in the order the layer reads them
(`torch.roll` shows `shifts` and `dims`, a convolution its padding, stride, kernel and
channels). Parameters the scan cannot see (a key in a variable, a type without a layer) are
shown after those. What does not fit is counted, never dropped silently.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from pathlib import Path
from typing import Any

from ..graph import Operator
from ..layers.registry import Layer, layer_class
from .summary import param_text

UNKNOWN = object()  # a read without a literal default: the value always counts
MAX_LABEL_PARAMS = 5
MAX_PARAM_CHARS = 36


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _is_reader(name: str) -> bool:
    return "param" in name or name.endswith("_pair")


@cache
def _module_tree(module: str) -> ast.Module | None:
    """A module's syntax tree, parsed once (inspect.getsource re-parses the module per class)."""
    try:
        path = inspect.getsourcefile(sys.modules[module])
        return ast.parse(Path(path).read_text()) if path else None
    except (KeyError, OSError, TypeError, SyntaxError):
        return None


def _class_node(cls: type) -> ast.ClassDef | None:
    tree = _module_tree(cls.__module__)
    if tree is None:
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__), None)


@cache
def _class_schema(cls: type) -> tuple[tuple[str, Any], ...]:
    trees = [t for c in cls.__mro__ if c not in (Layer, object) and (t := _class_node(c)) is not None]
    # Helpers defined in the classes: their own `default=` (e.g. `_pair(self, key, default=1)`).
    helper_default: dict[str, Any] = {}
    for tree in trees:
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and _is_reader(fn.name):
                args = fn.args.args[len(fn.args.args) - len(fn.args.defaults) :]
                for a, d in zip(args, fn.args.defaults):
                    if a.arg == "default":
                        helper_default[fn.name] = _literal(d)
    keys: dict[str, Any] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not _is_reader(_callee(node)):
                continue
            found = next(
                (
                    (i, a.value)
                    for i, a in enumerate(node.args)
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ),
                None,
            )
            if found is None or not found[1].isidentifier():
                continue
            (at, key), name = found, _callee(node)
            default = helper_default.get(name, UNKNOWN)
            rest = node.args[at + 1 :]
            if rest and name != "ints_param":  # ints_param(key, n, default): the 2nd is a count
                default = _literal(rest[0])
            elif name == "ints_param" and len(rest) >= 2:
                default = _literal(rest[1])
            for kw in node.keywords:
                if kw.arg == "default":
                    default = _literal(kw.value)
            keys.setdefault(key, default)
    return tuple(keys.items())


def param_schema(op_type: str) -> dict[str, Any] | None:
    """The parameters the layer of `op_type` reads, with their declared defaults (UNKNOWN when
    none); None when no layer is registered for the type."""
    # plain `type`: mypy reads type[Layer] as not Hashable (for @cache), Layer's __hash__ being per instance
    cls: type | None = layer_class(op_type)
    return None if cls is None else dict(_class_schema(cls))


def _same(value: Any, default: Any) -> bool:
    if default is UNKNOWN:
        return False
    if isinstance(value, (list, tuple)) and not isinstance(default, (list, tuple)):
        return len(value) > 0 and all(v == default and type(v) is type(default) for v in value)
    return value == default and type(value) is type(default)


def label_params(op: Operator) -> list[tuple[str, Any]]:
    """The (key, value) pairs a label shows for `op`: those its layer reads, in the order the
    layer reads them, unless equal to the layer's default; then the ones the scan did not see
    (a key the layer reads through a variable), in file order. None is not set. A True flag naming a weight the
    operator has (`bias=True` beside `@bias`) says nothing the weight does not."""
    schema = param_schema(op.type) or {}
    rank = {k: i for i, k in enumerate(schema)}
    items = [
        (k, v)
        for k, v in op.params.items()
        if v is not None and not (k in schema and _same(v, schema[k])) and not (v is True and k in op.attrs)
    ]
    return sorted(items, key=lambda kv: rank.get(kv[0], len(rank)))  # stable: the rest keep file order


def _short(text: str, limit: int = MAX_PARAM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def param_lines(op: Operator, limit: int = MAX_LABEL_PARAMS) -> list[str]:
    """`key=value` lines for a node label; what does not fit is counted on a last line."""
    items = label_params(op)
    lines = [_short(f"{k}={param_text(v)}") for k, v in items[:limit]]
    if len(items) > limit:
        lines[-1] = f"+{len(items) - limit + 1} more params"
    return lines
