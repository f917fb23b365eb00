"""The layer registry: PNNX type string -> Layer class.

A layer registers itself where it is defined:

    @register("nn.ReLU", "F.relu")
    class ReLU(Layer):
        def forward(self, inputs, out):
            return [np.maximum(inputs[0], 0, out=out[0])]

Contract:
- `__init__(op)` runs once at build. Read params and weights there, validate them
  (raise `self.error("...")` naming what was expected), and precompute everything
  (weight layouts, index tables) so that `forward` does only arithmetic.
- Parameters may arrive as operands (`$dim=7`, where operand 7 is `pnnx.Expression expr=1`
  or `prim::Constant value=1`; optlevel 0/1 and dynamic-shape exports do this). The layer
  never sees those operands: the runtime resolves each into `op.params[key]` before the
  layer is made, so a layer reads `self.param("dim")` whatever the form (see
  kuiper_core/runtime/binding.py). Values that depend only on constants are resolved once
  at build; values computed from shapes at run time (`Tensor.size` -> `aten::mul` -> a
  reshape's `$shape`) make the runtime create the layer for each distinct value set
  (cached); `self.computed_params` names those keys, so a layer knows a value already
  follows the actual input (e.g. no batch rule on a computed reshape shape). Positional
  inputs that are parameters (TorchScript's `aten::add(self, other, alpha)`) are named by
  the class attribute `arg_names`. A layer that needs an operand the line does not list
  (Tensor.copy: the tensor its `$self` view was cut from) names it in `extra_inputs(op)`;
  the runtime appends it to the inputs.
- `forward(inputs, out)` gets the input arrays (batch is dim 0 of real N-D arrays) and
  `out`, a list with one entry per output: a preallocated array of the declared shape
  and dtype to write into, or None (shape unknown, or the inputs differ from the declared
  shapes, e.g. another batch size). It returns one array per output. Returning a view of
  an input is allowed for shape ops; set `returns_views = True` on such layers so the
  memory planner keeps the viewed buffer alive.
- Never mutate an input array: it is the producer's output, shared by reference.
- Given inputs of the same shapes, dtypes and strides, forward takes the same path (writes
  into `out`, or returns a view), whatever the values: the runtime's prepared forward
  (runtime/prepared.py) relies on it. A layer whose output shape follows the input's
  values (one_hot without num_classes, a bool mask's selection) says so in
  `shape_follows_values(op)`: the runtime then never prepares or plans the graph, and
  checks the dims of those outputs, and of everything computed from them, loosely.

Optional, for speed (runtime/prepared.py):
- `prepare(inputs, out)` returns a function f(inputs, out) that does what forward does for
  arrays of exactly these shapes, dtypes and strides (contents and memory may differ from
  call to call), writing into `out`: the layer makes its kernel (buffers, views, weight
  layout) for these shapes once, and f skips every check and lookup. The prepared forward
  binds f to its buffers; steps() calls it on fresh outputs. f owns its kernel's buffers:
  the runtime never runs one f twice at the same time.
- `overwritable_inputs()` lists the inputs an elementwise layer's output may overwrite:
  when such an input has the output's shape and dtype and dies at this operator, the
  runtime gives the output the input's buffer (`out[0] is inputs[k]`).
- `prepare_with_relu(inputs, out)`: as prepare, for f that also applies ReLU to the
  output. When a ReLU is the only reader of this layer's output and runs in place on it,
  the prepared forward calls that f and drops the ReLU's call (convolutions: the ReLU is
  applied while the output is in cache, or in Winograd's scatter for nothing).
- `splittable = True`: prepare and prepare_with_relu take a third argument, a split request
  (layers/halves.SplitRequest, or None): with one, the layer may return a call made of two
  halves handed to the request (the split executor runs the second on another core).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload
from collections.abc import Callable, Iterable

import numpy as np

from .. import limits as _limits
from ..errors import KuiperError, LimitError, ModelError, UnsupportedOperatorError
from ..graph import Operand, Operator, ParamValue

_REGISTRY: dict[str, type[Layer]] = {}

L = TypeVar("L", bound=type["Layer"])
Prepared = Callable[[list[Any], list[np.ndarray]], object]  # f(inputs, out), see Layer.prepare

_MISSING = object()
# The `$key` names of an operator's main operand: a tensor input even when a number arrives
# there (TorchScript's 0-d tensors; ONNX's Shape -> Gather sizes, which pnnx writes as
# `size(@0,0)` expressions, runtime/binding.py).
TENSOR_ARGS = ("input", "self")


def read_as_tensor(operand: Operand) -> bool:
    """Some operator reads `operand` as its main tensor operand (TENSOR_ARGS)."""
    return any(
        consumer.input_name(i) in TENSOR_ARGS
        for consumer in operand.consumers
        for i, o in enumerate(consumer.inputs)
        if o is operand
    )


@dataclass(eq=False)
class BoundOperator(Operator):
    """What the runtime makes a layer from: the file's operator (`source`) with every
    parameter operand resolved into `params` and only the tensors left as inputs.
    `computed` names the params whose values were computed at run time."""

    source: Operator | None = None
    computed: frozenset[str] = frozenset()


def _non_finite(value: Any) -> Any:
    """pnnx writes an infinity or NaN as the bare strings `inf`, `-inf`, `nan`: those as floats."""
    if isinstance(value, str) and value.lower() in ("inf", "-inf", "+inf", "nan", "-nan"):
        return float(value)
    return value


class Layer:
    """Base class of all layers; see the module docstring for the contract."""

    returns_views: bool = False  # outputs may alias inputs (reshape, permute, slice…)
    splittable: bool = False  # prepare() takes a split request (see the module docstring)
    # A ReLU that the call writing its input may apply instead (that layer's prepare_with_relu):
    # the prepared forward fuses it there.
    fuses_into_writer: bool = False
    # Its output is its inputs laid one after another along its `dim` (torch.cat): the step
    # arena may let their producers write there instead of copying.
    concatenates: bool = False
    # Names of positional inputs that may be parameters (TorchScript-style aten:: ops);
    # None: only `$key` inputs are.
    arg_names: tuple[str, ...] | None = None
    # Names of `$key` value operands the layer takes as inputs (the Python object, e.g. a
    # list holding index tensors) instead of as params.
    value_inputs: tuple[str, ...] = ()

    @classmethod
    def extra_inputs(cls, op: Operator) -> dict[str, Operand]:
        """Operands this layer also reads, by input name (see the contract); none by default."""
        return {}

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        """True if an output's shape may depend on the input values, not only on their shapes
        (see the contract). `op` is bound, with the params known at build (a param computed
        at run time is absent); the file's annotations were made by pnnx from its own dummy
        data there, so they say nothing about such an output's size."""
        return False

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.name = op.name
        self.type = op.type
        # Params whose values the runtime computed from this run's shapes (see the contract).
        self.computed_params: frozenset[str] = op.computed if isinstance(op, BoundOperator) else frozenset()

    # -- helpers for subclasses ---------------------------------------------------
    def error(self, message: str) -> ModelError:
        """An error naming this operator; `raise self.error(...)`."""
        return ModelError(message, operator=self.op.name, op_type=self.op.type)

    def param(self, key: str, default: Any = _MISSING) -> ParamValue:
        """A param; missing without a default is an error naming the key."""
        if key in self.op.params:
            return self.op.params[key]
        if default is _MISSING:
            raise self.error(f"missing parameter '{key}'")
        return default

    @property
    def size_limit(self) -> int:
        """The largest size any one dim can have (max_tensor_elements): the bound for
        size-like params (strides, pads, sizes) so arithmetic on them stays in int64."""
        return _limits.current().max_tensor_elements

    def check_size(self, shape: Any, what: str = "the output") -> int:
        """Raise LimitError (before allocating) if a tensor of `shape` is over max_tensor_elements."""
        return _limits.check_elements(shape, what)

    def check_work(self, n: int, what: str) -> int:
        """Raise LimitError (before the work) if one call would take more than max_operator_work
        multiply-adds: products and windows of broadcast views cost no memory but any CPU."""
        return _limits.check_work(n, what)

    def _bounded(self, key: str, values: tuple[int, ...], low: int | None, high: int | None) -> None:
        for v in values:
            if (low is not None and v < low) or (high is not None and v > high):
                lo = "" if low is None else f"{low:,}"
                hi = "" if high is None else f"{high:,}"
                want = f"between {lo} and {hi}" if lo and hi else (f">= {lo}" if lo else f"<= {hi}")
                raise self.error(f"parameter '{key}' must be {want}, got {v:,}")

    def int_param(self, key: str, default: Any = _MISSING, *, low: int | None = None, high: int | None = None) -> int:
        value = self.param(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"parameter '{key}' must be an int, got {value!r}")
        self._bounded(key, (value,), low, high)
        return value

    def ints_param(
        self,
        key: str,
        n: int | None = None,
        default: Any = _MISSING,
        *,
        low: int | None = None,
        high: int | None = None,
    ) -> tuple[int, ...]:
        """An int or tuple of ints, broadcast to n entries when n is given (each within
        [low, high] when given)."""
        value = self.param(key, default)
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value] * (n or 1)
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self.error(f"parameter '{key}' must be int(s), got {value!r}")
        if n is not None and len(value) == 1 and n > 1:
            value = list(value) * n
        if n is not None and len(value) != n:
            raise self.error(f"parameter '{key}' must have {n} entries, got {tuple(value)}")
        self._bounded(key, tuple(value), low, high)
        return tuple(value)

    def float_param(self, key: str, default: Any = _MISSING) -> float:
        """A number param as a float (pnnx may write a whole number as an int: `max_val=6`, and
        an infinity as the string `inf`: ONNX `Clip` with a max of +inf, openwakeword's mel)."""
        value = _non_finite(self.param(key, default))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._not_a_number(key, value)
        return float(value)

    def number_param(self, key: str) -> float | int | bool:
        """A number param; pnnx writes infinities and NaN as the strings `inf`, `-inf`, `nan`."""
        value = _non_finite(self.param(key))
        if isinstance(value, (bool, int, float)):
            return value
        raise self._not_a_number(key, value)

    def _not_a_number(self, key: str, value: Any) -> ModelError:
        lost = ""
        if value is None:  # pnnx writes `key=None` for a constant it could not read from the trace
            lost = (
                ": pnnx wrote None, having lost this constant (e.g. a bool written into a tensor, "
                "`mask[:, -3:] = True`); the model's ONNX export, converted, may keep it"
            )
        return self.error(f"parameter '{key}' must be a number, got {value!r}{lost}")

    @overload
    def weight(self, key: str, *, required: Literal[True] = ...) -> np.ndarray: ...
    @overload
    def weight(self, key: str, *, required: bool) -> np.ndarray | None: ...
    def weight(self, key: str, *, required: bool = True) -> np.ndarray | None:
        """A weight as a float32 (or its own dtype) array; missing -> error or None."""
        attr = self.op.attrs.get(key)
        data = None if attr is None else attr.data  # once: a lazily read weight is read on each ask
        if data is None:
            if required:
                raise self.error(f"missing weight '@{key}'")
            return None
        return data

    def shaped_weight(self, key: str, shape: tuple[int, ...], context: str) -> np.ndarray:
        """Weight `key` as float32, which must have `shape`; `context` names the params that
        decide it (the error shows them)."""
        w = self.weight(key)
        if tuple(w.shape) != shape:
            raise self.error(f"weight '{key}' has shape {tuple(w.shape)}, expected {shape} for {context}")
        return np.asarray(w, dtype=np.float32)

    def bias_weight(self) -> np.ndarray | None:
        """`@bias` as the `bias` flag says: required with bias=True, optional without a flag.
        pnnx never writes bias=False beside a `@bias` weight; a file that does contradicts
        itself, and guessing which is meant would give one of two answers silently."""
        flag = self.param("bias", None)
        bias = self.weight("bias", required=bool(flag))
        if bias is not None and flag is not None and not flag:
            raise self.error("bias=False but the file has a '@bias' weight: expected bias=True with it, or neither")
        return bias

    # -- the contract ----------------------------------------------------------------
    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        raise NotImplementedError

    def prepare(self, inputs: list[Any], out: list[np.ndarray]) -> Prepared | None:
        """f(inputs, out) doing forward for arrays shaped like these, or None (see above)."""
        return None

    def reference(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[Any]:
        """The layer's plain definition, the oracle its fast kernels are tested against (ncnn's
        relu.cpp beside x86/relu_x86.cpp): the interpreter's reference mode
        (`executor="reference"`) calls it. Its forward, for a layer with no fast kernel of
        its own; a layer whose forward chooses among kernels overrides it."""
        return self.forward(inputs, out)

    def prepare_with_relu(self, inputs: list[Any], out: list[np.ndarray], split: Any = None) -> Prepared | None:
        """Like prepare, for a function that also applies ReLU to its output: the prepared
        forward fuses a ReLU that runs in place on this layer's output into it. None: no such
        function (convolutions have one). `split`: as a splittable layer's prepare takes it."""
        return None

    def overwritable_inputs(self) -> tuple[int, ...]:
        """Inputs the output may overwrite in place (elementwise layers; see above)."""
        return ()

    def kernel_name(self, inputs: list[tuple[int, ...]]) -> str:
        """The kernel this layer runs at these input shapes, in a few words, where it picks
        among ways (the convolutions'); "" otherwise. The app's profile shows it. (Not to be
        confused with the ordering algorithm, DFS or Kahn, that the runtime's build uses.)"""
        return ""

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        """Multiply-accumulates for one forward at these shapes (0 where negligible)."""
        return 0


def register(*type_names: str) -> Callable[[L], L]:
    """Class decorator: make a layer for these PNNX type strings."""

    def deco(cls: L) -> L:
        for t in type_names:
            if t in _REGISTRY and _REGISTRY[t] is not cls:
                raise RuntimeError(f"layer type {t!r} registered twice ({_REGISTRY[t].__name__}, {cls.__name__})")
            _REGISTRY[t] = cls
        return cls

    return deco


_loaded = False


def _load_all() -> None:
    """Import every layer module once; importing a module registers its layers."""
    global _loaded
    if _loaded:
        return
    import importlib
    import pkgutil
    from pathlib import Path

    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):  # this package's modules
        if mod.name != "registry" and not mod.name.startswith("_"):
            importlib.import_module(f"{__package__}.{mod.name}")
    _loaded = True


def _load_for(op_type: str) -> None:
    """Import the module that registers `op_type` (layers/_index.py says which), so that
    loading a model imports only the layer modules it uses (a fresh process's first load
    is timed, imports included). A type the index does not know imports every module."""
    if op_type in _REGISTRY:
        return
    from ._index import MODULE_OF

    module = MODULE_OF.get(op_type)
    if module is not None:
        import importlib

        importlib.import_module(f"{__package__}.{module}")
    if op_type not in _REGISTRY:
        _load_all()


def supported_types() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def is_supported(op_type: str) -> bool:
    _load_for(op_type)
    return op_type in _REGISTRY


def check_supported(operators: list[Operator]) -> None:
    """Raise one UnsupportedOperatorError listing every operator without a layer."""
    for t in {op.type for op in operators}:
        _load_for(t)
    missing = [(op.type, op.name, op.line) for op in operators if op.type not in _REGISTRY]
    if missing:
        raise UnsupportedOperatorError(missing)


def layer_class(op_type: str) -> type[Layer] | None:
    _load_for(op_type)
    return _REGISTRY.get(op_type)


def value_shaped_operands(ops: Iterable[Operator]) -> frozenset[str]:
    """The operands whose size follows the input values: the outputs of those of `ops` whose
    layer says so (Layer.shape_follows_values; a file's operator, or one bound by the runtime
    with the params it knows at build) and every operand computed from one, through the
    graph's consumers (in any order of the operators)."""
    loose: set[str] = set()
    seen: set[int] = set()
    todo = [op for op in ops if _follows_values(op)]
    while todo:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        for o in op.outputs:
            loose.add(o.name)
            todo.extend(o.consumers)
    return frozenset(loose)


def _follows_values(op: Operator) -> bool:
    """For a file's operator, params given as operands count as unknown: it errs on that side."""
    cls = layer_class(op.type)
    return cls is not None and cls.shape_follows_values(op)


def module_index() -> dict[str, str]:
    """Every registered type -> the layers module registering it: what layers/_index.py holds."""
    _load_all()
    return {
        t: cls.__module__.rsplit(".", 1)[-1]
        for t, cls in sorted(_REGISTRY.items())
        if cls.__module__.startswith(f"{__package__}.")
    }


def write_index() -> None:
    """Rewrite layers/_index.py from the registrations (python -m kuiper_core.layers.registry)."""
    from pathlib import Path

    lines = [f"    {t!r}: {m!r}," for t, m in module_index().items()]
    text = (
        '"""Layer type -> the module under kuiper_core/layers that registers it (generated: run\n'
        "`python -m kuiper_core.layers.registry` after adding a layer; tests/test_layer_index.py\n"
        "checks it). registry.py imports only the modules a model needs; a type missing here\n"
        'still works (every module is imported then), only slower to load."""\n\n'
        "MODULE_OF: dict[str, str] = {\n" + "\n".join(lines) + "\n}\n"
    )
    Path(__file__).with_name("_index.py").write_text(text)


def create_layer(op: Operator) -> Layer:
    cls = layer_class(op.type)
    if cls is None:
        raise UnsupportedOperatorError([(op.type, op.name, op.line)])
    try:
        return cls(op)
    except LimitError as e:
        raise e.at_operator(op.name, op.type) from None
    except KuiperError:
        raise
    except MemoryError as e:
        raise _limits.out_of_memory(e, op.name, op.type) from None
    except Exception as e:  # a param no check caught (a bug to fix): still a located error
        raise ModelError(f"invalid parameters: {type(e).__name__}: {e}", operator=op.name, op_type=op.type) from e


if __name__ == "__main__":  # run as a script, this file is not the module the layers register in
    from kuiper_core.layers import registry

    registry.write_index()
