"""Hostile files through the paths added with own models (issue 27, third round): a
TorchScript upload's data.pkl read for its first layer's shape, conversions, lazy weights."""

from __future__ import annotations

import io
import struct
import threading
import tracemalloc
import zipfile

from kuiper_core.explore import model_files as F


def _archive(pkl: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("m/data.pkl", pkl)
        z.writestr("m/code/__torch__.py", "x")
        z.writestr("m/constants.pkl", b"")
    return buf.getvalue()


def _in_time(fn, seconds: float = 10.0):  # type: ignore[no-untyped-def]
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return result[0]


def test_a_data_pkl_module_held_twice_in_a_cycle_is_walked_once():
    """`M.state = {a: M, b: M}` in 60 bytes: the first-layer walk took 2^64 steps (a server
    thread spinning forever on the Home page's shape guess)."""
    pkl = b"\x80\x02c__torch__\nM\n)\x81q\x00}(X\x01\x00\x00\x00ah\x00X\x01\x00\x00\x00bh\x00ub."
    assert _in_time(lambda: F.guess_inputshape(_archive(pkl))) == F.DEFAULT_SHAPE


def test_a_data_pkl_cannot_amplify_memory_through_calls():
    """One 100,000-character string given to 200 `build_intlist` calls took 160 MB from a
    100 KB upload (and any amount from a bigger one): calls no longer copy their argument."""
    big = b"a" * 100_000
    pkl = b"\x80\x02ctorch.jit._pickle\nbuild_intlist\nq\x00X" + struct.pack("<I", len(big)) + big + b"q\x010]"
    pkl += b"h\x00h\x01\x85Ra" * 200 + b"."
    tracemalloc.start()
    try:
        assert F.guess_inputshape(_archive(pkl)) == F.DEFAULT_SHAPE
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, peak
