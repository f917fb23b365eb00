"""What the app shows of an ncnn model (plain data; nothing here imports Streamlit): each layer
with its numbered params named, its weights' storage, and which PNNX operators it came from.

    rows = layer_rows(ncnn_graph)                         # one dict a layer, for a table
    came = origins(ncnn_graph, pnnx_graph, chw_input)     # ncnn layer -> the PNNX operators it replaced

ncnn renames and renumbers: `convrelu_0` is a convolution with its ReLU fused (9=1), `splitncnn_3`
a fan-out ncnn needs and PyTorch has not, `gap_0` a global pooling. The PNNX operators behind a
layer are found by content: both graphs run on the same input (the PNNX one with the batch dim),
each blob lined up with the PNNX operand of the same size and nearest values (as `kuiper compare
--ncnn` does), and a layer's origins are the PNNX operators between the operands its bottoms
match and the one its top matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import Graph, Operator
from ..ncnn.graph import ncnn_type
from ..ncnn.schema import ACTIVATIONS, named

# Enumerations worth spelling out next to their number.
_MEANINGS: dict[tuple[str, str], dict[int, str]] = {
    ("*", "activation_type"): ACTIVATIONS,
    ("Pooling", "pooling_type"): {0: "max", 1: "avg"},
    ("Pooling", "pad_mode"): {0: "full (ceil)", 1: "valid", 2: "SAME upper", 3: "SAME lower"},
    ("BinaryOp", "op_type"): dict(
        enumerate(["add", "sub", "mul", "div", "max", "min", "pow", "rsub", "rdiv", "rpow", "atan2", "ratan2"])
    ),
    ("Eltwise", "op_type"): {0: "prod", 1: "sum", 2: "max"},
    ("Interp", "resize_type"): {1: "nearest", 2: "bilinear", 3: "bicubic"},
}
_PADS = {-233: "SAME upper", -234: "SAME lower"}


def param_text(layer_type: str, params: Mapping[str, Any]) -> list[str]:
    """`0=16` -> `num_output=16 (0)`; enumerations and SAME pads spelled out."""
    out = []
    for pid, name, value in named(layer_type, {int(k): v for k, v in params.items()}):
        meaning = _MEANINGS.get((layer_type, name)) or _MEANINGS.get(("*", name))
        said = f"{value}"
        if meaning is not None and isinstance(value, int) and value in meaning:
            said += f" ({meaning[int(value)]})"
        elif name.startswith("pad_") and isinstance(value, int) and value in _PADS:
            said += f" ({_PADS[value]})"
        out.append(f"{name}={said} [{pid}]")
    return out


def layer_rows(graph: Graph) -> list[dict[str, Any]]:
    rows = []
    for op in graph.operators:
        kind = ncnn_type(op.type)
        if kind is None:
            continue
        rows.append(
            {
                "layer": op.name,
                "type": kind,
                "bottoms": ", ".join(o.name for o in op.inputs),
                "tops": ", ".join(o.name for o in op.outputs),
                "params": "; ".join(param_text(kind, op.params)),
                "weights": ", ".join(f"{k} {a.shape} {a.dtype}" for k, a in op.attrs.items()),
                "line": op.line,
            }
        )
    return rows


def _values(graph: Graph, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    from ..runtime import RuntimeGraph

    run = RuntimeGraph.from_graph(graph).build().steps(*inputs)
    for _ in run:
        pass
    return {k: v for k, v in run.values.items() if isinstance(v, np.ndarray)}


def origins(ncnn_graph: Graph, pnnx_graph: Graph, inputs: list[np.ndarray]) -> dict[str, list[str]]:
    """ncnn layer -> the PNNX operators it stands for (empty for a Split: ncnn's own fan-out).
    `inputs`: the ncnn inputs (no batch dim); the PNNX graph runs them with one."""

    ours = _values(ncnn_graph, inputs)
    theirs = _values(pnnx_graph, [x[None] for x in inputs])
    matched = {blob: name for blob, (name, _, _) in align(ncnn_graph, ours, theirs).items()}
    producers = {o.name: op for op in pnnx_graph.operators for o in op.outputs}
    out: dict[str, list[str]] = {}
    for op in ncnn_graph.operators:
        kind = ncnn_type(op.type)
        if kind is None or kind == "Input":
            continue
        if kind == "Split":
            out[op.name] = []
            continue
        tops = [matched[o.name] for o in op.outputs if o.name in matched]
        bottoms = {matched[i.name] for i in op.inputs if i.name in matched}
        found: list[Operator] = []
        for top in tops:
            found += _between(producers.get(top), bottoms, producers)
        out[op.name] = list(dict.fromkeys(o.name for o in found if o.type not in ("pnnx.Input", "pnnx.Output")))
    return out


def _between(top: Operator | None, bottoms: set[str], producers: Mapping[str, Operator]) -> list[Operator]:
    """The operators from `top` back to (not including) the producers of `bottoms`: what one
    ncnn layer fused. Stops at the bottoms and at constants; a bounded walk."""
    if top is None:
        return []
    seen: dict[int, Operator] = {}
    todo = [top]
    while todo and len(seen) < 64:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen[id(op)] = op
        for operand in op.inputs:
            if operand.name in bottoms:
                continue
            producer = producers.get(operand.name)
            if producer is not None and producer.type not in ("pnnx.Input", "pnnx.Attribute"):
                todo.append(producer)
    return list(seen.values())[::-1] if bottoms else [top]


def ncnn_files_of(files: Any) -> tuple[Path, Path] | None:
    """The ncnn .param/.bin a converted model's files hold (kuiper_core.formats.PnnxFiles)."""
    param, binf = getattr(files, "ncnn_param", None), getattr(files, "ncnn_bin", None)
    return (param, binf) if param is not None and binf is not None else None


def deployed_rows(
    opened: Any, sample_input: np.ndarray | None, *, with_origins: bool
) -> tuple[str, list[dict[str, Any]]] | None:
    """The Graph page's ncnn view of an opened model (kuiper_core.formats.OpenedModel): a caption
    and one row a layer (with `from PNNX` when `with_origins` and both graphs can run on the
    sample input). None when the model has no ncnn files (a converted model keeps pnnx's)."""
    from ..ncnn import load_ncnn

    if opened is None:
        return None
    pnnx_graph: Graph | None = None
    if opened.format == "ncnn":
        graph = opened.graph
        caption = f"{opened.name}: the ncnn model itself ({len(layer_rows(graph))} layers)"
        if opened.source is not None:
            from ..formats.ncnn import pnnx_sibling

            sibling = pnnx_sibling(Path(opened.source))
            if sibling.is_file() and sibling.with_name(sibling.name.removesuffix(".param") + ".bin").is_file():
                from ..pnnx import load_graph

                pnnx_graph = load_graph(sibling)
        x = sample_input
    else:
        found = ncnn_files_of(opened.files)
        if found is None:
            return None
        graph = load_ncnn(*found)
        pnnx_graph = opened.graph
        caption = f"what pnnx wrote for ncnn in this conversion: {found[0]} ({len(layer_rows(graph))} layers)"
        x = None if sample_input is None else np.asarray(sample_input)[0]
    rows = layer_rows(graph)
    if with_origins and pnnx_graph is not None and x is not None:
        came = origins(graph, pnnx_graph, [np.asarray(x, np.float32)])
        for row in rows:
            parts = came.get(row["layer"])
            row["from PNNX"] = "(ncnn's own fan-out)" if row["type"] == "Split" else ", ".join(parts) if parts else "-"
    return caption, rows


# -- the engine's ncnn blobs beside PyTorch's values (here and in references/ncnn_compare.py) --
MATCH = 0.05  # a content match further than this is no match


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |b| (0 for empty blobs, inf for a shape mismatch, NaN where either
    has a NaN the other has not)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    if not a.size:
        return 0.0
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - b)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        diff[same] = 0.0
        scale = np.abs(b[np.isfinite(b)]).max(initial=0.0)
        return float(diff.max() / max(float(scale), 1e-30))


def align(
    graph: Graph, values: Mapping[str, Any], refs: Mapping[str, np.ndarray], expected: Sequence[np.ndarray] = ()
) -> dict[str, tuple[str, str, np.ndarray]]:
    """blob -> (the PyTorch value's name, how aligned, the value shaped as the blob)."""
    out: dict[str, tuple[str, str, np.ndarray]] = {}
    for i, y in enumerate(expected):
        name = f"out{i}"
        if name in graph.operands and np.asarray(y).size == np.asarray(values.get(name)).size:
            out[name] = (name, "name", np.asarray(y).reshape(np.shape(values[name])))
    by_size: dict[int, list[tuple[str, np.ndarray]]] = {}
    for name, ref in refs.items():
        a = np.asarray(ref)
        if a.dtype.kind == "f":
            by_size.setdefault(a.size, []).append((name, a))
    for blob in graph.operands:
        if blob in out or blob not in values:
            continue
        ours = np.asarray(values[blob])
        best: tuple[float, str, np.ndarray] | None = None
        for name, ref in by_size.get(ours.size, []):
            err = rel_error(ours, ref.reshape(ours.shape))
            if best is None or err < best[0]:
                best = (err, name, ref.reshape(ours.shape))
        if best is not None and best[0] < MATCH:
            out[blob] = (best[1], "content", best[2])
    return out
