"""An ONNX model specialised at the values the user gives for its small integer inputs.

silero-vad's `forward(x, state, sr)` picks its 8 or 16 kHz network with an `If` on the value of
the 0-d int64 `sr`; ONNX's `Expand` test models expand to the shape an int64 input holds. pnnx
can convert neither (control flow; a shape that is data). When the model is converted for a
run whose inputs are given (`kuiper run M.onnx --input …`, `kuiper compare`, the conversion
check), an input of at most MAX_GIVEN_ELEMENTS integers or booleans whose value a control-flow
condition or a shape operand needs is fixed at its given value before the folding
(onnx_prepare.py): every node reading it reads a constant instead, the `If` folds to the
branch that value takes, the `Expand` gets a constant shape.

The converted file is then valid for that value only. The input stays an input (pnnx keeps an
input nothing reads, and the caller's arrays keep their order): its `pnnx.Input` gets the
parameter `value=` (mark_fixed_inputs), which `kuiper inspect` shows, the engine checks on
every run (runtime/inputs.py: another value is refused, never computed by the wrong branch),
and the conversion check's probe uses. The cache key holds the given values (convert.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..graph import FIXED_INPUT_PARAM as FIXED_PARAM

MAX_GIVEN_ELEMENTS = 8  # an input this small (a sample rate, a shape) may be fixed at its value

# Node inputs that are shapes, sizes or axes (pnnx needs them constant): op -> input positions.
SHAPE_SLOTS: dict[str, tuple[int, ...]] = {
    "Expand": (1,),
    "Reshape": (1,),
    "Tile": (1,),
    "ConstantOfShape": (0,),
    "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4),
    "Pad": (1, 2, 3),
    "Resize": (1, 2, 3),
    "Unsqueeze": (1,),
    "Squeeze": (1,),
    "Split": (1,),
    "TopK": (1,),
    "OneHot": (1,),
    "ReduceSum": (1,),
    "ReduceMean": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
}


# -- the parent's side ------------------------------------------------------------------------------
Given = list[Any] | dict[str, Any]  # per input position, or by input name


def given_values(inputs: Sequence[Any] | None, named: Mapping[str, Any] | None = None) -> Given | None:
    """Per input (in order), its value as a (nested) list when it is at most MAX_GIVEN_ELEMENTS
    integers or booleans, else None; or `named` (the app's "sr=16000": name -> value), checked
    the same way; None when no input is such (or none were given)."""
    import numpy as np

    from ..errors import InputError

    def small(x: Any) -> Any:
        a = np.asarray(x)
        return a.tolist() if a.dtype.kind in "biu" and a.size <= MAX_GIVEN_ELEMENTS else None

    if named:
        values = {name: small(v) for name, v in named.items()}
        wrong = [name for name, v in values.items() if v is None]
        if wrong:
            raise InputError(
                f"input {wrong[0]!r}: a value given for the converter is at most {MAX_GIVEN_ELEMENTS} integers"
            )
        return values
    if inputs is None:
        return None
    by_position = [small(x) for x in inputs]
    return by_position if any(v is not None for v in by_position) else None


def values_text(values: Given | None) -> str:
    """The given values as they enter the cache key ('' for none)."""
    if isinstance(values, dict):
        return repr(sorted(values.items()))
    return "" if values is None else repr(list(values))


_INPUT_LINE = re.compile(r"^pnnx\.Input\s+in(\d+)\s+0\s+1\s+(\S+)(.*)$")


def mark_fixed_inputs(param: Path, fixed: Sequence[tuple[int, str, Any, str]]) -> list[str]:
    """Give the converted file's pnnx.Input of each fixed input (index, ONNX name, value, pnnx
    dtype) the parameter `value=` and its shape (pnnx writes none for an input nothing reads);
    the conversion's note saying so (none when nothing was fixed)."""
    if not fixed:
        return []
    by_index = {index: (value, dtype) for index, _, value, dtype in fixed}
    lines = param.read_text().split("\n")
    for i, line in enumerate(lines):
        m = _INPUT_LINE.match(line)
        if m is None or int(m.group(1)) not in by_index:
            continue
        value, dtype = by_index[int(m.group(1))]
        operand, rest = m.group(2), m.group(3)
        shape = _shape_of(value)
        annotation = f"#{operand}=(" + ",".join(map(str, shape)) + f"){dtype}"
        kept = " ".join(w for w in rest.split() if not w.startswith(f"#{operand}="))
        lines[i] = f"{line[: m.start(3)]} {param_text(value)} {annotation} {kept}".rstrip()
    param.write_text("\n".join(lines))
    said = ", ".join(f"'{name}' = {value}" for _, name, value, _ in fixed)
    return [f"converted for the given value of input(s) {said} only (control flow or a shape reads it)"]


def param_text(value: Any) -> str:
    """`value=16000`, `value=(3,1)` (a list flattened: the shape is the operand's)."""
    flat = _flat(value)
    words = ["True" if v is True else "False" if v is False else str(int(v)) for v in flat]
    return f"{FIXED_PARAM}={words[0]}" if not isinstance(value, list) else f"{FIXED_PARAM}=(" + ",".join(words) + ")"


def _flat(value: Any) -> list:
    return [v for item in value for v in _flat(item)] if isinstance(value, list) else [value]


def _shape_of(value: Any) -> tuple[int, ...]:
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return tuple(shape)


# -- the child's side -------------------------------------------------------------------------------
_INTEGERS = {2, 3, 4, 5, 6, 7, 9, 12, 13}  # ONNX's uint8 … int64 and bool element types


def can_be_fixed(value_info: Any) -> bool:
    """Whether a graph input is one a given value can fix: integers or booleans, at most
    MAX_GIVEN_ELEMENTS of them by its declared shape (unknown dims: not known to be small)."""
    tensor = value_info.type.tensor_type
    if tensor.elem_type not in _INTEGERS or not tensor.HasField("shape"):
        return False
    if not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return False
    n = 1
    for d in tensor.shape.dim:
        n *= d.dim_value
    return n <= MAX_GIVEN_ELEMENTS


def inputs_to_fix(graph: Any, values: Given | None, depends_on: Any) -> dict[str, Any]:
    """The given inputs (name -> array of the input's dtype and declared shape) that a
    control-flow condition or a shape operand left in the graph depends on. `values`: per
    input position, or by name. `depends_on(graph, name)` gives (input names whose values it
    reads, …) (onnx_prepare._depends_on)."""
    import numpy as np
    import onnx

    if not values:
        return {}
    if isinstance(values, dict):
        unknown = sorted(set(values) - {i.name for i in graph.input})
        if unknown:
            from ..errors import InputError

            names = ", ".join(repr(i.name) for i in graph.input)
            raise InputError(
                f"a value is given for {unknown[0]!r}, which is no input of the model (its inputs: {names})"
            )
        values = [values.get(i.name) for i in graph.input]
    given = {}
    for value_info, value in zip(graph.input, values):
        if value is None:
            continue
        tensor = value_info.type.tensor_type
        array = np.asarray(value, dtype=onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        dims = tuple(d.dim_value for d in tensor.shape.dim)
        if array.size == int(np.prod(dims)):  # (a value given by name as one number: of the input's shape)
            given[value_info.name] = array.reshape(dims)
    needed: set[str] = set()
    for node in graph.node:
        slots = (0, 1) if node.op_type in ("If", "Loop") else SHAPE_SLOTS.get(node.op_type, ())
        for slot in slots:
            if slot < len(node.input) and node.input[slot]:
                needed.update(depends_on(graph, node.input[slot])[0])
    return {name: given[name] for name in sorted(needed & given.keys())}


def fix_inputs(graph: Any, fixed: dict[str, Any]) -> None:
    """Every node (in subgraphs too) reading a fixed input reads a constant of its value instead;
    the input stays (unread)."""
    import onnx

    taken = {i.name for i in graph.initializer} | {o for n in graph.node for o in n.output}
    renamed = {}
    for name, array in fixed.items():
        new = f"{name}__given"
        while new in taken:
            new += "_"
        graph.initializer.append(onnx.numpy_helper.from_array(array, new))
        renamed[name] = new
    _rename_reads(graph.node, renamed)


def _rename_reads(nodes: Any, renamed: dict[str, str]) -> None:
    from .onnx_fold import subgraphs

    for node in nodes:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
        for sub in subgraphs(node):
            _rename_reads(sub.node, renamed)


def fixed_note(fixed: dict[str, Any]) -> str:
    said = ", ".join(f"'{name}' = {array.tolist()}" for name, array in fixed.items())
    return (
        f"input(s) {said} fixed at the given value(s) (control flow or a shape reads them): the converted file "
        "is for these values only, and the engine refuses others"
    )
