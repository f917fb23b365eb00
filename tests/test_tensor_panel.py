"""The heatmap's axes label its rows and columns 0..n-1 (8 rows: ticks 0 to 7, not 0 to 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pages.tensor_panel import heatmap_chart


def integer_ticks(domain: list[float]) -> list[int]:
    """The integers Vega can place as ticks (tickMinStep=1, format 'd') inside a domain."""
    return list(range(math.ceil(domain[0]), math.floor(domain[1]) + 1))


@pytest.mark.parametrize("shape", [(8, 8), (8, 3), (1, 5), (300, 2)])
def test_heatmap_ticks_match_the_rows_and_columns(shape: tuple[int, int]) -> None:
    df, spec, _ = heatmap_chart(np.arange(np.prod(shape), dtype=np.float32).reshape(shape), "row", "col")
    enc = spec["layer"][0]["encoding"]
    assert integer_ticks(enc["y"]["scale"]["domain"]) == list(range(shape[0]))
    assert integer_ticks(enc["x"]["scale"]["domain"]) == list(range(shape[1]))
    assert enc["x"]["axis"]["tickMinStep"] == 1 and enc["x"]["axis"]["format"] == "d"
    # cell i is drawn centred on i: the data's [i, i + 1) shifted by a half, in Python
    assert (df["x0"] == df["col"] - 0.5).all() and (df["y1"] - df["y0"]).nunique() == 1  # a cell: a block of rows
    assert enc["x"]["field"] == "x0" and enc["y2"]["field"] == "y1"
    assert "transform" not in spec["layer"][0]  # no per-cell expression in the browser without NaN/Inf
    assert df["row"].min() == 0 and df["y1"].max() == shape[0] - 0.5


def test_nan_cells_get_the_magenta_layer() -> None:
    m = np.ones((4, 4), np.float32)
    m[1, 2] = np.nan
    df, spec, note = heatmap_chart(m, "row", "col")
    assert len(spec["layer"]) == 2 and "magenta" in note
