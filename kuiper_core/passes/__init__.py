"""Graph passes: a pass manager after TVM's (PassContext, PassInfo, Sequential,
instruments) and the optimisations pnnx and TVM make, over `kuiper_core.graph.Graph`.

    from kuiper_core.passes import optimize
    result = optimize(graph, opt_level=2)          # a new graph; `graph` is untouched
    for row in result.log.rows: print(row.name, row.ops_before, row.ops_after, row.summary)

Modules: manager.py (passes, context, Sequential), instruments.py (observers), verify.py
(the checker run after every pass), rewrite.py and expr_tools.py (the helpers passes share),
one module per pass family, pipeline.py (levels and `optimize`).
"""

from .instruments import IRSnapshots, PassInstrument, PassLog, PassRecord, PrintAfter, ShouldRun, Snapshot
from .manager import (
    Change,
    FunctionPass,
    Pass,
    PassContext,
    PassError,
    PassInfo,
    Sequential,
    graph_pass,
    record,
)
from .pipeline import (
    PIPELINE_ORDER,
    OptimizeResult,
    default_pipeline,
    optimize,
    pass_names,
    pass_table,
    registered_passes,
)
from .rewrite import clone_graph
from .text import graph_text
from .verify import GraphVerifyError, verify_graph

__all__ = [
    "Change",
    "FunctionPass",
    "GraphVerifyError",
    "IRSnapshots",
    "OptimizeResult",
    "PIPELINE_ORDER",
    "Pass",
    "PassContext",
    "PassError",
    "PassInfo",
    "PassInstrument",
    "PassLog",
    "PassRecord",
    "PrintAfter",
    "Sequential",
    "ShouldRun",
    "Snapshot",
    "clone_graph",
    "default_pipeline",
    "graph_pass",
    "graph_text",
    "optimize",
    "pass_names",
    "pass_table",
    "record",
    "registered_passes",
    "verify_graph",
]
