"""FusePatterns: small subgraphs that one operator of the engine computes (pnnx's pattern
fusions at optlevel 2).

- Channel shuffle (ShuffleNet): reshape (N, C, *S) → (N, g, C/g, *S), swap axes 1 and 2,
  reshape back to (N, C, *S) is `nn.ChannelShuffle(groups=g)` (fuse_channel_shuffle).

Matched on the operands' declared shapes, so it does not depend on how the reshapes
were written (a computed shape, `-1`, or literal sizes).
"""

from __future__ import annotations

from ..graph import Graph, Operator
from .manager import graph_pass, record
from .op_kinds import PERMUTE_TYPES, RESHAPE_TYPES
from .rewrite import remove_operator, set_input, sole_consumer


def _swaps_axes_1_2(op: Operator) -> bool:
    if op.type == "torch.transpose":
        return {op.params.get("dim0"), op.params.get("dim1")} == {1, 2}
    if op.type in PERMUTE_TYPES:
        dims = op.params.get("dims")
        return isinstance(dims, list) and len(dims) >= 3 and dims[:3] == [0, 2, 1] and dims[3:] == list(range(3, len(dims)))
    return False


def _channel_shuffle(graph: Graph, last: Operator) -> bool:
    if last.type not in RESHAPE_TYPES or len(last.inputs) != 1:
        return False
    swap = last.inputs[0].producer
    if swap is None or len(swap.inputs) != 1 or not _swaps_axes_1_2(swap) or sole_consumer(last.inputs[0]) is not last:
        return False
    first = swap.inputs[0].producer
    if first is None or first.type not in RESHAPE_TYPES or len(first.inputs) != 1 or sole_consumer(swap.inputs[0]) is not swap:
        return False
    x = first.inputs[0].static_shape
    grouped = first.outputs[0].static_shape
    if x is None or grouped is None or last.outputs[0].static_shape != x or len(x) < 2:
        return False
    if len(grouped) != len(x) + 1 or grouped[0] != x[0] or grouped[1] * grouped[2] != x[1] or grouped[3:] != x[2:]:
        return False
    groups = grouped[1]
    source = first.inputs[0]
    set_input(last, 0, source)
    last.type, last.params, last.input_names = "nn.ChannelShuffle", {"groups": groups}, ["input"]
    remove_operator(graph, swap)
    remove_operator(graph, first)
    record("fused", last.name, f"{first.name} → {swap.name} → {last.name}: nn.ChannelShuffle(groups={groups})")
    return True


@graph_pass("FusePatterns", 2, description="reshape-transpose-reshape channel shuffles become nn.ChannelShuffle")
def fuse_patterns(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for op in list(reversed(graph.operators)):
        if op.outputs and op.outputs[0].producer is op:  # still in the graph
            changed |= _channel_shuffle(graph, op)
    return graph, changed
