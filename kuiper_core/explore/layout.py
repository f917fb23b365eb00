"""A fast layered layout of a big model graph, drawn as SVG in Python.

Graphviz's `dot` in the browser (viz.js) takes 5-15 s to lay out the 1,502 operators of
deep1500 with every module open: crossing minimisation and network-simplex placement over
thousands of virtual nodes. A model graph is nearly a chain with skips, so a plain Sugiyama
layout does well in a few hundred milliseconds of Python: ranks by longest path, a virtual
node per rank an edge crosses, a few barycentre sweeps to order each rank, and x positions
pulled to the median of the neighbours while keeping each rank's order and spacing.

`layout_svg` reads the DOT this package writes (graph_view's: quoted ids, `key="value"`
attributes; no clusters, which big views never draw) and returns SVG shaped like Graphviz's
(`g.node` with a `<title>`, its outline first, then `<text>` lines; `g.edge`), so the app's
viewer pans, paints, clicks and exports it exactly as a Graphviz drawing. Units are points,
as Graphviz's (the viewer draws 1 pt as 4/3 px).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache, partial
from html import escape

# Helvetica advance widths (AFM, per 1000 em) for ASCII 32..126; Arial and Liberation Sans,
# what a browser draws "Helvetica,sans-Serif" with, share them.
_WIDTHS = (
    "278 278 355 556 556 889 667 191 333 333 389 584 278 333 278 278 556 556 556 556 556 556 556 556 556 556 "
    "278 278 584 584 584 556 1015 667 667 722 722 667 611 778 722 278 500 667 556 833 722 778 667 778 722 667 "
    "611 722 667 944 667 667 611 278 278 278 469 556 333 556 556 500 556 556 278 556 556 222 222 500 222 833 "
    "556 556 556 556 333 500 278 556 500 722 500 500 500 334 260 334 584"
)
_ADVANCE = {chr(32 + i): int(w) for i, w in enumerate(_WIDTHS.split())}

FONT_PT = 10.0  # the graph head's fontsize (dot.py)
LINE_PT = FONT_PT * 1.2
MARGIN_X, MARGIN_Y = 8.0, 4.0  # Graphviz's default node margin (0.11 x 0.055 in)
MIN_W, MIN_H = 54.0, 36.0  # Graphviz's default node size (0.75 x 0.5 in)
NODE_SEP = 18.0  # horizontal gap between neighbours in a rank
RANK_SEP = 30.0  # vertical gap between ranks: room for an edge's shape label
VIRTUAL_W = 8.0  # the width an edge passing through a rank takes there
PAD = 4.0
SWEEPS = 4


def text_width(text: str, size: float = FONT_PT) -> float:
    return sum(_ADVANCE.get(ch, 600) for ch in text) * size / 1000


# -- reading our DOT -------------------------------------------------------------------------------
_ID = r'"((?:[^"\\]|\\.)*)"'
_NODE = re.compile(rf"^\s*{_ID}\s*\[(.*)\];\s*$")
_EDGE = re.compile(rf"^\s*{_ID}\s*->\s*{_ID}\s*(?:\[(.*)\])?;\s*$")
_ATTR = re.compile(rf"(\w+)={_ID}")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _attrs(text: str | None) -> dict[str, str]:
    return {k: _unquote(v) for k, v in _ATTR.findall(text or "")}


@dataclass
class _Node:
    name: str
    attrs: dict[str, str]
    lines: list[str]
    w: float
    h: float
    rank: int = 0
    x: float = 0.0
    virtual: bool = False
    preds: list[int] = field(default_factory=list)
    succs: list[int] = field(default_factory=list)


@dataclass
class _Edge:
    a: str
    b: str
    attrs: dict[str, str]
    path: list[int] = field(default_factory=list)  # node indices, virtual ones between


def _parse(dot: str) -> tuple[list[_Node], list[_Edge]]:
    nodes: list[_Node] = []
    edges: list[_Edge] = []
    for line in dot.splitlines():
        m = _EDGE.match(line)
        if m:
            edges.append(_Edge(_unquote(m.group(1)), _unquote(m.group(2)), _attrs(m.group(3))))
            continue
        m = _NODE.match(line)
        if m and not line.lstrip().startswith(("graph ", "node ", "edge ")):
            attrs = _attrs(m.group(2))
            lines = attrs.get("label", _unquote(m.group(1))).split("\n")
            w = max(MIN_W, max(text_width(s) for s in lines) + 2 * MARGIN_X)
            h = max(MIN_H, len(lines) * LINE_PT + 2 * MARGIN_Y)
            nodes.append(_Node(_unquote(m.group(1)), attrs, lines, w, h))
    return nodes, edges


# -- the layout ----------------------------------------------------------------------------------------
def _ranks(nodes: list[_Node], edges: list[_Edge], index: dict[str, int]) -> None:
    """Longest path from the sources, in a topological order (Kahn); a cycle's rest keeps rank 0."""
    succ: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for e in edges:
        a, b = index[e.a], index[e.b]
        if a != b:
            succ[a].append(b)
            indeg[b] += 1
    ready = [i for i, d in enumerate(indeg) if d == 0]
    while ready:
        i = ready.pop()
        for j in succ[i]:
            nodes[j].rank = max(nodes[j].rank, nodes[i].rank + 1)
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)


def _order(nodes: list[_Node], ranks: list[list[int]]) -> None:
    """Barycentre sweeps down and up: each node at the mean position of its neighbours."""
    pos = [0.0] * len(nodes)
    for r in ranks:
        for p, i in enumerate(r):
            pos[i] = p

    def barycentre(i: int, down: bool) -> float:
        near = nodes[i].preds if down else nodes[i].succs
        return sum(pos[j] for j in near) / len(near) if near else pos[i]

    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for r in ranks[1:] if down else ranks[-2::-1]:
            r.sort(key=partial(barycentre, down=down))
            for p, i in enumerate(r):
                pos[i] = p


def _place(nodes: list[_Node], ranks: list[list[int]]) -> None:
    """x: each rank packed in its order, then pulled toward its neighbours' median, twice
    each way; a pull never reorders a rank or brings two nodes closer than NODE_SEP."""
    for r in ranks:
        x = 0.0
        for i in r:
            nodes[i].x = x + nodes[i].w / 2
            x += nodes[i].w + NODE_SEP

    def settle(r: list[int], want: list[float]) -> None:
        n = len(r)
        left, right = want[:], want[:]
        for k in range(1, n):  # pushed right by the left neighbour
            gap = (nodes[r[k - 1]].w + nodes[r[k]].w) / 2 + NODE_SEP
            left[k] = max(left[k], left[k - 1] + gap)
        for k in range(n - 2, -1, -1):  # pushed left by the right neighbour
            gap = (nodes[r[k]].w + nodes[r[k + 1]].w) / 2 + NODE_SEP
            right[k] = min(right[k], right[k + 1] - gap)
        for k, i in enumerate(r):
            nodes[i].x = (left[k] + right[k]) / 2
        for k in range(1, n):  # the average of two valid placements may still be tight by rounding
            gap = (nodes[r[k - 1]].w + nodes[r[k]].w) / 2 + NODE_SEP
            nodes[r[k]].x = max(nodes[r[k]].x, nodes[r[k - 1]].x + gap)

    def median(near: list[int], default: float) -> float:
        if not near:
            return default
        xs = sorted(nodes[j].x for j in near)
        m = len(xs) // 2
        return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2

    for sweep in range(4):
        down = sweep % 2 == 0
        for r in ranks[1:] if down else ranks[-2::-1]:
            settle(r, [median(nodes[i].preds if down else nodes[i].succs, nodes[i].x) for i in r])
    lo = min(n.x - n.w / 2 for n in nodes) if nodes else 0.0
    for n in nodes:
        n.x -= lo - PAD


@lru_cache(maxsize=8)  # a rerun (a click, a step) draws the same view again
def layout_svg(dot: str) -> str:
    """SVG of `dot` (graph_view's DOT) laid out here; see the module docstring."""
    nodes, edges = _parse(dot)
    index = {n.name: i for i, n in enumerate(nodes)}
    edges = [e for e in edges if e.a in index and e.b in index]
    _ranks(nodes, edges, index)
    # A virtual node in every rank an edge passes through, so long edges route around nodes.
    for e in edges:
        a, b = index[e.a], index[e.b]
        e.path = [a]
        lo, hi = nodes[a].rank, nodes[b].rank
        for r in range(lo + 1, hi):
            v = _Node("", {}, [], VIRTUAL_W, 0.0, rank=r, virtual=True)
            nodes.append(v)
            e.path.append(len(nodes) - 1)
        e.path.append(b)
        for u, w in zip(e.path, e.path[1:]):
            if nodes[u].rank < nodes[w].rank:
                nodes[u].succs.append(w)
                nodes[w].preds.append(u)
    depth = max((n.rank for n in nodes), default=0) + 1
    ranks: list[list[int]] = [[] for _ in range(depth)]
    for i, n in enumerate(nodes):
        ranks[n.rank].append(i)
    _order(nodes, ranks)
    _place(nodes, ranks)
    # y: each rank as tall as its tallest node; y is the rank's middle
    mid, y = [], PAD
    for members in ranks:
        h = max((nodes[i].h for i in members if not nodes[i].virtual), default=0.0)
        mid.append(y + h / 2)
        y += h + RANK_SEP
    width = max((n.x + n.w / 2 for n in nodes), default=0.0) + PAD
    height = y - RANK_SEP + PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}pt" height="{height:.0f}pt" '
        f'viewBox="0.00 0.00 {width:.1f} {height:.1f}">',
        '<g id="graph0" class="graph" font-family="Helvetica,sans-Serif">',
        f'<polygon fill="transparent" stroke="none" points="0,0 {width:.1f},0 {width:.1f},{height:.1f} 0,{height:.1f}"/>',
    ]
    labelled: set[tuple[str, str]] = set()  # one operand read by several: its shape once
    for e in sorted(edges, key=lambda e: nodes[e.path[1]].x):
        label = e.attrs.get("label")
        show = bool(label) and (e.a, label) not in labelled
        if show and label:
            labelled.add((e.a, label))
        out.append(_edge_svg(e, nodes, mid, show))
    for n in nodes:
        if not n.virtual:
            out.append(_node_svg(n, mid[n.rank]))
    out.append("</g></svg>")
    return "\n".join(out)


# -- drawing -----------------------------------------------------------------------------------------
def _node_svg(n: _Node, cy: float) -> str:
    a = n.attrs
    x0, y0, x1, y1 = n.x - n.w / 2, cy - n.h / 2, n.x + n.w / 2, cy + n.h / 2
    style = a.get("style", "rounded,filled")
    r = 6.0 if "rounded" in style else 0.0
    dash = ' stroke-dasharray="5,2"' if "dashed" in style else ""
    fill = a.get("fillcolor", "#ffffff") if "filled" in style else "none"
    stroke, width = a.get("color", "#555555"), a.get("penwidth", "1")
    if a.get("peripheries") == "2":
        width = "2.5"
    shape = (
        f'<path fill="{fill}" stroke="{stroke}" stroke-width="{width}"{dash} d="M{x0 + r:.1f},{y0:.1f} '
        f"H{x1 - r:.1f} Q{x1:.1f},{y0:.1f} {x1:.1f},{y0 + r:.1f} V{y1 - r:.1f} Q{x1:.1f},{y1:.1f} {x1 - r:.1f},{y1:.1f} "
        f'H{x0 + r:.1f} Q{x0:.1f},{y1:.1f} {x0:.1f},{y1 - r:.1f} V{y0 + r:.1f} Q{x0:.1f},{y0:.1f} {x0 + r:.1f},{y0:.1f} Z"/>'
    )
    top = cy - len(n.lines) * LINE_PT / 2 + LINE_PT * 0.78  # the first line's baseline
    texts = "".join(
        f'<text x="{n.x:.1f}" y="{top + k * LINE_PT:.1f}" font-size="{FONT_PT:g}">{escape(line)}</text>'
        for k, line in enumerate(n.lines)
    )
    return f'<g class="node" text-anchor="middle"><title>{escape(n.name)}</title>{shape}{texts}</g>'


def _edge_svg(e: _Edge, nodes: list[_Node], mid: list[float], show_label: bool) -> str:
    pts: list[tuple[float, float]] = []
    for k, i in enumerate(e.path):
        n = nodes[i]
        cy = mid[n.rank]
        if k == 0:
            pts.append((n.x, cy + n.h / 2))
        elif k == len(e.path) - 1:
            pts.append((n.x, cy - n.h / 2))
        else:
            pts.append((n.x, cy))
    tip = 2.0  # the path stops short of the arrowhead's tip
    (x0, y0), parts = pts[0], [f"M{pts[0][0]:.1f},{pts[0][1]:.1f}"]
    for k, (x1, y1) in enumerate(pts[1:], 1):
        if k == len(pts) - 1:
            y1 -= 6.0 + tip
        my = (y0 + y1) / 2
        parts.append(f"C{x0:.1f},{my:.1f} {x1:.1f},{my:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    ex, ey = pts[-1]
    arrow = f"{ex - 3.5:.1f},{ey - 6 - tip:.1f} {ex:.1f},{ey:.1f} {ex + 3.5:.1f},{ey - 6 - tip:.1f}"
    label = e.attrs.get("label")
    text = ""
    if label and show_label:  # right of the edge where it leaves its source, between the ranks
        lx = max(pts[0][0], (pts[0][0] + pts[1][0]) / 2) + 4
        ly = pts[0][1] + RANK_SEP / 2 + FONT_PT * 0.35
        text = f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="{FONT_PT:g}" fill="#444444">{escape(label)}</text>'
    hover = e.attrs.get("tooltip") or f"{e.a}->{e.b}"  # the <title> is what a hover shows
    return (
        f'<g class="edge"><title>{escape(hover)}</title>'
        f'<path fill="none" stroke="#777777" d="{" ".join(parts)}"/>'
        f'<polygon fill="#777777" stroke="#777777" points="{arrow}"/>{text}</g>'
    )
