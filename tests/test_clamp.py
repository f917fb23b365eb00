"""layers/clamp.py: max/min against a scalar give what np.maximum/np.minimum give."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.layers import clamp

F32 = np.float32


def _inputs(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 8).astype(dtype)
    flat = x.reshape(-1)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 6.0, -3.0], dtype)
    flat[: min(flat.size, specials.size)] = specials[: flat.size]
    return x


@pytest.mark.parametrize("shape", [(3,), (1, 64, 4, 4), (2, 3, 37, 41), (1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_same_values_as_numpy(shape: tuple[int, ...], dtype: type) -> None:
    x = _inputs(shape, dtype)
    for bound in (F32(0), F32(-1.5), F32(np.inf)):
        for fast, ref in ((clamp.maximum, np.maximum), (clamp.minimum, np.minimum)):
            out = np.empty_like(x)
            fast(x, bound, out)
            # Equal values, NaN where NaN (a -0.0 may keep its sign against a bound of 0.0).
            np.testing.assert_array_equal(out, ref(x, bound).astype(x.dtype))
            assert out.dtype == x.dtype


def test_in_place_and_non_contiguous() -> None:
    x = _inputs((2, 8, 40, 40), np.float32)
    expected = np.maximum(x, F32(0))
    y = x.copy()
    clamp.maximum(y, F32(0), y)
    np.testing.assert_array_equal(y, expected)
    view = x[:, :, ::2, :]
    out = np.zeros((2, 8, 20, 80), np.float32)[..., ::2]
    clamp.minimum(view, F32(1), out)
    np.testing.assert_array_equal(out, np.minimum(view, F32(1)))
