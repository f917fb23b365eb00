"""kuiper_core.explore.tensors: statistics, histograms and pictures of one tensor."""

from __future__ import annotations

import io

import numpy as np
import pytest

from kuiper_core.explore import tensors as T


def test_stats_ignore_nan_inf_and_count_them() -> None:
    a = np.array([[1.0, 2.0, np.nan], [np.inf, -np.inf, 5.0]], np.float32)
    s = T.tensor_stats(a)
    assert s["shape"] == (2, 3) and s["dtype"] == "float32" and s["size"] == 6
    assert s["nan"] == 1 and s["inf"] == 2
    assert s["min"] == 1.0 and s["max"] == 5.0
    assert s["mean"] == pytest.approx(8 / 3) and s["std"] == pytest.approx(np.std([1, 2, 5]))


def test_stats_of_int_bool_empty_and_all_nan() -> None:
    assert T.tensor_stats(np.array([3, -4], np.int64))["min"] == -4
    assert T.tensor_stats(np.array([True, False]))["mean"] == 0.5
    empty = T.tensor_stats(np.zeros((0, 3), np.float32))
    assert empty["min"] is None and empty["size"] == 0
    nan = T.tensor_stats(np.full(4, np.nan, np.float32))
    assert nan["nan"] == 4 and nan["mean"] is None


def test_histogram_counts_finite_values_only() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=1000).astype(np.float32)
    a[:7] = np.nan
    counts, edges = T.histogram(a, bins=20)
    assert counts.sum() == 993 and len(edges) == 21
    assert edges[0] == pytest.approx(np.nanmin(a)) and edges[-1] == pytest.approx(np.nanmax(a))
    const_counts, _ = T.histogram(np.ones(5, np.float32))
    assert const_counts.sum() == 5
    table = T.histogram_table(a, bins=20)
    assert len(table["start"]) == 20 and sum(table["count"]) == 993
    assert table["end"][:-1] == table["start"][1:]


def test_colorize_maps_min_to_dark_max_to_yellow_and_nan_to_magenta() -> None:
    x = np.array([[0.0, 1.0], [np.nan, 0.5]])
    rgb = T.colorize(x)
    assert rgb.dtype == np.uint8 and rgb.shape == (2, 2, 3)
    assert tuple(rgb[0, 0]) == (68, 1, 84) and tuple(rgb[0, 1]) == (253, 231, 37)
    assert tuple(rgb[1, 0]) == (255, 0, 255)


def test_channel_grid_tiles_each_channel_on_its_own_scale() -> None:
    a = np.zeros((2, 5, 3, 4), np.float32)
    a[0] = np.arange(5)[:, None, None] * 10 + np.arange(12).reshape(3, 4)  # each channel a ramp
    a[0, 4, 0, 0] = np.nan
    mosaic, shown = T.channel_grid(a, max_channels=4, columns=2, max_side=12)
    assert shown == [0, 1, 2, 3]
    # tiles 3x4 enlarged 3x -> 9x12, 2 columns x 2 rows, 2-pixel white borders
    assert mosaic.shape == (2 * (9 + 2) + 2, 2 * (12 + 2) + 2, 3)
    tile1 = mosaic[2:11, 2 + 14 : 2 + 14 + 12]  # channel 1
    assert tuple(tile1[0, 0]) == (68, 1, 84) and tuple(tile1[-1, -1]) == (253, 231, 37)
    assert (mosaic[0] == 255).all()
    full, shown5 = T.channel_grid(a, max_channels=16, columns=8, max_side=12)
    assert shown5 == [0, 1, 2, 3, 4] and (full == T.NAN_RGB).all(axis=-1).any()
    with pytest.raises(ValueError):
        T.channel_grid(np.zeros((2, 3)))


def test_npy_bytes_round_trip() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.load(io.BytesIO(T.npy_bytes(a)))
    assert b.dtype == a.dtype and np.array_equal(a, b)


def test_arrays_digest_sees_values_shapes_and_dtypes() -> None:
    a = np.zeros((2, 3), np.float32)
    assert T.arrays_digest([a]) == T.arrays_digest([a.copy()])
    assert T.arrays_digest([a]) != T.arrays_digest([a.reshape(3, 2)])
    assert T.arrays_digest([a]) != T.arrays_digest([a.astype(np.float64)])
    b = a.copy()
    b[1, 2] = 1
    assert T.arrays_digest([a]) != T.arrays_digest([b])
