"""Play controls shared by the walkthroughs: a speed picker and a timer for st.fragment.

At one step a second a 1,500-operator model takes 50 minutes; faster speeds advance
several steps per tick (a rerun more often than about 4 times a second would only queue up).
"""

from __future__ import annotations

import streamlit as st

# label -> (seconds between ticks, steps per tick)
SPEEDS: dict[str, tuple[float, int]] = {
    "1/s": (1.0, 1),
    "2/s": (0.5, 1),
    "4/s": (0.25, 1),
    "20/s": (0.25, 5),
    "100/s": (0.25, 25),
    "500/s": (0.25, 125),
}


def speed_picker(key: str, default: str = "2/s") -> tuple[float, int]:
    """Steps per second while playing (returns the fragment interval and steps per tick)."""
    label = st.selectbox("Play speed (steps per second)", list(SPEEDS), index=list(SPEEDS).index(default), key=key,
                         label_visibility="collapsed", help="Play speed, in steps per second")
    return SPEEDS[label]
