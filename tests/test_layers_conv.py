"""Convolution layers beyond the op corpus: batch stacking of every conv_ case, build-time
checks with clear errors, output buffers, FLOPs, and a sweep against torch over random
strides / paddings / dilations / groups / padding modes (needs torch; skipped without it).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from conftest import OPS
from kuiper_core.errors import KuiperError, ModelError
from kuiper_core.graph import Attribute, Graph
from kuiper_core.layers.registry import create_layer
from layer_testing import assert_close, check_batch_stacking

NOT_BATCHABLE = {
    "conv_2d_unbatched",  # (C, H, W) input: dim 0 is channels
    "conv_f_conv2d_computed_weight",  # the weight depends on the whole batch's mean
}
CASES = sorted(p.name for p in OPS.glob("conv_*") if p.name not in NOT_BATCHABLE)


@pytest.mark.parametrize("case", CASES)
def test_batch_stacking(case: str) -> None:
    check_batch_stacking(case)


def conv_layer(op_type: str = "nn.Conv2d", weight=None, bias_data=None, in_shape=None, n_inputs: int = 1, **params):
    g = Graph()
    ins = [g.add_operand(f"in{i}") for i in range(n_inputs)]
    ins[0].shape = in_shape
    op = g.add_operator(op_type, "conv", ins, [g.add_operand("out")], **params)
    if n_inputs > 1:
        op.input_names = ["input", "weight", "bias"][:n_inputs]
    if weight is not None:
        op.attrs["weight"] = Attribute("f32", weight.shape, weight)
    if bias_data is not None:
        op.attrs["bias"] = Attribute("f32", bias_data.shape, bias_data)
    return create_layer(op)


def conv2d_params(cin: int, cout: int, k: int, **kw) -> dict:
    p = dict(
        in_channels=cin,
        out_channels=cout,
        kernel_size=[k, k],
        stride=[1, 1],
        padding=[0, 0],
        dilation=[1, 1],
        groups=1,
        bias=False,
        padding_mode="zeros",
    )
    p.update(kw)
    return p


def w32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    "weight_shape, params, message",
    [
        ((6, 4, 3, 3), dict(groups=2), "in_channels/groups = 4/2"),
        ((6, 2, 3, 3), dict(groups=4), "not divisible by groups=4"),
        ((5, 4, 3, 3), dict(), "expected out_channels=6"),
        ((6, 4, 3), dict(), "must be 4-D"),
        ((6, 4, 3, 3), dict(kernel_size=[3, 2]), "kernel_size=(3, 2)"),
        ((6, 4, 3, 3), dict(padding_mode="mirror"), "padding_mode must be one of"),
        ((6, 4, 3, 3), dict(padding="full"), "padding must be ints, 'same' or 'valid'"),
        ((6, 4, 3, 3), dict(padding="same", stride=[2, 2]), "padding='same' needs stride 1"),
    ],
)
def test_bad_conv_is_a_model_error_naming_the_operator(weight_shape, params, message) -> None:
    with pytest.raises(ModelError, match="operator 'conv'") as e:
        conv_layer(weight=w32(*weight_shape), **conv2d_params(4, 6, 3, **params))
    assert message in str(e.value)


def test_bad_bias_shape() -> None:
    with pytest.raises(ModelError, match=r"bias shape \(5,\)"):
        conv_layer(weight=w32(6, 4, 3, 3), bias_data=w32(5), **conv2d_params(4, 6, 3, bias=True))


@pytest.mark.parametrize(
    "op_type, weight, params",
    [
        ("nn.Conv2d", (6, 4, 3, 3), conv2d_params(4, 6, 3)),
        ("nn.ConvTranspose2d", (4, 6, 3, 3), conv2d_params(4, 6, 3, output_padding=[0, 0])),
        (
            "nn.Conv3d",
            (6, 4, 3, 3, 3),
            dict(
                in_channels=4,
                out_channels=6,
                kernel_size=[3, 3, 3],
                stride=[1, 1, 1],
                padding=[0, 0, 0],
                dilation=[1, 1, 1],
                groups=1,
                bias=False,
            ),
        ),
        ("nn.Linear", (6, 4), dict(in_features=4, out_features=6, bias=False)),
    ],
)
def test_bias_flag_and_bias_weight_must_agree(op_type, weight, params) -> None:
    # bias=False beside a @bias weight: Conv2d used to add it and Conv3d to ignore it (a
    # passes fuzz mutant showed the two answers); now neither guesses.
    with pytest.raises(ModelError, match="bias=False but the file has a '@bias' weight") as e:
        conv_layer(op_type, weight=w32(*weight), bias_data=w32(6), **params)
    assert e.value.operator == "conv"
    with pytest.raises(ModelError, match="missing weight '@bias'"):
        conv_layer(op_type, weight=w32(*weight), **{**params, "bias": True})
    assert conv_layer(op_type, weight=w32(*weight), bias_data=w32(6), **{**params, "bias": True}) is not None


def test_missing_weight() -> None:
    with pytest.raises(ModelError, match="missing weight '@weight'"):
        conv_layer(**conv2d_params(4, 6, 3))


def test_forward_checks_channels_and_size() -> None:
    layer = conv_layer(weight=w32(6, 4, 3, 3), **conv2d_params(4, 6, 3))
    with pytest.raises(KuiperError, match="input has 3 channels, expected in_channels=4"):
        layer.forward([w32(1, 3, 8, 8)], [None])
    with pytest.raises(KuiperError, match="larger than the padded input"):
        layer.forward([w32(1, 4, 2, 8)], [None])
    with pytest.raises(KuiperError, match=r"expected input of shape \(N, C, H, W\)"):
        layer.forward([w32(4, 8)], [None])
    f = conv_layer("F.conv2d", n_inputs=2, stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=2, bias=None)
    with pytest.raises(KuiperError, match=r"expected in_channels/groups = 4/2"):
        f.forward([w32(1, 4, 8, 8), w32(6, 3, 3, 3)], [None])


def test_transposed_errors() -> None:
    params = dict(
        in_channels=4,
        out_channels=6,
        kernel_size=[3, 3],
        stride=[2, 2],
        padding=[1, 1],
        output_padding=[2, 0],
        dilation=[1, 1],
        groups=2,
        bias=False,
    )
    with pytest.raises(ModelError, match="output_padding"):
        conv_layer("nn.ConvTranspose2d", weight=w32(4, 3, 3, 3), **params)
    params["output_padding"] = [1, 1]
    with pytest.raises(ModelError, match="expected out_channels/groups = 6/2"):
        conv_layer("nn.ConvTranspose2d", weight=w32(4, 6, 3, 3), **params)


def test_writes_into_the_given_buffer_and_keeps_float32() -> None:
    x = w32(2, 4, 9, 7)
    for params in (conv2d_params(4, 6, 3, padding=[1, 1], bias=True), conv2d_params(4, 6, 1, bias=True)):
        k = params["kernel_size"][0]
        layer = conv_layer(weight=w32(6, 4, k, k), bias_data=w32(6), **params)
        buf = np.full((2, 6, 9, 7), np.nan, np.float32)
        (y,) = layer.forward([x], [buf])
        assert y is buf and y.dtype == np.float32 and np.isfinite(y).all()
        (y2,) = layer.forward([x], [None])
        np.testing.assert_array_equal(y, y2)


def test_flops_are_macs() -> None:
    layer = conv_layer(weight=w32(64, 32, 3, 3), **conv2d_params(64, 64, 3, groups=2))
    assert layer.flops([(1, 64, 56, 56)], [(1, 64, 54, 54)]) == 64 * 54 * 54 * 32 * 9
    t = conv_layer(
        "nn.ConvTranspose2d",
        weight=w32(8, 3, 2, 2),
        in_channels=8,
        out_channels=3,
        kernel_size=[2, 2],
        stride=[2, 2],
        padding=[0, 0],
        output_padding=[0, 0],
        dilation=[1, 1],
        groups=1,
        bias=False,
    )
    assert t.flops([(1, 8, 5, 5)], [(1, 3, 10, 10)]) == 8 * 25 * 3 * 4


# -- sweep against torch -----------------------------------------------------------------------


def random_conv(rng: random.Random) -> tuple[dict, tuple[int, ...], tuple[int, ...]]:
    groups = rng.choice([1, 1, 2, 3])
    cg, og = rng.randint(1, 3), rng.choice([1, 2, 3, 17])  # > 16 outputs per group: the other im2col
    k = (rng.randint(1, 4), rng.randint(1, 4))
    stride = (rng.randint(1, 3), rng.randint(1, 3))
    dil = (rng.randint(1, 2), rng.randint(1, 2))
    mode = rng.choice(["zeros", "zeros", "reflect", "replicate", "circular"])
    pad = tuple(rng.randint(0, (d * (kk - 1)) // 2 + 1) for kk, d in zip(k, dil))
    size = tuple(max(d * (kk - 1) + 1, p + 1) + rng.randint(0, 8) for kk, d, p in zip(k, dil, pad))
    params = conv2d_params(
        cg * groups,
        og * groups,
        1,
        kernel_size=list(k),
        stride=list(stride),
        padding=list(pad),
        dilation=list(dil),
        groups=groups,
        bias=rng.random() < 0.7,
        padding_mode=mode,
    )
    return params, (rng.randint(1, 3), cg * groups) + size, (og * groups, cg) + k


@pytest.mark.slow
def test_conv2d_sweep_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = random.Random(7)
    for _ in range(150):
        params, x_shape, w_shape = random_conv(rng)
        x, w, b = w32(*x_shape), w32(*w_shape) * 0.5, w32(w_shape[0])
        layer = conv_layer(weight=w, bias_data=b if params["bias"] else None, **params)
        (y,) = layer.forward([x], [None])
        ref_mod = torch.nn.Conv2d(
            params["in_channels"],
            params["out_channels"],
            tuple(params["kernel_size"]),
            tuple(params["stride"]),
            tuple(params["padding"]),
            tuple(params["dilation"]),
            params["groups"],
            params["bias"],
            params["padding_mode"],
        )
        with torch.no_grad():
            ref_mod.weight.copy_(torch.from_numpy(w))
            if params["bias"]:
                ref_mod.bias.copy_(torch.from_numpy(b))
            ref = ref_mod(torch.from_numpy(x)).numpy()
        assert_close(y, ref, f"conv2d {params} x{x_shape}")


@pytest.mark.slow
def test_conv_transpose2d_sweep_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = random.Random(11)
    for _ in range(150):
        groups = rng.choice([1, 2])
        cg, og = rng.randint(1, 3), rng.randint(1, 3)
        k = (rng.randint(1, 4), rng.randint(1, 4))
        stride = (rng.randint(1, 3), rng.randint(1, 3))
        dil = (rng.randint(1, 2), rng.randint(1, 2))
        pad = tuple(rng.randint(0, d * (kk - 1)) for kk, d in zip(k, dil))
        opad = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(stride, dil))
        x = w32(rng.randint(1, 2), cg * groups, rng.randint(1, 6), rng.randint(1, 6))
        w = w32(cg * groups, og, *k)
        bias = w32(og * groups) if rng.random() < 0.5 else None
        with torch.no_grad():
            try:
                ref = torch.nn.functional.conv_transpose2d(
                    torch.from_numpy(x),
                    torch.from_numpy(w),
                    None if bias is None else torch.from_numpy(bias),
                    stride,
                    pad,
                    opad,
                    groups,
                    dil,
                ).numpy()
            except RuntimeError:  # an empty output: torch refuses, so must we
                continue
        layer = conv_layer(
            "nn.ConvTranspose2d",
            weight=w,
            bias_data=bias,
            in_channels=cg * groups,
            out_channels=og * groups,
            kernel_size=list(k),
            stride=list(stride),
            padding=list(pad),
            output_padding=list(opad),
            dilation=list(dil),
            groups=groups,
            bias=bias is not None,
        )
        (y,) = layer.forward([x], [None])
        assert_close(y, ref, f"conv_transpose2d k{k} s{stride} p{pad} op{opad} d{dil} g{groups} x{x.shape}")


def test_large_batches_run_in_chunks(monkeypatch) -> None:
    """Past the scratch budget a batch is processed in parts; the result must not change."""
    import kuiper_core.layers.windows as windows

    x = w32(5, 4, 9, 7)
    conv = conv_layer(weight=w32(6, 4, 3, 3), bias_data=w32(6), **conv2d_params(4, 6, 3, padding=[1, 1], bias=True))
    convt = conv_layer(
        "nn.ConvTranspose2d",
        weight=w32(4, 3, 3, 3),
        in_channels=4,
        out_channels=3,
        kernel_size=[3, 3],
        stride=[2, 2],
        padding=[1, 1],
        output_padding=[1, 0],
        dilation=[1, 1],
        groups=1,
        bias=False,
    )
    whole = [conv.forward([x], [None])[0], convt.forward([x], [None])[0]]
    monkeypatch.setattr(windows, "SCRATCH_BUDGET", 1)
    assert len(windows.batch_chunks(5, 100)) == 5
    np.testing.assert_array_equal(conv.forward([x], [None])[0], whole[0])
    np.testing.assert_array_equal(convt.forward([x], [None])[0], whole[1])
