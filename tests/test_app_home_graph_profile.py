"""AppTest: the Home, Graph and Profile pages on every bundled model, uploads and errors."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from conftest import ROOT, SAMPLES

from kuiper_core.pnnx import read_param

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

MODELS = list(json.loads((SAMPLES / "models.json").read_text()))
TIMEOUT = 180


def app(model: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    if model is not None:
        at.radio(key="home_bundled").set_value(model).run()
    return at


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def graphviz_specs(at: AppTest) -> list[str]:
    return [el.proto.spec for el in at.get("graphviz_chart")]


def node_names(dot: str) -> set[str]:
    """Quoted ids that start a node statement (`"name" [label=…`)."""
    return {m.group(1).replace('\\"', '"') for m in re.finditer(r'^"((?:[^"\\]|\\.)*)" \[', dot, re.M)}


def highlighted(dot: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r'^"((?:[^"\\]|\\.)*)" \[[^\n]*class="kx-current"', dot, re.M)]


# -- every page on every bundled model ------------------------------------------------------------
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

    at.switch_page("pages/2_graph.py").run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    if n_ops <= 400:
        assert node_names(dot) >= {op.name for op in graph.operators}
    else:  # big graphs open as an overview of groups
        assert any("overview" in i.value for i in at.info)
        assert 'label="operators 0–' in dot

    at.switch_page("pages/6_profile.py").run()
    no_exception(at)
    table = at.dataframe[0].value
    assert len(table) == n_ops and set(table["name"]) == {op.name for op in graph.operators}
    assert (table["time_ms"] >= 0).all()


# -- graph page interactions -------------------------------------------------------------------------
def test_graph_detail_panel_highlights_the_chosen_operator() -> None:
    at = app("digits_cnn")
    at.switch_page("pages/2_graph.py").run()
    (dot,) = graphviz_specs(at)
    assert highlighted(dot) == []
    conv = next(op for op in read_param(SAMPLES / "digits_cnn.pnnx.param").operators if op.type == "nn.Conv2d")
    next(s for s in at.selectbox if s.label == "Operator details").set_value(conv.name).run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    assert highlighted(dot) == [conv.name]
    assert any(conv.name == h.value for h in at.subheader)
    weights = next(df.value for df in at.dataframe if "weight" in df.value.columns)
    assert set(weights["weight"]) == {"weight", "bias"}
    assert weights.set_index("weight").loc["weight", "shape"] == "x".join(map(str, conv.attrs["weight"].shape))
    assert at.get("download_button"), "weight .npy and DOT downloads are offered"


def test_graph_filters_and_focus() -> None:
    at = app("resnet18")
    at.switch_page("pages/2_graph.py").run()
    ops = read_param(SAMPLES / "resnet18.pnnx.param").operators
    at.multiselect(key="graph_types").set_value(["nn.Conv2d"]).run()
    (dot,) = graphviz_specs(at)
    assert node_names(dot) - {"kx legend"} == {op.name for op in ops if op.type == "nn.Conv2d"}
    at.multiselect(key="graph_types").set_value([]).run()
    at.text_input(key="graph_search").input("layer4").run()
    (dot,) = graphviz_specs(at)
    names = node_names(dot) - {"kx legend"}
    assert names and all("layer4" in n for n in names)
    at.text_input(key="graph_search").input("").run()
    centre = ops[20]
    at.selectbox(key="graph_focus").set_value(centre.name).run()
    at.number_input(key="graph_hops").set_value(1).run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    names = node_names(dot) - {"kx legend"}
    near = {centre.name} | {o.producer.name for o in centre.inputs} | {c.name for o in centre.outputs for c in o.consumers}
    assert names == near


def test_big_graph_overview_opens_a_group() -> None:
    at = app("deep1500")
    at.switch_page("pages/2_graph.py").run()
    group = at.selectbox(key="graph_group")
    group.set_value(group.options[2]).run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    names = node_names(dot) - {"kx legend"}
    ops = read_param(SAMPLES / "deep1500.pnnx.param").operators
    start = int(re.search(r"operators (\d+)–", group.options[2]).group(1))
    assert ops[start].name in names and 10 <= len(names) <= 60


# -- uploads ------------------------------------------------------------------------------------------
def upload(at: AppTest, param: bytes, bin_bytes: bytes | None = None, name: str = "model.pnnx.param") -> AppTest:
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
    caret_line = code.splitlines()[code.splitlines().index(next(l for l in code.splitlines() if l.strip().startswith("^")))]
    source_line = code.splitlines()[code.splitlines().index(caret_line) - 1]
    assert source_line[caret_line.index("^"):].startswith("6x4")
    # Other pages stop with the same message instead of failing.
    at.switch_page("pages/6_profile.py").run()
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
    at.switch_page("pages/2_graph.py").run()
    no_exception(at)
    (dot,) = graphviz_specs(at)
    assert "act" in node_names(dot)


def test_good_upload_loads_and_profiles() -> None:
    at = upload(app(), (SAMPLES / "tiny_mlp.pnnx.param").read_bytes(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes())
    no_exception(at)
    assert not at.error
    assert {m.label: m.value for m in at.metric}["Operators"] == "7"
    # An upload has no sample input: seeded random is the default choice.
    assert at.radio(key="home_input_kind").value == "random"
    at.switch_page("pages/6_profile.py").run()
    no_exception(at)
    assert len(at.dataframe[0].value) == 7


# -- inputs -----------------------------------------------------------------------------------------
def test_input_choices_reach_the_profile() -> None:
    at = app("tiny_mlp")
    at.radio(key="home_input_kind").set_value("zeros").run()
    no_exception(at)
    assert any("min 0, max 0" in c.value for c in at.caption)
    at.switch_page("pages/6_profile.py").run()
    assert any("zeros" in c.value for c in at.caption)


def test_wrong_npy_shape_is_a_clear_error() -> None:
    at = app("tiny_mlp")
    at.radio(key="home_input_kind").set_value("npy").run()
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 3, 8, 8), np.float32))
    at.file_uploader(key="home_npy").upload("x.npy", buf.getvalue()).run()
    no_exception(at)
    assert any("Cannot use this file" in e.value for e in at.error)
    assert "expected (1, 1, 8, 8)" in "\n".join(c.value for c in at.code)
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
    x = at.session_state["kx_input_array"]
    assert x.shape == (1, 1, 8, 8) and x.dtype == np.float32
    # Inverted: the paper is 0, the stroke column is bright, values in 0..1.
    assert x.min() == 0.0 and 0 < x.max() <= 1.0
    assert x[0, 0, :, 4].sum() > x[0, 0, :, 0].sum()
    at.file_uploader(key="home_img").upload("notapicture.png", b"GIF89a-but-not-really", "image/png").run()
    no_exception(at)
    assert any("Cannot use this file" in e.value for e in at.error)
