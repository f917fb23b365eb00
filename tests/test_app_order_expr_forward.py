"""AppTest: the Execution order, Expressions and Step through Forward pages on every bundled
model, and the truth of what they say: buttons drawn for the step on screen, "K of N
compared", shape mismatches, references that match nothing, the operator a ShapeError
names, and cycle narration that names only the nodes on the cycle."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from conftest import SAMPLES, slow_cases

import kuiper_core
from kuiper_core.explore import compare as C
from kuiper_core.explore import expression_view

pytest.importorskip("streamlit")
from apptest_helpers import (  # noqa: E402
    EXPR,
    FORWARD,
    ORDER,
    app,
    as_shown,
    click,
    dots,
    forward_back,
    forward_controls,
    forward_go,
    forward_panel,
    forward_step,
    highlight,
    keyed,
    no_exception,
    texts,
    viewer_colors,
    viewers,
)

END = 10**6  # a position past the end: the End button (runs every operator left)

MODELS = list(json.loads((SAMPLES / "models.json").read_text()))


def component(at, name: str, i: int = 0) -> dict:
    """The data the i-th component `name` was given (the order walk's controls and panels)."""
    return [json.loads(el.proto.json) for el in at.get("bidi_component") if el.proto.component_name == name][i]


def go(at, step: int):
    """The browser's controls reporting a position (steps themselves never reach the server)."""
    at.session_state["kx_order"]["step"] = step
    return at.run()


def shown(at, i: int = 0) -> tuple[dict, str]:
    """What the browser shows for the server's step: viewer i's frame and panel i's HTML."""
    step = component(at, "kx_step_controls")["step"]
    v = viewers(at)[i]
    frame = v["frames"][min(step, len(v["frames"]) - 1)]
    panel = component(at, "kx_step_panel", i)["frames"][step]
    return frame, panel


def runtime(name: str) -> kuiper_core.RuntimeGraph:
    return kuiper_core.load(SAMPLES / f"{name}.pnnx.param")


# -- Execution order ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_order_walkthrough_step_back_and_end_on_the_kuiperinfer_example() -> None:
    at = app(page=ORDER)
    controls = component(at, "kx_step_controls")
    assert controls["step"] == 0 and controls["total"] == 13 and controls["prefix"] == "order"
    frames = viewers(at)[0]["frames"]
    assert len(frames) == 14 and frames[0]["highlight"] is None  # every step goes to the browser once
    assert len(dots(at)) == 1  # one drawing, the frames painted on it
    go(at, 4)  # input, op1, op3, op4 called
    frame, panel = shown(at)
    assert frame["highlight"] == "op4" and "Step 4 of 13:" in panel and "op4" in panel
    assert "input  op1  op3  op4" in panel  # the call stack
    assert at.query_params["step"] in ("4", ["4"])
    go(at, 13)
    frame, panel = shown(at)
    assert "Reverse" in panel and frame["texts"]["op4"] == ["6. op4"]  # the place in the order
    order = re.findall(r"<tr><td>(\d+)</td><td>([^<]+)</td>", panel)
    assert [n for _, n in order] == ["input", "op1", "op3", "op5", "output", "op4"]
    go(at, 0)
    assert "step" not in at.query_params


def test_order_a_step_past_the_end_is_the_end() -> None:
    at = app(page=ORDER)
    go(at, 500)
    assert component(at, "kx_step_controls")["step"] == 13 and at.query_params["step"] in ("13", ["13"])


@pytest.mark.slow
def test_order_kahn_shows_the_indegree_table() -> None:
    at = app(page=ORDER)
    at.selectbox(key="order_source").set_value("A small diamond").run()
    at.radio(key="order_algorithm").set_value("kahn").run()
    go(at, 4)  # indegree, enqueue input, dequeue input, decrement left
    frame, panel = shown(at)
    rows = dict(re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td>", panel))
    assert rows == {"input": "0", "left": "0", "right": "1", "add": "2", "output": "1"}
    assert frame["texts"]["add"] == ["add", "in-degree 2"] and frame["edges"] == {"input->left": "current"}
    assert "in-degree" in dots(at)[0]  # the drawing has the room for the in-degree line


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["dfs", "kahn"])
def test_order_cycle_is_shown_as_the_lesson_at_its_end(algorithm: str) -> None:
    at = app(page=ORDER)
    at.selectbox(key="order_source").set_value("A graph with a cycle").run()
    at.radio(key="order_algorithm").set_value(algorithm).run()
    go(at, component(at, "kx_step_controls")["total"])
    _, panel = shown(at)
    assert "kx-s-error" in panel and "The lesson:" in panel and "cycle" in panel
    if algorithm == "kahn":
        assert "a, b, c lie on a cycle" in panel and "output comes after the cycle" in panel
        assert "output lie" not in panel


def test_order_both_algorithms_side_by_side() -> None:
    at = app(page=ORDER)
    at.radio(key="order_algorithm").set_value("both").run()
    assert len(viewers(at)) == 2
    go(at, 2)
    assert [shown(at, i)[0]["highlight"] for i in (0, 1)] == ["op1", "input"]  # DFS called op1; Kahn enqueued input
    go(at, component(at, "kx_step_controls")["total"])
    orders = [re.findall(r"<tr><td>\d+</td><td>([^<]+)</td>", shown(at, i)[1]) for i in (0, 1)]
    assert orders == [
        ["input", "op1", "op3", "op5", "output", "op4"],
        ["input", "op1", "op3", "op4", "op5", "output"],
    ]
    assert "Both orders are valid" in shown(at, 1)[1]


def test_order_of_a_typed_graph_and_its_located_errors() -> None:
    at = app(page=ORDER)
    at.selectbox(key="order_source").set_value("Type your own graph").run()
    at.text_area(key="order_typed").input("x -> y -> z\nx -> z").run()
    go(at, component(at, "kx_step_controls")["total"])
    assert re.findall(r"<tr><td>\d+</td><td>([^<]+)</td>", shown(at)[1]) == ["x", "y", "z"]
    at.text_area(key="order_typed").input("x -> y\ny - > z").run()
    no_exception(at)
    assert any("Cannot read the graph" in e.value for e in at.error)
    assert "<your graph>:2:2:" in at.code[0].value and "^" in at.code[0].value


@pytest.mark.parametrize("name", slow_cases(MODELS, {"deep1500", "digits_cnn", "resnet18", "vit_tiny", "yolov5s_mini"}))
def test_order_of_each_bundled_model(name: str) -> None:
    g = runtime(name)
    at = app(name, ORDER)
    at.selectbox(key="order_source").set_value("The loaded model").run()
    no_exception(at)
    go(at, 1)
    first = next(op.name for op in g.graph.operators if not g.graph.predecessors(op))  # the DFS's first root
    viewer = viewers(at)[0]
    assert viewer["highlight"] == first and viewer["neutral"]  # state colours only, the rest neutral
    assert {label for label, _ in viewer["legend"]} >= {"on the call stack", "visited, finished (in the output list)"}
    go(at, component(at, "kx_step_controls")["total"])
    table = at.dataframe[-1].value
    assert list(table["node"]) == [r.name for r in g.order]


# -- Step through Forward -------------------------------------------------------------------------------
def expected_compared(name: str, n_run: int) -> int:
    """How many of the first n_run operators have a PyTorch reference in the bundled files
    (pnnx.Output: for the output it passes on)."""
    g = runtime(name)
    keys = (
        set(np.load(SAMPLES / f"{name}.operands.npz").files) if (SAMPLES / f"{name}.operands.npz").exists() else set()
    )
    keys |= set(C.output_operand_names(g.graph)[: len(np.load(SAMPLES / f"{name}.expected.npz").files)])
    return sum(
        any(o.name in keys for o in (r.op.inputs if r.type == "pnnx.Output" else r.op.outputs)) for r in g.order[:n_run]
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_forward_steps_and_matches_pytorch_on_each_bundled_model(name: str) -> None:
    g = runtime(name)
    names = [r.name for r in g.order]
    at = app(name, FORWARD)
    controls = forward_controls(at)
    assert controls["step"] == 0 and controls["total"] == len(names) and controls["known"] == 0  # nothing run yet
    forward_step(at)
    assert highlight(at) == names[0]
    assert forward_controls(at)["known"] >= 1  # the operators run so far go to the browser as frames
    forward_step(at)
    assert highlight(at) == names[1]
    assert f"Operator 2 of {len(names)}: {names[1]}</b>" in forward_panel(at)
    assert keyed(at.selectbox, "fw_target_").value == names[1]  # the picker follows the cursor
    forward_back(at)
    assert highlight(at) == names[0] and keyed(at.selectbox, "fw_target_").value == names[0]
    forward_go(at, END)
    assert not at.error, texts(at.error)
    assert highlight(at) == names[-1]
    controls = forward_controls(at)
    assert controls["step"] == controls["total"] == controls["known"] == len(names)  # every step is a frame
    assert len(viewers(at)[0]["frames"]) == len(names) + 1
    k = expected_compared(name, len(names))
    assert k >= 1  # every bundled model has at least PyTorch's outputs
    every = "within tolerance" if k == 1 else f"all {k} within tolerance"
    assert any(
        f"{k} of {len(names)} operators run so far compared" in s.value and f": {every}" in s.value for s in at.success
    ), texts(at.success)
    assert any(h.value == "Outputs" for h in at.subheader)
    forward_back(at)
    assert forward_controls(at)["step"] == len(names) - 1


def test_forward_over_the_frame_bound_steps_on_the_server(monkeypatch) -> None:
    """A model over forward_frames.MAX_OPERATORS sends the step on view only: every position
    is reported at once (known = -1) and nothing is run ahead of it."""
    from kuiper_core.explore import forward_frames

    monkeypatch.setattr(forward_frames, "MAX_OPERATORS", 5)
    at = app("digits_cnn", FORWARD)
    forward_go(at, 3)
    controls = forward_controls(at)
    assert controls["known"] == -1 and controls["step"] == 3
    assert len(at.session_state["kx_forward"].stepper.events) == 3  # no run ahead
    assert "Operator 3 of 12:" in forward_panel(at)
    assert len(viewers(at)[0]["frames"]) == 4 and highlight(at) == runtime("digits_cnn").order[2].name


@pytest.mark.slow
def test_forward_frames_of_a_long_model_go_deflated() -> None:
    """deep1500 run to the end: all 1,503 steps go to the browser, the panels deflated (0.9 MB
    of summaries as ~50 KB), the graph's frames one added fill a step at most."""
    from apptest_helpers import component_data

    at = app("deep1500", FORWARD)
    forward_go(at, END)
    panel = component_data(at, "kx_step_panel")
    assert panel["frames"] is None and len(panel["packed"]["z"]) < 120_000
    assert "Operator 1502 of 1502: " in forward_panel(at) and "the last operator" in forward_panel(at)
    graph = viewers(at)[0]
    assert len(graph["frames"]) == 1503 and graph["additive"] and len(json.dumps(graph["frames"])) < 120_000
    assert forward_controls(at)["known"] == 1502


@pytest.mark.slow
def test_forward_on_resnet18_compares_every_operator_it_ran() -> None:
    """resnet18 bundles PyTorch's tensor for every operand: 44 operators run, 44 compared."""
    at = app("resnet18", FORWARD)
    forward_go(at, 44)
    assert "Operator 44 of 51:" in forward_panel(at)
    assert any("44 of 44 operators run so far compared with PyTorch" in s.value for s in at.success), texts(at.success)
    assert at.radio(key="fw_color_mode").value == "errors"


@pytest.mark.slow
def test_forward_big_feature_map_is_a_picture_whose_scale_is_pytorchs() -> None:
    """ResNet-18's first conv (1x64x112x112): channel 0 drawn as a picture of 56x56 block means
    (no chart of 3,136 marks), its colour bar's range that of PyTorch's tensor for that operand."""
    from kuiper_core.explore.tensor_view import block_reduce

    at = app("resnet18", FORWARD)
    forward_step(at, 2)
    assert highlight(at) == "convbn2d_0"
    captions = [c for e in at.get("image") for c in (i.caption for i in e.proto.imgs) if "colour bar" in c]
    assert len(captions) == 1, captions
    assert captions[0].startswith("rows: dim 2 (H=112) (0 at the top) · columns: dim 3 (W=112)"), captions[0]
    lo, hi = (float(x) for x in re.search(r"colour bar: (\S+) \(bottom\) to (\S+) \(top\)", captions[0]).groups())
    with np.load(SAMPLES / "resnet18.operands.npz") as z:
        cells, factors = block_reduce(z["1"][0, 0])
    assert factors == (2, 2)
    np.testing.assert_allclose([lo, hi], [cells.min(), cells.max()], rtol=2e-3)
    assert any("Each cell is the mean of a 2×2 block (112×112 values)" in c.value for c in at.caption)
    rect_charts = [c for c in at.get("vega_lite_chart") if '"rect"' in c.proto.spec]
    assert rect_charts == [], "the feature map is not also drawn as a chart"


def test_forward_go_to_an_operator_and_tensor_views() -> None:
    at = app("digits_cnn", FORWARD)
    conv = next(r for r in runtime("digits_cnn").order if r.type == "nn.Conv2d").name
    keyed(at.selectbox, "fw_target_").set_value(conv).run()
    no_exception(at)
    assert highlight(at) == conv and keyed(at.selectbox, "fw_target_").value == conv
    # the status line says which kernel ran the conv (8x8 maps, few channels: im2col)
    assert f": {conv}</b> (nn.Conv2d, im2col + GEMM), " in forward_panel(at)
    tensors = next(
        g
        for g in at.get("button_group")
        if g.key == f"fw_tensor_{[r.name for r in runtime('digits_cnn').order].index(conv)}"
    )
    assert [as_shown(o.content) for o in tensors.proto.options][-1].startswith(
        "out %"
    )  # its inputs and output, output shown
    assert at.get("image"), "a C×H×W map shows its channels as a mosaic"
    assert at.get("vega_lite_chart"), "a heatmap / histogram chart"


def run_with_a_bad_reference(make_bad) -> tuple:
    """digits_cnn run to the end against PyTorch's references, the first ReLU's replaced
    by make_bad(reference); returns (AppTest, that ReLU)."""
    at = app("digits_cnn", FORWARD)
    g = runtime("digits_cnn")
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        refs = dict(z)
    relu = next(r for r in g.order if r.type == "nn.ReLU")
    operand = relu.op.outputs[0].name
    refs[operand] = make_bad(refs[operand])
    at.session_state["kx_refs"] = refs
    forward_go(at, END)
    return at, relu


def test_forward_wrong_shape_reference_is_a_shape_mismatch() -> None:
    at, relu = run_with_a_bad_reference(lambda ref: np.zeros((3, 3), np.float32))
    table = next(df.value for df in at.dataframe if "status" in df.value.columns)
    row = table.set_index("operator").loc[relu.name]
    assert row["status"] == C.SHAPE and np.isnan(row["max |error|"]) and "shape mismatch" in row["detail"]
    assert not (table["max |error|"] == np.inf).any()
    assert any("1 with a shape mismatch" in e.value for e in at.error)


def test_forward_colours_the_first_wrong_operator() -> None:
    at, relu = run_with_a_bad_reference(lambda ref: ref + 1.0)  # no correct engine can match it
    g = runtime("digits_cnn")
    assert any("over tolerance" in e.value for e in at.error)
    assert any(relu.name in b.label for b in at.button if b.key == "fw_show_bad")
    colors = viewer_colors(at)
    assert colors[relu.name] == C.ERROR_COLORS["first bad"] and viewers(at)[0]["neutral"]
    output = next(r.name for r in g.order if r.type == "pnnx.Output")  # compared: the output it passes on
    assert colors[output] == C.ERROR_COLORS[C.OK]  # the model's output is right (issue 38)
    seq = forward_controls(at)["seq"]
    click(at, "fw_show_bad")
    assert highlight(at) == relu.name
    assert forward_controls(at)["seq"] == seq + 1  # the server moved: the browser takes its position
    assert output not in viewer_colors(at)  # not run yet at this step: a step colours what has run by then
    assert f'kx-s-error">%{relu.op.outputs[0].name} against the uploaded references: max |error| 1 ' in forward_panel(
        at
    )


@pytest.mark.slow
def test_forward_warns_when_an_uploaded_npz_names_no_operand() -> None:
    at = app("digits_cnn", FORWARD)
    buf = io.BytesIO()
    np.savez(buf, **{"conv1.weight": np.zeros(3, np.float32), "logits": np.zeros((1, 10), np.float32)})
    at.file_uploader(key="forward_refs").upload("mine.npz", buf.getvalue()).run()
    no_exception(at)
    forward_go(at, END)
    warning = " ".join(texts(at.warning))
    assert "None of the 2 arrays in the uploaded .npz names an operand" in warning and "`logits`" in warning
    assert not any("within tolerance" in s.value for s in at.success)


def test_forward_marks_the_operator_a_shape_error_names() -> None:
    """A .param whose `#` annotation is wrong (pool declared 1x32x3x3, it makes 1x32x4x4):
    the engine's ShapeError names the operator; the page says where, shows declared vs
    produced, marks that operator in the graph, and shows no traceback."""
    bad = (SAMPLES / "digits_cnn.pnnx.param").read_text().replace("#5=(1,32,4,4)f32", "#5=(1,32,3,3)f32")
    at = app()
    at.file_uploader(key="home_param").upload("wrong.pnnx.param", bad.encode())
    at.file_uploader(key="home_bin").upload("wrong.pnnx.bin", (SAMPLES / "digits_cnn.pnnx.bin").read_bytes())
    next(b for b in at.button if b.label == "Load uploaded model").click().run()
    at.switch_page(FORWARD).run()
    forward_go(at, END)
    order = [r.name for r in runtime("digits_cnn").order]
    position = order.index("pool") + 1
    assert any(f"Forward stopped at operator {position}: `pool` (ShapeError)" in e.value for e in at.error), texts(
        at.error
    )
    table = next(df.value for df in at.dataframe if "the .param declares" in df.value.columns)
    assert (
        table.iloc[0]["the .param declares"] == "(1,32,3,3)f32"
        and table.iloc[0]["the layer produced"] == "(1,32,4,4)f32"
    )
    assert viewer_colors(at)["pool"] == "#7a0000" and ["stopped here", "#7a0000"] in viewers(at)[0]["legend"]
    controls = forward_controls(at)
    assert controls["step"] == controls["total"] == position - 1  # nothing to step to past the failure


@pytest.mark.slow
def test_forward_bad_input_shows_the_engine_message() -> None:
    at = app("digits_cnn", FORWARD)
    at.session_state["kx_input"] = {"kind": "npy", "seed": 0}
    at.session_state["kx_input_arrays"] = {"npy": (np.zeros((1, 3, 8, 8), np.float32), "bad.npy")}
    at.run()
    forward_step(at)
    assert any("Forward stopped" in e.value for e in at.error)
    assert any("dim 1 must be 1" in c.value for c in at.code)


# -- Expressions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", slow_cases(MODELS, {"deep1500", "mobilenetv3", "resnet18", "yolov5s_mini"}))
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
    assert not at.error, texts(at.error)
    assert any("agree" in s.value for s in at.success)  # the stack machine equals the layer
    operands = SAMPLES / f"{name}.operands.npz"
    if operands.exists() and op.outputs[0].name in np.load(operands).files:
        assert any("PyTorch" in s.value for s in at.success)
    assert f"%{op.inputs[0].name} " in dots(at)[0]  # operands labelled with the model's operand names


@pytest.mark.slow
def test_expressions_of_a_model_run_it_once_for_every_session(monkeypatch) -> None:
    """A class following one link: the model runs up to the operator once per server, not
    once per session (ResNet-18: 1-6 s of a first visit by link on a shared machine)."""
    from kuiper_core.explore.stepper import ForwardStepper

    runs: list[str] = []
    real = ForwardStepper.run_to
    monkeypatch.setattr(
        ForwardStepper, "run_to", lambda self, name, *a, **k: runs.append(name) or real(self, name, *a, **k)
    )
    op = [op for op in runtime("resnet18").graph.operators if op.type == "pnnx.Expression"][1]
    sessions = [app("resnet18", EXPR) for _ in range(2)]
    for at in sessions:
        at.selectbox(key="expr_op").set_value(op.name).run()
        no_exception(at)
        assert any("agree" in s.value for s in at.success)
    assert runs.count(op.name) <= 1  # (0 when an earlier test of this process ran it)


@pytest.mark.slow
def test_expressions_typed_text_steps_through_the_stack() -> None:
    at = app("digits_cnn", EXPR)
    at.text_input(key="expr_text").set_value("mul(add(@0,1),@1)").run()
    no_exception(at)
    controls = component(at, "kx_step_controls")
    assert (controls["step"], controls["total"], controls["first"]) == (5, 5, 1)  # opens on the finished evaluation
    panels = component(at, "kx_step_panel")["frames"]
    frames = viewers(at)[0]["frames"]
    assert len(panels) == len(frames) == 6  # every step goes to the browser once (0 repeats 1)
    assert "Step 5 of 5" in panels[5] and "Step 1 of 5" in panels[1]
    assert "Step 3 of 5" in panels[3] and "apply add" in panels[3]
    add_id = re.search(r'^  (n\d+) \[label="add\\n#3"', dots(at)[0], re.M).group(1)
    assert (
        frames[3]["highlight"] == add_id and frames[3]["colors"][add_id] == expression_view.ON_STACK
    )  # its value is on the stack
    assert "add(@0,1)" in panels[3] and "[-0.5, 0, 0.5" in panels[3]  # values, not only shapes
    at.session_state["expr_step"] = 3  # the browser reports its position: the tabs follow
    at.run()
    assert component(at, "kx_step_controls")["step"] == 3 and at.query_params["step"] in ("3", ["3"])
    assert "@0 1 add @1 mul" not in texts(at.code)  # only the open tab below is drawn
    at.session_state["expr_tab"] = "Reverse Polish"  # (a click on the tab)
    at.run()
    assert "@0 1 add @1 mul" in texts(at.code)


def test_expressions_parse_error_shows_the_caret_even_on_a_long_line() -> None:
    at = app("digits_cnn", EXPR)
    at.text_input(key="expr_text").set_value("add(@0,").run()
    no_exception(at)
    assert any("Cannot parse" in e.value for e in at.error)
    assert any("^" in c.value and "add(@0," in c.value for c in at.code)
    long = "mul(@0," + "add(@1,2.0)," * 60 + "$)"
    at.text_input(key="expr_text").set_value(long).run()
    code = next(c.value for c in at.code if "^" in c.value).splitlines()
    excerpt, caret = code[1], code[2]
    assert len(excerpt) < 110 and excerpt[caret.index("^")] == "$"


@pytest.mark.slow
def test_a_selection_follows_between_the_graph_and_forward_pages() -> None:
    from apptest_helpers import GRAPH

    at = app("resnet18", GRAPH)
    next(s for s in at.selectbox if s.label == "Operator details").set_value("layer2.0.relu").run()
    click(at, "graph_to_forward")
    position = [r.name for r in runtime("resnet18").order].index("layer2.0.relu") + 1
    assert f"Operator {position} of 51: layer2.0.relu</b>" in forward_panel(at)
    assert highlight(at) == "layer2.0.relu"
    at.switch_page(FORWARD)  # (AppTest keeps asking for the page it was sent to last; a browser follows st.switch_page)
    forward_step(at)
    current = [r.name for r in runtime("resnet18").order][position]
    click(at, "fw_to_graph")
    at.switch_page(GRAPH).run()
    assert highlight(at) == current and any(as_shown(h.value) == current for h in at.subheader)
