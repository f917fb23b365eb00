"""The operator categories' colours stay apart for colour-blind viewers and keep labels readable."""

from __future__ import annotations

import itertools

import pytest
from colour_vision import contrast, difference

from kuiper_core.explore.categories import CATEGORY_COLORS

MIN_DELTA_E = 8.0  # CIEDE2000: side by side, clearly different colours


def too_close(colours: dict[str, str], vision: str) -> list[tuple[str, str, float]]:
    """The pairs of `colours` closer than MIN_DELTA_E as seen with `vision`."""
    pairs = ((a, b, difference(colours[a], colours[b], vision)) for a, b in itertools.combinations(colours, 2))
    return [(a, b, round(d, 1)) for a, b, d in pairs if d < MIN_DELTA_E]


@pytest.mark.parametrize("vision", ["normal", "protanopia", "deuteranopia"])
def test_every_pair_of_categories_stays_apart(vision: str) -> None:
    close = too_close(CATEGORY_COLORS, vision)
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


# -- the state palettes (issue 38): the colours one view shows together --------------------------
def _state_palettes() -> dict[str, dict[str, str]]:
    from kuiper_core.explore import compare, expression_view
    from kuiper_core.explore import walkthrough as W
    from kuiper_core.explore.overlay import NEUTRAL, RAN

    return {
        "DFS walkthrough": {k: W.COLORS[k] for k in W.DFS_LEGEND},
        "Kahn walkthrough": {k: W.COLORS[k] for k in W.KAHN_LEGEND},
        "error view": {"not compared": NEUTRAL, **compare.ERROR_COLORS},
        "expressions": {"not evaluated yet": NEUTRAL, **dict(expression_view.STACK_LEGEND)},
        "Forward": {"not run yet": NEUTRAL, "run": RAN},
    }


STATE_VISIONS = ["normal", "protanopia", "deuteranopia", "tritanopia", "greyscale"]


@pytest.mark.parametrize("vision", STATE_VISIONS)
@pytest.mark.parametrize("palette", list(_state_palettes()))
def test_every_state_of_a_view_stays_apart(palette: str, vision: str) -> None:
    """Pass and fail, finished and on the cycle, on the stack and used: told apart by a
    colour-blind student and on a greyscale projector (lightness differs, not only hue)."""
    close = too_close(_state_palettes()[palette], vision)
    assert close == [], f"{palette}: states too alike for {vision} (CIEDE2000 < {MIN_DELTA_E}): {close}"


def test_black_labels_stay_readable_on_every_state_fill() -> None:
    fills = {c for p in _state_palettes().values() for c in p.values()}
    assert min(contrast("#000000", c) for c in fills) >= 4.0


def test_greyscale_keeps_lightness_only() -> None:
    assert difference("#ff0000", "#ff0000", "greyscale") == 0
    assert difference("#808080", "#7f7f7f", "greyscale") < 1  # a grey is itself
