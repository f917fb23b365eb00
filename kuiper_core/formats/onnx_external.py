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

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..budgets import MAX_ONNX_BYTES, MAX_PROTOBUF_DEPTH, MAX_PROTOBUF_FIELDS, over
from ..errors import ConversionError, KuiperError
from ..files import check_regular, read_regular


# Every message of onnx.proto by field number: which field holds which message ("leaf": one
# with no message fields). The walk visits them all, so every field protobuf would make an
# object of is counted before it parses the file: a ValueInfo whose shape lists 20,000,000
# dims is 40 MB of wire and 1.6 GB parsed, and a walk of the tensors' messages alone missed it
# (tests/test_robustness_uploads.py checks this table against onnx's own descriptors).
_MESSAGES: dict[str, dict[int, str]] = {
    "model": {7: "graph", 8: "leaf", 14: "leaf", 20: "training", 25: "function", 26: "leaf"},
    "training": {1: "graph", 2: "graph", 3: "leaf", 4: "leaf"},
    "function": {7: "node", 9: "leaf", 11: "attribute", 12: "value_info", 14: "leaf"},
    "graph": {1: "node", 5: "tensor", 11: "value_info", 12: "value_info", 13: "value_info", 14: "annotation"}
    | {15: "sparse", 16: "leaf"},
    "node": {5: "attribute", 9: "leaf", 10: "device"},
    "device": {2: "sharding"},
    "sharding": {3: "leaf", 4: "sharded_dim"},
    "sharded_dim": {2: "leaf"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph", 14: "type", 15: "type", 22: "sparse"}
    | {23: "sparse"},
    "sparse": {1: "tensor", 2: "tensor"},
    "tensor": {3: "leaf", 16: "leaf"},  # 13 (external_data) is counted as found, not walked
    "value_info": {2: "type", 4: "leaf"},
    "type": {1: "tensor_type", 4: "elem_type", 5: "map_type", 7: "leaf", 8: "tensor_type", 9: "elem_type"},
    "tensor_type": {2: "shape"},  # TypeProto.Tensor and .SparseTensor
    "elem_type": {1: "type"},  # TypeProto.Sequence and .Optional
    "map_type": {2: "type"},
    "shape": {1: "leaf"},
    "annotation": {2: "leaf"},
    "leaf": {},
}
_EXTERNAL_DATA, _DATA_LOCATION = 13, 14  # TensorProto's fields; data_location 1 is EXTERNAL


class _Wire:
    """A bounded walk over protobuf's wire format: how many TensorProtos say their data is
    external (an `external_data` entry or `data_location: EXTERNAL`), however their varints
    are written (a byte search for `location` missed an overlong length)."""

    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.name, self.fields = data, name, 0

    def _bad(self, at: int, what: str) -> ConversionError:
        return ConversionError(f"{self.name}: not a readable ONNX model: byte {at:,}: {what}")

    def _varint(self, at: int, end: int) -> tuple[int, int]:
        value, shift, start = 0, 0, at
        while True:
            if at >= end:
                raise self._bad(start, "a number runs past the end of its message")
            byte = self.data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, at
            shift += 7
            if shift >= 70:
                raise self._bad(start, "a number longer than 10 bytes")

    def external(self, kind: str = "model", at: int = 0, end: int | None = None, depth: int = 0) -> int:
        data = self.data
        end = len(data) if end is None else end
        if depth > MAX_PROTOBUF_DEPTH:
            raise self._bad(at, f"messages nested more than {MAX_PROTOBUF_DEPTH} deep")
        found, inner, tensor = 0, _MESSAGES[kind], kind == "tensor"
        while at < end:
            self.fields += 1
            if self.fields > MAX_PROTOBUF_FIELDS:
                raise over(
                    f"{self.name} holds more than {MAX_PROTOBUF_FIELDS:,} protobuf fields",
                    "MAX_PROTOBUF_FIELDS",
                    MAX_PROTOBUF_FIELDS,
                )
            start = at
            key = data[at]  # one byte for the fields ONNX writes; _varint for the rest
            if key < 0x80:
                at += 1
            else:
                key, at = self._varint(at, end)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, at = (data[at], at + 1) if at < end and data[at] < 0x80 else self._varint(at, end)
                if tensor and number == _DATA_LOCATION and value == 1:
                    found += 1
            elif wire == 2:
                size, at = (data[at], at + 1) if at < end and data[at] < 0x80 else self._varint(at, end)
                if at + size > end:
                    raise self._bad(start, f"field {number} of {size:,} bytes runs past the end of its message")
                if tensor and number == _EXTERNAL_DATA:
                    found += 1
                elif number in inner:
                    found += self.external(inner[number], at, at + size, depth + 1)
                at += size
            elif wire == 1 or wire == 5:
                at += 8 if wire == 1 else 4
                if at > end:
                    raise self._bad(start, "a field runs past the end of its message")
            else:
                raise self._bad(start, f"field {number} has wire type {wire}, which ONNX does not write")
        return found


def external_tensors(data: bytes, name: str = "the model") -> int:
    """How many tensors of an .onnx keep their data in a separate file, from a walk of its
    protobuf (every graph, function and attribute). ConversionError at the byte where the
    file is no protobuf."""
    return _Wire(data, name).external()


def may_have_external_data(data: bytes) -> bool:
    """Whether an .onnx keeps some weights in a separate file (the page then asks for it);
    False for bytes that are no ONNX model (opening says what is wrong)."""
    try:
        return external_tensors(data) > 0
    except KuiperError:
        return False


def _graph_tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of a GraphProto: initializers (sparse ones too) and node attributes,
    subgraphs too."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    yield from _node_tensors(graph.node)


def _node_tensors(nodes: Any) -> Iterator[Any]:
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sparse in [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []:
                yield from (sparse.values, sparse.indices)
            for sparse in attr.sparse_tensors:
                yield from (sparse.values, sparse.indices)
            for sub in [attr.g] if attr.HasField("g") else []:
                yield from _graph_tensors(sub)
            for sub in attr.graphs:
                yield from _graph_tensors(sub)


def _tensors(model: Any) -> Iterator[Any]:
    """Every TensorProto of a ModelProto: its graph's, its functions' and its training graphs'
    (what _Wire walks)."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        yield from _node_tensors(function.node)
    for training in model.training_info:
        yield from _graph_tensors(training.initialization)
        yield from _graph_tensors(training.algorithm)


def parse_model(raw: bytes, name: str) -> Any:
    """The ModelProto of `raw` once the walk counted its fields within MAX_PROTOBUF_FIELDS
    (LimitError otherwise); ConversionError when it is no ONNX model. Every parse of an
    .onnx in the caller's process goes through here or follows external_tensors."""
    external_tensors(raw, name)
    return _parse(raw, name)


def _parse(raw: bytes, name: str) -> Any:
    """The ModelProto of `raw` (walked by external_tensors first); ConversionError (not
    protobuf's DecodeError) when it is none."""
    import onnx

    try:
        return onnx.load_model_from_string(raw)
    except Exception as e:  # noqa: BLE001 -- google.protobuf's DecodeError and friends
        raise ConversionError(f"{name}: not a readable ONNX model ({type(e).__name__}: {str(e)[:200]})") from None


def external_files(data: bytes) -> list[str]:
    """The plain file names an .onnx's external tensors name ([] when none, or when the onnx
    package is not installed: self_contained then says what to install)."""
    if not may_have_external_data(data):
        return []
    try:
        from onnx.external_data_helper import ExternalDataInfo, uses_external_data

        names = {ExternalDataInfo(t).location for t in _tensors(_parse(data, "")) if uses_external_data(t)}
    except (ImportError, ConversionError, ValueError):  # not readable here: the conversion reports it
        return []
    return sorted(n for n in names if n and Path(n).name == n and n not in (".", ".."))


def _file_size(path: Path, name: str, location: str) -> int:
    def error(why: str) -> ConversionError:
        return ConversionError(
            f"{name} keeps its weights in {location}, which is not beside it ({why}): put the file "
            "torch.onnx.export wrote with the model there"
        )

    return check_regular(path, error)


def self_contained(source: Path | bytes, name: str, data: bytes | None = None) -> Path | bytes:
    """`source` unchanged when it holds its weights, else the model with its external data
    read in (bytes). `data`: the one external file's bytes (an upload's; else read beside the model).
    ConversionError naming the missing file, or saying to install onnx, when it cannot be done.
    Every tensor's bytes are counted before any is copied: 200 tensors naming one 16 MiB file
    are 3.2 GB to copy, not 16 MiB."""
    raw = (
        read_regular(source, _unreadable(name), max_bytes=MAX_ONNX_BYTES, limit="MAX_ONNX_BYTES")
        if isinstance(source, Path)
        else source
    )
    if external_tensors(raw, name) == 0:
        return source
    try:
        import onnx
        from onnx.external_data_helper import ExternalDataInfo, uses_external_data
    except ImportError:
        raise ConversionError(
            f"{name} keeps its weights in a separate file (ONNX external data, what torch.onnx.export writes "
            "by default): reading it needs the onnx package (pip install onnx), or export the model as one file "
            "(torch.onnx.export(..., external_data=False))"
        ) from None
    model = _parse(raw, name)
    external = [t for t in _tensors(model) if uses_external_data(t)]
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
                f"{name} names its external weights {location[:200]!r}: only a file beside the model is read "
                "(a plain file name)"
            )
    if data is not None and len(locations) == 1:
        sizes = {locations[0]: len(data)}
    elif isinstance(source, Path):
        sizes = {loc: _file_size(source.parent / loc, name, loc) for loc in locations}
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
    total = len(raw)  # each reference copies its bytes, however many name the same file
    for tensor, info in zip(external, infos):
        start = info.offset or 0
        end = sizes[info.location] if info.length is None else start + info.length
        if end > sizes[info.location]:
            raise ConversionError(
                f"{name}: the tensor {tensor.name[:200]!r} lies past the end of {info.location} "
                f"({sizes[info.location]:,} bytes): the file is cut short or belongs to another export"
            )
        total += max(0, end - start)
        if total > MAX_ONNX_BYTES:
            raise over(
                f"{name} with its external weights would be {total:,} bytes (counted per tensor: "
                f"{len(external):,} tensors name {len(locations)} file(s)), past ONNX's 2 GiB",
                "MAX_ONNX_BYTES",
                MAX_ONNX_BYTES,
                total,
            )
    files = {locations[0]: data} if data is not None and len(locations) == 1 else {}
    for loc in locations:
        if loc not in files:
            assert isinstance(source, Path)
            files[loc] = read_regular(
                source.parent / loc, _unreadable(f"{name}'s {loc}"), max_bytes=sizes[loc], limit="MAX_ONNX_BYTES"
            )
    for tensor, info in zip(external, infos):
        blob = files[info.location]
        start = info.offset or 0
        end = len(blob) if info.length is None else start + info.length
        if end > len(blob):  # it shrank since it was measured
            raise ConversionError(f"{name}: {info.location} changed while it was read")
        tensor.raw_data = blob[start:end]
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    return model.SerializeToString()


def _unreadable(name: str) -> Callable[[str], ConversionError]:
    return lambda why: ConversionError(f"cannot read {name}: {why}")
