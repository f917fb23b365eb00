"""RuntimeGraph: a Graph made runnable (seed 004's states NeedInit -> NeedBuild -> Complete).

init()  reads .param + .bin into a Graph                       (NeedInit  -> NeedBuild)
build() links each operator to its consumers, creates layers through the registry,
        orders execution (reverse-topological DFS, or Kahn), plans output buffers
                                                                 (NeedBuild -> Complete)
forward(*arrays) runs everything; steps(*arrays) runs one operator per iteration and
exposes every input and output tensor (the app's stepper). Consumers read their
producers' output arrays by reference: nothing is copied between operators.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .. import limits as _limits
from ..errors import InputError, KuiperError, LimitError, ModelError
from ..graph import Graph, Operator, numpy_dtype
from ..layers.registry import Layer, check_supported, create_layer
from .memory import BufferPlan, plan_buffers
from .order import ALGORITHMS, Trace
from .prepared import NotPreparable, PreparedForward, PreparedSteps, raise_for_operator


class GraphState(IntEnum):
    NeedInit = -2
    NeedBuild = -1
    Complete = 0


@dataclass(eq=False)
class RuntimeOperator:
    """An operator with its layer and its successors (seed 004's output_operators)."""

    op: Operator
    layer: Layer | None = None
    successors: dict[str, "RuntimeOperator"] = field(default_factory=dict)
    index: int = -1  # position in execution order

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def type(self) -> str:
        return self.op.type


@dataclass
class StepEvent:
    """What one operator did during `steps()`."""

    index: int
    name: str
    type: str
    operator: Operator
    inputs: dict[str, Any]  # PNNX operand name -> array (a tuple for prim::TupleConstruct)
    outputs: dict[str, Any]
    seconds: float


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
        self.state = GraphState.NeedBuild if graph is not None else GraphState.NeedInit
        self.operators: dict[str, RuntimeOperator] = {}
        self.order: list[RuntimeOperator] = []
        self.order_trace: Trace = Trace("dfs")
        self.algorithm = "dfs"
        self.plan: BufferPlan | None = None
        self._view_ops: set[str] = set()
        # The first run at the declared shapes is unplanned: layers show their own output
        # dtypes, checked against the file, instead of writing into buffers of the declared
        # dtype (so a wrong annotation fails at every batch size, not only at others).
        self._verified = False
        self.values: dict[str, Value] = {}  # operand values of the latest steps() run
        # Prepared forwards by input shapes and dtypes (prepared.py); None: not preparable.
        self._prepared: dict[tuple, PreparedForward | None] = {}
        self._prepared_steps: dict[tuple, PreparedSteps] = {}
        # Planned buffers are shared state: one planned forward at a time (the app caches
        # one RuntimeGraph for every browser session).
        self._run_lock = threading.Lock()

    @classmethod
    def from_graph(cls, graph: Graph, limits: _limits.Limits | None = None) -> "RuntimeGraph":
        return cls(graph=graph, limits=limits)

    # -- states ---------------------------------------------------------------------------
    def init(self) -> None:
        if self.state != GraphState.NeedInit:
            return
        from ..pnnx import load_graph

        if self.param_path is None:
            raise KuiperError("no .param path to initialise from")
        with _limits.use(self.limits):
            self.graph = load_graph(self.param_path, self.bin_path)
        self.state = GraphState.NeedBuild

    def build(self, algorithm: str = "dfs") -> "RuntimeGraph":
        if self.state == GraphState.Complete and algorithm == self.algorithm:
            return self
        with _limits.use(self.limits):
            return self._build(algorithm)

    def _build(self, algorithm: str) -> "RuntimeGraph":
        if self.state == GraphState.NeedInit:
            self.init()
        graph = self.graph
        assert graph is not None
        _check_graph(graph)
        check_supported(graph.operators)  # one error listing every unsupported type
        if algorithm not in ALGORITHMS:
            raise KuiperError(f"unknown ordering algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")

        self.operators = {op.name: RuntimeOperator(op) for op in graph.operators}
        by_op = {id(op): self.operators[op.name] for op in graph.operators}
        for rop in self.operators.values():
            for succ in graph.successors(rop.op):
                rop.successors[succ.name] = by_op[id(succ)]
        for rop in self.operators.values():
            rop.layer = create_layer(rop.op)

        names = [op.name for op in graph.operators]
        succ_map = {name: list(rop.successors) for name, rop in self.operators.items()}
        order, self.order_trace = ALGORITHMS[algorithm](names, succ_map)
        self.order = [self.operators[n] for n in order]
        for i, rop in enumerate(self.order):
            rop.index = i
        self.algorithm = algorithm
        self._view_ops = {r.name for r in self.order if r.layer is not None and r.layer.returns_views}
        self._prepared = {}
        self._prepared_steps = {}
        self._replan()
        self.state = GraphState.Complete
        return self

    def _replan(self) -> None:
        ops = [r.op for r in self.order]
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
        with self._run_lock:
            key = tuple((a.shape, a.dtype.str) for a in inputs)
            if key not in self._prepared:
                built = self._prepare(key, inputs)
                if built is not None:
                    return built  # the outputs of the run that prepared it
            prepared = self._prepared[key]
            if prepared is not None:
                return prepared.run(inputs)
        if not self._matches_declared(inputs) or not self._verified:
            values = self._run(inputs, planned=False)
            self._verified = self._verified or self._matches_declared(inputs)
            return self._collect_outputs(values)
        with self._run_lock:
            while True:
                try:
                    values = self._run(inputs, planned=True)
                    break
                except _ViewDetected as v:
                    # A layer returned a view of an input without saying so: keep that
                    # buffer alive from now on and run again with a corrected plan.
                    self._view_ops.add(v.name)
                    self._replan()
            return self._collect_outputs(values)

    MAX_PREPARED = 4  # input signatures kept prepared (each holds its own buffers)

    def _prepare(self, key: tuple, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """Prepare forward for these input shapes (holding the lock): its first outputs, or
        None when the graph cannot be prepared (forward then runs operator by operator)."""
        try:
            prepared: PreparedForward | None = PreparedForward.build(self, inputs)
        except NotPreparable:
            prepared = None
        if len(self._prepared) >= self.MAX_PREPARED:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = prepared
        if prepared is None:
            return None
        outputs, prepared.first_outputs = prepared.first_outputs, []
        return outputs

    def steps(self, *arrays: np.ndarray) -> "StepRun":
        """Run one operator per iteration. The returned iterator's `.values` holds every
        operand computed so far (also `self.values` until the next steps() call). Steps
        allocate fresh outputs, so concurrent runs never share buffers."""
        self._require_built()
        inputs = self._check_inputs(arrays)
        values: dict[str, Value] = {}
        self.values = values
        return StepRun(self._step_iter(inputs, values), values)

    def _step_iter(self, inputs: list[np.ndarray], values: dict[str, Value]) -> Iterator[StepEvent]:
        feeds = self._feeds(inputs)
        key = tuple((a.shape, a.dtype.str) for a in inputs)
        prepared = self._prepared_steps.get(key)
        if prepared is None:
            if len(self._prepared_steps) >= self.MAX_PREPARED:
                self._prepared_steps.pop(next(iter(self._prepared_steps)))
            prepared = self._prepared_steps[key] = PreparedSteps()
        for rop in self.order:
            op = rop.op
            args = [feeds[op.name]] if op.type == "pnnx.Input" else [values[o.name] for o in op.inputs]
            t0 = time.perf_counter()
            with _limits.use(self.limits):
                outs = prepared.call(self, rop, args)
            dt = time.perf_counter() - t0
            for o, v in zip(op.outputs, outs):
                values[o.name] = v
            yield StepEvent(
                rop.index,
                op.name,
                op.type,
                op,
                {o.name: values[o.name] for o in op.inputs} if op.type != "pnnx.Input" else {},
                {o.name: v for o, v in zip(op.outputs, outs)},
                dt,
            )

    def outputs_of(self, values: dict[str, Value]) -> list[np.ndarray]:
        """The graph outputs from a dict of operand values (e.g. after steps())."""
        return self._collect_outputs(values)

    def _run(self, inputs: list[np.ndarray], *, planned: bool) -> dict[str, Value]:
        values: dict[str, Value] = {}
        plan = self.plan if planned else None
        last_use = self.plan.last_use if self.plan is not None else {}
        feeds = self._feeds(inputs)
        for rop in self.order:
            op = rop.op
            args = [feeds[op.name]] if op.type == "pnnx.Input" else [values[o.name] for o in op.inputs]
            out = [plan.buffer(o.name) if plan is not None else None for o in op.outputs]
            results = self._call(rop, args, out)
            if plan is not None and rop.name not in self._view_ops:
                for r, buf in zip(results, out):
                    if isinstance(r, np.ndarray) and r is not buf and any(
                        isinstance(a, np.ndarray) and np.may_share_memory(r, a) for a in args
                    ):
                        raise _ViewDetected(rop.name)
            for o, v in zip(op.outputs, results):
                values[o.name] = v
            # Liveness: drop what no later operator reads (planned buffers stay in the
            # plan; unplanned arrays are freed now).
            for o in op.inputs:
                if last_use.get(o.name, -1) <= rop.index:
                    values.pop(o.name, None)
        return values

    def _feeds(self, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        """pnnx.Input name -> array: the caller's arrays follow the file order of the inputs,
        which the execution order need not keep (DFS may visit input 2 before input 1)."""
        assert self.graph is not None
        return {op.name: a for op, a in zip(self.graph.inputs, inputs)}

    def _call(self, rop: RuntimeOperator, args: list[Value], out: list[np.ndarray | None]) -> list[Value]:
        layer = rop.layer
        assert layer is not None
        try:
            results = layer.forward(args, out)
        except Exception as e:
            raise_for_operator(e, rop.name, rop.type)
        if len(results) != len(rop.op.outputs):
            raise ModelError(
                f"layer returned {len(results)} output(s), the graph declares {len(rop.op.outputs)}",
                operator=rop.name,
                op_type=rop.type,
            )
        for r in results:  # a broadcast view costs no memory, but everything after it would
            if isinstance(r, np.ndarray) and r.size > self.limits.max_tensor_elements:
                try:
                    _limits.check_elements(r.shape, "the output", self.limits)
                except LimitError as e:
                    raise e.at_operator(rop.name, rop.type) from None
        for o, r in zip(rop.op.outputs, results):
            if isinstance(r, np.ndarray) and o.dtype is not None and r.dtype != numpy_dtype(o.dtype):
                raise ModelError(
                    f"output '{o.name}' has dtype {r.dtype}, the graph declares {o.dtype}",
                    operator=rop.name,
                    op_type=rop.type,
                )
        return results

    def _collect_outputs(self, values: dict[str, Value]) -> list[np.ndarray]:
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
        ins = self.graph.inputs
        if len(arrays) != len(ins):
            raise InputError(f"the model takes {len(ins)} input(s) ({', '.join(o.name for o in ins)}), got {len(arrays)}")
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
        return checked

    def _matches_declared(self, inputs: list[np.ndarray]) -> bool:
        assert self.graph is not None
        return all(op.outputs[0].static_shape == a.shape for op, a in zip(self.graph.inputs, inputs))


class StepRun(Iterator[StepEvent]):
    """The iterator returned by steps(), with this run's operand values."""

    def __init__(self, events: Iterator[StepEvent], values: dict[str, Value]) -> None:
        self._events = events
        self.values = values

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
            raise InputError(
                f"{where}: values from {lo} to {hi} do not fit in {want} ({name}: {info.min}..{info.max})"
            )
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
