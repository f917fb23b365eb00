"""The verifier run after every pass: every broken invariant is caught and names the
operator; real exports (every level, every bundled model) pass it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, SAMPLES
from kuiper_core.graph import Operand
from kuiper_core.passes import GraphVerifyError, verify_graph
from kuiper_core.pnnx import read_param
from pass_testing import graph_of

BASE = (
    "pnnx.Input in 0 1 0 #0=(1,3,8,8)f32",
    "nn.Conv2d conv 1 1 0 1 bias=True groups=1 in_channels=3 out_channels=4 kernel_size=(3,3) padding=(1,1) "
    "stride=(1,1) dilation=(1,1) @weight=(4,3,3,3)f32 @bias=(4)f32 #0=(1,3,8,8)f32 #1=(1,4,8,8)f32",
    "nn.ReLU relu 1 1 1 2 #1=(1,4,8,8)f32 #2=(1,4,8,8)f32",
    "pnnx.Output out 1 0 2 #2=(1,4,8,8)f32",
)


def base():
    return graph_of(*BASE)


def expect(graph, *fragments: str, operator: str | None = None) -> None:
    with pytest.raises(GraphVerifyError) as info:
        verify_graph(graph)
    for f in fragments:
        assert f in str(info.value), str(info.value)
    if operator is not None:
        assert info.value.operator == operator


def test_a_well_formed_graph_passes():
    verify_graph(base())


def test_operand_produced_twice():
    g = base()
    relu = g.operator("relu")
    relu.outputs.append(g.operands["1"])
    expect(g, "operand '1' is produced twice", operator="relu")


def test_output_whose_producer_field_is_wrong():
    g = base()
    g.operands["2"].producer = g.operator("conv")
    expect(g, "output '2' names conv as its producer", operator="relu")


def test_consumers_must_match_the_readers():
    g = base()
    g.operands["1"].consumers.append(g.operator("out"))
    expect(g, "operand '1' lists consumers", operator="conv")


def test_read_before_produced_and_cycles():
    g = base()
    ops = g.operators
    ops[1], ops[2] = ops[2], ops[1]  # relu before conv
    expect(g, "reads '1' before 'conv' produces it", operator="relu")
    g = base()
    conv = g.operator("conv")
    conv.inputs[0].consumers.remove(conv)
    conv.inputs[0] = g.operands["2"]
    g.operands["2"].consumers.append(conv)
    expect(g, "cycle")


def test_orphan_operand_and_foreign_operand():
    g = base()
    g.operands["lost"] = Operand("lost")
    expect(g, "operand 'lost' is in the graph but no operator produces it")
    g = base()
    g.operator("relu").inputs[0] = Operand("1")  # same name, another object
    expect(g, "input '1' is not the graph's operand of that name", operator="relu")


def test_input_names_and_weights():
    g = base()
    g.operator("relu").input_names = []
    expect(g, "1 inputs but 0 input names", operator="relu")
    g = base()
    g.operator("conv").attrs["weight"].data = np.zeros((4, 3, 3), np.float32)
    expect(g, "weight '@weight' declares shape (4,3,3,3) but holds (4,3,3)", operator="conv")


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("nn.ReLU bad 1 1 1 3 #1=(1,4,8,8)f32 #3=(1,4,8,9)f32", "should have the input's shape"),
        (
            "nn.Conv2d bad 1 1 1 3 bias=False groups=1 in_channels=4 out_channels=5 kernel_size=(1,1) padding=(0,0) "
            "stride=(1,1) dilation=(1,1) @weight=(5,4,1,1)f32 #1=(1,4,8,8)f32 #3=(1,6,8,8)f32",
            "output has 6 channels",
        ),
        (
            "nn.Conv2d bad 1 1 1 3 bias=False groups=2 in_channels=4 out_channels=4 kernel_size=(1,1) padding=(0,0) "
            "stride=(1,1) dilation=(1,1) @weight=(4,1,1,1)f32 #1=(1,4,8,8)f32 #3=(1,4,8,8)f32",
            "the weight (4, 1, 1, 1) (groups=2) takes 2",
        ),
        ("Tensor.reshape bad 1 1 1 3 shape=(1,200) #1=(1,4,8,8)f32 #3=(1,200)f32", "has 256 elements"),
        ("Tensor.permute bad 1 1 1 3 dims=(0,2,3,1) #1=(1,4,8,8)f32 #3=(1,4,8,8)f32", "gives (1,8,8,4)"),
        ("torch.cat bad 2 1 1 1 3 dim=1 #1=(1,4,8,8)f32 #3=(1,9,8,8)f32", "add up to 8 along dim 1"),
        (
            "pnnx.Expression bad 2 1 1 0 3 expr=add(@0,@1) #1=(1,4,8,8)f32 #0=(1,3,8,8)f32 #3=(1,4,8,8)f32",
            "do not broadcast",
        ),
        (
            "nn.BatchNorm2d bad 1 1 1 3 num_features=5 eps=1e-5 @running_mean=(5)f32 @running_var=(5)f32 "
            "#1=(1,4,8,8)f32 #3=(1,4,8,8)f32",
            "running_mean (5,) does not match 4 channels",
        ),
    ],
)
def test_shape_rules(line, fragment):
    lines = list(BASE[:3]) + [line, "pnnx.Output out 1 0 2 #2=(1,4,8,8)f32"]
    from kuiper_core.pnnx import parse_param
    from layer_testing import param_text

    g = parse_param(param_text(*lines))
    expect(g, fragment, operator="bad")


def test_attribute_must_match_its_operand():
    lines = list(BASE[:3]) + ["pnnx.Attribute bad 0 1 3 @data=(4)f32 #3=(5)f32", "pnnx.Output out 2 0 2 3"]
    from kuiper_core.pnnx import parse_param
    from layer_testing import param_text

    expect(parse_param(param_text(*lines)), "@data (4) but its operand is declared (5)", operator="bad")


def _real_params() -> list[Path]:
    return (
        sorted(SAMPLES.glob("*.pnnx.param"))
        + sorted((DATA / "optlevel").glob("*/*/model.pnnx.param"))
        + sorted((SAMPLES / "passes").glob("*.pnnx.param"))
    )


@pytest.mark.parametrize("param", _real_params(), ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_real_export_verifies(param):
    verify_graph(read_param(param))
