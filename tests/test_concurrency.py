"""One model served to many app sessions at once: kernels shared between threads.

The app keeps one RuntimeGraph per model for every browser session (st.cache_resource), and
Streamlit runs each session's script on a thread of its own, so the same layer objects run on
several threads at once. Work buffers are per thread (layers/windows.py); these tests check
that nothing a kernel caches lets one thread compute in another thread's buffer.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from kuiper_core.layers import winograd
from kuiper_core.layers.conv_reference import conv2d_reference
from kuiper_core.layers.winograd import WinogradConv, transform_weights
from kuiper_core.pnnx import load_graph
from kuiper_core.runtime import RuntimeGraph
from conftest import slow_cases

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"


def _conv_case(seed: int = 0) -> tuple[WinogradConv, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    kernel = WinogradConv(transform_weights(w, 2), b, 2, x.shape, (1, 1, 1, 1), np.dtype(np.float32))
    return kernel, x, w, b


def test_winograd_work_views_are_this_threads_even_when_another_thread_cached_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thread B makes its views of its own buffer in the middle of thread A's _work(), as a
    thread switch can: A still gets views of A's buffer (two attributes had let it take B's)."""
    kernel, x, w, b = _conv_case()
    seen: dict[str, object] = {}
    real_hold = winograd.hold_scratch

    def other_thread_runs_in_between(slot, dtype, holder):  # called inside A's _work()
        real_hold(slot, dtype, holder)
        if not seen:
            seen["started"] = True
            t = threading.Thread(target=lambda: seen.setdefault("b", kernel._work()))
            t.start()
            t.join()

    monkeypatch.setattr(winograd, "hold_scratch", other_thread_runs_in_between)
    mine = winograd.scratch(winograd.WORK, (sum(kernel.sizes),), kernel.dtype)
    views = kernel._work()
    arrays = [v for v in vars(views).values() if isinstance(v, np.ndarray)]
    assert arrays and all(np.shares_memory(a, mine) for a in arrays), "views of another thread's buffer"
    assert seen["b"] is not views
    y = np.empty((1, 16, 12, 12), np.float32)
    kernel.run(x, y)
    np.testing.assert_allclose(y, conv2d_reference(x, w, b, pads=(1, 1, 1, 1)), rtol=1e-4, atol=1e-4)


def test_one_winograd_kernel_on_four_threads_at_once_matches_the_reference() -> None:
    kernel, _, w, b = _conv_case()
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((1, 8, 12, 12)).astype(np.float32) for _ in range(4)]
    refs = [conv2d_reference(x, w, b, pads=(1, 1, 1, 1)) for x in xs]
    errors: list[float] = []

    def work(i: int) -> None:
        y = np.empty((1, 16, 12, 12), np.float32)
        for _ in range(200):
            kernel.run(xs[i], y)
            errors.append(float(np.abs(y - refs[i]).max()))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(errors) < 1e-4


@pytest.mark.parametrize("model", slow_cases(["digits_cnn", "unet"], {"unet"}))
def test_steps_of_one_graph_on_several_threads_see_only_their_own_input(model: str) -> None:
    """As app sessions do: each thread walks steps() on the shared graph with its own input
    and keeps its values; every operand matches the same walk run alone."""
    g = load_graph(SAMPLES / f"{model}.pnnx.param", SAMPLES / f"{model}.pnnx.bin")
    rt = RuntimeGraph.from_graph(g).build()
    shape = np.load(SAMPLES / f"{model}.input.npy").shape
    xs = [np.random.default_rng(s).standard_normal(shape).astype(np.float32) for s in range(3)]

    def walk(x: np.ndarray) -> dict[str, np.ndarray]:
        run = rt.steps(x)
        for _ in run:
            pass
        return {k: np.array(v) for k, v in run.values.items() if isinstance(v, np.ndarray)}

    alone = [walk(x) for x in xs]
    wrong: list[str] = []

    def work(i: int) -> None:
        for _ in range(15):
            got = walk(xs[i])
            wrong.extend(f"thread {i}: {k}" for k, v in alone[i].items() if not np.allclose(got[k], v, atol=1e-5))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:5]
