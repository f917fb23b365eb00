"""AppTest: the Home, Graph and Profile pages on every bundled model, uploads, inputs and errors."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from conftest import SAMPLES

from kuiper_core.pnnx import read_param

pytest.importorskip("streamlit")
from apptest_helpers import (  # noqa: E402
    FORWARD,
    GRAPH,
    PROFILE,
    app,
    as_shown,
    dots,
    forward_panel,
    forward_step,
    highlight,
    no_exception,
    operator_nodes,
    viewers,
)

MODELS = list(json.loads((SAMPLES / "models.json").read_text()))


def graphviz_specs(at) -> list[str]:
    return dots(at)


# -- every page on every bundled model ------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_pages_on_bundled_model(name: str) -> None:
    graph = read_param(SAMPLES / f"{name}.pnnx.param")
    n_ops = len(graph.operators)
    at = app(name)
    no_exception(at)
    assert not at.error, [e.value for e in at.error]  # every bundled model loads and builds
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Operators"] == f"{n_ops:,}"
    assert metrics["Parameters"] == f"{graph.parameter_count():,}"
    assert any("Ready" in s.value for s in at.success)

    at.switch_page(GRAPH).run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    (viewer,) = viewers(at)
    if n_ops <= 400:  # every module open: all operators are nodes
        assert operator_nodes(dot) == {op.name for op in graph.operators}
    else:  # big graphs open as their top modules, closed (click a folder to open one)
        assert any("closed module" in c.value for c in at.caption)
        assert '"group blocks.0' in dot and len(operator_nodes(dot)) < 60
    # the category legend sits by the graph, one chip per category drawn
    assert viewer["legend"] and not viewer["neutral"]

    at.switch_page(PROFILE).run()
    no_exception(at)
    table = at.dataframe[0].value
    assert len(table) == n_ops and set(table["name"]) == {op.name for op in graph.operators}
    assert (table["time_ms"] >= 0).all() and list(table["#"]) == list(range(1, n_ops + 1))  # numbered from 1


@pytest.mark.slow
def test_a_profile_is_measured_once_for_every_session_until_run_again(monkeypatch) -> None:
    """A class opening the Profile page by link: one measurement on the server, not one per
    session (ResNet-18's took 7 s on a shared machine); **Run profile** measures again."""
    import kuiper_core.explore.profile as P

    runs: list[int] = []
    real = P.profile_model
    monkeypatch.setattr(P, "profile_model", lambda *a, **k: runs.append(1) or real(*a, **k))
    first, second = app("tiny_mlp", PROFILE), app("tiny_mlp", PROFILE)
    for at in (first, second):
        no_exception(at)
        assert len(at.dataframe[0].value) == 7 and any(c.value.startswith("Measured at ") for c in at.caption)
    assert len(runs) <= 1  # (0 when an earlier test of this process measured it)
    before = len(runs)
    second.button(key="profile_run").click().run()
    no_exception(second)
    assert len(runs) == before + 1


# -- graph page interactions -------------------------------------------------------------------------
def detail_picker(at):
    return next(s for s in at.selectbox if s.label == "Operator details")


@pytest.mark.slow
def test_graph_detail_panel_highlights_the_chosen_operator() -> None:
    at = app("digits_cnn", GRAPH)
    assert highlight(at) is None
    conv = next(op for op in read_param(SAMPLES / "digits_cnn.pnnx.param").operators if op.type == "nn.Conv2d")
    detail_picker(at).set_value(conv.name).run()
    no_exception(at)
    assert highlight(at) == conv.name and viewers(at)[0]["highlight_label"] == "selected"
    assert detail_picker(at).value == conv.name
    assert any(conv.name == as_shown(h.value) for h in at.subheader)
    assert any("Runs as **im2col + GEMM** at the declared input shape" in c.value for c in at.caption)
    weights = next(df.value for df in at.dataframe if "weight" in df.value.columns)
    assert set(weights.columns) == {"", "weight", "bias"}  # a column per weight: nothing cut in the narrow panel
    assert weights.set_index("").loc["shape", "weight"] == "x".join(map(str, conv.attrs["weight"].shape))
    assert at.get("download_button"), "weight .npy and DOT downloads are offered"
    (hist,) = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]  # the weight histogram
    axes = {k: hist["encoding"][k]["axis"]["format"] for k in ("x", "y")}
    assert axes == {"x": ".4~g", "y": "~s"}  # 4 significant digits, not 15-digit floats
    assert at.query_params.get("op") in (conv.name, [conv.name])  # the selection is in the URL
    # The neighbour buttons select too (the same callback a click in the graph uses).
    nxt = next(b for b in at.button if b.key and b.key.startswith("graph_nav_To"))
    nxt.click().run()
    no_exception(at)
    assert highlight(at) == as_shown(nxt.label) and detail_picker(at).value == as_shown(nxt.label)
    assert not any(c.value.startswith("Runs as") for c in at.caption)  # a ReLU has no kernel to choose


@pytest.mark.slow
def test_graph_filters_and_focus() -> None:
    at = app("resnet18", GRAPH)
    ops = read_param(SAMPLES / "resnet18.pnnx.param").operators
    at.multiselect(key="graph_types").set_value(["nn.Conv2d"]).run()
    (dot,) = graphviz_specs(at)
    assert operator_nodes(dot) == {op.name for op in ops if op.type == "nn.Conv2d"}
    at.multiselect(key="graph_types").set_value([]).run()
    # A search selects its first match and keeps the graph whole around it (Netron's way).
    at.text_input(key="graph_search").input("layer4").run()
    (dot,) = graphviz_specs(at)
    layer4 = [op.name for op in ops if "layer4" in op.name.lower()]
    assert operator_nodes(dot) == {op.name for op in ops}
    assert at.session_state["graph_selected"][1] == layer4[0]
    assert any(f"**{len(layer4)}** operator(s) match" in c.value for c in at.caption)
    at.text_input(key="graph_search").input("").run()
    centre = ops[20]
    at.selectbox(key="graph_focus").set_value(centre.name).run()
    at.number_input(key="graph_hops").set_value(1).run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    near = (
        {centre.name} | {o.producer.name for o in centre.inputs} | {c.name for o in centre.outputs for c in o.consumers}
    )
    assert operator_nodes(dot) == near


@pytest.mark.slow
def test_graph_groups_by_module_and_opens_them() -> None:
    at = app("resnet18", GRAPH)
    (dot,) = graphviz_specs(at)
    assert 'subgraph "cluster layer4.1"' in dot  # modules drawn as clusters
    next(b for b in at.button if b.key == "graph_close_all").click().run()
    (dot,) = graphviz_specs(at)
    assert {"group layer1", "group layer4"} <= {n for n in re.findall(r'^\s*"(group [^"]+)"', dot, re.M)}
    assert "convbn2d_1" not in operator_nodes(dot)
    # Choosing an operator inside a closed module opens the modules around it.
    detail_picker(at).set_value("convbn2d_1").run()
    (dot,) = graphviz_specs(at)
    assert "convbn2d_1" in operator_nodes(dot) and highlight(at) == "convbn2d_1"
    assert "group layer4" in dot  # the others stay closed


@pytest.mark.slow
def test_big_graph_deep_link_opens_the_module_of_the_operator() -> None:
    ops = read_param(SAMPLES / "deep1500.pnnx.param").operators
    target = ops[777].name
    at = app(None, GRAPH, query={"model": "deep1500", "op": target})
    (dot,) = graphviz_specs(at)
    assert target in operator_nodes(dot) and highlight(at) == target
    assert len(operator_nodes(dot)) < 60  # the rest stays grouped


# -- uploads ------------------------------------------------------------------------------------------
def upload(at, param: bytes, bin_bytes: bytes | None = None, name: str = "model.pnnx.param"):
    at.file_uploader(key="home_param").upload(name, param)
    if bin_bytes is not None:
        at.file_uploader(key="home_bin").upload("model.pnnx.bin", bin_bytes)
    next(b for b in at.button if b.label == "Load uploaded model").click().run()
    return at


def test_bad_param_upload_shows_the_located_error_with_caret() -> None:
    text = (SAMPLES / "tiny_mlp.pnnx.param").read_text().splitlines()
    text[4] = text[4].replace("in_features=64", "in_features=6x4")
    at = upload(app(), ("\n".join(text) + "\n").encode(), name="broken.pnnx.param")
    no_exception(at)
    assert any("could not be read" in e.value for e in at.error)
    code = "\n".join(c.value for c in at.code)
    assert "broken.pnnx.param:5:" in code and "^" in code
    assert "/tmp" not in code and "kx_" not in code  # the temp dir is not shown
    caret_line = code.splitlines()[
        code.splitlines().index(next(l for l in code.splitlines() if l.strip().startswith("^")))
    ]
    source_line = code.splitlines()[code.splitlines().index(caret_line) - 1]
    assert source_line[caret_line.index("^") :].startswith("6x4")
    # Other pages stop with the same message instead of failing.
    at.switch_page(PROFILE).run()
    no_exception(at)
    assert at.error


def test_bad_bin_upload_names_the_weight() -> None:
    at = upload(app(), (SAMPLES / "tiny_mlp.pnnx.param").read_bytes(), b"this is not a zip")
    no_exception(at)
    assert any("WeightError" in e.value for e in at.error)
    assert "not a PNNX .bin" in "\n".join(c.value for c in at.code)


def test_unsupported_operator_upload_still_draws_the_graph() -> None:
    text = (SAMPLES / "tiny_mlp.pnnx.param").read_text().replace("nn.ReLU ", "nn.FancyAct ")
    at = upload(app(), text.encode(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes())
    no_exception(at)
    assert any("UnsupportedOperatorError" in e.value for e in at.error)
    assert "nn.FancyAct: act (line 6)" in "\n".join(c.value for c in at.code)
    at.switch_page(GRAPH).run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    assert "act" in operator_nodes(dot)


def test_a_misspelled_operator_type_gets_did_you_mean() -> None:
    text = (SAMPLES / "tiny_mlp.pnnx.param").read_text().replace("nn.ReLU ", "nn.Relu ")
    at = upload(app(), text.encode(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes())
    no_exception(at)
    assert "nn.Relu: did you mean nn.ReLU" in "\n".join(c.value for c in at.code)


@pytest.mark.slow
def test_good_upload_loads_and_profiles() -> None:
    at = upload(app(), (SAMPLES / "tiny_mlp.pnnx.param").read_bytes(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes())
    no_exception(at)
    assert not at.error
    assert {m.label: m.value for m in at.metric}["Operators"] == "7"
    # An upload has no sample input: seeded random is the default choice, and the sidebar says so.
    assert at.radio(key="home_input_kind").value == "random"
    assert sidebar_input(at) == "seeded random numbers (seed 0)"
    at.switch_page(PROFILE).run()
    no_exception(at)
    assert len(at.dataframe[0].value) == 7


# -- inputs ---------------------------------------------------------------------------------------
def sidebar_input(at) -> str:
    """The input the sidebar names (drawn after the page ran, so it is this run's)."""
    (line,) = [c.value for c in at.sidebar.caption if c.value.startswith("Input: ")]  # one badge, this run's
    return line[len("Input: ") :]


def test_input_choices_reach_the_sidebar_and_the_profile_in_the_same_run() -> None:
    at = app("tiny_mlp")
    assert sidebar_input(at) == "the model's sample input"
    at.radio(key="home_input_kind").set_value("random").run()
    assert sidebar_input(at) == "seeded random numbers (seed 0)"  # not one click late
    at.number_input(key="home_seed").set_value(7).run()
    assert sidebar_input(at) == "seeded random numbers (seed 7)"
    at.radio(key="home_input_kind").set_value("zeros").run()
    no_exception(at)
    assert sidebar_input(at) == "zeros"
    assert any("min 0, max 0" in c.value for c in at.caption)
    at.switch_page(PROFILE).run()
    assert any("zeros" in c.value for c in at.caption)


def test_a_rejected_npy_is_not_named_as_the_input() -> None:
    at = app("tiny_mlp")
    at.radio(key="home_input_kind").set_value("npy").run()
    assert sidebar_input(at) == "seeded random numbers (seed 0) (no usable file yet)"
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 1, 8, 8), np.float32))
    at.file_uploader(key="home_npy").upload("good.npy", buf.getvalue()).run()
    assert sidebar_input(at) == "uploaded array good.npy"
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 3, 8, 8), np.float32))
    at.file_uploader(key="home_npy").upload("wrong.npy", buf.getvalue()).run()
    no_exception(at)
    assert any("Cannot use wrong.npy" in e.value for e in at.error)
    assert sidebar_input(at) == "seeded random numbers (seed 0) (no usable file yet)"


def test_bundled_digit_examples_are_a_picker() -> None:
    at = app("digits_cnn")
    at.radio(key="home_input_kind").set_value("example").run()
    with np.load(SAMPLES / "digits_cnn.examples.npz") as z:
        images, labels = z["images"], z["labels"]
    at.selectbox(key="home_example").set_value(4).run()
    no_exception(at)
    assert sidebar_input(at) == f"held-out example 5 of {len(images)}, a {labels[4]}"
    at.switch_page(FORWARD).run()
    forward_step(at)
    x = at.session_state["kx_forward"].stepper.inputs[0]
    assert np.array_equal(x, images[4:5])


@pytest.mark.slow
def test_a_shared_link_opens_the_model_page_and_step() -> None:
    at = app(None, FORWARD, query={"model": "resnet18", "step": "5"})
    assert "Operator 5 of 51:" in forward_panel(at)
    assert at.sidebar.markdown[0].value.startswith("**Model:** `resnet18`")
    assert at.query_params["step"] in ("5", ["5"]) and at.query_params["model"] in ("resnet18", ["resnet18"])


def test_wrong_npy_shape_is_a_clear_error() -> None:
    at = app("tiny_mlp")
    at.radio(key="home_input_kind").set_value("npy").run()
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 3, 8, 8), np.float32))
    at.file_uploader(key="home_npy").upload("x.npy", buf.getvalue()).run()
    no_exception(at)
    assert any("Cannot use x.npy" in e.value for e in at.error)
    assert "expected (1,1,8,8)" in "\n".join(c.value for c in at.code)
    at.file_uploader(key="home_npy").upload("junk.npy", b"junk").run()
    no_exception(at)
    assert "not a readable .npy" in "\n".join(c.value for c in at.code)


def test_picture_upload_becomes_the_input() -> None:
    from PIL import Image

    img = Image.new("L", (32, 32), 255)  # white paper...
    for i in range(8, 24):
        img.putpixel((16, i), 0)  # ...with a dark vertical stroke
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    at = app("digits_cnn")
    at.radio(key="home_input_kind").set_value("image").run()
    at.file_uploader(key="home_img").upload("one.png", buf.getvalue(), "image/png").run()
    no_exception(at)
    assert not at.error
    x = at.session_state["kx_input_arrays"]["image"][0]
    assert x.shape == (1, 1, 8, 8) and x.dtype == np.float32
    # Inverted: the paper is 0, the stroke column is bright, values in 0..1.
    assert x.min() == 0.0 and 0 < x.max() <= 1.0
    assert x[0, 0, :, 4].sum() > x[0, 0, :, 0].sum()
    at.file_uploader(key="home_img").upload("notapicture.png", b"GIF89a-but-not-really", "image/png").run()
    no_exception(at)
    assert any("Cannot use notapicture.png" in e.value for e in at.error)


def test_profile_names_each_convolutions_kernel() -> None:
    at = app("digits_cnn")
    at.switch_page(PROFILE).run()
    no_exception(at)
    table = at.dataframe[0].value
    convs = table[table["type"] == "nn.Conv2d"]
    assert len(convs) == 2 and set(convs["kernel"]) <= {"im2col + GEMM", "1x1: one GEMM"}, convs["kernel"]
    assert set(table[table["type"] != "nn.Conv2d"]["kernel"]) == {""}
    assert any("*kernel*" in c.value for c in at.caption)
