"""ONNX models whose weights live in separate files (external data), made self-contained.

`torch.onnx.export` writes `model.onnx` + `model.onnx.data` by default since torch 2.9 (the
dynamo exporter); `onnx.save(..., save_as_external_data=True)` does the same for any model.
pnnx and onnxruntime read such files only from beside the model, and the conversion runs in a
private folder: the model is made one file (the `onnx` package reads the data in) before it is
converted, so the cache key covers the weights too and the kept source runs in onnxruntime.

The data files are looked up beside the model (a path) or given (an upload: `data`); a
location must be a plain file name (no folder, no `..`): a model file cannot make us read
anything else on the machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConversionError

# TensorProto.external_data's entry {key: "location"}: field 1, 8 bytes, "location"
_LOCATION = b"\n\x08location"
_MAX_BYTES = 2**31 - 1  # one protobuf message


def may_have_external_data(data: bytes) -> bool:
    """A cheap look before parsing: every external tensor names its `location`."""
    return _LOCATION in data


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of a GraphProto: initializers and node attributes, subgraphs too."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sub in [attr.g] if attr.HasField("g") else []:
                yield from _tensors(sub)
            for sub in attr.graphs:
                yield from _tensors(sub)


def external_files(data: bytes) -> list[str]:
    """The plain file names an .onnx's external tensors name ([] when none, or when the onnx
    package is not installed: self_contained then says what to install)."""
    if not may_have_external_data(data):
        return []
    try:
        import onnx
        from onnx.external_data_helper import ExternalDataInfo, uses_external_data
    except ImportError:
        return []
    try:
        model = onnx.load_model_from_string(data)
        names = {ExternalDataInfo(t).location for t in _tensors(model.graph) if uses_external_data(t)}
    except Exception:  # not readable here: the conversion reports it
        return []
    return sorted(n for n in names if n and Path(n).name == n and n not in (".", ".."))


def self_contained(source: Path | bytes, name: str, data: bytes | None = None) -> Path | bytes:
    """`source` unchanged when it holds its weights, else the model with its external data
    read in (bytes). `data`: the one external file's bytes (an upload's; else read beside the model).
    ConversionError naming the missing file, or saying to install onnx, when it cannot be done."""
    raw = source.read_bytes() if isinstance(source, Path) else source
    if not may_have_external_data(raw):
        return source
    try:
        import onnx
        from onnx.external_data_helper import ExternalDataInfo, uses_external_data
    except ImportError:
        raise ConversionError(
            f"{name} may keep its weights in a separate file (ONNX external data, what torch.onnx.export writes "
            "by default): reading it needs the onnx package (pip install onnx), or export the model as one file "
            "(torch.onnx.export(..., external_data=False))"
        ) from None
    model = onnx.load_model_from_string(raw)
    external = [t for t in _tensors(model.graph) if uses_external_data(t)]
    if not external:
        return source
    try:
        infos = [ExternalDataInfo(t) for t in external]
    except ValueError as e:  # a negative offset or length
        raise ConversionError(f"{name}: {e}") from None
    locations = sorted({info.location for info in infos})
    for location in locations:
        if Path(location).name != location or location in ("", ".", ".."):
            raise ConversionError(
                f"{name} names its external weights {location!r}: only a file beside the model is read "
                "(a plain file name)"
            )
    files: dict[str, bytes] = {}
    if data is not None and len(locations) == 1:
        files = {locations[0]: data}
    elif isinstance(source, Path):
        missing = [loc for loc in locations if not (source.parent / loc).is_file()]
        if missing:
            raise ConversionError(
                f"{name} keeps its weights in {', '.join(missing)}, which is not beside it in {source.parent}: "
                "put it there (torch.onnx.export writes both files together)"
            )
        files = {loc: (source.parent / loc).read_bytes() for loc in locations}
    else:
        raise ConversionError(
            f"{name} keeps its weights in a separate file, {', '.join(locations)} (ONNX external data): "
            + (
                "give that file too (in the app: the weights uploader, beside the .onnx)"
                if len(locations) == 1
                else "open the model from a folder holding those files, or save it as one file: "
                "onnx.save(onnx.load('model.onnx'), 'one.onnx')"
            )
        )
    total = sum(len(b) for b in files.values()) + len(raw)
    if total > _MAX_BYTES:
        raise ConversionError(f"{name} with its external weights is {total / 2**30:.1f} GiB: past ONNX's 2 GiB")
    for tensor, info in zip(external, infos):
        blob = files[info.location]
        start = info.offset or 0
        end = len(blob) if info.length is None else start + info.length
        if end > len(blob):
            raise ConversionError(
                f"{name}: the tensor {tensor.name!r} lies past the end of {info.location} "
                f"({len(blob)} bytes): the file is cut short or belongs to another export"
            )
        tensor.raw_data = blob[start:end]
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    return model.SerializeToString()
