"""FuseSlicesToSplit: slices of one tensor along one dim that cover it end to end
(`x[..., :2]`, `x[..., 2:4]`, `x[..., 4:]`) become one `torch.tensor_split` with several
outputs (pnnx's fuse_slice_to_tensor_split at optlevel 2).
"""

from __future__ import annotations

from ..graph import Graph, Operator
from .manager import graph_pass, record
from .rewrite import remove_input

INT_MAX = 2**31 - 1


def _bounds(op: Operator) -> tuple[int, int, int] | None:
    """(dim, start, end) of a step-1 slice with static bounds, normalised to the dim size."""
    if op.type != "Tensor.slice" or len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    p = op.params
    dim, start, end, step = p.get("dim"), p.get("start", 0), p.get("end", INT_MAX), p.get("step", 1)
    shape = op.inputs[0].shape
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dim, start, end, step)) or step != 1:
        return None
    if shape is None or not -len(shape) <= dim < len(shape) or not isinstance(shape[dim], int):
        return None
    size = shape[dim]
    start = max(0, start + size if start < 0 else start)
    end = min(size, end + size if end < 0 else end)
    return dim % len(shape), start, end


def _tiling(members: list[tuple[int, int, Operator]], size: int) -> list[tuple[int, int, Operator]] | None:
    """Slices from the group that cover [0, size) end to end (depth-first over starts)."""
    by_start: dict[int, list[tuple[int, int, Operator]]] = {}
    for m in members:
        if m[0] < m[1]:
            by_start.setdefault(m[0], []).append(m)
    stack: list[tuple[int, list[tuple[int, int, Operator]]]] = [(0, [])]
    seen: set[int] = set()  # what can follow a position does not depend on how we got there
    while stack:
        at, path = stack.pop()
        if at == size:
            return path if len(path) >= 2 else None
        if at in seen:
            continue
        seen.add(at)
        for m in by_start.get(at, []):
            stack.append((m[1], path + [m]))
    return None


@graph_pass("FuseSlicesToSplit", 2, required=("FoldConstantParams",),
            description="slices that tile one dim end to end become one torch.tensor_split")
def fuse_slices_to_split(graph: Graph) -> tuple[Graph, bool]:
    groups: dict[tuple[int, int], list[tuple[int, int, Operator]]] = {}
    for op in graph.operators:
        b = _bounds(op)
        if b is not None:
            groups.setdefault((id(op.inputs[0]), b[0]), []).append((b[1], b[2], op))
    changed = False
    for (_, dim), members in groups.items():
        if len(members) < 2:
            continue
        size = members[0][2].inputs[0].shape[dim]  # type: ignore[index]
        chain = _tiling(members, size)  # type: ignore[arg-type]
        if chain is None:
            continue
        members = chain
        ops = [m[2] for m in members]
        first = min(ops, key=graph.operators.index)
        source = first.inputs[0]
        split = Operator("torch.tensor_split", first.name, params={"dim": dim, "indices": [m[1] for m in members[:-1]]})
        for op in ops:
            out = op.outputs.pop()
            out.producer = None
            remove_input(op, 0)
            split.outputs.append(out)
        position = graph.operators.index(first)
        for op in ops:
            graph.operators.remove(op)
        split.inputs, split.input_names = [source], ["input"]
        source.consumers.append(split)
        for out in split.outputs:
            out.producer = split
        graph.operators.insert(min(position, len(graph.operators)), split)
        record("fused", split.name, f"{len(ops)} slices ({', '.join(op.name for op in ops)}) → tensor_split dim={dim} "
               f"indices={tuple(split.params['indices'])}")  # type: ignore[arg-type]
        changed = True
    return graph, changed
