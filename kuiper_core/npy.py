"""Reading and writing `.npy` arrays given by people (the CLI's --input/--output, the app's
uploads), with every problem a KuiperError.

`read_npy` checks the header before reading any data: a 100-byte file whose header claims
a (100000, 100000) array is refused, not allocated, and so are pickled objects, structured
dtypes and anything that is not an array of numbers. `write_npy` writes exactly the path
it is given (np.save would add '.npy' to `y.out`).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from . import limits as _limits
from .budgets import open_zip
from .errors import InputError, LimitError
from .graph import format_shape
from .files import check_regular

NpySource = str | Path | bytes


def read_npy(source: NpySource, name: str | None = None, limits: _limits.Limits | None = None) -> np.ndarray:
    """The array in a .npy file (a path, or its bytes; `name` is what messages call it)."""
    if isinstance(source, (bytes, bytearray)):
        where = name or "the .npy"
        return _read(io.BytesIO(source), where, len(source), limits)
    where = name or str(source)
    size = check_regular(source, lambda why: InputError(f"{where}: {why}"))
    try:
        with open(source, "rb") as fp:
            return _read(fp, where, size, limits)
    except OSError as e:
        raise InputError(f"{where}: cannot read it ({e.strerror or e})") from None


def _read(fp: BinaryIO, where: str, size: int, limits: _limits.Limits | None) -> np.ndarray:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fp)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran_order, dtype = read_header(fp)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as e:
        raise InputError(f"{where} is not a readable .npy array file ({e})") from None
    if not isinstance(shape, tuple) or any(not isinstance(d, int) or d < 0 for d in shape):
        raise InputError(f"{where} has a malformed shape {shape!r} in its header")
    if dtype.hasobject:
        raise InputError(f"{where} holds Python objects; only arrays of numbers are read (nothing is unpickled)")
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biufc":
        raise InputError(f"{where} has dtype {dtype}: expected an array of numbers (bool, int, float or complex)")
    count = _limits.check_elements(shape, f"the array in {where}", limits)
    need = count * dtype.itemsize
    have = size - fp.tell()
    if have < need:
        raise InputError(
            f"{where}: its header says {format_shape(shape)} {dtype}, {need:,} bytes, but only {have:,} follow"
        )
    try:
        data = np.frombuffer(bytearray(fp.read(need)), dtype=dtype, count=count)
    except MemoryError as e:  # within the limits, more than this machine has free
        raise _limits.out_of_memory(e) from None
    try:
        return data.reshape(shape, order="F" if fortran_order else "C")
    except ValueError as e:  # an empty array whose other dims overflow (0, 2**62): NumPy refuses it
        raise InputError(f"{where} has a shape NumPy cannot hold {shape!r} ({e})") from None


def read_npz(data: bytes, name: str = "the .npz", limits: _limits.Limits | None = None) -> dict[str, np.ndarray]:
    """The arrays of a .npz (key -> array), each read as `read_npy` reads one. A member's
    inflated size is checked against its header before it is inflated (no zip bombs)."""
    lim = limits or _limits.current()
    most = lim.max_tensor_elements * 16 + 4096  # the biggest allowed array (complex128) and its header
    try:
        zf = open_zip(data, name)  # its entry count checked before zipfile parses the directory
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise InputError(f"{name} is not a NumPy .npz file ({e})") from None
    arrays: dict[str, np.ndarray] = {}
    with zf:
        infos = zf.infolist()
        # all members together, from the zip's directory, before any is inflated: a 2 MB .npz
        # of zeros held 2 GiB, a 25 MB one asked for 24 GiB (each member within its own limit)
        total = sum(info.file_size for info in infos)
        if total > lim.max_inflated_bytes:
            raise LimitError(
                f"{name} inflates to {total:,} bytes ({len(infos):,} members, {len(data):,} bytes compressed)",
                limit="max_inflated_bytes",
                maximum=lim.max_inflated_bytes,
                value=total,
            )
        for info in infos:
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            where = f"{name}: '{key}'"
            if key in arrays:
                raise InputError(f"{where} appears twice")
            if info.file_size > most:
                raise InputError(f"{where} inflates to {info.file_size:,} bytes, more than any allowed array")
            try:
                with zf.open(info) as member:
                    raw = member.read(info.file_size + 1)
            except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError, ValueError) as e:
                raise InputError(f"{where} is unreadable ({e})") from None
            arrays[key] = read_npy(raw, where, lim)
    return arrays


def write_npy(path: str | Path, array: np.ndarray) -> Path:
    """Write `array` to exactly `path` (no '.npy' appended), safely (output_files.py: a
    temporary file renamed into place; a directory or a FIFO refused); an InputError if it cannot."""
    from .output_files import check_target, write_files

    target = check_target(path, "the output")
    data = np.asarray(array)
    write_files([(target, lambda fp: np.save(fp, data, allow_pickle=False))])
    return Path(path)
