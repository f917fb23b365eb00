"""The causal self-attention pnnx drops from TorchScript (formats/causal_attention.py), read from
the archive without torch: tests/data/user_models/causal_decoder.pt (tools/export_user_models.py,
nn.TransformerDecoder with a causal tgt_mask, traced by PyTorch 2.13)."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from conftest import DATA
from kuiper_core.formats.causal_attention import (
    _calls_causal_sdpa,
    add_causal_masks,
    causal_attention_paths,
    causal_classes,
)
from kuiper_core.graph import Graph

PT = DATA / "user_models" / "causal_decoder.pt"


@pytest.mark.parametrize(
    ("code", "causal"),
    [
        ("y = torch.scaled_dot_product_attention(q1, k1, v1, None, 0., True)", True),
        ("y = torch.scaled_dot_product_attention(q1, k1, v1, None, 0., False)", False),
        ("y = torch.scaled_dot_product_attention(q, k, v, is_causal=True)", True),
        ("y = torch.scaled_dot_product_attention(f(a, b), k, v, torch.ones([2, 2]), 0., True, scale=None)", True),
        (
            "y = torch.scaled_dot_product_attention(q, k, v, m, 0., False)\nz = g(True, True, True, True, True, True)",
            False,
        ),
    ],
)
def test_is_causal_is_read_from_the_call(code: str, causal: bool) -> None:
    assert _calls_causal_sdpa(code) is causal


def test_the_decoders_self_attentions_are_found_not_its_cross_attentions() -> None:
    with zipfile.ZipFile(PT) as archive:
        assert causal_classes(archive)  # the classes whose code has is_causal True
    assert causal_attention_paths(PT) == {f"decoder.layers.{i}.self_attn" for i in (0, 1)}


def test_a_file_that_is_no_archive_has_none(tmp_path) -> None:
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"not a zip")
    assert causal_attention_paths(bad) == set()


def test_the_mask_is_sdpas_top_left_causal_one() -> None:
    g = Graph()
    x, y = g.add_operand("x"), g.add_operand("y")
    x.shape, y.shape = (1, 4, 8), (1, 4, 8)
    g.add_operator("pnnx.Input", "in", [], [x])
    mha = g.add_operator("nn.MultiheadAttention", "blk.attn", [x], [y], batch_first=True)
    mha.input_names = ["input"]
    assert add_causal_masks(g, {"blk.attn", "other"}) == ["blk.attn"]
    assert [op.type for op in g.operators] == ["pnnx.Input", "pnnx.Attribute", "nn.MultiheadAttention"]
    assert mha.input_names == ["input", "attn_mask"]
    mask = g.operators[1].attrs["data"].data
    assert mask.shape == (4, 4) and np.all(mask[np.tril_indices(4)] == 0)
    assert np.all(np.isneginf(mask[np.triu_indices(4, 1)]))
    assert add_causal_masks(g, {"blk.attn"}) == []  # it has a mask now: left alone
