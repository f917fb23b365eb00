"""The runnable graph: build(graph) -> Program, the executors that run it, and RuntimeGraph,
the facade that keeps seed 004's states and chooses an executor (docs/architecture.md)."""

from .events import StepEvent, StepRun
from .order import OrderEvent, dfs_order, execution_order, is_topological, kahn_order
from .policy import ExecutionOptions
from .program import Program, build
from .runtime_graph import GraphState, RuntimeGraph
from .runtime_operator import RuntimeOperator

__all__ = [
    "ExecutionOptions",
    "GraphState",
    "Program",
    "RuntimeGraph",
    "RuntimeOperator",
    "StepEvent",
    "StepRun",
    "build",
    "OrderEvent",
    "dfs_order",
    "execution_order",
    "is_topological",
    "kahn_order",
]
