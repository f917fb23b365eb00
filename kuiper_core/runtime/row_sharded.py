"""A forward at batch 1 whose convolutional prefix runs as two row bands on two threads.

Why: at batch 1 the half-batch sharding (sharded.py) cannot apply, and with two BLAS threads
only OpenBLAS's GEMMs use the second core; the im2col gathers, Winograd transforms, pooling
and elementwise passes run on one (ResNet-18 b1: ~1.3x PyTorch at two threads, ~0.75x at
one). Splitting each convolution over a worker never paid (bench/README.md: a hand-off costs
14-110 us and the worker often starts 1-5 ms late), so, as sharded.py does with images, the
split is coarse: the prefix of the graph up to a cut (one operand that alone carries
everything to the rest) runs twice, on the top and the bottom rows of the input, each band a
complete PreparedForward of the prefix at one BLAS thread (its own buffers and kernels), one
on the caller's thread and one on sharded.py's persistent worker. Each band's rows of the cut
go into the whole forward's buffer for it, and the whole forward's calls after the cut run at
the BLAS's own thread count.

Rows: every prefix operator must be row-local on (N, C, H, W) tensors: convolutions and
window pools (a window of k_eff = d(k-1)+1 rows, stride s, top padding p) and elementwise
operators (every tensor input the output's shape). A band holding input rows [lo, hi) gives at
every operand the rows [o, o + n) of the whole forward's, o = lo / (the strides so far), while
each stride divides the offset it meets (`band_rows`); rows near an edge inside the image
are wrong, read from the band's zero padding: ceil((c + p)/s) at the top after each window
with c wrong rows above it, likewise at the bottom. The halo (rows recomputed by both bands)
is chosen so that each band's correct rows cover its half of the cut.

When (RuntimeGraph's policy): the BLAS runs >= 2 threads, there is one 4-D input at batch 1,
and `RowShardedForward.build` finds, at the second forward at these shapes, a cut whose
estimated two-thread time (conv multiply-adds: the larger band's, plus the rest over the
whole forward's two-thread gain) is under the whole forward's, the banded outputs match the
whole forward's (the last guard), and the banded run is faster than the whole, both timed.
After a pause, with another thread of the process running (OpenBLAS's pool spinning after a
GEMM: sharded.py), the whole forward runs instead.

Memory: the bands' kernels keep to the Winograd layouts the whole forward made
(`conv.reusing_weights`: at their heights and one BLAS thread the cost model would transform
ResNet-18's weights again, +11 MiB), and the bands of successive segments share buffers (they
never run at once: `BufferPlan.allocate`'s pool). ResNet-18 b1 at two threads, peak RSS after
4 forwards: 127 MiB whole, 148 banded (the worker's scratch and OpenBLAS's buffer for a second
calling thread; PyTorch 314).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from .. import limits as _limits
from ..errors import KuiperError
from ..layers.conv import reusing_weights
from ..threads import one_blas_thread
from .prepared import NotPreparable, PreparedForward
from .program import Program
from .running_threads import other_thread_running
from .sharded import BACK_TO_BACK, best_time, close_enough, shard_worker

WINDOWED = ("nn.Conv2d", "nn.MaxPool2d", "nn.AvgPool2d")
ELEMENTWISE = frozenset(
    (
        "nn.ReLU", "F.relu", "nn.ReLU6", "nn.LeakyReLU", "F.leaky_relu", "nn.BatchNorm2d", "nn.Hardswish",
        "F.hardswish", "nn.Hardsigmoid", "F.hardsigmoid", "nn.Hardtanh", "F.hardtanh", "nn.SiLU", "F.silu",
        "nn.Sigmoid", "F.sigmoid", "torch.sigmoid", "nn.Tanh", "F.tanh", "torch.tanh", "nn.GELU", "F.gelu",
        "nn.Mish", "nn.ELU", "nn.Identity", "nn.Dropout", "pnnx.Expression",
    )
)  # fmt: skip
# The whole forward's gain from its second BLAS thread, for the estimate only (ResNet-18 b1:
# ~1.3x; the build times both in the end).
WHOLE_GAIN = 1.3
# Banded only when it takes at most this share of the whole forward's time (both timed at
# the second forward at these shapes), as sharded.py's MAX_SHARDED_SHARE.
MAX_BANDED_SHARE = 0.9
# Multiply-adds an elementwise or pooling element is worth in the estimate.
PASS_COST = 4.0
# Segments: at least this share of the prefix's estimated cost; starting at one of the last
# MAX_BACK cuts (planning stays linear in the graph's size).
MIN_SEGMENT = 1 / 32
MAX_BACK = 4
# Planning looks at most this many prefix operators (deep1500: 1,500), and only at inputs of
# at least MIN_ROWS rows (on smaller maps the hand-offs cost more than a band saves).
MAX_PREFIX = 300
MIN_ROWS = 32
# A hand-off to the worker and back, in multiply-adds (~0.2 ms at ~60 GMAC/s).
HANDOFF_COST = 12e6


@dataclass(frozen=True)
class Window:
    """A row window: k_eff rows (dilation included), stride s, padding top pt and bottom pb."""

    k: int
    s: int
    pt: int
    pb: int


@dataclass(frozen=True)
class Rows:
    """An operand's rows in a band: rows [o, o + n) of the whole forward's; the first `top`
    and the last `bottom` of them are wrong (read from padding at an edge inside the image)."""

    o: int
    n: int
    top: int
    bottom: int

    def correct(self) -> tuple[int, int]:
        return self.o + self.top, self.o + self.n - self.bottom


@dataclass(frozen=True)
class Prefix:
    """The row-local prefix of a program: its operators, each one's window (None:
    elementwise) and multiply-adds per output row, and the tensor operands each reads."""

    ops: tuple[Any, ...]  # RuntimeOperators, in run order
    windows: tuple[Window | None, ...]
    row_cost: tuple[float, ...]
    reads: tuple[tuple[str, ...], ...]
    outputs: tuple[str, ...]
    input_operand: str


def _window(operator: Any) -> Window | None:
    """The row window of a 2-D convolution or window pool (None if it has none we read)."""
    layer = operator.layer
    if operator.type == "nn.Conv2d":
        weight = operator.op.attrs.get("weight")
        if weight is None or len(weight.shape) != 4:
            return None
        (kh, dh), sh = (weight.shape[2], layer.dilation[0]), layer.stride[0]
        keff = dh * (kh - 1) + 1
        if layer.padding == "same":
            pt = (keff - 1) // 2
            return Window(keff, sh, pt, keff - 1 - pt)
        return Window(keff, sh, layer.padding[0], layer.padding[1])
    if getattr(layer, "ceil_mode", True):
        return None  # ceil_mode changes the output count: not read here
    keff = layer.dilation[0] * (layer.kernel[0] - 1) + 1
    return Window(keff, layer.stride[0], layer.padding[0], layer.padding[0])


def row_prefix(program: Program, shapes: dict[str, Any]) -> Prefix | None:
    """The longest prefix of the run order whose operators are row-local on 4-D tensors
    computed from the one input (module docstring); None if it holds no window."""
    if len(program.inputs) != 1 or not program.run_order or program.run_order[0].type != "pnnx.Input":
        return None
    constants = program.run_constants
    source = program.input_operands[0]
    ops: list[Any] = [program.run_order[0]]
    windows: list[Window | None] = [None]
    costs: list[float] = [0.0]
    reads: list[tuple[str, ...]] = [()]
    outs: list[str] = [source]
    for operator in program.run_order[1:MAX_PREFIX]:
        names = [o.name for o in operator.binding.inputs]
        tensors = tuple(n for n in names if n not in constants)
        if len(operator.binding.outputs) != 1 or not tensors or operator.computed:
            break
        out = operator.binding.outputs[0].name
        shape = shapes.get(out, ((), None))[0]
        if len(shape) != 4 or any(len(shapes.get(n, ((), None))[0]) != 4 for n in tensors):
            break
        if operator.type in WINDOWED:
            if len(tensors) != 1 or len(names) != 1:
                break
            window = _window(operator)
            if window is None:
                break
            per_row = shape[1] * shape[3] * (PASS_COST * window.k)
            if operator.type == "nn.Conv2d":
                weight_shape = operator.op.attrs["weight"].shape
                per_row = shape[1] * shape[3] * weight_shape[1] * weight_shape[2] * weight_shape[3]
        elif operator.type in ELEMENTWISE:
            window = None
            if any(shapes[n][0] != shape for n in tensors):
                break  # a broadcast over rows, or an op that changes shape
            if any(np.ndim(constants[n]) >= 2 and np.shape(constants[n])[-2] != 1 for n in names if n in constants):
                break  # a constant with rows of its own
            per_row = PASS_COST * shape[1] * shape[3]
        else:
            break
        ops.append(operator)
        windows.append(window)
        costs.append(per_row)
        reads.append(tensors)
        outs.append(out)
    if not any(w is not None for w in windows):
        return None
    return Prefix(tuple(ops), tuple(windows), tuple(costs), tuple(reads), tuple(outs), source)


def band_rows(prefix: Prefix, first: int, stop: int, height: int, lo: int, hi: int) -> list[Rows] | None:
    """The output rows of prefix operators first+1 .. stop when a band holds rows [lo, hi) of
    operator `first`'s output (`height` rows); None where a stride does not divide an offset
    or operands read together disagree."""
    inner_top, inner_bottom = lo > 0, hi < height
    rows: dict[str, Rows] = {prefix.outputs[first]: Rows(lo, hi - lo, 0, 0)}
    result: list[Rows] = []
    for k in range(first + 1, stop + 1):
        window, reads = prefix.windows[k], prefix.reads[k]
        if window is None:
            ins = [rows[n] for n in reads]
            if any((x.o, x.n) != (ins[0].o, ins[0].n) for x in ins):
                return None
            r = Rows(ins[0].o, ins[0].n, max(x.top for x in ins), max(x.bottom for x in ins))
        else:
            x = rows[reads[0]]
            if x.o % window.s:
                return None
            n = (x.n + window.pt + window.pb - window.k) // window.s + 1
            if n < 1:
                return None
            top = min(n, math.ceil((x.top + window.pt) / window.s)) if inner_top else 0
            bottom = 0
            if inner_bottom:  # output row j reads up to j*s - pt + k - 1
                last = math.ceil((x.n - x.bottom - window.k + 1 + window.pt) / window.s)
                bottom = min(n, max(0, n - last))
            r = Rows(x.o // window.s, n, top, bottom)
        rows[prefix.outputs[k]] = r
        result.append(r)
    return result


@dataclass(frozen=True)
class Segment:
    """Prefix operators first+1 .. stop as two bands: rows [lo, hi) of operator `first`'s
    output (`source`) each; the cut (operator stop's output) rows [0, split) from the top
    band, [split, rows) from the bottom one, found at `offsets` in each band's output."""

    first: int
    stop: int
    source: str
    cut: str
    inputs: tuple[tuple[int, int], tuple[int, int]]
    split: int
    rows: int
    offsets: tuple[int, int]
    cost: float  # the larger band's multiply-adds


def _band_cost(prefix: Prefix, first: int, rows: list[Rows]) -> float:
    return sum(c * r.n for c, r in zip(prefix.row_cost[first + 1 :], rows))


def _search(ok: Any, count: int) -> int | None:
    """The smallest j in [0, count) with ok(j) (ok monotone: false, then true), or None."""
    lo, hi, best = 0, count - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            best, hi = mid, mid - 1
        else:
            lo = mid + 1
    return best


def segment(prefix: Prefix, first: int, stop: int, height: int, total: int) -> Segment | None:
    """The two bands of prefix operators first+1 .. stop with the fewest rows each, the cut
    split in the middle. Band edges inside the source are multiples of the segment's strides
    (so every stride divides its offset)."""
    step = math.prod(w.s for w in prefix.windows[first + 1 : stop + 1] if w is not None)
    split = total // 2
    edges = list(range(step, height, step)) + [height]

    def top(j: int) -> list[Rows] | None:
        rows = band_rows(prefix, first, stop, height, 0, edges[j])
        return rows if rows is not None and rows[-1].correct()[1] >= split else None

    def bottom(j: int) -> list[Rows] | None:  # j counts down from the bottom
        lo = ([0] + edges[:-1])[len(edges) - 1 - j]
        rows = band_rows(prefix, first, stop, height, lo, height)
        ok = rows is not None and rows[-1].correct()[0] <= split and rows[-1].correct()[1] >= total
        return rows if ok else None

    jt, jb = _search(lambda j: top(j) is not None, len(edges)), _search(lambda j: bottom(j) is not None, len(edges))
    if jt is None or jb is None:
        return None
    top_rows, bottom_rows = top(jt), bottom(jb)
    assert top_rows is not None and bottom_rows is not None
    lo = ([0] + edges[:-1])[len(edges) - 1 - jb]
    cost = max(_band_cost(prefix, first, top_rows), _band_cost(prefix, first, bottom_rows))
    return Segment(
        first,
        stop,
        prefix.outputs[first],
        prefix.outputs[stop],
        ((0, edges[jt]), (lo, height)),
        split,
        total,
        (top_rows[-1].o, bottom_rows[-1].o),
        cost,
    )


def cut_candidates(program: Program, prefix: Prefix) -> list[int]:
    """Prefix positions after which exactly one computed operand (4-D, not a graph output)
    is still to be read: everything after reads only it and constants."""
    last_read: dict[str, int] = {}
    for i, operator in enumerate(program.run_order):
        for o in operator.binding.reads:
            last_read[o.name] = i
    outputs = set(program.output_operands)
    live: set[str] = set()
    result = []
    for k, name in enumerate(prefix.outputs):
        live = {n for n in live if last_read.get(n, -1) > k}
        if last_read.get(name, -1) > k or name in outputs:
            live.add(name)
        if k and live == {name} and name not in outputs:
            result.append(k)
    return result


def plan_segments(
    program: Program, shapes: dict[str, Any], whole: float, cuttable: Any = lambda name: True, force: bool = False
) -> list[Segment] | None:
    """The chain of banded segments from the input with the lowest estimated two-thread time
    (each segment its larger band plus a hand-off, the rest over WHOLE_GAIN), if under the
    whole forward's estimate (module docstring), or with `force` (tests) at any estimate;
    None otherwise. `cuttable(operand)`: the whole forward can take over after it."""
    prefix = row_prefix(program, shapes)
    if prefix is None:
        return None
    height = shapes[prefix.input_operand][0][2]
    if height < MIN_ROWS and not force:
        return None
    full = band_rows(prefix, 0, len(prefix.ops) - 1, height, 0, height)
    if full is None:
        return None
    done = [0.0] + list(np.cumsum([c * r.n for c, r in zip(prefix.row_cost[1:], full)]))  # whole cost up to k
    heights = [height] + [r.n for r in full]
    # Cuts at least MIN_SEGMENT of the prefix's cost apart (a deep chain has one after every
    # operator), each segment starting at one of the MAX_BACK cuts before its end.
    cuts: list[int] = []
    for k in cut_candidates(program, prefix):
        if (
            heights[k] >= 2
            and cuttable(prefix.outputs[k])
            and done[k] - done[cuts[-1] if cuts else 0] >= MIN_SEGMENT * done[-1]
        ):
            cuts.append(k)
    # best[k]: (estimated cost of bands up to cut k, the segments)
    best: dict[int, tuple[float, list[Segment]]] = {0: (0.0, [])}
    for i, k in enumerate(cuts):
        for first in [0, *cuts[:i]][-MAX_BACK:]:
            if first not in best:
                continue
            cost, chain = best[first]
            seg = segment(prefix, first, k, heights[first], heights[k])
            if seg is not None and (k not in best or cost + seg.cost + HANDOFF_COST < best[k][0]):
                best[k] = (cost + seg.cost + HANDOFF_COST, chain + [seg])
    options = [(cost + (whole - done[k]) / WHOLE_GAIN, chain) for k, (cost, chain) in best.items() if chain]
    if not options:
        return None
    estimate, chain = min(options, key=lambda o: o[0])
    return chain if force or estimate < whole / WHOLE_GAIN else None


def whole_cost(program: Program, shapes: dict[str, Any]) -> float:
    """The estimate's multiply-adds of the whole forward: convolutions and Linear by their
    weights, every other operator PASS_COST per output element."""
    total = 0.0
    for operator in program.run_order:
        outs = [shapes[o.name][0] for o in operator.binding.outputs if o.name in shapes]
        size = float(sum(np.prod(s) for s in outs))
        weight = operator.op.attrs.get("weight")
        if operator.type in ("nn.Conv2d", "nn.Linear") and weight is not None and outs:
            total += size * float(np.prod(weight.shape[1:]))
        else:
            total += PASS_COST * size
    return total


class RowShardedForward:
    """The whole prepared forward, and two band forwards of each segment (module docstring)."""

    def __init__(
        self,
        whole: PreparedForward,
        segments: list[Segment],
        bands: list[tuple[PreparedForward, PreparedForward]],
        sources: list[tuple[np.ndarray, np.ndarray]],
        joins: list[np.ndarray],
        limits: _limits.Limits,
    ) -> None:
        self.whole = whole
        self.segments = segments
        self.bands = bands  # per segment: the top band's forward, the bottom one's
        self.sources = sources  # per segment and band: the band's input rows, copied in
        self.joins = joins  # per segment: the cut's array (the last one the whole forward's)
        self.limits = limits
        rest = whole.calls_after(segments[-1].cut)
        assert rest is not None
        self.rest = rest
        self._last_end = 0.0

    @classmethod
    def make(
        cls, program: Program, inputs: list[np.ndarray], whole: PreparedForward, force: bool = False
    ) -> RowShardedForward | None:
        """The banded forward at these inputs if the estimate finds segments that pay (with
        `force`, tests: wherever the graph has a banded prefix), else None. Not timed: see
        build. `whole`: the prepared forward at these inputs."""
        if len(inputs) != 1 or inputs[0].ndim != 4 or inputs[0].shape[0] != 1:
            return None
        if inputs[0].shape[2] < MIN_ROWS and not force:
            return None
        shapes = whole.record.shapes

        def cuttable(name: str) -> bool:
            return whole.operand_array(name) is not None and whole.calls_after(name) is not None

        segments = plan_segments(program, shapes, whole_cost(program, shapes), cuttable, force)
        if segments is None:
            return None
        by_output = {o.name: r for r in program.run_order for o in r.binding.outputs}
        order = list(program.run_order)
        bands, sources, joins = [], [], []
        pools: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])  # per band: segments run one after another
        source = inputs[0]
        try:
            # The kernels' cost models see the thread count they run at, and keep to the
            # weight layouts the whole forward made.
            with one_blas_thread(), reusing_weights():
                for seg in segments:
                    ops = tuple(order[order.index(by_output[seg.source]) + 1 : order.index(by_output[seg.cut]) + 1])
                    join = whole.operand_array(seg.cut) if seg is segments[-1] else None
                    if join is None:
                        join = np.empty(*shapes[seg.cut])
                    pair, rows = [], []
                    for (lo, hi), offset, (start, end), pool in zip(
                        seg.inputs, seg.offsets, ((0, seg.split), (seg.split, seg.rows)), pools
                    ):
                        rows_in = np.ascontiguousarray(source[:, :, lo:hi])
                        band = PreparedForward.build(_band_program(program, ops, seg, rows_in), [], pool)
                        out = band.output_values[0]
                        if not isinstance(out, np.ndarray) or out.shape[2] < end - offset or start < offset:
                            return None  # not the rows band_rows predicted
                        band.first_outputs = []
                        np.copyto(join[:, :, start:end], out[:, :, start - offset : end - offset])
                        pair.append(band)
                        rows.append(rows_in)
                    bands.append((pair[0], pair[1]))
                    sources.append((rows[0], rows[1]))
                    joins.append(join)
                    source = join
        except (NotPreparable, KuiperError):
            return None
        return cls(whole, segments, bands, sources, joins, program.limits)

    @classmethod
    def build(
        cls, program: Program, inputs: list[np.ndarray], whole: PreparedForward, ref: list[np.ndarray], t_whole: float
    ) -> RowShardedForward | None:
        """The banded forward if it matches the whole forward's outputs `ref` and is faster
        than `t_whole` (both timed here), else None. Under the graph's lock."""
        banded = cls.make(program, inputs, whole)
        if banded is None:
            return None
        try:
            t_banded, out = best_time(banded.run_in_parallel, inputs)
        except Exception:
            return None
        if len(out) != len(ref) or not all(close_enough(a, b) for a, b in zip(ref, out)):
            return None
        return banded if t_banded <= MAX_BANDED_SHARE * t_whole else None

    def _band(self, j: int, k: int, source: np.ndarray) -> None:
        """Band k of segment j on its rows of `source`; its correct cut rows into the join."""
        seg = self.segments[j]
        lo, hi = seg.inputs[k]
        np.copyto(self.sources[j][k], source[:, :, lo:hi])
        band = self.bands[j][k]
        band.run_calls([])
        start, end = (0, seg.split) if k == 0 else (seg.split, seg.rows)
        offset = seg.offsets[k]
        np.copyto(self.joins[j][:, :, start:end], band.output_values[0][:, :, start - offset : end - offset])

    def _bands_on_worker(self, j: int, source: np.ndarray) -> None:
        with _limits.use(self.limits):  # the worker thread does not see the caller's context
            self._band(j, 1, source)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        # After a pause with another thread of the process running (mostly OpenBLAS's pool
        # spinning after a GEMM), the worker would share a core: the whole forward (sharded.py).
        if time.perf_counter() - self._last_end >= BACK_TO_BACK and other_thread_running(exclude=(shard_worker()[1],)):
            outputs = self.whole.run(inputs)
        else:
            outputs = self.run_in_parallel(inputs)
        self._last_end = time.perf_counter()
        return outputs

    def run_in_parallel(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        source = inputs[0]
        worker = shard_worker()[0]
        with one_blas_thread():
            for j in range(len(self.segments)):
                second = worker.submit(self._bands_on_worker, j, source)
                try:
                    self._band(j, 0, source)
                finally:
                    error = second.exception()  # waits: the BLAS count is restored only after both
                if error is not None:
                    raise error
                source = self.joins[j]
        return self.whole.run_from(self.rest)

    def run_in_turn(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Every band on the caller's thread, one after the other (tests: the same values)."""
        source = inputs[0]
        for j in range(len(self.segments)):
            for k in (0, 1):
                self._band(j, k, source)
            source = self.joins[j]
        return self.whole.run_from(self.rest)


def _band_program(program: Program, ops: tuple[Any, ...], seg: Segment, rows_in: np.ndarray) -> Program:
    """The program of one band: the segment's operators, reading `rows_in` as a constant in
    place of the segment's source (filled before each run), giving the cut. Band heights
    differ from the declared ones: the record run checks their ranks and dtypes only."""
    operands = frozenset(o.name for r in ops for o in r.binding.outputs)
    return replace(
        program,
        run_order=ops,
        output_operands=(seg.cut,),
        run_constants=MappingProxyType({**program.run_constants, seg.source: rows_in}),
        value_shaped=program.value_shaped | operands,
    )


__all__ = ["RowShardedForward", "band_rows", "plan_segments", "row_prefix", "segment"]
