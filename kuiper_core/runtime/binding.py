"""How an operator's inputs reach its layer: the runtime's side of the layer contract.

pnnx gives an operator its arguments in three ways:
- params on the line: `dim=1` (mostly at optlevel 2);
- operands named `$key=operand`: a tensor (`$input=x`, `$weight=w`), or a non-tensor
  value — an int, float, bool, None or list made by `prim::Constant`, `pnnx.Expression
  expr=1`, `prim::ListConstruct`, `Tensor.size`, `aten::Int`… (optlevel 0/1, and shapes
  computed at run time in any export);
- positional operands of TorchScript ops (`aten::add self other alpha`), which a layer
  class names with `arg_names`.
A layer class may name value operands it takes as inputs (`value_inputs`): Tensor.index's
`$expr`, a list holding index tensors (`[None, @0]`), which is no parameter.

A *value* operand is one without a `#` annotation (pnnx annotates every tensor), unless a
pnnx.Attribute or pnnx.Input makes it. A value in a named slot is a parameter: the layer
gets it in `params`, never as an input, whether the runtime knew it at build (folded) or
computed it at run time — except the operator's main operand (`$input`, `$self`): a number
there is a 0-d tensor in TorchScript (`torch.tensor(2.0).to(…)`), so it stays an input. A list of tensors (`prim::ListConstruct` of annotated operands,
e.g. torch.cat's `$tensors`) is spliced: its elements become the layer's inputs in place,
which is how optlevel 2 writes torch.cat.

A TorchScript op that returns several tensors writes one list/tuple operand that a
`prim::ListUnpack`/`prim::TupleUnpack` splits (`torch.chunk … 1 out` then
`prim::ListUnpack out a b`). Its layer is made with the unpacked outputs (their count and
shapes, as optlevel 2 writes it) and the runtime packs its results into the one operand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import Operand, Operator, ParamValue
from ..layers.registry import TENSOR_ARGS, BoundOperator, Layer

UNPACKERS = ("prim::ListUnpack", "prim::TupleUnpack")
_TENSOR_SOURCES = ("pnnx.Attribute", "pnnx.Input")


def is_value(operand: Operand) -> bool:
    """A non-tensor value (int, float, bool, None, list): no `#` annotation, not a weight."""
    return operand.shape is None and (operand.producer is None or operand.producer.type not in _TENSOR_SOURCES)


def _tensor_list(operand: Operand) -> list[Operand] | None:
    """The elements of a list of tensors made by prim::ListConstruct, else None."""
    p = operand.producer
    if p is None or p.type != "prim::ListConstruct" or not p.inputs:
        return None
    return list(p.inputs) if not any(is_value(o) for o in p.inputs) else None


@dataclass(eq=False)
class Binding:
    """Where a layer's inputs, params and outputs come from, for one operator."""

    op: Operator
    inputs: list[Operand]  # the layer's inputs (tensors), spliced lists flattened
    input_names: list[str]  # their `$key` names ('' where none)
    params: dict[str, Operand]  # param key -> value operand
    outputs: list[Operand]  # the layer's outputs
    packed: bool  # the layer's outputs are packed into op.outputs[0] (a tuple)

    @property
    def reads(self) -> list[Operand]:
        """Every operand the operator needs (inputs, then param operands)."""
        return self.inputs + list(self.params.values())


def bind(op: Operator, cls: type[Layer] | None) -> Binding:
    arg_names = cls.arg_names if cls is not None else None
    inputs: list[Operand] = []
    names: list[str] = []
    params: dict[str, Operand] = {}
    for i, operand in enumerate(op.inputs):
        name = op.input_name(i) or (arg_names[i] if arg_names is not None and i < len(arg_names) else "")
        if name and name not in TENSOR_ARGS and is_value(operand) and (cls is None or name not in cls.value_inputs):
            elements = _tensor_list(operand)
            if elements is not None:
                inputs += elements
                names += [""] * len(elements)
                continue
            if name in params or name in op.params:
                continue  # the first operand of a name wins; a line param beats an operand
            params[name] = operand
        else:
            inputs.append(operand)
            names.append(op.input_name(i))
    if cls is not None:
        for name, operand in cls.extra_inputs(op).items():
            inputs.append(operand)
            names.append(name)
    outputs, packed = list(op.outputs), False
    if not op.type.startswith("prim::") and len(op.outputs) == 1 and is_value(op.outputs[0]):
        consumers = op.outputs[0].consumers
        if len(consumers) == 1 and consumers[0].type in UNPACKERS and len(consumers[0].inputs) == 1:
            outputs, packed = list(consumers[0].outputs), True
    return Binding(op, inputs, names, params, outputs, packed)


def bound_operator(b: Binding, params: dict[str, ParamValue], computed: frozenset[str] = frozenset()) -> BoundOperator:
    """The operator a layer is made from: resolved params, tensor inputs, layer outputs."""
    op = b.op
    return BoundOperator(
        op.type,
        op.name,
        inputs=list(b.inputs),
        outputs=list(b.outputs),
        params={**op.params, **params},
        attrs=op.attrs,
        input_names=list(b.input_names),
        line=op.line,
        source=op,
        computed=computed,
    )


def to_param(value: Any) -> ParamValue:
    """A runtime value as a .param value: 0-d arrays and NumPy scalars -> Python numbers,
    1-d arrays and sequences -> lists (one-element arrays in them -> numbers). Raises ValueError for a tensor (ndim > 1)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value.item()
        if value.ndim == 1:
            return [v.item() for v in value]
        raise ValueError(f"a tensor of shape {value.shape} where a parameter value is expected")
    if isinstance(value, (list, tuple)):
        # a one-element tensor in a list is its number, as torch reads it (`x.reshape(n, -1)`
        # with n = size.unsqueeze(0), ONNX's Shape -> Gather -> Unsqueeze -> Concat)
        items = [v.item() if isinstance(v, np.ndarray) and v.size == 1 else to_param(v) for v in value]
        if any(isinstance(v, list) for v in items):
            raise ValueError(f"a nested list {value!r} where a parameter value is expected")
        return items
    raise ValueError(f"a {type(value).__name__} where a parameter value is expected")


def freeze(value: ParamValue) -> Any:
    """A hashable form of a param value (lists -> tuples), for caching layers by value."""
    return tuple(value) if isinstance(value, list) else value
