"""Every use of Streamlit's private internals, in one place, each checked (issue 36).

The app pins Streamlit to the minor it was tested with (pyproject.toml: TESTED_MINOR);
tests/test_streamlit_internals.py checks each hook below against the installed Streamlit.
On another version `version_ok()` is False and each hook falls back to Streamlit's own
behaviour (never an error page):

- `session_reaper()`: drop the disconnected sessions whose TTL ran out (Streamlit reaps them
  only when another session disconnects: pages/server.py's upkeep thread calls it);
- `leave_legacy_pages_mode()`: route a first deep link through app.py's st.navigation
  (Streamlit treats a `pages/` folder as its legacy multipage layout until then).

Stepping no longer needs any (pages/step_controls.py: a plain component state value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

TESTED_MINOR = "1.67"


def version_ok() -> bool:
    """Whether the installed Streamlit is the minor these hooks were tested on."""
    return ".".join(st.__version__.split(".")[:2]) == TESTED_MINOR


def session_reaper() -> Callable[[], list[Any]] | None:
    """A function that drops Streamlit's expired disconnected sessions and returns them as
    (id, SessionInfo) pairs, or None (not under a server: AppTest; another Streamlit)."""
    if not version_ok():
        return None
    try:
        from streamlit.runtime import Runtime

        manager: Any = Runtime.instance()._session_mgr
        storage, lock = manager._session_storage, manager._storage_lock
        storage._cache.expire  # noqa: B018  -- the API this relies on
    except Exception:  # noqa: BLE001
        return None

    def reap() -> list[Any]:
        # under the manager's lock: a session being resumed is read then deleted under it
        # (reaping between the two wiped a live session's state: a KeyError on its page)
        with lock:
            return list(storage._cache.expire())

    return reap


def leave_legacy_pages_mode() -> bool:
    """Switch Streamlit out of its legacy `pages/` mode; True when it was in it (the caller
    then reruns, so the request goes through app.py's st.navigation)."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the legacy mode
        return False
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        return True
    return False
