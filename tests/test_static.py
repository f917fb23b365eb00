"""Static checks run by the README's test command: ruff's lint and format, and mypy's type check
of the engine (configs in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return [found]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    r = subprocess.run([*_ruff(), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


@pytest.mark.slow
def test_mypy() -> None:
    """mypy over kuiper_core with pyproject.toml's [tool.mypy] (files, options, the optional
    frameworks read as Any): no error, and no `# type: ignore` that is unused or names no code.
    Cold about 10 s of CPU, a few with the .mypy_cache a previous run left."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    """`# type: ignore[code]  # why` only: mypy checks the code (ignore-without-code, unused
    ignores); the reason is for the reader."""
    bare = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "kuiper_core").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line and not re.search(r"type: ignore\[[\w, -]+\]\s+#\s*\S", line)
    ]
    assert not bare, "\n".join(bare)
