"""kuiper_core.explore.tensor_view: a view chosen by shape, with capped sizes."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.explore import tensor_view as V


@pytest.mark.parametrize(
    "shape, kind, core",
    [
        ((1, 1000), "vector", (1000,)),
        ((1, 1008, 8), "matrix", (1008, 8)),
        ((1, 64, 56, 56), "slices", (64, 56, 56)),
        ((2, 3, 4, 5), "slices", (2, 3, 4, 5)),
        ((1, 1), "scalar", ()),
        ((), "scalar", ()),
        ((0, 3), "empty", (0, 3)),
    ],
)
def test_layout_by_shape(shape, kind, core) -> None:
    lay = V.layout(np.zeros(shape, np.float32))
    assert (lay.kind, lay.core) == (kind, core)


def test_a_tall_matrix_is_capped_by_block_means() -> None:
    m = np.arange(1008 * 8, dtype=np.float32).reshape(1008, 8)
    cells, (fr, fc) = V.block_reduce(m, 96, 96)
    assert cells.shape == (92, 8) and (fr, fc) == (11, 1)
    assert cells[0, 0] == pytest.approx(m[:11, 0].mean()) and cells[-1, 7] == pytest.approx(m[1001:, 7].mean())
    small, f = V.block_reduce(np.ones((8, 8)), 96, 96)
    assert small.shape == (8, 8) and f == (1, 1)


def test_block_means_keep_nonfinite_values_visible() -> None:
    m = np.zeros((200, 3))
    m[150, 1] = np.nan
    cells, (fr, _) = V.block_reduce(m, 50, 50)
    assert np.isnan(cells[150 // fr, 1]) and np.isfinite(np.delete(cells.reshape(-1), (150 // fr) * 3 + 1)).all()
    rows = V.heatmap_rows(cells, (fr, 1))
    assert sum(rows["nonfinite"]) == 1 and rows["value"].count(None) == 1
    assert rows["row_end"][0] == fr and rows["col"][:3] == [0, 1, 2]


def test_slices_of_nd_tensors() -> None:
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    m = V.slice_2d(a, 2, 3, {0: 1, 1: 2})
    assert np.array_equal(m, a[1, 2])
    t = V.slice_2d(a, 3, 1, {0: 0, 2: 3})  # rows = dim 3, columns = dim 1: transposed
    assert np.array_equal(t, a[0, :, 3, :].T)
    with pytest.raises(ValueError):
        V.slice_2d(a, 1, 1, {})
    with pytest.raises(IndexError):
        V.slice_2d(a, 2, 3, {0: 5})


def test_top_entries_vector_rows_and_tables() -> None:
    v = np.array([0.1, 3.0, np.nan, 2.0, 3.0], np.float32)
    top = V.top_entries(v, 3, labels=list("abcde"))
    assert [(r["index"], r["label"]) for r in top] == [(1, "b"), (4, "e"), (3, "d")]
    assert V.vector_rows(v)["value"][2] is None
    part, cut = V.table_slice(np.zeros((5000, 3)))
    assert part.shape == (V.MAX_TABLE_ROWS, 3) and cut
    assert V.table_slice(np.float32(2.5))[0].shape == (1, 1)


def test_value_preview_shows_numbers() -> None:
    assert V.value_preview(np.arange(3, dtype=np.float32) / 2) == "[0, 0.5, 1]"
    assert V.value_preview(np.arange(100)).endswith("… (100 values)]")
    assert V.value_preview(2.5) == "2.5"


def test_a_big_heatmap_is_a_picture_of_its_cells_with_a_colour_bar() -> None:
    from kuiper_core.explore.tensors import LUTS, NAN_RGB

    m = np.arange(56 * 56, dtype=np.float32).reshape(56, 56)
    m[3, 4] = np.nan
    pic = V.heatmap_image(m, 400, 380)
    assert pic.cells == (56, 56) and pic.factors == (1, 1) and pic.nonfinite and not pic.stretched
    k = 6  # 380 // 56: whole pixels per cell, the same across and down
    assert pic.rgb.shape == (56 * k, 56 * k + V.BAR_GAP + V.BAR_W, 3) and pic.rgb.dtype == np.uint8
    assert (pic.lo, pic.hi) == (0.0, float(56 * 56 - 1))
    viridis = LUTS["viridis"]
    assert (pic.rgb[0, 0] == viridis[0]).all()  # the smallest value: the scale's first colour
    assert (pic.rgb[-1, 56 * k - 1] == viridis[-1]).all()  # the largest: its last
    assert (pic.rgb[3 * k + 1, 4 * k + 1] == NAN_RGB).all()  # NaN: magenta, the whole cell
    bar = pic.rgb[:, -V.BAR_W :]
    assert (bar[0] == viridis[-1]).all() and (bar[-1] == viridis[0]).all()  # top: hi, bottom: lo
    assert (pic.rgb[:, 56 * k : 56 * k + V.BAR_GAP] == 255).all()


def test_a_huge_heatmap_picture_shows_block_means_within_its_box() -> None:
    pic = V.heatmap_image(np.ones((1000, 300)), 400, 380, "reds")
    assert pic.factors == (11, 4) and pic.cells == (91, 75) and not pic.stretched  # 4 px down, 5 across
    assert pic.rgb.shape[0] <= 380 and pic.rgb.shape[1] <= 400
    assert pic.lo == pic.hi == 1.0  # one value: one colour, no division by zero
    assert V.heatmap_image(np.ones((1000, 30)), 400, 380).stretched  # 4 px down, 12 across: the caption says so


def test_a_difference_is_coloured_from_zero_to_the_tolerance() -> None:
    """Float noise far below the tolerance stays pale (it filled the whole colour range when
    the scale ran from the noise's min to its max: issue 38)."""
    noise = np.random.default_rng(0).uniform(1e-9, 3e-9, (40, 40))
    lo, hi = V.difference_domain(noise, 1e-4)
    assert (lo, hi) == (0.0, 1e-4)
    pic = V.heatmap_image(noise, 400, 400, "reds", domain=(lo, hi))
    assert (pic.lo, pic.hi) == (0.0, 1e-4)
    cells = pic.rgb[:, : pic.rgb.shape[1] - V.BAR_W - V.BAR_GAP]
    assert np.ptp(cells.reshape(-1, 3), axis=0).max() <= 2  # one pale colour, no invented structure
    assert V.difference_domain(np.array([0.0, 0.5, np.inf]), 1e-4) == (0.0, 0.5)  # over: its largest
    own = V.heatmap_image(noise, 400, 400, "reds")  # without a domain: its own min and max
    assert own.lo == pytest.approx(noise.min()) and own.hi == pytest.approx(noise.max())
