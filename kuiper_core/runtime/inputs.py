"""The caller's arrays against the model's pnnx.Input declarations, before anything runs.

Each input must be an array of numbers with the declared rank and the declared dims except
the batch (dim 0 may differ: layers follow it by their batch rules), not empty in the batch,
within the element limit; its dtype is cast to the declared one only where every value
survives (an int64 300 must not become the i8 44). An input whose pnnx.Input holds `value=`
(a file converted for that value of it: formats/onnx_given.py) must have that value, on every
run. Errors name the input and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
import numpy as np

from .. import limits as _limits
from ..errors import InputError
from ..graph import FIXED_INPUT_PARAM as FIXED_PARAM, Operator, format_shape, numpy_dtype
from .program import Program

# Input signatures accepted unchanged that are remembered; beyond this many, start again.
MAX_ACCEPTED = 256


class InputCheck:
    """check(arrays) -> the arrays to run on. Arrays of a (shape, dtype) signature that passed
    unchanged (no cast) pass again without the checks (~5 us a forward)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.accepted: set[tuple] = set()
        self.fixed = [(i, op) for i, op in enumerate(program.inputs) if FIXED_PARAM in op.params]

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        limits = self.program.limits
        plain = all(type(a) is np.ndarray for a in arrays)
        key = (limits, *((a.shape, a.dtype) for a in arrays)) if plain else None
        if key in self.accepted:
            for i, op in self.fixed:  # values, not signatures: checked on every run
                check_fixed_value(op, arrays[i])
            return list(arrays)
        checked = check_inputs(self.program, arrays)
        if key is not None and all(c is a for c, a in zip(checked, arrays)):
            if len(self.accepted) >= MAX_ACCEPTED:
                self.accepted.clear()
            self.accepted.add(key)
        return checked


def check_inputs(program: Program, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """See the module docstring."""
    ins = program.inputs
    if len(arrays) != len(ins):
        raise InputError(f"the model takes {len(ins)} input(s) ({', '.join(o.name for o in ins)}), got {len(arrays)}")
    checked = []
    for op, a in zip(ins, arrays):
        operand = op.outputs[0]
        a = np.asarray(a)
        where = f"input '{op.name}' (operand {operand.name})"
        if a.dtype.kind not in "biufc" or a.dtype.fields is not None or a.dtype.subdtype is not None:
            raise InputError(f"{where}: expected an array of numbers, got dtype {a.dtype}")
        _limits.check_elements(a.shape, where, program.limits)
        if operand.dtype is not None:
            a = cast_input(a, numpy_dtype(operand.dtype), operand.dtype, where)
        if operand.shape is not None:
            if a.ndim != len(operand.shape):
                raise InputError(
                    f"{where}: expected rank {len(operand.shape)} shape {format_shape(operand.shape)}, "
                    f"got rank {a.ndim} shape {a.shape}"
                )
            for i, (d, n) in enumerate(zip(operand.shape, a.shape)):
                if i > 0 and isinstance(d, int) and d != n:
                    raise InputError(
                        f"{where}: dim {i} must be {d} (shape {format_shape(operand.shape)}, batch may vary), "
                        f"got shape {a.shape}"
                    )
            if a.ndim and a.shape[0] == 0 and operand.shape[0] != 0:
                raise InputError(f"{where}: batch 0 (shape {a.shape}): an input needs at least one item")
        if FIXED_PARAM in op.params:
            check_fixed_value(op, a)
        checked.append(a)
    return checked


def check_fixed_value(op: Operator, a: np.ndarray) -> None:
    """An input the file was converted for one value of (its `value=`) has that value."""
    want = op.params[FIXED_PARAM]
    a, expected = np.asarray(a), np.asarray(want)
    if a.size == expected.size and np.array_equal(a.reshape(-1), expected.reshape(-1)):
        return
    got = a.tolist() if a.size <= 16 else f"an array of shape {a.shape}"
    raise InputError(
        f"input '{op.name}' (operand {op.outputs[0].name}): the model was converted for the value {want} of this "
        f"input only (control flow or a shape read it, folded at that value), got {got}: convert it again with "
        "this input given (kuiper run MODEL --input …, or kuiper_core.load(MODEL, inputs=[…])), which converts it for "
        "that value"
    )


def cast_input(a: np.ndarray, want: np.dtype, name: str, where: str) -> np.ndarray:
    """`a` as dtype `want`, only where every value survives: an int64 300 must not become
    the i8 44, a float64 1e300 not an f32 inf. Floats round to the nearest value."""
    if a.dtype == want:
        return a
    same_kind = a.dtype.kind == want.kind or (a.dtype.kind in "iu" and want.kind in "iu")
    if not same_kind:
        raise InputError(f"{where}: expected dtype {want} ({name}), got {a.dtype}")
    if a.size and want.kind in "iu" and not np.can_cast(a.dtype, want):
        info = np.iinfo(want)
        lo, hi = int(a.min()), int(a.max())
        if lo < info.min or hi > info.max:
            raise InputError(f"{where}: values from {lo} to {hi} do not fit in {want} ({name}: {info.min}..{info.max})")
    if a.size and want.kind in "fc" and want.itemsize < a.dtype.itemsize:
        finite = a[np.isfinite(a)]
        biggest = float(np.abs(finite).max()) if finite.size else 0.0
        if biggest > float(np.finfo(want).max):
            raise InputError(f"{where}: a value of magnitude {biggest:.6g} overflows {want} ({name})")
    return a.astype(want)
