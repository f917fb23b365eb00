"""Each private Streamlit hook the app uses (pages/streamlit_internals.py) still finds what it
relies on in the installed Streamlit, which is the minor pyproject.toml pins (issue 36)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
import streamlit as st  # noqa: E402

from pages import streamlit_internals as SI  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_the_installed_streamlit_is_the_pinned_minor() -> None:
    pin = re.search(r'"streamlit>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin is not None and pin.group(1) == SI.TESTED_MINOR
    assert SI.version_ok(), f"Streamlit {st.__version__}: check the hooks, then move TESTED_MINOR and the pin"


def test_the_session_reaper_finds_streamlits_session_storage() -> None:
    from streamlit.runtime.memory_session_storage import MemorySessionStorage
    from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

    init = inspect.getsource(WebsocketSessionManager.__init__)
    assert "self._session_storage" in init and "self._storage_lock" in init
    storage = MemorySessionStorage(maxsize=4, ttl_seconds=0)
    assert callable(storage._cache.expire)  # what reap() calls under the manager's lock
    assert SI.session_reaper() is None  # no Runtime in a test process: the app falls back


def test_leaving_the_legacy_pages_mode_flips_streamlits_flag(monkeypatch) -> None:
    from streamlit.runtime.pages_manager import PagesManager

    monkeypatch.setattr(PagesManager, "uses_pages_directory", True)
    assert SI.leave_legacy_pages_mode() and PagesManager.uses_pages_directory is False
    assert not SI.leave_legacy_pages_mode()


def test_no_page_reaches_into_streamlit_elsewhere() -> None:
    for path in sorted((ROOT / "pages").glob("*.py")):
        if path.name == "streamlit_internals.py":
            continue
        text = path.read_text()
        assert "streamlit.runtime" not in text and "_session_mgr" not in text, path.name
