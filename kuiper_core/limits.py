"""Safety limits: how big an input may be before the engine refuses it with a LimitError.

A tiny hostile file can ask for gigabytes (a `#` shape, an Upsample size, a 130 MB line)
or hours of work. Every such size is checked against one of these limits *before*
anything is allocated. The defaults suit the command line and scripts; a caller that
serves many people (the app) uses lower ones:

    from kuiper_core import limits
    with limits.use(max_tensor_elements=1 << 24):
        graph = kuiper_core.load("model.pnnx.param")     # the graph keeps these limits
    limits.current().max_line_chars

`RuntimeGraph(..., limits=...)` takes them explicitly too; a graph keeps the limits it
was created under for build, forward and steps. docs/limits.md lists every limit.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from collections.abc import Iterable

from .errors import LimitError
from .graph import format_shape

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    """Every limit, with its default (see docs/limits.md for what each one guards)."""

    max_param_bytes: int = 64 * MiB  # size of a .param file (or text)
    max_line_chars: int = 1 * MiB  # one .param line
    max_operators: int = 100_000  # operator lines in a .param
    max_tensor_elements: int = 1 << 28  # elements of any one tensor, weight, input or index table (1 GiB of f32)
    max_planned_bytes: int = 4 * GiB  # all output buffers planned at build, together
    max_expression_operand: int = 4096  # highest N of an `@N` in an expression
    max_expression_depth: int = 100_000  # nesting depth of an expression
    max_expression_chars: int = 4 * MiB  # one expression's text, and all of one graph's together
    max_param_depth: int = 64  # nesting depth of an array parameter in the textual IR (pnnx writes flat ones)
    max_upload_bytes: int = 200 * MiB  # one file uploaded to the app
    max_inflated_bytes: int = 4 * GiB  # all members of an archive (.npz) together, once inflated
    max_folded_bytes: int = 2 * GiB  # every value a model folds at build (depends only on constants), together
    max_model_cache_bytes: int = 2 * GiB  # the app's shared cache of uploaded models (weights, folds, buffers)
    max_child_seconds: int = 600  # a framework child process (the converter, a reference run) once started
    max_operator_work: int = 1 << 40  # multiply-adds (or window reads) of one operator call (~5 min on one core)

    def replace(self, **changes: int) -> Limits:
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown limit(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)


DEFAULT = Limits()
_current: ContextVar[Limits] = ContextVar("kuiper_limits", default=DEFAULT)


def current() -> Limits:
    """The limits in force here (DEFAULT unless a caller chose others with `use`)."""
    return _current.get()


class use:
    """`with use(limits, **changes):` runs a block under `limits` (default: the current ones)
    with `changes` applied. A class, not a generator: steps() enters one per operator."""

    __slots__ = ("chosen", "_token")

    def __init__(self, limits: Limits | None = None, **changes: int) -> None:
        self.chosen = (limits or current()).replace(**changes) if changes else (limits or current())

    def __enter__(self) -> Limits:
        self._token = _current.set(self.chosen)
        return self.chosen

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


# -- checks -----------------------------------------------------------------------------------


def elements(shape: Iterable[int]) -> int:
    """The element count of a shape, exactly (Python ints: no int64 wrap-around)."""
    return math.prod(int(d) for d in shape)


def check_elements(shape: Iterable[int], what: str, limits: Limits | None = None) -> int:
    """Raise LimitError if a tensor of `shape` would have more than max_tensor_elements
    elements; returns the count. `what` names the tensor ('output', "weight '@w'", ...)."""
    shape = tuple(int(d) for d in shape)
    n = elements(shape)
    lim = (limits or current()).max_tensor_elements
    if n > lim:
        raise LimitError(
            f"{what} of shape {format_shape(shape)} would have {n:,} elements, more than allowed",
            limit="max_tensor_elements",
            maximum=lim,
            value=n,
        )
    return n


PYTHON_STEP_WORK = 20_000  # one step of a layer's Python loop over positions or taps (~5 us), in multiply-adds


def check_work(n: int, what: str, limits: Limits | None = None) -> int:
    """Raise LimitError if one operator call would do more than max_operator_work multiply-adds
    (or reads of window elements), counted from the shapes before the work; returns `n`. Every
    tensor may be within max_tensor_elements and the work still unbounded: a 240-byte file
    multiplying two (8192, 8192) broadcast views of one number asks for 5.5e11, minutes of CPU."""
    lim = (limits or current()).max_operator_work
    if n > lim:
        raise LimitError(f"{what} would take {n:,} multiply-adds", limit="max_operator_work", maximum=lim, value=n)
    return n


def check_count(n: int, what: str, limit: str, limits: Limits | None = None) -> None:
    """Raise LimitError if `n` exceeds the limit named `limit` ('max_operators', ...)."""
    lim = getattr(limits or current(), limit)
    if n > lim:
        raise LimitError(f"{what}: {n:,} is more than allowed", limit=limit, maximum=lim, value=n)


def value_bytes(value: object) -> int:
    """Bytes of the arrays in a value (an array, a number, or lists/tuples of them)."""
    nbytes = getattr(value, "nbytes", None)  # a NumPy array or scalar
    if isinstance(nbytes, int) and hasattr(value, "dtype"):
        return nbytes
    if isinstance(value, (list, tuple)):
        return sum(value_bytes(v) for v in value)
    return 0


class Budget:
    """A running total of bytes checked against one limit as it grows (the values a model
    folds at build: a 1.4 KB .param and a 114-byte .bin folded to 2 GB, each value within
    max_tensor_elements)."""

    def __init__(self, limit: str, what: str, limits: Limits | None = None) -> None:
        self.limit, self.what = limit, what
        self.maximum = getattr(limits or current(), limit)
        self.total = 0

    def add(self, value: object, operator: str | None = None, op_type: str | None = None) -> None:
        self.total += value_bytes(value)
        if self.total > self.maximum:
            raise LimitError(
                f"{self.what} reach {self.total:,} bytes here",
                limit=self.limit,
                maximum=self.maximum,
                value=self.total,
                operator=operator,
                op_type=op_type,
            )


def out_of_memory(e: MemoryError, operator: str | None = None, op_type: str | None = None) -> LimitError:
    """A MemoryError no size check foresaw, as an error naming the operator (not a crash)."""
    lim = current().max_tensor_elements
    return LimitError(
        f"ran out of memory ({str(e) or 'MemoryError'}): it needs more than this machine has, though within the limits",
        limit="max_tensor_elements",
        maximum=lim,
        operator=operator,
        op_type=op_type,
    )


def check_text(text: str, path: str | None = None, limits: Limits | None = None) -> None:
    """A model's text (.param or .kir) within max_param_bytes and max_line_chars, checked
    before it is tokenized (a 130 MB line cost 3 GB of tokens)."""
    lim = limits or current()
    if len(text) > lim.max_param_bytes:
        raise LimitError(
            f"the text is {len(text):,} characters long",
            limit="max_param_bytes",
            maximum=lim.max_param_bytes,
            value=len(text),
            path=path,
        )
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > lim.max_line_chars:
            raise LimitError(
                f"line {number} is {len(line):,} characters long",
                limit="max_line_chars",
                maximum=lim.max_line_chars,
                value=len(line),
                path=path,
                line=number,
                column=lim.max_line_chars + 1,
                source_line=line,
            )
