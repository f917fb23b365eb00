"""What every executor does around one operator: call its layer, store its results, and turn
a layer's failure into the error that names the operator."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, NoReturn

import numpy as np

from .. import limits as _limits
from ..errors import KuiperError, LimitError, ModelError
from ..layers.registry import Layer
from .runtime_operator import RuntimeOperator, Value


def raise_for_operator(e: Exception, name: str, op_type: str) -> NoReturn:
    """Re-raise an exception from a layer as the error that names its operator."""
    if isinstance(e, LimitError):
        raise e.at_operator(name, op_type) from None
    if isinstance(e, KuiperError):
        raise e
    if isinstance(e, MemoryError):  # a size no check caught: still an error, not a crash
        raise _limits.out_of_memory(e, name, op_type) from None
    # A layer bug or an input the layer cannot take.
    raise ModelError(f"failed while running: {type(e).__name__}: {e}", operator=name, op_type=op_type) from e


def call_layer(
    operator: RuntimeOperator,
    layer: Layer,
    args: list[Value],
    out: list[np.ndarray | None],
    limits: _limits.Limits,
    reference: bool = False,
) -> list[Value]:
    """layer.forward(args, out) (`reference`: its plain definition, layer.reference), its errors
    naming the operator; one result per output, none over the element limit (a broadcast view
    costs no memory, but everything after it would)."""
    try:
        results = (layer.reference if reference else layer.forward)(args, out)
    except Exception as e:
        raise_for_operator(e, operator.name, operator.type)
    if len(results) != len(out):
        raise ModelError(
            f"layer returned {len(results)} output(s), the graph declares {len(out)}",
            operator=operator.name,
            op_type=operator.type,
        )
    for r in results:
        if isinstance(r, np.ndarray) and r.size > limits.max_tensor_elements:
            try:
                _limits.check_elements(r.shape, "the output", limits)
            except LimitError as e:
                raise e.at_operator(operator.name, operator.type) from None
    return results


def store(operator: RuntimeOperator, results: list[Value], values: MutableMapping[str, Value]) -> None:
    """Results into `values`: one operand each, or one tuple for a packed operator (binding.py)."""
    outs = operator.op.outputs
    if operator.binding.packed:
        values[outs[0].name] = tuple(results)
    else:
        for o, v in zip(outs, results):
            values[o.name] = v


def arrays_of(value: Any) -> list[np.ndarray] | None:
    """The arrays of an operand value (one, or a tuple's), None for anything else."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)) and all(isinstance(v, np.ndarray) for v in value):
        return list(value)
    return None


def is_view(a: np.ndarray, of: list[np.ndarray]) -> bool:
    """`a` shares memory with one of `of`."""
    return any(np.may_share_memory(a, b) for b in of)


def returns_views(args: list[Value], results: list[Value]) -> bool:
    """Some result array shares memory with an argument array (a view of an input)."""
    arg_arrays = [a for v in args for a in (arrays_of(v) or [])]
    return any(isinstance(r, np.ndarray) and is_view(r, arg_arrays) for r in results)


def signature(inputs: list[np.ndarray]) -> tuple:
    """The input shapes and dtypes: what the executors' fixed buffers and kernels are made for."""
    return tuple((a.shape, a.dtype.str) for a in inputs)
