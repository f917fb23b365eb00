"""Node labels show each operator's defining parameters, read off its layer (no list per type)."""

from __future__ import annotations

import pytest

from kuiper_core.explore.dot import node_label
from kuiper_core.explore.labels import UNKNOWN, label_params, param_lines, param_schema
from kuiper_core.graph import Attribute, Operator
from kuiper_core.layers.registry import supported_types


def op(type_: str, **params) -> Operator:
    return Operator(type_, "x", params=dict(params))


def test_roll_shows_shifts_and_dims() -> None:
    label = node_label(op("torch.roll", dims=[1, 2], shifts=[2, -1]))
    assert "shifts=(2,-1)" in label and "dims=(1,2)" in label


def test_a_convolution_shows_what_differs_from_its_layers_defaults() -> None:
    conv = op(
        "nn.Conv2d",
        bias=True,
        dilation=[1, 1],
        groups=1,
        in_channels=3,
        kernel_size=[7, 7],
        out_channels=64,
        padding=[3, 3],
        padding_mode="zeros",
        stride=[2, 2],
    )
    conv.attrs["bias"] = Attribute("f32", (64,))
    shown = dict(label_params(conv))
    assert {"kernel_size", "stride", "padding", "out_channels", "in_channels"} <= set(shown)
    # defaults the layer declares (groups=1, dilation 1, padding_mode zeros) and the flag of a present weight
    assert not {"groups", "dilation", "padding_mode", "bias"} & set(shown)
    assert param_schema("nn.Conv2d")["groups"] == 1


def test_params_the_scan_cannot_see_are_still_shown() -> None:
    assert dict(label_params(op("nn.Upsample", mode="nearest", scale_factor=[2.0, 2.0], size=None))) == {
        "scale_factor": [2.0, 2.0]
    }
    assert label_params(op("no.SuchType", a=1, b="x")) == [("a", 1), ("b", "x")]


def test_what_does_not_fit_is_counted() -> None:
    lines = param_lines(op("no.SuchType", **{f"p{i}": i for i in range(9)}), limit=5)
    assert len(lines) == 5 and lines[-1] == "+5 more params"


@pytest.mark.parametrize("t", supported_types())
def test_every_layer_has_a_readable_schema(t: str) -> None:
    schema = param_schema(t)
    assert schema is not None
    assert all(k.isidentifier() for k in schema)
    assert all(
        v is UNKNOWN or v is None or isinstance(v, (int, float, str, bool, tuple, list)) for v in schema.values()
    )
