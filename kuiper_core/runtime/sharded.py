"""A forward at batch >= 2 as two half-batch forwards on two threads (shards).

Why: with two BLAS threads only OpenBLAS's GEMMs use the second core; the im2col gathers,
Winograd transforms and elementwise passes run on one. Splitting each convolution over a
worker never paid (a hand-off costs tens of microseconds and a worker may start milliseconds
late; docs/speed.md, "Two cores"). So the forward is split by images instead: each shard is a complete
PreparedForward (its own buffers and kernels) for its part of the batch, run with OpenBLAS at
one thread (the caller holds that count: policy.py), one on the caller's thread and one on a
persistent worker, so a hand-off covers a whole half forward.

When (policy.py, `ExecutionOptions.shards`): asked for (`executor="sharded"`), or under
"auto" at two BLAS threads; every input has the same batch >= 2 in dim 0, and
`ShardedForward.make` finds
- the graph keeps images apart (`keeps_images_apart`): every operand computed from the
  inputs is batch-major at the whole batch and at the shard's (dim 0 the batch, the other
  dims the same), and no operator takes a dim parameter naming dim 0 (softmax over the
  batch keeps every shape), and every graph output is batch-major (outputs are concatenated);
- as a last guard, the sharded outputs match the interpreter's on the first call's input.
Its outputs differ from the whole forward's by kernel choice at the half batch and by GEMM
rounding at one BLAS thread (bounded in docs/limits.md).
"""

from __future__ import annotations

import contextvars
import os
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

import numpy as np

from ..errors import KuiperError
from .memory import ShapeDtype
from .prepared import NotPreparable, PreparedForward, record
from .program import Program

if TYPE_CHECKING:  # imported with the first worker: `import kuiper_core` stays light
    from concurrent.futures import ThreadPoolExecutor

# Parameters that name a dimension: an operator naming dim 0 may mix images even where every
# shape stays batch-major (softmax, cumsum, flip over the batch).
DIM_PARAMS = ("dim", "dims", "axis", "axes", "dimension")
# Sharded and whole outputs differ only by kernel choice (Winograd vs im2col at another batch)
# and GEMM rounding: far below this share of the output's largest magnitude; mixed images
# differ by far more.
MATCH_TOLERANCE = 1e-3

# (the process it belongs to, the pool)
_pool: tuple[int, ThreadPoolExecutor] | None = None


def shard_worker() -> ThreadPoolExecutor:
    """The persistent thread that runs the second shard (made at the first sharded forward;
    again in a forked child, where the parent's thread does not exist)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        _pool = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="kuiper-shard"))
    return _pool[1]


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


class ShardedForward:
    """Two PreparedForwards, each for its slice of the batch (see the module docstring)."""

    def __init__(self, shards: list[PreparedForward], splits: list[slice]) -> None:
        self.shards = shards
        self.splits = splits

    @classmethod
    def make(cls, program: Program, inputs: list[np.ndarray]) -> ShardedForward | None:
        """Two half-batch prepared forwards, if the graph keeps images apart at these inputs and
        their outputs match the interpreter's, else None. Run at one BLAS thread (the kernels'
        cost models see the count they run at)."""
        n = batch_size(inputs)
        if n < 2:
            return None
        half = (n + 1) // 2
        splits = [slice(0, half), slice(half, n)]
        try:
            rec = record(program, inputs)
            shards = [PreparedForward.build(program, [a[s] for a in inputs]) for s in splits]
        except (NotPreparable, KuiperError):
            return None  # e.g. a reshape with the traced batch written in
        for s in shards:
            s.first_outputs = []
        if not keeps_images_apart(program, rec.shapes, shards[0].record.shapes, n, half):
            return None
        sharded = cls(shards, splits)
        want = rec.outputs  # the interpreter's, on these inputs
        try:
            got = sharded.run(inputs)
        except Exception:
            # The interpreter just ran on these inputs: a failure here is the split's (halves
            # that do not stack, as one_hot's per-half class counts did), so it stays whole.
            return None
        if len(got) != len(want) or not all(close_enough(a, b) for a, b in zip(want, got)):
            return None  # images mixed by an operator with no dim parameter
        return sharded

    def owned(self) -> bool:
        """Runnable in this process (a forked child makes its own worker thread)."""
        return True

    def close(self) -> None:
        """Nothing beyond memory to let go of (the worker thread is shared)."""

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Both shards at once, the second on the worker (the caller holds one BLAS thread). The
        worker runs in a copy of the caller's context: the same limits and kernel choice
        inputs (the options' costs, one thread) as the first shard."""
        parts = [[a[s] for a in inputs] for s in self.splits]
        second = shard_worker().submit(contextvars.copy_context().run, self.shards[1].run, parts[1])
        try:
            first = self.shards[0].run(parts[0])
        finally:
            # Wait even when shard 0 failed: the worker's buffers are in use until it is done.
            rest = second.result() if second.exception() is None else None
        if rest is None:
            raise second.exception()  # type: ignore[misc]  # names its operator (PreparedForward.run)
        return [np.concatenate([a, b]) for a, b in zip(first, rest)]


__all__ = ["ShardedForward", "batch_size", "keeps_images_apart"]
