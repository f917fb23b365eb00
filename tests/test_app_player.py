"""pages/player.py: the play clock of the walkthroughs."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")


def test_play_advances_by_the_time_elapsed() -> None:
    """pages/player.py: a slow redraw must not slow the play speed down."""
    import time

    from pages import player  # noqa: PLC0415

    state: dict = {}
    assert player.steps_due(state, 2) == 1  # the first tick: one interval's worth
    state["tick"] = time.monotonic() - 1.5  # the last redraw took 1.5 s
    assert player.steps_due(state, 100) == 150
    state["tick"] = time.monotonic() - 1000
    assert player.steps_due(state, 500) == player.MAX_STEPS_PER_TICK
    assert player.interval(1) == 1.0 and player.interval(500) == 0.25
