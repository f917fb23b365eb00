"""Reader of the PNNX `.bin`: a store-only zip (zip64 in current pnnx) of entries
`opname.attrname`, each the raw little-endian row-major bytes of one weight.

Only stored entries are accepted and nothing is ever unpickled.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ..errors import WeightError
from ..graph import Graph, numpy_dtype


def load_weights(graph: Graph, bin_path: str | Path) -> None:
    """Fill every `Attribute.data` of `graph` from the .bin at `bin_path`."""
    wanted = [(op, key, attr) for op in graph.operators for key, attr in op.attrs.items()]
    if not wanted:
        return  # a weightless model needs no .bin
    bin_path = Path(bin_path)
    try:
        zf = zipfile.ZipFile(bin_path)
    except FileNotFoundError:
        raise WeightError(f"weights file {bin_path} not found (the model has {len(wanted)} weight(s))") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise WeightError(f"{bin_path} is not a PNNX .bin (a store-only zip): {e}") from None
    with zf:
        infos = _entries_in_order(zf, [f"{op.name}.{key}" for op, key, _ in wanted], bin_path)
        for op, key, attr in wanted:
            entry = f"{op.name}.{key}"
            where = dict(operator=op.name, op_type=op.type)
            info = infos[entry].pop(0) if infos.get(entry) else None
            if info is None:
                raise WeightError(f"weight '@{key}' has no entry '{entry}' in {bin_path}", **where)
            if info.compress_type != zipfile.ZIP_STORED:
                raise WeightError(
                    f"entry '{entry}' in {bin_path} is compressed; PNNX .bin entries must be stored", **where
                )
            dtype = numpy_dtype(attr.dtype)
            expected = attr.nbytes
            if info.file_size != expected:
                shape = ",".join(map(str, attr.shape))
                raise WeightError(
                    f"entry '{entry}' has {info.file_size} bytes, but @{key}=({shape}){attr.dtype} "
                    f"needs {expected}",
                    **where,
                )
            try:
                raw = zf.read(info)
            except (zipfile.BadZipFile, OSError, EOFError) as e:
                raise WeightError(f"entry '{entry}' in {bin_path} is unreadable: {e}", **where) from None
            if len(raw) != expected:  # a truncated archive can lie in its directory
                raise WeightError(f"entry '{entry}' is short: {len(raw)} of {expected} bytes", **where)
            # One copy into an aligned, writable array (zip payloads are not 4-byte aligned).
            attr.data = np.frombuffer(bytearray(raw), dtype=dtype).reshape(attr.shape)


def _entries_in_order(zf: zipfile.ZipFile, wanted: list[str], bin_path: Path) -> dict[str, list[zipfile.ZipInfo]]:
    """Entry name -> its entries in archive order.

    At optlevel 0 pnnx repeats operator names (a module called three times), and its .bin
    then repeats entry names: pnnx writes one entry per operator and weight, in operator
    order, so the k-th entry of a name belongs to the k-th operator of that name. (pnnx's
    own reader keeps only the last one.) A repeated entry is accepted only when the graph
    wants that name exactly as many times; otherwise which one is meant is unknowable.
    """
    infos: dict[str, list[zipfile.ZipInfo]] = {}
    for info in zf.infolist():
        infos.setdefault(info.filename, []).append(info)
    counts: dict[str, int] = {}
    for name in wanted:
        counts[name] = counts.get(name, 0) + 1
    for name, found in infos.items():
        if len(found) > 1 and len(found) != counts.get(name, 0):
            raise WeightError(
                f"entry '{name}' appears {len(found)} times in {bin_path}, but {counts.get(name, 0)} operator "
                "weight(s) have that name: cannot tell which is which"
            )
    return infos
