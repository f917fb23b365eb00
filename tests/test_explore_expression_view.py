"""kuiper_core.explore.expression_view: tokens, AST DOT, RPN and stack rows of pnnx.Expression."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import OPS, max_err_ok
from kuiper_core import expression as ex
from kuiper_core.errors import ParseError
from kuiper_core.explore import expression_view as V
from kuiper_core.pnnx import load_graph

NESTED = OPS / "expr_nested_six"  # add(div(mul(add(@0,@1),sub(@2,@3)),add(mul(@4,@4),1.0)),pow(@5,2))


def _nested():
    g = load_graph(NESTED / "model.pnnx.param")
    (op,) = V.expression_operators(g)
    return g, op


def test_expression_operators_and_operand_labels_come_from_the_model() -> None:
    g, op = _nested()
    assert V.expression_text(op).startswith("add(div(mul(add(@0,@1)")
    assert V.operand_labels(op) == [f"%{i} (1,4,8,8)" for i in range(6)]


def test_token_rows_have_kinds_and_columns() -> None:
    rows = V.token_rows("add(@0, 1.5)")
    assert [(r["kind"], r["text"]) for r in rows] == [
        ("name", "add"),
        ("(", "("),
        ("operand", "@0"),
        (",", ","),
        ("number", "1.5"),
        (")", ")"),
    ]
    assert rows[4]["columns"] == "9-11"


def test_parse_error_has_a_caret() -> None:
    with pytest.raises(ParseError) as e:
        V.token_rows("add(@0,$)")
    assert "^" in e.value.render()


def test_ast_dot_labels_operands_with_real_names_and_rpn_positions() -> None:
    g, op = _nested()
    ast = ex.parse(V.expression_text(op))
    view = V.ast_dot(ast, V.operand_labels(op))
    assert view.shown == view.total == 17
    assert "@5\\n%5 (1,4,8,8)" in view.dot
    # the root is evaluated last: its RPN position is the number of nodes
    assert re.search(r'n0 \[label="add\\n#17"', view.dot)
    assert view.dot.count("->") == 16


def test_ast_overlay_marks_the_stack_the_used_and_the_current_node() -> None:
    ast = ex.parse("mul(add(@0,1),@1)")
    trace = ex.evaluate_traced(ast, V.example_inputs(2))
    view = V.ast_dot(ast)
    step = 2  # push @0, push 1, apply add
    colors, current = view.overlay_colors(trace, step)
    label_of = {m.group(1): m.group(2) for m in re.finditer(r'^  (n\d+) \[label="([^"]*)"', view.dot, re.M)}
    by_label = {label_of[k].split("\\n")[0]: v for k, v in colors.items()}
    assert label_of[current].startswith("add")
    assert by_label == {"@0": V.USED, "1": V.USED, "add": V.ON_STACK}  # add's value is on the stack
    assert "penwidth" not in view.dot and V.USED not in view.dot  # the state is an overlay, not in the DOT


def test_stack_rows_show_values_not_only_shapes() -> None:
    ast = ex.parse("mul(add(@0,1),@1)")
    trace = ex.evaluate_traced(ast, V.example_inputs(2))
    rows = V.stack_rows(trace, 3)  # after push @1: [add(@0,1), @1], top first
    assert [r[""] for r in rows] == ["top", ""]
    assert rows[0]["type"] == "(2,3)float32"  # format_shape, as .param writes it
    x1 = V.example_inputs(2)[1]
    assert rows[0]["values"].startswith(f"[{x1.reshape(-1)[0]:.4g}, {x1.reshape(-1)[1]:.4g}")
    assert rows[1]["value of"] == "add(@0,1)" and rows[1]["values"].startswith("[-0.5, 0, 0.5")  # @0 + 1


def test_ast_dot_caps_big_trees() -> None:
    text = "@0"
    for _ in range(500):
        text = f"neg({text})"
    view = V.ast_dot(ex.parse(text), max_nodes=50)
    assert view.shown == 50 and view.total == 501 and "…" in view.dot


def test_rpn_and_trace_rows_on_the_models_tensors_match_pytorch() -> None:
    g, op = _nested()
    labels = V.operand_labels(op)
    ast = ex.parse(V.expression_text(op))
    rpn = V.rpn_rows(ast, labels)
    assert [r["token"] for r in rpn][:3] == ["@0", "@1", "add"]
    assert rpn[0]["action"] == "push input %0 (1,4,8,8)"
    assert rpn[-1]["action"] == "pop 2, apply add, push the result"
    with np.load(NESTED / "inputs.npz") as z:
        xs = [z[f"in{i}"] for i in range(6)]
    trace = ex.evaluate_traced(ast, xs)
    rows = V.trace_rows(trace, labels)
    assert len(rows) == 17 and rows[-1]["depth"] == 1
    assert rows[1]["stack (bottom → top)"].startswith("@0 %0 (1,4,8,8) = float32[1, 4, 8, 8]")
    assert max(r["depth"] for r in rows) == 3  # e.g. add(@0,@1), @2, @3 before sub
    with np.load(NESTED / "expected.npz") as z:
        ok, err, bound = max_err_ok(trace.result, z["out0"])  # PyTorch's output
    assert ok, (err, bound)
    top_first = V.stack_at(trace, 1, labels)
    assert top_first[0].startswith("@1") and top_first[1].startswith("@0")


def test_example_inputs_and_helpers() -> None:
    xs = V.example_inputs(3)
    assert len(xs) == 3 and all(x.dtype == np.float32 and x.shape == (2, 3) for x in xs)
    assert V.max_operand_index(ex.parse("add(@0,@2)")) == 2
    assert V.max_operand_index(ex.parse("1")) == -1
    assert V.result_rows(np.zeros((2, 2), np.float32)) == {"kind": "tensor", "shape": (2, 2), "dtype": "float32"}
    assert V.result_rows(3)["value"] == "3"
    assert V.operand_labels(None, 2) == ["input 0", "input 1"]
