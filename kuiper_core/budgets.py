"""Budgets for reading untrusted bytes, counted *before* the work: zip archives, pickles and
the bytes a reader copies out of them.

Every reader of a file someone else wrote (a TorchScript `.pt`'s code and `data.pkl`, an
`.npz`, an ONNX model's external data, a `.bin`) goes through one of these checks first:

- a zip's entry count is read from its end-of-central-directory record, and its directory is
  walked entry by entry up to the limit, before `zipfile` builds an object per entry (a zip
  listing 1,000,000 entries cost 6-35 s and 557 MB to parse);
- a member's uncompressed size, and the sum of everything a reader copies out of one archive,
  are checked against the directory before anything is inflated (a 1 MB `.pt` whose `code/`
  member inflates to 1 GiB was read whole);
- a pickle is read only when it is small (`MAX_PICKLE_BYTES`), every global it names becomes a
  class made once per (module, name) (a 3.5 KB `data.pkl` of repeated `STACK_GLOBAL`s made a
  class each: ~1 GB), and its object graph is walked once per object (`walk_once`: a 40-byte
  cycle, or a 70-object DAG with 2^70 paths, never ends otherwise).

docs/limits.md lists every budget. The limits a caller can change (`kuiper_core.limits`)
stay there; these are fixed sizes no model this project opens comes near.
"""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .errors import KuiperError, LimitError

MiB = 1 << 20

MAX_ZIP_ENTRIES = 100_000  # entries of any zip read (a .pt, an .npz): no model has more
MAX_ZIP_DIRECTORY_BYTES = 64 * MiB  # a zip's central directory (100,000 entries of 600-byte names)
MAX_MEMBER_BYTES = 64 * MiB  # one member a reader inflates to read it (code, data.pkl, an .npy header)
MAX_COPIED_BYTES = 256 * MiB  # all the members one reader inflates from one archive, together
MAX_PICKLE_BYTES = 8 * MiB  # a data.pkl: the module tree (tensors are in data/); at most ~64 bytes
#                             of objects per byte of pickle
MAX_PICKLE_CLASSES = 10_000  # distinct (module, name) globals of one pickle
MAX_ONNX_BYTES = 2**31 - 1  # one protobuf message: an .onnx with its external data read in
MAX_PROTOBUF_FIELDS = 2_000_000  # fields walked looking for external tensors (~1 s; 12 MB of 2-byte fields took 13 s)
MAX_PROTOBUF_DEPTH = 100  # messages nested in messages: protobuf's own limit (a file it reads, the walk reads)
MAX_GLOBAL_NAME_CHARS = 1_000  # a global's module or name (a memoised 1 MB name, once per class, is 1 MB each)

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory: signature, disks, counts, size, offset
_CENTRAL = struct.Struct("<4s6H3L5H2L")  # a central-directory entry's fixed part (46 bytes)


def over(message: str, limit: str, maximum: int, value: int | None = None) -> LimitError:
    """The LimitError of one budget: what was asked, the budget's name and value."""
    return LimitError(message, limit=limit, maximum=maximum, value=value)


# -- zip archives -------------------------------------------------------------------------------------
def _end_record(fp: BinaryIO) -> tuple[int, int, int] | None:
    """(entries, directory size, directory end) from the end-of-central-directory record
    (zip64's when the record says so); None when `fp` is no zip."""
    try:
        end = zipfile._EndRecData(fp)  # type: ignore[attr-defined]  # stable since Python 2; reads zip64 too
    except (OSError, EOFError, ValueError, struct.error):
        return None
    if not end:
        return None
    entries = int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]  # zipfile's private record layout
    size = int(end[zipfile._ECD_SIZE])  # type: ignore[attr-defined]  # zipfile's private record layout
    location = int(end[zipfile._ECD_LOCATION])  # type: ignore[attr-defined]  # where the end record starts
    if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # type: ignore[attr-defined]  # zipfile's private record layout
        location -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator  # type: ignore[attr-defined]  # zipfile's private record layout
    return entries, size, location


def _directory_entries(fp: BinaryIO, size: int, end: int, most: int) -> int:
    """How many entries the central directory of `size` bytes ending at `end` holds, counted
    from the headers (the end record's count may lie), stopping past `most`."""
    start = end - size
    if start < 0:
        return 0  # a directory before the file's start: zipfile refuses it
    fp.seek(start)
    raw = fp.read(size)
    count, at = 0, 0
    while at + _CENTRAL.size <= len(raw) and count <= most:
        fields = _CENTRAL.unpack_from(raw, at)
        if fields[0] != b"PK\x01\x02":
            break
        at += _CENTRAL.size + fields[10] + fields[11] + fields[12]  # name, extra, comment
        count += 1
    return count


def check_zip_directory(source: bytes | str | Path | BinaryIO, where: str) -> None:
    """LimitError if a zip lists more than MAX_ZIP_ENTRIES entries or a directory larger than
    MAX_ZIP_DIRECTORY_BYTES, read from its end record and headers before zipfile parses it.
    Nothing is said of a file that is no zip (zipfile says so next)."""
    if isinstance(source, bytes):
        fp: BinaryIO = io.BytesIO(source)
    elif isinstance(source, (str, Path)):
        try:
            fp = open(source, "rb")
        except OSError:
            return
    else:
        fp = source
    try:
        at = fp.tell()
        end = _end_record(fp)
        if end is None:
            return
        entries, size, location = end
        if entries > MAX_ZIP_ENTRIES:
            raise over(
                f"{where} lists {entries:,} entries in its zip directory", "MAX_ZIP_ENTRIES", MAX_ZIP_ENTRIES, entries
            )
        if size > MAX_ZIP_DIRECTORY_BYTES:
            raise over(
                f"{where} has a zip directory of {size:,} bytes",
                "MAX_ZIP_DIRECTORY_BYTES",
                MAX_ZIP_DIRECTORY_BYTES,
                size,
            )
        counted = _directory_entries(fp, size, location, MAX_ZIP_ENTRIES)
        if counted > MAX_ZIP_ENTRIES:
            raise over(
                f"{where} holds more than {MAX_ZIP_ENTRIES:,} entries in its zip directory (its end record says "
                f"{entries:,})",
                "MAX_ZIP_ENTRIES",
                MAX_ZIP_ENTRIES,
                counted,
            )
        fp.seek(at)
    finally:
        if fp is not source:
            fp.close()


def open_zip(source: bytes | str | Path, where: str) -> zipfile.ZipFile:
    """A ZipFile of `source` once its directory passed check_zip_directory (LimitError
    otherwise); zipfile's own errors (BadZipFile, OSError) as they are."""
    check_zip_directory(source, where)
    return zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)


class Copied:
    """The bytes one reader inflates out of one archive, counted before each member is read:
    a member over MAX_MEMBER_BYTES, or all of them past MAX_COPIED_BYTES, is a LimitError."""

    def __init__(self, archive: zipfile.ZipFile, where: str, total: int = MAX_COPIED_BYTES) -> None:
        self.archive, self.where, self.maximum, self.total = archive, where, total, 0

    def read(self, name: str, most: int = MAX_MEMBER_BYTES) -> bytes:
        info = self.archive.getinfo(name)
        if info.file_size > most:
            raise over(
                f"{self.where}: the member {name[:200]!r} inflates to {info.file_size:,} bytes",
                "MAX_MEMBER_BYTES",
                most,
                info.file_size,
            )
        self.total += info.file_size
        if self.total > self.maximum:
            raise over(
                f"{self.where}: the members read inflate to {self.total:,} bytes together",
                "MAX_COPIED_BYTES",
                self.maximum,
                self.total,
            )
        try:
            with self.archive.open(info) as member:  # zipfile stops at the directory's size
                return member.read(info.file_size)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError, ValueError, zlib.error) as e:
            # an unknown compression, an encrypted member, a bad CRC
            raise KuiperError(f"{self.where}: the member {name[:200]!r} cannot be read ({e})") from None


def torchscript_pickle(archive: zipfile.ZipFile) -> str | None:
    """The `data.pkl` libtorch reads: in the folder of the archive's first entry (its reader
    takes every record from there), not any other folder's; None when there is none."""
    infos = archive.infolist()
    if not infos or "/" not in infos[0].filename:
        return None
    name = infos[0].filename.split("/", 1)[0] + "/data.pkl"
    try:
        archive.getinfo(name)
    except KeyError:
        return None
    return name


# -- pickles ------------------------------------------------------------------------------------------
class BoundedUnpickler(pickle.Unpickler):
    """An Unpickler over at most MAX_PICKLE_BYTES that resolves each (module, name) once
    (`resolve` decides what it becomes; the same object is returned each time it is named)
    and refuses more than MAX_PICKLE_CLASSES distinct ones. Nothing the pickle names runs
    unless `resolve` returns it."""

    def __init__(self, data: bytes, where: str, resolve: Callable[[str, str], Any]) -> None:
        if len(data) > MAX_PICKLE_BYTES:
            raise over(f"{where} is {len(data):,} bytes of pickle", "MAX_PICKLE_BYTES", MAX_PICKLE_BYTES, len(data))
        super().__init__(io.BytesIO(data))
        self._where, self._resolve = where, resolve
        self._made: dict[tuple[str, str], Any] = {}

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        if len(module) > MAX_GLOBAL_NAME_CHARS or len(name) > MAX_GLOBAL_NAME_CHARS:
            raise over(
                f"{self._where} names a class of {len(module) + len(name):,} characters",
                "MAX_GLOBAL_NAME_CHARS",
                MAX_GLOBAL_NAME_CHARS,
            )
        if key not in self._made:
            if len(self._made) >= MAX_PICKLE_CLASSES:
                raise over(
                    f"{self._where} names more than {MAX_PICKLE_CLASSES:,} classes",
                    "MAX_PICKLE_CLASSES",
                    MAX_PICKLE_CLASSES,
                )
            self._made[key] = self._resolve(module, name)
        return self._made[key]

    def persistent_load(self, pid: Any) -> None:  # tensors' storages: never read here
        return None


def load_pickle(data: bytes, where: str, resolve: Callable[[str, str], Any]) -> Any:
    """The object a pickle holds, read by BoundedUnpickler; its budgets as LimitError, any other
    failure (a truncated or refused pickle) as a KuiperError naming `where`."""
    try:
        return BoundedUnpickler(data, where, resolve).load()
    except KuiperError:
        raise
    except RecursionError:
        raise KuiperError(f"{where}: the pickle nests too deeply to read") from None
    except MemoryError:
        raise KuiperError(f"{where}: the pickle asks for more memory than this machine has") from None
    except Exception as e:  # noqa: BLE001 -- pickle raises many kinds on bad bytes
        raise KuiperError(f"{where}: not a pickle this reads ({type(e).__name__}: {str(e)[:200]})") from None


def walk_once(root: Any, children: Callable[[Any], Iterator[tuple[str, Any]]]) -> Iterator[tuple[str, Any]]:
    """(path, object) for every object reachable from `root`, each visited once whatever
    shares or cycles the graph holds (a pickle's memo makes both cheap), depth first in
    the order `children` gives."""
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield path, obj
        stack.extend(reversed([(f"{path}.{k}" if path else k, v) for k, v in children(obj)]))
