"""Where Kuiper keeps what it made for later runs (the converter's results: formats/convert.py).
A leaf, so that output_files.py can refuse to write into it without importing the formats."""

from __future__ import annotations

import os
import stat
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


def trusted_folder(path: Path, make: bool = True) -> bool:
    """Whether `path` is a real folder (no symlink) of this user that no one else may write
    (not others, nor a group other than the user's own),
    made (0700) when missing and `make`: a shared or planted KUIPER_CACHE is not read from
    (another user could leave a converted model there for this one to load) nor written to."""
    if make:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if os.name != "posix":  # no owners or mode bits to check
        return stat.S_ISDIR(info.st_mode)
    # group-writable is fine for the user's own group (a umask of 002 with user private groups)
    others_write = info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != os.getegid())
    return stat.S_ISDIR(info.st_mode) and not others_write and info.st_uid == os.geteuid()
