"""ONNX operators pnnx leaves in its generated Python as bare calls, given as torch functions.

pnnx writes an ONNX node it does not convert as a call of the ONNX op's name
(`v_2 = Gather(v_0, v_1, axis=1)`), which pnnx's own code cannot run (convnext_small, a
TransformerDecoder). These are the ONNX semantics in torch, for references only (the engine runs
its own layers): inputs as the ONNX spec orders them, attributes as keywords. The names are
given to the checked code (code_check.GIVEN) like its few builtins; nothing else is reachable
through them.
"""

from __future__ import annotations

from typing import Any


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def Gather(data: Any, indices: Any, axis: int = 0) -> Any:  # noqa: N802  (the ONNX op's name)
    """data's slices along `axis` at `indices` (negative counts from the end), of shape
    data.shape[:axis] + indices.shape + data.shape[axis+1:]."""
    import torch

    axis = _axis(int(axis), data.dim())
    idx = torch.as_tensor(indices, dtype=torch.int64)
    idx = torch.where(idx < 0, idx + data.shape[axis], idx)
    picked = torch.index_select(data, axis, idx.reshape(-1))
    return picked.reshape(tuple(data.shape[:axis]) + tuple(idx.shape) + tuple(data.shape[axis + 1 :]))


def Expand(x: Any, shape: Any) -> Any:  # noqa: N802
    """x broadcast to `shape` (ONNX's bidirectional broadcast: a 1 in `shape` keeps x's size)."""
    import torch

    dims = [int(d) for d in torch.as_tensor(shape).reshape(-1).tolist()]
    return x * torch.ones(dims, dtype=x.dtype)


def Where(condition: Any, x: Any, y: Any) -> Any:  # noqa: N802
    import torch

    return torch.where(torch.as_tensor(condition, dtype=torch.bool), x, y)


def _reduce(kind: str, x: Any, axes: Any = None, keepdims: int = 1) -> Any:
    import torch

    if axes is None:
        dims = list(range(x.dim()))
    else:
        dims = [_axis(int(a), x.dim()) for a in torch.as_tensor(axes).reshape(-1).tolist()]
    out = (
        torch.amax(x, dim=dims, keepdim=bool(keepdims))
        if kind == "max"
        else torch.amin(x, dim=dims, keepdim=bool(keepdims))
    )
    return out


def ReduceMax(x: Any, axes: Any = None, keepdims: int = 1) -> Any:  # noqa: N802
    return _reduce("max", x, axes, keepdims)


def ReduceMin(x: Any, axes: Any = None, keepdims: int = 1) -> Any:  # noqa: N802
    return _reduce("min", x, axes, keepdims)


def Clip(x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: N802, A002  (ONNX's input names)
    import torch

    lo = None if min is None else torch.as_tensor(min, dtype=x.dtype)
    hi = None if max is None else torch.as_tensor(max, dtype=x.dtype)
    return torch.clamp(x, lo, hi)


OPS = {f.__name__: f for f in (Gather, Expand, Where, ReduceMax, ReduceMin, Clip)}
