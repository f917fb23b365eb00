"""The execution policy: which executor runs a call, decided from the Program, the input shapes
and the caller's options alone (docs/architecture.md, "Which executor runs when").

No timing, no reading of the machine's load: the same call on the same RuntimeGraph runs the
same executor, at the same BLAS thread count, and gives the same bits on any load. As TVM names
its executor at build and onnxruntime takes thread counts as session options, the caller names
both (`kuiper_core.load(path, executor="split", threads=2)`), and `RuntimeGraph.last_executor`
says which ran.

Requests (`ExecutionOptions.executor`):
- "auto": at batch >= 2 with two BLAS threads (`shards_by_default`), what "sharded" runs;
  otherwise the whole forward: the prepared forward (prepared.py), or where a graph cannot be
  prepared the interpreter's checked run then the planned forward (planned.py); graphs whose
  shapes follow the input values on the interpreter.
- "prepared": the whole forward, as "auto" runs it where it does not shard (never sharded).
- "reference": the interpreter calling each layer's plain definition (Layer.reference: a
  convolution as written on the blackboard, not Winograd or im2col): the one numerical oracle
  of every fast kernel and executor; slow on purpose.
- "interpreter": the interpreter (interpreter.py) every call, every output checked, each layer's
  forward (its fast kernels).
- "sharded": at batch >= 2, two half-batch prepared forwards on two threads (sharded.py)
  where the graph keeps images apart; elsewhere the whole forward.
- "split": at batch 1 (one 4-D input), big operators in two halves, one in a helper process
  forked for this graph (split_forward.py); elsewhere what "auto" runs. Opt-in only: a
  library must not fork behind its caller, and the hand-off between the processes relies on
  x86's store order, so it is refused elsewhere.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import KuiperError
from ..layers.halves import DEFAULT_SIZES, SplitSizes
from ..layers.kernel_costs import DEFAULT_COSTS, KernelCosts

Request = Literal["auto", "prepared", "reference", "interpreter", "sharded", "split"]
# What ran (RuntimeGraph.last_executor): the executors of forward(), and steps()' two.
Ran = Literal["reference", "interpreter", "prepared", "planned", "sharded", "split", "step arena", "interpreter steps"]

REQUESTS: tuple[str, ...] = get_args(Request)


def split_refusal() -> str | None:
    """Why the split executor cannot run here (None: it can)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"its helper process's hand-off relies on x86's store order; this machine is {platform.machine()}"
    if not hasattr(os, "fork"):
        return "it forks a helper process; this platform has no fork()"
    return None


@dataclass(frozen=True)
class ExecutionOptions:
    """How a RuntimeGraph runs its calls.

    executor: one of REQUESTS (module docstring).
    threads: the BLAS's thread count during the engine's calls (set for each call and restored
        after it: kuiper_core/threads.py); None: the count the process has. The split and
        sharded executors run their halves at one BLAS thread each, on two cores.
    split_sizes: when the split executor splits a layer's call (layers/halves.SplitSizes:
        each size's provenance beside it).
    kernel_costs: what the convolution kernel chooser weighs candidates with, and the blocks
        kernels cut their work into (layers/kernel_costs.KernelCosts: fitted offline, saved
        and loaded as JSON; docs/speed.md says how to re-fit them).
    """

    executor: Request = "auto"
    threads: int | None = None
    split_sizes: SplitSizes = DEFAULT_SIZES
    kernel_costs: KernelCosts = DEFAULT_COSTS

    def __post_init__(self) -> None:
        if self.executor not in REQUESTS:
            raise KuiperError(f"unknown executor {self.executor!r}: expected one of {', '.join(REQUESTS)}")
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise KuiperError(f"threads must be a positive int or None, not {self.threads!r}")
        if self.executor == "split":
            why = split_refusal()
            if why is not None:
                raise KuiperError(f"executor 'split' is not available: {why}")

    def shards(self, threads: int, batch: int) -> bool:
        """Whether a call at `batch` (sharded.batch_size: 0 when the inputs share none) under
        these options asks for the sharded forward, at `threads` BLAS threads (the graph's).
        "auto" shards at exactly two: two half-batch forwards at one BLAS thread each keep
        both cores busy through the passes OpenBLAS does not thread (im2col, Winograd's
        transforms, elementwise), measured on 2-core machines (docs/speed.md); at more threads
        the whole forward's BLAS uses the cores the halves would leave idle."""
        if self.executor == "sharded":
            return batch >= 2
        return self.executor == "auto" and threads == 2 and batch >= 2


__all__ = ["ExecutionOptions", "REQUESTS", "Ran", "Request", "split_refusal"]
