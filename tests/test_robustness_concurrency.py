"""Repeatability (docs/limits.md, "Same input, same bits?"): on one graph the same input gives
the same bits whatever runs at the same time, at any batch (the executor and the BLAS thread
count follow from the graph's options alone: runtime/policy.py); between executors and
thread counts, OpenBLAS's one- and two-thread GEMMs round differently: at most REPEAT_BOUND of
the output's largest magnitude (measured: 2.4e-6 on ResNet-18 at 224, batch 4)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kuiper_core
from conftest import DATA, SAMPLES
from kuiper_core import threads
from kuiper_core.runtime.policy import split_refusal

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
    # the whole forward, whose steps() give its bits ("auto" shards at two threads: its own test)
    return kuiper_core.load(SAMPLES / "resnet18.pnnx.param", executor="prepared"), x


@pytest.mark.slow
def test_batch_4_gives_the_same_bits_alone_and_concurrently(resnet_batch4) -> None:  # type: ignore[no-untyped-def]
    """With graphs of another thread count and the sharded executor running at the same time:
    each call holds its own count (kuiper_core/threads.py)."""
    graph, x = resnet_batch4
    first = graph.forward(x)[0]  # the prepared forward's binding run
    if not threads.blas_reachable():
        runs = [graph.forward(x)[0], *_concurrently(graph, x)]
    else:
        others = [
            kuiper_core.load(SAMPLES / "resnet18.pnnx.param", threads=3 - graph.blas_threads),
            kuiper_core.load(SAMPLES / "resnet18.pnnx.param", executor="sharded"),
        ]
        busy = [threading.Thread(target=lambda g=g: [g.forward(x) for _ in range(2)]) for g in others]
        for t in busy:
            t.start()
        runs = [graph.forward(x)[0], *_concurrently(graph, x)]
        for t in busy:
            t.join()
    for y in runs:
        assert np.array_equal(y, first)


@pytest.mark.slow
def test_auto_at_batch_4_gives_the_same_bits_alone_and_concurrently(resnet_batch4) -> None:  # type: ignore[no-untyped-def]
    """ "auto" at two threads shards (policy.py): its forwards keep their bits beside each other
    and beside a whole forward at another thread count."""
    _, x = resnet_batch4
    graph = kuiper_core.load(SAMPLES / "resnet18.pnnx.param", threads=2)
    first = graph.forward(x)[0]
    assert graph.last_executor == "sharded"
    other = kuiper_core.load(SAMPLES / "resnet18.pnnx.param", threads=1)
    busy = threading.Thread(target=lambda: [other.forward(x) for _ in range(2)])
    busy.start()
    runs = _concurrently(graph, x, forwards=3, steppers=0)
    busy.join()
    for y in runs:
        assert np.array_equal(y, first)


@pytest.mark.slow
def test_executors_and_thread_counts_agree_within_the_documented_bound(resnet_batch4) -> None:  # type: ignore[no-untyped-def]
    _, x = resnet_batch4
    param = SAMPLES / "resnet18.pnnx.param"
    outputs = [kuiper_core.load(param, threads=n).forward(x)[0] for n in (1, 2)]
    outputs.append(kuiper_core.load(param, executor="sharded").forward(x)[0])
    if split_refusal() is None:
        outputs.append(kuiper_core.load(param, executor="split").forward(x[:1])[0])
    first = outputs[0]
    scale = max(1.0, float(np.abs(first).max()))
    worst = max(float(np.abs(y - first[: len(y)]).max()) for y in outputs) / scale
    assert worst <= REPEAT_BOUND, f"{worst:.3g} of the output's scale"
