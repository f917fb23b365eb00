"""RuntimeGraph: a Graph made runnable (seed 004's states NeedInit -> NeedBuild -> Complete).

init()  reads .param + .bin into a Graph with the reader it was given (NeedInit -> NeedBuild);
        reading files is the formats' job (kuiper_core.load passes kuiper_core.formats')
build() makes the Program (program.py: execution order, bindings, folded constants, layers,
        the declared-shape buffer plan)                        (NeedBuild -> Complete)
forward(*arrays) and steps(*arrays) check the inputs (inputs.py), then hand the Program to
one executor, chosen by the execution policy (policy.py) from the Program, the input shapes
and the caller's `ExecutionOptions` alone; `last_executor` names the one that ran:

- "reference" (asked for): the interpreter calling each layer's plain definition;
- "interpreter" (interpreter.py): the first run at each set of input shapes of a graph the
  prepared forward cannot take (its outputs checked against their annotations), graphs
  whose shapes follow the input values, and every call where the options ask for it;
- "prepared" (prepared.py): a flat list of prepared calls on planned buffers, made at the first
  run at a set of input shapes (its record run is the interpreter's checked run);
- "planned" (planned.py): graphs that cannot be prepared, after their checked run;
- "sharded" (sharded.py): at batch >= 2, two half-batch forwards on two threads (asked for,
  or under "auto" at two BLAS threads);
- "split" (split_forward.py, asked for): at batch 1, big operators in halves, one half in a
  helper process;
- steps(): "step arena" (step_arena.py: bound calls on one block of operand memory), else
  "interpreter steps" (one operator at a time, calling the layers' prepared functions).

Every call holds the BLAS at the options' thread count (kuiper_core/threads.py) and tells the
layers' kernel choice that count and the options' kernel costs (layers/kernel_costs.py).
Consumers read their producers' output arrays by reference: nothing is copied.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from .. import limits as _limits
from ..threads import blas_threads, using_blas_threads
from ..errors import KuiperError
from ..graph import Graph
from ..layers import kernel_costs
from ..layers.kernel_costs import ChoiceInputs
from ..layers.registry import Layer
from . import interpreter
from .calls import signature
from .events import StepEvent, StepRun
from .inputs import InputCheck
from .memory import BufferPlan
from .planned import PlannedForward, ViewNotes
from .policy import ExecutionOptions, Ran
from .prepared import NotPreparable, PreparedForward, PreparedSteps
from .program import Program, build
from .runtime_operator import RuntimeOperator, Value
from .sharded import ShardedForward, batch_size
from .step_arena import StepArenas

if TYPE_CHECKING:  # imported where the split executor is asked for: `import kuiper_core` stays light
    from .split_forward import SplitForward

# Input signatures whose first run was checked (the planned forward's); beyond this many, start again.
MAX_CHECKED_SIGNATURES = 256
# Input signatures kept prepared (prepared.py; each prepared forward holds its own buffers).
MAX_PREPARED = 4


@dataclass
class ShapeExecutors:
    """What a RuntimeGraph made for one input signature (its shapes and dtypes)."""

    prepared: PreparedForward | None = None
    preparable: bool = True  # False: the prepared forward cannot take the graph at these shapes
    parallel: ShardedForward | SplitForward | None = None  # the sharded or split one
    parallel_tried: bool = False  # made, or found not to apply, at these shapes

    def close(self) -> None:
        """End what the executors hold beyond memory (a split forward's helper process)."""
        close = getattr(self.parallel, "close", None)
        if close is not None:
            close()


class GraphState(IntEnum):
    NeedInit = -2
    NeedBuild = -1
    Complete = 0


class RuntimeGraph:
    def __init__(
        self,
        param_path: str | Path | None = None,
        bin_path: str | Path | None = None,
        *,
        graph: Graph | None = None,
        limits: _limits.Limits | None = None,
        options: ExecutionOptions | None = None,
        reader: Callable[[Path, Path | None], Graph] | None = None,
    ) -> None:
        """A graph to run (`graph`), or the files init() reads with `reader` (param path, bin
        path or None -> Graph: e.g. `lambda p, b: kuiper_core.open_model(p, bin_path=b).graph`)."""
        # The limits this graph was created under apply to its build, forward and steps.
        self._limits = limits or _limits.current()
        self._options = options or ExecutionOptions()
        self._blas = self._options.threads or blas_threads()  # fixed now: the same count every call
        self._choices: dict[int, ChoiceInputs] = {}  # what kernel choice reads, by BLAS thread count
        self.last_executor: Ran | None = None  # what ran the latest forward() or steps()
        self.param_path = Path(param_path) if param_path is not None else None
        self.bin_path = Path(bin_path) if bin_path is not None else None
        self.graph: Graph | None = graph  # None until init() reads it
        self._reader = reader
        # A graph this runtime read itself is nobody else's: its weights may be let go of
        # after build. A graph given to it stays as its owner keeps it (a pass pipeline
        # may still save it, over the very .bin it was read from).
        self.owns_graph = graph is None
        self.state = GraphState.NeedBuild if graph is not None else GraphState.NeedInit
        self.program: Program | None = None  # made by build()
        self.values: Mapping[str, Value] = {}  # operand values of the latest steps() run
        # Executors own buffers: one run at a time (the app caches one RuntimeGraph for every
        # browser session).
        self._run_lock = threading.Lock()
        self._reset_executors()

    def _reset_executors(self) -> None:
        """Forget every executor's state (after a build, new limits or new options)."""
        self._check_inputs = InputCheck(self.program) if self.program is not None else None
        for made in getattr(self, "_executors", {}).values():
            made.close()
        self._executors: dict[tuple, ShapeExecutors] = {}  # by input signature
        self._arenas: dict[tuple, StepArenas] = {}
        self._step_calls: dict[tuple, PreparedSteps] = {}
        self._step_signature: tuple | None = None  # the input shapes of the latest steps()
        # Graphs that cannot be prepared: signatures whose first run was checked, and the
        # planned forward at the declared input shapes.
        self._checked: set[tuple] = set()
        self._planned: PlannedForward | None = None

    @classmethod
    def from_graph(
        cls,
        graph: Graph,
        limits: _limits.Limits | None = None,
        *,
        owned: bool = False,
        options: ExecutionOptions | None = None,
    ) -> RuntimeGraph:
        """owned: nothing else keeps `graph`, so its weights may go after build (as when read here)."""
        runtime = cls(graph=graph, limits=limits, options=options)
        runtime.owns_graph = owned
        return runtime

    # -- states ---------------------------------------------------------------------------
    def init(self) -> None:
        if self.state != GraphState.NeedInit:
            return
        if self.param_path is None or self._reader is None:
            raise KuiperError("no file and reader to initialise from: use kuiper_core.load(path), or pass reader=")
        with _limits.use(self.limits):
            self.graph = self._reader(self.param_path, self.bin_path)
        self.state = GraphState.NeedBuild

    def build(self, algorithm: str = "dfs") -> RuntimeGraph:
        if self.state == GraphState.Complete and algorithm == self.algorithm:
            return self
        if self.state == GraphState.NeedInit:
            self.init()
        assert self.graph is not None  # init() read it
        self.program = build(self.graph, algorithm, limits=self.limits, release_weights=self.owns_graph)
        self._reset_executors()
        self.state = GraphState.Complete
        return self

    def _built(self) -> Program:
        if self.state != GraphState.Complete:
            self.build()
        assert self.program is not None  # build() made it
        return self.program

    # -- the Program's fields (empty before build) -------------------------------------------
    @property
    def limits(self) -> _limits.Limits:
        return self._limits

    @limits.setter
    def limits(self, limits: _limits.Limits) -> None:
        """New limits apply from the next run on (the executors are made again under them)."""
        self._limits = limits
        if self.program is not None:
            self.program = self.program.with_limits(limits)
            self._reset_executors()

    @property
    def options(self) -> ExecutionOptions:
        """Which executor runs and at how many BLAS threads (policy.py)."""
        return self._options

    @options.setter
    def options(self, options: ExecutionOptions) -> None:
        """New options apply from the next run on (the executors are made again under them)."""
        with self._run_lock:
            self._options = options
            self._blas = options.threads or blas_threads()
            self._choices = {}
            self._reset_executors()

    def _choice(self, threads: int) -> ChoiceInputs:
        """What kernel choice reads at `threads` under the options (one object per count: layers
        key their kernels on it)."""
        choice = self._choices.get(threads)
        if choice is None:
            choice = self._choices[threads] = ChoiceInputs(self._options.kernel_costs, threads)
        return choice

    def _at(self, threads: int) -> AbstractContextManager[None]:
        """A call's footing: the BLAS at `threads`, and the layers' kernel choice told that count
        and the options' costs."""
        return _held(threads, self._choice(threads))

    def kernel_name(self, layer: Layer, shapes: list[tuple[int, ...]]) -> str:
        """The kernel `layer` (one of this graph's) runs at these input shapes in a forward()
        under "auto" (Layer.kernel_name, told this graph's thread count and kernel costs)."""
        with kernel_costs.choosing(self._choice(self._blas)):
            return layer.kernel_name(shapes)

    @property
    def blas_threads(self) -> int:
        """The BLAS thread count this graph's calls run at (the options', else the process's
        count when the graph was made); the sharded and split executors' halves run at one."""
        return self._blas

    @property
    def order(self) -> tuple[RuntimeOperator, ...]:
        return self.program.order if self.program is not None else ()

    @property
    def operators(self) -> Mapping[str, RuntimeOperator]:
        """By key (Graph.operator_keys: the name, `name#2`… where pnnx repeated it)."""
        return self.program.operators if self.program is not None else MappingProxyType({})

    @property
    def constants(self) -> Mapping[str, Value]:
        """Operands folded at build."""
        return self.program.constants if self.program is not None else MappingProxyType({})

    @property
    def plan(self) -> BufferPlan | None:
        """The buffer plan at the declared shapes (the planned forward's)."""
        return self.program.plan if self.program is not None else None

    @property
    def algorithm(self) -> str:
        return self.program.algorithm if self.program is not None else "dfs"

    @property
    def value_shaped(self) -> frozenset[str]:
        return self.program.value_shaped if self.program is not None else frozenset()

    @property
    def input_operands(self) -> list[str]:
        """The pnnx.Input operands, in the order forward() takes its arrays."""
        if self.program is not None:
            return list(self.program.input_operands)
        assert self.graph is not None, "init() reads the graph first"
        return [op.outputs[0].name for op in self.graph.inputs]

    def outputs_of(self, values: Mapping[str, Value]) -> list[np.ndarray]:
        """The graph outputs from operand values (e.g. after steps())."""
        return self._built().outputs_of(values)

    # -- running ----------------------------------------------------------------------------
    def forward(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """Run the model; outputs in pnnx.Output order with tuples flattened. `last_executor`
        then names the executor that ran (policy.py)."""
        program = self._built()
        assert self._check_inputs is not None
        # as torch: silent on overflow, 0/0, log(-1) (inf and nan are the answer; no NumPy
        # warning naming this file reaches the user), in every executor
        with _limits.use(self.limits), np.errstate(all="ignore"):
            inputs = self._check_inputs(arrays)
            ran, outputs = self._forward(program, inputs)
        self.last_executor = ran
        return outputs

    def _forward(self, program: Program, inputs: list[np.ndarray]) -> tuple[Ran, list[np.ndarray]]:
        request = self._options.executor
        if request == "reference":
            with self._at(self._blas):
                return "reference", program.outputs_of(
                    interpreter.run(program, inputs, call=interpreter.call_reference)
                )
        if request == "interpreter" or program.value_shaped:  # value-shaped: no fixed buffers fit
            with self._at(self._blas):
                return "interpreter", program.outputs_of(interpreter.run(program, inputs))
        key = signature(inputs)
        sharded = self._options.shards(self._blas, batch_size(inputs))
        with self._run_lock:
            made = self._executors_for(key)
            if sharded or request == "split":
                with self._at(1):
                    parallel = self._parallel(program, made, inputs, sharded)
                    if parallel is not None:
                        return ("sharded" if sharded else "split"), parallel.run(inputs)
            if made.preparable:
                with self._at(self._blas):
                    outputs = self._prepared(program, made, inputs)
                if outputs is not None:
                    return "prepared", outputs
        return self._forward_unprepared(program, key, inputs)

    def _executors_for(self, key: tuple) -> ShapeExecutors:
        made = self._executors.get(key)
        if made is None:
            if len(self._executors) >= MAX_PREPARED:
                self._executors.pop(next(iter(self._executors))).close()
            made = self._executors[key] = ShapeExecutors()
        return made

    def _prepared(self, program: Program, made: ShapeExecutors, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """The prepared forward's outputs, made at the first call at these shapes (its binding
        run's outputs); None where the graph cannot be prepared."""
        if made.prepared is not None:
            return made.prepared.run(inputs)
        try:
            prepared = PreparedForward.build(program, inputs)
        except NotPreparable:
            made.preparable = False
            return None
        made.prepared = prepared
        outputs, prepared.first_outputs = prepared.first_outputs, []
        return outputs

    def _parallel(
        self, program: Program, made: ShapeExecutors, inputs: list[np.ndarray], sharded: bool
    ) -> ShardedForward | SplitForward | None:
        """The sharded or split forward at these shapes, made at the first call (at
        one BLAS thread: the kernels' cost models see the count they run at); None where it
        does not apply (the batch, the graph), and then the whole forward runs."""
        parallel = made.parallel
        if parallel is not None and not parallel.owned():
            made.close()  # a process forked from this one: its helper and buffers are the maker's
            made.parallel, made.parallel_tried = None, False
        if not made.parallel_tried:
            made.parallel_tried = True
            if sharded:
                made.parallel = ShardedForward.make(program, inputs)
            else:
                from .split_forward import SplitForward

                made.parallel = SplitForward.make(program, inputs, sizes=self._options.split_sizes)
        return made.parallel

    def _forward_unprepared(
        self, program: Program, key: tuple, inputs: list[np.ndarray]
    ) -> tuple[Ran, list[np.ndarray]]:
        """A graph the prepared forward cannot take: the interpreter's checked run first at
        each input signature (noting which operators return views), then the planned forward
        (unplanned at other than the declared input shapes)."""
        declared = program.matches_declared(inputs)
        outputs: list[np.ndarray] | None
        if key not in self._checked:
            notes = ViewNotes()
            with self._at(self._blas):
                outputs = program.outputs_of(interpreter.run(program, inputs, notes.note))
            if len(self._checked) >= MAX_CHECKED_SIGNATURES:
                self._checked.clear()
            self._checked.add(key)
            if declared:
                with self._run_lock:
                    self._planned = PlannedForward(program, notes.views)
            return "interpreter", outputs
        if not declared:
            with self._at(self._blas):
                outputs = PlannedForward(program, None).run(inputs)
        else:
            with self._run_lock, self._at(self._blas):
                outputs = self._planned.run(inputs) if self._planned is not None else None
                if outputs is None:  # a layer broke the view contract: the interpreter from now on
                    self._planned = None
        if outputs is not None:
            return "planned", outputs
        with self._at(self._blas):
            return "interpreter", program.outputs_of(interpreter.run(program, inputs))

    def steps(self, *arrays: np.ndarray) -> StepRun:
        """Run one operator per iteration. The returned iterator's `.values` holds every
        operand computed so far (also `self.values` until the next steps() call). Every
        operand of a run has memory of its own, which no later run writes while anything
        still holds it (step_arena.py), so concurrent runs never share buffers."""
        program = self._built()
        assert self._check_inputs is not None
        with _limits.use(self.limits):
            inputs = self._check_inputs(arrays)
        self.values = {}  # let go of the last run's values: its arena may be free now
        key = signature(inputs)
        calls, arenas = self._steps_for(key)
        started = None
        if not program.value_shaped:  # an arena is laid out from one run's shapes
            made = self._executors.get(key)
            forward = made.prepared if made is not None else None
            with self._at(self._blas):
                started = arenas.start(program, inputs, forward.record if forward is not None else None)
        values: Mapping[str, Value]
        if started is not None:  # a free arena's flat run (step_arena.py)
            (run, values), self.last_executor = started, "step arena"
        else:  # the interpreter, one operator at a time, calling the layers' prepared functions
            fresh: dict[str, Value] = {}
            run, values = interpreter.steps(program, inputs, fresh, calls.call), fresh
            self.last_executor = "interpreter steps"
        self.values = values
        # The walk runs in a context of its own where the kernel choice is this graph's: set
        # once, not per step (per-step cost: bench/compare.py's step-mode table).
        walk = contextvars.copy_context()
        walk.run(kernel_costs.enter, self._choice(self._blas))
        return StepRun(_each_at(self._blas, walk, run), values)

    def _steps_for(self, key: tuple) -> tuple[PreparedSteps, StepArenas]:
        arenas = self._arenas.get(key)
        if arenas is None:
            if len(self._arenas) >= MAX_PREPARED:
                self._step_calls.pop(next(iter(self._arenas)), None)
                self._arenas.pop(next(iter(self._arenas)))
            arenas = self._arenas[key] = StepArenas()
            self._step_calls[key] = PreparedSteps()
        if key != self._step_signature:
            # Arenas are kept for the latest input shapes only: up to MAX_ARENA_BYTES per
            # graph, not per signature (a run still holding an older arena keeps its memory).
            for other, kept in self._arenas.items():
                if other != key:
                    kept.release()
            self._step_signature = key
        return self._step_calls[key], arenas


@contextmanager
def _held(threads: int, choice: ChoiceInputs) -> Iterator[None]:
    with using_blas_threads(threads):
        token = kernel_costs.enter(choice)
        try:
            yield
        finally:
            kernel_costs.leave(token)


def _each_at(threads: int, walk: contextvars.Context, events: Iterator[StepEvent]) -> Iterator[StepEvent]:
    """The steps, each computed at the BLAS thread count `threads` (not held between steps: a
    caller may pause for minutes between two, and other calls must not wait for it) in the
    walk's context (its kernel choice)."""
    try:
        while True:
            with using_blas_threads(threads):
                event = walk.run(next, events, None)
            if event is None:
                return
            yield event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


__all__ = [
    "ExecutionOptions",
    "GraphState",
    "ShapeExecutors",
    "RuntimeGraph",
    "RuntimeOperator",
    "StepEvent",
    "StepRun",
]
