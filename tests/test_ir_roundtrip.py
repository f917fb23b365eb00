"""The textual IR round-trips every real model: print -> parse gives the same Graph (params'
Python types included), printing again gives the same text, and the parsed graph with the
.bin's weights runs to PyTorch's answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OPS, SAMPLES, max_err_ok, slow_cases

from kuiper_core import ir
from kuiper_core.bundles import open_bundle
from kuiper_core.graph import Graph, same_params
from kuiper_core.pnnx import read_param

MODELS = list(json.loads((SAMPLES / "models.json").read_text()))
CASES = sorted(p.parent for p in OPS.glob("*/model.pnnx.param"))
# Real exports at optlevel 0/1/2 and with dynamic shapes (prim::Constant, aten ops, '?' dims).
OPTLEVEL = sorted((OPS.parent / "optlevel").glob("*/*/model.pnnx.param"))


def _round_trip(param: Path, **parse: object) -> tuple[Graph, str]:
    g = read_param(param)
    text = ir.print_graph(g)
    back = ir.parse_ir(text, "printed.kir", **parse)
    assert back.equals(g)
    assert ir.print_graph(back) == text
    return back, text


@pytest.mark.parametrize("name", slow_cases(MODELS, {"deep1500", "resnet18", "unet", "yolov5s_mini"}))
def test_bundled_model_round_trips_and_runs_to_pytorchs_answer(tmp_path: Path, name: str) -> None:
    _, text = _round_trip(SAMPLES / f"{name}.pnnx.param")
    kir = tmp_path / f"{name}.kir"
    kir.write_text(text)
    graph = ir.load_ir(kir, SAMPLES / f"{name}.pnnx.bin")
    bundle = open_bundle(SAMPLES / name)
    ys = graph.forward(*bundle.inputs)
    expected = bundle.expected
    assert len(ys) == len(expected)
    for i, (y, ref) in enumerate(zip(ys, expected)):
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"out{i}: max abs err {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_case_round_trips(case: Path) -> None:
    _round_trip(case / "model.pnnx.param")


@pytest.mark.parametrize("param", OPTLEVEL, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in OPTLEVEL])
def test_optlevel_export_round_trips(param: Path) -> None:
    """The text keeps what lower optlevels write, and parses strictly: every op is registered
    and every layer accepts its attributes, bound as the runtime binds it."""
    _round_trip(param)


def test_equality_sees_python_types() -> None:
    """The round trip is only as strict as the comparison: True is not 1, 1 is not 1.0."""
    assert not same_params({"a": True}, {"a": 1})
    assert not same_params({"a": [1, 2]}, {"a": [1.0, 2]})
    assert not same_params({"a": None}, {"a": "None"})
    assert same_params({"a": [float("nan"), "x"]}, {"a": [float("nan"), "x"]})
