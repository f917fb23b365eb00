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
import zipfile
from pathlib import Path
from typing import BinaryIO, Union

import numpy as np

from ..errors import WeightError
from ..files import check_regular
from ..graph import Graph, bf16_to_float32, file_dtype

# General-purpose flag bits a PNNX entry must not have: encrypted (0), compressed patched
# data (5), strong encryption (6). Python's zipfile cannot read them anyway.
_REFUSED_FLAGS = {0x1: "encrypted", 0x20: "compressed patched data", 0x40: "strongly encrypted"}
# More central-directory entries than this many per wanted weight (and at least this many)
# is not a PNNX .bin: each entry costs memory before anything is checked.
_ENTRIES_PER_WEIGHT = 4
_MIN_ENTRIES = 1024

BinSource = Union[str, Path, bytes]


def load_weights(graph: Graph, bin_path: BinSource, name: str | None = None) -> None:
    """Fill every `Attribute.data` of `graph` from the .bin at `bin_path` (or its bytes;
    `name` is what messages call it then)."""
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
    with fp:
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
                    raise WeightError(f"entry '{entry}' in {where} is compressed; PNNX .bin entries must be stored", **at)
                expected = attr.nbytes
                if info.file_size != expected:
                    shape = ",".join(map(str, attr.shape))
                    raise WeightError(
                        f"entry '{entry}' has {info.file_size:,} bytes, but @{key}=({shape}){attr.dtype} "
                        f"needs {expected:,}",
                        **at,
                    )
                if info.header_offset + 30 + expected > archive_size:  # 30: the local header
                    raise WeightError(
                        f"entry '{entry}' claims {expected:,} bytes at offset {info.header_offset:,}, "
                        f"past the end of {where} ({archive_size:,} bytes)",
                        **at,
                    )
                try:
                    raw = zf.read(info)
                except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError, ValueError) as e:
                    raise WeightError(f"entry '{entry}' in {where} is unreadable: {e}", **at) from None
                if len(raw) != expected:  # a truncated archive can lie in its directory
                    raise WeightError(f"entry '{entry}' is short: {len(raw):,} of {expected:,} bytes", **at)
                attr.data = _to_array(raw, attr.dtype, attr.shape)


def _to_array(raw: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """One copy into an aligned array (zip payloads are not 4-byte aligned), read-only;
    bf16 bit patterns widened to float32."""
    data = np.frombuffer(bytearray(raw), dtype=file_dtype(dtype)).reshape(shape)
    if dtype == "bf16":
        data = bf16_to_float32(data)
    data.setflags(write=False)
    return data


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
    total = int(endrec[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]
    allowed = max(_MIN_ENTRIES, _ENTRIES_PER_WEIGHT * wanted)
    if total > allowed:
        raise WeightError(f"{where} lists {total:,} entries for a model with {wanted:,} weight(s)")
