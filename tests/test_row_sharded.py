"""forward() at batch 1 with the convolutional prefix in two row bands on two threads
(runtime/row_sharded.py): PyTorch's numbers within the usual tolerance, only at >= 2 BLAS
threads, the whole forward while another thread runs, errors naming their operator, the
band geometry (halo, offsets, rows read from padding). Every bundled model and export with
the bands forced on is compared with the interpreter in test_executors.py. Speed lives in
bench/ (bench_bands.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import kuiper_core
from kuiper_core import threads
from kuiper_core.errors import ModelError
from kuiper_core.runtime import row_sharded, sharded, split_forward
from kuiper_core.runtime.row_sharded import Prefix, Rows, Window, band_rows, segment
from conftest import SAMPLES, max_err_ok

pytestmark = pytest.mark.skipif(threads._blas is None, reason="NumPy's OpenBLAS thread count is out of reach")


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The BLAS at two threads; bands chosen wherever the graph has them (whether they pay is
    the bench's question), always in parallel (no other thread seen running); never the split
    forward tried before them."""
    monkeypatch.setattr(row_sharded, "MAX_BANDED_SHARE", float("inf"))
    monkeypatch.setattr(row_sharded, "WHOLE_GAIN", 1e-6)  # every cost left whole outweighs the bands
    monkeypatch.setattr(row_sharded, "other_thread_running", lambda exclude=(): False)
    monkeypatch.setattr(split_forward, "MAX_SPLIT_SHARE", 0.0)  # tried first (test_halves.py): never here
    before = threads.blas_threads()
    threads.set_blas_threads(2)
    yield
    threads.set_blas_threads(before)


def _sample(name: str) -> tuple[kuiper_core.RuntimeGraph, np.ndarray, np.ndarray]:
    param = SAMPLES / f"{name}.pnnx.param"
    if not param.exists():
        pytest.skip(f"sample model {name} not exported")
    expected = np.load(SAMPLES / f"{name}.expected.npz")
    return kuiper_core.load(param), np.load(SAMPLES / f"{name}.input.npy"), expected[expected.files[0]]


def _signature(x: np.ndarray) -> tuple:
    return ((x.shape, x.dtype.str),)


@pytest.mark.parametrize("name", ["unet", "yolov5s_mini"])
def test_banded_forward_gives_pytorchs_outputs(two_threads: None, name: str) -> None:
    runtime, x, expected = _sample(name)
    whole = runtime.forward(x)[0]  # prepared
    second = runtime.forward(x)[0]  # decides; the whole forward's outputs
    banded = runtime._sharded[_signature(x)]
    assert isinstance(banded, row_sharded.RowShardedForward)
    assert np.array_equal(whole, second)
    for _ in range(2):
        y = runtime.forward(x)[0]
        assert threads.blas_threads() == 2  # restored after the bands
        assert max_err_ok(y, whole)[0]
        assert max_err_ok(y, expected)[0]  # PyTorch's output


def test_one_blas_thread_runs_whole(two_threads: None) -> None:
    runtime, x, _ = _sample("unet")
    threads.set_blas_threads(1)
    for _ in range(3):
        runtime.forward(x)
    assert runtime._sharded == {}


def test_another_running_thread_runs_the_whole_forward(two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, x, _ = _sample("unet")
    runtime.forward(x)
    runtime.forward(x)
    banded = runtime._sharded[_signature(x)]
    assert isinstance(banded, row_sharded.RowShardedForward)
    calls: list[str] = []
    monkeypatch.setattr(banded, "run_in_parallel", lambda inputs: calls.append("bands") or [])
    monkeypatch.setattr(banded.whole, "run", lambda inputs: calls.append("whole") or [])
    monkeypatch.setattr(row_sharded, "other_thread_running", lambda exclude=(): True)
    banded._last_end = 0.0
    runtime.forward(x)
    assert calls == ["whole"]
    runtime.forward(x)  # back to back: no look at other threads
    assert calls == ["whole", "bands"]


@pytest.mark.parametrize("band", [0, 1])
def test_an_error_inside_a_band_names_its_operator(two_threads: None, band: int) -> None:
    runtime, x, _ = _sample("unet")
    runtime.forward(x)
    runtime.forward(x)
    banded = runtime._sharded[_signature(x)]
    assert isinstance(banded, row_sharded.RowShardedForward)
    forward = banded.bands[0][band]
    k = len(forward.calls) // 2

    def broken() -> None:
        raise ValueError("broken kernel")

    forward.calls[k] = broken
    with pytest.raises(ModelError, match="broken kernel") as info:
        runtime.forward(x)
    assert info.value.operator == forward.names[k]
    assert threads.blas_threads() == 2


def _chain(windows: list[Window | None]) -> Prefix:
    """A chain of operators: the input, then each window (None: elementwise)."""
    n = len(windows)
    return Prefix(
        ops=tuple([None] * (n + 1)),
        windows=(None, *windows),
        row_cost=tuple([1.0] * (n + 1)),
        reads=((), *((str(k),) for k in range(n))),
        outputs=tuple(str(k) for k in range(n + 1)),
        input_operand="0",
    )


def _reference_correct(windows: list[Window], height: int, lo: int, hi: int) -> set[int]:
    """The output rows a band computes as the whole image does, by brute force: rows that
    depend only on input rows inside [lo, hi) or on the image's own padding."""
    inside = [lo <= r < hi for r in range(height)]
    for w in windows:
        n = (height + w.pt + w.pb - w.k) // w.s + 1
        inside = [
            all(0 > r or r >= height or inside[r] for r in range(j * w.s - w.pt, j * w.s - w.pt + w.k))
            for j in range(n)
        ]
        height = n
    return {j for j, ok in enumerate(inside) if ok}


@pytest.mark.parametrize(
    "windows",
    [
        [Window(3, 1, 1, 1)] * 3,
        [Window(7, 2, 3, 3), Window(3, 2, 1, 1), Window(3, 1, 1, 1)],
        [Window(5, 1, 2, 2), Window(1, 2, 0, 0), Window(5, 1, 4, 0)],  # 'same' and asymmetric padding
        [Window(3, 2, 0, 0), Window(2, 2, 0, 0)],
    ],
)
def test_band_rows_are_the_rows_the_whole_image_gives(windows: list[Window]) -> None:
    height = 40
    prefix = _chain(list(windows))
    stop = len(windows)
    for lo, hi in [(0, 17), (8, 40), (8, 24), (0, 40), (16, 32)]:
        rows = band_rows(prefix, 0, stop, height, lo, hi)
        if rows is None:
            continue  # an offset a stride does not divide: such a band is never chosen
        last: Rows = rows[-1]
        start, end = last.correct()
        claimed = set(range(start, end))
        assert claimed <= _reference_correct(list(windows), height, lo, hi), (lo, hi, last)


def test_segment_covers_the_cut_and_recomputes_only_a_halo() -> None:
    prefix = _chain([Window(7, 2, 3, 3), Window(3, 2, 1, 1), Window(3, 1, 1, 1), Window(3, 1, 1, 1)])
    seg = segment(prefix, 0, 4, 224, 56)
    assert seg is not None
    (lo0, hi0), (lo1, hi1) = seg.inputs
    assert lo0 == 0 and hi1 == 224 and lo1 < hi0  # they overlap: the halo
    assert hi0 - lo1 < 40  # a halo, not the whole image
    for k, (lo, hi) in enumerate(seg.inputs):
        rows = band_rows(prefix, 0, 4, 224, lo, hi)
        assert rows is not None
        start, end = rows[-1].correct()
        want = (0, seg.split) if k == 0 else (seg.split, seg.rows)
        assert start <= want[0] and end >= want[1]


def test_row_sharded_is_imported_only_when_needed() -> None:
    """`import kuiper_core` stays light (first load): the module comes with the first batch-1
    forward at two threads."""
    import subprocess
    import sys

    code = "import sys, kuiper_core; print('kuiper_core.runtime.row_sharded' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert sharded.BACK_TO_BACK > 0  # the shared worker's policy module is the batch one
