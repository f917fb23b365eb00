"""layers/parallel.py: a pass split over the helper thread gives what the whole pass gives."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from kuiper_core.layers import parallel


@pytest.fixture(autouse=True)
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "MIN_ELEMENTS", 1)
    monkeypatch.setattr(parallel, "THREADS", 2)


def test_copyto_strided_views_and_broadcast() -> None:
    rng = np.random.default_rng(0)
    src = rng.standard_normal((5, 9, 9)).astype(np.float32)
    s = src.strides
    taps = as_strided(src, (3, 3, 5, 4, 4), (s[1], s[2], s[0], 2 * s[1], 2 * s[2]))  # overlapping windows
    dst = np.empty(taps.shape, np.float32)
    parallel.copyto(dst, taps)
    np.testing.assert_array_equal(dst, taps)
    row = rng.standard_normal((1, 7)).astype(np.float32)
    out = np.empty((6, 7), np.float32)
    parallel.copyto(out, row)  # broadcast along the split axis
    np.testing.assert_array_equal(out, np.broadcast_to(row, (6, 7)))


def test_ufunc_with_broadcast_operand_and_in_place() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((1, 1, 4, 1)).astype(np.float32)
    out = np.empty_like(a)
    parallel.ufunc(np.add, a, b, out=out)
    np.testing.assert_array_equal(out, a + b)
    expected = np.maximum(a, 0)
    parallel.ufunc(np.maximum, a, np.float32(0), out=a)  # in place
    np.testing.assert_array_equal(a, expected)


def test_small_or_one_axis_passes_run_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(parallel._Helper, "run_pair", lambda *a: calls.append(a))
    out = np.empty((1, 1, 1), np.float32)
    parallel.copyto(out, np.ones((1, 1, 1), np.float32))  # no axis of length >= 2
    monkeypatch.setattr(parallel, "MIN_ELEMENTS", 1 << 20)
    parallel.copyto(np.empty(100, np.float32), np.ones(100, np.float32))
    assert calls == []


def test_errors_of_the_helpers_half_reach_the_caller() -> None:
    out = np.empty((4, 3), np.int8)
    with pytest.raises(TypeError):
        parallel.ufunc(np.add, np.ones((4, 3)), np.ones((4, 3)), out=out)  # float64 into int8: no casting
    parallel.copyto(out, np.full((4, 3), 7, np.int8))  # the helper still works afterwards
    assert (out == 7).all()


def test_concurrent_callers_share_the_helper() -> None:
    rng = np.random.default_rng(2)
    srcs = [rng.standard_normal((8, 1000)).astype(np.float32) for _ in range(4)]
    outs = [np.empty_like(s) for s in srcs]

    def work(i: int) -> None:
        for _ in range(50):
            parallel.ufunc(np.multiply, srcs[i], np.float32(2), out=outs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s, o in zip(srcs, outs):
        np.testing.assert_array_equal(o, s * 2)


def test_the_helper_keeps_no_array_after_a_pass() -> None:
    """steps() reuses memory that nothing refers to (runtime/step_arena.py): a half-pass
    must not leave the helper holding views of it."""
    import sys

    src = np.ones((8, 64), np.float32)
    dst = np.empty_like(src)
    before = sys.getrefcount(dst), sys.getrefcount(src)
    parallel.copyto(dst, src)
    helper = parallel._get_helper()
    assert helper is not None and helper._job is None
    assert (sys.getrefcount(dst), sys.getrefcount(src)) == before
