"""Sequence layers (recurrent.py, attention.py) beyond the op corpus.

The references are PyTorch's outputs stored with each pnnx-converted case: a batch tiled
three times must give the tiled reference (batch sizes the .param did not declare), and
bad graphs must fail at build with a message naming what was expected.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import OPS, max_err_ok
from kuiper_core.errors import ModelError
from kuiper_core.graph import Attribute
from kuiper_core.layers.registry import create_layer
from kuiper_core.pnnx import load_graph, parse_param

SEQUENCE_TYPES = ("nn.LSTM", "nn.GRU", "nn.RNN", "nn.MultiheadAttention", "F.scaled_dot_product_attention")


def _case(name: str):  # type: ignore[no-untyped-def]
    """(graph, the sequence operator, inputs by operand name, expected outputs) of an op case."""
    case = OPS / name
    graph = load_graph(case / "model.pnnx.param")
    op = next(o for o in graph.operators if o.type in SEQUENCE_TYPES)
    with np.load(case / "inputs.npz") as z:
        feeds = {inp.outputs[0].name: z[f"in{i}"] for i, inp in enumerate(graph.inputs)}
    with np.load(case / "expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    return graph, op, feeds, expected


def _run(op, feeds):  # type: ignore[no-untyped-def]
    layer = create_layer(op)
    return layer, layer.forward([feeds[o.name] for o in op.inputs], [None] * len(op.outputs))


# -- batch sizes other than the declared one ---------------------------------------------------
RNN_TILED = [
    "rnn_lstm_basic",
    "rnn_lstm_bf_bidir_2l_state",
    "rnn_lstm_proj",
    "rnn_lstm_hn_only",
    "rnn_lstm_shared_state",
    "rnn_gru_bf_bidir_3l_state",
    "rnn_gru_nobias_2l",
    "rnn_rnn_relu_bidir_2l_state",
]


@pytest.mark.parametrize("name", RNN_TILED)
def test_recurrent_batch_tiled(name: str) -> None:
    _, op, feeds, expected = _case(name)
    layer = create_layer(op)
    x_axis = 0 if layer.batch_first else 1
    tiled = {k: np.concatenate([v] * 3, axis=x_axis if k == op.inputs[0].name else 1) for k, v in feeds.items()}
    _, ys = _run(op, tiled)
    for out_name, y, ref in zip(layer.outputs, ys, expected):
        ref3 = np.concatenate([ref] * 3, axis=x_axis if out_name == "output" else 1)
        assert y.dtype == np.float32
        ok, err, bound = max_err_ok(y, ref3)
        assert ok, f"{out_name}: err {err:.3g} > {bound:.3g}"


MHA_TILED = [
    "attn_mha_self",
    "attn_mha_cross_bf_nobias",
    "attn_mha_kdim_vdim",
    "attn_mha_float_mask",
    "attn_mha_head_weights",
    "attn_mha_bias_kv_zero_attn",
]


@pytest.mark.parametrize("name", MHA_TILED)
def test_attention_batch_tiled(name: str) -> None:
    _, op, feeds, expected = _case(name)
    layer = create_layer(op)
    mask = op.inputs[layer.mask_index].name if layer.mask_index is not None else None
    in_axis = 0 if layer.batch_first else 1
    tiled = {k: v if k == mask else np.concatenate([v] * 3, axis=in_axis) for k, v in feeds.items()}
    _, ys = _run(op, tiled)
    for out_name, y, ref in zip(layer.outputs, ys, expected):
        ref3 = np.concatenate([ref] * 3, axis=in_axis if out_name == "output" else 0)
        ok, err, bound = max_err_ok(y, ref3)
        assert y.dtype == np.float32 and ok, f"{out_name}: err {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("name", ["attn_sdpa", "attn_sdpa_float_mask", "attn_sdpa_causal_scale", "attn_sdpa_gqa"])
def test_sdpa_batch_tiled(name: str) -> None:
    _, op, feeds, expected = _case(name)
    _, (y,) = _run(op, {k: np.concatenate([v] * 3) for k, v in feeds.items()})
    ok, err, bound = max_err_ok(y, np.concatenate([expected[0]] * 3))
    assert y.dtype == np.float32 and ok, f"err {err:.3g} > {bound:.3g}"


# -- which outputs pnnx kept ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, outputs",
    [
        ("rnn_lstm_basic", ("output", "h_n", "c_n")),
        ("rnn_lstm_hn_only", ("h_n",)),
        ("rnn_lstm_3l_nobias", ("output",)),
        ("rnn_gru_hn_only", ("h_n",)),
        ("attn_mha_self", ("output", "weights")),
        ("attn_mha_self_bf_output", ("output",)),
        ("attn_mha_weights_only", ("weights",)),
        ("attn_mha_head_weights", ("output", "head_weights")),
    ],
)
def test_pruned_outputs_resolved(name: str, outputs: tuple[str, ...]) -> None:
    _, op, _, _ = _case(name)
    assert create_layer(op).outputs == outputs


# -- bad graphs fail at build, saying what was expected ----------------------------------------
def test_recurrent_wrong_weight_shape() -> None:
    _, op, _, _ = _case("rnn_lstm_bf_bidir_2l_state")
    op.attrs["weight_ih_l1_reverse"] = Attribute("f32", (48, 10), np.zeros((48, 10), np.float32))
    with pytest.raises(ModelError, match=r"weight_ih_l1_reverse.*\(48, 10\), expected \(48, 24\)"):
        create_layer(op)


def test_recurrent_missing_weight() -> None:
    _, op, _, _ = _case("rnn_gru_basic")
    del op.attrs["bias_hh_l0"]
    with pytest.raises(ModelError, match="bias_hh_l0"):
        create_layer(op)


def test_recurrent_wrong_state_at_run() -> None:
    _, op, feeds, _ = _case("rnn_gru_bf_bidir_3l_state")
    layer = create_layer(op)
    x, h0 = (feeds[o.name] for o in op.inputs)
    with pytest.raises(ModelError, match=r"h0 has shape \(5, 3, 12\), expected \(6, 3, 12\)"):
        layer.forward([x, h0[:5]], [None, None])


def test_attention_heads_must_divide() -> None:
    _, op, _, _ = _case("attn_mha_self")
    op.params["num_heads"] = 3
    with pytest.raises(ModelError, match="multiple of num_heads"):
        create_layer(op)


# What pnnx 20261020 writes for MultiheadAttention(8, 2, batch_first=True) called with a
# constant bool mask buffer: the mask is listed first and `$attn_mask` names the query.
CONST_MASK_PARAM = """7767517
5 5
pnnx.Input               pnnx_input_0             0 1 0 #0=(2,3,8)f32
pnnx.Attribute           mask                     0 1 1 @data=(3,3)bool #1=(3,3)bool
nn.MultiheadAttention    m                        2 2 1 0 2 3 add_bias_kv=False add_zero_attn=False batch_first=True bias=True embed_dim=8 kdim=8 num_heads=2 vdim=8 @in_proj_bias=(24)f32 @in_proj_weight=(24,8)f32 @out_proj.bias=(8)f32 @out_proj.weight=(8,8)f32 $attn_mask=0 #1=(3,3)bool #0=(2,3,8)f32 #2=(2,3,8)f32 #3=(2,3,3)f32
prim::TupleConstruct     pnnx_1                   2 1 2 3 4 #2=(2,3,8)f32 #3=(2,3,3)f32
pnnx.Output              pnnx_output_0            1 0 4
"""


def test_attention_const_mask_quirk_is_read_swapped() -> None:
    """The file's own reading cannot be (a (3,3) bool query), the swapped one fits: the
    layer swaps them (numerics against PyTorch: tests/data/optlevel/encoder_block)."""
    graph = parse_param(CONST_MASK_PARAM)
    op = graph.operator("m")
    for attr in op.attrs.values():
        attr.data = np.zeros(attr.shape, np.float32)
    layer = create_layer(op)
    assert (layer.mask_index, layer.qkv_index) == (0, [1])
    # Both readings possible: the file's is kept (and here its outputs do not fit it).
    op.inputs[0].shape, op.inputs[0].dtype = (3, 8), "f32"
    with pytest.raises(ModelError, match=r"match none of the module's outputs: output \(3,8\)"):
        create_layer(op)


# -- cost ---------------------------------------------------------------------------------------
def test_flops_are_macs() -> None:
    _, op, _, _ = _case("rnn_lstm_basic")  # T=6, B=2, input 10, hidden 16, 4 gates
    assert create_layer(op).flops([(6, 2, 10)], []) == 6 * 2 * (10 * 64 + 16 * 64)
    _, op, _, _ = _case("attn_sdpa")  # (2,4,5,8) x (2,4,7,8) -> v (2,4,7,6)
    assert create_layer(op).flops([(2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 6)], []) == 8 * 5 * 7 * (8 + 6)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_prepared_matches_forward(batch_first: bool, bias: bool) -> None:
    """MultiheadAttention's prepared self-attention (strided head views, scratch arrays)
    against its forward, both layouts, with and without biases."""
    op = _case("attn_mha_self_bf_output")[1]
    layer = create_layer(op)
    layer.batch_first = batch_first
    if not bias:
        layer.b_fused = layer.bo = None
    x = np.random.default_rng(3).standard_normal((3, 5, 16)).astype(np.float32)
    expected = layer.forward([x], [None])[0]
    y = np.full_like(x, np.nan)
    f = layer.prepare([x], [y])
    assert f is not None
    f([x], [y])
    f([x], [y])  # again: the scratch arrays hold the last call's values
    np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)
    assert layer.prepare([x.astype(np.float64)], [y.astype(np.float64)]) is None


def _masked_self_attention(batch_first: bool, mask_kind: str):  # type: ignore[no-untyped-def]
    """The case's self-attention layer given a mask input (as Swin's `$attn_mask`), x and the mask."""
    op = _case("attn_mha_self_bf_output")[1]
    layer = create_layer(op)
    layer.batch_first = batch_first
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 16)).astype(np.float32)
    B, L = (3, 5) if batch_first else (5, 3)
    if mask_kind == "none":
        return layer, [x]
    layer.mask_index, layer.qkv_index = 1, [0]
    mask = {
        "float (L, S)": rng.standard_normal((L, L)).astype(np.float32),
        "float (B*heads, L, S)": rng.standard_normal((B * layer.num_heads, L, L)).astype(np.float32),
        "bool (L, S)": np.triu(np.ones((L, L), bool), 1),
    }[mask_kind]
    return layer, [x, mask]


MASKS = ["none", "float (L, S)", "float (B*heads, L, S)", "bool (L, S)"]


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask_kind", MASKS)
def test_masked_self_attention_prepared_matches_forward(batch_first: bool, mask_kind: str) -> None:
    """The prepared self-attention with a mask input (Swin's windows) against the forward."""
    layer, inputs = _masked_self_attention(batch_first, mask_kind)
    expected = layer.forward(inputs, [None])[0]
    y = np.full_like(inputs[0], np.nan)
    f = layer.prepare(inputs, [y])
    assert f is not None
    f(inputs, [y])
    np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_split_in_halves_matches_forward(
    monkeypatch, batch_first: bool, mask_kind: str, bias: bool
) -> None:
    """Inside a split forward (layers/halves.py) self-attention runs as two halves of its batch
    (batch first, more than one: Swin's windows), else its heads in two halves then its output
    projection in two halves of the rows (both here: no helper process): the forward's values."""
    from kuiper_core.layers.halves import EVERY_CALL
    from kuiper_core.runtime.helper_process import Splits

    layer, inputs = _masked_self_attention(batch_first, mask_kind)
    if not bias:
        layer.b_fused = layer.bo = None
    expected = layer.forward(inputs, [None])[0]
    y = np.full_like(inputs[0], np.nan)
    splits = Splits(shared=False, sizes=EVERY_CALL)
    f = layer.prepare(inputs, [y], split=splits)
    assert f is not None and splits.made == (1 if batch_first else 2)  # the batch; or heads, then rows
    f(inputs, [y])
    np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)
