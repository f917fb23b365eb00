"""Helpers for hostile-input tests: write small .param/.bin pairs by hand.

p = write_model(tmp_path, ["pnnx.Input in 0 1 x #x=(1,3)f32", "pnnx.Output out 1 0 x"])
p = write_model(tmp_path, lines, {"lin.weight": w.tobytes()})
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path


def param_text(lines: list[str], counts: tuple[int, int] | None = None) -> str:
    """A .param with the magic line and line 2's counts computed from `lines`."""
    if counts is None:
        operands: set[str] = set()
        for line in lines:
            t = line.split()
            n = int(t[2]) + int(t[3])
            operands.update(t[4 : 4 + n])
        counts = (len(lines), len(operands))
    return "7767517\n" + f"{counts[0]} {counts[1]}\n" + "\n".join(lines) + "\n"


def write_bin(path: Path, entries: dict[str, bytes] | list[tuple[object, bytes]]) -> Path:
    """A store-only zip; entries are (name or ZipInfo, bytes) so tests can set odd flags."""
    items = entries.items() if isinstance(entries, dict) else entries
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in items:
            zf.writestr(name, data)  # type: ignore[arg-type]
    return path


def write_model(
    tmp_path: Path,
    lines: list[str],
    weights: dict[str, bytes] | list[tuple[object, bytes]] | None = None,
    name: str = "m",
    counts: tuple[int, int] | None = None,
) -> Path:
    param = tmp_path / f"{name}.pnnx.param"
    param.write_text(param_text(lines, counts))
    if weights is not None:
        write_bin(tmp_path / f"{name}.pnnx.bin", weights)
    return param


def patch_zip(data: bytes, *, flags: int = 0, rename: tuple[bytes, bytes] | None = None) -> bytes:
    """A zip's bytes with general-purpose flag bits OR-ed into every entry, or a name's bytes
    replaced in place (same length): what Python's writer will not produce (it resets flags
    and cuts names at NUL)."""
    out = bytearray(data)
    if rename is not None:
        old, new = rename
        assert len(old) == len(new) and out.count(old) == 2  # the local header and the directory
        out = bytearray(bytes(out).replace(old, new))
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        pos = out.find(sig)
        while pos >= 0:
            value = int.from_bytes(out[pos + at : pos + at + 2], "little") | flags
            out[pos + at : pos + at + 2] = value.to_bytes(2, "little")
            pos = out.find(sig, pos + 4)
    return bytes(out)


def folding_model(n: int, side: int) -> tuple[str, bytes]:
    """A .param and its .bin (a 4-byte weight) whose every value depends only on the weight:
    the weight expanded to side×side, then n-1 elementwise steps, so n·side²·4 bytes fold at
    build from a file of a kilobyte (issue 27's 1.4 KB .param that folded to 2 GB)."""
    shape = f"({side},{side})f32"
    lines = [
        "pnnx.Input i 0 1 x #x=(1)f32",
        "pnnx.Attribute w 0 1 w0 @data=(1,1)f32 #w0=(1,1)f32",
        f"Tensor.expand e 1 1 w0 v0 sizes=({side},{side}) #w0=(1,1)f32 #v0={shape}",
    ]
    lines += [
        f"pnnx.Expression s{k} 1 1 v{k - 1} v{k} expr=add(@0,1.0) #v{k - 1}={shape} #v{k}={shape}" for k in range(1, n)
    ]
    lines += [
        f"pnnx.Expression r 2 1 x v{n - 1} y expr=add(@0,@1) #x=(1)f32 #v{n - 1}={shape} #y={shape}",
        "pnnx.Output o 1 0 y",
    ]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("w.data", struct.pack("<f", 1.0))
    return param_text(lines), buf.getvalue()
