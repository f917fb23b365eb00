"""Execution order: the seeds' reverse-topological DFS, and Kahn's algorithm.

Both work on plain node names and a successor map. `execution_order` is what build() calls;
it returns the order and raises CycleError when none exists. The DFS is iterative: a deep
model (1,700 operators, a 1,650-long path) would overflow Python's recursion limit.

Observed from outside (as TVM's pass instruments): pass `observe`, a callable, and each
algorithm reports every change of its state as an `OrderEvent` (a node visited, pushed,
popped, emitted; an in-degree decremented; a cycle found). Without an observer nothing is
built or kept, so ordering a real model costs only the algorithm. What the events mean for
a student (sentences, colours, the state at each step, quizzes) is `kuiper_core.explore`'s
business: walkthrough.py, order_state.py, order_quiz.py.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple
from collections.abc import Callable, Mapping, Sequence

from ..errors import CycleError

Successors = Mapping[str, Sequence[str]]


class OrderEvent(NamedTuple):
    """One change of an ordering algorithm's state.

    DFS (seed 004's ReverseTopo):
      'visit'     ReverseTopo(node) entered: node marked visited and pushed on the call stack;
                  `edge` is (caller, node), None for a search started at a root
      'skip'      the successor `node` of edge[0] is already visited: not entered again
      'finish'    every successor of `node` is done: popped from the call stack and appended
                  to the output list (topo_operators_)
      'reverse'   the output list reversed: the execution order
    Kahn:
      'indegree'  every node's in-degree counted (`indegree`: the table)
      'enqueue'   `node` (in-degree 0) pushed at the back of the queue
      'dequeue'   `node` popped from the front of the queue and emitted to the order
      'decrement' `edge` removed: the in-degree of `node` (= edge[1]) is now `degree`
    Both:
      'cycle'     no order exists: `cycle` lists the nodes around one cycle (path order);
                  `stuck` every node that was never ordered, `on_cycle` those of them on a
                  cycle; for DFS `edge` is the back edge when the search ran into its own
                  call stack (None when no root reaches the stuck nodes)
    """

    kind: str
    node: str | None = None
    edge: tuple[str, str] | None = None
    degree: int | None = None
    indegree: Mapping[str, int] | None = None
    cycle: tuple[str, ...] = ()
    stuck: tuple[str, ...] = ()
    on_cycle: tuple[str, ...] = ()


Observer = Callable[[OrderEvent], None]


def roots(nodes: Sequence[str], succ: Successors) -> list[str]:
    """The nodes without a predecessor, in `nodes` order (where each DFS starts)."""
    has_pred = {s for n in nodes for s in succ.get(n, ())}
    return [n for n in nodes if n not in has_pred]


def find_cycle(nodes: Sequence[str], succ: Successors) -> list[str] | None:
    """Some cycle as a list of nodes (first not repeated), or None (iterative DFS)."""
    color: dict[str, int] = {n: 0 for n in nodes}  # 0 new, 1 on stack, 2 done
    for start in nodes:
        if color[start]:
            continue
        path: list[str] = [start]
        iters = [iter(succ.get(start, ()))]
        color[start] = 1
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                iters.pop()
            elif color.get(nxt, 0) == 1:
                return path[path.index(nxt) :]
            elif color.get(nxt, 0) == 0:
                color[nxt] = 1
                path.append(nxt)
                iters.append(iter(succ.get(nxt, ())))
    return None


def nodes_on_cycles(nodes: Sequence[str], succ: Successors) -> list[str]:
    """Every node that lies on some cycle (in a strongly connected component of two or
    more nodes, or with an edge to itself), in `nodes` order. Iterative Tarjan."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cyclic: set[str] = set()
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(succ.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1 or node in succ.get(node, ()):
                    cyclic.update(component)
    return [n for n in nodes if n in cyclic]


def _no_order(
    nodes: Sequence[str],
    succ: Successors,
    stuck: list[str],
    observe: Observer | None,
    cycle: list[str] | None = None,
    edge: tuple[str, str] | None = None,
) -> CycleError:
    """The CycleError for nodes that could not be ordered, after telling the observer."""
    cycle = cycle or find_cycle(stuck, succ) or stuck
    if observe is not None:
        in_stuck = set(stuck)
        on_cycle = [n for n in nodes_on_cycles(nodes, succ) if n in in_stuck] or cycle
        observe(OrderEvent("cycle", cycle[0], edge, cycle=tuple(cycle), stuck=tuple(stuck), on_cycle=tuple(on_cycle)))
    return CycleError(cycle)


def dfs_order(nodes: Sequence[str], succ: Successors, observe: Observer | None = None) -> list[str]:
    """Reverse-topological order by DFS (seed 004's ReverseTopo), without recursion.

    Starting from each node with no predecessor (in `nodes` order), enter unvisited
    successors depth-first, in the order `succ` lists them; a node is appended to the
    output list once all its successors are done; the reversed list is the order.
    """
    visited: set[str] = set()
    output: list[str] = []
    stack: list[str] = []  # the call stack: ReverseTopo(stack[-1]) is running
    on_stack: set[str] = set()
    for root in roots(nodes, succ):
        if root in visited:
            continue
        iters = [iter(succ.get(root, ()))]
        stack.append(root)
        on_stack.add(root)
        visited.add(root)
        if observe is not None:
            observe(OrderEvent("visit", root))
        while stack:
            node = stack[-1]
            nxt = next(iters[-1], None)
            if nxt is None:
                on_stack.discard(stack.pop())
                iters.pop()
                output.append(node)
                if observe is not None:
                    observe(OrderEvent("finish", node))
            elif nxt in on_stack:  # a back edge: nxt is still waiting for this node
                raise _no_order(
                    nodes,
                    succ,
                    [n for n in nodes if n not in set(output)],
                    observe,
                    stack[stack.index(nxt) :],
                    (node, nxt),
                )
            elif nxt in visited:
                if observe is not None:
                    observe(OrderEvent("skip", nxt, (node, nxt)))
            else:
                stack.append(nxt)
                on_stack.add(nxt)
                iters.append(iter(succ.get(nxt, ())))
                visited.add(nxt)
                if observe is not None:
                    observe(OrderEvent("visit", nxt, (node, nxt)))
    if len(visited) != len(nodes):  # nodes no root reaches: on a cycle, or behind one
        raise _no_order(nodes, succ, [n for n in nodes if n not in visited], observe)
    output.reverse()
    if observe is not None:
        observe(OrderEvent("reverse"))
    return output


def kahn_order(nodes: Sequence[str], succ: Successors, observe: Observer | None = None) -> list[str]:
    """Kahn's algorithm: emit the node at the front of a first-in first-out queue of nodes
    whose in-degree is zero; nodes ready at the start are queued in `nodes` order, the
    successors a node frees in the order `succ` lists them."""
    indeg: dict[str, int] = {n: 0 for n in nodes}
    for n in nodes:
        for s in succ.get(n, ()):
            indeg[s] += 1
    if observe is not None:
        observe(OrderEvent("indegree", indegree=dict(indeg)))
    queue: deque[str] = deque()
    for n in nodes:
        if indeg[n] == 0:
            queue.append(n)
            if observe is not None:
                observe(OrderEvent("enqueue", n))
    order: list[str] = []
    while queue:
        n = queue.popleft()
        order.append(n)
        if observe is not None:
            observe(OrderEvent("dequeue", n))
        for s in succ.get(n, ()):
            indeg[s] -= 1
            if observe is not None:
                observe(OrderEvent("decrement", s, (n, s), indeg[s]))
            if indeg[s] == 0:
                queue.append(s)
                if observe is not None:
                    observe(OrderEvent("enqueue", s))
    if len(order) != len(nodes):
        raise _no_order(nodes, succ, [n for n in nodes if indeg[n] > 0], observe)
    return order


ALGORITHMS: dict[str, Callable[[Sequence[str], Successors, Observer | None], list[str]]] = {
    "dfs": dfs_order,
    "kahn": kahn_order,
}


def execution_order(
    nodes: Sequence[str], succ: Successors, algorithm: str = "dfs", *, observe: Observer | None = None
) -> list[str]:
    """The order `algorithm` ('dfs' or 'kahn') runs `nodes` in; CycleError when none exists.

    `observe(event)` is called at every step when given (see OrderEvent), else nothing is
    recorded."""
    try:
        run = ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"unknown ordering algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}") from None
    return run(nodes, succ, observe)


def is_topological(order: Sequence[str], succ: Successors) -> bool:
    """Every edge goes forward in `order`, and `order` has no repeats."""
    pos = {n: i for i, n in enumerate(order)}
    if len(pos) != len(order):
        return False
    return all(pos[n] < pos[s] for n in order for s in succ.get(n, ()))
