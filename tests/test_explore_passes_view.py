"""kuiper_core.explore.passes_view: the Passes page's "Next change" order and its ring."""

from __future__ import annotations

from conftest import SAMPLES

from kuiper_core.explore import passes_view as pv


def test_next_change_visits_every_change_once_in_reading_order() -> None:
    _, graph = pv.load_preset(SAMPLES / "passes", "pass_zoo")
    view = pv.optimise_view(graph, 1)
    order = view.changes_in_order()
    d = view.diff
    assert sorted(order) == sorted(d.removed | d.changed | d.added) and len(order) == len(set(order))
    before = [op.name for op in view.before.operators]
    gone = [n for n in order if n not in d.added]
    assert gone == sorted(gone, key=before.index) and order[: len(gone)] == gone  # the original's order first
    removed = next(n for n in order if n in d.removed)
    assert view.overlay("before", removed).highlight == removed
    assert view.overlay("after", removed).highlight is None  # not drawn there: nothing ringed
    assert view.overlay("before").highlight is None
