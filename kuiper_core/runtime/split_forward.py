"""A forward at batch 1 whose big operators each run in two halves on two cores.

Why: with two BLAS threads only OpenBLAS's bigger GEMMs use the second core (ResNet-18 b1:
~1.35x from one thread to two, PyTorch ~2x). Here the BLAS runs one thread for the whole
forward and every convolution, pool, activation, norm, BatchNorm, concat or classifier GEMV
with enough work is split in two (layers/halves.py: this process and a helper process forked
for this forward by helper_process.py, a half handed over in ~1 us): its transforms, gathers, scatters and small
GEMMs run on both cores too, and no OpenBLAS pool thread spins on a core the helper needs.

It is a PreparedForward whose splittable layers received a split request (`Splits`,
helper_process.py: their prepared calls split themselves) at one BLAS thread (the caller holds that count: the kernels' cost models see the
count they run at), with its buffers in shared memory (the helper writes its half of each
output where this process reads it). The helper is forked after the build: it holds a copy of
every split call, the same arrays at the same addresses.

When (policy.py): asked for (`executor="split"`, refused off x86_64 and without fork: the
hand-off relies on x86's store order), one 4-D input at batch 1, and some operator split.
Its outputs differ from the whole forward's by the halves' kernels and GEMM rounding at one
BLAS thread (bounded in docs/limits.md). bench/bench_halves.py measures it against the whole.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import KuiperError
from ..layers.halves import DEFAULT_SIZES, SplitSizes
from .helper_process import HelperProcess, Splits, shared_bytes
from .prepared import NotPreparable, PreparedForward, Record
from .program import Program


class SplitForward:
    """A prepared forward whose big calls run in halves, at one BLAS thread (module docstring)."""

    def __init__(self, prepared: PreparedForward, helper: HelperProcess | None, splits: int) -> None:
        self.prepared = prepared
        self.helper = helper  # None: both halves here (the tests' sequential form)
        self.splits = splits  # how many calls run in halves

    @classmethod
    def make(
        cls,
        program: Program,
        inputs: list[np.ndarray],
        rec: Record | None = None,
        helper: bool = True,
        sizes: SplitSizes = DEFAULT_SIZES,
    ) -> SplitForward | None:
        """The split forward at these inputs, or None where no call splits.
        `rec`: the whole forward's record run on these inputs (the checks are not run again).
        helper: fork the helper process (else both halves run here, one after the other).
        sizes: when a layer splits (ExecutionOptions.split_sizes)."""
        if len(inputs) != 1 or inputs[0].ndim != 4 or inputs[0].shape[0] != 1:
            return None
        splits = Splits(shared=helper, sizes=sizes)
        try:
            prepared = PreparedForward.build(
                program, inputs, rec=rec, make=shared_bytes if helper else None, split=splits
            )
        except (NotPreparable, KuiperError):
            return None
        prepared.first_outputs = []
        if not splits.made:
            return None
        return cls(prepared, HelperProcess(splits) if helper else None, splits.made)

    def owned(self) -> bool:
        """Made in this process: a process forked from its maker (multiprocessing's workers)
        shares its buffers with it and must not run it (without a helper they are not shared)."""
        return self.helper is None or self.helper.owner == os.getpid()

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if not self.owned():
            raise RuntimeError("a split forward runs only in the process that made it")
        return self.prepared.run(inputs)

    def close(self) -> None:
        """Stop the helper process (the forward still runs, both halves here)."""
        if self.helper is not None:
            self.helper.close()


__all__ = ["SplitForward", "shared_bytes"]
