"""A forward at batch 1 whose big operators each run in two halves on two threads.

Why: with two BLAS threads only OpenBLAS's bigger GEMMs use the second core (ResNet-18 b1:
~1.35x from one thread to two, PyTorch ~1.7x). Here the BLAS runs one thread for the whole
forward and every convolution and pooling with enough work is split in two (layers/halves.py:
the caller's thread and a persistent helper, ~10 us a hand-off on a quiet machine): its
transforms, gathers and scatters run on both cores too, and no OpenBLAS pool thread spins on
a core the helper needs. It is a PreparedForward built inside `halves.splitting()` (the
layers' prepared calls split themselves) at one BLAS thread (the kernels' cost models see the
count they run at).

When (RuntimeGraph's policy): the BLAS runs >= 2 threads, there is one 4-D input at batch 1,
some operator split, the outputs match the whole forward's (the last guard), and the split
run is faster than the whole, both timed at the second forward at these shapes.

Measured (docs/BENCHMARKS.md, 2026-11-27): ResNet-18 b1 on a quiet 2-core VM 26.5-27.6 ms split
against 26.8-26.9 whole (so the policy keeps it whole there); with other jobs on the cores
28-92 ms against 64-462 (the whole forward's two-thread GEMMs wait for a descheduled OpenBLAS
thread; here the caller runs a half the helper has not started).
"""

from __future__ import annotations

import numpy as np

from ..errors import KuiperError
from ..layers.halves import splitting
from ..threads import one_blas_thread
from .prepared import NotPreparable, PreparedForward, Record
from .program import Program
from .sharded import best_time, close_enough

# Split only when it takes at most this share of the whole forward's time (both timed at the
# second forward at these shapes), as sharded.py's MAX_SHARDED_SHARE.
MAX_SPLIT_SHARE = 0.9


class SplitForward:
    """A prepared forward whose big calls run in halves, at one BLAS thread (module docstring)."""

    def __init__(self, prepared: PreparedForward, splits: int) -> None:
        self.prepared = prepared
        self.splits = splits  # how many calls run in halves

    @classmethod
    def make(cls, program: Program, inputs: list[np.ndarray], rec: Record | None = None) -> SplitForward | None:
        """The split forward at these inputs, or None where no call splits. Not timed: see build.
        `rec`: the whole forward's record run on these inputs (the checks are not run again)."""
        if len(inputs) != 1 or inputs[0].ndim != 4 or inputs[0].shape[0] != 1:
            return None
        try:
            with one_blas_thread(), splitting() as splits:
                prepared = PreparedForward.build(program, inputs, rec=rec)
        except (NotPreparable, KuiperError):
            return None
        prepared.first_outputs = []
        return cls(prepared, splits.made) if splits.made else None

    @classmethod
    def build(
        cls, program: Program, inputs: list[np.ndarray], whole: PreparedForward, ref: list[np.ndarray], t_whole: float
    ) -> SplitForward | None:
        """The split forward if it matches the whole forward's outputs `ref` and takes at most
        MAX_SPLIT_SHARE of `t_whole` (timed here), else None. `whole`: the prepared forward at
        these inputs. Under the graph's lock."""
        split = cls.make(program, inputs, whole.record)
        if split is None:
            return None
        try:
            t_split, out = best_time(split.run, inputs)
        except Exception:
            return None
        if len(out) != len(ref) or not all(close_enough(a, b) for a, b in zip(ref, out)):
            return None
        return split if t_split <= MAX_SPLIT_SHARE * t_whole else None

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        with one_blas_thread():
            return self.prepared.run(inputs)


__all__ = ["MAX_SPLIT_SHARE", "SplitForward"]
