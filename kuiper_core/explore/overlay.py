"""What the graph viewer paints over a drawn graph, as plain data.

The DOT of a view stays the same while a walkthrough or a Forward run moves; only this
overlay changes (the current node, per-node state colours, the legend), so the browser
repaints a few nodes instead of laying the graph out again.

Colour rule: while state colours are on (`neutral`), every node without a state is drawn
neutral grey, so each colour on screen means exactly one thing and the legend lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable, Mapping, Sequence

from .categories import CATEGORY_COLORS

NEUTRAL = "#f4f4f4"  # nodes without a state while a state view is on
RAN = "#93d4fe"  # Forward: an operator that has run (apart from NEUTRAL in greyscale too)


@dataclass
class Overlay:
    highlight: str | None = None  # the node drawn with the thick red border
    colors: dict[str, str] = field(default_factory=dict)  # node title -> fill
    neutral: bool = False  # nodes not in `colors` are drawn neutral (state views)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (meaning, colour), by the graph
    highlight_label: str | None = None  # what the red border means ("current step")
    note: str = ""
    marks: list[str] = field(default_factory=list)  # nodes ringed in blue (search matches)
    marks_label: str | None = None  # what the blue ring means


def category_legend(categories: Iterable[str]) -> list[tuple[str, str]]:
    """Chips for the operator categories present (the default colouring of model graphs)."""
    present = set(categories)
    return [(c, CATEGORY_COLORS[c]) for c in CATEGORY_COLORS if c in present]


def state_overlay(
    colors: dict[str, str],
    legend: list[tuple[str, str]],
    *,
    highlight: str | None = None,
    highlight_label: str | None = "current step",
    note: str = "grey: no state yet",
) -> Overlay:
    """A state view (walkthrough, errors): only `legend`'s colours, everything else neutral."""
    return Overlay(
        highlight=highlight,
        colors=dict(colors),
        neutral=True,
        legend=list(legend),
        highlight_label=highlight_label if highlight else None,
        note=note,
    )


def roll_up(colors: Mapping[str, str], unit_of: Mapping[str, str], priority: Sequence[str]) -> dict[str, str]:
    """Colours per drawn node. An operator drawn as itself keeps its colour; a closed
    module takes the most important colour among its operators (later in `priority`
    wins), so a failure inside a closed module still shows."""
    rank = {c: i for i, c in enumerate(priority)}
    out: dict[str, str] = {}
    for op, colour in colors.items():
        unit = unit_of.get(op)
        if unit is None:
            continue
        if unit not in out or unit == op or rank.get(colour, -1) > rank.get(out[unit], -1):
            out[unit] = colour
    return out
