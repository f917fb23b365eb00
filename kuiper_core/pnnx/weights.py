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
        infos = {info.filename: info for info in zf.infolist()}
        for op, key, attr in wanted:
            entry = f"{op.name}.{key}"
            where = dict(operator=op.name, op_type=op.type)
            info = infos.get(entry)
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
                raw = zf.read(entry)
            except (zipfile.BadZipFile, OSError, EOFError) as e:
                raise WeightError(f"entry '{entry}' in {bin_path} is unreadable: {e}", **where) from None
            if len(raw) != expected:  # a truncated archive can lie in its directory
                raise WeightError(f"entry '{entry}' is short: {len(raw)} of {expected} bytes", **where)
            # One copy into an aligned, writable array (zip payloads are not 4-byte aligned).
            attr.data = np.frombuffer(bytearray(raw), dtype=dtype).reshape(attr.shape)
