"""The Graph page's search: by name or type, by shape, by parameter or weight (issue 38)."""

from __future__ import annotations

from conftest import SAMPLES

from kuiper_core.explore.search import matches
from kuiper_core.graph import shape_label
from kuiper_core.pnnx import read_param

GRAPH = read_param(SAMPLES / "resnet18.pnnx.param")
BY_NAME = {op.name: op for op in GRAPH.operators}


def _ops(names: list[str]) -> list:
    return [BY_NAME[n] for n in names]


def test_a_word_finds_names_and_types() -> None:
    assert matches(GRAPH, "  ") == [] and matches(GRAPH, "fc") == ["fc"]
    convs = matches(GRAPH, "Conv2d")
    assert len(convs) == 20 and all(o.type == "nn.Conv2d" for o in _ops(convs))


def test_a_shape_finds_whole_dimensions() -> None:
    found = _ops(matches(GRAPH, "64x56x56"))
    shapes = [[shape_label(o.shape) for o in (*op.inputs, *op.outputs)] for op in found]
    assert len(found) >= 10 and all(any("x64x56x56x" in f"x{s}x" for s in ss) for ss in shapes), shapes
    assert matches(GRAPH, "4x5") == []  # no shape has a dimension 4 followed by 5
    assert "fc" in matches(GRAPH, "1x1000")


def test_a_parameter_or_a_weight_finds_operators() -> None:
    strided = _ops(matches(GRAPH, "stride=2,2"))
    assert strided and all(op.params["stride"] == [2, 2] for op in strided)
    assert matches(GRAPH, "stride=(2, 2)") == matches(GRAPH, "stride=2,2")
    assert matches(GRAPH, "weight=1000x512") == ["fc"]
    assert set(matches(GRAPH, "kernel_size=")) == set(matches(GRAPH, "Conv2d")) | set(matches(GRAPH, "MaxPool2d"))
    assert matches(GRAPH, "x" * 10_000) == []  # a long query is cut, not a hang
