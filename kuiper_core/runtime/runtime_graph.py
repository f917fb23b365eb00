"""RuntimeGraph: a Graph made runnable (seed 004's states NeedInit -> NeedBuild -> Complete).

init()  reads .param + .bin into a Graph                       (NeedInit  -> NeedBuild)
build() links each operator to its consumers, orders execution (reverse-topological DFS,
        or Kahn), binds every operator's inputs (binding.py: parameters given as operands
        become layer params), folds what depends only on constants (prim::Constant, weights,
        arithmetic on them), creates layers through the registry, checks folded values
        against their `#` shapes, plans output buffers        (NeedBuild -> Complete)
forward(*arrays) runs the operators that were not folded; steps(*arrays) runs one operator
per iteration (folded ones show their value) and exposes every input and output (the app's
stepper), as a flat run on a step arena (step_arena.py) or, where there is none, operator by
operator. Consumers read their producers' output arrays by reference: nothing is copied.

Shape truth (shape_check.py): the first forward() or steps() for each distinct set of input
shapes checks each produced tensor against its annotation (steps() without an arena: every
step); later runs at those shapes write into buffers of the checked shapes.

Operators are keyed by `Graph.operator_keys()` (the pnnx name, `name#2`… for a name that
optlevel 0 repeats); `RuntimeOperator.name` and events keep pnnx's names.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from .. import limits as _limits
from .. import threads
from ..errors import InputError, KuiperError, LimitError, ModelError
from ..graph import Graph, Operator, ParamValue, numpy_dtype
from ..layers.registry import Layer, check_supported, create_layer, layer_class, value_shaped_operands
from .binding import Binding, bind, bound_operator, freeze, to_param
from .memory import BufferPlan, plan_buffers
from .order import ALGORITHMS, execution_order
from .prepared import NotPreparable, PreparedForward, PreparedSteps, raise_for_operator
from .shape_check import Batch, batch_of, check_outputs
from .sharded import ShardedForward, batch_size, best_time
from .step_arena import StepArenas

# Layers kept per operator for parameter values computed at run time (one per distinct
# value set); beyond this many the cache starts again.
MAX_LAYERS_PER_OPERATOR = 64
# Input-shape signatures whose first run was shape-checked; beyond this many, start again.
MAX_CHECKED_SIGNATURES = 256
# Input signatures kept prepared (prepared.py; each prepared forward holds its own buffers).
MAX_PREPARED = 4


class GraphState(IntEnum):
    NeedInit = -2
    NeedBuild = -1
    Complete = 0


@dataclass(eq=False)
class RuntimeOperator:
    """An operator with its layer and its successors (seed 004's output_operators)."""

    op: Operator
    key: str = ""  # unique among the graph's operators (the name, unless pnnx repeated it)
    layer: Layer | None = None  # the layer last used (one per computed-param value set)
    successors: dict[str, RuntimeOperator] = field(default_factory=dict)
    index: int = -1  # position in execution order
    binding: Binding | None = None
    folded: bool = False  # computed at build from constants; forward() skips it
    params: dict[str, ParamValue] = field(default_factory=dict)  # operand params known at build
    computed: dict[str, str] = field(default_factory=dict)  # param key -> operand computed at run time
    step: int = -1  # position among the operators forward() runs
    layers: dict[tuple, Layer] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def type(self) -> str:
        return self.op.type

    def make_layer(self, computed: dict[str, ParamValue] | None = None) -> Layer:
        assert self.binding is not None
        params = {**self.params, **computed} if computed else self.params
        return create_layer(bound_operator(self.binding, params, frozenset(computed or ())))

    def layer_for(self, values: dict[str, Value]) -> tuple[Layer, bool]:
        """The layer for this run's computed params (made on first sight); True if new."""
        try:
            computed = {k: to_param(values[n]) for k, n in self.computed.items()}
        except ValueError as e:
            raise ModelError(f"parameter operand: {e}", operator=self.name, op_type=self.type) from None
        key = tuple((k, freeze(v)) for k, v in computed.items())
        layer = self.layers.get(key)
        made = layer is None
        if layer is None:
            if len(self.layers) >= MAX_LAYERS_PER_OPERATOR:
                self.layers.clear()
            layer = self.layers[key] = self.make_layer(computed)
        self.layer = layer
        return layer, made


class StepEvent:
    """What one operator did during `steps()`: the operator, its wall time, and its input and
    output arrays. Those are read from the run's values when asked (building two dicts per
    step would cost more than a small operator); every operand is written once per run, so
    they are the arrays the operator read and wrote."""

    __slots__ = ("_rop", "_values", "seconds")

    def __init__(self, rop: RuntimeOperator, values: Mapping[str, Any], seconds: float) -> None:
        self._rop = rop
        self._values = values
        self.seconds = seconds

    @property
    def index(self) -> int:
        return self._rop.index

    @property
    def name(self) -> str:
        return self._rop.op.name

    @property
    def type(self) -> str:
        return self._rop.op.type

    @property
    def operator(self) -> Operator:
        return self._rop.op

    @property
    def key(self) -> str:
        """The operator's unique key (RuntimeGraph.operators)."""
        return self._rop.key

    @property
    def folded(self) -> bool:
        """Computed at build from constants (its value is shown, not recomputed)."""
        return self._rop.folded

    @property
    def inputs(self) -> dict[str, Any]:
        """PNNX operand name -> array (a tuple for prim::TupleConstruct); none for pnnx.Input."""
        op = self._rop.op
        return {} if op.type == "pnnx.Input" else {o.name: self._values[o.name] for o in op.inputs}

    @property
    def outputs(self) -> dict[str, Any]:
        return {o.name: self._values[o.name] for o in self._rop.op.outputs}

    def __repr__(self) -> str:
        return f"StepEvent({self.index}, {self.name!r}, {self.type!r}, {self.seconds * 1e3:.3f} ms)"


Value = Any  # np.ndarray, or a tuple of them for prim::TupleConstruct


class RuntimeGraph:
    def __init__(
        self,
        param_path: str | Path | None = None,
        bin_path: str | Path | None = None,
        *,
        graph: Graph | None = None,
        limits: _limits.Limits | None = None,
    ) -> None:
        # The limits this graph was created under apply to its build, forward and steps.
        self.limits = limits or _limits.current()
        self.param_path = Path(param_path) if param_path is not None else None
        self.bin_path = Path(bin_path) if bin_path is not None else None
        self.graph: Graph | None = graph
        # A graph this runtime read itself is nobody else's: its weights may be let go of
        # after build. A graph given to it stays as its owner keeps it (a pass pipeline
        # may still save it, over the very .bin it was read from).
        self._owns_graph = graph is None
        self.state = GraphState.NeedBuild if graph is not None else GraphState.NeedInit
        self.operators: dict[str, RuntimeOperator] = {}  # by key (see the module docstring)
        self.order: list[RuntimeOperator] = []
        self.constants: dict[str, Value] = {}  # operands folded at build
        self._run_order: list[RuntimeOperator] = []  # what forward() runs
        self._seed: dict[str, Value] = {}  # the constants that forward() reads
        # Input signatures (shapes, dtypes) whose first run was checked. That run is
        # unplanned: layers show their own output dtypes instead of writing into buffers
        # of the declared dtype, so a wrong annotation fails at every batch size.
        self._checked: set[tuple] = set()
        # Input signatures that passed _check_inputs unchanged (no cast): later calls with
        # plain arrays of the same shapes and dtypes skip the checks (~5 us a forward).
        self._accepted: set[tuple] = set()
        self.algorithm = "dfs"
        self.plan: BufferPlan | None = None
        self._view_ops: set[str] = set()
        # The pnnx.Input operators, found at build: Graph.inputs scans every operator
        # (deep1500: ~0.26 ms a call once a run has pushed them out of cache).
        self._input_ops: list[Operator] = []
        self.values: Mapping[str, Value] = {}  # operand values of the latest steps() run
        # The fast paths by input signature (prepared.py); None: this graph cannot be prepared.
        self._prepared: dict[tuple, PreparedForward | None] = {}
        self._prepared_steps: dict[tuple, tuple[PreparedSteps, StepArenas]] = {}
        # forward()'s split by images at >= 2 BLAS threads (sharded.py); None: runs whole.
        self._sharded: dict[tuple, ShardedForward | None] = {}
        self.value_shaped: frozenset[str] = frozenset()  # set at build: see _value_shaped
        self._step_signature: tuple | None = None  # the input shapes of the latest steps()
        # Planned buffers are shared state: one planned forward at a time (the app caches
        # one RuntimeGraph for every browser session).
        self._run_lock = threading.Lock()

    @classmethod
    def from_graph(cls, graph: Graph, limits: _limits.Limits | None = None, *, owned: bool = False) -> RuntimeGraph:
        """owned: nothing else keeps `graph`, so its weights may go after build (as when read here)."""
        rt = cls(graph=graph, limits=limits)
        rt._owns_graph = owned
        return rt

    # -- states ---------------------------------------------------------------------------
    def init(self) -> None:
        if self.state != GraphState.NeedInit:
            return
        from ..formats import open_model  # any format the registry reads (kuiper_core.formats)

        if self.param_path is None:
            raise KuiperError("no .param path to initialise from")
        with _limits.use(self.limits):
            self.graph = open_model(self.param_path, bin_path=self.bin_path).graph
        self.state = GraphState.NeedBuild

    def build(self, algorithm: str = "dfs") -> RuntimeGraph:
        if self.state == GraphState.Complete and algorithm == self.algorithm:
            return self
        with _limits.use(self.limits):
            return self._build(algorithm)

    def _build(self, algorithm: str) -> RuntimeGraph:
        if self.state == GraphState.NeedInit:
            self.init()
        graph = self.graph
        assert graph is not None
        _check_graph(graph)
        self._input_ops = graph.inputs
        check_supported(graph.operators)  # one error listing every unsupported type
        if algorithm not in ALGORITHMS:
            raise KuiperError(f"unknown ordering algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")

        keys = graph.operator_keys()
        self.operators = {key: RuntimeOperator(op, key) for key, op in zip(keys, graph.operators)}
        by_op = {id(rop.op): rop for rop in self.operators.values()}
        for rop in self.operators.values():
            for succ in graph.successors(rop.op):
                s = by_op[id(succ)]
                rop.successors[s.key] = s

        succ_map = {key: list(rop.successors) for key, rop in self.operators.items()}
        order = execution_order(keys, succ_map, algorithm)
        self.order = [self.operators[k] for k in order]
        for i, rop in enumerate(self.order):
            rop.index = i
        self.algorithm = algorithm
        self._bind_and_fold()
        self._view_ops = {r.key for r in self._run_order if r.layer is not None and r.layer.returns_views}
        self._replan()
        self._checked, self._accepted = set(), set()
        self._prepared, self._prepared_steps, self._sharded = {}, {}, {}
        if self._owns_graph:
            # The layers hold what they compute with (a view of a weight, or a copy laid out
            # for their kernel): the graph keeps the rest only while held, read again when asked.
            graph.release_weights()
        self.state = GraphState.Complete
        return self

    def _bind_and_fold(self) -> None:
        """Bind every operator's inputs; run at build what depends only on constants."""
        constants: dict[str, Value] = {}
        for rop in self.order:
            op = rop.op
            b = rop.binding = bind(op, layer_class(op.type))
            rop.params, rop.computed, rop.layers, rop.folded = {}, {}, {}, False
            for key, operand in b.params.items():
                if operand.name in constants:
                    try:
                        rop.params[key] = to_param(constants[operand.name])
                    except ValueError as e:
                        raise ModelError(f"parameter '${key}': {e}", operator=op.name, op_type=op.type) from None
                else:
                    rop.computed[key] = operand.name
            rop.layer = rop.make_layer() if not rop.computed else None
            if op.type not in ("pnnx.Input", "pnnx.Output") and all(o.name in constants for o in op.inputs):
                assert rop.layer is not None
                results = self._call(rop, rop.layer, [constants[o.name] for o in b.inputs], [None] * len(b.outputs))
                check_outputs(op, b.outputs, results, None)
                self._store(rop, results, constants)
                rop.folded = True
            if self._owns_graph:
                # As each layer is made (see _build): a layer that keeps only its own layout
                # (Winograd's U) lets go of the weight now, so the build never holds every
                # weight and every U at once (ResNet-18 b1's peak: ~37 MiB).
                for attr in op.attrs.values():
                    attr.release()
        self.constants = constants
        self._run_order = [r for r in self.order if not r.folded]
        for i, rop in enumerate(self._run_order):
            rop.step = i
        assert self.graph is not None
        needed = {o.name for r in self._run_order if r.binding for o in r.binding.reads}
        needed |= {o.name for op in self.graph.outputs for o in op.inputs}
        self._seed = {n: v for n, v in constants.items() if n in needed}
        self.value_shaped = self._value_shaped()

    def _value_shaped(self) -> frozenset[str]:
        """Operands whose size follows the input values (Layer.shape_follows_values, asked of
        the operator as bound at build) and every operand computed from one: their dims are
        checked loosely (shape_check.py), and forward() runs such a graph unplanned, since its
        shapes change from run to run."""
        return value_shaped_operands(
            bound_operator(r.binding, r.params) for r in self._run_order if r.binding is not None
        )

    def _replan(self) -> None:
        """Buffers for the operators forward() runs (by step, keyed by operator key)."""
        ops = []
        for r in self._run_order:
            assert r.binding is not None
            outs = r.op.outputs if r.binding.packed else r.binding.outputs
            ops.append(Operator(r.type, r.key, inputs=r.binding.reads, outputs=list(outs)))
        assert self.graph is not None
        outputs = {o.name for op in self.graph.outputs for o in op.inputs}
        self.plan = plan_buffers(ops, self._view_ops, outputs)
        self.plan.allocate(self.limits)

    # -- queries ----------------------------------------------------------------------------
    @property
    def input_operands(self) -> list[str]:
        assert self.graph is not None
        return [op.outputs[0].name for op in self.graph.inputs]

    def _require_built(self) -> None:
        if self.state != GraphState.Complete:
            self.build()

    # -- running ----------------------------------------------------------------------------
    def forward(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """Run the model; outputs in pnnx.Output order with tuples flattened."""
        self._require_built()
        with _limits.use(self.limits):
            return self._forward(self._check_inputs(arrays))

    def _forward(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self.value_shaped:  # shapes that change with the values: no plan fits every run
            return self._collect_outputs(self._run(inputs, planned=False, check=True))
        signature = tuple((a.shape, a.dtype.str) for a in inputs)
        with self._run_lock:  # the prepared forward (prepared.py), made by the first run
            shard = threads.blas_threads() >= 2 and batch_size(inputs) >= 2
            sharded = self._sharded.get(signature) if shard else None
            if sharded is not None:  # split by images over two threads (sharded.py)
                return sharded.run(inputs)
            if signature not in self._prepared:
                outputs = self._prepare(signature, inputs)
                if outputs is not None:
                    return outputs
            if shard and signature not in self._sharded and self._prepared[signature] is not None:
                return self._shard(signature, inputs)  # the second run decides
            prepared = self._prepared[signature]
            if prepared is not None:
                return prepared.run(inputs)
        if signature not in self._checked:  # the first run at these shapes: checked, unplanned
            values = self._run(inputs, planned=False, check=True)
            if len(self._checked) >= MAX_CHECKED_SIGNATURES:
                self._checked.clear()
            self._checked.add(signature)
            return self._collect_outputs(values)
        if not self._matches_declared(inputs):
            return self._collect_outputs(self._run(inputs, planned=False, check=False))
        with self._run_lock:
            while True:
                try:
                    values = self._run(inputs, planned=True, check=False)
                    break
                except _ViewDetected as v:
                    # A layer returned a view of an input without saying so: keep that
                    # buffer alive from now on and run again with a corrected plan.
                    self._view_ops.add(v.name)
                    self._replan()
            return self._collect_outputs(values)

    def _prepare(self, signature: tuple, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """Prepare forward at this signature (under the lock). Its first run is the checked
        run; returns its outputs, or None when the graph cannot be prepared."""
        try:
            prepared: PreparedForward | None = PreparedForward.build(self, inputs)
        except NotPreparable:
            prepared = None
        if len(self._prepared) >= MAX_PREPARED:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[signature] = prepared
        if prepared is None:
            return None
        if len(self._checked) >= MAX_CHECKED_SIGNATURES:
            self._checked.clear()
        self._checked.add(signature)
        outputs, prepared.first_outputs = prepared.first_outputs, []
        return outputs

    def _shard(self, signature: tuple, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Decide, at the second forward at this signature, whether it runs sharded (under the
        lock); this call's outputs. The whole forward is let go of first, so that the shards'
        buffers reuse its memory (ResNet-18 b4 peak RSS 220 -> 202 MiB); made again here if the
        graph stays whole, or at the next call at one BLAS thread."""
        whole = self._prepared.pop(signature)
        assert whole is not None
        t_whole, outputs = best_time(whole.run, inputs)
        record = whole.record
        del whole  # the last reference: its buffers go back to the allocator
        sharded, sharded_outputs = ShardedForward.build(self, inputs, record, outputs, t_whole)
        if len(self._sharded) >= MAX_PREPARED:
            self._sharded.pop(next(iter(self._sharded)))
        self._sharded[signature] = sharded
        if sharded is None:  # whole again, prepared now: later calls take the hot path
            return self._prepare(signature, inputs) or outputs
        return sharded_outputs

    def _steps_for(self, signature: tuple) -> tuple[PreparedSteps, StepArenas]:
        prepared = self._prepared_steps.get(signature)
        if prepared is None:
            if len(self._prepared_steps) >= MAX_PREPARED:
                self._prepared_steps.pop(next(iter(self._prepared_steps)))
            prepared = self._prepared_steps[signature] = (PreparedSteps(), StepArenas(StepEvent))
        if signature != self._step_signature:
            # Arenas are kept for the latest input shapes only: up to MAX_ARENA_BYTES per
            # graph, not per signature (a run still holding an older arena keeps its memory).
            for other, (_, arenas) in self._prepared_steps.items():
                if other != signature:
                    arenas.release()
            self._step_signature = signature
        return prepared

    def steps(self, *arrays: np.ndarray) -> StepRun:
        """Run one operator per iteration. The returned iterator's `.values` holds every
        operand computed so far (also `self.values` until the next steps() call). Every
        operand of a run has memory of its own, which no later run writes while anything
        still holds it (step_arena.py), so concurrent runs never share buffers."""
        self._require_built()
        inputs = self._check_inputs(arrays)
        self.values = {}  # let go of the last run's values: its arena may be free now
        signature = tuple((a.shape, a.dtype.str) for a in inputs)
        prepared, arenas = self._steps_for(signature)
        forward = self._prepared.get(signature)
        # An arena is laid out from one run's shapes: not for shapes that follow the values.
        started = (
            None if self.value_shaped else arenas.start(self, inputs, forward.record if forward is not None else None)
        )
        if started is not None:  # a free arena's flat run (step_arena.py)
            run, values = started
        else:  # one operator at a time
            values = {}
            run = self._step_iter(inputs, values, prepared)
        self.values = values
        return StepRun(run, values)

    def _step_iter(
        self, inputs: list[np.ndarray], values: dict[str, Value], prepared: PreparedSteps
    ) -> Iterator[StepEvent]:
        """Each operator on fresh outputs (its prepared function where it has one), each
        output checked against its annotation."""
        feeds = self._feeds(inputs)
        batch = self._batch(inputs)
        for rop in self.order:
            op = rop.op
            b = rop.binding
            assert b is not None
            t0 = time.perf_counter()
            if rop.folded:
                for o in op.outputs:
                    values[o.name] = self.constants[o.name]
            else:
                with _limits.use(self.limits):
                    layer = rop.layer
                    if rop.computed:
                        layer, _ = rop.layer_for(values)
                    assert layer is not None
                    args = [feeds[op.name]] if op.type == "pnnx.Input" else [values[o.name] for o in b.inputs]
                    results = prepared.call(self, rop, layer, args)
                if op.type != "pnnx.Input":  # the inputs were checked by _check_inputs
                    check_outputs(op, b.outputs, results, batch, self.value_shaped)
                self._store(rop, results, values)
            yield StepEvent(rop, values, time.perf_counter() - t0)

    def outputs_of(self, values: Mapping[str, Value]) -> list[np.ndarray]:
        """The graph outputs from operand values (e.g. after steps())."""
        return self._collect_outputs(values)

    def _run(
        self,
        inputs: list[np.ndarray],
        *,
        planned: bool,
        check: bool,
        record: Callable[[RuntimeOperator, list[Value], list[Value]], None] | None = None,
    ) -> dict[str, Value]:
        """One run over the operators not folded. `record(rop, args, results)`, if given,
        sees every operator's arguments and results (prepared.py learns shapes from it)."""
        values: dict[str, Value] = dict(self._seed)
        plan = self.plan if planned else None
        last_use = self.plan.last_use if self.plan is not None else {}
        feeds = self._feeds(inputs)
        batch = self._batch(inputs) if check else None
        for rop in self._run_order:
            op = rop.op
            b = rop.binding
            assert b is not None
            layer, made = (rop.layer, False) if not rop.computed else rop.layer_for(values)
            assert layer is not None
            args = [feeds[op.name]] if op.type == "pnnx.Input" else [values[o.name] for o in b.inputs]
            if plan is not None and not b.packed:
                out = [plan.buffer(o.name) for o in b.outputs]
            else:
                out = [None] * len(b.outputs)
            results = self._call(rop, layer, args, out)
            if (check or made) and op.type != "pnnx.Input":  # inputs: see _check_inputs
                check_outputs(op, b.outputs, results, batch, self.value_shaped)
            if plan is not None and rop.key not in self._view_ops:
                for r, buf in zip(results, out):
                    if (
                        isinstance(r, np.ndarray)
                        and r is not buf
                        and any(isinstance(a, np.ndarray) and np.may_share_memory(r, a) for a in args)
                    ):
                        raise _ViewDetected(rop.key)
            if record is not None:
                record(rop, args, results)
            self._store(rop, results, values)
            # Liveness: drop what no later operator reads (planned buffers stay in the
            # plan; unplanned arrays are freed now).
            for o in b.reads:
                if last_use.get(o.name, -1) <= rop.step:
                    values.pop(o.name, None)
        return values

    @staticmethod
    def _store(rop: RuntimeOperator, results: list[Value], values: dict[str, Value]) -> None:
        """Results into `values`: one operand each, or one tuple for a packed operator."""
        outs = rop.op.outputs
        if rop.binding is not None and rop.binding.packed:
            values[outs[0].name] = tuple(results)
        else:
            for o, v in zip(outs, results):
                values[o.name] = v

    def _batch(self, inputs: list[np.ndarray]) -> Batch:
        assert self.graph is not None
        return batch_of([op.outputs[0] for op in self.graph.inputs], inputs)

    def _feeds(self, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        """pnnx.Input name -> array: the caller's arrays follow the file order of the inputs,
        which the execution order need not keep (DFS may visit input 2 before input 1)."""
        assert self.graph is not None
        return {op.name: a for op, a in zip(self.graph.inputs, inputs)}

    def _call(self, rop: RuntimeOperator, layer: Layer, args: list[Value], out: list[np.ndarray | None]) -> list[Value]:
        try:
            results = layer.forward(args, out)
        except Exception as e:
            raise_for_operator(e, rop.name, rop.type)
        if len(results) != len(out):
            raise ModelError(
                f"layer returned {len(results)} output(s), the graph declares {len(out)}",
                operator=rop.name,
                op_type=rop.type,
            )
        for r in results:  # a broadcast view costs no memory, but everything after it would
            if isinstance(r, np.ndarray) and r.size > self.limits.max_tensor_elements:
                try:
                    _limits.check_elements(r.shape, "the output", self.limits)
                except LimitError as e:
                    raise e.at_operator(rop.name, rop.type) from None
        return results

    def _collect_outputs(self, values: Mapping[str, Value]) -> list[np.ndarray]:
        result: list[np.ndarray] = []

        def flat(v: Value) -> None:
            if isinstance(v, (tuple, list)):
                for x in v:
                    flat(x)
            elif isinstance(v, np.ndarray) and not v.flags.writeable:
                result.append(v.copy())  # a weight (or a view of one) stays the graph's own
            else:
                result.append(v)

        assert self.graph is not None
        for op in self.graph.outputs:
            for o in op.inputs:
                flat(values[o.name])
        return result

    # -- input checks ------------------------------------------------------------------------
    def _check_inputs(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        assert self.graph is not None
        key = (
            (self.limits, *((a.shape, a.dtype) for a in arrays)) if all(type(a) is np.ndarray for a in arrays) else None
        )
        if key in self._accepted:
            return list(arrays)
        ins = self._input_ops
        if len(arrays) != len(ins):
            raise InputError(
                f"the model takes {len(ins)} input(s) ({', '.join(o.name for o in ins)}), got {len(arrays)}"
            )
        checked = []
        for op, a in zip(ins, arrays):
            operand = op.outputs[0]
            a = np.asarray(a)
            where = f"input '{op.name}' (operand {operand.name})"
            if a.dtype.kind not in "biufc" or a.dtype.fields is not None or a.dtype.subdtype is not None:
                raise InputError(f"{where}: expected an array of numbers, got dtype {a.dtype}")
            _limits.check_elements(a.shape, where, self.limits)
            if operand.dtype is not None:
                a = _cast_input(a, numpy_dtype(operand.dtype), operand.dtype, where)
            if operand.shape is not None:
                if a.ndim != len(operand.shape):
                    raise InputError(
                        f"{where}: expected rank {len(operand.shape)} shape {_shape_text(operand.shape)}, "
                        f"got rank {a.ndim} shape {a.shape}"
                    )
                for i, (d, n) in enumerate(zip(operand.shape, a.shape)):
                    if i > 0 and isinstance(d, int) and d != n:
                        raise InputError(
                            f"{where}: dim {i} must be {d} (shape {_shape_text(operand.shape)}, batch may vary), "
                            f"got shape {a.shape}"
                        )
                if a.ndim and a.shape[0] == 0 and operand.shape[0] != 0:
                    raise InputError(f"{where}: batch 0 (shape {a.shape}): an input needs at least one item")
            checked.append(a)
        if key is not None and all(c is a for c, a in zip(checked, arrays)):
            if len(self._accepted) >= MAX_CHECKED_SIGNATURES:
                self._accepted.clear()
            self._accepted.add(key)
        return checked

    def _matches_declared(self, inputs: list[np.ndarray]) -> bool:
        assert self.graph is not None
        return all(op.outputs[0].static_shape == a.shape for op, a in zip(self.graph.inputs, inputs))


class StepRun(Iterator[StepEvent]):
    """The iterator returned by steps(), with this run's operand values."""

    def __init__(self, events: Iterator[StepEvent], values: Mapping[str, Value]) -> None:
        self._events = events
        self.values = values

    def __iter__(self) -> Iterator[StepEvent]:
        return self._events  # a for loop runs the generator itself, without __next__ below

    def __next__(self) -> StepEvent:
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()


def _cast_input(a: np.ndarray, want: np.dtype, name: str, where: str) -> np.ndarray:
    """`a` as dtype `want`, only where every value survives: an int64 300 must not become
    the i8 44, a float64 1e300 not an f32 inf. Floats round to the nearest value."""
    if a.dtype == want:
        return a
    same_kind = a.dtype.kind == want.kind or (a.dtype.kind in "iu" and want.kind in "iu")
    if not same_kind:
        raise InputError(f"{where}: expected dtype {want} ({name}), got {a.dtype}")
    if a.size and want.kind in "iu" and not np.can_cast(a.dtype, want):
        info = np.iinfo(want)
        lo, hi = int(a.min()), int(a.max())
        if lo < info.min or hi > info.max:
            raise InputError(f"{where}: values from {lo} to {hi} do not fit in {want} ({name}: {info.min}..{info.max})")
    if a.size and want.kind in "fc" and want.itemsize < a.dtype.itemsize:
        finite = a[np.isfinite(a)]
        biggest = float(np.abs(finite).max()) if finite.size else 0.0
        if biggest > float(np.finfo(want).max):
            raise InputError(f"{where}: a value of magnitude {biggest:.6g} overflows {want} ({name})")
    return a.astype(want)


class _ViewDetected(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


def _check_graph(graph: Graph) -> None:
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
    for op in graph.operators:
        for o in op.inputs:
            if o.producer is None:
                raise ModelError(f"input operand '{o.name}' has no producer", operator=op.name, op_type=op.type)
