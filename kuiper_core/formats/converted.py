"""Opening a model the `pnnx` converter turns into PNNX first (ONNX, TorchScript)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConversionError
from ..files import read_regular
from ..pnnx import load_weights, parse_param_bytes
from .base import Context, OpenedModel, reference_info


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
    # Messages name the user's file, not the cache's path on this machine (the app shows them).
    label = f"{Path(context.where).name} (converted)"
    for attempt in (1, 2):  # a cache entry another process evicted between finding and reading it: once more
        files, conversion = convert(source, kind, opts.conversion, name=context.where, zip_names=context.zip_names)
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
    return OpenedModel(graph, kind, context.where, context.path, files, conversion, reference_info(kind, files))
