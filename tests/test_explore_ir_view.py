"""What the IR page shows: lines tied to operators, tokens, the three ways of writing a graph
(with the nested tree's sizes counted independently), and an edited text run end to end."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLES, max_err_ok

import kuiper_core
from kuiper_core import ir
from kuiper_core.errors import ParseError
from kuiper_core.explore import ir_view as V
from kuiper_core.graph import Graph
from kuiper_core.pnnx import load_graph, read_param


def _module(name: str) -> ir.IRModule:
    return ir.parse_module(ir.print_graph(read_param(SAMPLES / f"{name}.pnnx.param")), "m.kir")


def test_lines_are_tied_to_their_operators() -> None:
    module = _module("tiny_mlp")
    lines = V.ir_lines(module)
    assert lines[0].text == "{" and lines[-1].text == "}"
    tagged = [line.op for line in lines if line.op is not None]
    assert tagged == [op.name for op in module.graph.operators]
    assert V.line_of_operator(module, "fc1") == 4 and "@fc1 " in lines[3].text


@pytest.mark.slow
def test_window_and_html_highlight() -> None:
    lines = V.ir_lines(_module("deep1500"))
    name = lines[700].op
    start, end = V.window(lines, name, 12)
    assert (start, end) == (688, 713)
    block = V.html_block(lines, name, start=start, end=end)
    assert block.count('class="kx-ir-current"') == 1 and f'data-op="{name}"' in block
    assert "&quot;" in block  # the text is escaped
    assert V.window(lines, None, 12) == (0, 25)


def test_token_rows_of_a_line() -> None:
    rows = V.token_rows('(%2) = "nn.ReLU" @act (%1) : (pnnx.tensor<1x32xf32>) -> pnnx.tensor<1x32xf32>')
    assert [r["kind"] for r in rows[:7]] == ["(", "value", ")", "=", "string", "symbol", "("]
    assert rows[4]["text"] == '"nn.ReLU"' and rows[4]["columns"] == "8-16"
    with pytest.raises(ParseError):
        V.token_rows("(%2) = # oops")


def test_dataflow_and_let_bound_forms() -> None:
    g = read_param(SAMPLES / "tiny_mlp.pnnx.param")
    flow = [line.text for line in V.dataflow_lines(g)]
    lets = [line.text for line in V.let_lines(g)]
    assert flow[0] == "fn (%0: pnnx.tensor<1x1x8x8xf32>) {"
    assert flow[1] == "  %1 = torch.flatten(%0)  // torch.flatten_0"
    assert lets[1] == "  let %1 = torch.flatten(%0);  // torch.flatten_0"
    assert flow[-2:] == ["  %5", "}"] and lets[-2:] == ["  %5", "}"]
    assert len(flow) == len(lets) == 1 + (len(g.operators) - 2) + 2  # fn line, body, result, brace


def _residual_chain(blocks: int) -> Graph:
    """y_{i+1} = y_i + relu(y_i): every y is used twice."""
    g = Graph()
    y = g.add_operand("y0")
    g.add_operator("pnnx.Input", "in", [], [y])
    for i in range(blocks):
        r = g.add_operand(f"r{i}")
        g.add_operator("nn.ReLU", f"relu{i}", [y], [r])
        nxt = g.add_operand(f"y{i + 1}")
        g.add_operator("pnnx.Expression", f"add{i}", [r, y], [nxt], expr="add(@0,@1)")
        y = nxt
    g.add_operator("pnnx.Output", "out", [y], [])
    return g


def test_nested_form_repeats_shared_values() -> None:
    g = _residual_chain(1)  # add(relu(%y0), %y0)
    view = V.nested_view(g)
    assert [line.text for line in view.lines] == [
        "out0 =",
        "  pnnx.Expression(",
        "    nn.ReLU(",
        "      %y0",
        "    ),",
        "    %y0",
        "  )",
    ]
    g2 = _residual_chain(2)  # add(relu(y1), y1) with y1 = add(relu(y0), y0): y1's tree written twice
    view2 = V.nested_view(g2)
    assert sum(line.op == "relu0" and line.text.strip() == "nn.ReLU(" for line in view2.lines) == 2
    assert view2.repeated == {"relu0": 2, "add0": 2}


@pytest.mark.parametrize("blocks", [1, 3, 40])
def test_nested_tree_size_is_exact_and_big_trees_are_cut(blocks: int) -> None:
    # T(y_{k+1}) = 1 (add) + 1 (relu) + 2 T(y_k), T(y_0) = 0  =>  T = 2^(k+1) - 2
    view = V.nested_view(_residual_chain(blocks))
    assert view.calls_in_full == 2 ** (blocks + 1) - 2
    assert view.operators == 2 * blocks
    assert view.cut == (view.calls_in_full > V.NESTED_NODE_LIMIT or 2 * blocks > V.NESTED_DEPTH_LIMIT)
    assert view.calls_printed <= V.NESTED_NODE_LIMIT


def test_nested_form_of_the_deepest_model_is_cut_and_counted() -> None:
    view = V.nested_view(read_param(SAMPLES / "deep1500.pnnx.param"))
    assert view.cut and view.calls_printed == V.NESTED_NODE_LIMIT
    assert view.calls_in_full > 10**80  # residual sharing: far beyond anything printable


# -- editing -------------------------------------------------------------------------------------------
def _edit_setup(name: str = "digits_cnn"):
    graph = load_graph(SAMPLES / f"{name}.pnnx.param")
    x = np.load(SAMPLES / f"{name}.input.npy")
    return graph, ir.print_graph(graph), V.weight_arrays(graph), [x]


def test_unedited_text_runs_to_pytorchs_answer() -> None:
    graph, text, weights, inputs = _edit_setup()
    run = V.run_text(text, weights, inputs)
    with np.load(SAMPLES / "digits_cnn.expected.npz") as z:
        assert max_err_ok(run.outputs[0], z["out0"])[0]
    rows = V.output_rows(run.outputs, kuiper_core.RuntimeGraph.from_graph(graph).forward(*inputs))
    assert rows[0]["max |Δ| vs the model as loaded"] == "0"


def test_an_edit_changes_the_answer() -> None:
    graph, text, weights, inputs = _edit_setup()
    edited = text.replace('"nn.ReLU" @relu ', '"nn.Sigmoid" @relu ', 1)
    assert edited != text
    run = V.run_text(edited, weights, inputs)
    original = kuiper_core.RuntimeGraph.from_graph(graph).forward(*inputs)
    assert float(run.outputs[0].max()) != pytest.approx(float(original[0].max()))
    assert "-" in V.text_diff(text, edited) and "nn.Sigmoid" in V.text_diff(text, edited)


def test_edit_errors_point_into_the_text() -> None:
    _, text, weights, inputs = _edit_setup()
    with pytest.raises(ParseError, match="use of undefined value %77"):
        V.run_text(text.replace("($input=%5)", "($input=%77)"), weights, inputs)
    bad_layer = text.replace("in_features:(Int32)512", "in_features:(Int32)500")
    with pytest.raises(ParseError) as info:
        V.run_text(bad_layer, weights, inputs)
    line = info.value.source_line
    assert "nn.Linear @fc1" in info.value.message
    assert line[info.value.column - 1 :].startswith("(pnnx.weight)<64x512xf32>")  # the weight the message names
    renamed = text.replace("@fc2 ", "@fc9 ")
    with pytest.raises(ParseError, match="weight 'fc9.bias' is referenced but there is no such weight"):
        V.run_text(renamed, weights, inputs)


def test_located_errors_keep_their_class() -> None:
    """A layer's, the shape check's or the weights' error located in the text is still caught
    by its own class, with its details, and is not located twice."""
    from kuiper_core.errors import ModelError, ShapeError, WeightError
    from kuiper_core.ir.validate import locate_model_error

    _, text, weights, inputs = _edit_setup()
    lines = text.split("\n")
    declared = lines[2][: lines[2].rindex("->")] + "-> pnnx.tensor<1x16x8x9xf32>"  # conv's result, 9 wide
    use = lines[3].replace(": (pnnx.tensor<1x16x8x8xf32>)", ": (pnnx.tensor<1x16x8x9xf32>)")
    wrong_shape = "\n".join(lines[:2] + [declared, use] + lines[4:])
    with pytest.raises(ShapeError) as info:
        V.run_text(wrong_shape, weights, inputs)
    err = info.value
    assert isinstance(err, ParseError) and err.line == 3 and err.operator == "convbn2d_0"
    assert (err.declared, err.produced) == ("(1,16,8,9)f32", "(1,16,8,8)f32")
    assert isinstance(err.__cause__, ShapeError) and not isinstance(err.__cause__, ParseError)
    module = ir.parse_module(wrong_shape, "edited.kir", check=False)
    assert locate_model_error(module, err) is err
    with pytest.raises(ModelError) as info:
        V.run_text(text.replace("in_features:(Int32)512", "in_features:(Int32)500"), weights, inputs)
    assert isinstance(info.value, ParseError) and info.value.operator == "fc1"
    with pytest.raises(WeightError) as info:
        V.run_text(text.replace("@fc2 ", "@fc9 "), weights, inputs)
    assert isinstance(info.value, ParseError) and "fc9.bias" in info.value.message
