"""Issue 27, total memory budgets: a small upload cannot cost gigabytes.

- an .npz's members are summed (from the zip's directory, before anything is inflated)
  against max_inflated_bytes: a 2 MB .npz of zeros held 2 GiB, a 25 MB one asked for 24 GiB
  and raised a raw MemoryError;
- the values a model folds at build (and FoldConstants computes) are summed against
  max_folded_bytes: a 1.4 KB .param and a 114-byte .bin folded to 2 GB resident;
- a MemoryError no check foresaw is a LimitError, never a crash of the page.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from hostile import folding_model, write_model
import kuiper_core
from kuiper_core import limits
from kuiper_core.errors import LimitError
from kuiper_core.npy import read_npz
from kuiper_core.passes import optimize
from kuiper_core.passes.manager import PassError
from kuiper_core.pnnx import load_graph_bytes
from kuiper_core.runtime import RuntimeGraph


def _zeros_npz(members: int, shape: tuple[int, ...]) -> bytes:
    """An .npz of `members` arrays of zeros, deflated: megabytes that inflate to gigabytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    nbytes = int(np.prod(shape)) * 4
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            info = zipfile.ZipInfo(f"a{i}.npy")
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as f:
                f.write(header.getvalue())
                left = nbytes
                while left:
                    f.write(bytes(min(left, 1 << 20)))
                    left -= min(left, 1 << 20)
    return buf.getvalue()


def test_npz_members_are_summed_before_any_is_inflated() -> None:
    data = _zeros_npz(24, (256, 1024))  # 24 MiB inflated, 24 KiB on the wire
    assert len(data) < 200_000
    small = limits.DEFAULT.replace(max_inflated_bytes=16 << 20)
    with pytest.raises(LimitError) as info:
        read_npz(data, "refs.npz", small)
    e = info.value
    assert e.limit == "max_inflated_bytes" and e.value == 24 * (1 << 20) + 24 * 128, e
    assert "refs.npz inflates to" in str(e) and "24 members" in str(e)
    assert len(read_npz(data, "refs.npz", limits.DEFAULT.replace(max_inflated_bytes=32 << 20))) == 24


def test_the_app_caps_what_an_npz_inflates_to() -> None:
    pytest.importorskip("streamlit")
    from pages.common import APP_LIMITS

    assert APP_LIMITS.max_inflated_bytes <= 512 << 20 < limits.DEFAULT.max_inflated_bytes


def test_an_allocation_that_fails_is_a_limit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within every limit, more than the machine has free: a LimitError, not a MemoryError."""
    import kuiper_core.npy as npy

    real = npy.np.frombuffer

    def no_memory(*args: object, **kwargs: object) -> np.ndarray:
        raise MemoryError("Unable to allocate 24.0 GiB")

    data = _zeros_npz(1, (4, 1024))
    monkeypatch.setattr(npy.np, "frombuffer", no_memory)
    with pytest.raises(LimitError, match="ran out of memory"):
        read_npz(data, "refs.npz")
    monkeypatch.setattr(npy.np, "frombuffer", real)


def test_folded_constants_have_a_total_budget_at_build() -> None:
    """Before: no total (max_planned_bytes does not count folded values): the issue's 1.4 KB
    .param with a 114-byte .bin was 2 GB resident and stayed in the model cache. Here the same
    shape at 1 MiB a value: the fold that crosses the budget is named."""
    text, weights = folding_model(8, 512)
    assert len(text) < 2000 and len(weights) < 200
    with limits.use(max_folded_bytes=(5 << 20) + 1024):
        graph = load_graph_bytes(text.encode(), weights)
        with pytest.raises(LimitError) as info:
            RuntimeGraph.from_graph(graph).build()
        e = info.value
        assert e.limit == "max_folded_bytes" and e.operator == "s5", e  # v0..v5: 6 MiB > 5 MiB
        assert "the values folded at build" in str(e)
        with pytest.raises(PassError, match=r"FoldConstants computes .* \(limit max_folded_bytes"):  # the Passes page
            optimize(graph, 2)
    with limits.use(max_folded_bytes=9 << 20):
        y = RuntimeGraph.from_graph(load_graph_bytes(text.encode(), weights)).build().forward(np.float32([1]))[0]
        assert y.shape == (512, 512) and float(y[0, 0]) == 1 + 1 + 7


def test_the_app_folds_at_most_its_budget() -> None:
    pytest.importorskip("streamlit")
    from pages.common import APP_LIMITS

    assert APP_LIMITS.max_folded_bytes <= 512 << 20
    assert APP_LIMITS.max_model_cache_bytes <= 2 << 30


# -- the app's model cache: bytes, not a count; released with the sessions ----------------------
@pytest.mark.slow
def test_model_cache_is_bounded_in_bytes_least_recently_used_first() -> None:
    from kuiper_core.explore.model_cache import ModelCache

    cache: ModelCache[bytes] = ModelCache(lambda: 100)
    for key in "abc":
        cache.get(key, lambda: bytes(40), len)
    assert cache.keys() == ["b", "c"] and cache.total_bytes == 80  # a went: 120 > 100
    cache.get("b", lambda: b"rebuilt", len)  # b is now the most recent
    cache.get("d", lambda: bytes(40), len)
    assert cache.keys() == ["b", "d"]
    cache.get("huge", lambda: bytes(500), len)  # over the budget alone: kept for the session asking
    assert cache.keys() == ["huge"]


def test_model_cache_builds_once_for_sessions_asking_at_once() -> None:
    import threading
    import time

    from kuiper_core.explore.model_cache import ModelCache

    cache: ModelCache[object] = ModelCache(lambda: 1 << 30)
    builds = []

    def make() -> object:
        builds.append(1)
        time.sleep(0.2)
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("k", make, lambda _: 1))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len({id(g) for g in got}) == 1


@pytest.mark.slow
def test_a_model_goes_when_the_last_session_holding_it_ends() -> None:
    import gc

    from kuiper_core.explore.model_cache import ModelCache

    class Session:
        pass

    cache: ModelCache[bytes] = ModelCache(lambda: 1 << 30)
    one, two = Session(), Session()
    cache.get("m", lambda: bytes(10), len)
    cache.hold(one, "m")
    cache.hold(two, "m")
    cache.get("other", lambda: bytes(10), len)
    cache.hold(two, "other")
    del one
    gc.collect()
    assert cache.keys() == ["m", "other"]  # the second session still uses both
    del two
    gc.collect()
    assert cache.keys() == []


def test_a_step_by_step_run_keeps_at_most_max_planned_bytes(tmp_path):
    """steps() keeps every operand for the Forward page and the references: 14 ReLUs of
    (1, 2^26) after an `expand` of one number (a 3-line-per-operator .param, no .bin) kept
    3.6 GB under the app's limits, where forward() reuses two buffers. Views own nothing new:
    the expand itself is not counted."""
    n, big = 14, 1 << 20
    lines = [
        "pnnx.Input in 0 1 x #x=(1,1)f32",
        f"Tensor.expand ex 1 1 x y0 sizes=(1,{big}) #x=(1,1)f32 #y0=(1,{big})f32",
    ]
    lines += [f"F.relu r{i} 1 1 y{i} y{i + 1} #y{i}=(1,{big})f32 #y{i + 1}=(1,{big})f32" for i in range(n)]
    lines.append(f"pnnx.Output out 1 0 y{n}")
    path = write_model(tmp_path, lines)
    x = np.ones((1, 1), np.float32)
    with limits.use(max_planned_bytes=10 * 4 * big):  # room for 10 of the 14 outputs
        graph = kuiper_core.load(str(path))
        assert graph.forward(x)[0].shape == (1, big)
        with pytest.raises(LimitError, match="max_planned_bytes") as e:
            for _ in graph.steps(x):
                pass
        assert "'r9'" in str(e.value)  # the input's 4 bytes and 10 outputs: just over
    with limits.use(max_planned_bytes=14 * 4 * big + 64):
        graph = kuiper_core.load(str(path))
        for _ in graph.steps(x):
            pass
