"""What one app process does for all its sessions, outside any page: memory upkeep.

Streamlit's default `runner.postScriptGC` ran a full `gc.collect(2)` after every script run,
walking every session's objects on every click (40 % of the server's time with a class on
it: docs/classroom_server.md); .streamlit/config.toml turns it off. Instead one thread, every
COLLECT_SECONDS:
- lets Streamlit drop the sessions whose browsers left more than `server.disconnectedSessionTTL`
  ago: it keeps them for a reconnect and reaps them only when another session disconnects,
  so after a class the last students' tensors stayed until the next visitor;
- runs the cyclic collector and returns freed heap pages to the system: a session's objects (and its Forward stepper's tensors) are
  freed through reference cycles of Streamlit's session objects.
So a class's memory comes back within TTL + COLLECT_SECONDS after the students leave.
"""

from __future__ import annotations

import threading

import streamlit as st

from kuiper_core.explore.model_cache import give_back_memory
from pages.streamlit_internals import session_reaper

COLLECT_SECONDS = 10.0


@st.cache_resource(show_spinner=False)
def start_upkeep(period: float = COLLECT_SECONDS) -> threading.Thread | None:
    """The process's upkeep thread (started once: st.cache_resource is per process)."""
    reap = session_reaper()  # (None: Streamlit reaps at the next disconnect, as it does)

    def loop() -> None:
        stop = threading.Event()
        while not stop.wait(period):
            try:
                removed = reap() if reap is not None else []
            except Exception:  # noqa: BLE001  -- Streamlit changed under us: collect only
                removed = []
            for _, info in removed:
                # Streamlit's runtime loop may still hold the last session it flushed (a loop
                # variable): empty the state itself, it will never run again.
                info.session.session_state.clear()
            removed.clear()
            give_back_memory()  # a session's objects are freed through reference cycles

    thread = threading.Thread(target=loop, name="kuiper-upkeep", daemon=True)
    thread.start()
    return thread
