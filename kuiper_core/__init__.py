"""Kuiper Explorer's engine: load PNNX models and run them with NumPy, step by step.

import kuiper_core
runtime = kuiper_core.load("sample_models/resnet18.pnnx.param")
(y,) = runtime.forward(x)
for event in runtime.steps(x): ...
text = kuiper_core.print_ir(runtime.graph)     # the textual IR (docs/ir.md); parse_ir(text) reads it back
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import (
    CycleError,
    InputError,
    KuiperError,
    LimitError,
    ModelError,
    ConversionDisagreement,
    ConversionError,
    ConverterNotFoundError,
    ParseError,
    ShapeError,
    UnsupportedOperatorError,
    WeightError,
)
from .graph import Attribute, Graph, Operand, Operator
from .runtime import ExecutionOptions, GraphState, RuntimeGraph, StepEvent
from .layers.halves import DEFAULT_SIZES, SplitSizes
from .layers.kernel_costs import DEFAULT_COSTS, KernelCosts
from .runtime.policy import Request

__version__ = "0.1.0"


def load(
    source: str | Path | bytes,
    bin_path: str | Path | bytes | None = None,
    *,
    algorithm: str = "dfs",
    executor: Request = "auto",
    threads: int | None = None,
    split_sizes: SplitSizes | None = None,
    kernel_costs: KernelCosts | None = None,
    **options: Any,
) -> RuntimeGraph:
    """Open a model of any format the engine reads and build a RuntimeGraph.

    `source` is a `.pnnx.param` (weights from `bin_path`, default its sibling .bin), a
    textual IR `.kir`, an ONNX `.onnx` or a TorchScript `.pt` (both converted by the `pnnx`
    converter; TorchScript needs `inputshape=`), or the bytes of one. The format is told by
    content. `options` go to kuiper_core.formats.open_model (inputshape, optlevel, on_log, …),
    the conversion checked (references/conversion_check.py).

    `executor` and `threads` say how its calls run (`ExecutionOptions`, runtime/policy.py):
    "auto" (the whole prepared forward), "interpreter", "sharded" (batch >= 2 on two threads)
    or "split" (batch 1, a helper process); `threads`: the BLAS's thread count during its
    calls (None: the process's count now); `split_sizes`: when the split executor splits a call
    (layers/halves.SplitSizes); `kernel_costs`: the convolution kernel chooser's fitted costs
    (layers/kernel_costs.KernelCosts, e.g. `KernelCosts.load(path)`). `RuntimeGraph.last_executor`
    says which ran."""
    from .references.conversion_check import open_model

    execution = ExecutionOptions(
        executor, threads, split_sizes or DEFAULT_SIZES, kernel_costs or DEFAULT_COSTS
    )  # checked before the file is read
    # A .pnnx.param's weights are read when first used (the .bin is checked now): a load parses
    # and plans, and each convolution's kernel reads and lays out its weight at its first run.
    options.setdefault("weights", "lazy")
    runtime = open_model(source, bin_path=bin_path, **options).build(algorithm, release_weights=True)
    runtime.options = execution
    return runtime


def __getattr__(name: str) -> object:
    """print_ir / parse_ir load the textual IR on first use: `import kuiper_core` stays light
    (a fresh process's first load is timed, imports included: bench/compare.py's probes)."""
    if name == "open_model":  # the formats' open_model with the conversion checked
        from .references.conversion_check import open_model

        return open_model
    if name == "compare":
        from .references.compare import compare

        return compare
    if name in ("print_ir", "parse_ir"):
        from . import ir

        return ir.print_graph if name == "print_ir" else ir.parse_ir
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "load",
    "RuntimeGraph",
    "ExecutionOptions",
    "KernelCosts",
    "GraphState",
    "StepEvent",
    "Graph",
    "Operand",
    "Operator",
    "Attribute",
    "KuiperError",
    "ParseError",
    "ModelError",
    "WeightError",
    "UnsupportedOperatorError",
    "CycleError",
    "InputError",
    "LimitError",
    "ShapeError",
    "ConversionDisagreement",
    "ConversionError",
    "ConverterNotFoundError",
    "open_model",
    "compare",
    "print_ir",
    "parse_ir",
]
