"""The default pipeline and `optimize()`, the one call the CLI and the app make.

Levels (the PassContext's opt level decides which passes run, TVM's rule):
  0  nothing
  1  safe clean-ups that never change a number: FoldConstantParams, UnpackLists,
     RemoveNoOps, EliminateCommonSubexpr, RemoveUnused
  2  everything: also FoldStaticShapes, FoldConstants, FoldStaticWeights, FoldBatchNorm,
     FoldPadIntoConv, FuseSlices, FusePatterns, FuseAttention, FuseExpressions

The sequence repeats until a round changes nothing (one pass's result is often another's
opportunity: a folded shape makes a reshape a no-op, a removed no-op lets two
expressions fuse).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence

from ..errors import ModelError
from ..graph import Graph
from . import attention, batchnorm, constants, cse, dce, fuse, lists, noops, pad, patterns, slices, static_weights
from .instruments import IRSnapshots, PassInstrument, PassLog
from .manager import Pass, PassContext, Sequential
from .rewrite import clone_graph
from .verify import verify_graph

# Order within one round (pnnx's pass_level5 runs them in a similar order).
PIPELINE_ORDER: tuple[str, ...] = (
    "FoldConstantParams",
    "UnpackLists",
    "FoldStaticShapes",
    "RemoveNoOps",
    "FoldConstants",
    "EliminateCommonSubexpr",
    "FoldStaticWeights",
    "FoldBatchNorm",
    "FoldPadIntoConv",
    "FuseSlices",
    "FusePatterns",
    "FuseAttention",
    "FuseExpressions",
    "RemoveUnused",
)

# Every pass, by name: the pipeline names them here, nothing registers itself on import.
PASSES: dict[str, Pass] = {
    p.info.name: p
    for p in (
        constants.fold_constant_params,
        lists.unpack_lists,
        constants.fold_static_shapes,
        noops.remove_noops,
        constants.fold_constants,
        cse.eliminate_common_subexpr,
        static_weights.fold_static_weights,
        batchnorm.fold_batchnorm,
        pad.fold_pad_into_conv,
        slices.fuse_slices,
        patterns.fuse_patterns,
        attention.fuse_attention,
        fuse.fuse_expressions,
        dce.remove_unused,
    )
}


def registered_passes() -> dict[str, Pass]:
    """Every pass by name (for --disable/--require and `required`)."""
    return dict(PASSES)


def default_pipeline(names: Sequence[str] | None = None) -> Sequential:
    """The passes in pipeline order (or only `names`, in the order given), to a fixed point."""
    chosen = list(names) if names is not None else list(PIPELINE_ORDER)
    return Sequential([PASSES[n] for n in chosen], "Optimize", fixed_point=True, known=PASSES)


@dataclass
class OptimizeResult:
    before: Graph  # the graph given (untouched)
    after: Graph  # the optimised copy
    log: PassLog
    snapshots: IRSnapshots | None = None
    changed: bool = False
    passes_run: list[str] = field(default_factory=list)


def optimize(
    graph: Graph,
    opt_level: int = 2,
    *,
    disabled: Iterable[str] = (),
    required: Iterable[str] = (),
    passes: Sequence[str] | None = None,
    instruments: Sequence[PassInstrument] = (),
    snapshots: bool = False,
    config: dict | None = None,
) -> OptimizeResult:
    """Optimise a copy of `graph` (the given graph is never modified).

    `passes` picks passes by name (each still needs to be enabled: required, or within the
    level); `snapshots` keeps the graph's text before and after every changing pass.
    """
    log = PassLog()
    snaps = IRSnapshots() if snapshots else None
    insts: list[PassInstrument] = [log] + ([snaps] if snaps else []) + list(instruments)
    try:
        verify_graph(graph)
    except ModelError as e:
        raise ModelError(
            f"the graph to optimise is invalid before any pass: {e.message}", operator=e.operator, op_type=e.op_type
        ) from e
    work = clone_graph(graph)
    with PassContext(
        opt_level, required=required, disabled=disabled, instruments=insts, config=config, known=PASSES
    ) as ctx:
        after, changed = default_pipeline(passes)(work)
        history = list(ctx.history)
    return OptimizeResult(graph, after, log, snaps, changed, history)


def pass_names() -> list[str]:
    return list(PIPELINE_ORDER)


def pass_table() -> list[dict[str, object]]:
    """Name, level, required passes and description of every pass (pipeline order)."""
    rows = []
    for name in PIPELINE_ORDER:
        info = PASSES[name].info
        rows.append(
            {"name": name, "level": info.opt_level, "requires": ", ".join(info.required), "what": info.description}
        )
    return rows
