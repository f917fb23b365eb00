"""The execution policy (runtime/policy.py, docs/architecture.md "Which executor runs when"):
the caller names the executor and the BLAS thread count; what ran is public; the choice
follows from the graph, the shapes and the options alone; the BLAS count is held for each call
and restored after it; the Profile page says which executor measured."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import kuiper_core
from conftest import SAMPLES
from kuiper_core import ExecutionOptions, KuiperError, threads
from kuiper_core.runtime.policy import REQUESTS

DIGITS = SAMPLES / "digits_cnn.pnnx.param"


@pytest.mark.parametrize("bad", [{"executor": "fastest"}, {"threads": 0}, {"threads": True}, {"threads": 1.5}])
def test_bad_options_are_refused_before_the_file_is_read(bad: dict) -> None:
    with pytest.raises(KuiperError, match="executor|threads"):
        kuiper_core.load("no/such/file.pnnx.param", **bad)


def test_what_ran_is_public_and_the_same_every_call() -> None:
    x = np.load(SAMPLES / "digits_cnn.input.npy")
    want = np.load(SAMPLES / "digits_cnn.expected.npz")
    runs = {}
    for executor in ("auto", "interpreter"):
        g = kuiper_core.load(DIGITS, executor=executor)
        assert g.last_executor is None
        ys = []
        for _ in range(3):
            ys.append(g.forward(x)[0])
            assert g.last_executor == ("prepared" if executor == "auto" else "interpreter")
        assert all(np.array_equal(y, ys[0]) for y in ys)
        runs[executor] = ys[0]
        np.testing.assert_allclose(ys[0], want[want.files[0]], rtol=1e-4, atol=1e-4)  # PyTorch's output
        for _ in g.steps(x):
            pass
        assert g.last_executor in ("step arena", "interpreter steps")
    assert np.array_equal(runs["auto"], runs["interpreter"])  # the same kernels, the same bits


def test_asked_for_executors_run_auto_where_they_do_not_apply() -> None:
    """sharded needs a batch >= 2; split a 4-D batch-1 input; elsewhere the whole forward."""
    x = np.load(SAMPLES / "tiny_mlp.input.npy")
    g = kuiper_core.load(SAMPLES / "tiny_mlp.pnnx.param", executor="sharded")
    g.forward(x[:1])
    assert g.last_executor == "prepared"


@pytest.mark.parametrize(("threads_", "batch", "ran"), [(2, 4, "sharded"), (1, 4, "prepared"), (2, 1, "prepared")])
def test_auto_shards_at_two_threads_and_batch_two_or_more(threads_: int, batch: int, ran: str) -> None:
    """The rule (ExecutionOptions.shards) reads the options' thread count and the batch only;
    the sharded answer is PyTorch's and the same bits every call."""
    x = np.load(SAMPLES / "digits_cnn.input.npy")
    xs = np.concatenate([x] * batch)
    g = kuiper_core.load(DIGITS, threads=threads_)
    ys = [g.forward(xs)[0] for _ in range(3)]
    assert g.last_executor == ran
    assert all(np.array_equal(y, ys[0]) for y in ys)
    expected = np.load(SAMPLES / "digits_cnn.expected.npz")
    np.testing.assert_allclose(ys[0], np.concatenate([expected[expected.files[0]]] * batch), rtol=1e-4, atol=1e-4)


def test_the_sharding_rule_reads_only_the_options_threads_and_batch() -> None:
    auto, whole = ExecutionOptions(), ExecutionOptions("interpreter")
    assert auto.shards(2, 2) and not auto.shards(1, 8) and not auto.shards(4, 8) and not auto.shards(2, 1)
    assert ExecutionOptions("sharded").shards(1, 2) and not whole.shards(2, 4)
    assert not ExecutionOptions("prepared").shards(2, 4)  # the whole forward, asked for


def test_options_can_be_changed_and_apply_from_the_next_call() -> None:
    g = kuiper_core.load(DIGITS)
    x = np.load(SAMPLES / "digits_cnn.input.npy")
    g.forward(x)
    g.options = ExecutionOptions("interpreter", threads=1)
    assert g.options.executor == "interpreter" and g.blas_threads == 1
    g.forward(x)
    assert g.last_executor == "interpreter"
    assert set(REQUESTS) == {"auto", "prepared", "reference", "interpreter", "sharded", "split"}


@pytest.mark.skipif(not threads.blas_reachable(), reason="NumPy's OpenBLAS thread count is out of reach")
def test_each_call_holds_its_blas_count_and_restores_the_process_s() -> None:
    before = threads.blas_threads()
    seen: list[int] = []
    g = kuiper_core.load(DIGITS, threads=3 if before != 3 else 2)
    program = g.program
    assert program is not None
    layer = next(r.layer for r in program.order if r.type == "nn.Conv2d")
    forward = layer.forward

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(threads.blas_threads())
        return forward(*args, **kwargs)

    layer.forward = watched  # type: ignore[method-assign]
    g.options = ExecutionOptions("interpreter", threads=g.blas_threads)
    g.forward(np.load(SAMPLES / "digits_cnn.input.npy"))
    assert seen == [g.blas_threads]
    assert threads.blas_threads() == before


@pytest.mark.skipif(not threads.blas_reachable(), reason="NumPy's OpenBLAS thread count is out of reach")
def test_a_call_at_another_count_waits_for_the_calls_inside() -> None:
    before = threads.blas_threads()
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def holder() -> None:
        with threads.using_blas_threads(1):
            inside.set()
            release.wait(10)

    def other() -> None:
        with threads.using_blas_threads(2):
            assert threads.blas_threads() == 2
        done.set()

    a = threading.Thread(target=holder)
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=other)
    b.start()
    assert not done.wait(0.2)  # waits: the count is 1 while the first call is inside
    assert threads.blas_threads() == 1
    release.set()
    a.join()
    b.join()
    assert done.is_set()
    assert threads.blas_threads() == before


@pytest.mark.slow  # the app on one page: ~6 s
def test_the_profile_page_says_which_executor_measured() -> None:
    pytest.importorskip("streamlit")
    from apptest_helpers import PROFILE, app, no_exception

    at = app("digits_cnn")
    at.switch_page(PROFILE).run()
    no_exception(at)
    assert any("executor" in c.value and "`auto`" in c.value for c in at.caption)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_child_forked_while_another_thread_holds_a_count_is_not_blocked() -> None:
    """The holding thread does not exist in the child: its calls must not wait for it."""
    inside, release = threading.Event(), threading.Event()

    def holder() -> None:
        with threads.using_blas_threads(1):
            inside.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # a child that waits for the lease dies instead of hanging the test
        with threads.using_blas_threads(2):
            pass
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    release.set()
    t.join()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
