"""kuiper_core.explore.stepper: Forward step by step, checked against PyTorch's outputs."""

from __future__ import annotations

import numpy as np

import kuiper_core
from conftest import OPS, max_err_ok
from kuiper_core.explore.stepper import ForwardStepper

CASE = OPS / "rnn_lstm_proj"


def _load():
    g = kuiper_core.load(CASE / "model.pnnx.param")
    with np.load(CASE / "inputs.npz") as z:
        x = [z["in0"]]
    with np.load(CASE / "expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    return g, x, expected


def _check_outputs(s: ForwardStepper, expected) -> None:
    ys = s.outputs()
    assert ys is not None and len(ys) == len(expected)
    for y, ref in zip(ys, expected):
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"err {err} > {bound}"


def test_step_back_and_forward_again_reuses_results() -> None:
    g, x, expected = _load()
    s = ForwardStepper(g, x)
    assert s.current is None and s.next_name == g.order[0].name
    first = s.step()
    assert first is not None and first.name == g.order[0].name and s.cursor == 0
    second = s.step()
    assert second is not None and second.name == g.order[1].name
    s.back()
    assert s.current is first and len(s.events) == 2
    assert s.step() is second  # not recomputed
    s.back()
    s.back()
    s.back()
    assert s.cursor == -1 and s.current is None
    s.run_all()
    assert s.done and s.cursor == len(g.order) - 1 and s.step() is None
    _check_outputs(s, expected)


def test_run_to_an_operator_and_progress() -> None:
    g, x, expected = _load()
    s = ForwardStepper(g, x)
    seen = []
    ev = s.run_to("rnn", progress=lambda i, n: seen.append((i, n)))
    assert ev is not None and ev.name == "rnn" and ev.type == "nn.LSTM"
    assert seen[-1] == (g.order.index(g.operators["rnn"]) + 1, len(g.order))
    assert set(ev.outputs) == {"1", "2", "3"}
    s.run_to(g.order[0].name)  # backwards: only the view moves
    assert s.cursor == 0 and len(s.events) == len(seen)
    s.run_all()
    _check_outputs(s, expected)


def test_lost_or_closed_generator_is_recreated_and_fast_forwarded() -> None:
    g, x, expected = _load()
    s = ForwardStepper(g, x)
    s.step()
    s.step()
    s._gen.close()  # what an interrupted rerun leaves behind
    s.step()
    assert [e.name for e in s.events] == [r.name for r in g.order[:3]]
    s._gen = None  # lost entirely
    s.run_all()
    _check_outputs(s, expected)


def test_two_steppers_on_one_cached_graph_do_not_share_values() -> None:
    g, x, expected = _load()
    a, b = ForwardStepper(g, x), ForwardStepper(g, [np.zeros_like(x[0])])
    a.step()
    b.run_all()
    a.run_all()
    _check_outputs(a, expected)
    assert not np.allclose(b.outputs()[0], a.outputs()[0])


def test_bad_input_stops_with_the_engine_message() -> None:
    g, x, _ = _load()
    s = ForwardStepper(g, [np.zeros((5, 2, 7), np.float32)])
    assert s.step() is None
    assert s.error is not None and "dim 2 must be 10" in s.error
    assert s.done
    s.reset()
    assert s.error is None and s.events == []


def test_run_ahead_runs_on_without_moving_the_view() -> None:
    """run_ahead (Forward's frames for the next steps): the view stays, the run goes on until
    the end or the time is up; then stepping shows what was run, and the outputs are right."""
    g, x, expected = _load()
    s = ForwardStepper(g, x)
    s.step()
    s.run_ahead(0.0)  # no time: nothing more
    assert len(s.events) == 1 and s.cursor == 0
    s.run_ahead(60.0)
    assert len(s.events) == s.total and s.cursor == 0 and s.current is s.events[0]
    s.go_to(s.total)
    assert s.cursor == s.total - 1
    _check_outputs(s, expected)
