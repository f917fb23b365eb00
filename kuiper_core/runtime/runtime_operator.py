"""RuntimeOperator: one operator of a Program, as build() made it (seed 004's RuntimeOperator).

It holds the file's operator, where it stands (its place in the execution order, its
successors), how its inputs reach its layer (binding.py) and the layer. An operator whose
parameters are computed at run time (a reshape's `$shape` from `Tensor.size` arithmetic) has
no layer at build: `layer_for` makes one per distinct value set, on first sight, and caches
it. That cache is the only part of a Program that changes after build.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError
from ..graph import Operator, ParamValue
from ..layers.registry import Layer, create_layer
from .binding import Binding, bound_operator, freeze, to_param

# Layers kept per operator for parameter values computed at run time (one per distinct
# value set); beyond this many the cache starts again.
MAX_LAYERS_PER_OPERATOR = 64

Value = Any  # an operand's value: np.ndarray, a tuple of them (prim::TupleConstruct), or a number or list


class ComputedLayers:
    """The layers of one operator whose parameters are computed at run time, by value set."""

    def __init__(self) -> None:
        self.by_values: dict[tuple, Layer] = {}
        self.last: Layer | None = None  # the one used last (the app's profile names its kernel)
        self.lock = threading.Lock()


@dataclass(frozen=True, eq=False)
class RuntimeOperator:
    """See the module docstring. `index`: position in Program.order; `step`: position in
    Program.run_order (-1 for an operator folded at build: its outputs are constants)."""

    op: Operator
    key: str  # unique among the graph's operators (the name, unless pnnx repeated it)
    index: int
    step: int
    successors: tuple[str, ...]  # keys of the operators that read an output of this one
    binding: Binding
    params: Mapping[str, ParamValue]  # parameters given as operands whose values build knew
    computed: Mapping[str, str]  # parameter key -> the operand computed at run time that gives it
    built_layer: Layer | None  # None where parameters are computed at run time
    computed_layers: ComputedLayers = field(default_factory=ComputedLayers)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def type(self) -> str:
        return self.op.type

    @property
    def folded(self) -> bool:
        """Computed at build from constants: forward() skips it, steps() shows its value."""
        return self.step < 0

    @property
    def layer(self) -> Layer | None:
        """The layer made at build, else the one its computed parameters made last (None before)."""
        return self.built_layer if self.built_layer is not None else self.computed_layers.last

    def layer_for(self, values: Mapping[str, Value]) -> tuple[Layer, bool]:
        """The layer for this run (computed parameters read from `values`); True if it was
        made now (its outputs have not been checked at these parameters)."""
        if self.built_layer is not None:
            return self.built_layer, False
        try:
            computed = {k: to_param(values[n]) for k, n in self.computed.items()}
        except ValueError as e:
            raise ModelError(f"parameter operand: {e}", operator=self.name, op_type=self.type) from None
        key = tuple((k, freeze(v)) for k, v in computed.items())
        cache = self.computed_layers
        with cache.lock:
            layer = cache.by_values.get(key)
            made = layer is None
            if layer is None:
                if len(cache.by_values) >= MAX_LAYERS_PER_OPERATOR:
                    cache.by_values.clear()
                layer = cache.by_values[key] = make_layer(self.binding, self.params, computed)
            cache.last = layer
        return layer, made


def make_layer(
    binding: Binding, params: Mapping[str, ParamValue], computed: dict[str, ParamValue] | None = None
) -> Layer:
    """The operator's layer, its operand parameters resolved to `params` (+ `computed`)."""
    resolved = {**params, **computed} if computed else dict(params)
    return create_layer(bound_operator(binding, resolved, frozenset(computed or ())))
