"""forward() at batch >= 2 split by images over two threads (runtime/sharded.py): the same
numbers as each half run alone, only at >= 2 BLAS threads, never for a graph that mixes
images, errors naming their operator, concurrent forwards apart; in turn on the caller's
thread while another thread of the process runs (running_threads.py). Speed lives in bench/."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import kuiper_core
from kuiper_core import threads
from kuiper_core.errors import ModelError
from kuiper_core.runtime import running_threads, sharded
from conftest import OPS, SAMPLES, max_err_ok

pytestmark = pytest.mark.skipif(threads._blas is None, reason="NumPy's OpenBLAS thread count is out of reach")


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The BLAS at two threads, and sharding chosen wherever it is allowed (whether it pays
    is the bench's question, not the tests'), its shards always in parallel: no other thread
    seen running (the tests below that are about that check patch or restore it)."""
    monkeypatch.setattr(sharded, "MAX_SHARDED_SHARE", float("inf"))
    monkeypatch.setattr(sharded, "other_thread_running", lambda exclude=(): False)
    before = threads.blas_threads()
    threads.set_blas_threads(2)
    yield
    threads.set_blas_threads(before)


def _unet_batch(n: int) -> tuple[kuiper_core.RuntimeGraph, np.ndarray, np.ndarray]:
    param = SAMPLES / "unet.pnnx.param"
    if not param.exists():
        pytest.skip("sample model unet not exported")
    x = np.load(SAMPLES / "unet.input.npy")
    rng = np.random.default_rng(0)
    xs = np.concatenate([x] + [rng.standard_normal(x.shape).astype(np.float32) for _ in range(n - 1)])
    return kuiper_core.load(param), xs, np.load(SAMPLES / "unet.expected.npz")["out0"]


def _signature(x: np.ndarray) -> tuple:
    return ((x.shape, x.dtype.str),)


@pytest.mark.parametrize("n", [4, 3])
def test_sharded_forward_equals_each_half_run_alone(two_threads: None, n: int) -> None:
    runtime, xs, expected = _unet_batch(n)
    whole = runtime.forward(xs)[0]  # prepared whole
    second = runtime.forward(xs)[0]  # decides: sharded
    assert isinstance(runtime._sharded[_signature(xs)], sharded.ShardedForward)
    y = runtime.forward(xs)[0]
    assert threads.blas_threads() == 2  # restored
    assert np.array_equal(y, second)
    # Each shard is a whole forward of its images at one BLAS thread: the same kernels, the same
    # bits, given the same Winograd weights (transformed by a GEMM, on first use: at the whole
    # batch at two threads, as in g; at one thread its bits may differ by 1e-6).
    alone = kuiper_core.load(SAMPLES / "unet.pnnx.param")
    alone.forward(xs)
    half = (n + 1) // 2
    with threads.one_blas_thread():
        parts = [alone.forward(xs[:half])[0], alone.forward(xs[half:])[0]]
    assert np.array_equal(y, np.concatenate(parts))
    assert max_err_ok(y, whole)[0]
    assert max_err_ok(y[:1], expected)[0]  # PyTorch's output for the sample image


def test_one_blas_thread_or_one_image_runs_whole(two_threads: None) -> None:
    runtime, xs, _ = _unet_batch(4)
    threads.set_blas_threads(1)
    for _ in range(3):
        runtime.forward(xs)
    assert runtime._sharded == {}
    threads.set_blas_threads(2)
    for _ in range(3):
        runtime.forward(xs[:1])  # one image: whole, or in row bands (test_row_sharded.py), never by images
    assert not any(isinstance(v, sharded.ShardedForward) for v in runtime._sharded.values())
    runtime.forward(xs)
    runtime.forward(xs)
    assert runtime._sharded[_signature(xs)] is not None


def test_one_blas_thread_nests_and_restores() -> None:
    before = threads.blas_threads()
    threads.set_blas_threads(2)
    try:
        with threads.one_blas_thread():
            with threads.one_blas_thread():
                assert threads.blas_threads() == 1
            assert threads.blas_threads() == 1
        assert threads.blas_threads() == 2
        with pytest.raises(RuntimeError), threads.one_blas_thread():
            raise RuntimeError
        assert threads.blas_threads() == 2
    finally:
        threads.set_blas_threads(before)


def test_softmax_over_the_batch_is_never_sharded(two_threads: None) -> None:
    """Every shape stays batch-major, but each output mixes every image."""
    runtime = kuiper_core.load(OPS / "act_softmax_dim0" / "model.pnnx.param")
    x = np.random.default_rng(1).standard_normal((4, 10)).astype(np.float32)
    for _ in range(3):
        y = runtime.forward(x)[0]
    assert runtime._sharded[_signature(x)] is None
    e = np.exp(x - x.max(0))
    assert max_err_ok(y, e / e.sum(0))[0]
    whole = runtime._prepared[_signature(x)]
    assert whole is not None and whole.record is not None
    shard = kuiper_core.load(OPS / "act_softmax_dim0" / "model.pnnx.param")
    shard.forward(x[:2])
    half = shard._prepared[_signature(x[:2])]
    assert half is not None and half.record is not None
    assert not sharded.keeps_images_apart(runtime.program, whole.record.shapes, half.record.shapes, 4, 2)


def test_a_batch_reduction_fails_the_batch_major_rule() -> None:
    runtime = kuiper_core.load(SAMPLES / "unet.pnnx.param") if (SAMPLES / "unet.pnnx.param").exists() else None
    if runtime is None:
        pytest.skip("sample model unet not exported")
    _, xs, _ = _unet_batch(4)
    runtime.forward(xs)
    runtime.forward(xs[:2])
    whole, half = runtime._prepared[_signature(xs)], runtime._prepared[_signature(xs[:2])]
    assert whole is not None and half is not None and whole.record and half.record
    assert sharded.keeps_images_apart(runtime.program, whole.record.shapes, half.record.shapes, 4, 2)
    # An operand whose dim 0 does not follow the batch (as a mean over it would make).
    shapes = dict(half.record.shapes)
    name = next(iter(k for k in shapes if k not in runtime.program.run_constants and k != runtime.input_operands[0]))
    shapes[name] = ((1,) + shapes[name][0][1:], shapes[name][1])
    assert not sharded.keeps_images_apart(runtime.program, whole.record.shapes, shapes, 4, 2)


@pytest.mark.parametrize("failing", [0, 1])
def test_an_error_inside_a_shard_names_its_operator(two_threads: None, failing: int) -> None:
    runtime, xs, _ = _unet_batch(4)
    runtime.forward(xs)
    runtime.forward(xs)
    sf = runtime._sharded[_signature(xs)]
    assert sf is not None
    shard = sf.shards[failing]
    k = len(shard.calls) // 2

    def broken() -> None:
        raise ValueError("broken kernel")

    shard.calls[k] = broken
    with pytest.raises(ModelError, match="broken kernel") as info:
        runtime.forward(xs)
    assert info.value.operator == shard.names[k]
    assert threads.blas_threads() == 2


def test_concurrent_sharded_forwards_do_not_mix(two_threads: None) -> None:
    runtime, xs, _ = _unet_batch(4)
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal(xs.shape).astype(np.float32) for _ in range(4)]
    serial = [runtime.forward(b)[0].copy() for b in batches]
    serial = [runtime.forward(b)[0].copy() for b in batches]  # sharded from the second run on
    assert runtime._sharded[_signature(xs)] is not None
    with ThreadPoolExecutor(3) as pool:
        parallel = list(pool.map(lambda b: runtime.forward(b)[0], batches * 2))
    for i, y in enumerate(parallel):
        assert np.array_equal(y, serial[i % 4])
    assert threads.blas_threads() == 2


def test_a_forked_child_runs_sharded_forwards(two_threads: None) -> None:
    """The parent's worker thread does not exist in a fork: the child makes its own."""
    import multiprocessing

    runtime, xs, _ = _unet_batch(4)
    runtime.forward(xs)
    expected = runtime.forward(xs)[0]
    assert runtime._sharded[_signature(xs)] is not None

    def child() -> None:
        os._exit(0 if np.array_equal(runtime.forward(xs)[0], expected) else 1)

    p = multiprocessing.get_context("fork").Process(target=child)
    p.start()
    p.join(30)
    if p.exitcode is None:
        p.kill()
    assert p.exitcode == 0


def test_sequence_first_attention_is_never_sharded(two_threads: None, tmp_path) -> None:
    """nn.MultiheadAttention without batch_first: dim 0 is the sequence, which attention
    mixes, yet with only its attention output every shape follows dim 0. The last guard
    (sharded outputs against the whole forward's) keeps it whole; PyTorch's outputs still."""
    import shutil

    case = OPS / "attn_mha_self"
    lines = (case / "model.pnnx.param").read_text().splitlines()
    attn = next(line for line in lines if line.startswith("nn.MultiheadAttention"))
    fields = attn.split()
    fields[2:7] = ["1", "1", "0", "1"]  # one input, one output: the attention output only
    fields = [f for f in fields if not f.startswith("#2=")]
    (tmp_path / "model.pnnx.param").write_text(
        "\n".join(
            [
                "7767517",
                "3 2",
                lines[2],
                " ".join(fields),
                "pnnx.Output              pnnx_output_0            1 0 1",
                "",
            ]
        )
    )
    shutil.copy(case / "model.pnnx.bin", tmp_path / "model.pnnx.bin")
    with np.load(case / "inputs.npz") as z:
        x = z["in0"]
    with np.load(case / "expected.npz") as z:
        expected = z["out0"]
    runtime = kuiper_core.load(tmp_path / "model.pnnx.param")
    runtime.forward(x)
    whole = runtime._prepared[_signature(x)]
    assert whole is not None and whole.record is not None
    half = kuiper_core.load(tmp_path / "model.pnnx.param")
    half.forward(x[:3])
    part = half._prepared[_signature(x[:3])]
    assert part is not None and part.record is not None
    # The shape rule alone would allow it: the guard is what refuses.
    assert sharded.keeps_images_apart(runtime.program, whole.record.shapes, part.record.shapes, 5, 3)
    for _ in range(2):
        y = runtime.forward(x)[0]
    assert runtime._sharded[_signature(x)] is None
    assert max_err_ok(y, expected)[0]


# -- another thread running: the shards in turn on the caller (running_threads.py) --------------

# In turn, each shard's GEMMs run at the BLAS's two threads, in parallel at one: OpenBLAS's
# 1- and 2-thread sgemm differ in the last bits (measured: most shapes from (64, 100, 700) up;
# the UNet's outputs by 5.7e-6 of their largest magnitude, ResNet-18 b4's by 3.4e-6), so the two
# paths agree to the project's tolerance (max_err_ok: 1e-4 of it), not bit for bit. Shards in
# the wrong order or mixed images differ by far more.


def _watch_shards(sf: sharded.ShardedForward) -> list[list[tuple[int, int]]]:
    """Per shard, (thread ident, BLAS thread count) at each of its runs (its first call wrapped)."""
    seen: list[list[tuple[int, int]]] = [[] for _ in sf.shards]
    for k, shard in enumerate(sf.shards):

        def watched(first: Callable[[], Any] = shard.calls[0], log: list = seen[k]) -> Any:
            log.append((threading.get_ident(), threads.blas_threads()))
            return first()

        shard.calls[0] = watched
    return seen


@pytest.mark.parametrize("n", [4, 3])
def test_another_running_thread_runs_the_shards_in_turn(
    two_threads: None, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    runtime, xs, expected = _unet_batch(n)
    runtime.forward(xs)
    runtime.forward(xs)
    sf = runtime._sharded[_signature(xs)]
    assert sf is not None
    sf.in_turn_pays = True  # whether it does is measured at build: the test after this one
    seen = _watch_shards(sf)
    parallel = runtime.forward(xs)[0]
    me = threading.get_ident()
    assert seen[0][-1] == (me, 1) and seen[1][-1][0] != me and seen[1][-1][1] == 1
    asked: list[Any] = []
    monkeypatch.setattr(sharded, "other_thread_running", lambda exclude=(): asked.append(exclude) or True)
    # Right after a sharded forward (a loop of them): in parallel, unchecked.
    assert np.array_equal(runtime.forward(xs)[0], parallel)
    assert asked == [] and seen[1][-1][0] != me and seen[1][-1][1] == 1
    # After a pause: checked, and with another thread running both shards run on the caller's
    # thread, at the BLAS's two threads; the shard worker is never counted.
    time.sleep(2 * sharded.BACK_TO_BACK)
    in_turn = runtime.forward(xs)[0]
    assert seen[0][-1] == (me, 2) and seen[1][-1] == (me, 2)
    assert asked == [(sharded.shard_worker()[1],)]
    assert threads.blas_threads() == 2
    time.sleep(2 * sharded.BACK_TO_BACK)
    assert np.array_equal(in_turn, runtime.forward(xs)[0])  # in turn again: the same bits
    assert len(asked) == 2 and seen[1][-1] == (me, 2)
    # A loop after it: in parallel again, unchecked (OpenBLAS's pool thread spins after the
    # in-turn run's GEMMs: checked, every run of the loop would go in turn).
    runtime.forward(xs)
    assert len(asked) == 2 and seen[1][-1][0] != me and seen[1][-1][1] == 1
    assert max_err_ok(in_turn, parallel)[0]
    assert max_err_ok(in_turn[:1], expected)[0]  # PyTorch's output for the sample image


@pytest.mark.parametrize("t_sharded, pays", [(1.0, True), (1e-6, False)])
def test_in_turn_only_where_the_whole_forward_was_fast_enough(
    two_threads: None, monkeypatch: pytest.MonkeyPatch, t_sharded: float, pays: bool
) -> None:
    """MAX_IN_TURN_SHARE: the in-turn run is as fast as the whole forward (two BLAS threads);
    where that was slow against the sharded one, a thread seen running changes nothing."""
    runtime, xs, _ = _unet_batch(4)
    runtime.forward(xs)
    monkeypatch.setattr(sharded, "best_time", lambda run, inputs: (t_sharded, run(inputs)))
    runtime.forward(xs)
    sf = runtime._sharded[_signature(xs)]
    assert sf is not None and sf.in_turn_pays is pays
    seen = _watch_shards(sf)
    monkeypatch.setattr(sharded, "other_thread_running", lambda exclude=(): True)
    time.sleep(2 * sharded.BACK_TO_BACK)
    runtime.forward(xs)
    me = threading.get_ident()
    assert (seen[1][-1][0] == me) is pays


def test_back_to_back_sharded_forwards_stay_parallel(two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the real check: neither the caller nor the shard worker counts as another thread."""
    runtime, xs, _ = _unet_batch(4)
    runtime.forward(xs)
    runtime.forward(xs)
    sf = runtime._sharded[_signature(xs)]
    assert sf is not None
    seen = _watch_shards(sf)
    monkeypatch.setattr(sharded, "other_thread_running", running_threads.other_thread_running)
    time.sleep(0.5)  # OpenBLAS's pool thread stops spinning after the whole forward's GEMMs (~0.1 s)
    for _ in range(4):
        runtime.forward(xs)
    me = threading.get_ident()
    assert all(t == me for t, _ in seen[0]) and not any(t == me for t, _ in seen[1])
    assert {c for log in seen for _, c in log} == {1}


def _poll(check: Callable[[], bool], seconds: float = 3.0) -> bool:
    """Whether `check` held at least once within `seconds` (states change by the microsecond)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.001)
    return False


def test_a_busy_thread_is_seen_running_the_caller_is_not() -> None:
    if not os.path.isdir(running_threads.TASKS):
        pytest.skip("no /proc/self/task")
    stop = threading.Event()
    tid: list[int] = []

    def busy() -> None:  # NumPy loops let go of the GIL: the thread stays on its core
        tid.append(threading.get_native_id())
        a = np.ones(1 << 21, np.float32)
        while not stop.is_set():
            np.multiply(a, 1.0001, out=a)

    t = threading.Thread(target=busy)
    t.start()
    try:
        assert _poll(running_threads.other_thread_running)
        assert _poll(lambda: not running_threads.other_thread_running(exclude=tid))
    finally:
        stop.set()
        t.join()
    assert _poll(lambda: not running_threads.other_thread_running())  # the caller itself runs


def test_openblas_pool_thread_spins_after_a_two_thread_gemm() -> None:
    """The trap itself: right after a two-thread GEMM, OpenBLAS's pool thread is on a core."""
    if not os.path.isdir(running_threads.TASKS):
        pytest.skip("no /proc/self/task")
    before = threads.blas_threads()
    threads.set_blas_threads(2)
    try:
        a = np.ones((512, 1024), np.float32)
        assert _poll(lambda: not running_threads.other_thread_running())
        a @ a.T
        assert running_threads.other_thread_running()
    finally:
        threads.set_blas_threads(before)


def test_no_proc_sees_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(running_threads, "TASKS", "/nonexistent/task")
    assert running_threads.other_thread_running() is False


def test_a_split_that_fails_leaves_the_forward_whole(two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Halves whose outputs cannot be put back together (a bare ValueError from concatenate)
    must not reach the caller: the whole forward just ran on the same inputs."""
    runtime, xs, expected = _unet_batch(2)
    runtime.forward(xs)

    def fails(self, inputs):
        raise ValueError("all the input array dimensions except for the concatenation axis must match")

    monkeypatch.setattr(sharded.ShardedForward, "run_in_parallel", fails)
    y = runtime.forward(xs)[0]  # the second forward tries the split
    assert runtime._sharded[_signature(xs)] is None
    assert max_err_ok(y[:1], expected)[0]
    assert max_err_ok(runtime.forward(xs)[0][:1], expected)[0]
