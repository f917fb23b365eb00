"""UnpackLists: the list and tuple plumbing of optlevel 0, written as pnnx writes it at
optlevel 1 (exact, so level 1).

- `prim::ListUnpack(prim::ListConstruct(a, b))` (or the tuple pair) reads a and b directly.
- An operator whose one list/tuple output only a `prim::ListUnpack`/`TupleUnpack` reads
  (`torch.split`, `torch.chunk`, `nn.MultiheadAttention`'s (output, weights), `nn.GRU`'s
  (output, h)) gets the unpacked outputs itself — the runtime makes its layer with those
  outputs either way (runtime/binding.py's `packed`).
- `torch.cat` / `torch.stack` of a `prim::ListConstruct` read only there take its tensors
  as their own inputs; so does any operator whose last slot holds a list the runtime
  splices into its layer's inputs (`torch.einsum equation operands`).
"""

from __future__ import annotations

from ..graph import Graph, Operator
from ..runtime.binding import UNPACKERS, bind, is_value
from .manager import graph_pass, record
from .rewrite import add_input, remove_input, remove_operator, replace_all_uses, sole_consumer

_CONSTRUCT = {"prim::ListUnpack": "prim::ListConstruct", "prim::TupleUnpack": "prim::TupleConstruct"}
_VARIADIC = frozenset({"torch.cat", "torch.stack"})


def _unpack_of_construct(graph: Graph, op: Operator) -> bool:
    src = op.inputs[0].producer if len(op.inputs) == 1 else None
    if src is None or src.type != _CONSTRUCT.get(op.type) or len(src.inputs) != len(op.outputs):
        return False
    for out, item in zip(op.outputs, src.inputs):
        replace_all_uses(out, item)
    remove_operator(graph, op)
    if not src.outputs[0].consumers:
        remove_operator(graph, src)
    record("removed", op.name, f"unpacks what {src.name} packed: readers read the items")
    return True


def _split_into_outputs(graph: Graph, op: Operator) -> bool:
    if op.type not in UNPACKERS or len(op.inputs) != 1:
        return False
    producer = op.inputs[0].producer
    if (
        producer is None
        or producer.type.startswith(("prim::", "pnnx."))
        or len(producer.outputs) != 1
        or not is_value(producer.outputs[0])
    ):
        return False
    if sole_consumer(op.inputs[0]) is not op:
        return False
    listed = producer.outputs[0]
    outs = list(op.outputs)
    remove_input(op, 0)
    op.outputs.clear()
    graph.operators.remove(op)
    graph.operands.pop(listed.name, None)
    listed.producer = None
    producer.outputs = outs
    for o in outs:
        o.producer = producer
    record("changed", producer.name, f"{len(outs)} outputs of its own instead of a list unpacked by {op.name}")
    return True


def _variadic_of_list(graph: Graph, op: Operator) -> bool:
    if op.type not in _VARIADIC:
        return False
    for k, operand in enumerate(op.inputs):
        lst = operand.producer
        if lst is None or lst.type != "prim::ListConstruct" or sole_consumer(operand) is not op:
            continue
        items = list(lst.inputs)
        rest = [(o, n) for i, (o, n) in enumerate(zip(op.inputs, op.input_names)) if i != k]
        for i in reversed(range(len(op.inputs))):
            remove_input(op, i)
        for item in items:
            add_input(op, item)
        for o, n in rest:
            add_input(op, o, n)
        remove_operator(graph, lst)
        record("changed", op.name, f"takes the {len(items)} tensors of {lst.name} as inputs")
        return True
    return False


def _last_argument_list(graph: Graph, op: Operator) -> bool:
    """A list of tensors in an operator's last slot, where the runtime splices it into the
    layer's inputs (torch.einsum's positional `operands` at optlevel 0): the tensors become
    the operator's own last inputs, as optlevel 1 writes them. Only the last slot: the
    slots before keep their positions."""
    from ..layers.registry import layer_class

    if not op.inputs or op.type.startswith(("prim::", "pnnx.")) or op.type in _VARIADIC:
        return False
    k = len(op.inputs) - 1
    lst = op.inputs[k].producer
    if lst is None or lst.type != "prim::ListConstruct" or sole_consumer(op.inputs[k]) is not op:
        return False
    cls = layer_class(op.type)
    b = bind(op, cls)
    spliced = b.inputs[len(b.inputs) - len(lst.inputs) :]
    if not lst.inputs or op.inputs[k] in b.inputs or op.inputs[k] in b.params.values() or spliced != list(lst.inputs):
        return False  # the runtime reads it as one list, or as a parameter: not spliced
    items = list(lst.inputs)
    remove_input(op, k)
    for item in items:
        add_input(op, item)
    remove_operator(graph, lst)
    record("changed", op.name, f"takes the {len(items)} tensors of {lst.name} as its last inputs")
    return True


@graph_pass("UnpackLists", 1, description="optlevel 0's list/tuple construct-unpack plumbing removed")
def unpack_lists(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for op in list(graph.operators):
        if op.type in _CONSTRUCT:
            changed |= _unpack_of_construct(graph, op) or _split_into_outputs(graph, op)
        else:
            changed |= _variadic_of_list(graph, op) or _last_argument_list(graph, op)
    return graph, changed
