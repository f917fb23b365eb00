"""Writer of a Graph back to `.param` + `.bin` in pnnx's own layout (Graph::save),
so that pnnx's tools and Netron read it and load -> save -> load gives the same graph."""

from __future__ import annotations

import zipfile
from typing import IO
from pathlib import Path

import numpy as np

from ..graph import Graph, ParamValue, file_dtype, float32_to_bf16, numpy_dtype
from .param import MAGIC, format_shape


def encode_value(value: ParamValue) -> str:
    """A param value as .param text (floats in shortest round-trip form)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        # pnnx reads a number as float only if it has '.' or 'e'.
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(encode_value(v) for v in value) + ")"
    raise TypeError(f"cannot encode parameter value {value!r}")


def format_param(graph: Graph) -> str:
    lines = [MAGIC, f"{len(graph.operators)} {len(graph.operands)}"]
    for op in graph.operators:
        parts = [f"{op.type:<24} {op.name:<24} {len(op.inputs)} {len(op.outputs)}"]
        parts += [o.name for o in op.inputs] + [o.name for o in op.outputs]
        parts += [f"{k}={encode_value(v)}" for k, v in sorted(op.params.items())]
        parts += [f"@{k}={format_shape(a.shape, a.dtype)}" for k, a in sorted(op.attrs.items())]
        parts += [f"${n}={o.name}" for n, o in zip(op.input_names, op.inputs) if n]
        parts += [f"#{o.name}={format_shape(o.shape, o.dtype)}" for o in op.inputs + op.outputs if o.shape is not None]
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def save(graph: Graph, param_path: str | Path, bin_path: str | Path | None = None) -> None:
    param_path = Path(param_path)
    bin_path = Path(bin_path) if bin_path is not None else default_bin_path(param_path)
    param_path.write_text(format_param(graph))
    save_bin(graph, bin_path)


def save_bin(graph: Graph, bin_path: str | Path | IO[bytes]) -> None:
    """The weights alone, as pnnx's store-only zip (for a graph saved as text elsewhere)."""
    with zipfile.ZipFile(bin_path, "w", compression=zipfile.ZIP_STORED) as zf:
        for op in graph.operators:
            for key, attr in sorted(op.attrs.items()):
                data = attr.data if attr.data is not None else np.zeros(attr.shape, numpy_dtype(attr.dtype))
                raw = (
                    float32_to_bf16(data)
                    if attr.dtype == "bf16"
                    else np.ascontiguousarray(data, file_dtype(attr.dtype))
                )
                zf.writestr(f"{op.name}.{key}", raw.tobytes())


def default_bin_path(param_path: str | Path) -> Path:
    """`m.pnnx.param` -> `m.pnnx.bin` (the sibling pnnx writes)."""
    p = Path(param_path)
    return p.with_suffix(".bin") if p.suffix == ".param" else p.with_name(p.name + ".bin")
