"""The classroom deployment: the load bench's client and checks on a real app server, and the
nginx site file (deploy/nginx.conf) as the bench runs it. Timings are the bench's business
(bench/bench_load.py, docs/classroom_server.md): these tests check behaviour only."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def _bench():
    if importlib.util.find_spec("websockets") is None:
        pytest.skip("websockets is not installed (it comes with Streamlit's server)")
    sys.path.insert(0, str(BENCH))
    import bench_load

    return bench_load


def test_nginx_site_file_passes_nginx_t(tmp_path: Path) -> None:
    if NGINX is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light)")
    bench_load = _bench()
    conf = tmp_path / "nginx.conf"
    conf.write_text(bench_load.nginx_main_conf(str(tmp_path), "127.0.0.1:1", ["127.0.0.1:2", "127.0.0.1:3"]))
    text = conf.read_text()
    assert "server 127.0.0.1:2;" in text and "server 127.0.0.1:3;" in text and "server 127.0.0.1:8501;" not in text
    r = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_splice_replaces_only_its_own_block(tmp_path: Path) -> None:
    bench_load = _bench()
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nhand-written\n")
    bench_load.splice(page, "load-1", "first")
    bench_load.splice(page, "load-2", "other")
    bench_load.splice(page, "load-1", "second")
    text = page.read_text()
    assert text.startswith("# Title\n\nhand-written\n") and "first" not in text
    assert text.count("second") == 1 and text.count("other") == 1


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2], ids=["one-process", "behind-nginx"])
def test_a_few_students_at_once_each_see_only_their_own_state(processes: int, tmp_path: Path) -> None:
    """Three sessions on the app (Home, seeded input, Forward steps, Execution order) through the
    bench's websocket client: every page shows its own session's position, seed and values,
    and pictures fetched over HTTP reach the process that drew them (through nginx: sticky)."""
    if processes > 1 and NGINX is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light)")
    bench_load = _bench()
    from app_server import free_port

    out = tmp_path / "load.json"
    # Two Steps a page: each student reaches Execution order within ~8 actions, even on a busy machine.
    args = ["--sessions", "3", "--duration", "30", "--ramp", "2", "--settle", "1", "--probe-actions", "2"]
    args += ["--interval", "1", "--steps-per-page", "2", "--processes", str(processes), "--port", str(free_port())]
    args += ["--out", "-"]
    assert bench_load.main([*args, "--json", str(out), "--max-seconds", "400"]) == 0
    res = json.loads(out.read_text())
    assert res["leaks"] == [] and res["errors"] == []
    steps = res["phases"]["3 sessions, Forward: Step"]["actions"] + res["phases"]["one session, before"]["actions"]
    assert steps >= 5 and res["media_fetched"] >= 5 and res["media_failed"] == 0
    assert res["phases"]["3 sessions, Order: Step"]["actions"] >= 1
