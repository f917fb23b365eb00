"""What one app process does for all its sessions, outside any page: memory upkeep.

Streamlit's default `runner.postScriptGC` ran a full `gc.collect(2)` after every script run,
walking every session's objects on every click (40 % of the server's time with a class on
it: docs/classroom_server.md); .streamlit/config.toml turns it off. Instead one thread, every
COLLECT_SECONDS:
- lets Streamlit drop the sessions whose browsers left more than `server.disconnectedSessionTTL`
  ago: it keeps them for a reconnect and reaps them only when another session disconnects,
  so after a class the last students' tensors stayed until the next visitor;
- runs the cyclic collector: a session's objects (and its Forward stepper's tensors) are
  freed through reference cycles of Streamlit's session objects.
So a class's memory comes back within TTL + COLLECT_SECONDS after the students leave.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import streamlit as st

COLLECT_SECONDS = 20.0


def _reap_disconnected_sessions() -> None:
    """Ask Streamlit's event loop to drop expired disconnected sessions. Reaches into its
    runtime (no public API for this): any difference in a later Streamlit version only means
    they are reaped at the next disconnect, as before."""
    try:
        from streamlit.runtime import Runtime

        runtime: Any = Runtime.instance()
        cache = runtime._session_mgr._session_storage._cache
        loop = runtime._get_async_objs().eventloop
    except Exception:
        return
    if callable(getattr(cache, "expire", None)):
        loop.call_soon_threadsafe(cache.expire)  # the storage belongs to the event loop's thread


@st.cache_resource(show_spinner=False)
def start_upkeep(period: float = COLLECT_SECONDS) -> threading.Thread:
    """The process's upkeep thread (started once: st.cache_resource is per process)."""

    def loop() -> None:
        stop = threading.Event()
        while not stop.wait(period):
            _reap_disconnected_sessions()
            stop.wait(1.0)  # the event loop reaps in the meantime
            gc.collect()

    thread = threading.Thread(target=loop, name="kuiper-upkeep", daemon=True)
    thread.start()
    return thread
