"""N browser sessions at once on one app server: no errors, no session sees another's model,
and the server's memory does not grow from round to round (issue 27's load check).

Each session (a page of one headless Chromium, its own Streamlit session) uploads a model of
its own (a small folding model: a kilobyte of .param that folds ~16·k MB at build, k its
number, so the sessions' models differ), checks that the sidebar names its own model, visits
the Graph, Execution order and Profile pages, then leaves. The server's RSS is read before,
at the peak and after the sessions left (server.disconnectedSessionTTL lowered to 2 s), for
each of `--rounds` rounds on the same server.

    python tools/load_sessions.py --sessions 16 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
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
    """Give the uploader one file; again if a rerun replaced the widget as the file was given
    (under load the status widget may show after the idle check)."""
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    for attempt in range(3):
        await box.locator('input[type="file"]').set_input_files(
            files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
        )
        try:
            await box.get_by_text(name).wait_for(timeout=60_000)
            break
        except Exception:  # noqa: BLE001
            if attempt == 2:
                raise
            await _idle(page)
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
        for attempt in range(3):  # a click during a rerun may be dropped by the browser's page
            await page.get_by_role("button", name="Load uploaded model", exact=True).click()
            try:
                await page.get_by_text(f"Summary of {name}.pnnx.param").wait_for(timeout=90_000)
                break
            except Exception:  # noqa: BLE001
                if attempt == 2 or await page.query_selector_all('[data-testid="stException"]'):
                    raise
                await _idle(page)
        await _idle(page)
        for slug in ("graph", "order", "profile", ""):
            if slug:
                await page.click(f'[data-testid="stSidebarNav"] a[href*="/{slug}"]')
            else:
                await page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Home / model").click()
            await _idle(page)
            sidebar = await page.locator('[data-testid="stSidebar"]').inner_text()
            if f"Model: {name}.pnnx.param" not in sidebar:
                said = [line for line in sidebar.splitlines() if "odel" in line] or [sidebar[-200:]]
                problems.append(f"{name} on {slug or 'home'}: the sidebar says {' | '.join(said)[:300]!r}")
            errors = await page.query_selector_all('[data-testid="stException"]')
            if errors:
                problems.append(f"{name} on {slug or 'home'}: {len(errors)} exception box(es)")
            peak.append(rss_mb(pid))
    except Exception as e:  # noqa: BLE001  -- a finding
        problems.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
        try:
            shot = Path(tempfile.gettempdir()) / f"kx_load_{name}.png"
            await page.screenshot(path=str(shot), full_page=True)
            main = await page.locator('[data-testid="stMain"]').inner_text()
            problems.append(f"{name}: the page says {main[:300]!r} (screenshot {shot})")
        except Exception:  # noqa: BLE001
            pass
    finally:
        await context.close()


LEAK_MB = 40  # growth from the first round's end to the last's that counts as a leak


async def run(n: int, rounds: int) -> int:
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
            afters = []
            for round_ in range(rounds):
                peak: list[float] = [rss_mb(url.pid)]
                t0 = time.monotonic()
                await asyncio.gather(*(session(browser, url, k, problems, peak, url.pid) for k in range(n)))
                seconds = time.monotonic() - t0
                await asyncio.sleep(20)  # server.disconnectedSessionTTL (2 s) and the reaper (every 10 s)
                afters.append(rss_mb(url.pid))
                print(
                    f"round {round_ + 1}: {n} sessions in {seconds:.0f} s: server RSS {base:.0f} MB before, "
                    f"peak {max(peak):.0f} MB, {afters[-1]:.0f} MB after they left",
                    flush=True,
                )
            await browser.close()
    # Memory a round leaves (Streamlit's and the pages' caches, the heap) is reused by the next:
    # a leak is what keeps growing from round to round.
    if rounds > 1 and afters[-1] - afters[0] > LEAK_MB:
        problems.append(f"the memory grew from round to round: {' -> '.join(f'{a:.0f}' for a in afters)} MB")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2, help="the sessions again on the same server (a leak grows)")
    args = ap.parse_args(argv)
    return asyncio.run(run(args.sessions, args.rounds))


if __name__ == "__main__":
    sys.exit(main())
