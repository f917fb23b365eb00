"""The operator categories' colours stay apart for colour-blind viewers and keep labels readable."""

from __future__ import annotations

import itertools

import pytest
from colour_vision import contrast, difference

from kuiper_core.explore.categories import CATEGORY_COLORS

MIN_DELTA_E = 8.0  # CIEDE2000: side by side, clearly different colours


@pytest.mark.parametrize("vision", ["normal", "protanopia", "deuteranopia"])
def test_every_pair_of_categories_stays_apart(vision: str) -> None:
    close = [
        (a, b, round(difference(CATEGORY_COLORS[a], CATEGORY_COLORS[b], vision), 1))
        for a, b in itertools.combinations(CATEGORY_COLORS, 2)
        if difference(CATEGORY_COLORS[a], CATEGORY_COLORS[b], vision) < MIN_DELTA_E
    ]
    assert close == [], f"categories too alike for {vision} vision (CIEDE2000 < {MIN_DELTA_E}): {close}"


def test_activation_and_reduce_are_not_two_greens() -> None:
    for vision in ("normal", "protanopia", "deuteranopia"):
        assert difference(CATEGORY_COLORS["activation"], CATEGORY_COLORS["reduce"], vision) >= 15


def test_black_labels_stay_readable_on_every_fill() -> None:
    assert min(contrast("#000000", c) for c in CATEGORY_COLORS.values()) >= 6.5


def test_the_colour_difference_matches_sharma_et_al() -> None:
    from colour_vision import ciede2000

    assert ciede2000((50, 2.6772, -79.7751), (50, 0, -82.7485)) == pytest.approx(2.0425, abs=1e-4)
    assert ciede2000((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387)) == pytest.approx(1.2644, abs=1e-4)
