"""Execution order as a walkthrough: the toy graphs, the sentences, the state at each step.

The ordering algorithms live in `kuiper_core.runtime.order` and only report structured
events; this module observes them (`order_state.OrderTrace`), narrates each event in a
sentence from the event and the state it leaves (`narrate`), owns the app's toy graphs
(`PRESETS`), and lays a step out as the page shows it: the toy graph's DOT with the current
node, the call stack, the visited set and the output list coloured, the in-degree table and
queue for Kahn, and the final order table. A graph with a cycle is not an error here: the
walkthrough ends on the 'cycle' event and `error` says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Mapping, Sequence

from ..errors import CycleError, LimitError, ParseError
from ..graph import Graph
from ..runtime.order import ALGORITHMS, execution_order
from .dot import quote
from .order_state import OrderState, OrderTrace, state_at

# Toy graphs for teaching. The first is the worked example of KuiperInfer's graph-building
# article (design source 004): input -> op1 -> op3 -> {op4, op5 -> output}.
SEED_004_EXAMPLE: dict[str, list[str]] = {
    "input": ["op1"],
    "op1": ["op3"],
    "op3": ["op4", "op5"],
    "op4": [],
    "op5": ["output"],
    "output": [],
}
DIAMOND: dict[str, list[str]] = {
    "input": ["left", "right"],
    "left": ["add"],
    "right": ["add"],
    "add": ["output"],
    "output": [],
}
WITH_CYCLE: dict[str, list[str]] = {"input": ["a"], "a": ["b"], "b": ["c"], "c": ["a", "output"], "output": []}

# The app's presets: name -> successor map (node order = insertion order).
PRESETS: dict[str, dict[str, list[str]]] = {
    "KuiperInfer's worked example": SEED_004_EXAMPLE,
    "A small diamond": DIAMOND,
    "A graph with a cycle": WITH_CYCLE,
}

# What each colour means; the page draws this legend next to the graph. The states of one
# algorithm differ in lightness as well as hue, so they stay apart under every colour-vision
# deficiency and in greyscale (CIEDE2000 >= 8: tests/test_palette.py).
COLORS: dict[str, str] = {
    "not visited": "#ffffff",
    "on the call stack": "#f3d481",
    "visited, finished (in the output list)": "#74be7d",
    "not in the queue yet": "#ffffff",
    "in the queue": "#b1ddfc",
    "emitted to the order": "#74be7d",
    "on the cycle": "#d06b64",
}
CURRENT_BORDER = "#d62728"  # the node (or edge) the current step is about

DFS_LEGEND = ["not visited", "on the call stack", "visited, finished (in the output list)", "on the cycle"]
KAHN_LEGEND = ["not in the queue yet", "in the queue", "emitted to the order", "on the cycle"]


@dataclass
class Walkthrough:
    """One run of an ordering algorithm, observed event by event."""

    nodes: list[str]
    successors: dict[str, list[str]]
    algorithm: str  # 'dfs' or 'kahn'
    trace: OrderTrace  # trace[i]: the state after event i, rebuilt on access
    order: list[str] | None  # None when the graph has a cycle
    cycle: list[str] | None = None
    types: dict[str, str] | None = None  # operator types when built from a model

    @property
    def error(self) -> str | None:
        """Why no order exists (the cycle), or None."""
        if self.cycle is None:
            return None
        return "no execution order exists: " + " -> ".join(self.cycle + self.cycle[:1]) + " is a cycle"

    @property
    def legend(self) -> list[tuple[str, str]]:
        keys = DFS_LEGEND if self.algorithm == "dfs" else KAHN_LEGEND
        return [(k, COLORS[k]) for k in keys]

    def __len__(self) -> int:
        return len(self.trace)

    @property
    def events(self) -> OrderTrace:
        """The trace under its earlier name: `events[i]` is the state after event i."""
        return self.trace

    def state(self, i: int) -> OrderState:
        """The state after event i."""
        return self.trace[i]

    def message(self, i: int) -> str:
        """The sentence for event i."""
        i = i + len(self.trace) if i < 0 else i
        return narrate(self.trace[i], state_at(self.trace, i - 1))


def walkthrough(
    successors: Mapping[str, Sequence[str]],
    algorithm: str = "dfs",
    *,
    nodes: Sequence[str] | None = None,
    types: Mapping[str, str] | None = None,
) -> Walkthrough:
    """Run DFS or Kahn on a successor map and keep every event (a cycle ends the trace)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    node_list = list(nodes) if nodes is not None else _node_list(successors)
    succ = {n: list(successors.get(n, ())) for n in node_list}
    trace = OrderTrace()
    try:
        order: list[str] | None = execution_order(node_list, succ, algorithm, observe=trace)
        cycle = None
    except CycleError as e:
        order, cycle = None, list(e.cycle)
    return Walkthrough(node_list, succ, algorithm, trace, order, cycle, dict(types) if types else None)


# -- the sentences -------------------------------------------------------------------------------
def _stuck_message(stuck: Sequence[str], on_cycle: Sequence[str], why: str) -> str:
    """Name the nodes on a cycle, and the ones that only wait behind it, separately."""
    after = [n for n in stuck if n not in set(on_cycle)]
    text = f"{why}: {', '.join(on_cycle)} lie on a cycle"
    if after:
        one = len(after) == 1
        text += (
            f"; {', '.join(after)} {'comes' if one else 'come'} after the cycle, "
            f"so {'it was' if one else 'they were'} never processed either"
        )
    return text + "."


def narrate(state: OrderState, prior: OrderState) -> str:
    """The sentence for the event that turned `prior` into `state` (both from the trace),
    so what it says is what the colours, stack, queue and tables show."""
    e = state.event
    n = e.node
    if e.kind == "visit":
        if e.edge is None:
            return f"Start at {n}: it has no predecessor. Mark it visited, push it on the call stack and look at its successors."
        return f"{n} (successor of {e.edge[0]}) is not visited: recurse into it (push it on the call stack) and mark it visited."
    if e.kind == "skip":
        assert e.edge is not None
        return f"{n} (successor of {e.edge[0]}) is already visited: skip it."
    if e.kind == "finish":
        back = f" and return to {state.stack[-1]}." if state.stack else "."
        return f"Every successor of {n} is done, so pop {n} from the call stack and append it to the output list{back}"
    if e.kind == "reverse":
        return "Reverse the output list: that is the execution order."
    if e.kind == "indegree":
        return "Count each node's predecessors (its in-degree)."
    if e.kind == "enqueue":
        if prior.event.kind == "decrement" and prior.node == n:
            return f"{n} now has in-degree 0: enqueue it."
        return f"{n} has in-degree 0: it can run now, so enqueue it."
    if e.kind == "dequeue":
        return f"Dequeue {n} and append it to the order."
    if e.kind == "decrement":
        assert e.edge is not None
        return f"Remove edge {e.edge[0]} -> {n}: in-degree of {n} drops to {e.degree}."
    if e.kind == "cycle":
        if e.edge is not None:  # DFS ran into its own call stack
            path = list(e.cycle) + [e.edge[1]]
            return f"{e.edge[1]} is on the call stack: the path {' -> '.join(path)} is a cycle, so no order exists."
        if not state.indegree:  # DFS (only Kahn counts in-degrees): no root leads to the stuck nodes
            return _stuck_message(e.stuck, e.on_cycle, "No node without predecessors reaches " + ", ".join(e.stuck))
        why = f"The queue is empty but {', '.join(e.stuck)} still wait for predecessors"
        return _stuck_message(e.stuck, e.on_cycle, why)
    raise ValueError(f"unknown order event {e.kind!r}")


# -- a graph typed by hand ----------------------------------------------------------------------
MAX_TYPED_NODES = 60
MAX_TYPED_CHARS = 64_000  # a 60-node graph with every edge and long names fits
_NAME = re.compile(r"[A-Za-z0-9_.:]+")


def edges_text(successors: Mapping[str, Sequence[str]]) -> str:
    """A successor map in the edge-list syntax parse_edges reads (one line per node)."""
    return "\n".join(f"{n} -> {', '.join(s)}" if s else n for n, s in successors.items())


def parse_edges(text: str, source: str = "<your graph>") -> dict[str, list[str]]:
    """A small graph typed by hand: one statement per line (or between ';').

        a -> b -> c      a chain of edges
        b -> d, e        a node with several successors (a, b -> c: several predecessors)
        f                a node on its own
        # a comment

    Names are letters, digits, '_', '.', ':'. Errors are ParseErrors with line, column and a
    caret; more than MAX_TYPED_CHARS characters or MAX_TYPED_NODES nodes is a LimitError, the
    nodes counted while reading (a pasted `a1, …, aN -> b1, …, bN` built N² edges before the
    count was checked: 34 s of server CPU for 20 KB), so reading costs time linear in the text."""
    if len(text) > MAX_TYPED_CHARS:
        raise LimitError(
            f"the graph is {len(text):,} characters long; a typed graph may have at most {MAX_TYPED_CHARS:,}",
            limit="typed graph characters",
            maximum=MAX_TYPED_CHARS,
            value=len(text),
            path=source,
        )
    succ: dict[str, list[str]] = {}
    edges: set[tuple[str, str]] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        start = 0
        for stmt in code.split(";"):
            _statement(stmt, start, line, lineno, source, succ, edges)
            start += len(stmt) + 1
    if not succ:
        first = text.splitlines()[0] if text.strip() else ""
        raise ParseError(
            "the graph is empty: type edges such as 'a -> b'", path=source, line=1, column=1, source_line=first
        )
    return succ


def _statement(
    stmt: str,
    offset: int,
    line: str,
    lineno: int,
    source: str,
    succ: dict[str, list[str]],
    edges: set[tuple[str, str]],
) -> None:
    if not stmt.strip():
        return
    parts, pos = [], 0
    for chunk in stmt.split("->"):
        names, cpos = [], 0
        for item in chunk.split(","):
            name = item.strip()
            col = offset + pos + cpos + (len(item) - len(item.lstrip())) + 1
            cpos += len(item) + 1
            if not name:
                what = "a node name" + (" after '->'" if pos else "")
                raise ParseError(
                    f"expected {what}", path=source, line=lineno, column=min(col, len(line) + 1), source_line=line
                )
            bad = _NAME.fullmatch(name) is None
            if bad:
                m = re.search(r"[^A-Za-z0-9_.:]", name)
                at = col + (m.start() if m else 0)
                hint = " (an edge is written '->')" if "-" in name or ">" in name else ""
                raise ParseError(
                    f"unexpected character {name[m.start()] if m else name!r} in a node name{hint}",
                    path=source,
                    line=lineno,
                    column=at,
                    source_line=line,
                )
            if name not in succ:
                if len(succ) == MAX_TYPED_NODES:
                    raise LimitError(
                        f"node '{name}' is node {len(succ) + 1}: a typed graph may have at most {MAX_TYPED_NODES}",
                        limit="typed graph nodes",
                        maximum=MAX_TYPED_NODES,
                        value=len(succ) + 1,
                        path=source,
                        line=lineno,
                        column=col,
                        source_line=line,
                        length=len(name),
                    )
                succ[name] = []
            names.append(name)
        parts.append(names)
        pos += len(chunk) + 2
    for a_names, b_names in zip(parts, parts[1:]):  # at most MAX_TYPED_NODES² pairs: the names are known
        for a in a_names:
            for b in b_names:
                if (a, b) not in edges:
                    edges.add((a, b))
                    succ[a].append(b)


def model_walkthrough(graph: Graph, algorithm: str = "dfs") -> Walkthrough:
    """The same walkthrough on a loaded model: nodes are operators in file order."""
    names = [op.name for op in graph.operators]
    succ = {op.name: [s.name for s in graph.successors(op)] for op in graph.operators}
    return walkthrough(succ, algorithm, nodes=names, types={op.name: op.type for op in graph.operators})


def _node_list(successors: Mapping[str, Sequence[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for n, succ in successors.items():
        seen.setdefault(n)
        for s in succ:
            seen.setdefault(s)
    return list(seen)


# -- the state at one step ----------------------------------------------------------------------
def node_colors(w: Walkthrough, step: int | None) -> dict[str, str]:
    """Fill colour of every node after event `step` (None: before the first event)."""
    colors = {n: COLORS["not visited"] for n in w.nodes}
    if step is None:
        return colors
    state = w.trace[step]
    if w.algorithm == "dfs":
        for n in state.visited:
            colors[n] = COLORS["visited, finished (in the output list)"]
        for n in state.stack:
            colors[n] = COLORS["on the call stack"]
    else:
        for n in state.queue:
            colors[n] = COLORS["in the queue"]
        for n in state.output:
            colors[n] = COLORS["emitted to the order"]
    if state.kind == "cycle":
        for n in state.event.on_cycle:
            colors[n] = COLORS["on the cycle"]
    return colors


def toy_dot(w: Walkthrough, step: int | None) -> str:
    """DOT of the walkthrough's graph after event `step` (None: before the first event).

    The current node gets a thick red border, the edge just followed (DFS) or removed
    (Kahn) is red; Kahn shows each node's remaining in-degree, and removed edges turn
    dashed grey; the final step of DFS labels nodes with their position in the order.
    """
    state = w.trace[step] if step is not None and len(w.trace) else None
    colors = node_colors(w, step if state is not None else None)
    labels = toy_labels(w, step if state is not None else None)
    edges = toy_edges(w, step if state is not None else None)
    lines = [
        "digraph walkthrough {",
        '  graph [rankdir=TB, nodesep=0.4, ranksep=0.45, bgcolor="transparent"];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=14, penwidth=1.2, margin="0.2,0.08"];',
        '  edge [color="#555555", arrowsize=0.7];',
    ]
    for n in w.nodes:
        attrs = [f"label={quote(chr(10).join(labels[n]))}", f"fillcolor={quote(colors[n])}"]
        if state is not None and n == state.node:
            attrs += [f"color={quote(CURRENT_BORDER)}", "penwidth=3"]
        lines.append(f"  {quote(n)} [{', '.join(attrs)}];")
    for n in w.nodes:
        for s in w.successors.get(n, ()):
            attrs = []
            if edges.get((n, s)) == "current":
                attrs += [f"color={quote(CURRENT_BORDER)}", "penwidth=2.5"]
            elif edges.get((n, s)) == "removed":
                attrs += ['style="dashed"', 'color="#bbbbbb"']
            lines.append(f"  {quote(n)} -> {quote(s)}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines)


def toy_labels(w: Walkthrough, step: int | None) -> dict[str, list[str]]:
    """Each node's label lines after event `step`: its name (and type), its place in the
    order at DFS's last step, Kahn's remaining in-degree."""
    state = w.trace[step] if step is not None and len(w.trace) else None
    position = {n: i + 1 for i, n in enumerate(state.output)} if state is not None and state.kind == "reverse" else {}
    out: dict[str, list[str]] = {}
    for n in w.nodes:
        lines = [f"{position[n]}. {n}" if n in position else n]
        if w.types and n in w.types:
            lines.append(w.types[n])
        if state is not None and n in state.indegree:
            lines.append(f"in-degree {state.indegree[n]}")
        out[n] = lines
    return out


def toy_edges(w: Walkthrough, step: int | None) -> dict[tuple[str, str], str]:
    """The edges drawn apart after event `step`: "current" (just followed or removed) and
    "removed" (Kahn's, dashed)."""
    state = w.trace[step] if step is not None and len(w.trace) else None
    if state is None:
        return {}
    out = {e: "removed" for e in state.removed}
    if state.event.edge is not None:
        out[state.event.edge] = "current"
    return out


def indegree_rows(w: Walkthrough, step: int) -> list[dict[str, object]]:
    """Kahn's in-degree table after event `step`: node, remaining in-degree, status."""
    state = w.trace[step]
    emitted, queued = set(state.output), set(state.queue)
    return [
        {
            "node": n,
            "in-degree": state.indegree.get(n, 0),
            "status": "emitted" if n in emitted else "queued" if n in queued else "waiting",
        }
        for n in w.nodes
    ]


def order_rows(w: Walkthrough) -> list[dict[str, object]]:
    """The final order as a table (empty when there is a cycle)."""
    if w.order is None:
        return []
    rows = []
    for i, n in enumerate(w.order):
        row: dict[str, object] = {"#": i + 1, "node": n}
        if w.types:
            row["type"] = w.types.get(n, "")
        row["successors"] = ", ".join(w.successors.get(n, ())) or "-"
        rows.append(row)
    return rows


def step_of_node(w: Walkthrough, node: str) -> int | None:
    """The first event about `node` (for 'jump to this node'); no state is rebuilt."""
    for i, e in enumerate(w.trace.events):
        if e.node == node:
            return i
    return None
