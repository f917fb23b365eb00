"""Operators grouped by module path (`layer4.1.*`, `blocks.3.*`), the way the model was written.

PNNX keeps PyTorch's module names for operators it did not fuse (`layer1.0.relu`) and
invents names for the rest (`convbn2d_3`, `pnnx_expr_14`, `torch.flatten_0`). An invented
name takes the module of a neighbour: the next named operator in file order when it reads
this one (a fused conv before `layer1.0.relu`), else the previous named one (the residual
add after it). Groups with many numbered children (300 `blocks.N`) get range groups
(`blocks.0–19`) so no level of the tree has more than about MAX_CHILDREN entries.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence

from ..graph import Graph, Operator
from .categories import category

MAX_CHILDREN = 16
_NAMESPACES = {"torch", "Tensor", "F", "nn", "pnnx", "prim", "aten", "math"}
_INVENTED = re.compile(r"pnnx_.*|[A-Za-z0-9]+_\d+")
_IO_TYPES = {"pnnx.Input", "pnnx.Output"}


def _own_path(op: Operator) -> tuple[str, ...] | None:
    """The module path a name spells out, or None for an invented name."""
    if op.type in _IO_TYPES:
        return ()
    parts = op.name.split(".")
    if len(parts) > 1:
        if parts[0] in _NAMESPACES or parts[0].startswith("pnnx_"):
            return None
        return tuple(parts[:-1])
    return None if _INVENTED.fullmatch(op.name) else ()


def module_paths(graph: Graph, ops: Sequence[Operator] | None = None) -> dict[str, tuple[str, ...]]:
    """Operator name -> module path (() for the top level), for `ops` (default: all)."""
    ops = list(graph.operators if ops is None else ops)
    own = [_own_path(op) for op in ops]
    named = [i for i, p in enumerate(own) if p is not None]
    paths: dict[str, tuple[str, ...]] = {}
    j = 0  # index into `named` of the first named operator after i
    for i, op in enumerate(ops):
        while j < len(named) and named[j] <= i:
            j += 1
        path = own[i]
        if path is not None:
            paths[op.name] = path
            continue
        nxt_path = own[named[j]] if j < len(named) else None
        prev_path = own[named[j - 1]] if j > 0 else None
        reads_it = nxt_path is not None and any(c is ops[named[j]] for c in graph.successors(op))
        # Entering a module (its first conv feeds its named relu): the next one's path;
        # leaving one (the last relu feeds the parent's pool): stay in the previous one.
        leaving = (
            prev_path is not None
            and nxt_path is not None
            and prev_path[: len(nxt_path)] == nxt_path
            and prev_path != nxt_path
        )
        if reads_it and not leaving and nxt_path is not None:  # reads_it: there is a next path
            paths[op.name] = nxt_path
        else:
            paths[op.name] = prev_path if prev_path is not None else (nxt_path or ())
    return paths


@dataclass
class ModuleGroup:
    """A module (or a range of numbered sibling modules) and the operators under it."""

    id: str  # "layer4.1", "blocks.0–19"; "" for the whole model
    label: str  # the last part shown in the graph ("layer4.1", "blocks.0–19")
    depth: int
    ops: list[str] = field(default_factory=list)  # every operator under it, file order
    direct: list[str] = field(default_factory=list)  # operators directly in it
    children: list[ModuleGroup] = field(default_factory=list)
    by_type: list[tuple[str, int]] = field(default_factory=list)
    category: str = "other"  # the most common category (the collapsed node's colour)

    def walk(self) -> Iterable[ModuleGroup]:
        yield self
        for c in self.children:
            yield from c.walk()


def _numbered(name: str) -> int | None:
    tail = name.rsplit(".", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _ranges(parent: ModuleGroup) -> None:
    """Fold runs of numbered children into range groups when there are too many."""
    kids = parent.children
    if len(kids) <= MAX_CHILDREN:
        return
    size = -(-len(kids) // MAX_CHILDREN)
    size = max(size, 2)
    folded: list[ModuleGroup] = []
    run: list[ModuleGroup] = []

    def flush() -> None:
        if len(run) <= 2:
            folded.extend(run)
        else:
            for k in range(0, len(run), size):
                chunk = run[k : k + size]
                if len(chunk) == 1:
                    folded.append(chunk[0])
                    continue
                first, last = chunk[0].id, chunk[-1].id.rsplit(".", 1)[-1]
                g = ModuleGroup(f"{first}–{last}", f"{chunk[0].label}–{last}", parent.depth + 1, children=chunk)
                for c in chunk:
                    _deepen(c)
                folded.append(g)
        run.clear()

    for c in kids:
        if _numbered(c.id) is not None:
            run.append(c)
        else:
            flush()
            folded.append(c)
    flush()
    parent.children = folded


def _deepen(g: ModuleGroup) -> None:
    g.depth += 1
    for c in g.children:
        _deepen(c)


def _finish(g: ModuleGroup, types: dict[str, str], position: dict[str, int]) -> None:
    for c in g.children:
        _finish(c, types, position)
    names = g.direct + [n for c in g.children for n in c.ops]
    g.ops = sorted(names, key=position.__getitem__)
    g.by_type = sorted(Counter(types[n] for n in g.ops).items(), key=lambda kv: (-kv[1], kv[0]))
    cats = Counter(category(types[n]) for n in g.ops)
    g.category = cats.most_common(1)[0][0] if cats else "other"
    g.children.sort(key=lambda c: position[c.ops[0]] if c.ops else 0)


_TREES: dict[tuple[int, tuple[str, ...]], tuple[Graph, ModuleGroup]] = {}  # recent trees (a Forward step redraws)


def module_tree(graph: Graph, ops: Sequence[Operator] | None = None) -> ModuleGroup:
    """The module tree of `ops` (default: all operators). The root's id is ''. Trees are
    remembered per graph and selection (treat them as read-only)."""
    ops = list(graph.operators if ops is None else ops)
    key = (id(graph), tuple(op.name for op in ops))
    hit = _TREES.get(key)
    if hit is not None and hit[0] is graph:
        return hit[1]
    tree = _build_tree(graph, ops)
    if len(_TREES) >= 16:
        _TREES.pop(next(iter(_TREES)))
    _TREES[key] = (graph, tree)
    return tree


def _build_tree(graph: Graph, ops: list[Operator]) -> ModuleGroup:
    paths = module_paths(graph, ops)
    root = ModuleGroup("", "model", 0)
    index: dict[tuple[str, ...], ModuleGroup] = {(): root}
    for op in ops:
        path = paths[op.name]
        for d in range(1, len(path) + 1):
            key = path[:d]
            if key not in index:
                parent = index[key[:-1]]
                g = ModuleGroup(".".join(key), ".".join(key), d)
                parent.children.append(g)
                index[key] = g
        index[path].direct.append(op.name)
    for g in list(index.values()):
        _ranges(g)
    _collapse_chains(root)
    position = {op.name: i for i, op in enumerate(graph.operators)}
    _finish(root, {op.name: op.type for op in ops}, position)
    return root


def _collapse_chains(g: ModuleGroup) -> None:
    """A module whose only content is one sub-module is that sub-module ('features' holding
    only 'features.1' would be a group of one group): keep the inner one."""
    for i, c in enumerate(g.children):
        while not c.direct and len(c.children) == 1:
            inner = c.children[0]
            inner.depth = c.depth
            c = inner
        g.children[i] = c
        _collapse_chains(c)


# -- what is drawn --------------------------------------------------------------------------------
def ancestors(root: ModuleGroup, op_name: str) -> list[ModuleGroup]:
    """The groups containing `op_name`, outermost first (the root excluded)."""
    chain: list[ModuleGroup] = []
    node = root
    while True:
        nxt = next((c for c in node.children if op_name in c.ops), None)
        if nxt is None:
            return chain
        chain.append(nxt)
        node = nxt


def default_expanded(root: ModuleGroup, budget: int) -> set[str]:
    """Open whole levels of the tree while the drawn units stay within `budget`:
    everything for a small model, the top modules of a big one."""
    expanded: set[str] = set()
    level = [root]
    while level:
        trial = expanded | {g.id for g in level}
        if unit_count(root, trial) > budget and expanded:
            break
        expanded = trial
        level = [c for g in level for c in g.children]
    return expanded - {""}


def unit_count(root: ModuleGroup, expanded: set[str]) -> int:
    """How many nodes a view draws: operators of open groups plus closed groups."""
    n = len(root.direct)
    for c in root.children:
        n += unit_count(c, expanded) if c.id in expanded or c.id == "" else 1
    return n
