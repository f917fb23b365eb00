"""What the layers accept, as located errors.

The layer of each op type is the one truth about which parameters it takes (it checks them
when it is built), so checking a parsed module means building every operator's layer and
turning its `ModelError` into an error at the culprit: the parameter or weight the message
names, else the op type. Weights not loaded yet are stood in for by zeros of their declared
shape and dtype (calloc'd lazily: nothing is touched unless a layer reads it).
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import KuiperError, ModelError, ParseError
from ..graph import Attribute, Operator, numpy_dtype
from .lexer import Span
from .parser import IRModule


STAND_IN_LIMIT = 1 << 30  # bytes of zero weights one operator's check may allocate


class IRError(ParseError):
    """A located error about one operator of a module (keeps `operator`, like ModelError).

    A layer's or the runtime's ModelError located in the text keeps its class too (`located`):
    `except ShapeError` catches a shape refusal from a .kir as it does from a .param."""

    def __init__(
        self, module: IRModule, span: Span, message: str, *, operator: str | None, op_type: str | None
    ) -> None:
        base = module.error(span, message)
        super().__init__(
            base.message,
            path=base.path,
            line=base.line,
            column=base.column,
            source_line=base.source_line,
            length=base.length,
            severity=base.severity,
        )
        self.operator = operator
        self.op_type = op_type


_LOCATED_TYPES: dict[type, type] = {}


def located_type(cls: type[ModelError]) -> type[IRError]:
    """An IRError that is also a `cls` (ShapeError, WeightError, ...), made once per class."""
    if cls not in _LOCATED_TYPES:
        _LOCATED_TYPES[cls] = type(
            f"Located{cls.__name__}", (IRError, cls), {"__init__": IRError.__init__, "__module__": __name__}
        )
    return _LOCATED_TYPES[cls]


def culprit_span(module: IRModule, index: int, message: str) -> Span:
    """The value span of the parameter or weight a layer's message names (quoted, then as a
    word, then a weight by its bare name), else the op type."""
    loc = module.locations[index]
    tries = [(r"'{}'", k, k) for k in loc.attr_spans] + [(r"(?<![\w@]){}(?!\w)", k, k) for k in loc.attr_spans]
    tries += [(r"(?<![\w@]){}(?!\w)", k, k[1:]) for k in loc.attr_spans if k.startswith("@")]
    for group in (tries[: len(loc.attr_spans)], tries[len(loc.attr_spans) :]):
        hits = [
            (m.start(), -len(word), key)
            for pattern, key, word in group
            for m in [re.search(pattern.format(re.escape(word)), message)]
            if m
        ]
        if hits:
            return loc.attr_spans[min(hits)[2]][1]
    return loc.type_span


def locate(module: IRModule, index: int, message: str, like: ModelError | None = None) -> IRError:
    """An error at the culprit of operator `index`; of `like`'s class too, with its details
    (ShapeError's operand and shapes, CycleError's cycle), when given."""
    op = module.graph.operators[index]
    span = culprit_span(module, index, message)
    cls = IRError if like is None else located_type(type(like))
    located = cls(module, span, f"{op.type} @{op.name}: {message}", operator=op.name, op_type=op.type)
    if like is not None:
        for key, value in vars(like).items():
            located.__dict__.setdefault(key, value)
    return located


def locate_model_error(module: IRModule, err: ModelError) -> KuiperError:
    """A ModelError naming an operator of the module, as a located error (others unchanged)."""
    if isinstance(err, IRError):
        return err  # located already
    index = module.op_index(err.operator) if err.operator is not None else None
    if index is None:
        return err
    located = locate(module, index, err.message, like=err)
    located.__cause__ = err
    return located


def check_layers(module: IRModule) -> None:
    """Build every operator's layer; the first refusal becomes a located error."""
    from ..layers.registry import create_layer, is_supported, layer_class
    from ..runtime.binding import bind, bound_operator

    for index, op in enumerate(module.graph.operators):
        if not is_supported(op.type):
            continue  # only with allow_unregistered: nothing to check it against
        if sum(a.nbytes for a in op.attrs.values() if a.data is None) > STAND_IN_LIMIT:
            continue  # checked when the real weights are bound
        # Bound as the runtime binds it: a splitter whose list a prim::ListUnpack splits gets
        # the unpacked outputs (optlevel 0/1 write `torch.tensor_split ... 1 out`).
        binding = bind(_with_stand_in_weights(op), layer_class(op.type))
        if binding.params:
            continue  # parameters given as operands: resolved and checked when the runtime builds
        try:
            create_layer(bound_operator(binding, {}))
        except ModelError as e:
            raise locate(module, index, e.message, like=e) from e
        except KuiperError:
            raise
        except Exception as e:  # a layer that does not check what it reads: still located
            raise locate(module, index, f"the layer cannot take these attributes: {type(e).__name__}: {e}") from e


def _with_stand_in_weights(op: Operator) -> Operator:
    """A copy of `op` whose missing weight data are zeros (the module's op stays untouched)."""
    attrs = {
        k: a if a.data is not None else Attribute(a.dtype, a.shape, np.zeros(a.shape, numpy_dtype(a.dtype)))
        for k, a in op.attrs.items()
    }
    return Operator(op.type, op.name, op.inputs, op.outputs, dict(op.params), attrs, list(op.input_names), op.line)
