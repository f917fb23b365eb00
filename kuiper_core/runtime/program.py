"""build(graph) -> Program: everything about a model that does not depend on its inputs.

build() links each operator to its consumers, orders execution (reverse-topological DFS, or
Kahn: order.py), binds every operator's inputs (binding.py: parameters given as operands
become layer params), folds what depends only on constants (prim::Constant, weights,
arithmetic on them) by running it once, creates the layers through the registry, checks the
folded values against their `#` shapes, and plans output buffers from the declared shapes
(memory.py). The Program it returns is read-only: executors (interpreter.py, prepared.py,
step_arena.py, sharded.py, planned.py) run it and keep their own state.

Operators are keyed by `Graph.operator_keys()` (the pnnx name, `name#2`… for a name that
optlevel 0 repeats); `RuntimeOperator.name` and the step events keep pnnx's names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from .. import limits as _limits
from ..errors import KuiperError, ModelError
from ..graph import Graph, Operator, ParamValue
from ..layers.registry import check_supported, layer_class, value_shaped_operands
from .binding import bind, bound_operator, to_param
from .calls import call_layer, store
from .memory import BufferPlan, plan_buffers
from .order import ALGORITHMS, execution_order
from .runtime_operator import RuntimeOperator, Value, make_layer
from .shape_check import Batch, batch_of, check_outputs


@dataclass(frozen=True, eq=False)
class Program:
    """A built model (see the module docstring). Mappings are read-only views."""

    graph: Graph
    algorithm: str  # "dfs" or "kahn"
    order: tuple[RuntimeOperator, ...]  # every operator, in execution order
    operators: Mapping[str, RuntimeOperator]  # by key
    run_order: tuple[RuntimeOperator, ...]  # the operators a run computes (not folded)
    constants: Mapping[str, Value]  # every operand folded at build
    run_constants: Mapping[str, Value]  # the constants a run reads (and graph outputs that are constants)
    inputs: tuple[Operator, ...]  # the pnnx.Input operators, in file order (the caller's order)
    input_operands: tuple[str, ...]  # their output operands
    output_operands: tuple[str, ...]  # the graph outputs, in pnnx.Output order
    view_ops: frozenset[str]  # operators whose layer says it returns views (Layer.returns_views)
    plan: BufferPlan  # buffers for run_order at the declared shapes (never allocated here)
    value_shaped: frozenset[str]  # operands whose size follows the input values (shape_check.py)
    limits: _limits.Limits  # the limits the model was built under; runs keep them

    def with_limits(self, limits: _limits.Limits) -> Program:
        """This Program under other limits (the same operators and layers)."""
        return replace(self, limits=limits)

    def feeds(self, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        """pnnx.Input name -> array: the caller's arrays follow the file order of the inputs,
        which the execution order need not keep (DFS may visit input 2 before input 1)."""
        return {op.name: a for op, a in zip(self.inputs, inputs)}

    def batch(self, inputs: list[np.ndarray]) -> Batch:
        """(traced batch, actual batch) where the inputs' batch differs (shape_check.py)."""
        return batch_of([op.outputs[0] for op in self.inputs], inputs)

    def matches_declared(self, inputs: list[np.ndarray]) -> bool:
        """Every input has exactly its declared shape (the shapes `plan` was made for)."""
        return all(op.outputs[0].static_shape == a.shape for op, a in zip(self.inputs, inputs))

    def outputs_of(self, values: Mapping[str, Value]) -> list[np.ndarray]:
        """The graph outputs from operand values, tuples flattened; a weight (or a view of
        one) is copied: it stays the model's own."""
        result: list[np.ndarray] = []

        def flat(v: Value) -> None:
            if isinstance(v, (tuple, list)):
                for x in v:
                    flat(x)
            elif isinstance(v, np.ndarray) and not v.flags.writeable:
                result.append(v.copy())
            else:
                result.append(v)

        for name in self.output_operands:
            flat(values[name])
        return result


def build(
    graph: Graph, algorithm: str = "dfs", *, limits: _limits.Limits | None = None, release_weights: bool = False
) -> Program:
    """The Program of `graph` (see the module docstring). `release_weights`: the graph is the
    caller's to let go of: each operator's weights are released once its layer holds what it
    computes with (the graph reads them again when asked)."""
    limits = limits or _limits.current()
    with _limits.use(limits):
        return _build(graph, algorithm, limits, release_weights)


def _build(graph: Graph, algorithm: str, limits: _limits.Limits, release_weights: bool) -> Program:
    check_graph(graph)
    check_supported(graph.operators)  # one error listing every unsupported type
    if algorithm not in ALGORITHMS:
        raise KuiperError(f"unknown ordering algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    keys = graph.operator_keys()
    key_of = {id(op): key for key, op in zip(keys, graph.operators)}
    op_of = dict(zip(keys, graph.operators))
    successors = {key: [key_of[id(s)] for s in graph.successors(op)] for key, op in op_of.items()}
    order_keys = execution_order(keys, successors, algorithm)

    # Bind every operator's inputs; run at build what depends only on constants.
    constants: dict[str, Value] = {}
    folded = _limits.Budget("max_folded_bytes", "the values folded at build (they depend only on weights)", limits)
    order: list[RuntimeOperator] = []
    step = 0
    for index, key in enumerate(order_keys):
        op = op_of[key]
        binding = bind(op, layer_class(op.type))
        params: dict[str, ParamValue] = {}
        computed: dict[str, str] = {}
        for name, operand in binding.params.items():
            if operand.name in constants:
                try:
                    params[name] = to_param(constants[operand.name])
                except ValueError as e:
                    raise ModelError(f"parameter '${name}': {e}", operator=op.name, op_type=op.type) from None
            else:
                computed[name] = operand.name
        layer = make_layer(binding, params) if not computed else None
        folds = op.type not in ("pnnx.Input", "pnnx.Output") and all(o.name in constants for o in op.inputs)
        operator = RuntimeOperator(
            op,
            key,
            index,
            -1 if folds else step,
            tuple(successors[key]),
            binding,
            MappingProxyType(params),
            MappingProxyType(computed),
            layer,
        )
        if folds:
            assert layer is not None  # its parameter operands are constants too
            results = call_layer(
                operator, layer, [constants[o.name] for o in binding.inputs], [None] * len(binding.outputs), limits
            )
            check_outputs(op, binding.outputs, results, None)
            folded.add(results, op.name, op.type)  # every folded value is kept: their total is bounded
            store(operator, results, constants)
        else:
            step += 1
        if release_weights:
            # As each layer is made: a layer that keeps only its own layout (Winograd's U)
            # lets go of the weight now, so the build never holds every weight and every U
            # at once (ResNet-18 b1's peak: ~37 MiB).
            for attr in op.attrs.values():
                attr.release()
        order.append(operator)

    by_key = {r.key: r for r in order}
    run_order = tuple(r for r in order if not r.folded)
    output_operands = tuple(o.name for op in graph.outputs for o in op.inputs)
    needed = {o.name for r in run_order for o in r.binding.reads} | set(output_operands)
    view_ops = frozenset(r.key for r in run_order if r.layer is not None and r.layer.returns_views)
    plan = declared_plan(run_order, view_ops, output_operands)
    plan.check_size(limits)
    if release_weights:
        # The layers hold what they compute with (a view of a weight, or a copy laid out for
        # their kernel): the graph keeps the rest only while held, read again when asked.
        graph.release_weights()
    return Program(
        graph=graph,
        algorithm=algorithm,
        order=tuple(order),
        operators=MappingProxyType({key: by_key[key] for key in keys}),  # in file order
        run_order=run_order,
        constants=MappingProxyType(constants),
        run_constants=MappingProxyType({n: v for n, v in constants.items() if n in needed}),
        inputs=tuple(graph.inputs),
        input_operands=tuple(op.outputs[0].name for op in graph.inputs),
        output_operands=output_operands,
        view_ops=view_ops,
        plan=plan,
        value_shaped=value_shaped(run_order),
        limits=limits,
    )


def declared_plan(
    run_order: tuple[RuntimeOperator, ...], view_ops: frozenset[str] | set[str], outputs: tuple[str, ...]
) -> BufferPlan:
    """Buffers for the operators a run computes, at their declared shapes (by step, keyed by
    operator key); `view_ops` keep the buffers they view alive."""
    ops = []
    for r in run_order:
        outs = r.op.outputs if r.binding.packed else r.binding.outputs
        ops.append(Operator(r.type, r.key, inputs=r.binding.reads, outputs=list(outs)))
    return plan_buffers(ops, set(view_ops), set(outputs))


def value_shaped(run_order: tuple[RuntimeOperator, ...]) -> frozenset[str]:
    """Operands whose size follows the input values (Layer.shape_follows_values, asked of the
    operator as bound at build) and every operand computed from one: their dims are checked
    loosely (shape_check.py), and forward() runs such a graph on the interpreter, since its
    shapes change from run to run."""
    return value_shaped_operands(bound_operator(r.binding, dict(r.params)) for r in run_order)


def check_graph(graph: Graph) -> None:
    """Graph-level checks that the text parser cannot make (graphs may be built in code)."""
    if not graph.inputs:
        raise ModelError("the graph has no pnnx.Input operator")
    if not graph.outputs:
        raise ModelError("the graph has no pnnx.Output operator")
    for op in graph.inputs:
        if len(op.outputs) != 1 or op.inputs:
            raise ModelError(
                f"a pnnx.Input takes no inputs and gives one output, this one has {len(op.inputs)} and {len(op.outputs)}",
                operator=op.name,
                op_type=op.type,
            )
    _limits.check_count(len(graph.operators), "operators in the graph", "max_operators")
    # every expression within the limit, and all of them together: 62 lines of 786 KB each
    # (a 48 MB .param) took ~7 min to build
    chars = sum(len(str(op.params.get("expr", ""))) for op in graph.operators if op.type == "pnnx.Expression")
    _limits.check_count(chars, "characters of expressions in the graph", "max_expression_chars")
    for op in graph.operators:
        for o in op.inputs:
            if o.producer is None:
                raise ModelError(f"input operand '{o.name}' has no producer", operator=op.name, op_type=op.type)
