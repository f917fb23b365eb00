"""Kuiper Explorer's engine: load PNNX models and run them with NumPy, step by step.

import kuiper_core
g = kuiper_core.load("sample_models/resnet18.pnnx.param")
(y,) = g.forward(x)
for event in g.steps(x): ...
text = kuiper_core.print_ir(g.graph)     # the textual IR (docs/ir.md); parse_ir(text) reads it back
"""

from __future__ import annotations

from pathlib import Path

from .errors import (
    CycleError,
    InputError,
    KuiperError,
    LimitError,
    ModelError,
    ParseError,
    ShapeError,
    UnsupportedOperatorError,
    WeightError,
)
from .graph import Attribute, Graph, Operand, Operator
from .runtime import GraphState, RuntimeGraph, StepEvent

__version__ = "0.1.0"


def load(param_path: str | Path, bin_path: str | Path | None = None, *, algorithm: str = "dfs") -> RuntimeGraph:
    """Read `.param` + `.bin` (default: the param's sibling) and build a RuntimeGraph.

    A `.kir` path is read as textual IR (docs/ir.md), its weights from `bin_path`."""
    if Path(param_path).suffix == ".kir":
        from .ir import load_ir

        return load_ir(param_path, bin_path, algorithm=algorithm)
    from .pnnx import load_graph

    # Weights read when first used (their .bin checked now): a load parses and plans, and each
    # convolution's kernel reads and lays out its weight at the first run (bench/README.md).
    graph = RuntimeGraph.from_graph(load_graph(param_path, bin_path, lazy=True))
    graph.build(algorithm)
    return graph


def __getattr__(name: str) -> object:
    """print_ir / parse_ir load the textual IR on first use: `import kuiper_core` stays light
    (a fresh process's first load is timed, imports included: bench/README.md)."""
    if name in ("print_ir", "parse_ir"):
        from . import ir

        return ir.print_graph if name == "print_ir" else ir.parse_ir
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "load",
    "RuntimeGraph",
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
    "print_ir",
    "parse_ir",
]
