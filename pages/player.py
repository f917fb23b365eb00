"""Play controls shared by the walkthroughs: a speed picker and the clock of st.fragment.

At one step a second a 1,500-operator model takes 50 minutes; faster speeds advance as many
steps as the elapsed time asks for at each tick, so the rate holds even when drawing a step
takes longer than the tick (a rerun more often than about 4 times a second would only queue).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import streamlit as st

SPEEDS = {"1/s": 1, "2/s": 2, "4/s": 4, "20/s": 20, "100/s": 100, "500/s": 500}  # steps per second
MAX_STEPS_PER_TICK = 5_000


DEFAULT = "2/s"


def speed_picker(key: str) -> int:
    """Steps per second while playing."""
    label = st.selectbox(
        "Play speed (steps per second)",
        list(SPEEDS),
        index=list(SPEEDS).index(DEFAULT),
        key=key,
        label_visibility="collapsed",
        help="Play speed, in steps per second",
    )
    return SPEEDS[label]


def current_speed(key: str) -> int:
    """The speed the picker `key` shows (readable before the picker is drawn)."""
    return SPEEDS.get(st.session_state.get(key, DEFAULT), SPEEDS[DEFAULT])


def interval(speed: int) -> float:
    """Seconds between fragment reruns while playing at `speed` steps per second."""
    return max(0.25, 1.0 / speed)


def steps_due(state: dict[str, Any], speed: int) -> int:
    """Steps to advance at this tick: the time since the last tick times the speed."""
    now = time.monotonic()
    last = state.get("tick") or now - interval(speed)
    state["tick"] = now
    return max(1, min(MAX_STEPS_PER_TICK, round((now - last) * speed)))


def sync_timer(state: dict[str, Any], speed: int) -> None:
    """A fragment's timer is fixed when the whole page runs: when Play, Pause or the speed
    changed inside the fragment, rerun the whole page so the timer matches."""
    wanted = interval(speed) if state.get("playing") else None
    if state.get("timer") != wanted:
        state["timer"] = wanted
        state["tick"] = None
        st.rerun(scope="app")


def run_fragment(body: Callable[[], None], state: dict[str, Any], speed: int) -> None:
    """Run `body` as a fragment, on a timer while playing."""
    state["timer"] = interval(speed) if state.get("playing") else None
    st.fragment(run_every=state["timer"])(body)()
