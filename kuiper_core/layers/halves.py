"""One operator in two halves: how a layer's prepared call splits itself when asked.

A layer whose `splittable` attribute is set receives a split request in prepare()
(`prepare(inputs, out, split)`): where its work is big enough it returns a call made of two
halves, each bound once to its part of the arrays (convolutions by output rows or channels,
conv_factory.py; pools by rows, pool.py; BatchNorm by channels; activations, expressions, norms,
softmax as flat halves of whole rows, `split_flat`; a concat and a one-row Linear by halves of
their output; self-attention by heads then rows), and hands the pair to the request. Who runs
the halves, and where, is the request's business (runtime/helper_process.py: the second in a
helper process): a layer knows nothing of threads or processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import numpy as np

from .registry import Prepared


@dataclass(frozen=True)
class SplitSizes:
    """When a splittable layer splits its call: fitted to a 2-core x86 VM at one BLAS thread
    (bench/bench_halves.py --ops measures each split call's halves against the whole call).
    The split executor takes them from ExecutionOptions.split_sizes; tests pass their own."""

    # Multiply-adds a half (or a pool's window taps times pass_cost): a half costs a few
    # microseconds to hand over and each half of a small call does a little more than half its
    # work (its own copies and calls).
    min_half_work: int = 1_000_000
    # Multiply-adds a pooling window tap is worth (ResNet-18's maxpool against its 1x1 convs).
    pass_cost: int = 16
    # Elements a half from which an elementwise-style call splits: a hand-off against a GELU's
    # time on a half (`cheap`: a one-pass ReLU's).
    min_half: int = 4096
    min_half_cheap: int = 32768
    # A one-row Linear (a classifier's GEMV) splits its output features from this many weight
    # elements a half (1 MB of float32: ~50 us of reading it).
    linear_row_weights: int = 1 << 18
    # A convolution halves its output channels where its weights outweigh its input this many
    # times (each half then reads half the weights; ResNet-18 from layer 2 on), else its rows.
    conv_channels_over_input: float = 2.0
    # What a grouped (depthwise) convolution's multiply-add is worth in min_half_work's units
    # (GEMM ones): per-channel passes and short GEMMs.
    grouped_mac_worth: int = 16

    def min_elements(self, cheap: bool) -> int:
        """Elements a half from which an elementwise-style call splits."""
        return self.min_half_cheap if cheap else self.min_half


DEFAULT_SIZES = SplitSizes()
# Every call that can split does, however little its work (the tests' sizes).
EVERY_CALL = SplitSizes(min_half_work=0, min_half=1, min_half_cheap=1, linear_row_weights=1)


class SplitRequest(Protocol):
    """What a splittable layer's prepare() receives: when to split, and where its halves go."""

    sizes: SplitSizes

    def pair(self, first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
        """A call that runs both halves (perhaps at once), both done on return."""
        ...

    def array(self, shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
        """A work array both halves may write and a later call reads."""
        ...


class Splittable(Protocol):
    """A layer whose `splittable` is set: its prepare takes a split request (prepare_with_relu
    takes one on every layer: registry.Layer)."""

    def prepare(
        self, inputs: list[Any], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None: ...


def split_flat(
    split: SplitRequest,
    prepare_part: Callable[..., Any],
    inputs: list,
    out: list,
    cheap: bool = False,
    unit: int = 1,
) -> Callable[[list, list], None] | None:
    """An elementwise call (or one over rows of `unit` elements: a norm, a softmax over the last
    dim) as its two flat halves, split at a whole row: `prepare_part(ins,
    outs)` prepares the layer's function for parts of its arrays. None where the arrays are
    not all contiguous and of the output's shape, a half would be under split.sizes.min_elements(cheap)
    elements, or a part cannot be prepared."""
    y = out[0]
    arrays = [*inputs, y]
    if (
        y.size < 2 * split.sizes.min_elements(cheap)
        or y.size < 2 * unit
        or not all(isinstance(a, np.ndarray) and a.flags.c_contiguous and a.shape == y.shape for a in arrays)
    ):
        return None
    h = unit * split_rows(y.size // unit)
    parts = [([x.reshape(-1)[s] for x in inputs], [y.reshape(-1)[s]]) for s in (slice(0, h), slice(h, None))]
    return _prepared_halves(split, prepare_part, parts, inputs, out)


def split_leading(
    split: SplitRequest,
    prepare_part: Callable[..., Any],
    inputs: list,
    out: list,
    cheap: bool = False,
    max_axis: int | None = None,
) -> Callable[[list, list], None] | None:
    """An elementwise call over broadcast or strided inputs (split_flat's are flat and of the
    output's shape) as two halves of the output's first axis of more than one (below
    `max_axis`: a norm's leading axes): each input is cut there where it has that axis, passed
    whole where it broadcasts over it; the output's halves stay contiguous. None where the
    output is not contiguous, a half is under split.sizes.min_elements(cheap) elements, an input's size
    there fits neither, or a part cannot be prepared."""
    y = out[0]
    if (
        len(out) != 1
        or not isinstance(y, np.ndarray)
        or not y.flags.c_contiguous
        or y.size < 2 * split.sizes.min_elements(cheap)
    ):
        return None
    axis = next((a for a in range(y.ndim if max_axis is None else max_axis) if y.shape[a] >= 2), None)
    if axis is None:
        return None
    h = split_rows(y.shape[axis])
    parts = []
    for cut in (slice(0, h), slice(h, None)):
        ins = []
        for a in inputs:
            k = axis - (y.ndim - a.ndim) if isinstance(a, np.ndarray) else -1  # a's axis under y's
            if k < 0 or a.shape[k] == 1:
                ins.append(a)  # broadcast over the axis
            elif a.shape[k] == y.shape[axis]:
                ins.append(a[(slice(None),) * k + (cut,)])
            else:
                return None
        parts.append((ins, [y[(slice(None),) * axis + (cut,)]]))
    return _prepared_halves(split, prepare_part, parts, inputs, out)


def _prepared_halves(
    split: SplitRequest, prepare_part: Callable[..., Any], parts: list, inputs: list, out: list
) -> Callable | None:
    """The split call over two (inputs, out) parts, each prepared by `prepare_part`; None where
    one cannot be."""
    fs = [prepare_part(*part) for part in parts]
    if fs[0] is None or fs[1] is None:
        return None
    return halves_call(split, partial(fs[0], *parts[0]), partial(fs[1], *parts[1]), inputs, out)


def halves_call(
    split: SplitRequest, first: Callable[[], None], second: Callable[[], None], inputs: list, out: list
) -> Callable[[list, list], None]:
    """A prepared call f(inputs, out) that runs two halves already bound to their parts of
    `inputs` and `out` (the arrays are the split forward's fixed buffers)."""
    return partial(_run_pair, split.pair(first, second))


def _run_pair(pair: Callable[[], None], inputs: list, out: list) -> None:
    pair()


def split_rows(rows: int, unit: int = 1) -> int:
    """Where to split `rows` output rows: the multiple of `unit` (a Winograd tile's rows) nearest
    the middle, inside (0, rows)."""
    r = unit * max(1, round(rows / (2 * unit)))
    return r if r < rows else max(1, rows // 2)


def input_rows(
    rows: tuple[int, int], height: int, keff: int, stride: int, top: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The input rows [lo, hi) and the (top, bottom) zero padding that give output rows
    rows = [r0, r1) of a window of keff rows, stride `stride`, top padding `top`, on an input
    of `height` rows: output row r reads padded rows r*stride .. r*stride + keff - 1."""
    r0, r1 = rows
    start, stop = r0 * stride - top, (r1 - 1) * stride + keff - top  # input rows, may pass either edge
    lo, hi = max(0, start), min(height, stop)
    return (lo, hi), (lo - start, stop - hi)


__all__ = [
    "DEFAULT_SIZES",
    "EVERY_CALL",
    "SplitSizes",
    "SplitRequest",
    "Splittable",
    "halves_call",
    "input_rows",
    "split_flat",
    "split_leading",
    "split_rows",
]
