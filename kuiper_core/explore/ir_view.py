"""The textual IR as the app shows it: lines tied to operators, a line's tokens, the same
operators written three ways for teaching, and an edited text run against the original.

The three ways (seed 003, TVM Relay's "dataflow vs let binding"):

- dataflow: one operator a line, each value named once (`%2 = nn.ReLU(%1)`);
- let-bound (A-normal form): the same lines as `let %2 = nn.ReLU(%1);` — the text barely
  changes, but every `let` now holds the rest of the program as its body, fixing where
  (in which scope) each value is computed;
- nested: each output as one expression tree. A value used twice is printed twice, so a DAG
  with sharing grows (exponentially for residual nets) and reads as if it computed the shared
  value twice: the ambiguity Relay's text format avoids by naming values. Big trees are cut.
"""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

from .. import ir
from ..graph import Graph, Operand, Operator, shape_label
from ..ir.printer import sigil_name

NESTED_NODE_LIMIT = 300  # calls printed in the nested view before it is cut
NESTED_DEPTH_LIMIT = 40  # nesting levels printed before a subtree is cut


@dataclass
class ViewLine:
    text: str
    op: str | None = None  # the operator this line shows, for highlighting


# -- the IR text and its lines ---------------------------------------------------------------------
def ir_lines(module: ir.IRModule) -> list[ViewLine]:
    """Every source line, tagged with the operator that starts on it."""
    by_line = {module.line_of(i): op.name for i, op in enumerate(module.graph.operators)}
    count = module.source.line_count - (1 if module.source.text.endswith("\n") else 0)  # no empty last line
    return [ViewLine(module.source.line_text(n), by_line.get(n)) for n in range(1, count + 1)]


def line_of_operator(module: ir.IRModule, name: str) -> int | None:
    index = module.op_index(name)
    return module.line_of(index) if index is not None else None


def token_rows(line: str) -> list[dict[str, Any]]:
    """The tokens of one line: kind, text, columns (raises a ParseError on a bad token)."""
    return [
        {"#": i, "kind": t.kind.value, "text": t.text, "columns": f"{t.span.start + 1}-{t.span.end}"}
        for i, t in enumerate(ir.tokenize(line))
    ]


def window(lines: Sequence[ViewLine], current: str | None, radius: int) -> tuple[int, int]:
    """[start, end) of the lines within `radius` of the current operator's (all without one)."""
    at = next((i for i, line in enumerate(lines) if current is not None and line.op == current), None)
    if at is None:
        return 0, min(len(lines), 2 * radius + 1)
    return max(0, at - radius), min(len(lines), at + radius + 1)


def html_block(
    lines: Sequence[ViewLine],
    current: str | None,
    *,
    start: int = 0,
    end: int | None = None,
    numbers: bool = True,
    max_height: str | None = None,
) -> str:
    """A <pre> of the lines; those of the current operator carry class `kx-ir-current`.
    `max_height` (CSS, e.g. "70vh") makes a long block scroll."""
    end = len(lines) if end is None else end
    out = []
    for n in range(start, end):
        line = lines[n]
        num = f'<span class="kx-ir-num">{n + 1:>5} </span>' if numbers else ""
        body = html.escape(line.text) or " "
        if current is not None and line.op == current:
            out.append(f'<span class="kx-ir-current" data-op="{html.escape(current)}">{num}{body}</span>')
        else:
            out.append(f"{num}{body}")
    return (
        '<pre class="kx-ir" style="font-size:0.8em;line-height:1.35;overflow:auto;white-space:pre;'
        + (f"max-height:{max_height};" if max_height else "")
        + 'padding:0.6em;background:#f8f9fb;border:1px solid #e3e6ea;border-radius:6px">'
        + "\n".join(out)
        + "</pre><style>.kx-ir-current{background:#ffe08a;display:inline-block;min-width:100%}"
        ".kx-ir-num{color:#999;user-select:none}</style>"
    )


# -- three ways to write the same operators ----------------------------------------------------------
def _signature(graph: Graph) -> tuple[list[str], str]:
    """The function's parameters (pnnx.Input values, typed) and its result."""
    params = [f"{sigil_name('%', o.name)}: {_type(o)}" for op in graph.inputs for o in op.outputs]
    outs = [sigil_name("%", o.name) for op in graph.outputs for o in op.inputs]
    return params, outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"


def _type(o: Operand) -> str:
    return (
        ir.default_registry().print_type(ir.TensorType(o.shape, o.dtype))
        if (o.shape is None) == (o.dtype is None)
        else "?"
    )


def _call(op: Operator) -> str:
    return f"{op.type}(" + ", ".join(sigil_name("%", o.name) for o in op.inputs) + ")"


def _bound(op: Operator) -> str:
    names = [sigil_name("%", o.name) for o in op.outputs]
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def _body_ops(graph: Graph) -> list[Operator]:
    return [op for op in graph.operators if op.type not in ("pnnx.Input", "pnnx.Output")]


def dataflow_lines(graph: Graph) -> list[ViewLine]:
    params, result = _signature(graph)
    lines = [ViewLine(f"fn ({', '.join(params)}) {{")]
    lines += [ViewLine(f"  {_bound(op)} = {_call(op)}  // {op.name}", op.name) for op in _body_ops(graph)]
    return lines + [ViewLine(f"  {result}"), ViewLine("}")]


def let_lines(graph: Graph) -> list[ViewLine]:
    params, result = _signature(graph)
    lines = [ViewLine(f"fn ({', '.join(params)}) {{")]
    lines += [ViewLine(f"  let {_bound(op)} = {_call(op)};  // {op.name}", op.name) for op in _body_ops(graph)]
    return lines + [ViewLine(f"  {result}"), ViewLine("}")]


@dataclass
class NestedView:
    lines: list[ViewLine]
    calls_printed: int
    calls_in_full: int  # calls the whole tree would have (shared values counted each time)
    operators: int  # calls in the graph (each operator once)
    cut: bool  # the tree was cut at NESTED_NODE_LIMIT calls or NESTED_DEPTH_LIMIT levels
    repeated: dict[str, int] = field(default_factory=dict)  # operator -> times it appears in the full tree


def nested_view(graph: Graph, node_limit: int = NESTED_NODE_LIMIT, depth_limit: int = NESTED_DEPTH_LIMIT) -> NestedView:
    """Each output as one expression tree, one call a line, indented by depth; shared values
    repeated. Counts use exact integers (the full tree of a deep residual net is astronomical)."""
    producers = {id(o): (op, i) for op in graph.operators for i, o in enumerate(op.outputs)}
    body = _body_ops(graph)

    # Times each operator appears in the full tree(s): paths from the outputs, in reverse order.
    uses: dict[int, int] = {id(op): 0 for op in graph.operators}
    for op in graph.outputs:
        for o in op.inputs:
            if id(o) in producers:
                uses[id(producers[id(o)][0])] += 1
    for op in reversed(body):
        for o in op.inputs:
            if id(o) in producers:
                uses[id(producers[id(o)][0])] += uses[id(op)]
    full = sum(uses[id(op)] for op in body)

    lines: list[ViewLine] = []
    printed, cut = 0, False
    roots = [o for op in graph.outputs for o in op.inputs]
    for n, root in enumerate(roots):
        lines.append(ViewLine(f"out{n} ="))
        # Entries: (operand to print, depth, text after it) or (None, depth, a closing line).
        stack: list[tuple[Operand | None, int, str, str | None]] = [(root, 1, "", None)]
        while stack:
            operand, depth, suffix, owner = stack.pop()
            pad = "  " * depth
            if operand is None:
                lines.append(ViewLine(pad + suffix, owner))
                continue
            made = producers.get(id(operand))
            if made is None or made[0].type == "pnnx.Input":
                lines.append(ViewLine(f"{pad}{sigil_name('%', operand.name)}{suffix}", made[0].name if made else None))
                continue
            op = made[0]
            if printed >= node_limit or depth > depth_limit:
                cut = True
                lines.append(ViewLine(f"{pad}…{suffix}", op.name))
                continue
            printed += 1
            index = f"[{made[1]}]" if len(op.outputs) > 1 else ""
            if not op.inputs:
                lines.append(ViewLine(f"{pad}{op.type}(){index}{suffix}", op.name))
                continue
            lines.append(ViewLine(f"{pad}{op.type}(", op.name))
            stack.append((None, depth, f"){index}{suffix}", op.name))
            last = len(op.inputs) - 1
            for k in range(last, -1, -1):
                stack.append((op.inputs[k], depth + 1, "," if k < last else "", None))
    repeated = {op.name: uses[id(op)] for op in body if uses[id(op)] > 1}
    return NestedView(lines, printed, full, len(body), cut, repeated)


# -- editing the text and running it ---------------------------------------------------------------
def weight_arrays(graph: Graph) -> dict[str, np.ndarray]:
    """The loaded weights of a graph as the .bin names them (`opname.attrname`)."""
    return {f"{op.name}.{k}": a.data for op in graph.operators for k, a in op.attrs.items() if a.data is not None}


@dataclass
class EditRun:
    module: ir.IRModule
    outputs: list[np.ndarray]


def run_text(
    text: str, weights: Mapping[str, np.ndarray], inputs: Sequence[np.ndarray], path: str = "edited.kir"
) -> EditRun:
    """Parse edited IR, take its weights from `weights` by name, build and run it. Every
    error an operator causes (at build or while running) points into the text."""
    from ..errors import ModelError
    from ..ir.validate import locate_model_error

    module = ir.parse_module(text, path, check=False)  # the build checks the layers, with real weights
    ir.bind_arrays(module, weights)
    runtime = ir.build(module)
    try:
        outputs = runtime.forward(*inputs)
    except ModelError as e:
        located = locate_model_error(module, e)
        if located is e:
            raise
        raise located from e
    return EditRun(module, outputs)


def output_rows(
    edited: Sequence[np.ndarray], original: Sequence[np.ndarray] | None, expected: Sequence[np.ndarray] | None = None
) -> list[dict[str, Any]]:
    """Per output: shape, dtype, and the largest difference to the unedited model and PyTorch."""
    rows = []
    for i, y in enumerate(edited):
        row: dict[str, Any] = {
            "output": f"out{i}",
            "shape": shape_label(np.shape(y)) if np.ndim(y) else "scalar",
            "dtype": str(np.asarray(y).dtype),
        }
        for label, refs in (("max |Δ| vs the model as loaded", original), ("max |Δ| vs PyTorch", expected)):
            if refs is None:
                continue
            ref = refs[i] if i < len(refs) else None
            row[label] = _max_diff(y, ref)
        rows.append(row)
    return rows


def _max_diff(y: np.ndarray, ref: np.ndarray | None) -> str:
    if ref is None:
        return "no such output"
    y, ref = np.asarray(y), np.asarray(ref)
    if y.shape != ref.shape:
        return f"shape differs ({shape_label(ref.shape)})"
    if y.size == 0:
        return "0"
    return f"{float(np.max(np.abs(y.astype(np.float64) - ref.astype(np.float64)))):.3g}"


def text_diff(before: str, after: str, limit: int = 80) -> str:
    """A unified diff of two IR texts (at most `limit` lines)."""
    diff = list(
        difflib.unified_diff(before.splitlines(), after.splitlines(), "model.kir", "edited.kir", lineterm="", n=0)
    )
    if len(diff) > limit:
        diff = diff[:limit] + [f"… {len(diff) - limit} more diff lines"]
    return "\n".join(diff)


__all__ = [
    "ViewLine",
    "ir_lines",
    "line_of_operator",
    "token_rows",
    "window",
    "html_block",
    "dataflow_lines",
    "let_lines",
    "NestedView",
    "nested_view",
    "weight_arrays",
    "EditRun",
    "run_text",
    "output_rows",
    "text_diff",
]
