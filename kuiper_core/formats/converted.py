"""Opening a model the `pnnx` converter turns into PNNX first (ONNX, TorchScript)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..files import read_regular
from ..pnnx import load_weights, parse_param_bytes
from .base import Context, OpenedModel, installed, reference_info


def open_converted(context: Context, kind: str) -> OpenedModel:
    """Convert (or find in the cache), then read the PNNX files pnnx wrote."""
    from .convert import convert  # subprocess, selectors, hashing: only when converting

    opts = context.options
    source: Path | bytes = context.path if context.path is not None else context.data()
    if kind == "onnx":  # weights in a separate file (torch.onnx.export's default): made one file
        from ..budgets import MAX_ONNX_BYTES
        from .onnx_external import self_contained

        extra = opts.bin_path
        if isinstance(extra, (str, Path)):  # a FIFO would block, /dev/zero never end, a directory is no file
            extra = read_regular(
                extra,
                lambda why: ConversionError(f"cannot read the weights file {extra}: {why}"),
                max_bytes=MAX_ONNX_BYTES,
                limit="MAX_ONNX_BYTES",
            )
        source = self_contained(source, context.where, bytes(extra) if extra is not None else None)
    options = opts.conversion
    derived = (
        options.inputshape is None
        and options.inputs is not None
        and not fixes_input_shapes(source, kind, context.zip_names)
    )
    if derived:  # converted at the shapes it will run at: no size guessed, none baked but these
        assert options.inputs is not None
        options = replace(options, inputshape=shapes_of(options.inputs, zero_dim=kind == "onnx"))
    # Messages name the user's file, not the cache's path on this machine (the app shows them).
    label = f"{Path(context.where).name} (converted)"
    for attempt in (1, 2):  # a cache entry another process evicted between finding and reading it: once more
        try:
            files, conversion = convert(source, kind, options, name=context.where, zip_names=context.zip_names)
        except ConversionError as e:
            if not (derived and options.inputshape and _FIXED.search(e.log)):
                raise
            # the file fixes its input shapes after all: converted at those (the engine's batch rule follows the batch)
            options = replace(options, inputshape=None)
            files, conversion = convert(source, kind, options, name=context.where, zip_names=context.zip_names)
        assert files.param is not None and files.bin is not None
        try:
            graph = parse_param_bytes(files.param.read_bytes(), f"{label} {files.param.name}")
            if opts.weights:
                if not files.bin.is_file():
                    raise FileNotFoundError(files.bin)
                load_weights(graph, files.bin, name=f"{label} {files.bin.name}")
            break
        except FileNotFoundError:
            if attempt == 2:
                raise ConversionError(
                    f"{context.where}: the converted files vanished from the conversion cache twice while read: "
                    "is another process clearing it?"
                ) from None
    model = OpenedModel(graph, kind, context.where, context.path, files, conversion, reference_info(kind, files))
    if opts.weights and options.check and options.checker is not None:
        model.check = options.checker(model, options.inputs, options.timeout)
    return model


_FIXED = re.compile(r"input_shapes\[\d+\] expect \S+ but got")  # pnnx: an inputshape other than the file's


def fixes_input_shapes(source: Path | bytes, kind: str, zip_names: Sequence[str] | None) -> bool:
    """Whether the file fixes its input shapes, which pnnx then takes and no others: a TorchScript
    module that records its traced inputs, an ONNX model whose inputs have no dynamic dim (read
    with the onnx package when installed; without it, False: the converter says so if it does)."""
    from .convert import records_input_shapes

    if kind == "torchscript":
        return records_input_shapes(zip_names)
    if not installed("onnx"):
        return False
    import onnx

    try:
        model = (
            onnx.load_from_string(source)
            if isinstance(source, bytes)
            else onnx.load(str(source), load_external_data=False)
        )
    except Exception:  # noqa: BLE001  -- a file onnx cannot read: the converter says what is wrong
        return False
    initializers = {i.name for i in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        if not dims and not value.type.tensor_type.HasField("shape"):
            return False
        if any(d.dim_param or d.dim_value <= 0 for d in dims):
            return False
    return True


_PNNX_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32"}
_PNNX_DTYPES |= {"int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}


def shapes_of(inputs: Sequence[Any], zero_dim: bool = False) -> str | None:
    """pnnx's inputshape (`[1,3,224,224]f32,[1,10]i64`) of the arrays a model will run on;
    None when one cannot be said that way (a dtype it has no name for; a 0-d input unless
    `zero_dim`: pnnx takes no `[]`, which onnx_prepare.py writes into an ONNX file instead)."""
    parts = []
    for x in inputs:
        a = np.asarray(x)
        dtype = _PNNX_DTYPES.get(a.dtype.name)
        if (a.ndim == 0 and not zero_dim) or dtype is None:
            return None
        suffix = "" if a.dtype.kind == "f" else dtype  # floats: pnnx's default f32 (a float64 .npy is cast on input)
        parts.append("[" + ",".join(str(d) for d in a.shape) + "]" + suffix)
    return ",".join(parts) or None
