"""A forward at batch >= 2 as two half-batch forwards on two threads (shards).

Why: with two BLAS threads only OpenBLAS's GEMMs use the second core; the im2col gathers,
Winograd transforms and elementwise passes run on one (ResNet-18 batch 4: 1.5x from one
thread to two, PyTorch 1.8x). Splitting each convolution over a worker never paid: a
hand-off costs 14-110 us and the worker often starts 1-5 ms late (bench/README.md). So the
forward is split by images instead: each shard is a complete PreparedForward (its own
buffers and kernels) for its part of the batch, run with OpenBLAS at one thread, one on the
caller's thread and one on a persistent worker, so a hand-off covers tens of ms.

When (RuntimeGraph.forward's policy): the BLAS runs >= 2 threads, every input has the same batch
>= 2 in dim 0, and `ShardedForward.build` found, at prepare, that
- the graph keeps images apart (`keeps_images_apart`): every operand computed from the
  inputs is batch-major at the whole batch and at the shard's (dim 0 the batch, the other
  dims the same), and no operator takes a dim parameter naming dim 0 (softmax over the
  batch keeps every shape), and every graph output is batch-major (outputs are concatenated);
  as a last guard, the sharded outputs match the whole forward's on the caller's input;
- the sharded run is faster than the whole one, both timed there (small models stay whole:
  the hand-off and a late-starting worker cost more than they win).

In turn: after any two-thread BLAS call OpenBLAS's pool thread spins ~0.1 s on a core, and
the worker then shares one core with it (ResNet-18 b4 right after a GEMM: 85 ms in parallel,
54 back to back). So a forward that starts after a pause (BACK_TO_BACK) first looks for
another running thread of the process (running_threads.py, ~13 us); if one runs, both shards
run on the caller's thread one after the other at the BLAS's own thread count (71 ms; the
whole forward 69), the spinning pool thread computing part of each GEMM. Only where that pays:
the whole forward timed at build under MAX_IN_TURN_SHARE of the sharded one. Outputs then
differ from the parallel run's by GEMM rounding (OpenBLAS's 1- and 2-thread sgemm differ in
the last bits).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

import numpy as np

from .. import limits as _limits
from ..errors import KuiperError
from ..threads import one_blas_thread
from .memory import ShapeDtype
from .prepared import NotPreparable, PreparedForward, Record
from .program import Program
from .running_threads import other_thread_running

if TYPE_CHECKING:  # imported with the first worker: `import kuiper_core` stays light
    from concurrent.futures import ThreadPoolExecutor

# Parameters that name a dimension: an operator naming dim 0 may mix images even where every
# shape stays batch-major (softmax, cumsum, flip over the batch).
DIM_PARAMS = ("dim", "dims", "axis", "axes", "dimension")
# Shard only when the sharded run takes at most this share of the whole one (both timed at
# prepare): below the gain, noise and a late worker decide.
MAX_SHARDED_SHARE = 0.9
# Sharded and whole outputs differ only by kernel choice (Winograd vs im2col at another batch):
# far below this share of the output's largest magnitude; mixed images differ by far more.
MATCH_TOLERANCE = 1e-3
# A forward starting within this time (s) of the previous one's end (a loop of forwards) runs in
# parallel without looking for other running threads (ShardedForward.run).
BACK_TO_BACK = 0.02
# Beside a spinning thread the parallel run takes ~1.55x its time, the in-turn run ~1.05x the
# whole forward's (ResNet-18 b4, measured): in turn only where the whole forward took under
# this share of the sharded one at build. The 2-thread whole forward's own gain varies with
# the machine (ResNet-18 b4 67 ms, and 90 on the same VM minutes later: 1.24x, 1.63x).
MAX_IN_TURN_SHARE = 1.4

# (the process it belongs to, the pool, its thread's native id)
_pool: tuple[int, ThreadPoolExecutor, int] | None = None


def shard_worker() -> tuple[ThreadPoolExecutor, int]:
    """The persistent thread that runs the second shard (or row band: row_sharded.py), and its native id (made at the first
    sharded forward; again in a forked child, where the parent's thread does not exist)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1, thread_name_prefix="kuiper-shard")
        _pool = (os.getpid(), pool, pool.submit(threading.get_native_id).result())
    return _pool[1], _pool[2]


def batch_size(inputs: Sequence[np.ndarray]) -> int:
    """The batch every input shares in dim 0 (0 when they do not, or there is no input)."""
    sizes = {a.shape[0] if a.ndim else -1 for a in inputs}
    return sizes.pop() if len(sizes) == 1 and inputs and inputs[0].ndim else 0


def _names_dim0(value: Any, rank: int) -> bool:
    dims = value if isinstance(value, list) else [value]
    return any(isinstance(d, int) and not isinstance(d, bool) and (d == 0 or d == -rank) for d in dims)


def keeps_images_apart(
    program: Program, whole: dict[str, ShapeDtype], shard: dict[str, ShapeDtype], n: int, m: int
) -> bool:
    """True if every operand computed from the inputs is batch-major at batch n (`whole`) and
    at batch m (`shard`), and no operator's dim parameter names dim 0 (module docstring)."""
    fixed = set(program.run_constants)  # constants: the same for every image
    for operator in program.run_order:
        op = operator.op
        ins = [o.name for o in op.inputs]
        if op.type != "pnnx.Input" and all(i in fixed for i in ins):
            fixed.update(o.name for o in op.outputs)  # pnnx.Attribute: a constant of its own
            continue
        rank = len(whole[ins[0]][0]) if ins and ins[0] in whole else 0
        if any(k in DIM_PARAMS and _names_dim0(v, rank) for k, v in op.params.items()):
            return False
        for o in op.outputs:
            a, b = whole.get(o.name), shard.get(o.name)
            if a is None or b is None or not a[0] or a[0][0] != n or b[0][0] != m or a[0][1:] != b[0][1:]:
                return False
    return not any(name in fixed for name in program.output_operands)  # concatenated by image


def close_enough(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    scale = float(np.abs(a).max()) if a.size else 0.0
    return bool(np.all(np.abs(a - b) <= MATCH_TOLERANCE * scale + 1e-6))


def run_times(run: Any, inputs: list[np.ndarray], repeats: int) -> tuple[list[float], list[np.ndarray]]:
    """The wall time of each of `repeats` runs, and the last run's outputs."""
    times, out = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = run(inputs)
        times.append(time.perf_counter() - t0)
    return times, out


def best_time(run: Any, inputs: list[np.ndarray], repeats: int = 2) -> tuple[float, list[np.ndarray]]:
    times, out = run_times(run, inputs, repeats)
    return min(times), out


class ShardedForward:
    """Two PreparedForwards, each for its slice of the batch (see the module docstring)."""

    def __init__(self, shards: list[PreparedForward], splits: list[slice], limits: _limits.Limits) -> None:
        self.shards = shards
        self.splits = splits
        self.limits = limits
        self._last_end = 0.0  # perf_counter() at the end of the last run()
        self.in_turn_pays = False  # set by build (MAX_IN_TURN_SHARE)

    @classmethod
    def make(cls, program: Program, inputs: list[np.ndarray], record: Record) -> ShardedForward | None:
        """Two half-batch prepared forwards, if the graph keeps images apart at these inputs
        (`record`: the whole forward's record run on them), else None. Not timed: see build."""
        n = batch_size(inputs)
        if n < 2:
            return None
        half = (n + 1) // 2
        splits = [slice(0, half), slice(half, n)]
        try:
            with one_blas_thread():  # the kernels' cost models see the thread count they will run at
                shards = [PreparedForward.build(program, [a[s] for a in inputs]) for s in splits]
        except (NotPreparable, KuiperError):
            return None  # e.g. a reshape with the traced batch written in
        for s in shards:
            s.first_outputs = []
        if not keeps_images_apart(program, record.shapes, shards[0].record.shapes, n, half):
            return None
        return cls(shards, splits, program.limits)

    @classmethod
    def build(
        cls, program: Program, inputs: list[np.ndarray], record: Record | None, ref: list[np.ndarray], t_whole: float
    ) -> tuple[ShardedForward | None, list[np.ndarray]]:
        """The sharded forward at these inputs if it keeps images apart and pays, else None,
        with its outputs. `record`, `ref`, `t_whole`: the whole forward's record run, outputs
        on these inputs and best time. Under the graph's lock."""
        sharded = cls.make(program, inputs, record) if record is not None else None
        if sharded is None:
            return None, []
        try:
            t_sharded, out = best_time(sharded.run_in_parallel, inputs)
        except Exception:
            # The whole forward just ran on these inputs: a failure here is the split's (halves
            # that do not stack, as one_hot's per-half class counts did), so it stays whole.
            return None, []
        if len(out) != len(ref) or not all(close_enough(a, b) for a, b in zip(ref, out)):
            return None, []
        if t_sharded > MAX_SHARDED_SHARE * t_whole:
            return None, []
        sharded.in_turn_pays = t_whole < MAX_IN_TURN_SHARE * t_sharded
        return sharded, out

    def _run_shard(self, k: int, part: list[np.ndarray]) -> list[np.ndarray]:
        with _limits.use(self.limits):  # the worker thread does not see the caller's context
            return self.shards[k].run(part)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        # Another thread on a core (mostly OpenBLAS's pool thread, spinning after someone's
        # two-thread GEMM) takes the worker's core: then in turn (module docstring). Checked only
        # after a pause: an in-turn run leaves the pool spinning in its turn, so in a loop of
        # forwards every check would see it and the loop would stay in turn (69 ms a forward,
        # 54 in parallel after one slow run).
        if (
            self.in_turn_pays
            and time.perf_counter() - self._last_end >= BACK_TO_BACK
            and other_thread_running(exclude=(shard_worker()[1],))
        ):
            outputs = self.run_in_turn(inputs)
        else:
            outputs = self.run_in_parallel(inputs)
        self._last_end = time.perf_counter()
        return outputs

    def run_in_turn(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Both shards on the caller's thread, one after the other, at the BLAS's thread count:
        the same kernels, each GEMM's rounding that of its thread count."""
        first, rest = (shard.run([a[s] for a in inputs]) for shard, s in zip(self.shards, self.splits))
        return [np.concatenate([a, b]) for a, b in zip(first, rest)]

    def run_in_parallel(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        parts = [[a[s] for a in inputs] for s in self.splits]
        with one_blas_thread():
            second = shard_worker()[0].submit(self._run_shard, 1, parts[1])
            try:
                first = self.shards[0].run(parts[0])
            finally:
                # Wait even when shard 0 failed: the BLAS count is restored only after both.
                rest = second.result() if second.exception() is None else None
            if rest is None:
                raise second.exception()  # type: ignore[misc]  # names its operator (PreparedForward.run)
        return [np.concatenate([a, b]) for a, b in zip(first, rest)]


__all__ = ["ShardedForward", "batch_size", "keeps_images_apart"]
