"""Files the engine writes (`kuiper opt`'s model and weights, `kuiper run`'s arrays), written safely.

Every output is written whole to a temporary file in its target's folder and renamed into
place only when every output of the command is complete: a full disk, a crash or a bad name
leaves the old files (and the inputs) exactly as they were, and the message names the file
that failed. Before anything is written, each target is checked: a directory, a FIFO, a
device or a socket is refused (writing into a FIFO blocks forever); a target that is one of
the command's inputs (a model's `.param`, its `.bin`, a `.kir`'s weights) is refused unless
the caller allows it (`--in-place`), because weights are read again from their file after a
build lets go of them; two outputs on one path are refused; a name the file system cannot
encode is refused; so is any file in the conversion cache (converted models are read from it).

    targets = check_targets([("-o", Path("m.opt.pnnx.param")), ...], inputs=[Path("m.pnnx.param")])
    write_files([(path, lambda f: f.write(b"...")), ...])
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

from .cache_dir import cache_root
from .errors import InputError

Writer = Callable[[BinaryIO], object]


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of an existing file, else None."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _same_file(a: Path, b: Path) -> bool:
    ia, ib = _identity(a), _identity(b)
    if ia is not None and ib is not None:
        return ia == ib  # hard links and symlinks too
    return os.path.abspath(a) == os.path.abspath(b)


def check_target(path: str | Path, what: str, inputs: Iterable[str | Path] = (), in_place: bool | None = None) -> Path:
    """`path` as a file the command may write (its symlink resolved), or an InputError that
    says why not. `what` names the option in messages ('-o', '--output'). `in_place`: True
    allows an input as the target; False refuses it and names --in-place; None (a command
    without the option) refuses it."""
    path = Path(path)
    try:
        os.fsencode(path)
    except UnicodeEncodeError as e:
        bad = str(path)[e.start : e.end].encode("unicode_escape").decode("ascii")
        raise InputError(
            f"{what} {ascii(str(path))}: the name holds {bad} at character {e.start + 1}, which no file name can hold"
        ) from None
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # write the file the link names, keep the link
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise InputError(f"{what} {path}: cannot write it ({e.strerror or e})") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{what} {path} is a directory: give a file name")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what} {path} is not a regular file (a pipe, device or socket): give a file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"{what} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path}: the folder {folder} is not writable")
    cache = _conversion_cache()
    if cache is not None and Path(os.path.realpath(folder)).is_relative_to(cache):
        raise InputError(
            f"{what} {path} is inside the conversion cache ({cache}): its files are the inputs of later "
            "opens of the same model; give a name outside it"
        )
    if not in_place:
        for source in inputs:
            if _same_file(path, Path(source)):
                offer = " (or --in-place to replace the input on purpose)" if in_place is False else ""
                raise InputError(
                    f"{what} {path} is an input of this command ({source}): writing it would destroy the input; "
                    f"give another name{offer}"
                )
    return path


def _conversion_cache() -> Path | None:
    """The folder holding converted models (formats/convert.py), resolved: `kuiper compare
    m.onnx --save CACHE/…/model.pnnx.bin` replaced the conversion's weights, and every later
    open of m.onnx failed (or, with `kuiper opt -o`, would have served another graph)."""
    try:
        return Path(os.path.realpath(cache_root() / "convert"))
    except (OSError, RuntimeError):  # no home folder
        return None


def check_targets(
    targets: Sequence[tuple[str, str | Path]], inputs: Iterable[str | Path] = (), in_place: bool | None = None
) -> list[Path]:
    """check_target for each (what, path), and no two of them the same file."""
    inputs = list(inputs)
    checked = [check_target(p, what, inputs, in_place) for what, p in targets]
    for i, a in enumerate(checked):
        for b in checked[:i]:
            if _same_file(a, b):
                raise InputError(f"two outputs would be written to {a}: give another name")
    return checked


def write_files(outputs: Sequence[tuple[Path, Writer]]) -> list[Path]:
    """Write each (path, writer) to a temporary file next to `path`, then rename them all
    into place. If any writer or the disk fails, no target is touched and the temporaries
    are removed: an InputError names the file that failed (OSError), other errors pass through."""
    staged: list[tuple[Path, str]] = []
    try:
        for path, write in outputs:
            staged.append((path, _stage(path, write)))
        for path, temp in staged:
            try:
                os.replace(temp, path)
            except OSError as e:
                raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        for _, temp in staged:
            if os.path.exists(temp):
                os.unlink(temp)
    return [path for path, _ in outputs]


def _stage(path: Path, write: Writer) -> str:
    """`write` into a new temporary file in path's folder, flushed to the disk; its name."""
    folder = str(path.parent) if str(path.parent) else "."
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name[:80]}.", suffix=".part", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, _mode_for(path))
    except BaseException as e:
        os.unlink(temp)
        if isinstance(e, OSError):
            raise InputError(f"cannot write {path}: {e.strerror or e} (nothing was changed)") from None
        raise
    return temp


def _mode_for(path: Path) -> int:
    """An existing file keeps its permissions; a new one gets a plain file's (0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it (os.umask(0) and back would give every
    other thread's files mode 0666 meanwhile, in a threaded server): Linux's /proc says it;
    elsewhere a probe file created by the OS under the umask."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        probe = os.path.join(d, "probe")
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o666))
        return 0o666 & ~stat.S_IMODE(os.stat(probe).st_mode)
