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
        ("name", "add"), ("(", "("), ("operand", "@0"), (",", ","), ("number", "1.5"), (")", ")")
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


def test_ast_dot_marks_current_and_evaluated_nodes() -> None:
    ast = ex.parse("mul(add(@0,1),@1)")
    trace = ex.evaluate_traced(ast, V.example_inputs(2))
    step = 2  # push @0, push 1, apply add
    view = V.ast_dot(ast, current=trace.steps[step].node, done=V.evaluated_nodes(trace, step))
    add_line = next(line for line in view.dot.splitlines() if 'label="add' in line)
    assert 'penwidth=3' in add_line and V.DONE in add_line
    mul_line = next(line for line in view.dot.splitlines() if 'label="mul' in line)
    assert V.DONE not in mul_line


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
