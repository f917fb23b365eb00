"""Shape truth: every produced tensor against its `#` annotation.

pnnx writes the shape and dtype it saw for every tensor operand (`#5=(1,16)f32`). The
runtime checks each operator's outputs against those annotations — for values folded at
build, and on the first Forward for each distinct set of input shapes (then never again
for those shapes, so the check costs nothing on later runs); `steps()` checks every step
when it runs operator by operator (its step arenas are laid out from a checked run).
A mismatch is a ShapeError naming the operator, the operand, the declared and the produced
shape: no result may silently differ from what the file declares.

What "declared" means:
- `?` and `%name` dims match any size; ranks must agree; dtypes must agree (`bf16`
  weights are widened to f32 when loaded, so f32 is accepted for bf16).
- At the traced batch (every model input's dim 0 as declared) every int dim must match.
- At another batch (the engine lets dim 0 of the inputs differ; the layers follow the
  batch by their batch rules), the inputs' dim 0 changed from B0 to B. A dim that depends
  on the batch is a·batch + c for a whole a >= 1 (the batch itself, a reshape merging it
  with other dims, a concatenation or slice along it), declared as d = a·B0 + c, so it is
  now d + a·(B − B0). An int dim d must therefore be d (batch-independent) or
  d + a·(B − B0) for a whole a in 1..d. Ranks and dtypes must match exactly. Anything else
  is an error. The traced-batch run checks every dim exactly. One batch-following result is
  an error though its dims fit: dim 0 kept at the traced batch while another dim grew by
  a >= 2 per batch unit, the batch folded into it (`_folded_dim`: a reshape target pnnx
  baked at the traced batch); the error names the operator and says to convert at the batch.
- The graph inputs themselves are checked before anything runs (RuntimeGraph's input
  check, with the same batch freedom), not here.
- Where an output's size follows the input values (one_hot without num_classes, a bool
  mask's selection, repeat_interleave by a tensor of counts: Layer.shape_follows_values),
  pnnx annotated it from its own dummy data (a mask selecting all ten entries of a (2,5)
  input: `#3=(10)f32`), so that operand and every operand computed from it (`loose`)
  keep their rank and dtype checked, not their dims.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Container, Sequence

import numpy as np

from ..errors import ShapeError
from ..graph import Operand, Operator, Shape, format_shape, numpy_dtype

Batch = tuple[int, int] | None  # (traced batch B0, actual batch B); None at the traced batch


def batch_of(input_operands: Sequence[Operand], arrays: Sequence[np.ndarray]) -> Batch:
    """(B0, B) when some input's dim 0 differs from its declared int dim 0, else None."""
    for operand, a in zip(input_operands, arrays):
        shape = operand.shape
        if shape and isinstance(shape[0], int) and a.ndim and a.shape[0] != shape[0]:
            return shape[0], int(a.shape[0])
    return None


def _dim_ok(declared: Any, n: int, batch: Batch) -> bool:
    if not isinstance(declared, int):
        return True  # `?` (None) or a `%name` symbol
    if n == declared:
        return True
    if batch is None or batch[1] == batch[0]:
        return False
    a, rest = divmod(n - declared, batch[1] - batch[0])
    return rest == 0 and 1 <= a <= max(1, declared)


def _folded_dim(declared: Shape, shape: tuple[int, ...], batch: Batch) -> int | None:
    """The dim the batch was folded into, where a batch-following result kept the traced batch
    in dim 0 and grew another dim by a multiple (>= 2 per batch unit) of the batch change: what
    a reshape target baked at the traced batch does (`(1,120,1,-1)` at batch 6 makes
    (1,120,1,240), where the original model gives (6,120,1,40)). A dim that follows the batch
    one for one (a sequence-first (T, B, F) layout) is not a fold. None: no fold."""
    if batch is None or batch[0] == batch[1] or len(shape) < 2 or len(declared) != len(shape):
        return None
    if declared[0] != batch[0] or shape[0] != batch[0]:
        return None
    for k in range(1, len(shape)):
        d = declared[k]
        if isinstance(d, int) and shape[k] != d:
            a, rest = divmod(shape[k] - d, batch[1] - batch[0])
            if rest == 0 and a >= 2:
                return k
    return None


def _dtype_ok(declared: str, value: Any) -> bool:
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        dt = value.dtype
        if declared == "bf16":
            return dt in (np.dtype(np.float32), np.dtype(np.uint16))
        return dt == numpy_dtype(declared)
    # A Python number where a 0-d tensor is declared: the same kind is enough.
    kind = (
        "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f" if isinstance(value, float) else "?"
    )
    return kind == numpy_dtype(declared).kind or (kind == "i" and numpy_dtype(declared).kind == "u")


def _produced(value: Any) -> tuple[tuple[int, ...], str]:
    shape = tuple(np.shape(value))
    if isinstance(value, (np.ndarray, np.generic)):
        dtype = value.dtype.name
    else:
        dtype = type(value).__name__
    return shape, dtype


def shape_matches(declared: Shape, shape: tuple[int, ...], batch: Batch = None) -> bool:
    return len(declared) == len(shape) and all(_dim_ok(d, n, batch) for d, n in zip(declared, shape))


def check_outputs(
    op: Operator, operands: Sequence[Operand], values: Sequence[Any], batch: Batch, loose: Container[str] = ()
) -> None:
    """Raise ShapeError for the first value that differs from its operand's annotation;
    operands in `loose` (their size follows the values) by rank and dtype only."""
    for operand, value in zip(operands, values):
        if operand.shape is None or isinstance(value, (tuple, list)) or value is None:
            continue  # a value (int, list) or a tuple: nothing declared
        if (
            isinstance(value, np.ndarray)
            and value.shape == operand.shape
            and operand.dtype is not None
            and operand.dtype != "bf16"
            and value.dtype == numpy_dtype(operand.dtype)
        ):
            continue  # the common case, quickly: exactly as declared
        shape, dtype = _produced(value)
        same_dtype = operand.dtype is None or _dtype_ok(operand.dtype, value)
        want: Shape = (None,) * len(operand.shape) if operand.name in loose else operand.shape
        if shape_matches(want, shape, batch) and same_dtype:
            folded = None if operand.name in loose else _folded_dim(operand.shape, shape, batch)
            if folded is None:
                continue
            assert batch is not None
            declared, produced = format_shape(operand.shape, operand.dtype), format_shape(shape, _short_dtype(dtype))
            raise ShapeError(
                f"produced {produced} for operand '{operand.name}', the file declares {declared}: the inputs are at "
                f"batch {batch[1]}, traced at batch {batch[0]}, and the batch went into dim {folded} while dim 0 "
                "kept the traced batch: the converted file bakes the traced batch into this operator (a reshape "
                "target, an expand size). Convert the model at the batch it runs at (inputshape; `kuiper run "
                "--input` converts at the input's shapes)",
                operator=op.name,
                op_type=op.type,
                operand=operand.name,
                declared=declared,
                produced=produced,
            )
        declared = format_shape(operand.shape, operand.dtype)
        produced = format_shape(shape, _short_dtype(dtype))
        what = "shape" if same_dtype else "dtype" if shape_matches(want, shape, batch) else "shape and dtype"
        at = ""
        if operand.name in loose and what != "dtype":
            at = " (its dims follow the input values, its rank does not)"
        elif batch is not None and what != "dtype":
            at = f" (inputs at batch {batch[1]}, traced at {batch[0]}: batch-sized dims may follow)"
        raise ShapeError(
            f"produced {produced} for operand '{operand.name}', the file declares {declared}: wrong {what}{at}",
            operator=op.name,
            op_type=op.type,
            operand=operand.name,
            declared=declared,
            produced=produced,
        )


def _short_dtype(name: str) -> str:
    from ..graph import dtype_name

    try:
        return dtype_name(np.dtype(name))
    except (KeyError, TypeError):
        return name
