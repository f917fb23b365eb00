"""Every fast executor against the reference interpreter (runtime/interpreter.py), on every
bundled sample and export: the interpreter is their oracle, as conv_reference.py is the
convolution kernels'.

- prepared forward, step arenas, planned forward, steps() with the layers' prepared
  functions (PreparedSteps): exactly equal (same dtype, shape and
  bytes; NaN where NaN). They call the same layers' kernels as the interpreter: a prepared
  function is the kernel the layer's forward picks for those shapes (conv_choice.choose_kernel), a
  ReLU fused into a convolution's call computes max(x, 0) on the same sums, in place or not.
- sharded forward (`executor="sharded"`'s, at the inputs' batch, or at 2 for batch 1): each
  half runs at batch 1 on one BLAS thread, so a convolution may take another kernel than at batch 2
  (Winograd's tile and the im2col/Winograd choice follow the batch; OpenBLAS blocks a GEMM
  by its size and thread count): equal within float rounding, |a - b| <= 1e-4 * max(1, |ref|)
  (tests/conftest.max_err_ok, the tolerance against PyTorch) — a mixed-up image would be off
  by far more; integer and bool outputs exactly. Wherever ShardedForward.make takes it: its
  structure check (keeps_images_apart) and its last guard, the outputs close to the
  interpreter's.
- split forward (`executor="split"`'s, every operator that can split in halves however little
  its work, the second half in the helper process): other kernels on parts of the arrays; within the same tolerance.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kuiper_core
from conftest import max_err_ok
from kuiper_core import KuiperError
from kuiper_core.runtime import interpreter
from kuiper_core.runtime.planned import PlannedForward, ViewNotes
from kuiper_core.runtime.prepared import NotPreparable, PreparedForward, PreparedSteps
from kuiper_core.runtime.program import Program
from kuiper_core.runtime.split_forward import SplitForward
from kuiper_core.layers.halves import EVERY_CALL
from kuiper_core.runtime.sharded import ShardedForward
from kuiper_core.runtime.step_arena import StepArena
from tools.golden_outputs import models

MODELS = {key: (param, inputs) for key, param, inputs in models()}
# The fast tier (pytest -m "not slow") runs these: prepared, arena and sharded on samples, the
# planned forward (parameters computed at run time), a value-shaped graph. All: ~20 s of CPU.
FAST = ("sample_models/tiny_mlp", "sample_models/digits_cnn", "optlevel/shape_arith/o0", "value_shapes/bool_mask")


@cache
def _program(key: str) -> Program:
    program = kuiper_core.load(MODELS[key][0]).program
    assert program is not None
    return program


_ROUNDING: dict[str, float | None] = {"rel": None}  # set by a test for ROUNDED_APART's models only


def _same(a: Any, b: Any) -> bool:
    """Bit for bit: the same type, dtype, shape and values (NaN where NaN)."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        if not (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if _ROUNDING["rel"] is not None and a.dtype.kind == "f":
            return max_err_ok(a, b, rel=_ROUNDING["rel"])[0]
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return type(a) is type(b) and (a == b or (a != a and b != b))


def _assert_same_outputs(got: list[Any], want: list[Any], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the interpreter {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        assert _same(a, b), f"{what}: output {k} differs from the interpreter's"


def _batch_of_two(inputs: list[np.ndarray]) -> list[np.ndarray] | None:
    """Inputs that share a batch >= 2 in dim 0: these, or at batch 1 two images (the second
    another draw of the same values); None where the inputs share no batch."""
    sizes = {a.shape[0] if a.ndim else 0 for a in inputs}
    if len(sizes) != 1 or 0 in sizes:
        return None
    if sizes.pop() >= 2:
        return inputs
    rng = np.random.default_rng(7)
    other = [rng.permutation(a.reshape(-1)).reshape(a.shape) for a in inputs]
    return [np.concatenate([a, b]) for a, b in zip(inputs, other)]


# Self-attention's prepared step (its preallocated q/k/v and output-projection products) and the
# forward's allocating products round differently on OpenBLAS's Haswell kernels (AMD EPYC; bit for
# bit on SkylakeX): ~1e-8 on values of ~0.3. A known difference, bounded here (relative to the
# largest value), not yet explained.
ROUNDED_APART = {"ops/attn_mha_self_bf_output": 1e-6, "ops/attn_transformer_encoder_layer": 1e-6}


@pytest.mark.parametrize("key", [k if k in FAST else pytest.param(k, marks=pytest.mark.slow) for k in MODELS])
def test_fast_executors_match_the_interpreter(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if key in ROUNDED_APART:
        monkeypatch.setitem(_ROUNDING, "rel", ROUNDED_APART[key])
    program = _program(key)
    inputs = MODELS[key][1]
    with kuiper_core.limits.use(program.limits):
        want = program.outputs_of(interpreter.run(program, inputs))
        stepped: dict[str, Any] = {}
        for _ in interpreter.steps(program, inputs, stepped):
            pass
        calls = PreparedSteps()
        for run in range(2):  # the run that prepares the functions, then a run calling them
            quick: dict[str, Any] = {}
            for _ in interpreter.steps(program, inputs, quick, calls.call):
                pass
            assert set(quick) == set(stepped)
            for name, value in stepped.items():
                assert _same(quick[name], value), f"steps with prepared functions, run {run}: operand {name} differs"
        if program.value_shaped:
            return  # only the interpreter runs graphs whose shapes follow the values
        try:
            prepared = PreparedForward.build(program, inputs)
        except NotPreparable:
            _check_planned(program, inputs, want)
            return
        _assert_same_outputs(prepared.first_outputs, want, "prepared forward's binding run")
        _assert_same_outputs(prepared.run(inputs), want, "prepared forward")
        _check_arena(program, inputs, prepared, stepped)
        _check_sharded(program, inputs)
        _check_split(program, inputs, want)


def _check_planned(program: Program, inputs: list[np.ndarray], want: list[Any]) -> None:
    notes = ViewNotes()
    interpreter.run(program, inputs, notes.note)
    views = notes.views if program.matches_declared(inputs) else None
    outputs = PlannedForward(program, views).run(inputs)
    assert outputs is not None, "a layer returned a view the checked run did not see"
    _assert_same_outputs(outputs, want, "planned forward" if views is not None else "unplanned forward")


def _check_arena(program: Program, inputs: list[np.ndarray], prepared: PreparedForward, stepped: dict) -> None:
    try:
        arena = StepArena.build(program, inputs, prepared.record)
    except NotPreparable:
        return  # steps() runs such a graph on the interpreter
    for run in range(2):  # the building run, then a run of the bound calls
        events = list(arena.run(inputs))
        assert [e.key for e in events] == [r.key for r in program.order]
        assert set(arena.values) == set(stepped)
        for name, value in stepped.items():
            assert _same(arena.values[name], value), f"step arena run {run}: operand {name} differs"


def _check_sharded(program: Program, inputs: list[np.ndarray]) -> None:
    pair = _batch_of_two(inputs)
    if pair is None:
        return
    try:
        want = program.outputs_of(interpreter.run(program, pair))
    except KuiperError:
        return  # not at batch 2 (a traced batch written into a reshape)
    sharded = ShardedForward.make(program, pair)
    if sharded is None:
        return  # mixes images, or not preparable at these shapes: the whole forward runs
    _assert_close_outputs(sharded.run(pair), want, "sharded")


def _assert_close_outputs(got: list[Any], want: list[Any], what: str) -> None:
    """Within the tolerance against PyTorch (conftest.max_err_ok), same shapes and dtypes."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the interpreter {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what}, output {k}: {a.shape} vs {b.shape}"
        ok, err, bound = max_err_ok(a, b)
        assert ok, f"{what}, output {k}: max abs err {err:.3g} > {bound:.3g}"


def _check_split(program: Program, inputs: list[np.ndarray], want: list[Any]) -> None:
    """Every convolution, window pool, Linear and self-attention split in halves (however
    little its work)."""
    split = SplitForward.make(program, inputs, sizes=EVERY_CALL)
    if split is None:
        return  # no batch-1 4-D input, or nothing that splits
    try:
        for run in range(2):
            _assert_close_outputs(split.run(inputs), want, f"split run {run}")
    finally:
        split.close()


def test_every_model_is_covered() -> None:
    groups = {key.split("/")[0] for key in MODELS}
    assert {"sample_models", "optlevel", "ops", "ops_o0", "ops_o1", "value_shapes"} <= groups
    assert all(isinstance(p, Path) for p, _ in MODELS.values())
