"""steps()' arenas (runtime/step_arena.py): the flat step run against the per-operator path,
and the rule that no run ever writes memory that anything still holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kuiper_core
from kuiper_core import RuntimeGraph
from kuiper_core.errors import ModelError
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.runtime.step_arena import MAX_ARENAS, StepValues

from conftest import SAMPLES, slow_cases

CASES = ["tiny_mlp", "digits_cnn", "expr_zoo", "mobilenetv3", "unet"]


def _load(name: str) -> tuple[RuntimeGraph, np.ndarray]:
    param = SAMPLES / f"{name}.pnnx.param"
    if not param.exists():
        pytest.skip(f"sample model {name} not exported")
    return kuiper_core.load(param), np.load(SAMPLES / f"{name}.input.npy")


def _arenas(runtime: RuntimeGraph, x: np.ndarray) -> list[Any]:
    return runtime._arenas[((x.shape, x.dtype.str),)].arenas


def _snapshot(values: Any) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def _same_arrays(a: Any, b: Any) -> bool:
    """The same memory, shape and dtype (arena runs hand out a new view per access)."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_arrays, a, b))
    if not isinstance(a, np.ndarray):
        return a is b
    return isinstance(b, np.ndarray) and a.__array_interface__ == b.__array_interface__


def _inputs(x: np.ndarray, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [x] + [rng.standard_normal(x.shape).astype(x.dtype) for _ in range(n - 1)]


@pytest.mark.parametrize("name", slow_cases(CASES, {"unet"}))
def test_arena_runs_match_the_per_operator_path(name: str) -> None:
    """Every operand of an arena run equals the per-operator path's (the reference: fresh
    outputs, each checked against its annotation), and the outputs equal forward()'s."""
    runtime, x = _load(name)
    held = [runtime.steps(x) for _ in range(MAX_ARENAS)]  # every arena taken: the next run cannot have one
    for run in held:
        assert isinstance(run.values, StepValues)
        for _ in run:
            pass
    reference = runtime.steps(x)
    assert isinstance(reference.values, dict)
    events = list(reference)
    assert [e.key for e in events] == [r.key for r in runtime.order]
    for run in held:
        assert list(run.values) == list(reference.values)  # same operands, in step order
        for k, ref in reference.values.items():
            got = run.values[k]
            if isinstance(ref, np.ndarray):
                assert got.shape == ref.shape and got.dtype == ref.dtype, k
                np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(ref).max(initial=0))))
        for y, f in zip(runtime.outputs_of(run.values), runtime.forward(x)):
            np.testing.assert_allclose(y, f, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name, joined",
    slow_cases([("unet", 3), ("yolov5s_mini", 13), ("expr_zoo", 1)], {"unet", "yolov5s_mini"}, key=lambda c: c[0]),
)
def test_concatenations_are_laid_out_in_place(name: str, joined: int) -> None:
    """A torch.cat whose inputs can sit one after another in its output's block has no call:
    its producers write there. Its output is still the concatenation of its inputs, every
    input keeps its own values, and nothing else shares the block."""
    runtime, x = _load(name)
    for event in runtime.steps(x):
        pass
    del event
    arena = _arenas(runtime, x)[0]
    cats = [(r, c) for r, c in zip(runtime.order, arena.calls) if r.type == "torch.cat"]
    assert sum(c is None for _, c in cats) == joined
    held = [runtime.steps(x) for _ in range(MAX_ARENAS)]
    run = held[0]
    events = list(run)
    reference = runtime.steps(x)  # per-operator: every arena is held
    assert isinstance(reference.values, dict)
    list(reference)
    for e in events:
        if e.type == "torch.cat":
            ins, out = list(e.inputs.values()), list(e.outputs.values())[0]
            np.testing.assert_array_equal(out, np.concatenate(ins, axis=runtime.operators[e.key].layer.dim))
            for k, v in {**e.inputs, **e.outputs}.items():
                np.testing.assert_array_equal(v, reference.values[k])
    # No two operands that operators write overlap unless one is a concatenation holding the
    # other (view operators' outputs are views of their inputs).
    written = {
        o.name
        for r, c in zip(runtime.order, arena.calls)
        if c is not None or r.type == "torch.cat"
        for o in r.op.outputs
    }
    spans = []
    for k, v in run.values.items():
        if k in written and isinstance(v, np.ndarray) and v.base is arena.memory:
            lo = v.__array_interface__["data"][0]
            spans.append((lo, lo + v.nbytes, k))
    spans.sort()
    cat_outputs = {o.name for r, c in cats if c is None for o in r.op.outputs}
    for (a0, a1, ka), (b0, b1, kb) in zip(spans, spans[1:]):
        assert b0 >= a1 or ka in cat_outputs or kb in cat_outputs, (ka, kb)


def test_an_arena_is_reused_when_nothing_holds_its_arrays() -> None:
    runtime, x = _load("digits_cnn")
    x1, x2 = _inputs(x, 2)
    for event in runtime.steps(x1):
        pass
    del event  # the last event holds its run's values
    arena = _arenas(runtime, x1)[0]
    want = runtime.forward(x2)[0]
    run = runtime.steps(x2)  # the last run's values were only runtime.values: let go by this call
    for _ in run:
        pass
    assert _arenas(runtime, x1) == [arena]  # no second arena was made
    np.testing.assert_allclose(runtime.outputs_of(run.values)[0], want, rtol=1e-6, atol=1e-7)


def test_held_runs_are_never_overwritten() -> None:
    """A run whose values someone keeps (the app's stepper does) keeps its arrays: later runs
    take another arena, or the per-operator path once every arena is held."""
    runtime, x = _load("expr_zoo")
    xs = _inputs(x, MAX_ARENAS + 2)
    runs, saved, events = [], [], []
    for xi in xs:
        run = runtime.steps(xi)
        events.append([(e, e.seconds, e.outputs) for e in run])
        runs.append(run)
        saved.append(_snapshot(run.values))
    assert len(_arenas(runtime, x)) == MAX_ARENAS
    for run_events in events:  # each run's events are its own and keep their times
        for e, seconds, outputs in run_events:
            assert e.seconds == seconds and e.outputs.keys() == outputs.keys()
            assert all(_same_arrays(e.outputs[k], v) for k, v in outputs.items())
    for xi, run, before in zip(xs, runs, saved):
        now = _snapshot(run.values)
        assert list(now) == list(before)
        for k in before:
            np.testing.assert_array_equal(now[k], before[k])
        for y, f in zip(runtime.outputs_of(run.values), runtime.forward(xi)):
            np.testing.assert_allclose(y, f, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("holder", ["array", "view", "event", "tuple"])
def test_anything_that_holds_an_arena_array_keeps_it(holder: str) -> None:
    runtime, x = _load("tiny_mlp")
    x1, x2 = _inputs(x, 2)
    run = runtime.steps(x1)
    events = list(run)
    name = runtime.order[len(runtime.order) // 2].op.outputs[0].name
    # The closures read `run` and `events` before the del below (ruff sees only the del).
    holders: dict[str, Any] = {
        "array": lambda: run.values[name],  # noqa: F821
        "view": lambda: run.values[name][..., :1],  # noqa: F821  (its base is the arena's memory block)
        "event": lambda: events[-1],  # noqa: F821  (events read the run's values)
        "tuple": lambda: (run.values[name],),  # noqa: F821
    }
    kept = holders[holder]()
    before = run.values[name].copy()
    del run, events
    for _ in runtime.steps(x2):
        pass
    for _ in runtime.steps(x2):
        pass
    if holder == "event":
        np.testing.assert_array_equal(kept.values[name], before)
    else:
        np.testing.assert_array_equal(
            kept[0] if holder == "tuple" else kept, before if holder != "view" else before[..., :1]
        )


def test_step_values_show_only_the_steps_done() -> None:
    runtime, x = _load("digits_cnn")
    for _ in runtime.steps(x):  # the second run is an arena's reused run
        pass
    run = runtime.steps(x)
    values = run.values
    assert isinstance(values, StepValues)
    assert len(values) == 0 and list(values) == []
    last = runtime.order[-2].op.outputs[0].name
    for n, event in enumerate(run, 1):
        assert all(o.name in values for o in event.operator.outputs)
        assert len(values) == len(list(values)) == sum(len(r.op.outputs) for r in runtime.order[:n])
        if n < len(runtime.order) - 1:
            assert last not in values
            with pytest.raises(KeyError):
                values[last]
    assert values[runtime.input_operands[0]] is x  # the caller's array, as the per-operator path shows it


def test_a_failing_operator_in_an_arena_run_is_named_and_the_steps_before_it_shown() -> None:
    runtime, x = _load("digits_cnn")
    for event in runtime.steps(x):
        pass
    del event
    arena = _arenas(runtime, x)[0]
    k = next(i for i, r in enumerate(runtime.order) if r.type == "nn.ReLU")

    def broken() -> None:
        raise ValueError("broken kernel")

    kept = arena.calls[k]  # (dropping it would drop its arrays' counts: the arena would retire)
    arena.calls[k] = broken
    stepper = ForwardStepper(runtime, [x])
    stepper.run_all()
    assert stepper.failed_operator == runtime.order[k].name
    assert isinstance(stepper.failure, ModelError) and "broken kernel" in str(stepper.failure)
    assert len(stepper.events) == k
    assert _arenas(runtime, x) == [arena]  # the broken one ran
    del kept


def test_graphs_that_cannot_be_prepared_step_one_operator_at_a_time() -> None:
    """Here a parameter computed at run time: every run takes the per-operator path (the
    optlevel zoo's tests check its operands against PyTorch's)."""
    param = Path(__file__).parent / "data" / "optlevel" / "shape_arith" / "o0" / "model.pnnx.param"
    runtime = kuiper_core.load(param)
    d = np.load(param.parent / "inputs.npz")
    ins = [d[k] for k in sorted(d.files)]
    assert any(r.computed for r in runtime.order)
    for _ in range(2):
        run = runtime.steps(*ins)
        for _ in run:
            pass
        assert isinstance(run.values, dict)
        for y, f in zip(runtime.outputs_of(run.values), runtime.forward(*ins)):
            np.testing.assert_array_equal(y, f)


def test_arenas_stay_within_their_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from kuiper_core.runtime import step_arena

    runtime, x = _load("digits_cnn")
    first = runtime.steps(x)
    for _ in first:
        pass
    size = _arenas(runtime, x)[0].memory.nbytes
    monkeypatch.setattr(step_arena, "MAX_ARENA_BYTES", size + size // 2)  # room for one
    second = runtime.steps(x)  # `first` holds the arena: no room for another
    assert isinstance(second.values, dict)
    for _ in second:
        pass
    np.testing.assert_array_equal(runtime.outputs_of(second.values)[0], runtime.outputs_of(first.values)[0])
    monkeypatch.setattr(step_arena, "MAX_ARENA_BYTES", size - 1)
    g2, _ = _load("digits_cnn")
    assert isinstance(g2.steps(x).values, dict)  # not even one fits


def test_an_arena_whose_counts_fall_below_its_baseline_is_never_reused() -> None:
    """Had something held an array when the baseline was taken, a count below it later means
    the counts can no longer tell whether the arena is free: it retires."""
    runtime, x = _load("digits_cnn")
    for event in runtime.steps(x):
        pass
    del event
    arena = _arenas(runtime, x)[0]
    arena.baseline[0] += 1  # as if a holder had been counted in
    run = runtime.steps(x)
    for _ in run:
        pass
    assert arena not in _arenas(runtime, x) and len(_arenas(runtime, x)) == 1
    np.testing.assert_allclose(runtime.outputs_of(run.values)[0], runtime.forward(x)[0], rtol=1e-6, atol=1e-7)


def test_arenas_are_kept_for_the_latest_input_shapes_only() -> None:
    """A graph keeps at most MAX_ARENA_BYTES of arenas, not that much per input shape: new
    shapes let go of the older shapes' arenas, and a run that still holds one is unharmed."""
    runtime, x = _load("digits_cnn")
    first = runtime.steps(x)
    for _ in first:
        pass
    kept = _snapshot(first.values)
    assert len(_arenas(runtime, x)) == 1
    x2 = np.concatenate([x, x[::-1] * 0.5])  # batch 2: another signature
    second = runtime.steps(x2)
    for _ in second:
        pass
    assert isinstance(second.values, StepValues) and len(_arenas(runtime, x2)) == 1
    assert _arenas(runtime, x) == []  # let go of
    for k, v in kept.items():  # the held run's values: untouched
        np.testing.assert_array_equal(first.values[k], v)
    np.testing.assert_allclose(runtime.outputs_of(second.values)[0], runtime.forward(x2)[0], rtol=1e-6, atol=1e-6)
    third = runtime.steps(x)  # back to batch 1: a new arena (the old one is held by `first`, and gone)
    for _ in third:
        pass
    assert len(_arenas(runtime, x)) == 1 and _arenas(runtime, x2) == []
    np.testing.assert_array_equal(runtime.outputs_of(third.values)[0], runtime.outputs_of(first.values)[0])
