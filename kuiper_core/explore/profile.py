"""Per-operator profile: time, parameters, multiply-accumulates, output memory, and how the
layer computes where it picks among ways (a convolution's kernel: Winograd, im2col, ...).

Times come from `RuntimeGraph.steps()` (each operator timed on its own); with several
repeats the fastest run of each operator is kept, the usual way to damp scheduler noise
on a shared machine. MACs come from each layer's `flops()` at the shapes actually seen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from collections.abc import Sequence

import numpy as np

from ..errors import KuiperError
from ..graph import shape_label
from ..runtime import RuntimeGraph, StepEvent
from .categories import category
from .summary import operator_parameters


@dataclass
class OperatorProfile:
    index: int  # position in execution order
    name: str
    type: str
    category: str
    seconds: float
    parameters: int
    macs: int
    output_bytes: int  # bytes of the output arrays (tuples of other outputs count 0)
    output_shapes: str
    kernel: str = ""  # Layer.kernel_name at the shapes seen, e.g. "Winograd F(4x4, 3x3)"


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, np.ndarray) else ()


def _nbytes(value: Any) -> int:
    return int(value.nbytes) if isinstance(value, np.ndarray) else 0


def event_kernel(runtime: RuntimeGraph, event: StepEvent) -> str:
    """The kernel the operator of a step ran, at the shapes it saw (Layer.kernel_name; "" where
    its layer has no choice to make)."""
    layer = runtime.order[event.index].layer
    if layer is None:
        return ""
    return runtime.kernel_name(layer, [_shape(event.inputs[o.name]) for o in event.operator.inputs])


def declared_kernel(runtime: RuntimeGraph, name: str) -> str:
    """The kernel an operator will run at the input shapes its .param declares ("" where it has
    no choice, or a declared shape is missing or has `?` dims)."""
    rop = next((r for r in runtime.order if r.name == name), None)
    if rop is None or rop.layer is None:
        return ""
    shapes = [s for o in rop.op.inputs if (s := o.static_shape) is not None]
    if len(shapes) != len(rop.op.inputs):
        return ""
    try:
        return runtime.kernel_name(rop.layer, shapes)
    except KuiperError:  # declared shapes the layer cannot run (its forward would say so)
        return ""


def profile_model(runtime: RuntimeGraph, inputs: Sequence[np.ndarray], repeats: int = 1) -> list[OperatorProfile]:
    """Run the model `repeats` times through steps() and profile every operator."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    rows: list[OperatorProfile] = []
    for r in range(repeats):
        for event in runtime.steps(*inputs):
            if r > 0:
                row = rows[event.index]
                row.seconds = min(row.seconds, event.seconds)
                continue
            rop = runtime.order[event.index]
            op = event.operator
            # From the event, not runtime.values: a cached graph may be stepped by another session.
            in_shapes = [_shape(event.inputs[o.name]) for o in op.inputs]
            outs = [event.outputs[o.name] for o in op.outputs]
            out_shapes = [_shape(v) for v in outs]
            macs = rop.layer.flops(in_shapes, out_shapes) if rop.layer is not None else 0
            rows.append(
                OperatorProfile(
                    index=event.index,
                    name=op.name,
                    type=op.type,
                    category=category(op.type),
                    seconds=event.seconds,
                    parameters=operator_parameters(op),
                    macs=int(macs),
                    output_bytes=sum(_nbytes(v) for v in outs),
                    output_shapes=", ".join(
                        shape_label(s) if isinstance(v, np.ndarray) else "tuple" for s, v in zip(out_shapes, outs)
                    ),
                    kernel=event_kernel(runtime, event),
                )
            )
    return rows


def profile_table(rows: Sequence[OperatorProfile]) -> list[dict[str, Any]]:
    """Rows for a sortable table: # (execution position from 1), time in ms and % of the
    total, MACs, memory in KiB."""
    total = sum(r.seconds for r in rows) or 1.0
    table = []
    for r in rows:
        d = asdict(r)
        d = {"#": d.pop("index") + 1, **d}  # numbered from 1, like the Forward page
        seconds = d.pop("seconds")
        d["time_ms"] = seconds * 1e3
        d["time_%"] = 100.0 * seconds / total
        d["output_KiB"] = d.pop("output_bytes") / 1024
        table.append(d)
    return table


@dataclass
class ProfileTotals:
    operators: int
    seconds: float
    parameters: int
    macs: int
    output_bytes: int


def profile_totals(rows: Sequence[OperatorProfile]) -> ProfileTotals:
    return ProfileTotals(
        operators=len(rows),
        seconds=sum(r.seconds for r in rows),
        parameters=sum(r.parameters for r in rows),
        macs=sum(r.macs for r in rows),
        output_bytes=sum(r.output_bytes for r in rows),
    )


def top_operators(rows: Sequence[OperatorProfile], key: str = "seconds", n: int = 15) -> list[OperatorProfile]:
    """The n operators with the largest `key` (seconds, macs, parameters, output_bytes)."""
    if key not in ("seconds", "macs", "parameters", "output_bytes"):
        raise ValueError(f"cannot rank operators by {key!r}")
    return sorted(rows, key=lambda r: getattr(r, key), reverse=True)[:n]


def by_type(rows: Sequence[OperatorProfile]) -> list[dict[str, Any]]:
    """Time and MACs summed per operator type, slowest type first."""
    acc: dict[str, dict[str, Any]] = {}
    for r in rows:
        a = acc.setdefault(r.type, {"type": r.type, "count": 0, "time_ms": 0.0, "macs": 0})
        a["count"] += 1
        a["time_ms"] += r.seconds * 1e3
        a["macs"] += r.macs
    return sorted(acc.values(), key=lambda a: -a["time_ms"])
