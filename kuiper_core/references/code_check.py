"""The check pnnx's generated `Model` class must pass before it runs (references/pnnx_py.py).

An allowlist, since a denylist of names cannot close Python: `torch.os.system(…)`,
`nn.modules.module.torch.load`, a generator's `gi_frame.f_back.f_globals` and
`torch.ops.load_library` all passed the first check, which refused names it knew. What passes:

- statements and expressions of straight-line code (what pnnx writes): no loops, comprehensions,
  lambdas, generators, try/with, nested functions or classes, decorators, imports; no `**` or
  `<<` (Python ints grow without bound: `2 ** 2 ** 40` hangs);
- a module is only ever the root of a dotted call target: `torch.X`, `nn.X`, `F.X`,
  `torch.linalg|fft|special.X`, `torch.ops.aten|torchvision.X`, `torchvision.ops.X`, each
  resolved here, the last part a computing function, an nn.Module class or a constant
  (aten's file operators, `torch.load`-like functions and every JIT/storage/global-state
  class or setter are not); a module is never a value (`m = torch.nn` fails);
- other attributes (of tensors, submodules, values): never private (`_x`, dunders; only
  `super(…).__init__`, and `self._x` that nn.Module does not have), never a frame, code,
  traceback or generator field, nor one of the few that reach files (`numpy`, `tofile`,
  `storage`, …) or read attributes by string (`format`).
"""

from __future__ import annotations

import ast
import types
from typing import Any


class UnsafeCode(Exception):
    """pnnx's generated code does something a model's forward has no need to."""


_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.If, ast.Pass)
_EXPRESSIONS = (
    ast.Call, ast.keyword, ast.Attribute, ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp,
    ast.Compare, ast.IfExp, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Dict, ast.Starred,
    ast.Load, ast.Store, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip
_OPERATORS_REFUSED = (ast.Pow, ast.LShift)
# Pure builtins of bounded work (no range/sum/sorted: `sum(range(10**18))` never ends).
BUILTINS = "abs bool dict float int isinstance len list max min round slice tuple super".split()
# The other names the class runs with (pnnx_py.load_model): pnnx writes `inf` for float('inf') and
# an ONNX node it did not convert as a call of the op's name (onnx_in_torch.py gives those).
CONSTANTS = {"inf": float("inf"), "nan": float("nan")}
ONNX_OPS = {"Gather", "Expand", "Where", "ReduceMax", "ReduceMin", "Clip"}
GIVEN = {"Model", "pnnx_weights", *BUILTINS, *CONSTANTS, *ONNX_OPS}
ROOTS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "torchvision": "torchvision"}
# Namespaces a dotted name may go through, and which objects may end it.
_NAMESPACES = {
    "torch": "torch",
    "torch.nn": "nn",
    "torch.nn.functional": "functional",
    "torch.linalg": "builtin",
    "torch.fft": "builtin",
    "torch.special": "builtin",
    "torch.ops": "none",
    "torch.ops.aten": "op",
    "torch.ops.torchvision": "op",
    "torchvision": "none",
    "torchvision.ops": "torchvision",
}
_DENIED_OPS = ("file", "save", "load", "print", "set_", "seed", "thread", "storage", "share", "pickle")
# Attributes of values that reach files, pickles, frames or read attributes by name.
_DENIED_ATTRS = {
    "numpy", "tofile", "dump", "dumps", "storage", "untyped_storage", "share_memory", "share_memory_",
    "from_file", "save", "load", "load_state_dict", "format", "format_map", "mro", "with_traceback",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook", "register_hook",
    "register_backward_hook", "register_module", "add_module", "apply", "set_", "f_locals",
}  # fmt: skip
_DENIED_PREFIXES = ("f_", "tb_", "gi_", "cr_", "ag_", "co_", "func_", "im_")
_ATEN_DUNDERS = {f"__{op}__" for op in ("and", "or", "xor", "lshift", "rshift", "iand", "ior", "ixor")}


def dotted(node: ast.expr) -> list[str] | None:
    """["torch", "ops", "aten", "relu"] for that chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _resolve(parts: list[str], line: int) -> None:
    """UnsafeCode unless `torch.….name` goes through allowed namespaces to an allowed object."""
    import importlib

    where = f"line {line}: {'.'.join(parts)}"
    path = ROOTS[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        kind = _NAMESPACES.get(path)
        if kind is None:
            raise UnsafeCode(f"{where}: {path} is not a namespace code may use")
        candidate = f"{path}.{part}"
        if candidate in _NAMESPACES:
            path = candidate
            continue
        if i != len(parts) - 1:
            raise UnsafeCode(f"{where}: only a function of {path} may be used, not one of its attributes")
        try:
            space = importlib.import_module(path) if not path.startswith("torch.ops") else _ops(path)
            obj = getattr(space, part)
        except Exception as e:  # noqa: BLE001  -- an unknown name: refused, not run
            raise UnsafeCode(f"{where}: not found ({type(e).__name__})") from None
        if not _allowed(kind, part, obj):
            raise UnsafeCode(f"{where}: not a computing function")
        return
    raise UnsafeCode(f"{where}: a namespace used as a value")


def _ops(path: str) -> Any:
    import torch

    space: Any = torch.ops
    for part in path.split(".")[2:]:
        space = getattr(space, part)
    return space


def _allowed(kind: str, name: str, obj: Any) -> bool:
    import torch

    if isinstance(obj, types.ModuleType) or kind == "none":
        return False
    if kind == "op":
        ok_name = not name.startswith("__") or name in _ATEN_DUNDERS
        return ok_name and isinstance(obj, torch._ops.OpOverloadPacket) and not any(d in name for d in _DENIED_OPS)
    if name.startswith("_") or any(d in name for d in _DENIED_OPS):
        return False
    if isinstance(obj, (torch.dtype, torch.memory_format, torch.layout, float, int, bool)):
        return True
    builtin = type(obj).__name__ == "builtin_function_or_method"
    if kind == "torch":
        vf = name in dir(torch._C._VariableFunctions)
        return (builtin and vf) or getattr(obj, "__module__", "") == "torch.functional" or obj in (torch.Size,)
    if kind == "nn":
        return isinstance(obj, type) and issubclass(obj, (torch.nn.Module, torch.nn.Parameter))
    if kind == "functional":
        return builtin or (isinstance(obj, types.FunctionType) and obj.__module__ == "torch.nn.functional")
    if kind == "builtin":
        return builtin
    if kind == "torchvision":
        module = getattr(obj, "__module__", "") or ""
        is_layer = isinstance(obj, type) and issubclass(obj, torch.nn.Module)
        return module.startswith("torchvision.ops") and (isinstance(obj, types.FunctionType) or is_layer)
    return False


def _super_init(node: ast.Attribute) -> bool:
    """`super(Model, self).__init__` (or `super().__init__`), the one dunder the class uses."""
    call = node.value
    return (
        node.attr == "__init__"
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "super"
        and all(isinstance(a, ast.Name) for a in call.args)
    )


def _module_attributes() -> set[str]:
    import torch

    return set(dir(torch.nn.Module())) | set(vars(torch.nn.Module()))


def _check_attribute(node: ast.Attribute, module_attrs: set[str]) -> None:
    name = node.attr
    line = node.lineno
    if name in _DENIED_ATTRS or name.startswith(_DENIED_PREFIXES):
        raise UnsafeCode(f"line {line}: the attribute {name!r}")
    if name.startswith("_") and not _super_init(node):
        on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        if not on_self or name in module_attrs or name.startswith("__"):
            raise UnsafeCode(f"line {line}: the attribute {name!r}")


def _check_function(fn: ast.FunctionDef) -> None:
    if fn.decorator_list or fn.returns is not None:
        raise UnsafeCode(f"line {fn.lineno}: a decorated or annotated method")
    if fn.name.startswith("_") and fn.name != "__init__":
        raise UnsafeCode(f"line {fn.lineno}: the method {fn.name!r}")
    args = fn.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
    for a in every:
        if a.arg in ROOTS or a.arg.startswith("_") or a.annotation is not None:
            raise UnsafeCode(f"line {fn.lineno}: the argument {a.arg!r}")
    if args.defaults or args.kw_defaults and any(d is not None for d in args.kw_defaults):
        raise UnsafeCode(f"line {fn.lineno}: default argument values")


def check(model: ast.ClassDef) -> None:
    """UnsafeCode unless the class only computes (see the module docstring)."""
    if model.decorator_list or model.keywords or [dotted(b) for b in model.bases] != [["nn", "Module"]]:
        raise UnsafeCode(f"line {model.lineno}: the class must be `class Model(nn.Module)`")
    module_attrs = _module_attributes()
    roots: set[int] = set()  # the Name nodes that start a checked dotted name
    known = GIVEN | {n.id for n in ast.walk(model) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    known |= {a.arg for a in ast.walk(model) if isinstance(a, ast.arg)}
    for item in model.body:
        if not isinstance(item, ast.FunctionDef):
            raise UnsafeCode(f"line {item.lineno}: {type(item).__name__} in the class body")
        _check_function(item)
        for node in ast.walk(item):
            if node is item or isinstance(node, (ast.arguments, ast.arg)):
                continue
            if isinstance(node, ast.Attribute) and id(node.value) not in roots:
                parts = dotted(node)
                if parts is not None and parts[0] in ROOTS:
                    _resolve(parts, node.lineno)
                    inner: ast.expr = node
                    while isinstance(inner, ast.Attribute):  # the chain's inner links are checked with it
                        roots.add(id(inner.value))
                        inner = inner.value
                    continue
            if not isinstance(node, (*_STATEMENTS, *_EXPRESSIONS)):
                raise UnsafeCode(f"line {getattr(node, 'lineno', '?')}: {type(node).__name__}")
            if isinstance(node, _OPERATORS_REFUSED):
                raise UnsafeCode("the operator ** or << (unbounded Python integers)")
            if isinstance(node, ast.Attribute) and id(node) not in roots:
                _check_attribute(node, module_attrs)
            if isinstance(node, ast.Name) and id(node) not in roots:
                if node.id in ROOTS or node.id.startswith("__"):
                    raise UnsafeCode(f"line {node.lineno}: the name {node.id!r} as a value")
                if isinstance(node.ctx, ast.Store) and node.id in GIVEN | {"self"}:
                    raise UnsafeCode(f"line {node.lineno}: assigning to {node.id!r}")
                if node.id not in known:
                    raise UnsafeCode(f"line {node.lineno}: the unknown name {node.id!r}")
