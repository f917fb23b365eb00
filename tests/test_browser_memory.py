"""Issue 27, a real server: a session's uploaded model is released when its browser leaves.

Before: the live server went from 2.2 to 4.3 GB on small uploads and stayed there minutes
after the browser closed (a count-bounded model cache kept 8 uploads of any size, and
Streamlit keeps a closed browser's session state until another session disconnects).
After: the model's memory (here ~150 MB folded at build from a 2 KB upload) is handed back
within seconds of the session's end (server.disconnectedSessionTTL, set to 2 s here).
"""

from __future__ import annotations

import time

import pytest

from app_server import browser_missing, chromium_page, streamlit_server, wait_idle
from hostile import folding_model

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(900),
    pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or ""),
]


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _upload(page, label: str, name: str, data: bytes) -> None:
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    box.locator('input[type="file"]').set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
    )
    box.get_by_text(name).wait_for()
    wait_idle(page)


def test_a_closed_session_gives_its_model_memory_back() -> None:
    text, weights = folding_model(8, 2048)
    param = text.encode()
    assert len(param) < 3000 and len(weights) < 200
    with streamlit_server(timeout=120, extra_args=("--server.disconnectedSessionTTL", "2")) as url:
        with chromium_page() as page:
            page.goto(url)
            page.get_by_text("Kuiper Explorer").first.wait_for()
            wait_idle(page)
            base = _rss_mb(url.pid)
            _upload(page, "model.pnnx.param", "bomb.pnnx.param", param)
            _upload(page, "model.pnnx.bin", "bomb.pnnx.bin", weights)
            page.get_by_role("button", name="Load uploaded model", exact=True).click()
            page.get_by_text("Summary of bomb.pnnx.param").wait_for(timeout=120_000)
            wait_idle(page)
            loaded = _rss_mb(url.pid)
        grown = loaded - base
        assert grown > 100, f"the model should hold ~150 MB: {base:.0f} -> {loaded:.0f} MB"
        deadline = time.monotonic() + 90
        now = loaded
        while time.monotonic() < deadline:
            time.sleep(2)
            now = _rss_mb(url.pid)
            if now - base < 0.3 * grown:
                break
        assert now - base < 0.3 * grown, f"RSS {base:.0f} -> {loaded:.0f} -> {now:.0f} MB after the browser left"
