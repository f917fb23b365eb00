"""The text of a graph that pass views diff and `--print-after` prints.

One function, so the textual IR (`kuiper_core.ir`) replaces the `.param` text here alone
once it exists; until then the `.param` writer's text is used.
"""

from __future__ import annotations

from ..graph import Graph


def graph_text(graph: Graph) -> str:
    try:
        from ..ir import print_graph  # type: ignore[attr-defined]
    except ImportError:
        from ..pnnx.writer import format_param

        return format_param(graph)
    return print_graph(graph)
