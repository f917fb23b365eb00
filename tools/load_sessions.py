"""N browser sessions at once on one app server: no errors, no session sees another's model,
and the server's memory goes back down when they leave (issue 27's load check).

Each session (a page of one headless Chromium, its own Streamlit session) uploads a model of
its own (a small folding model: a kilobyte of .param that folds ~16·k MB at build, k its
number, so the sessions' models differ), checks that the sidebar names its own model, visits
the Graph, Execution order and Profile pages, then leaves. The server's RSS is read before,
at the peak and after the sessions left (server.disconnectedSessionTTL lowered to 2 s).

    python tools/load_sessions.py --sessions 16
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from app_server import CHROMIUM, CHROMIUM_FLAGS, streamlit_server  # noqa: E402
from hostile import folding_model  # noqa: E402

IDLE = """() => !document.querySelector('[data-testid="stStatusWidget"]')
                && !document.querySelector('[data-testid="stSkeleton"]')"""


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _idle(page) -> None:  # type: ignore[no-untyped-def]
    await page.wait_for_timeout(300)
    await page.wait_for_function(IDLE, timeout=180_000)


async def _upload(page, label: str, name: str, data: bytes) -> None:  # type: ignore[no-untyped-def]
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    await box.locator('input[type="file"]').set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
    )
    await box.get_by_text(name).wait_for(timeout=120_000)
    await _idle(page)


async def session(browser, url: str, k: int, problems: list[str], peak: list[float], pid: int) -> None:  # type: ignore[no-untyped-def]
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(180_000)
    name = f"s{k}"
    try:
        await page.goto(url)
        await page.get_by_text("Kuiper Explorer").first.wait_for()
        await _idle(page)
        text, weights = folding_model(2 + k % 4, 1024)
        await _upload(page, "model.pnnx.param", f"{name}.pnnx.param", text.encode())
        await _upload(page, "model.pnnx.bin", f"{name}.pnnx.bin", weights)
        await page.get_by_role("button", name="Load uploaded model", exact=True).click()
        await page.get_by_text(f"Summary of {name}.pnnx.param").wait_for()
        await _idle(page)
        for slug in ("graph", "order", "profile", ""):
            if slug:
                await page.click(f'[data-testid="stSidebarNav"] a[href*="/{slug}"]')
            else:
                await page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Home / model").click()
            await _idle(page)
            sidebar = await page.locator('[data-testid="stSidebar"]').inner_text()
            if f"Model: {name}.pnnx.param" not in sidebar:
                problems.append(f"{name} on {slug or 'home'}: the sidebar says {sidebar[:120]!r}")
            errors = await page.query_selector_all('[data-testid="stException"]')
            if errors:
                problems.append(f"{name} on {slug or 'home'}: {len(errors)} exception box(es)")
            peak.append(rss_mb(pid))
    except Exception as e:  # noqa: BLE001  -- a finding
        problems.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
    finally:
        await context.close()


async def run(n: int) -> int:
    from playwright.async_api import async_playwright

    problems: list[str] = []
    with streamlit_server(timeout=120, extra_args=("--server.disconnectedSessionTTL", "2")) as url:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            warm = await browser.new_page()
            await warm.goto(url)
            await warm.get_by_text("Kuiper Explorer").first.wait_for()
            await _idle(warm)
            await warm.close()
            base = rss_mb(url.pid)
            peak: list[float] = [base]
            t0 = time.monotonic()
            await asyncio.gather(*(session(browser, url, k, problems, peak, url.pid) for k in range(n)))
            seconds = time.monotonic() - t0
            await browser.close()
        after = rss_mb(url.pid)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and after - base > 0.3 * (max(peak) - base):
            await asyncio.sleep(2)
            after = rss_mb(url.pid)
    print(f"{n} sessions in {seconds:.0f} s: server RSS {base:.0f} MB, peak {max(peak):.0f} MB, after {after:.0f} MB")
    leaked = after - base > 0.3 * max(1.0, max(peak) - base)
    if leaked:
        problems.append(f"the memory stayed: {after:.0f} MB, {base:.0f} MB before")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=16)
    args = ap.parse_args(argv)
    return asyncio.run(run(args.sessions))


if __name__ == "__main__":
    sys.exit(main())
