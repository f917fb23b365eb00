"""Every operand of a PNNX model as PyTorch computes it: run pnnx's generated NAME_pnnx.py.

pnnx writes, beside NAME.pnnx.param/.bin, a torch module of the same graph whose forward()
assigns each operand N to a local `v_N`. Each `return` is rewritten to also return
`locals()`, so one run gives every operand (keyed "N", as in the .param). Needs torch.
Used by tools/pnnx_export.py (the committed samples' operands.npz) and the references of a
converted model.

The script is written by pnnx from names and values inside the model file, which may be an
upload to a shared server: it is not run as it is. Only its `Model` class is kept, the
weight loader is ours (read from the .bin's zip, no temp files), and the class must pass a
check before it runs: no imports, no dunder attributes, no names such as eval/open/getattr/
os, no `torch.` reach beyond computing functions (no torch.load/save/hub/jit/…; of torch.ops
only aten's operators, as pnnx writes an operator it has no Python for), builtins
limited to a few pure ones. What fails the check raises UnsafeCode and is not run.
"""

from __future__ import annotations

import ast
import builtins
import sys
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .code_check import BUILTINS, UnsafeCode, check, dotted

__all__ = ["UnsafeCode", "capture_operands", "load_model", "flatten"]


_LOADERS = {"load_pnnx_bin_as_parameter", "load_pnnx_bin_as_tensor"}
_SAFE_BUILTINS = {name: getattr(builtins, name) for name in BUILTINS}
_SAFE_BUILTINS["__build_class__"] = builtins.__build_class__


def _loaded_only_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """torch's C code imports through its caller's builtins (torch.clamp(x, min=0.0, max=6.0)
    imports `torch`, as pnnx writes ReLU6 from ONNX's Clip): a module already loaded is given,
    nothing new is imported. The script itself cannot name __import__ (_check)."""
    module = sys.modules.get(name) if level == 0 else None
    if module is None or not all(hasattr(module, f) for f in fromlist or ()):
        raise ImportError(f"pnnx's generated code may not import {name}")
    return builtins.__import__(name, globals, locals, fromlist, level)


_SAFE_BUILTINS["__import__"] = _loaded_only_import
_SAFE_BUILTINS["locals"] = locals  # the rewritten returns call it
_DTYPES = {"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64"}
_DTYPES |= {"complex128", "bfloat16"}


def _returns_locals(tree: ast.Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and sub.value is not None:
                    call = ast.Call(func=ast.Name("locals", ast.Load()), args=[], keywords=[])
                    sub.value = ast.Tuple(elts=[sub.value, call], ctx=ast.Load())


def _model_class(tree: ast.Module) -> ast.ClassDef:
    """The script's `Model` class, its weight loaders dropped and its `zipfile.ZipFile(...)`
    replaced by a call of ours; everything else in the script (imports, export_* helpers,
    the __main__ block) is left out."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise UnsafeCode("no Model class")
    model.body = [n for n in model.body if not (isinstance(n, ast.FunctionDef) and n.name in _LOADERS)]
    for node in ast.walk(model):
        if isinstance(node, ast.Call) and dotted(node.func) == ["zipfile", "ZipFile"]:
            node.func = ast.Name("pnnx_weights", ast.Load())
            node.args, node.keywords = [], []
    return model


def _number(node: ast.expr) -> bool:
    """A number written in the code: 1.5, -inf, nan."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return isinstance(node, ast.Name) and node.id in ("inf", "nan")


def _map_calls(model: ast.ClassDef) -> None:
    """Calls pnnx writes that torch does not take, mapped to ones it does: `torch.max(-inf, v)`
    (ONNX's Max of a constant and a tensor: magika) is `torch.clamp(v, min=-inf)`, `torch.min`
    likewise with max=."""
    for node in ast.walk(model):
        if not isinstance(node, ast.Call) or node.keywords or len(node.args) != 2:
            continue
        name = dotted(node.func)
        if name not in (["torch", "max"], ["torch", "min"]):
            continue
        number, other = (node.args[0], node.args[1]) if _number(node.args[0]) else (node.args[1], node.args[0])
        if not _number(number) or _number(other):
            continue
        bound = "min" if name[1] == "max" else "max"
        node.func = ast.Attribute(ast.Name("torch", ast.Load()), "clamp", ast.Load())
        node.args, node.keywords = [other], [ast.keyword(bound, number)]
        ast.copy_location(node.func, node)
        ast.fix_missing_locations(node)


def _weights_loader(bin_path: Path) -> dict[str, Any]:
    """The names the checked class runs with: our loader of the .bin's zip entries."""
    import torch

    def tensor(self: Any, archive: zipfile.ZipFile, key: str, shape: Any, dtype: str, requires_grad: bool = False):
        if dtype not in _DTYPES:
            raise UnsafeCode(f"weight {key!r}: dtype {dtype!r}")
        shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
        raw = archive.read(key)
        if dtype == "bfloat16":  # no NumPy dtype: the bits, widened by torch
            bits = torch.from_numpy(np.frombuffer(raw, "<i2").copy()).view(torch.bfloat16)
            return bits.reshape(shape).float()
        return torch.from_numpy(np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).reshape(shape).copy())

    def parameter(self: Any, archive: zipfile.ZipFile, key: str, shape: Any, dtype: str, requires_grad: bool = True):
        return torch.nn.Parameter(tensor(self, archive, key, shape, dtype), requires_grad)

    return {
        "pnnx_weights": lambda: zipfile.ZipFile(bin_path, "r"),
        "load_pnnx_bin_as_tensor": tensor,
        "load_pnnx_bin_as_parameter": parameter,
    }


def load_model(pnnx_py: str | Path, bin_path: str | Path | None = None) -> Any:
    """pnnx's `Model` from NAME_pnnx.py, checked and built with its weights from `bin_path`
    (default: the NAME.pnnx.bin beside it), forward() returning (outputs, locals)."""
    import torch

    pnnx_py = Path(pnnx_py)
    source = pnnx_py.read_text()
    tree = ast.parse(source)
    model = _model_class(tree)
    _map_calls(model)
    check(model)
    _returns_locals(tree)
    if bin_path is None:
        bin_path = pnnx_py.with_name(pnnx_py.name.removesuffix("_pnnx.py") + ".pnnx.bin")
    loader = _weights_loader(Path(bin_path))
    module = ast.Module(body=[model], type_ignores=[])
    ast.fix_missing_locations(module)
    from .code_check import CONSTANTS
    from .onnx_in_torch import OPS

    namespace: dict[str, Any] = {
        **CONSTANTS,
        **OPS,
        "__builtins__": _SAFE_BUILTINS,
        "__name__": "pnnx_model",
        "torch": torch,
        "nn": torch.nn,
        "F": torch.nn.functional,
        "pnnx_weights": loader["pnnx_weights"],
    }
    if "torchvision." in source:  # torchvision.ops (deform_conv2d, roi_align); nothing else passes _check
        import torchvision  # only when pnnx's code calls torchvision.ops

        namespace["torchvision"] = torchvision
    exec(compile(module, str(pnnx_py), "exec"), namespace)
    cls = namespace["Model"]
    cls.load_pnnx_bin_as_tensor = loader["load_pnnx_bin_as_tensor"]
    cls.load_pnnx_bin_as_parameter = loader["load_pnnx_bin_as_parameter"]
    return cls().float().eval()


def capture_operands(
    pnnx_py: str | Path,
    inputs: Sequence[Any],
    bin_path: str | Path | None = None,
    *,
    isolated: bool = True,
    timeout: float | None = None,
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Run pnnx's NAME_pnnx.py on `inputs` (arrays or tensors): (every operand `v_N` as
    {"N": array}, the outputs). `bin_path`: its weights (default: NAME.pnnx.bin beside it).
    The working directory is left alone (the app runs sessions in threads).

    isolated (the default): in a child process under a memory limit (the current limits'
    max_planned_bytes, plus 2 GiB for torch) and a time limit (`timeout`, default
    KUIPER_REFERENCE_TIMEOUT or 300 s): the checked code still runs torch's operators on
    arguments a file chose, which may take any time, any memory, or crash the process."""
    if isolated:
        from .isolated import run_pnnx_py

        model = _model_class(ast.parse(Path(pnnx_py).read_text()))
        _map_calls(model)
        check(model)  # refused here, without starting a process

        return run_pnnx_py(Path(pnnx_py), [np.asarray(x) for x in inputs], bin_path, timeout)
    import torch

    model = load_model(pnnx_py, bin_path)
    tensors = [x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x)) for x in inputs]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. F.upsample's deprecation, about pnnx's code, not the user's
        result, local_vars = model(*tensors)
    refs = {
        key[2:]: value.detach().cpu().numpy()
        for key, value in local_vars.items()
        if key.startswith("v_") and isinstance(value, torch.Tensor)
    }
    return refs, [y.detach().cpu().numpy() for y in flatten(result) if isinstance(y, torch.Tensor)]


def flatten(value: Any) -> list[Any]:
    """Nested tuples and lists of outputs, flattened in order (as forward() flattens them)."""
    if isinstance(value, (tuple, list)):
        return [v for item in value for v in flatten(item)]
    return [value]
