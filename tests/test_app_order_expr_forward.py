"""AppTest: the Execution order, Expressions and Step through Forward pages on every bundled model."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import ROOT, SAMPLES

import kuiper_core

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

MODELS = list(json.loads((SAMPLES / "models.json").read_text()))
TIMEOUT = 180
ORDER, EXPR, FORWARD = "pages/3_order.py", "pages/4_expressions.py", "pages/5_forward.py"


def app(model: str | None = None, page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    if model is not None:
        at.radio(key="home_bundled").set_value(model).run()
    if page is not None:
        at.switch_page(page).run()
    no_exception(at)
    return at


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def dots(at: AppTest) -> list[str]:
    return [el.proto.spec for el in at.get("graphviz_chart")]


def current_in_model_dot(dot: str) -> list[str]:
    """Operators drawn with the graph page's highlight class."""
    return [m.group(1) for m in re.finditer(r'^"((?:[^"\\]|\\.)*)" \[[^\n]*class="kx-current"', dot, re.M)]


def current_in_toy_dot(dot: str) -> list[str]:
    return re.findall(r'^  "([^"]+)" \[[^\n]*penwidth=3', dot, re.M)


def click(at: AppTest, key: str, times: int = 1) -> AppTest:
    for _ in range(times):
        at.button(key=key).click().run()
        no_exception(at)
    return at


def runtime(name: str) -> kuiper_core.RuntimeGraph:
    return kuiper_core.load(SAMPLES / f"{name}.pnnx.param")


# -- Execution order ----------------------------------------------------------------------------------
def test_order_walkthrough_step_back_and_end_on_seed_004() -> None:
    at = app(page=ORDER)
    (dot,) = dots(at)
    assert current_in_toy_dot(dot) == []
    click(at, "order_step", 4)  # input, op1, op3, op4 called
    assert current_in_toy_dot(dots(at)[0]) == ["op4"]
    assert any("Step 4:" in i.value and "op4" in i.value for i in at.info)
    assert "input  op1  op3  op4" in [c.value for c in at.code]  # the call stack
    click(at, "order_back")
    assert current_in_toy_dot(dots(at)[0]) == ["op3"]
    click(at, "order_end")
    order = at.dataframe[-1].value
    assert list(order["node"]) == ["input", "op1", "op3", "op5", "output", "op4"]
    assert any("Reverse" in i.value for i in at.info)
    click(at, "order_reset")
    assert current_in_toy_dot(dots(at)[0]) == []


def test_order_kahn_shows_the_indegree_table() -> None:
    at = app(page=ORDER)
    at.selectbox(key="order_source").set_value("A small diamond").run()
    at.radio(key="order_algorithm").set_value("kahn").run()
    click(at, "order_step", 4)  # indegree, enqueue input, dequeue input, decrement left
    table = at.dataframe[0].value
    assert dict(zip(table["node"], table["in-degree"])) == {"input": 0, "left": 0, "right": 1, "add": 2, "output": 1}
    assert "in-degree 0" in dots(at)[0]


@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
def test_order_cycle_is_shown_as_the_lesson(algorithm: str) -> None:
    at = app(page=ORDER)
    at.selectbox(key="order_source").set_value("A graph with a cycle").run()
    at.radio(key="order_algorithm").set_value(algorithm).run()
    click(at, "order_end")
    assert any("cycle" in e.value for e in at.error)
    assert not at.dataframe or algorithm == "kahn"  # no order table (Kahn keeps its in-degree table)


@pytest.mark.parametrize("name", MODELS)
def test_order_of_each_bundled_model(name: str) -> None:
    g = runtime(name)
    at = app(name, ORDER)
    at.selectbox(key="order_source").set_value("The loaded model").run()
    no_exception(at)
    click(at, "order_step")
    first = next(op.name for op in g.graph.operators if not g.graph.predecessors(op))  # the DFS's first root
    assert current_in_model_dot(dots(at)[0]) in ([first], [])  # [] when a big graph is an overview
    click(at, "order_end")
    table = at.dataframe[-1].value
    assert list(table["node"]) == [r.name for r in g.order]


# -- Step through Forward -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_forward_steps_and_matches_pytorch_on_each_bundled_model(name: str) -> None:
    g = runtime(name)
    names = [r.name for r in g.order]
    at = app(name, FORWARD)
    click(at, "fw_step")
    assert current_in_model_dot(dots(at)[0]) == [names[0]]
    click(at, "fw_step")
    assert current_in_model_dot(dots(at)[0]) == [names[1]]
    assert any(f"Operator 2 of {len(names)}" in m.value for m in at.markdown)
    click(at, "fw_back")
    assert current_in_model_dot(dots(at)[0]) == [names[0]]
    click(at, "fw_run_all")
    assert not at.error, [e.value for e in at.error]
    assert current_in_model_dot(dots(at)[0]) == [names[-1]]
    # bundled models carry PyTorch's outputs for their sample input: every operator within tolerance
    assert any(f"All {len(names)} operators" in s.value for s in at.success), [s.value for s in at.success]
    assert any(h.value == "Outputs" for h in at.subheader)


def test_forward_run_to_and_tensor_views() -> None:
    at = app("digits_cnn", FORWARD)
    conv = next(r for r in runtime("digits_cnn").order if r.type == "nn.Conv2d").name
    at.selectbox(key="fw_target").set_value(conv).run()
    click(at, "fw_run_to")
    assert current_in_model_dot(dots(at)[0]) == [conv]
    assert any(f"`{conv}`" in m.value for m in at.markdown)
    assert len(at.tabs) >= 2  # its input and output tensors
    assert at.get("image"), "a 4-D tensor shows its channels as an image"
    assert len(at.get("download_button")) >= 2


def test_forward_colours_the_first_wrong_operator() -> None:
    at = app("digits_cnn", FORWARD)
    g = runtime("digits_cnn")
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        refs = dict(z)
    relu = next(r for r in g.order if r.type == "nn.ReLU")
    operand = relu.op.outputs[0].name
    refs[operand] = refs[operand] + 1.0  # a reference that no correct engine can match
    at.session_state["kx_refs"] = refs
    click(at, "fw_run_all")
    assert any(relu.name in e.value for e in at.error)
    (dot,) = dots(at)
    line = next(ln for ln in dot.splitlines() if ln.startswith(f'"{relu.name}" ['))
    assert 'fillcolor="#d62728"' in line


def test_forward_bad_input_shows_the_engine_message() -> None:
    at = app("digits_cnn", FORWARD)
    at.session_state["kx_input"] = {"kind": "npy", "seed": 0}
    at.session_state["kx_input_array"] = np.zeros((1, 3, 8, 8), np.float32)
    at.run()
    click(at, "fw_step")
    assert any("Forward stopped" in e.value for e in at.error)
    assert any("dim 1 must be 1" in c.value for c in at.code)


# -- Expressions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_expressions_page_on_each_bundled_model(name: str) -> None:
    g = runtime(name)
    exprs = [op for op in g.graph.operators if op.type == "pnnx.Expression"]
    at = app(name, EXPR)
    if not exprs:
        assert at.radio(key="expr_mode").options == ["Type one"]
        return
    op = exprs[-1]
    at.selectbox(key="expr_op").set_value(op.name).run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert any("agree" in s.value for s in at.success)  # the stack machine equals the layer
    if op.outputs[0].name in np.load(SAMPLES / f"{name}.operands.npz").files if (SAMPLES / f"{name}.operands.npz").exists() else False:
        assert any("PyTorch" in s.value for s in at.success)
    dot = dots(at)[0]
    assert f"%{op.inputs[0].name} " in dot  # operands labelled with the model's operand names


def test_expressions_typed_text_steps_through_the_stack() -> None:
    at = app("digits_cnn", EXPR)
    at.text_input(key="expr_text").set_value("mul(add(@0,1),@1)").run()
    no_exception(at)
    assert any("Step 5 of 5" in i.value for i in at.info)  # opens on the finished evaluation
    click(at, "expr_reset")
    assert any("Step 1 of 5" in i.value for i in at.info)
    click(at, "expr_step_btn", 2)
    assert any("Step 3 of 5" in i.value and "apply add" in i.value for i in at.info)
    (dot,) = dots(at)
    assert re.search(r'label="add\\n#3", fillcolor="#9fdf9f"[^\n]*penwidth=3', dot)
    assert "@0 @1" not in [c.value for c in at.code]  # the RPN is @0 1 add @1 mul
    assert "@0 1 add @1 mul" in [c.value for c in at.code]


def test_expressions_parse_error_shows_the_caret() -> None:
    at = app("digits_cnn", EXPR)
    at.text_input(key="expr_text").set_value("add(@0,").run()
    no_exception(at)
    assert any("Cannot parse" in e.value for e in at.error)
    assert any("^" in c.value and "add(@0," in c.value for c in at.code)
