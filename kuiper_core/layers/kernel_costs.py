"""The convolution kernel chooser's tuning as one value: `KernelCosts`, the per-operation costs
and thresholds conv_choice.py weighs kernels with, and the block sizes the kernels cut their
work into, fitted offline to one machine and passed in (ExecutionOptions.kernel_costs).

Re-fitting for another machine (docs/speed.md, "Re-fitting the kernel costs"): time each
candidate against its estimate with `bench/bench_convs.py --candidates` (one thread, CPU clock),
fit the fields each section's comment names, `replace(DEFAULT_COSTS, ...)`, `save(path)`; then
`kuiper_core.load(model, kernel_costs=KernelCosts.load(path))`. A cost changes which kernel runs
a convolution, never what the kernel computes beyond rounding: every kernel is tested against
conv_reference.py; the block sizes change only how a batch or a map is cut into calls.

The runtime tells a layer the costs and the BLAS thread count its call runs at (`ChoiceInputs`,
set with the BLAS's count by runtime/runtime_graph.py through `enter`/`leave` or `choosing`; a
layer called outside a runtime sees `DEFAULT_CHOICE`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..errors import KuiperError

FORMAT = "kuiper-kernel-costs"  # a saved file's "format" (load checks it)


@dataclass(frozen=True)
class KernelCosts:
    """Milliseconds per operation at one BLAS thread (the `_mac`, `_copy`, … fields) and sizes.
    The defaults were fitted on the project's 2-core x86 build VM; `fitted_on` says where a
    value's numbers came from (saved with them)."""

    fitted_on: str = "kuiper defaults: the project's 2-core x86 build VM (bench/bench_convs.py --candidates)"
    # -- im2col + GEMM (conv_choice.im2col_cost; bench_convs --candidates, dense convs) ----------
    gemm_mac: float = 1.96e-8  # im2col's GEMM, per multiply-accumulate
    col_copy: float = 2.47e-7  # im2col, per column element gathered
    gemm_weight: float = 8.2e-8  # the GEMM packs its whole weight each call: per weight element (caches flushed)
    call: float = 1.35e-2  # any kernel call's fixed cost
    # -- weights past the cache (every candidate) --------------------------------------------------
    cold_weight: float = 2.0e-7  # per weight element beyond cached_weights, read from memory each call
    cached_weights: int = 1 << 18  # weight elements a core's L2 keeps (1 MB of float32)
    # -- Winograd F(2,3) (conv_choice.winograd_cost / winograd_rows_cost; --candidates, 3x3 stride 1)
    wino_mac: float = 2.19e-8  # the 2-D kernel's batched GEMMs, per multiply-accumulate
    wino_weight: float = 2.12e-7  # per transformed weight element (U) read
    wino_in: float = 6.53e-7  # per input-tile element gathered and transformed
    wino_out: float = 2.18e-6  # per output element (inverse transform and scatter)
    wino_fixed: float = 2 * 1.35e-2  # a Winograd call's fixed cost (two calls' worth: its views are made once)
    rows_mac: float = 1.65e-8  # F(2,3) along the rows: its K = 3C GEMMs, per multiply-accumulate
    winograd_min_channels: int = 16  # below this many in or out channels the transforms cost more than they save
    winograd_free_weights: int = 1 << 20  # a U up to this many elements is always allowed (memory, not speed)
    winograd_max_weights: int = 3 << 20  # beyond free: U at most twice the weight and this many elements
    # -- stride-2 rows (conv_choice.stride2_cost; --candidates, stride-2 3x3..7x7) ---------------
    s2_mac: float = 1.64e-8  # 3x3: per GEMM multiply-accumulate
    s2_in: float = 3.60e-7  # 3x3: per element gathered or B^T-transformed
    s2_out: float = 2.21e-7  # 3x3: per element of the GEMMs' results and the output blocks
    s2_fixed: float = 1.35e-2  # 3x3: a call's fixed cost
    s2r_mac: float = 2.46e-8  # over 3x3 (rows first, image stems): per GEMM multiply-accumulate
    s2r_in: float = 2.95e-7  # over 3x3: per element moved (row tiles, transforms, operand copies)
    s2r_out: float = 7.9e-8  # over 3x3: per result and output element
    s2r_fixed: float = 2.9e-2  # over 3x3: a call's fixed cost
    stride2_margin: float = 0.95  # taken only when its estimate is this fraction of im2col's or less
    stride2_min_width: int = 8  # 3x3: narrower outputs stay im2col (its batch-wide GEMM reads the weight once)
    stride2_rows_first_min_width: int = 56  # over 3x3: narrower outputs stay im2col
    # -- depthwise (conv_choice.channels_last_wins; --candidates, groups = channels) ----------------
    dw_im2col_call: float = 6.88e-5  # im2col on a depthwise conv: per channel and image (a BLAS call each)
    dw_im2col_column: float = 1.68e-7  # per column element
    dw_im2col_row: float = 2.98e-6  # per gathered row of taps at stride > 1
    dw_im2col_fixed: float = 2.52e-3  # a call's fixed cost
    dw_im2col_spill_elements: int = 1 << 20  # from this many column elements (past L2) ...
    dw_im2col_spill_factor: float = 3.0  # ... a column element costs this many times more (bench_convs --param)
    dw_last_column: float = 9.7e-8  # channels last: per multiply-add
    dw_last_run: float = 1.1e-5  # per contiguous run of C taps
    dw_last_input: float = 4.36e-7  # per input element (the transposed copy into the padded buffer)
    dw_last_fixed: float = 3.0e-3  # a call's fixed cost
    dw_margin: float = 1.0  # channels last when its estimate is below this times im2col's
    wide_min_output: int = 28 * 28  # wide rows at stride 1 from this many output positions (--candidates)
    wide_max_taps: int = 9  # ... and kernels of at most this many taps
    # -- layouts and blocks the kernels cut their work into (bench_convs on the model's shapes) -----
    bias_column_max_weight: int = 1 << 14  # weights this small carry the bias as a GEMM column, whatever the map
    im2col_band_elements: int = 1 << 18  # im2col columns above this many elements go in bands of output rows
    im2col_wide_max_out: int = 16  # im2col copies whole padded rows at stride 1 up to this many outputs a group
    im2col_across_max_columns: int = 256  # a batch of images this small (outputs each) is one GEMM
    im2col_own_buffers_bytes: int = 1 << 20  # an im2col this small owns its buffers (borders, views made once)
    winograd_min_tiles: int = 196  # Winograd runs a batch in chunks of at least this many tiles ...
    winograd_work_elements: int = 1 << 20  # ... whose work buffers stay under this many elements
    rows_work_elements: int = 1 << 21  # the row kernels' (F(2,3) rows, stride-2) work arrays per chunk of images
    stride2_band_elements: int = 1 << 20  # its rows-first input tiles per band of output rows
    wide_block_elements: int = 1 << 15  # wide rows: a block of channels' rows (kept in L2)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "str":
                ok = isinstance(value, str)
            elif f.type == "int":
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
            if not ok:
                raise KuiperError(f"kernel cost {f.name} must be a non-negative {f.type}, not {value!r}")

    def save(self, path: str | Path) -> None:
        """Write the costs as JSON (every field; load reads it back equal)."""
        Path(path).write_text(json.dumps({"format": FORMAT, "costs": asdict(self)}, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> KernelCosts:
        """Read costs save() wrote: every field, no other (a KuiperError names what differs)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise KuiperError(f"{path}: cannot read kernel costs: {e}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("costs"), dict):
            raise KuiperError(f'{path}: not a kernel costs file (expected {{"format": "{FORMAT}", "costs": {{...}}}})')
        costs, names = data["costs"], {f.name for f in fields(cls)}
        unknown, missing = sorted(costs.keys() - names), sorted(names - costs.keys())
        if unknown or missing:
            raise KuiperError(
                f"{path}: kernel costs unknown: {', '.join(unknown) or '-'}; missing: {', '.join(missing) or '-'}"
            )
        return cls(**costs)


DEFAULT_COSTS = KernelCosts()


@dataclass(frozen=True, eq=False)
class ChoiceInputs:
    """What a kernel choice reads besides the shapes: the costs, and the BLAS thread count the
    call runs at (the stride-2 kernel's cost model holds for one thread only). Compared by
    identity: a layer keys the kernels it made on it."""

    costs: KernelCosts = DEFAULT_COSTS
    threads: int = 1


DEFAULT_CHOICE = ChoiceInputs()
_current: ContextVar[ChoiceInputs] = ContextVar("kuiper_kernel_choice", default=DEFAULT_CHOICE)


def current() -> ChoiceInputs:
    """The choice inputs of the running call (DEFAULT_CHOICE outside any)."""
    return _current.get()


def enter(inputs: ChoiceInputs) -> Token[ChoiceInputs]:
    """Layers called from now on (in this context) choose with `inputs`, until leave(the token)."""
    return _current.set(inputs)


def leave(token: Token[ChoiceInputs]) -> None:
    _current.reset(token)


@contextmanager
def choosing(inputs: ChoiceInputs) -> Iterator[None]:
    """Layers called inside choose their kernels with `inputs`."""
    token = enter(inputs)
    try:
        yield
    finally:
        leave(token)


__all__ = ["DEFAULT_CHOICE", "DEFAULT_COSTS", "ChoiceInputs", "KernelCosts", "choosing", "current", "enter", "leave"]
