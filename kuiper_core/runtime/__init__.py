"""The runnable graph: build, execution order, buffers, forward and steps."""

from .order import dfs_order, dfs_trace, is_topological, kahn_order, kahn_trace
from .runtime_graph import GraphState, RuntimeGraph, RuntimeOperator, StepEvent

__all__ = [
    "GraphState",
    "RuntimeGraph",
    "RuntimeOperator",
    "StepEvent",
    "dfs_order",
    "dfs_trace",
    "kahn_order",
    "kahn_trace",
    "is_topological",
]
