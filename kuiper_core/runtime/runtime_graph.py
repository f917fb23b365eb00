"""RuntimeGraph: a Graph made runnable (seed 004's states NeedInit -> NeedBuild -> Complete).

init()  reads .param + .bin into a Graph                       (NeedInit  -> NeedBuild)
build() makes the Program (program.py: execution order, bindings, folded constants, layers,
        the declared-shape buffer plan)                        (NeedBuild -> Complete)
forward(*arrays) and steps(*arrays) check the inputs (inputs.py), then hand the Program to
one executor, chosen by a short policy (`_executor_for`, `steps`):

- the reference interpreter (interpreter.py): the first run at each set of input shapes (its
  outputs checked against their annotations), graphs whose shapes follow the input values,
  and steps() where no step arena is free (calling the layers' prepared functions there);
- the prepared forward (prepared.py): later runs, as a flat list of prepared calls on
  planned buffers;
- the sharded forward (sharded.py): at batch >= 2 with >= 2 BLAS threads, where splitting
  the batch over two threads paid when timed;
- the split forward (split_forward.py): at batch 1 with >= 2 BLAS threads, every big
  convolution, pool, activation, norm, concat... in two halves, one in a helper process,
  where that paid when timed (ResNet-18 b1 ~0.75x the whole forward's time);
- the row-sharded forward (row_sharded.py): at batch 1 with >= 2 BLAS threads, the
  convolutional prefix as two row bands on two threads, where that paid when timed;
- the planned forward (planned.py): graphs that cannot be prepared, after their checked run;
- step arenas (step_arena.py): steps() as bound calls on one block of operand memory.

Consumers read their producers' output arrays by reference: nothing is copied.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from enum import IntEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from .. import limits as _limits
from .. import threads
from ..errors import KuiperError
from ..graph import Graph
from . import interpreter
from .calls import signature
from .events import StepEvent, StepRun
from .inputs import InputCheck
from .memory import BufferPlan
from .planned import PlannedForward, ViewNotes
from .prepared import NotPreparable, PreparedForward, PreparedSteps
from .program import Program, build
from .runtime_operator import RuntimeOperator, Value
from .sharded import ShardedForward, batch_size, best_time
from .step_arena import StepArenas

if TYPE_CHECKING:  # imported at the first batch-1 forward at two threads: `import kuiper_core` stays light
    from .row_sharded import RowShardedForward
    from .split_forward import SplitForward

# Input signatures whose first run was checked (the planned forward's); beyond this many, start again.
MAX_CHECKED_SIGNATURES = 256
# Input signatures kept prepared (prepared.py; each prepared forward holds its own buffers).
MAX_PREPARED = 4


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
    ) -> None:
        # The limits this graph was created under apply to its build, forward and steps.
        self._limits = limits or _limits.current()
        self.param_path = Path(param_path) if param_path is not None else None
        self.bin_path = Path(bin_path) if bin_path is not None else None
        self.graph: Graph | None = graph  # None until init() reads it
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
        """Forget every executor's state (after a build, or new limits)."""
        self._check_inputs = InputCheck(self.program) if self.program is not None else None
        # Per input signature: the prepared forward (None: the graph cannot be prepared), the
        # sharded one (None: it stays whole), the step arenas, steps()' prepared functions.
        self._prepared: dict[tuple, PreparedForward | None] = {}
        self._sharded: dict[tuple, ShardedForward | RowShardedForward | SplitForward | None] = {}
        self._arenas: dict[tuple, StepArenas] = {}
        self._step_calls: dict[tuple, PreparedSteps] = {}
        self._step_signature: tuple | None = None  # the input shapes of the latest steps()
        # Graphs that cannot be prepared: signatures whose first run was checked, and the
        # planned forward at the declared input shapes.
        self._checked: set[tuple] = set()
        self._planned: PlannedForward | None = None

    @classmethod
    def from_graph(cls, graph: Graph, limits: _limits.Limits | None = None, *, owned: bool = False) -> RuntimeGraph:
        """owned: nothing else keeps `graph`, so its weights may go after build (as when read here)."""
        runtime = cls(graph=graph, limits=limits)
        runtime.owns_graph = owned
        return runtime

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
        """Run the model; outputs in pnnx.Output order with tuples flattened."""
        program = self._built()
        assert self._check_inputs is not None
        # as torch: silent on overflow, 0/0, log(-1) (inf and nan are the answer; no NumPy
        # warning naming this file reaches the user), in every executor
        with _limits.use(self.limits), np.errstate(all="ignore"):
            inputs = self._check_inputs(arrays)
            if program.value_shaped:  # shapes that change with the values: no fixed buffers fit
                return program.outputs_of(interpreter.run(program, inputs))
            key = signature(inputs)
            with self._run_lock:
                outputs = self._fast_forward(program, key, inputs)
            if outputs is not None:
                return outputs
            return self._forward_unprepared(program, key, inputs)

    def _fast_forward(self, program: Program, key: tuple, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        """The sharded or prepared forward's outputs (under the lock); None if the graph cannot
        be prepared. The first run at a signature prepares (its record run is the checked run),
        the second decides whether it runs sharded (by images, or at batch 1 by rows)."""
        two, batch = threads.blas_threads() >= 2, batch_size(inputs)
        shard, rows = two and batch >= 2, two and batch == 1
        sharded = self._sharded.get(key) if shard or rows else None
        owned = getattr(sharded, "owned", None)  # SplitForward's (imported at first use)
        if owned is not None and not owned():
            sharded = None  # a forked process: its buffers are its maker's; the whole forward here
        if sharded is not None:  # split by images or rows over two threads (sharded.py, row_sharded.py)
            return sharded.run(inputs)
        if key not in self._prepared:
            return self._prepare(program, key, inputs)
        prepared = self._prepared[key]
        if prepared is None:
            return None
        if shard and key not in self._sharded:
            return self._shard(program, key, prepared, inputs)  # the second run decides
        if rows and key not in self._sharded:
            return self._shard_rows(program, key, prepared, inputs)
        return prepared.run(inputs)

    def _prepare(self, program: Program, key: tuple, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
        try:
            prepared: PreparedForward | None = PreparedForward.build(program, inputs)
        except NotPreparable:
            prepared = None
        if len(self._prepared) >= MAX_PREPARED:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = prepared
        if prepared is None:
            return None
        outputs, prepared.first_outputs = prepared.first_outputs, []
        return outputs

    def _shard(
        self, program: Program, key: tuple, whole: PreparedForward, inputs: list[np.ndarray]
    ) -> list[np.ndarray]:
        """Decide whether this signature runs sharded; this call's outputs. The whole forward
        is let go of first, so that the shards' buffers reuse its memory (ResNet-18 b4 peak RSS
        220 -> 202 MiB); made again if the graph stays whole, or at the next call at one BLAS
        thread."""
        del self._prepared[key]
        t_whole, outputs = best_time(whole.run, inputs)
        record = whole.record
        del whole  # the last reference: its buffers go back to the allocator
        sharded, sharded_outputs = ShardedForward.build(program, inputs, record, outputs, t_whole)
        if len(self._sharded) >= MAX_PREPARED:
            self._sharded.pop(next(iter(self._sharded)))
        self._sharded[key] = sharded
        if sharded is None:  # whole again, prepared now: later calls take the hot path
            return self._prepare(program, key, inputs) or outputs
        return sharded_outputs

    def _shard_rows(
        self, program: Program, key: tuple, whole: PreparedForward, inputs: list[np.ndarray]
    ) -> list[np.ndarray]:
        """Decide whether this batch-1 signature runs with its operators split in halves over
        two threads (split_forward.py), else as row bands (row_sharded.py), else whole; this
        call's outputs (the whole forward's)."""
        from .row_sharded import RowShardedForward
        from .split_forward import SplitForward

        t_whole, outputs = best_time(whole.run, inputs)
        chosen: SplitForward | RowShardedForward | None = SplitForward.build(program, inputs, whole, outputs, t_whole)
        if chosen is None:
            chosen = RowShardedForward.build(program, inputs, whole, outputs, t_whole)
        if len(self._sharded) >= MAX_PREPARED:
            dropped = self._sharded.pop(next(iter(self._sharded)))
            if isinstance(dropped, SplitForward):
                dropped.close()  # its helper process ends now, not when the collector finds it
        self._sharded[key] = chosen
        return outputs

    def _forward_unprepared(self, program: Program, key: tuple, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """A graph the prepared forward cannot take: the interpreter's checked run first at
        each input signature (noting which operators return views), then the planned forward
        (unplanned at other than the declared input shapes)."""
        declared = program.matches_declared(inputs)
        outputs: list[np.ndarray] | None
        if key not in self._checked:
            notes = ViewNotes()
            outputs = program.outputs_of(interpreter.run(program, inputs, notes.note))
            if len(self._checked) >= MAX_CHECKED_SIGNATURES:
                self._checked.clear()
            self._checked.add(key)
            if declared:
                with self._run_lock:
                    self._planned = PlannedForward(program, notes.views)
            return outputs
        if not declared:
            outputs = PlannedForward(program, None).run(inputs)
        else:
            with self._run_lock:
                outputs = self._planned.run(inputs) if self._planned is not None else None
                if outputs is None:  # a layer broke the view contract: the interpreter from now on
                    self._planned = None
        return outputs if outputs is not None else program.outputs_of(interpreter.run(program, inputs))

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
            forward = self._prepared.get(key)
            started = arenas.start(program, inputs, forward.record if forward is not None else None)
        values: Mapping[str, Value]
        if started is not None:  # a free arena's flat run (step_arena.py)
            run, values = started
        else:  # the interpreter, one operator at a time, calling the layers' prepared functions
            fresh: dict[str, Value] = {}
            run, values = interpreter.steps(program, inputs, fresh, calls.call), fresh
        self.values = values
        return StepRun(run, values)

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


__all__ = ["GraphState", "RuntimeGraph", "RuntimeOperator", "StepEvent", "StepRun"]
