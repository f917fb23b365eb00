"""The text of a graph that pass views diff and `--print-after` prints: the textual IR
(`kuiper_core.ir`, docs/ir.md), one operator a line, so a diff shows each rewritten op."""

from __future__ import annotations

from ..graph import Graph


def graph_text(graph: Graph) -> str:
    from ..ir import print_graph

    return print_graph(graph)
