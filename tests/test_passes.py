"""Each pass on small graphs: what it rewrites, what it must leave alone, and that the
rewritten graph computes what the original did. Real exports: test_passes_real.py."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.passes.expr_tools import expr_of
from kuiper_core.expression import to_text
from pass_testing import assert_equivalent, graph_of, run, run_passes, types

IN4 = "pnnx.Input in 0 1 0 #0=(1,4,6,6)f32"


def out(name: str, shape: str = "(1,4,6,6)f32") -> str:
    return f"pnnx.Output out 1 0 {name} #{name}={shape}"


def conv(
    name: str,
    src: str,
    dst: str,
    cin: int = 4,
    cout: int = 4,
    *,
    k: int = 3,
    pad: int = 1,
    hw: int = 6,
    ohw: int | None = None,
    extra: str = "",
) -> str:
    ohw = hw if ohw is None else ohw
    return (
        f"nn.Conv2d {name} 1 1 {src} {dst} bias=True dilation=(1,1) groups=1 in_channels={cin} out_channels={cout} "
        f"kernel_size=({k},{k}) padding=({pad},{pad}) padding_mode=zeros stride=(1,1) {extra} "
        f"@weight=({cout},{cin},{k},{k})f32 @bias=({cout})f32 #{src}=(1,{cin},{hw},{hw})f32 #{dst}=(1,{cout},{ohw},{ohw})f32"
    )


# -- FoldConstantParams -------------------------------------------------------------------------
def test_literal_operands_become_params_and_their_expressions_go():
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(1,4,2,3)f32",
        "pnnx.Expression e1 0 1 s expr=1",
        "pnnx.Expression e2 0 1 t expr=-1",
        "torch.flatten f 3 1 0 s t 1 $input=0 $start_dim=s $end_dim=t #0=(1,4,2,3)f32 #1=(1,24)f32",
        "pnnx.Output out 1 0 1 #1=(1,24)f32",
    )
    after, log = run_passes(g, "FoldConstantParams", level=1)
    f = after.operator("f")
    assert f.params == {"start_dim": 1, "end_dim": -1} and [o.name for o in f.inputs] == ["0"]
    assert types(after) == ["pnnx.Input", "torch.flatten", "pnnx.Output"]
    assert run(after, np.ones((1, 4, 2, 3), np.float32))[0].shape == (1, 24)  # the o1 regression: (1,24), not (24,)
    assert log.rows[0].changed and len(log.rows[0].changes) == 4


def test_literal_read_by_an_expression_or_unnamed_slot_stays_an_operand():
    g = graph_of(
        IN4,
        "pnnx.Expression c 0 1 k expr=2.0",
        "pnnx.Expression e 2 1 0 k 1 expr=mul(@0,@1) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        out("1"),
    )
    after, log = run_passes(g, "FoldConstantParams", level=1)
    assert types(after) == types(g) and not log.rows[0].changed


# -- FoldStaticShapes ----------------------------------------------------------------------------
def test_computed_reshape_shape_uses_the_declared_output_and_keeps_the_batch():
    g = graph_of(
        IN4,
        "pnnx.Expression s 1 1 0 sh expr=[size(@0,0),-1] #0=(1,4,6,6)f32",
        "Tensor.reshape r 2 1 0 sh 1 $input=0 $shape=sh #0=(1,4,6,6)f32 #1=(1,144)f32",
        "pnnx.Expression v 1 1 0 sz expr=[int(size(@0,1)),mul(size(@0,2),size(@0,3))] #0=(1,4,6,6)f32",
        "Tensor.reshape r2 2 1 1 sz 2 $input=1 $shape=sz #1=(1,144)f32 #2=(4,36)f32",
        "pnnx.Output out 1 0 2 #2=(4,36)f32",
    )
    after, _ = run_passes(g, "FoldStaticShapes")
    assert after.operator("r").params["shape"] == [-1, 144]  # [size(@0,0), …]: the batch follows the input
    assert after.operator("r2").params["shape"] == [4, 36]
    assert types(after) == ["pnnx.Input", "Tensor.reshape", "Tensor.reshape", "pnnx.Output"]
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_array_equal(run(after, x)[0], x.reshape(4, 36))


def test_sizes_of_static_operands_fold_but_dynamic_dims_stay():
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(1,4,?,?)f32",
        "pnnx.Expression s 1 1 0 1 expr=mul(@0,size(@0,1)) #0=(1,4,?,?)f32 #1=(1,4,?,?)f32",
        "pnnx.Expression t 1 1 1 2 expr=div(@0,size(@0,2)) #1=(1,4,?,?)f32 #2=(1,4,?,?)f32",
        "pnnx.Output out 1 0 2 #2=(1,4,?,?)f32",
    )
    after, _ = run_passes(g, "FoldStaticShapes")
    assert after.operator("s").params["expr"] == "mul(@0,4)"  # an input's static dim: folded (pnnx's rule)
    assert after.operator("t").params["expr"] == "div(@0,size(@0,2))"  # dynamic: kept


def test_optlevel0_size_arithmetic_of_static_dims_becomes_a_param():
    """optlevel 0 writes `t[:, : t.size(1) // 2]` as Tensor.size → prim::NumToTensor →
    aten::floor_divide → aten::Int → the slice's `$end`: a static dim makes it all `end=4`."""
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(1,8,4,?)f32",
        "Tensor.size s 1 1 0 1 dim=1 $input=0 #0=(1,8,4,?)f32",
        "prim::NumToTensor n 1 1 1 2",
        "prim::Constant k 0 1 3 value=2",
        "aten::floor_divide d 2 1 2 3 4",
        "aten::Int i 1 1 4 5",
        "Tensor.slice sl 2 1 0 5 6 dim=1 start=0 step=1 $input=0 $end=5 #0=(1,8,4,?)f32 #6=(1,4,4,?)f32",
        "Tensor.size s3 1 1 6 7 dim=3 $input=6 #6=(1,4,4,?)f32",
        "Tensor.slice v 2 1 6 7 8 dim=3 start=0 step=1 $input=6 $end=7 #6=(1,4,4,?)f32 #8=(1,4,4,?)f32",
        "pnnx.Output out 1 0 8 #8=(1,4,4,?)f32",
    )
    after, _ = run_passes(g, "FoldStaticShapes", "FoldConstants", "FoldConstantParams", level=2)
    assert types(after) == ["pnnx.Input", "Tensor.slice", "Tensor.size", "Tensor.slice", "pnnx.Output"]
    assert after.operator("sl").params["end"] == 4
    assert after.operator("s3").params == {"dim": 3}  # a dim of the input that varies: kept
    x = np.random.default_rng(0).standard_normal((1, 8, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(run(after, x)[0], run(g, x)[0])


def test_folded_scalar_arithmetic_stays_a_python_number_and_keeps_float32():
    """`1 / x.size(1) * -9.2` is TorchScript number arithmetic: folded, it must not become a
    float64 0-d array that turns the f32 tensor it scales into f64 (tools/fuzz_passes.py)."""
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(2,4)f32",
        "Tensor.size s 1 1 0 1 dim=1 $input=0 #0=(2,4)f32",
        "prim::NumToTensor n 1 1 1 2",
        "aten::reciprocal r 1 1 2 3",
        "prim::Constant k 0 1 4 value=-9.2",
        "aten::mul m 2 1 3 4 5",
        "torch.arange a 0 1 6 end=4 dtype=torch.float #6=(4)f32",
        "aten::mul f 2 1 6 5 7 #6=(4)f32 #7=(4)f32",
        "aten::exp e 1 1 7 8 #7=(4)f32 #8=(4)f32",
        "aten::mul y 2 1 0 8 9 #0=(2,4)f32 #8=(4)f32 #9=(2,4)f32",
        "pnnx.Output out 1 0 9 #9=(2,4)f32",
    )
    from kuiper_core.passes import optimize

    after = optimize(g, 2).after
    assert [op.type for op in after.operators] == ["pnnx.Input", "pnnx.Attribute", "pnnx.Expression", "pnnx.Output"]
    assert [op for op in after.operators if op.type == "pnnx.Attribute"][0].attrs["data"].data.dtype == np.float32
    assert_equivalent(g, after)


# -- FoldConstants --------------------------------------------------------------------------------
def test_constant_subgraph_becomes_one_attribute():
    g = graph_of(
        IN4,
        "pnnx.Attribute w 0 1 a @data=(1,4,1,1)f32 #a=(1,4,1,1)f32",
        "F.softmax sm 1 1 a b dim=1 #a=(1,4,1,1)f32 #b=(1,4,1,1)f32",
        "pnnx.Expression e 1 1 b c expr=exp(@0) #b=(1,4,1,1)f32 #c=(1,4,1,1)f32",
        "pnnx.Expression m 2 1 0 c 1 expr=mul(@0,@1) #0=(1,4,6,6)f32 #c=(1,4,1,1)f32 #1=(1,4,6,6)f32",
        out("1"),
    )
    after, log = run_passes(g, "FoldConstants")
    assert types(after) == ["pnnx.Input", "pnnx.Attribute", "pnnx.Expression", "pnnx.Output"]
    folded = after.operator("e")  # the last constant operator became the weight, same name and operand
    w = g.operator("w").attrs["data"].data
    want = np.exp(np.exp(w) / np.exp(w).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(folded.attrs["data"].data, want, rtol=1e-6)
    assert_equivalent(g, after)


def test_constant_parts_of_an_expression_are_folded():
    g = graph_of(
        IN4,
        "pnnx.Attribute w 0 1 a @data=(1,4,1,1)f32 #a=(1,4,1,1)f32",
        "pnnx.Expression c 0 1 k expr=3.0",
        "pnnx.Expression e 3 1 0 a k 1 expr=add(mul(@0,exp(@1)),mul(@2,sqrt(4.0))) #0=(1,4,6,6)f32 #a=(1,4,1,1)f32 #1=(1,4,6,6)f32",
        out("1"),
    )
    after, _ = run_passes(g, "FoldConstants")
    e = after.operator("e")
    # exp(@1) over a weight → a new weight; the literal input 3.0 and sqrt(4.0) → numbers
    assert e.params["expr"] == "add(mul(@0,@1),6.0)"
    assert [o.producer.type for o in e.inputs] == ["pnnx.Input", "pnnx.Attribute"]
    np.testing.assert_allclose(
        e.inputs[1].producer.attrs["data"].data, np.exp(g.operator("w").attrs["data"].data), rtol=1e-6
    )
    assert "c" not in [op.name for op in after.operators] and "w" not in [op.name for op in after.operators]
    assert_equivalent(g, after)


def test_random_operators_are_never_folded():
    g = graph_of(
        IN4,
        "torch.randn r 0 1 a size=(1,4,6,6) #a=(1,4,6,6)f32",
        "pnnx.Expression m 2 1 0 a 1 expr=add(@0,@1) #0=(1,4,6,6)f32 #a=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        out("1"),
    )
    after, log = run_passes(g, "FoldConstants")
    assert types(after) == types(g) and not log.rows[0].changed


# -- RemoveNoOps ---------------------------------------------------------------------------------
NOOPS = [
    ("nn.Dropout d 1 1 0 1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "dropout"),
    ("F.dropout d 1 1 0 1 p=0.5 training=False #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "dropout"),
    ("F.dropout2d d 1 1 0 1 p=0.5 training=False #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "dropout"),
    ("Tensor.reshape d 1 1 0 1 shape=(1,4,6,6) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "input's shape"),
    ("Tensor.expand d 1 1 0 1 sizes=(1,-1,-1,-1) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "input's shape"),
    ("Tensor.slice d 1 1 0 1 dim=1 start=0 end=2147483647 step=1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "full slice"),
    ("Tensor.slice d 1 1 0 1 dim=2 start=0 end=6 step=1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "full slice"),
    ("torch.cat d 1 1 0 1 dim=1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "cat of one input"),
    ("F.upsample_nearest d 1 1 0 1 scale_factor=(1.0,1.0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "×1 upsample"),
    (
        "F.interpolate d 1 1 0 1 mode=bilinear align_corners=False size=(6,6) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "same size",
    ),
    ("F.pad d 1 1 0 1 mode=constant pad=(0,0,0,0) value=0.0 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "zero padding"),
    ("nn.ZeroPad2d d 1 1 0 1 padding=(0,0,0,0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "zero padding"),
    ("pnnx.Expression d 1 1 0 1 expr=mul(@0,1) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "mul(@0,1)"),
    ("pnnx.Expression d 1 1 0 1 expr=mul(1.0,@0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "mul(1.0,@0)"),
    ("pnnx.Expression d 1 1 0 1 expr=add(@0,-0.0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "add(@0,-0.0)"),
    ("pnnx.Expression d 1 1 0 1 expr=sub(@0,0.0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "sub(@0,0.0)"),
    ("pnnx.Expression d 1 1 0 1 expr=div(@0,1) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32", "div(@0,1)"),
]


@pytest.mark.parametrize("line, why", NOOPS, ids=[n[0].split()[0] + ":" + n[1] for n in NOOPS])
def test_no_ops_are_removed(line, why):
    g = graph_of(IN4, line, "nn.ReLU r 1 1 1 2 #1=(1,4,6,6)f32 #2=(1,4,6,6)f32", out("2"))
    after, log = run_passes(g, "RemoveNoOps", level=1)
    assert types(after) == ["pnnx.Input", "nn.ReLU", "pnnx.Output"]
    assert why in str(log.rows[-1].changes[0])
    assert_equivalent(g, after)


NOT_NOOPS = [
    "F.dropout d 1 1 0 1 p=0.5 training=True #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
    "Tensor.slice d 2 1 0 0 1 dim=1 start=0 step=1 $input=0 $end=0 #0=(1,4,6,6)f32 #1=(1,?,6,6)f32",  # end from an operand
    "Tensor.slice d 1 1 0 1 dim=1 start=1 end=2147483647 step=1 #0=(1,4,6,6)f32 #1=(1,3,6,6)f32",
    "F.pad d 1 1 0 1 mode=constant pad=(1,-1,0,0) value=0.0 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
    "pnnx.Expression d 1 1 0 1 expr=mul(@0,2) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
    "pnnx.Expression d 1 1 0 1 expr=add(@0,1) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
    "pnnx.Expression d 1 1 0 1 expr=add(@0,0.0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",  # -0.0 + 0.0 is +0.0
    "pnnx.Expression d 1 1 0 1 expr=add(0,@0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
    "pnnx.Expression d 1 1 0 1 expr=sub(@0,-0.0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
    "Tensor.permute d 1 1 0 1 dims=(0,1,3,2) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",  # same shape, not the identity
]


@pytest.mark.parametrize("line", NOT_NOOPS, ids=[n.split()[0] for n in NOT_NOOPS])
def test_look_alikes_stay(line):
    out_shape = line.split("#1=")[1]
    g = graph_of(IN4, line, f"pnnx.Output out 1 0 1 #1={out_shape}")
    after, log = run_passes(g, "RemoveNoOps", level=1)
    assert types(after) == types(g) and not log.rows[-1].changed


def test_cancelling_permutes_vanish_and_others_compose():
    g = graph_of(
        IN4,
        "Tensor.permute p1 1 1 0 1 dims=(0,2,3,1) #0=(1,4,6,6)f32 #1=(1,6,6,4)f32",
        "torch.transpose p2 1 1 1 2 dim0=1 dim1=3 #1=(1,6,6,4)f32 #2=(1,4,6,6)f32",
        "Tensor.permute p3 1 1 2 3 dims=(0,3,1,2) #2=(1,4,6,6)f32 #3=(1,6,4,6)f32",
        "nn.ReLU r 1 1 3 4 #3=(1,6,4,6)f32 #4=(1,6,4,6)f32",
        out("4", "(1,6,4,6)f32"),
    )
    after, _ = run_passes(g, "RemoveNoOps", level=1)
    perms = [
        op for op in after.operators if op.type != "pnnx.Input" and op.type != "pnnx.Output" and op.type != "nn.ReLU"
    ]
    assert len(perms) == 1 and perms[0].type == "Tensor.permute"  # three orders → one
    assert perms[0].inputs[0].name == "0"
    assert_equivalent(g, after)
    back = graph_of(
        IN4,
        "Tensor.permute p1 1 1 0 1 dims=(0,2,3,1) #0=(1,4,6,6)f32 #1=(1,6,6,4)f32",
        "Tensor.permute p2 1 1 1 2 dims=(0,3,1,2) #1=(1,6,6,4)f32 #2=(1,4,6,6)f32",
        "nn.ReLU r 1 1 2 3 #2=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        out("3"),
    )
    after, log = run_passes(back, "RemoveNoOps", level=1)
    assert types(after) == ["pnnx.Input", "nn.ReLU", "pnnx.Output"]
    assert any("cancels p1" in str(c) for c in log.rows[-1].changes)


def test_reshape_of_reshape_reads_the_first_input():
    g = graph_of(
        IN4,
        "Tensor.reshape a 1 1 0 1 shape=(1,144) #0=(1,4,6,6)f32 #1=(1,144)f32",
        "Tensor.reshape b 1 1 1 2 shape=(4,36) #1=(1,144)f32 #2=(4,36)f32",
        "pnnx.Output out 1 0 2 #2=(4,36)f32",
    )
    after, _ = run_passes(g, "RemoveNoOps", level=1)
    assert types(after) == ["pnnx.Input", "Tensor.reshape", "pnnx.Output"]
    assert after.operator("b").inputs[0].name == "0"
    assert_equivalent(g, after)


# -- EliminateCommonSubexpr -----------------------------------------------------------------------
def test_same_operator_on_same_input_is_computed_once():
    g = graph_of(
        IN4,
        conv("c1", "0", "1"),
        conv("c2", "0", "2"),
        "pnnx.Expression add 2 1 1 2 3 expr=add(@0,@1) #1=(1,4,6,6)f32 #2=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        out("3"),
    )
    # identical weights → merged
    g.operator("c2").attrs = {k: type(a)(a.dtype, a.shape, a.data) for k, a in g.operator("c1").attrs.items()}
    after, log = run_passes(g, "EliminateCommonSubexpr", level=1)
    assert [op.name for op in after.operators if op.type == "nn.Conv2d"] == ["c1"]
    assert after.operator("add").params["expr"] == "add(@0,@0)" and len(after.operator("add").inputs) == 1
    assert_equivalent(g, after)
    # different weights → both stay
    g2 = graph_of(
        IN4,
        conv("c1", "0", "1"),
        conv("c2", "0", "2"),
        "pnnx.Expression add 2 1 1 2 3 expr=add(@0,@1) #1=(1,4,6,6)f32 #2=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        out("3"),
    )
    after2, log2 = run_passes(g2, "EliminateCommonSubexpr", level=1)
    assert types(after2) == types(g2) and not log2.rows[-1].changed


def test_random_ops_and_the_skip_hook_are_respected():
    lines = (
        IN4,
        "nn.ReLU a 1 1 0 1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "nn.ReLU b 1 1 0 2 #0=(1,4,6,6)f32 #2=(1,4,6,6)f32",
        "torch.rand_like r1 1 1 0 3 #0=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        "torch.rand_like r2 1 1 0 4 #0=(1,4,6,6)f32 #4=(1,4,6,6)f32",
        "pnnx.Expression s 4 1 1 2 3 4 5 expr=add(add(@0,@1),sub(@2,@3)) #1=(1,4,6,6)f32 #2=(1,4,6,6)f32 "
        "#3=(1,4,6,6)f32 #4=(1,4,6,6)f32 #5=(1,4,6,6)f32",
        out("5"),
    )
    g = graph_of(*lines)
    after, _ = run_passes(g, "EliminateCommonSubexpr", level=1)
    assert [op.name for op in after.operators if op.type == "nn.ReLU"] == ["a"]
    assert [op.name for op in after.operators if op.type == "torch.rand_like"] == ["r1", "r2"]  # never merged
    skipped, log = run_passes(
        g, "EliminateCommonSubexpr", level=1, config={"cse.fskip": lambda op: op.type == "nn.ReLU"}
    )
    assert [op.name for op in skipped.operators if op.type == "nn.ReLU"] == ["a", "b"]


def test_repeated_subtrees_inside_one_expression():
    g = graph_of(
        IN4,
        "pnnx.Expression e 1 1 0 1 expr=mul(exp(@0),exp(@0)) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "pnnx.Expression f 1 1 1 2 expr=add(tanh(add(@0,1.0)),mul(tanh(add(@0,1.0)),3)) #1=(1,4,6,6)f32 #2=(1,4,6,6)f32",
        out("2"),
    )
    after, log = run_passes(g, "EliminateCommonSubexpr", level=1)
    assert after.operator("e").params["expr"] == "square(exp(@0))"
    hoisted = after.operator("f_cse")  # tanh(add(@0,1.0)) has two calls: computed once
    assert hoisted.params["expr"] == "tanh(add(@0,1.0))"
    assert (
        after.operator("f").params["expr"] == "add(@0,mul(@0,3))"
        and after.operator("f").inputs[0] is hoisted.outputs[0]
    )
    assert hoisted.outputs[0].shape == (1, 4, 6, 6) and hoisted.outputs[0].dtype == "f32"
    assert_equivalent(g, after)


# -- FoldBatchNorm --------------------------------------------------------------------------------
BN = "nn.BatchNorm2d bn 1 1 {a} {b} affine=True eps=1e-5 num_features={c} @running_mean=({c})f32 @running_var=({c})f32 @weight=({c})f32 @bias=({c})f32 #{a}={s} #{b}={s}"


def test_batchnorm_folds_into_conv_convtranspose_and_linear():
    g = graph_of(
        IN4,
        conv("c", "0", "1", extra=""),
        BN.format(a="1", b="2", c=4, s="(1,4,6,6)f32"),
        "nn.ConvTranspose2d t 1 1 2 3 bias=False dilation=(1,1) groups=2 in_channels=4 out_channels=6 kernel_size=(2,2) "
        "output_padding=(0,0) padding=(0,0) stride=(2,2) @weight=(4,3,2,2)f32 #2=(1,4,6,6)f32 #3=(1,6,12,12)f32",
        BN.format(a="3", b="4", c=6, s="(1,6,12,12)f32").replace("bn ", "bn2 "),
        "torch.flatten f 1 1 4 5 start_dim=1 end_dim=-1 #4=(1,6,12,12)f32 #5=(1,864)f32",
        "nn.Linear l 1 1 5 6 bias=True in_features=864 out_features=3 @weight=(3,864)f32 @bias=(3)f32 #5=(1,864)f32 #6=(1,3)f32",
        "nn.BatchNorm1d bn3 1 1 6 7 affine=True eps=1e-3 num_features=3 @running_mean=(3)f32 @running_var=(3)f32 "
        "@weight=(3)f32 @bias=(3)f32 #6=(1,3)f32 #7=(1,3)f32",
        "pnnx.Output out 1 0 7 #7=(1,3)f32",
    )
    after, log = run_passes(g, "FoldBatchNorm")
    assert not any("BatchNorm" in t for t in types(after))
    assert after.operator("t").params["bias"] is True and after.operator("t").attrs["bias"].shape == (6,)
    assert len(log.rows[-1].changes) == 3
    assert_equivalent(g, after, rtol=1e-4)


def test_batchnorm_after_a_shared_conv_is_not_folded():
    g = graph_of(
        IN4,
        conv("c", "0", "1"),
        BN.format(a="1", b="2", c=4, s="(1,4,6,6)f32"),
        "pnnx.Expression e 2 1 1 2 3 expr=add(@0,@1) #1=(1,4,6,6)f32 #2=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        out("3"),
    )
    after, log = run_passes(g, "FoldBatchNorm")
    assert "nn.BatchNorm2d" in types(after) and not log.rows[-1].changed


def test_batchnorm_is_not_folded_into_a_conv_whose_bias_param_contradicts_its_weight():
    """`bias=False` with an @bias (a hand-edited file; tools/fuzz_passes.py): Conv2d reads
    the weight, Conv3d does not, so folding could change the answer either way."""
    line = conv("c", "0", "1").replace("bias=True", "bias=False")
    g = graph_of(IN4, line, BN.format(a="1", b="2", c=4, s="(1,4,6,6)f32"), out("2"))
    after, log = run_passes(g, "FoldBatchNorm")
    assert "nn.BatchNorm2d" in types(after) and not log.rows[-1].changed


# -- FoldPadIntoConv ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pad, conv_mode, folds",
    [
        ("F.pad p 1 1 0 1 mode=constant pad=(1,1,2,2) value=0.0 #0=(1,4,6,6)f32 #1=(1,4,10,8)f32", "zeros", True),
        ("nn.ZeroPad2d p 1 1 0 1 padding=(1,1,1,1) #0=(1,4,6,6)f32 #1=(1,4,8,8)f32", "zeros", True),
        ("nn.ReflectionPad2d p 1 1 0 1 padding=(1,1,1,1) #0=(1,4,6,6)f32 #1=(1,4,8,8)f32", "reflect", True),
        ("F.pad p 1 1 0 1 mode=replicate pad=(1,1,1,1) #0=(1,4,6,6)f32 #1=(1,4,8,8)f32", "replicate", True),
        ("F.pad p 1 1 0 1 mode=constant pad=(1,0,1,0) value=0.0 #0=(1,4,6,6)f32 #1=(1,4,7,7)f32", None, False),
        ("F.pad p 1 1 0 1 mode=constant pad=(1,1,1,1) value=2.0 #0=(1,4,6,6)f32 #1=(1,4,8,8)f32", None, False),
    ],
)
def test_pad_folds_into_the_following_conv(pad, conv_mode, folds):
    h, w = (int(d) for d in pad.split("#1=(1,4,")[1].split(")")[0].split(","))
    g = graph_of(
        IN4,
        pad,
        f"nn.Conv2d c 1 1 1 2 bias=True dilation=(1,1) groups=1 in_channels=4 out_channels=2 kernel_size=(3,3) "
        f"padding=(0,0) padding_mode=zeros stride=(1,1) @weight=(2,4,3,3)f32 @bias=(2)f32 #1=(1,4,{h},{w})f32 #2=(1,2,{h - 2},{w - 2})f32",
        out("2", f"(1,2,{h - 2},{w - 2})f32"),
    )
    after, log = run_passes(g, "FoldPadIntoConv")
    assert (len(after.operators) == 3) is folds
    if folds:
        c = after.operator("c")
        assert c.params["padding_mode"] == conv_mode and c.params["padding"] == [(h - 6) // 2, (w - 6) // 2]
    assert_equivalent(g, after)


# -- FuseSlices ----------------------------------------------------------------------------
def test_slices_that_tile_a_dim_become_one_tensor_split():
    s = "Tensor.slice {n} 1 1 0 {o} dim=1 start={a} end={b} step=1 #0=(1,4,6,6)f32 #{o}=(1,{c},6,6)f32"
    g = graph_of(
        IN4,
        s.format(n="s1", o="1", a=0, b=1, c=1),
        s.format(n="s2", o="2", a=1, b=3, c=2),
        s.format(n="s3", o="3", a=3, b=2147483647, c=1),
        s.format(n="s4", o="4", a=0, b=2, c=2),  # overlaps: left alone
        "torch.cat cat 4 1 3 2 1 4 5 dim=1 #3=(1,1,6,6)f32 #2=(1,2,6,6)f32 #1=(1,1,6,6)f32 #4=(1,2,6,6)f32 #5=(1,6,6,6)f32",
        out("5", "(1,6,6,6)f32"),
    )
    after, _ = run_passes(g, "FuseSlices")
    split = [op for op in after.operators if op.type == "torch.tensor_split"]
    assert len(split) == 1 and split[0].params == {"dim": 1, "indices": [1, 3]}
    assert [o.name for o in split[0].outputs] == ["1", "2", "3"]
    assert "s4" in [op.name for op in after.operators]
    assert_equivalent(g, after)


# -- FuseExpressions ------------------------------------------------------------------------------
def test_elementwise_chain_becomes_one_expression():
    g = graph_of(
        IN4,
        "pnnx.Expression a 2 1 0 0 1 expr=add(@0,@1) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "nn.ReLU r 1 1 1 2 #1=(1,4,6,6)f32 #2=(1,4,6,6)f32",
        "F.hardtanh h 1 1 2 3 min_val=-0.5 max_val=0.5 #2=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        "nn.Tanh t 1 1 3 4 #3=(1,4,6,6)f32 #4=(1,4,6,6)f32",
        out("4"),
    )
    after, _ = run_passes(g, "FuseExpressions")
    assert types(after) == ["pnnx.Input", "pnnx.Expression", "pnnx.Output"]
    assert after.operator("t").params["expr"] == "tanh(min(max(max(add(@0,@0),0),-0.5),0.5))"
    assert_equivalent(g, after)


def test_operands_read_twice_are_not_inlined():
    g = graph_of(
        IN4,
        "pnnx.Expression a 1 1 0 1 expr=exp(@0) #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "pnnx.Expression b 1 1 1 2 expr=mul(@0,@0) #1=(1,4,6,6)f32 #2=(1,4,6,6)f32",  # exp read twice by one tree
        "nn.ReLU c 1 1 0 3 #0=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        "pnnx.Expression d 2 1 3 2 4 expr=add(@0,@1) #3=(1,4,6,6)f32 #2=(1,4,6,6)f32 #4=(1,4,6,6)f32",
        "nn.ReLU e 1 1 3 5 #3=(1,4,6,6)f32 #5=(1,4,6,6)f32",  # c's result read by d and e
        "pnnx.Output out 2 0 4 5",
    )
    after, _ = run_passes(g, "FuseExpressions")
    names = [op.name for op in after.operators]
    assert "a" in names and "c" in names  # neither inlined
    assert after.operator("d").params["expr"] == "add(@0,mul(@1,@1))"  # b (read once) was
    assert_equivalent(g, after)


# -- RemoveUnused -----------------------------------------------------------------------------------
def test_dead_operators_and_weights_go_inputs_stay():
    g = graph_of(
        IN4,
        "pnnx.Input in2 0 1 9 #9=(1,4)f32",
        "pnnx.Attribute w 0 1 a @data=(4)f32 #a=(4)f32",
        "nn.ReLU dead1 1 1 0 1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "nn.ReLU dead2 1 1 1 2 #1=(1,4,6,6)f32 #2=(1,4,6,6)f32",
        "nn.Tanh live 1 1 0 3 #0=(1,4,6,6)f32 #3=(1,4,6,6)f32",
        out("3"),
    )
    after, log = run_passes(g, "RemoveUnused", level=1)
    assert types(after) == ["pnnx.Input", "pnnx.Input", "nn.Tanh", "pnnx.Output"]
    notes = [str(c) for c in log.rows[-1].changes]
    assert "kept in2: unused input kept: it is part of the model's signature" in notes
    assert "removed w: unused weight (4)f32, 16 bytes" in notes
    assert sum(n.startswith("removed dead") for n in notes) == 2


def test_expr_helper_round_trips_param_values():
    g = graph_of("pnnx.Expression e 0 1 0 expr=[0,2,1,3]", "pnnx.Output out 1 0 0")
    assert to_text(expr_of(g.operator("e"))) == "[0,2,1,3]"


# -- FoldStaticWeights ------------------------------------------------------------------------------
def test_functional_layers_with_constant_weights_become_modules():
    g = graph_of(
        IN4,
        "pnnx.Attribute w 0 1 w @data=(5,4,3,3)f32 #w=(5,4,3,3)f32",
        "pnnx.Attribute b 0 1 b @data=(5)f32 #b=(5)f32",
        "pnnx.Attribute rm 0 1 rm @data=(5)f32 #rm=(5)f32",
        "pnnx.Attribute rv 0 1 rv @data=(5)f32 #rv=(5)f32",
        "F.conv2d c 3 1 0 w b 1 dilation=(1,1) groups=1 padding=(1,1) stride=(1,1) $input=0 $weight=w $bias=b "
        "#0=(1,4,6,6)f32 #1=(1,5,6,6)f32",
        "F.batch_norm bn 3 1 1 rm rv 2 eps=1e-5 weight=None bias=None $input=1 $running_mean=rm $running_var=rv "
        "#1=(1,5,6,6)f32 #2=(1,5,6,6)f32",
        "pnnx.Attribute lw 0 1 lw @data=(3,180)f32 #lw=(3,180)f32",
        "torch.flatten f 1 1 2 3 start_dim=1 end_dim=-1 #2=(1,5,6,6)f32 #3=(1,180)f32",
        "F.linear l 2 1 3 lw 4 bias=None $input=3 $weight=lw #3=(1,180)f32 #4=(1,3)f32",
        "pnnx.Output out 1 0 4 #4=(1,3)f32",
    )
    g.operator("rv").attrs["data"].data = np.abs(g.operator("rv").attrs["data"].data) + 0.5
    after, log = run_passes(g, "FoldStaticWeights")
    assert types(after) == ["pnnx.Input", "nn.Conv2d", "nn.BatchNorm2d", "torch.flatten", "nn.Linear", "pnnx.Output"]
    c = after.operator("c")
    assert (c.params["in_channels"], c.params["out_channels"], c.params["kernel_size"], c.params["bias"]) == (
        4,
        5,
        [3, 3],
        True,
    )
    assert after.operator("l").params == {"in_features": 180, "out_features": 3, "bias": False}
    assert_equivalent(g, after)
    both, _ = run_passes(g, "FoldStaticWeights", "FoldBatchNorm")  # now the BN folds into the conv
    assert "nn.BatchNorm2d" not in types(both)
    assert_equivalent(g, both, rtol=1e-4)


def test_functional_layers_with_computed_weights_stay():
    g = graph_of(
        IN4,
        "pnnx.Attribute w 0 1 w @data=(4,4,1,1)f32 #w=(4,4,1,1)f32",
        "pnnx.Expression e 1 1 w w2 expr=mul(@0,2) #w=(4,4,1,1)f32 #w2=(4,4,1,1)f32",
        "F.conv2d c 2 1 0 w2 1 bias=None dilation=(1,1) groups=1 padding=(0,0) stride=(1,1) $input=0 $weight=w2 "
        "#0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        out("1"),
    )
    after, log = run_passes(g, "FoldStaticWeights")
    assert types(after) == types(g) and not log.rows[-1].changed


def test_selects_of_every_index_become_unbind_and_slice_chains_one_slice():
    sel = "Tensor.select {n} 1 1 0 {o} dim=1 index={i} #0=(1,4,6,6)f32 #{o}=(1,6,6)f32"
    g = graph_of(
        IN4,
        *[sel.format(n=f"s{i}", o=f"o{i}", i=i) for i in (2, 0, 3, 1)],
        "Tensor.slice a 1 1 0 5 dim=1 start=1 end=3 step=1 #0=(1,4,6,6)f32 #5=(1,2,6,6)f32",
        "Tensor.slice b 1 1 5 6 dim=3 start=0 end=6 step=2 #5=(1,2,6,6)f32 #6=(1,2,6,3)f32",
        "pnnx.Expression e 4 1 o0 o1 o2 o3 7 expr=add(add(@0,@1),mul(@2,@3)) "
        "#o0=(1,6,6)f32 #o1=(1,6,6)f32 #o2=(1,6,6)f32 #o3=(1,6,6)f32 #7=(1,6,6)f32",
        "pnnx.Output out 2 0 7 6",
    )
    after, log = run_passes(g, "FuseSlices")
    unbind = [op for op in after.operators if op.type == "torch.unbind"]
    assert (
        len(unbind) == 1
        and unbind[0].params == {"dim": 1}
        and [o.name for o in unbind[0].outputs] == ["o0", "o1", "o2", "o3"]
    )
    sl = after.operator("b")
    assert sl.params == {"dims": [1, 3], "starts": [1, 0], "ends": [3, 6], "steps": [1, 2]} and "a" not in [
        o.name for o in after.operators
    ]
    assert sl.inputs[0].name == "0"
    assert_equivalent(g, after)


def test_a_slice_read_by_several_slices_is_copied_into_each():
    """YOLOv5's Focus: x[..., ::2, ::2], x[..., ::2, 1::2] share the row slice; pnnx writes
    two two-axis slices. A head also read by a non-slice stays (folding would save nothing)."""
    row = "Tensor.slice {n} 1 1 0 {o} dim=2 start={s} end=2147483647 step=2 #0=(1,4,6,6)f32 #{o}=(1,4,3,6)f32"
    col = "Tensor.slice {n} 1 1 {i} {o} dim=3 start={s} end=2147483647 step=2 #{i}=(1,4,3,6)f32 #{o}=(1,4,3,3)f32"
    g = graph_of(
        IN4,
        row.format(n="r0", o="r0o", s=0),
        row.format(n="r1", o="r1o", s=1),
        *[col.format(n=f"c{k}", i=f"r{k // 2}o", o=f"c{k}o", s=k % 2) for k in range(4)],
        "torch.cat cat 4 1 c0o c1o c2o c3o y dim=1 #c0o=(1,4,3,3)f32 #c1o=(1,4,3,3)f32 #c2o=(1,4,3,3)f32 "
        "#c3o=(1,4,3,3)f32 #y=(1,16,3,3)f32",
        "Tensor.slice kept 1 1 0 k dim=2 start=1 end=5 step=1 #0=(1,4,6,6)f32 #k=(1,4,4,6)f32",
        "Tensor.slice tail 1 1 k t dim=3 start=2 end=4 step=1 #k=(1,4,4,6)f32 #t=(1,4,4,2)f32",
        "pnnx.Output out 3 0 y t k",
    )
    after, _ = run_passes(g, "FuseSlices")
    names = [op.name for op in after.operators]
    assert "r0" not in names and "r1" not in names and "kept" in names
    c3 = after.operator("c3")
    assert c3.inputs[0].name == "0" and c3.params == {
        "dims": [2, 3],
        "starts": [1, 1],
        "ends": [2**31 - 1] * 2,
        "steps": [2, 2],
    }
    assert after.operator("tail").inputs[0].name == "k"
    assert_equivalent(g, after)


# -- FusePatterns -----------------------------------------------------------------------------------
def test_reshape_transpose_reshape_is_a_channel_shuffle():
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(1,6,4,4)f32",
        "Tensor.view a 1 1 0 1 shape=(1,3,2,4,4) #0=(1,6,4,4)f32 #1=(1,3,2,4,4)f32",
        "torch.transpose b 1 1 1 2 dim0=1 dim1=2 #1=(1,3,2,4,4)f32 #2=(1,2,3,4,4)f32",
        "Tensor.reshape c 1 1 2 3 shape=(1,-1,4,4) #2=(1,2,3,4,4)f32 #3=(1,6,4,4)f32",
        "pnnx.Output out 1 0 3 #3=(1,6,4,4)f32",
    )
    after, _ = run_passes(g, "FusePatterns")
    assert types(after) == ["pnnx.Input", "nn.ChannelShuffle", "pnnx.Output"]
    assert after.operator("c").params == {"groups": 3}
    assert_equivalent(g, after)
    # a transpose of other axes is not a shuffle
    other = graph_of(
        *(
            line.replace("dim0=1 dim1=2", "dim0=3 dim1=4")
            for line in [
                "pnnx.Input in 0 1 0 #0=(1,6,4,4)f32",
                "Tensor.view a 1 1 0 1 shape=(1,3,2,4,4) #0=(1,6,4,4)f32 #1=(1,3,2,4,4)f32",
                "torch.transpose b 1 1 1 2 dim0=1 dim1=2 #1=(1,3,2,4,4)f32 #2=(1,3,2,4,4)f32",
                "Tensor.reshape c 1 1 2 3 shape=(1,-1,4,4) #2=(1,3,2,4,4)f32 #3=(1,6,4,4)f32",
                "pnnx.Output out 1 0 3 #3=(1,6,4,4)f32",
            ]
        )
    )
    after, log = run_passes(other, "FusePatterns")
    assert types(after) == types(other) and not log.rows[-1].changed


@pytest.mark.parametrize(
    "shape6, perm, out_shape, op_type, params",
    [
        ("(1,2,3,2,3,2)", "(0,1,3,5,2,4)", "(1,8,3,3)", "nn.PixelUnshuffle", {"downscale_factor": 2}),
        ("(1,2,2,2,6,6)", "(0,1,4,2,5,3)", "(1,2,12,12)", "nn.PixelShuffle", {"upscale_factor": 2}),
    ],
)
def test_space_to_depth_and_back_written_out_become_pixel_unshuffle_and_shuffle(
    shape6, perm, out_shape, op_type, params
):
    x = "(1,2,6,6)f32" if op_type == "nn.PixelUnshuffle" else "(1,8,6,6)f32"
    permuted = "(" + ",".join(str(eval(shape6)[p]) for p in eval(perm)) + ")"
    lines = [
        f"pnnx.Input in 0 1 0 #0={x}",
        f"Tensor.reshape a 1 1 0 1 shape={shape6} #0={x} #1={shape6}f32",
        f"Tensor.permute b 1 1 1 2 dims={perm} #1={shape6}f32 #2={permuted}f32",
        f"Tensor.reshape c 1 1 2 3 shape={out_shape} #2={permuted}f32 #3={out_shape}f32",
        f"pnnx.Output out 1 0 3 #3={out_shape}f32",
    ]
    g = graph_of(*lines)
    after, _ = run_passes(g, "FusePatterns")
    assert types(after) == ["pnnx.Input", op_type, "pnnx.Output"] and after.operator("c").params == params
    assert_equivalent(g, after)
    # another permutation of the same shapes moves other elements: it stays
    other = graph_of(
        *(
            line.replace(f"dims={perm}", "dims=(0,1,2,3,4,5)").replace(f"#2={permuted}", f"#2={shape6}")
            for line in lines
        )
    )
    after, log = run_passes(other, "FusePatterns")
    assert types(after) == types(other) and not log.rows[-1].changed


RMS_LINES = [
    "pnnx.Input in 0 1 0 #0=(1,4,16)f32",
    "pnnx.Attribute g 0 1 g @data=(16)f32 #g=(16)f32",
    "pnnx.Expression sq 1 1 0 1 expr={square} #0=(1,4,16)f32 #1=(1,4,16)f32",
    "torch.mean m 1 1 1 2 dim=({dim}) keepdim=True #1=(1,4,16)f32 #2=(1,4,1)f32",
    "pnnx.Expression e 3 1 0 2 g 3 expr={expr} #0=(1,4,16)f32 #2=(1,4,1)f32 #g=(16)f32 #3=(1,4,16)f32",
    "pnnx.Output out 1 0 3 #3=(1,4,16)f32",
]


@pytest.mark.parametrize(
    "square, dim, expr",
    [
        ("pow(@0,2)", -1, "mul(mul(@0,rsqrt(add(@1,1.000000e-6))),@2)"),
        ("mul(@0,@0)", 2, "mul(@2,mul(@0,rsqrt(add(1.000000e-6,@1))))"),
        ("pow(@0,2)", -1, "mul(div(@0,sqrt(add(@1,1.000000e-6))),@2)"),
    ],
)
def test_rmsnorm_written_out_becomes_nn_rmsnorm(square, dim, expr):
    g = graph_of(*(line.format(square=square, dim=dim, expr=expr) for line in RMS_LINES))
    after, _ = run_passes(g, "FusePatterns")
    assert types(after) == ["pnnx.Input", "nn.RMSNorm", "pnnx.Output"]
    e = after.operator("e")
    assert e.params == {"elementwise_affine": True, "eps": 1e-6, "normalized_shape": [16]} and e.attrs[
        "weight"
    ].shape == (16,)
    assert_equivalent(g, after)


@pytest.mark.parametrize(
    "square, dim, expr",
    [
        ("pow(@0,3)", -1, "mul(mul(@0,rsqrt(add(@1,1.000000e-6))),@2)"),  # not a square
        ("pow(@0,2)", 1, "mul(mul(@0,rsqrt(add(@1,1.000000e-6))),@2)"),  # the mean of another dim
        ("pow(@0,2)", -1, "add(mul(@0,rsqrt(add(@1,1.000000e-6))),@2)"),  # the weight added
        ("pow(@0,2)", -1, "mul(mul(@2,rsqrt(add(@1,1.000000e-6))),@2)"),  # normalises another tensor
    ],
)
def test_rmsnorm_look_alikes_stay(square, dim, expr):
    lines = [line.format(square=square, dim=dim, expr=expr) for line in RMS_LINES]
    if dim == 1:
        lines = [line.replace("#2=(1,4,1)f32", "#2=(1,1,16)f32") for line in lines]
    g = graph_of(*lines)
    after, log = run_passes(g, "FusePatterns")
    assert types(after) == types(g) and not log.rows[-1].changed


def test_einsum_equation_written_as_an_expression_becomes_a_parameter():
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(1,2,3,4)f32",
        "pnnx.Expression eq 0 1 1 expr=bchw->bhwc",
        "torch.einsum es 2 1 1 0 2 $equation=1 #0=(1,2,3,4)f32 #2=(1,3,4,2)f32",
        "pnnx.Output out 1 0 2 #2=(1,3,4,2)f32",
    )
    after, _ = run_passes(g, "FoldConstantParams", level=1)
    assert types(after) == ["pnnx.Input", "torch.einsum", "pnnx.Output"]
    assert after.operator("es").params == {"equation": "bchw->bhwc"}
    assert_equivalent(g, after)


def test_positional_literals_of_torchscript_ops_become_named_params():
    """aten::meshgrid's indexing (`expr=ij`, a string) and aten::triu's diagonal arrive as
    positional operands at optlevel 1: the layer's arg_names name them."""
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(4,4)f32",
        "pnnx.Expression d 0 1 k expr=1",
        "aten::triu t 2 1 0 k 1 #0=(4,4)f32 #1=(4,4)f32",
        "pnnx.Output out 1 0 1 #1=(4,4)f32",
    )
    after, _ = run_passes(g, "FoldConstantParams", level=1)
    assert types(after) == ["pnnx.Input", "aten::triu", "pnnx.Output"]
    assert after.operator("t").params == {"diagonal": 1} and len(after.operator("t").inputs) == 1
    assert_equivalent(g, after)
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(3)f32",
        "pnnx.Input in2 0 1 1 #1=(2)f32",
        "pnnx.Expression l 2 1 0 1 2 expr=[@0,@1] #0=(3)f32 #1=(2)f32",
        "pnnx.Expression ix 0 1 3 expr=xy",
        "aten::meshgrid m 2 1 2 3 4",
        "prim::ListUnpack u 1 2 4 5 6 #5=(2,3)f32 #6=(2,3)f32",
        "pnnx.Output out 2 0 5 6 #5=(2,3)f32 #6=(2,3)f32",
    )
    after, _ = run_passes(g, "FoldConstantParams", level=1)
    assert "ix" not in [op.name for op in after.operators]
    assert after.operator("m").params == {"indexing": "xy"} and len(after.operator("m").inputs) == 1
    assert_equivalent(g, after)


def test_a_positional_literal_before_an_operand_stays_so_the_slots_keep_their_positions():
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(2,3)f32",
        "pnnx.Input in2 0 1 1 #1=(3,4)f32",
        "pnnx.Expression eq 0 1 e expr=ij,jk->ik",
        "prim::ListConstruct l 2 1 0 1 ops #0=(2,3)f32 #1=(3,4)f32",
        "torch.einsum es 2 1 e ops 2 #2=(2,4)f32",  # positional, arg_names (equation, operands)
        "pnnx.Output out 1 0 2 #2=(2,4)f32",
    )
    after, log = run_passes(g, "FoldConstantParams", level=1)
    assert types(after) == types(g) and not log.rows[0].changed
    assert_equivalent(g, after)


def test_optlevel0_einsum_takes_its_operand_list_then_its_equation_as_a_param():
    """optlevel 0: `torch.einsum equation operands`, both positional. The list in the last
    slot becomes the operator's last inputs (the runtime splices it there anyway); then the
    tensors after the equation no longer block folding it."""
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(2,3)f32",
        "pnnx.Input in2 0 1 1 #1=(3,4)f32",
        "prim::Constant eq 0 1 e value=ij,jk->ik",
        "prim::ListConstruct l 2 1 0 1 ops #0=(2,3)f32 #1=(3,4)f32",
        "torch.einsum es 2 1 e ops 2 #2=(2,4)f32",
        "pnnx.Output out 1 0 2 #2=(2,4)f32",
    )
    after, _ = run_passes(g, "UnpackLists", "FoldConstantParams", level=1)
    assert types(after) == ["pnnx.Input", "pnnx.Input", "torch.einsum", "pnnx.Output"]
    es = after.operator("es")
    assert es.params == {"equation": "ij,jk->ik"} and [o.name for o in es.inputs] == ["0", "1"]
    assert_equivalent(g, after)
    # a list the layer reads whole (Tensor.index's $expr) is no argument list to splice
    g = graph_of(
        IN4,
        "pnnx.Attribute w 0 1 i @data=(2)i64 #i=(2)i64",
        "prim::Constant n 0 1 none value=None",
        "prim::ListConstruct l 2 1 none i 2",
        "Tensor.index x 2 1 0 2 3 $input=0 $expr=2 #0=(1,4,6,6)f32 #3=(1,2,6,6)f32",
        out("3", "(1,2,6,6)f32"),
    )
    g.operator("w").attrs["data"].data = np.array([3, 1], np.int64)
    after, log = run_passes(g, "UnpackLists", level=1)
    assert types(after) == types(g) and not log.rows[0].changed


def test_a_string_literal_read_by_an_expression_or_as_the_main_input_stays():
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(2,3)f32",
        "pnnx.Expression s 0 1 k expr=ij",
        "pnnx.Expression e 1 1 0 1 expr=neg(@0) #0=(2,3)f32 #1=(2,3)f32",
        "Tensor.to t 2 1 1 k 2 $input=1 $self=k #1=(2,3)f32 #2=(2,3)f32",
        "pnnx.Output out 1 0 2 #2=(2,3)f32",
    )
    after, log = run_passes(g, "FoldConstantParams", level=1)
    assert types(after) == types(g) and not log.rows[0].changed


def test_a_constant_grid_through_a_list_output_and_its_unpack_folds():
    """meshgrid of two aranges writes one list operand that prim::ListUnpack splits (a
    TorchScript op with several outputs): the grids are constants all the same."""
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(1,1,4,5,2)f32",
        "torch.arange a 0 1 1 end=4 dtype=None #1=(4)i64",
        "torch.arange b 0 1 2 end=5 dtype=None #2=(5)i64",
        "pnnx.Expression l 2 1 1 2 3 expr=[@0,@1] #1=(4)i64 #2=(5)i64",
        "aten::meshgrid m 1 1 3 4 indexing=ij",
        "prim::ListUnpack u 1 2 4 yv xv #yv=(4,5)i64 #xv=(4,5)i64",
        "torch.stack s 2 1 xv yv 5 dim=2 #xv=(4,5)i64 #yv=(4,5)i64 #5=(4,5,2)i64",
        "Tensor.reshape r 1 1 5 6 shape=(1,1,4,5,2) #5=(4,5,2)i64 #6=(1,1,4,5,2)i64",
        "Tensor.to t 1 1 6 7 copy=False dtype=torch.float #6=(1,1,4,5,2)i64 #7=(1,1,4,5,2)f32",
        "pnnx.Expression e 2 1 0 7 8 expr=add(@0,@1) #0=(1,1,4,5,2)f32 #7=(1,1,4,5,2)f32 #8=(1,1,4,5,2)f32",
        "pnnx.Output out 1 0 8 #8=(1,1,4,5,2)f32",
    )
    after, _ = run_passes(g, "FoldConstants")
    assert types(after) == ["pnnx.Input", "pnnx.Attribute", "pnnx.Expression", "pnnx.Output"]
    yv, xv = np.meshgrid(np.arange(4), np.arange(5), indexing="ij")
    want = np.stack((xv, yv), 2).reshape(1, 1, 4, 5, 2).astype(np.float32)
    np.testing.assert_array_equal(after.operator("t").attrs["data"].data, want)
    assert_equivalent(g, after)


@pytest.mark.parametrize(
    "make_list",
    [
        "pnnx.Expression l 2 1 1 2 3 expr=[@0,@1] #1=(3)f32 #2=(2)f32",  # optlevel 1
        "prim::ListConstruct l 2 1 1 2 3 #1=(3)f32 #2=(2)f32",  # optlevel 0
    ],
)
def test_a_constant_unpacked_item_read_at_run_time_becomes_an_attribute(make_list):
    g = graph_of(
        "pnnx.Input in 0 1 0 #0=(3,2)f32",
        "torch.arange a 0 1 1 end=3 dtype=torch.float #1=(3)f32",
        "torch.arange b 0 1 2 end=2 dtype=torch.float #2=(2)f32",
        make_list,
        "aten::meshgrid m 1 1 3 4 indexing=ij",
        "prim::ListUnpack u 1 2 4 yv xv #yv=(3,2)f32 #xv=(3,2)f32",
        "pnnx.Expression e 3 1 0 yv xv 8 expr=add(mul(@0,@1),@2) #0=(3,2)f32 #yv=(3,2)f32 #xv=(3,2)f32 #8=(3,2)f32",
        "pnnx.Output out 1 0 8 #8=(3,2)f32",
    )
    after, _ = run_passes(g, "FoldConstants")
    assert types(after) == ["pnnx.Input", "pnnx.Attribute", "pnnx.Attribute", "pnnx.Expression", "pnnx.Output"]
    assert_equivalent(g, after)


def test_a_constant_index_list_becomes_tensor_index_text_as_pnnx_writes_it():
    g = graph_of(
        IN4,
        "pnnx.Attribute w 0 1 i @data=(2)i64 #i=(2)i64",
        "pnnx.Expression l 1 1 i 2 expr=[None,@0] #i=(2)i64",
        "Tensor.index x 2 1 0 2 3 $input=0 $expr=2 #0=(1,4,6,6)f32 #3=(1,2,6,6)f32",
        out("3", "(1,2,6,6)f32"),
    )
    g.operator("w").attrs["data"].data = np.array([3, 1], np.int64)
    after, _ = run_passes(g, "FoldConstants")
    assert types(after) == ["pnnx.Input", "Tensor.index", "pnnx.Output"]
    assert after.operator("x").params["expr"] == "[None,[3,1]]"
    assert_equivalent(g, after)
    # a computed index list stays an operand; so does one too long to be text
    lines = [
        "pnnx.Input in 0 1 0 #0=(1,2000)f32",
        "pnnx.Input in2 0 1 i #i=(1500)i64",
        "pnnx.Expression l 1 1 i 2 expr=[None,@0] #i=(1500)i64",
        "Tensor.index x 2 1 0 2 3 $input=0 $expr=2 #0=(1,2000)f32 #3=(1,1500)f32",
        out("3", "(1,1500)f32"),
    ]
    after, log = run_passes(graph_of(*lines), "FoldConstants")
    assert "l" in [op.name for op in after.operators]
    lines[1] = "pnnx.Attribute w 0 1 i @data=(1500)i64 #i=(1500)i64"
    g = graph_of(*lines)
    g.operator("w").attrs["data"].data = np.arange(1500, dtype=np.int64)
    after, log = run_passes(g, "FoldConstants")
    assert "l" in [op.name for op in after.operators] and "expr" not in after.operator("x").params


def test_a_cat_of_one_list_operand_is_not_a_no_op():
    g = graph_of(
        IN4,
        "prim::ListConstruct l 2 1 0 0 1 #0=(1,4,6,6)f32",
        "torch.cat c 1 1 1 2 dim=1 $tensors=1 #2=(1,8,6,6)f32",
        out("2", "(1,8,6,6)f32"),
    )
    after, log = run_passes(g, "RemoveNoOps", level=1)
    assert types(after) == types(g) and not log.rows[-1].changed


@pytest.mark.slow
@pytest.mark.timeout(120)  # a hang guard, not a speed measurement: the quadratic version took many minutes
def test_deep_expressions_and_long_chains_stay_linear():
    """No pass walks a tree once per node: a 10,000-deep expression and a 500-operator
    chain optimise (limits.max_expression_depth is 100,000)."""
    from kuiper_core.passes import optimize
    from kuiper_core.pnnx import parse_param
    from layer_testing import param_text

    expr = "@0"
    for i in range(10_000):
        expr = f"add({expr},1.0)" if i % 2 else f"mul({expr},2.0)"
    deep = parse_param(
        param_text(
            "pnnx.Input in 0 1 0 #0=(1,4)f32",
            f"pnnx.Expression e 1 1 0 1 expr={expr} #0=(1,4)f32 #1=(1,4)f32",
            "pnnx.Output out 1 0 1",
        )
    )
    chain = parse_param(
        param_text(
            "pnnx.Input in 0 1 0 #0=(1,4)f32",
            *[f"nn.ReLU r{i} 1 1 {i} {i + 1} #{i}=(1,4)f32 #{i + 1}=(1,4)f32" for i in range(500)],
            "pnnx.Output out 1 0 500",
        )
    )
    assert len(optimize(deep, 2).after.operators) == 3
    after = optimize(chain, 2).after
    assert 3 < len(after.operators) < 12  # fused into a few expressions of at most 256 nodes each


# -- UnpackLists (optlevel 0) -------------------------------------------------------------------------
def test_list_plumbing_of_optlevel_0_is_unpacked():
    g = graph_of(
        IN4,
        "torch.tensor_split s 1 1 0 l dim=1 sections=2 #0=(1,4,6,6)f32",
        "prim::ListUnpack u 1 2 l a b #a=(1,2,6,6)f32 #b=(1,2,6,6)f32",
        "prim::ListConstruct c 2 1 b a t",
        "torch.cat cat 1 1 t 1 dim=1 $tensors=t #1=(1,4,6,6)f32",
        "prim::TupleConstruct tc 2 1 1 a tup",
        "prim::TupleUnpack tu 1 2 tup 2 3 #2=(1,4,6,6)f32 #3=(1,2,6,6)f32",
        "pnnx.Output out 2 0 2 3",
    )
    after, log = run_passes(g, "UnpackLists", level=1)
    assert types(after) == ["pnnx.Input", "torch.tensor_split", "torch.cat", "pnnx.Output"]
    assert [o.name for o in after.operator("s").outputs] == ["a", "b"]
    assert [o.name for o in after.operator("cat").inputs] == ["b", "a"]
    assert [o.name for o in after.operator("out").inputs] == ["1", "a"]
    assert_equivalent(g, after)


def test_any_operator_whose_tuple_output_is_unpacked_gets_the_outputs_itself():
    """optlevel 0 writes aten::var_mean (or nn.MultiheadAttention, nn.GRU) as one tuple that
    prim::TupleUnpack splits; optlevel 1 gives the operator its two outputs, as here. A
    tuple the graph returns as it is stays a tuple."""
    g = graph_of(
        IN4,
        "aten::var_mean v 1 1 0 t dim=(2,3) unbiased=True keepdim=False #0=(1,4,6,6)f32",
        "prim::TupleUnpack u 1 2 t a b #a=(1,4)f32 #b=(1,4)f32",
        "pnnx.Expression e 2 1 a b 1 expr=add(@0,@1) #a=(1,4)f32 #b=(1,4)f32 #1=(1,4)f32",
        "pnnx.Output out 1 0 1 #1=(1,4)f32",
    )
    after, log = run_passes(g, "UnpackLists", level=1)
    assert types(after) == ["pnnx.Input", "aten::var_mean", "pnnx.Expression", "pnnx.Output"]
    assert [o.name for o in after.operator("v").outputs] == ["a", "b"]
    assert_equivalent(g, after)
    kept = graph_of(
        IN4, "aten::var_mean v 1 1 0 t dim=(2,3) unbiased=True keepdim=False #0=(1,4,6,6)f32", "pnnx.Output out 1 0 t"
    )
    after, log = run_passes(kept, "UnpackLists", level=1)
    assert not log.rows[0].changed


def test_lone_aten_arithmetic_becomes_an_expression():
    g = graph_of(
        IN4,
        "prim::Constant k 0 1 alpha value=2",
        "aten::add a 3 1 0 0 alpha 1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "aten::rsub r 3 1 1 0 alpha 2 #1=(1,4,6,6)f32 #2=(1,4,6,6)f32",
        out("2"),
    )
    after, _ = run_passes(g, "FuseExpressions", "RemoveUnused")
    assert types(after) == ["pnnx.Input", "pnnx.Expression", "pnnx.Output"]
    assert after.operator("r").params["expr"] == "sub(@0,mul(add(@0,mul(@0,2)),2))"
    assert_equivalent(g, after)


def test_aten_arithmetic_keeps_a_positional_argument_folded_into_a_param():
    """FoldConstantParams makes aten::add's positional alpha and aten::div's rounding_mode
    params (arg_names): the expression keeps alpha; a floor division stays a division."""
    g = graph_of(
        IN4,
        "prim::Constant k 0 1 alpha value=3",
        "aten::add a 3 1 0 0 alpha 1 #0=(1,4,6,6)f32 #1=(1,4,6,6)f32",
        "prim::Constant m 0 1 mode value=floor",
        "aten::div d 3 1 1 0 mode 2 #1=(1,4,6,6)f32 #2=(1,4,6,6)f32",
        out("2"),
    )
    after, _ = run_passes(g, "FoldConstantParams", "FuseExpressions", "RemoveUnused")
    assert after.operator("a").params["expr"] == "add(@0,mul(@0,3))"
    assert after.operator("d").type == "aten::div" and after.operator("d").params == {"rounding_mode": "floor"}
    assert_equivalent(g, after)
