"""Graph plumbing: inputs, outputs, constants and tuples."""

from __future__ import annotations

import numpy as np

from .registry import Layer, register


@register("pnnx.Input")
class Input(Layer):
    """Passes the caller's array through by reference (the runtime feeds it as input 0)."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [inputs[0]]


@register("pnnx.Output")
class Output(Layer):
    """A sink: the runtime reads the graph outputs from its input operands."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return []


@register("pnnx.Attribute")
class Attribute(Layer):
    """A constant tensor (`@data`) such as a position embedding or a folded constant."""

    returns_views = True  # returns its weight array itself

    def __init__(self, op) -> None:
        super().__init__(op)
        if len(op.attrs) != 1:
            raise self.error(f"expected exactly one weight (@data), got {len(op.attrs)}")
        self.data = self.weight(next(iter(op.attrs)))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self.data]


@register("prim::TupleConstruct")
class TupleConstruct(Layer):
    """Packs its inputs into one tuple value (pnnx's form for multi-output models)."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[tuple[np.ndarray, ...]]:  # type: ignore[override]  # values may be tuples too
        return [tuple(inputs)]


@register("prim::TupleUnpack", "prim::ListUnpack")
class TupleUnpack(Layer):
    """Splits a tuple or list value (e.g. a pool's (values, indices), torch.chunk's pieces
    at optlevel 0) into its elements."""

    returns_views = True

    def forward(self, inputs: list, out: list[np.ndarray | None]) -> list[np.ndarray]:
        value = inputs[0]
        if not isinstance(value, (tuple, list)):
            raise self.error(f"expected a tuple input, got {type(value).__name__}")
        if len(value) != len(self.op.outputs):
            raise self.error(f"the tuple has {len(value)} element(s), the graph unpacks {len(self.op.outputs)}")
        return list(value)
