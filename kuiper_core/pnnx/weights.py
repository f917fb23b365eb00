"""Reader of the PNNX `.bin`: a store-only zip (zip64 in current pnnx) of entries
`opname.attrname`, each the raw little-endian row-major bytes of one weight.

Only stored, unencrypted entries are accepted, every size is checked against the archive
before anything is read, and nothing is ever unpickled. Entry names are unique except
where pnnx itself repeats them (optlevel 0: see `_entries`). Loaded
weights are read-only: layers and callers share them (a pnnx.Attribute's output *is*
its weight), so writing into one must fail rather than change later runs.
"""

from __future__ import annotations

import io
import mmap
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import WeightError
from ..files import check_regular
from ..graph import Graph, bf16_to_float32, file_dtype, format_shape

# General-purpose flag bits a PNNX entry must not have: encrypted (0), compressed patched
# data (5), strong encryption (6). Python's zipfile cannot read them anyway.
_REFUSED_FLAGS = {0x1: "encrypted", 0x20: "compressed patched data", 0x40: "strongly encrypted"}
# More central-directory entries than this many per wanted weight (and at least this many)
# is not a PNNX .bin: each entry costs memory before anything is checked.
_ENTRIES_PER_WEIGHT = 4
_MIN_ENTRIES = 1024

BinSource = str | Path | bytes


def load_weights(graph: Graph, bin_path: BinSource, name: str | None = None, *, lazy: bool = False) -> None:
    """Fill every `Attribute.data` of `graph` from the .bin at `bin_path` (or its bytes;
    `name` is what messages call it then).

    `lazy`, from a file: every entry is checked now (its place, size and CRC-32, over a
    read-only mapping of the file) but no array is made: each weight is read when first asked
    for (Attribute.defer; a layer's kernel reads it when it is made), so loading a model costs
    no copy of its weights (ResNet-18: 45 MB). From bytes (an upload) they are always read."""
    wanted = [(op, key, attr) for op in graph.operators for key, attr in op.attrs.items()]
    if not wanted:
        return  # a weightless model needs no .bin
    if isinstance(bin_path, (bytes, bytearray)):
        where = name or "the .bin"
        fp: BinaryIO = io.BytesIO(bin_path)
    else:
        where = name or str(bin_path)

        def unreadable(why: str) -> WeightError:
            if why == "no such file":
                return WeightError(f"weights file {where} not found (the model has {len(wanted)} weight(s))")
            return WeightError(f"cannot read weights file {where}: {why}")

        check_regular(bin_path, unreadable)  # a FIFO would block, /dev/zero never end
        try:
            fp = open(bin_path, "rb")
        except OSError as e:
            raise unreadable(e.strerror or str(e)) from None
    with fp, _mapping(fp if lazy else None) as mapped:
        archive_size = fp.seek(0, io.SEEK_END)
        fp.seek(0)
        _check_entry_count(fp, where, len(wanted))
        try:
            zf = zipfile.ZipFile(fp)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
            raise WeightError(f"{where} is not a PNNX .bin (a store-only zip): {e}") from None
        with zf:
            infos = _entries(zf, where, [f"{op.name}.{key}" for op, key, _ in wanted])
            for op, key, attr in wanted:
                entry = f"{op.name}.{key}"
                at = dict(operator=op.name, op_type=op.type)
                info = infos[entry].pop(0) if infos.get(entry) else None
                if info is None:
                    raise WeightError(f"weight '@{key}' has no entry '{entry}' in {where}", **at)
                if info.compress_type != zipfile.ZIP_STORED:
                    raise WeightError(
                        f"entry '{entry}' in {where} is compressed; PNNX .bin entries must be stored", **at
                    )
                expected = attr.nbytes
                if info.file_size != expected:
                    raise WeightError(
                        f"entry '{entry}' has {info.file_size:,} bytes, but @{key}={format_shape(attr.shape, attr.dtype)} "
                        f"needs {expected:,}",
                        **at,
                    )
                if info.header_offset + 30 + expected > archive_size:  # 30: the local header
                    raise WeightError(
                        f"entry '{entry}' claims {expected:,} bytes at offset {info.header_offset:,}, "
                        f"past the end of {where} ({archive_size:,} bytes)",
                        **at,
                    )
                offset = _data_offset(fp, info, where, at)
                try:
                    if mapped is not None:  # a file: checked now, read when first used
                        _check_crc(mapped, offset, expected, info.CRC)
                        data = None
                    else:
                        data = _read_array(fp, offset, expected, info.CRC, attr.dtype, tuple(attr.shape))
                except _Unreadable as e:
                    raise WeightError(f"entry '{entry}' in {where} {e}", **at) from None
                source = None
                if not isinstance(bin_path, (bytes, bytearray)):
                    # absolute: a later working directory must not change which file is read
                    source = BinEntry(
                        Path(bin_path).absolute(),
                        entry,
                        offset,
                        expected,
                        info.CRC,
                        attr.dtype,
                        tuple(attr.shape),
                        op.name,
                        op.type,
                    )
                if data is not None:
                    attr.load(data, source)
                else:  # mapped: a file, so there is a source to read it from when first used
                    assert source is not None
                    attr.defer(source)


@contextmanager
def _mapping(fp: BinaryIO | None) -> Iterator[mmap.mmap | None]:
    """A read-only mapping of an open .bin file (None: no file, bytes, or not mappable)."""
    try:
        mapped: mmap.mmap | None = None if fp is None else mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, io.UnsupportedOperation):
        mapped = None
    try:
        yield mapped
    finally:
        if mapped is not None:
            mapped.close()


def _check_crc(mapped: mmap.mmap, offset: int, size: int, crc: int) -> None:
    if offset + size > len(mapped):  # a truncated archive can lie in its directory
        raise _Unreadable(f"is short: {max(0, len(mapped) - offset):,} of {size:,} bytes")
    with memoryview(mapped) as view:
        if zlib.crc32(view[offset : offset + size]) != crc:
            raise _Unreadable("does not match its CRC-32: the bytes are not what was written")


class _Unreadable(Exception):
    """Why an entry's bytes are not its weight (the caller says which entry)."""


# Weights from this size get pages of their own (an anonymous mmap), given back to the
# system as soon as the array goes: malloc would keep freed blocks in its heap, and raise
# its mmap threshold past every later allocation below the largest block it freed
# (ResNet-18 at batch 1 kept 50 MiB of freed weights resident that way).
OWN_PAGES_MIN_BYTES = 1 << 16


def _read_array(fp: BinaryIO, offset: int, size: int, crc: int, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The weight at `offset`: read straight into an aligned buffer of its own, checked
    against the archive's CRC-32, read-only; bf16 bit patterns widened to float32."""
    buf: mmap.mmap | bytearray = mmap.mmap(-1, size) if size >= OWN_PAGES_MIN_BYTES else bytearray(size)
    fp.seek(offset)
    try:
        got = fp.readinto(buf)  # type: ignore[attr-defined]  # typing.BinaryIO lacks it; real binary files have it
    except OSError as e:
        raise _Unreadable(f"is unreadable: {e.strerror or e}") from None
    if got != size:  # a truncated archive can lie in its directory
        raise _Unreadable(f"is short: {got:,} of {size:,} bytes")
    if zlib.crc32(buf) != crc:
        raise _Unreadable("does not match its CRC-32: the bytes are not what was written")
    # An array made on the buffer is its views' base: a layer's view keeps it alive, so the
    # attribute's weak reference sees the memory in use (a reshape would be a view itself).
    data = np.ndarray(shape, file_dtype(dtype), buffer=buf)
    if dtype == "bf16":
        data = bf16_to_float32(data).copy()  # the copy owns its memory (not a view of u4 bits)
    data.setflags(write=False)
    return data


@dataclass(frozen=True)
class BinEntry:
    """Where a weight's bytes lie in its .bin, to read them again after the runtime let go
    of them (Attribute.release). The CRC-32 from load time tells a changed file."""

    path: Path
    entry: str
    offset: int  # of the data, past the local header
    size: int
    crc: int
    dtype: str
    shape: tuple[int, ...]
    operator: str
    op_type: str

    def read(self) -> np.ndarray:
        def changed(why: str) -> WeightError:
            return WeightError(
                f"weight '{self.entry}' is read from {self.path} when it is used (checked at load), "
                f"but {why}; load the model again",
                operator=self.operator,
                op_type=self.op_type,
            )

        try:
            check_regular(self.path, lambda why: changed(f"it cannot be read ({why})"))
            with open(self.path, "rb") as f:
                return _read_array(f, self.offset, self.size, self.crc, self.dtype, self.shape)
        except OSError as e:
            raise changed(f"it cannot be read ({e.strerror or e})") from None
        except _Unreadable:
            raise changed("the file has changed since it was loaded") from None


def _data_offset(fp: BinaryIO, info: zipfile.ZipInfo, where: str, at: dict[str, str]) -> int:
    """Where an entry's data starts: past its local header, whose name and extra field may
    differ in length from the central directory's; its name must be the directory's (as
    zipfile checks: otherwise the entry is not what the directory says it is)."""
    fp.seek(info.header_offset)
    header = fp.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise WeightError(
            f"entry '{info.filename}' in {where} has no local header at offset {info.header_offset:,}", **at
        )
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    name = fp.read(name_len)
    expected = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437", errors="replace")
    if name != expected:
        raise WeightError(f"entry '{info.filename}' in {where}: its local header names {name!r}", **at)
    return info.header_offset + 30 + name_len + extra_len


def _entries(zf: zipfile.ZipFile, where: str, wanted: list[str]) -> dict[str, list[zipfile.ZipInfo]]:
    """Entry name -> its entries in archive order; refuses what would let one entry shadow
    another or hide its bytes.

    At optlevel 0 pnnx repeats operator names (a module called three times) and its .bin
    then repeats entry names: it writes one entry per operator and weight in operator order,
    so the k-th entry of a name belongs to the k-th operator of that name (pnnx's own reader
    keeps only the last one). A repeated name is accepted only when the graph wants it
    exactly as many times; otherwise which entry is which weight is unknowable.
    """
    infos: dict[str, list[zipfile.ZipInfo]] = {}
    for info in zf.infolist():
        name = info.filename
        if info.orig_filename != name:  # zipfile cuts a name at NUL: 'w\0.txt' would read as 'w'
            raise WeightError(f"{where}: entry name {info.orig_filename!r} contains a NUL byte")
        for bit, what in _REFUSED_FLAGS.items():
            if info.flag_bits & bit:
                raise WeightError(f"{where}: entry '{name}' is {what}; PNNX .bin entries are plain stored data")
        infos.setdefault(name, []).append(info)
    counts: dict[str, int] = {}
    for name in wanted:
        counts[name] = counts.get(name, 0) + 1
    for name, found in infos.items():
        if len(found) > 1 and len(found) != counts.get(name, 0):
            raise WeightError(
                f"{where}: entry '{name}' appears {len(found)} times, but {counts.get(name, 0)} weight(s) of the "
                "graph have that name (which one is the weight?)"
            )
    return infos


def _check_entry_count(fp: BinaryIO, where: str, wanted: int) -> None:
    """Refuse a central directory with far more entries than weights before zipfile reads
    it (a 200 MB upload of 46-byte entries would cost gigabytes of ZipInfo objects)."""
    try:
        endrec = zipfile._EndRecData(fp)  # type: ignore[attr-defined]  # stable since Python 2
    except (OSError, EOFError, ValueError, AttributeError):
        endrec = None
    finally:
        fp.seek(0)
    if not endrec:
        return  # not a zip: ZipFile says so next
    total = int(endrec[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]  # private, as _EndRecData
    allowed = max(_MIN_ENTRIES, _ENTRIES_PER_WEIGHT * wanted)
    if total > allowed:
        raise WeightError(f"{where} lists {total:,} entries for a model with {wanted:,} weight(s)")
