"""Every operand of a PNNX model as PyTorch computes it: run pnnx's generated NAME_pnnx.py.

pnnx writes, beside NAME.pnnx.param/.bin, a torch module of the same graph whose forward()
assigns each operand N to a local `v_N`. Each `return` is rewritten to also return
`locals()`, so one run gives every operand (keyed "N", as in the .param). Needs torch.
Used by tools/pnnx_export.py (the committed samples' operands.npz) and the references of a
converted TorchScript model.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# The script's header imports these in a bare try/except; unused, they only cost time (and
# torchvision's compiled extension may not load on this torch: tools/torchvision_cpu.py).
_OPTIONAL = {"torchvision", "torchaudio"}


def _returns_locals(tree: ast.Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and sub.value is not None:
                    call = ast.Call(func=ast.Name("locals", ast.Load()), args=[], keywords=[])
                    sub.value = ast.Tuple(elts=[sub.value, call], ctx=ast.Load())


def _drop_optional_imports(tree: ast.Module, source: str) -> None:
    if any(f"{name}." in source for name in _OPTIONAL):
        return  # the graph uses one of them (e.g. torchvision.ops.deform_conv2d)

    def optional(stmt: ast.stmt) -> bool:
        return isinstance(stmt, ast.Import) and all(a.name.split(".")[0] in _OPTIONAL for a in stmt.names)

    tree.body = [s for s in tree.body if not (isinstance(s, ast.Try) and s.body and all(optional(b) for b in s.body))]


def capture_operands(
    pnnx_py: str | Path, inputs: Sequence[Any], bin_path: str | Path | None = None
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Run pnnx's NAME_pnnx.py on `inputs` (arrays or tensors): (every operand `v_N` as
    {"N": array}, the outputs). `bin_path`: the weights it loads (default: the .bin it names,
    beside the script). The working directory is left alone (the app runs sessions in threads)."""
    import torch

    pnnx_py = Path(pnnx_py)
    source = pnnx_py.read_text()
    tree = ast.parse(source)
    _returns_locals(tree)
    _drop_optional_imports(tree, source)
    # The script opens its .bin by a relative name: make it this one, absolute.
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "ZipFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            named = Path(node.args[0].value)
            node.args[0] = ast.Constant(str(Path(bin_path) if bin_path is not None else pnnx_py.parent / named))
    ast.fix_missing_locations(tree)
    namespace: dict[str, Any] = {"__name__": f"_pnnx_ref_{abs(hash(str(pnnx_py)))}"}
    exec(compile(tree, str(pnnx_py), "exec"), namespace)
    model = namespace["Model"]()
    model.float().eval()
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
