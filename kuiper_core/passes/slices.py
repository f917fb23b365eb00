"""FuseSlices: pnnx's slice fusions at optlevel 2.

- Slices of one tensor along one dim that cover it end to end (`x[..., :2]`, `x[..., 2:4]`,
  `x[..., 4:]`) become one `torch.tensor_split` with several outputs
  (fuse_slice_to_tensor_split).
- Selects of every index of one dim (`x[0]`, `x[1]`, `x[2]` of a 3-long dim) become one
  `torch.unbind` (fuse_select_to_unbind).
- A chain of slices on increasing dims (`x[:, 1:3][:, :, 2:]`) becomes one multi-axis
  `Tensor.slice` with dims/starts/ends/steps (fuse_slice_indices); a first slice read by
  several such slices is copied into each (YOLOv5's Focus: rows, then columns, four ways).
"""

from __future__ import annotations

from ..graph import Graph, Operator, ParamValue
from .manager import graph_pass, record
from .rewrite import remove_input, remove_operator, set_input

INT_MAX = 2**31 - 1


def _bounds(op: Operator) -> tuple[int, int, int] | None:
    """(dim, start, end) of a step-1 slice with static bounds, normalised to the dim size."""
    raw = _bounds_raw(op)
    if raw is None or raw[3] != 1:
        return None
    dim, start, end, _ = raw
    shape = op.inputs[0].shape
    size = None if shape is None else shape[dim]
    if not isinstance(size, int):
        return None
    start = max(0, start + size if start < 0 else start)
    end = min(size, end + size if end < 0 else end)
    return dim, start, end


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


def _split_tilings(graph: Graph) -> bool:
    groups: dict[tuple[int, int], list[tuple[int, int, Operator]]] = {}
    for op in graph.operators:
        b = _bounds(op)
        if b is not None:
            groups.setdefault((id(op.inputs[0]), b[0]), []).append((b[1], b[2], op))
    changed = False
    for (_, dim), members in groups.items():
        if len(members) < 2:
            continue
        shape = members[0][2].inputs[0].shape
        size = None if shape is None else shape[dim]
        chain = _tiling(members, size) if isinstance(size, int) else None  # an int: _bounds found it
        if chain is None:
            continue
        members = chain
        ops = [m[2] for m in members]
        first = min(ops, key=graph.operators.index)
        indices = [m[1] for m in members[:-1]]
        split = Operator("torch.tensor_split", first.name, params={"dim": dim, "indices": indices})
        _replace_with_multi_output(graph, ops, split)
        record(
            "fused",
            split.name,
            f"{len(ops)} slices ({', '.join(op.name for op in ops)}) → tensor_split dim={dim} indices={tuple(indices)}",
        )
        changed = True
    return changed


def _replace_with_multi_output(graph: Graph, ops: list[Operator], new: Operator) -> None:
    """`ops` (one output each, the same input) become `new`, whose outputs are theirs in
    order, placed where the first of them was."""
    first = min(ops, key=graph.operators.index)
    source = first.inputs[0]
    for op in ops:
        out = op.outputs.pop()
        out.producer = None
        remove_input(op, 0)
        new.outputs.append(out)
    position = graph.operators.index(first)
    for op in ops:
        graph.operators.remove(op)
    new.inputs, new.input_names = [source], ["input"]
    source.consumers.append(new)
    for out in new.outputs:
        out.producer = new
    graph.operators.insert(min(position, len(graph.operators)), new)


def _unbind_selects(graph: Graph) -> bool:
    groups: dict[tuple[int, int, int], dict[int, Operator]] = {}  # (input, dim, its size) -> index -> select
    for op in graph.operators:
        if op.type != "Tensor.select" or len(op.inputs) != 1 or len(op.outputs) != 1:
            continue
        dim, index, shape = op.params.get("dim"), op.params.get("index"), op.inputs[0].shape
        if (
            not isinstance(dim, int)
            or not isinstance(index, int)
            or shape is None
            or not -len(shape) <= dim < len(shape)
        ):
            continue
        size = shape[dim]
        if isinstance(size, int):
            key = (id(op.inputs[0]), dim % len(shape), size)
            groups.setdefault(key, {}).setdefault(index % size if size else index, op)
    changed = False
    for (_, dim, size), by_index in groups.items():
        if size < 2 or sorted(by_index) != list(range(size)):
            continue
        ops = [by_index[i] for i in range(size)]
        unbind = Operator("torch.unbind", ops[0].name, params={"dim": dim})
        _replace_with_multi_output(graph, ops, unbind)
        record("fused", unbind.name, f"{len(ops)} selects ({', '.join(o.name for o in ops)}) → unbind dim={dim}")
        changed = True
    return changed


def _fold_slice_chains(graph: Graph) -> bool:
    """Each one-axis slice of a slice on lower dims reads the first slice's input with both
    bounds; the first slice goes once every reader is such a slice (as pnnx copies a shared
    head into each chain: YOLOv5's Focus slices rows, then columns, four ways)."""
    changed = False
    for op in list(graph.operators):  # file order: a chain folds link by link
        own = _bounds_raw(op)
        head = op.inputs[0].producer if own is not None else None
        items = _slice_items(head) if head is not None else None
        if own is None or head is None or items is None or max(i[0] for i in items) >= own[0]:
            continue
        readers = head.outputs[0].consumers
        if not all((b := _bounds_raw(r)) is not None and b[0] > max(i[0] for i in items) for r in readers):
            continue  # the head would stay: folding would not save an operator
        merged = items + [own]
        set_input(op, 0, head.inputs[0])
        dims = [i[0] for i in merged]
        op.params = {
            "dims": dims,
            "starts": [i[1] for i in merged],
            "ends": [i[2] for i in merged],
            "steps": [i[3] for i in merged],
        }
        record("fused", op.name, f"slice of {head.name} ({head.type}) → one slice on dims {tuple(dims)}")
        if not head.outputs[0].consumers:
            remove_operator(graph, head)
        changed = True
    return changed


def _slice_items(op: Operator) -> list[tuple[int, int, int, int]] | None:
    """(dim ≥ 0, start, end, step) per axis of a one- or multi-axis slice without selects."""
    one = _bounds_raw(op)
    if one is not None:
        return [one]
    p = op.params
    if op.type != "Tensor.slice" or len(op.inputs) != 1 or len(op.outputs) != 1 or "selects" in p:
        return None
    lists: list[list[int]] = []
    for k in ("dims", "starts", "ends", "steps"):
        v = p.get(k)
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return None
        lists.append(v)
    if len({len(v) for v in lists}) != 1:
        return None
    dims, starts, ends, steps = lists
    if any(not 0 <= d for d in dims) or sorted(set(dims)) != dims:
        return None
    return list(zip(dims, starts, ends, steps))


def _bounds_raw(op: Operator) -> tuple[int, int, int, int] | None:
    """(dim ≥ 0, start, end, step) of a one-axis slice with int params."""
    if op.type != "Tensor.slice" or len(op.inputs) != 1 or len(op.outputs) != 1 or "dims" in op.params:
        return None
    p = op.params
    dim, start, end, step = (
        _int(v) for v in (p.get("dim"), p.get("start", 0), p.get("end", INT_MAX), p.get("step", 1))
    )
    shape = op.inputs[0].shape
    if dim is None or start is None or end is None or step is None or shape is None:
        return None
    if not -len(shape) <= dim < len(shape):
        return None
    return dim % len(shape), start, end, step


def _int(value: ParamValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@graph_pass(
    "FuseSlices",
    2,
    required=("FoldConstantParams",),
    description="slices tiling a dim → tensor_split, selects of every index → unbind, slice chains → one slice",
)
def fuse_slices(graph: Graph) -> tuple[Graph, bool]:
    changed = _split_tilings(graph)
    changed |= _unbind_selects(graph)
    changed |= _fold_slice_chains(graph)
    return graph, changed
