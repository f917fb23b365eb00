"""Issue 27, repeatability (docs/limits.md, "Same input, same bits?"): at batch 1, and with the
BLAS at one thread, the same input gives the same bits whatever runs at the same time; at
batch >= 2 forward() may split the batch over two threads or run the halves in turn, and
OpenBLAS's one- and two-thread GEMMs round differently, so runs may differ in the last bits:
at most REPEAT_BOUND of the output's largest magnitude (measured: 2.4e-6 on ResNet-18 at 224,
batch 4, between a first forward, later ones, concurrent ones and steps())."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kuiper_core
from conftest import DATA, SAMPLES
from kuiper_core import threads

REPEAT_BOUND = 1e-5  # docs/limits.md: relative to max(1, max |y|)


def _concurrently(graph, x: np.ndarray, forwards: int = 2, steppers: int = 1) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    outs: list[np.ndarray] = []
    lock = threading.Lock()

    def forward() -> None:
        y = graph.forward(x)[0]
        with lock:
            outs.append(y)

    def steps() -> None:
        run = graph.steps(x)
        for _ in run:
            pass
        y = graph.outputs_of(run.values)[0]
        with lock:
            outs.append(y)

    workers = [threading.Thread(target=forward) for _ in range(forwards)]
    workers += [threading.Thread(target=steps) for _ in range(steppers)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return outs


def test_batch_1_gives_the_same_bits_alone_and_concurrently() -> None:
    graph = kuiper_core.load(DATA / "optlevel" / "resnet18" / "o2" / "model.pnnx.param")
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    alone = graph.forward(x)[0]
    for y in _concurrently(graph, x, forwards=3, steppers=2):
        assert np.array_equal(y, alone)


@pytest.fixture(scope="module")
def resnet_batch4() -> tuple[object, np.ndarray]:
    x1 = np.load(SAMPLES / "resnet18.input.npy")
    x = np.ascontiguousarray(np.concatenate([x1, 0.5 * x1, x1[:, ::-1], -x1], 0))
    return kuiper_core.load(SAMPLES / "resnet18.pnnx.param"), x


def test_batch_4_runs_agree_within_the_documented_bound(resnet_batch4) -> None:  # type: ignore[no-untyped-def]
    graph, x = resnet_batch4
    first = graph.forward(x)[0]  # unprepared
    runs = [graph.forward(x)[0], *_concurrently(graph, x)]
    scale = max(1.0, float(np.abs(first).max()))
    worst = max(float(np.abs(y - first).max()) for y in runs) / scale
    assert worst <= REPEAT_BOUND, f"{worst:.3g} of the output's scale"


def test_one_blas_thread_gives_the_same_bits_at_any_batch(resnet_batch4) -> None:  # type: ignore[no-untyped-def]
    _, x = resnet_batch4
    saved = threads.blas_threads()
    threads.set_blas_threads(1)
    try:
        graph = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")  # built and prepared at one thread
        first = graph.forward(x)[0]
        for y in [graph.forward(x)[0], *_concurrently(graph, x)]:
            assert np.array_equal(y, first)
    finally:
        threads.set_blas_threads(saved)
