"""A toy walkthrough's every step, precomputed for the browser (issue 38: steps in the browser).

The Execution order page sends these once; pages/step_controls.js moves through them with no
server run. Step s (0 = before the first event, s = i + 1 after event i) has:
- a graph frame: the viewer's overlay (fills, the current node) plus each node's label lines
  and the edges drawn apart, painted on one drawing (`base_dot`) laid out once;
- a panel: the sentence, the algorithm's lists and tables, and at the end the lesson, as HTML
  (escaped: a typed graph's names are untrusted).
Everything is what the server-side page draws for that step, from the same functions.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .order_state import state_at
from .walkthrough import Walkthrough, indegree_rows, node_colors, order_rows, toy_dot, toy_edges, toy_labels

LIST_LIMIT = 40  # a long list keeps its most recent names (the end matters)


def base_dot(w: Walkthrough) -> str:
    """The drawing every frame is painted on: the graph before its first event, with room for
    the longest label of any step (Kahn's in-degree line, DFS's place in the order)."""
    dot = toy_dot(w, None)
    widest = {n: _widest(w, n) for n in w.nodes}
    labels = toy_labels(w, None)
    for n in w.nodes:
        dot = dot.replace(_label_attr(labels[n]), _label_attr(widest[n]), 1)
    return dot


def _label_attr(lines: list[str]) -> str:
    from .dot import quote

    return f"label={quote(chr(10).join(lines))}"


def _widest(w: Walkthrough, n: str) -> list[str]:
    lines = [f"{len(w.nodes)}. {n}" if w.algorithm == "dfs" else n]
    if w.types and n in w.types:
        lines.append(w.types[n])
    if w.algorithm == "kahn":
        lines.append(f"in-degree {max(1, len(w.nodes) - 1)}")
    return lines


def graph_frames(w: Walkthrough, highlight_label: str = "current step") -> list[dict[str, Any]]:
    """The viewer's overlay at each step 0..len(w): highlight, colors, texts, edges."""
    frames: list[dict[str, Any]] = []
    for s in range(len(w) + 1):
        i = s - 1 if s > 0 else None
        edges = toy_edges(w, i)
        frames.append(
            {
                "highlight": w.state(i).node if i is not None else None,
                "highlight_label": highlight_label if i is not None and w.state(i).node else None,
                "colors": node_colors(w, i),
                "texts": toy_labels(w, i),
                "edges": {f"{a}->{b}": kind for (a, b), kind in edges.items()},
            }
        )
    return frames


def _names(items, empty: str = "(empty)", limit: int = LIST_LIMIT) -> str:
    items = list(items)
    if not items:
        return empty
    head = f"… {len(items) - limit:,} earlier  " if len(items) > limit else ""
    return head + "  ".join(items[-limit:])


def _list(title: str, items, empty: str = "(empty)") -> str:
    return f'<p class="kx-s-title">{title}</p><pre class="kx-s-list">{escape(_names(items, empty))}</pre>'


def _table(rows: list[dict[str, object]]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{escape(str(k))}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f'<table class="kx-s-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def state_lists_html(w: Walkthrough, i: int, compact: bool) -> str:
    """The algorithm's lists after event i (-1: before the first), as the page shows them."""
    event = state_at(w.trace, i)
    if w.algorithm == "dfs":
        out = _list("Call stack <small>(bottom → top)</small>", event.stack)
        if not compact:
            out += _list("Visited set", event.visited)
        if event.kind == "reverse":
            out += _list("Output list <small>(in finishing order)</small>", state_at(w.trace, i - 1).output)
            out += _list("Reversed: the execution order", event.output)
        else:
            out += _list(
                "Output list <small>(a node is appended when all its successors are done)</small>", event.output
            )
        return out
    out = _list("Queue <small>(front first)</small>", event.queue) + _list("Order so far", event.output)
    if len(w.nodes) <= 200 and not compact and i >= 0:
        out += '<p class="kx-s-title">In-degree table</p>' + _table(indegree_rows(w, i))
    return out


def lesson_html(w: Walkthrough) -> str:
    """What the end of the walk teaches: the cycle, or the order as a table."""
    if w.error is not None:
        return (
            f'<div class="kx-s-box kx-s-error"><b>The lesson:</b> {escape(w.error)}. Each node on a cycle waits for '
            "another node on it, so no node of the cycle can ever run first: the engine refuses such a graph with a "
            "CycleError.</div>"
        )
    return f'<div class="kx-s-box kx-s-done">Done: {len(w.order or [])} nodes in execution order.</div>' + _table(
        order_rows(w)
    )


def panel_frames(w: Walkthrough, total: int, compact: bool = False, end_note: str = "") -> list[str]:
    """The state panel at each step 0..total (steps past the walk's end show its last one);
    the last step adds the lesson (and `end_note`, e.g. why two orders differ)."""
    frames = []
    for s in range(total + 1):
        if s == 0:
            html = '<div class="kx-s-box kx-s-info">Press <b>Step</b> (or →) to start, or <b>Play</b> to watch it run.</div>'
        else:
            shown = min(s, len(w))
            kind = "kx-s-error" if w.state(shown - 1).kind == "cycle" else "kx-s-info"
            html = (
                f'<div class="kx-s-box {kind}"><b>Step {shown} of {len(w)}:</b> {escape(w.message(shown - 1))}</div>'
                + state_lists_html(w, shown - 1, compact)
            )
        if s == total:
            html += lesson_html(w) + (f'<div class="kx-s-box kx-s-info">{escape(end_note)}</div>' if end_note else "")
        frames.append(html)
    return frames


# -- an expression's stack machine ----------------------------------------------------------------
def expression_frames(view, trace, labels, where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The tree's overlay and the panel (the step's sentence, the stack with its values) at
    each stack step 1..n, as index 1..n (index 0 repeats step 1: the walk starts there)."""
    from .expression_view import ON_STACK, USED, stack_text

    graph, panels = [], []
    n = len(trace.steps)
    evaluated: dict[str, int] = {}  # DOT id -> id(node) of the shown nodes evaluated so far, in order
    for i, s in enumerate(trace.steps):
        # view.overlay_colors(trace, i), kept as it goes: that call reads every step before i
        # (an 8,191-node paste: a minute per rerun, with the stack's labels)
        node = view.ids.get(id(s.node))
        if node is not None:
            evaluated[node] = id(s.node)
        on_stack = {id(e.node) for e in s.stack}
        colors = {dot: ON_STACK if at in on_stack else USED for dot, at in evaluated.items()}
        graph.append({"highlight": node, "colors": colors})
        stack = stack_text(trace, i, labels, width=40)
        panels.append(
            f'<div class="kx-s-box kx-s-info"><b>Step {i + 1} of {n}:</b> {escape(trace.steps[i].describe())}</div>'
            f'<p class="kx-s-title">The stack <small>(top first, with its values)</small></p>'
            f'<pre class="kx-s-list kx-s-stack">{escape(stack)}</pre>'
            f'<p class="kx-s-caption">Evaluated on {escape(where)}.</p>'
        )
    return graph[:1] + graph, panels[:1] + panels
