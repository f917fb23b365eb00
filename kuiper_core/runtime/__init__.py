"""The runnable graph: build, execution order, buffers, forward and steps."""

from .order import OrderEvent, dfs_order, execution_order, is_topological, kahn_order
from .runtime_graph import GraphState, RuntimeGraph, RuntimeOperator, StepEvent

__all__ = [
    "GraphState",
    "RuntimeGraph",
    "RuntimeOperator",
    "StepEvent",
    "OrderEvent",
    "dfs_order",
    "execution_order",
    "is_topological",
    "kahn_order",
]
