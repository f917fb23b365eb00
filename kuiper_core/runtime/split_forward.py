"""A forward at batch 1 whose big operators each run in two halves on two cores.

Why: with two BLAS threads only OpenBLAS's bigger GEMMs use the second core (ResNet-18 b1:
~1.35x from one thread to two, PyTorch ~2x). Here the BLAS runs one thread for the whole
forward and every convolution, pool, activation, norm, BatchNorm, concat or classifier GEMV
with enough work is split in two (layers/halves.py: this process and a helper process forked
for this forward, a half handed over in ~1 us): its transforms, gathers, scatters and small
GEMMs run on both cores too, and no OpenBLAS pool thread spins on a core the helper needs.

It is a PreparedForward built inside `halves.splitting()` (the layers' prepared calls split
themselves) at one BLAS thread (the kernels' cost models see the count they run at), inside
`conv.reusing_weights()` (the weight layouts the whole forward's kernels hold, as in
row_sharded.py: no weight read again; ResNet-18's stem as im2col halves, 2 % faster split than
its one-thread stride-2 rows kernel), with its buffers in shared memory (the helper writes its
half of each output where this process reads it). The helper is forked after the build: it
holds a copy of every split call, the same arrays at the same addresses.

When (RuntimeGraph's policy): the BLAS runs >= 2 threads, there is one 4-D input at batch 1,
the whole forward takes at least MIN_WHOLE_SECONDS, some operator split, the process may fork
(`allowed`: not in the app's server, which sets KUIPER_HELPER_PROCESS=0), the outputs match the
whole forward's (the last guard), and the split run takes at most MAX_SPLIT_SHARE of the whole
one's time, both timed at the second forward at these shapes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np

from ..errors import KuiperError
from ..layers.conv import reusing_weights
from ..layers.halves import HelperProcess, shared_bytes, splitting
from ..threads import one_blas_thread
from .prepared import NotPreparable, PreparedForward, Record
from .program import Program
from .sharded import close_enough, run_times

# Split only when it takes at most this share of the whole forward's time (both medians, at the
# second forward at these shapes): the tiny ViT and MobileNetV3 gain 0-5 % split, within the
# decision's noise, and ran slower split in a benchmark after a lucky decision; ResNet-18 takes
# 0.75, UNet 0.7, YOLOv5s-mini 0.85-0.9.
MAX_SPLIT_SHARE = 0.92
# Smaller forwards stay whole: a few microseconds a hand-off, a process and ~0.3 s of deciding
# are not worth it below this (digits_cnn 0.06 ms; the tiny ViT, 0.7 ms, gains ~7 %).
MIN_WHOLE_SECONDS = 0.3e-3
# The decision's timing (SplitForward.build, timed): each forward timed for about DECISION_SECONDS
# (3 to 20 runs), the split one after WARM_SECONDS of untimed runs.
DECISION_SECONDS = 0.2
WARM_SECONDS = 0.15
# Set to 0 to never fork a helper (a server: app.py sets it; a fork there would copy its threads'
# state and its sockets into the child).
ENV = "KUIPER_HELPER_PROCESS"


def allowed() -> bool:
    """May a forward fork a helper process here (POSIX fork, not turned off by ENV)?"""
    return hasattr(os, "fork") and os.environ.get(ENV, "1") != "0"


def median_time(run: Callable[[list[np.ndarray]], object], inputs: list[np.ndarray], runs: int) -> float:
    return float(np.median(run_times(run, inputs, runs)[0]))


class SplitForward:
    """A prepared forward whose big calls run in halves, at one BLAS thread (module docstring)."""

    def __init__(self, prepared: PreparedForward, helper: HelperProcess | None, splits: int) -> None:
        self.prepared = prepared
        self.helper = helper  # None: both halves here (the tests' sequential form)
        self.splits = splits  # how many calls run in halves

    @classmethod
    def make(
        cls, program: Program, inputs: list[np.ndarray], rec: Record | None = None, helper: bool = True
    ) -> SplitForward | None:
        """The split forward at these inputs, or None where no call splits. Not timed: see build.
        `rec`: the whole forward's record run on these inputs (the checks are not run again).
        helper: fork the helper process (else both halves run here, one after the other)."""
        if len(inputs) != 1 or inputs[0].ndim != 4 or inputs[0].shape[0] != 1:
            return None
        try:
            with one_blas_thread(), reusing_weights(), splitting() as splits:
                prepared = PreparedForward.build(program, inputs, rec=rec, make=shared_bytes if helper else None)
        except (NotPreparable, KuiperError):
            return None
        prepared.first_outputs = []
        if not splits.made:
            return None
        return cls(prepared, HelperProcess(splits) if helper else None, splits.made)

    @classmethod
    def build(
        cls, program: Program, inputs: list[np.ndarray], whole: PreparedForward, ref: list[np.ndarray], t_whole: float
    ) -> SplitForward | None:
        """The split forward if it matches the whole forward's outputs `ref` and takes at most
        MAX_SPLIT_SHARE of the whole's time (both medians, timed here; `t_whole`, the caller's
        best time, sets how many runs), else None. `whole`: the prepared forward at
        these inputs. Under the graph's lock."""
        if not allowed() or t_whole < MIN_WHOLE_SECONDS:
            return None
        # The whole forward timed before the helper exists (a helper starting up, then polling,
        # takes the core its two-thread GEMMs need).
        turns = max(3, min(20, int(DECISION_SECONDS / max(t_whole, 1e-6))))
        t_whole = median_time(whole.run, inputs, turns)
        split = cls.make(program, inputs, whole.record)
        if split is None:
            return None
        try:
            t_split, out = split.timed(inputs, turns)
        except Exception:
            split.close()
            return None
        if (
            len(out) != len(ref)
            or not all(close_enough(a, b) for a, b in zip(ref, out))
            or t_split > MAX_SPLIT_SHARE * t_whole
        ):
            split.close()
            return None
        return split

    def timed(self, inputs: list[np.ndarray], runs: int) -> tuple[float, list[np.ndarray]]:
        """The median time of `runs` runs and the outputs, after WARM_SECONDS of untimed runs:
        OpenBLAS's pool thread spins ~0.1 s after the whole forward's two-thread GEMMs, on the
        core the helper needs (YOLOv5s-mini's split forward measured 5-9 ms there against 3.3
        in a row), and the helper's first halves touch its copies of the work buffers."""
        start = time.perf_counter()
        while time.perf_counter() - start < WARM_SECONDS:
            self.run(inputs)
        times, outputs = run_times(self.run, inputs, runs)
        return float(np.median(times)), outputs

    def owned(self) -> bool:
        """Made in this process: a process forked from its maker (multiprocessing's workers)
        shares its buffers with it and must not run it (without a helper they are not shared)."""
        return self.helper is None or self.helper.owner == os.getpid()

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if not self.owned():
            raise RuntimeError("a split forward runs only in the process that made it")
        with one_blas_thread():
            return self.prepared.run(inputs)

    def close(self) -> None:
        """Stop the helper process (the forward still runs, both halves here)."""
        if self.helper is not None:
            self.helper.close()


__all__ = ["ENV", "MAX_SPLIT_SHARE", "SplitForward", "allowed", "shared_bytes"]
