"""Where Kuiper keeps what it made for later runs (the converter's results: formats/convert.py).
A leaf, so that output_files.py can refuse to write into it without importing the formats."""

from __future__ import annotations

import os
from pathlib import Path

ENV_CACHE = "KUIPER_CACHE"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """`cache_dir`, else $KUIPER_CACHE, else $XDG_CACHE_HOME/kuiper (~/.cache/kuiper)."""
    if cache_dir is not None:
        return Path(cache_dir)
    named = os.environ.get(ENV_CACHE)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kuiper"
