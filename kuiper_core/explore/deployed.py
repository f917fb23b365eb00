"""The Forward page's "ours vs ncnn vs PyTorch", as plain data: per operator run so far, how far
our output is from the deployed ncnn model's blob and from PyTorch's value, and how far ncnn's
is from PyTorch's (relative errors, max |a - b| / max |b|, as `kuiper compare --ncnn` prints),
and the "why it differs" table of ncnn re-run per option (references/ncnn_compare.py).

The values come from references/ncnn_deployed.py (ncnn's, keyed by our operands) and from
whatever PyTorch reference the session has (pnnx's code, the bundled tensors, the framework's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .compare import checked_values
from .ncnn_view import rel_error

OURS_NCNN, OURS_TORCH, NCNN_TORCH = "ours vs ncnn", "ours vs PyTorch", "ncnn vs PyTorch"
ERROR_COLUMNS = (OURS_NCNN, OURS_TORCH, NCNN_TORCH)


def _worst(errors: list[float]) -> float | None:
    return max(errors) if errors else None


def operator_row(
    event: Any, ncnn: Mapping[str, np.ndarray], torch: Mapping[str, np.ndarray], blobs: Mapping[str, str]
) -> dict[str, Any]:
    """One operator (a StepEvent): its outputs' worst relative error each way (None: no value to
    compare with), and the ncnn blobs they are."""
    outs = {k: v for k, v in checked_values(event).items() if isinstance(v, np.ndarray)}
    ours_ncnn = [rel_error(v, ncnn[o]) for o, v in outs.items() if o in ncnn]
    ours_torch = [rel_error(v, torch[o]) for o, v in outs.items() if o in torch]
    ncnn_torch = [rel_error(ncnn[o], torch[o]) for o in outs if o in ncnn and o in torch]
    return {
        "#": event.index + 1,
        "operator": event.name,
        "type": event.type,
        "ncnn blob": ", ".join(dict.fromkeys(blobs.get(o, "") for o in outs if o in ncnn)),
        OURS_NCNN: _worst(ours_ncnn),
        OURS_TORCH: _worst(ours_torch),
        NCNN_TORCH: _worst(ncnn_torch),
    }


def operator_rows(
    events: Iterable[Any], ncnn: Mapping[str, np.ndarray], torch: Mapping[str, np.ndarray], blobs: Mapping[str, str]
) -> list[dict[str, Any]]:
    return [operator_row(e, ncnn, torch, blobs) for e in events]


def step_text(row: Mapping[str, Any]) -> str:
    """The current step in one line: 'ncnn blob `5`: ours vs ncnn 7.3e-08 · ours vs PyTorch 2.1e-06 · …'."""
    if not row["ncnn blob"]:
        return "no ncnn blob is this operator's output (fused into a layer, or not in the deployed model)"
    parts = [f"{k} {_e(row[k])}" for k in (OURS_NCNN, OURS_TORCH, NCNN_TORCH) if row[k] is not None]
    return f"ncnn blob `{row['ncnn blob']}`: " + " · ".join(parts)


def _e(v: float) -> str:
    return "inf (shapes differ)" if v == float("inf") else f"{v:.2e}"


def option_rows(report: Any) -> list[dict[str, Any]]:
    """The "why it differs" table: one row per ncnn run (an option on alone, the weights stored
    the other way, ncnn's defaults), its final error and the first layer over the tolerance."""
    return [
        {
            "ncnn run": r.label,
            f"final error vs {report.reference}": r.final_error,
            f"first layer over {report.jump:g}": r.first_layer or "-",
            "its error": r.first_error,
        }
        for r in report.runs
    ]
