"""Resize and pad layers against PyTorch over many sizes and scales.

The op corpus (tests/data/ops/resize_*) checks what pnnx writes; this sweep checks the
index math underneath it on hundreds of size / scale_factor / align_corners /
recompute_scale_factor combinations, where one float rounding picks another pixel. It
calls torch directly, so it needs the `export` extra (torch) and is skipped without it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from kuiper_core.errors import ModelError
from kuiper_core.graph import Graph
from kuiper_core.layers.registry import create_layer
from conftest import slow_cases

torch = pytest.importorskip("torch")
F = torch.nn.functional

SCALES = [0.5, 0.6, 0.75, 1 / 3, 0.999, 1.0001, 1.05, 1.1, 4 / 3, 1.5, 1.6, 1.7, 2.0, 2.2, 2.5, 7 / 3, 3.0]
DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def make_layer(op_type: str, in_shape: tuple[int, ...] | None = None, **params):
    g = Graph()
    a, b = g.add_operand("in"), g.add_operand("out")
    a.shape = in_shape
    op = g.add_operator(op_type, "op", [a], [b], **params)
    return create_layer(op)


def run(layer, x: np.ndarray) -> np.ndarray:
    return layer.forward([x], [None])[0]


def random_case(rng: random.Random, mode: str) -> tuple[tuple[int, ...], dict, dict]:
    """(input shape, torch kwargs, pnnx params) for one random resize."""
    k = DIMS.get(mode, rng.choice([1, 2, 3]))
    spatial = tuple(rng.randint(1, 13) for _ in range(k))
    if rng.random() < 0.4:
        size = tuple(rng.choice([1, n, 2 * n, rng.randint(1, 20)]) for n in spatial)
        kw, params = {"size": size}, {"size": list(size)}
    else:
        sf = tuple(rng.choice(SCALES) for _ in range(k))
        while any(int(n * f) < 1 for n, f in zip(spatial, sf)):
            sf = tuple(max(f, 1.0) for f in sf)
        recompute = rng.random() < 0.5
        kw = {"scale_factor": sf, "recompute_scale_factor": recompute}
        params = {"scale_factor": list(sf), "recompute_scale_factor": recompute}
    if mode in DIMS:
        ac = rng.random() < 0.5
        kw["align_corners"] = params["align_corners"] = ac
    return (2, 3) + spatial, kw, params


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear"])
def test_interpolate_matches_torch_sweep(mode: str) -> None:
    rng = random.Random(f"resize-{mode}")
    for _ in range(150):
        shape, kw, params = random_case(rng, mode)
        x = torch.randn(*shape)
        ref = F.interpolate(x, mode=mode, **kw).numpy()
        y = run(make_layer("F.interpolate", mode=mode, **params), x.numpy())
        assert y.shape == ref.shape, (shape, kw)
        assert y.dtype == np.float32
        err = float(np.abs(y - ref).max())
        # nearest picks pixels: exact; the others agree to float32 rounding of the weights.
        bound = 0.0 if mode.startswith("nearest") else 1e-5 * max(1.0, float(np.abs(ref).max()))
        assert err <= bound, f"{mode} {shape} {kw}: max err {err}"


def test_interpolate_built_from_declared_shape_and_new_shapes() -> None:
    layer = make_layer("nn.Upsample", (2, 3, 5, 7), mode="bilinear", scale_factor=[1.5, 1.5], align_corners=False)
    assert (5, 7) in layer.plans  # tables made at build
    for shape in [(2, 3, 5, 7), (1, 3, 9, 4)]:  # and for another input shape at run time
        x = torch.randn(*shape)
        ref = F.interpolate(x, scale_factor=1.5, mode="bilinear").numpy()
        np.testing.assert_allclose(run(layer, x.numpy()), ref, atol=1e-5)


def test_interpolate_writes_into_out() -> None:
    layer = make_layer("nn.Upsample", (2, 3, 4, 4), mode="bicubic", size=[7, 9], align_corners=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    out = np.empty((2, 3, 7, 9), np.float32)
    y = layer.forward([x], [out])[0]
    assert y is out
    ref = F.interpolate(torch.from_numpy(x), size=(7, 9), mode="bicubic", align_corners=True).numpy()
    np.testing.assert_allclose(y, ref, atol=1e-5)


@pytest.mark.parametrize("mode", slow_cases(["constant", "reflect", "replicate", "circular"], {"replicate"}))
def test_pad_matches_torch_sweep(mode: str) -> None:
    rng = random.Random(f"pad-{mode}")
    checked = 0
    for _ in range(100):
        k = rng.choice([1, 2, 3])
        spatial = tuple(rng.randint(1, 7) for _ in range(k))
        lo = -2
        pads = []
        for n in reversed(spatial):
            hi = n - 1 if mode == "reflect" else n
            pads += [rng.randint(max(lo, -n // 2), hi), rng.randint(max(lo, -n // 2), hi)]
        pairs = list(zip(pads[::2], pads[1::2]))[::-1]
        if mode == "circular" and any(max(b, a) > n - max(-b, 0) - max(-a, 0) for n, (b, a) in zip(spatial, pairs)):
            continue  # wrapping more than the cropped dim: torch fails or returns garbage
        x = torch.randn(2, 3, *spatial)
        try:
            ref = F.pad(x, pads, mode=mode, value=1.5) if mode == "constant" else F.pad(x, pads, mode=mode)
        except (RuntimeError, ValueError, NotImplementedError):
            continue  # a combination torch itself rejects
        params = {"pad": pads, "mode": mode, "value": 1.5 if mode == "constant" else None}
        y = run(make_layer("F.pad", tuple(x.shape), **params), x.numpy())
        assert y.shape == ref.shape, (spatial, pads)
        np.testing.assert_array_equal(y, ref.numpy())
        checked += 1
    assert checked >= 50  # most combinations are valid ones


def test_pixel_shuffle_round_trip_with_extra_leading_dims() -> None:
    x = torch.randn(2, 3, 8, 2, 3)  # (*, C*r*r, H, W) with two leading dims
    y = run(make_layer("F.pixel_shuffle", upscale_factor=2), x.numpy())
    np.testing.assert_array_equal(y, F.pixel_shuffle(x, 2).numpy())
    back = run(make_layer("F.pixel_unshuffle", downscale_factor=2), y)
    np.testing.assert_array_equal(back, x.numpy())


@pytest.mark.parametrize(
    "op_type, shape, params, message",
    [
        ("nn.Upsample", (1, 2, 4, 4), {"mode": "area", "size": [2, 2]}, "mode 'area' is not supported"),
        ("nn.Upsample", (1, 2, 4, 4), {"mode": "bilinear"}, "exactly one of size and scale_factor"),
        ("nn.Upsample", (1, 2, 4), {"mode": "bilinear", "size": [8, 8]}, "needs a 4-D input"),
        ("F.interpolate", (1, 2, 4, 4), {"size": [2, 2, 2]}, "3 entries for 2 spatial dims"),
        ("F.interpolate", (1, 2, 4, 4), {"scale_factor": [-2.0]}, "positive number"),
        ("F.pad", (1, 2, 4, 4), {"pad": [4, 0], "mode": "reflect"}, "smaller than the input dim"),
        ("F.pad", (1, 2, 4, 4), {"pad": [1, 2, 3], "mode": "constant"}, "even number"),
        ("F.pad", (1, 2, 4, 4), {"pad": [-3, -2]}, "leaves no output"),
        ("F.pad", (1, 2, 4, 4), {"pad": [5, 0], "mode": "circular"}, "must not exceed"),
        ("F.pad", (1, 2, 4, 4), {"pad": [1, 1], "mode": "wrap"}, "mode 'wrap' is not supported"),
        ("nn.PixelShuffle", (1, 6, 4, 4), {"upscale_factor": 2}, "not divisible"),
        ("nn.PixelUnshuffle", (1, 2, 5, 4), {"downscale_factor": 2}, "divisible by"),
    ],
)
def test_bad_params_are_model_errors(op_type: str, shape: tuple, params: dict, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        make_layer(op_type, shape, **params)
