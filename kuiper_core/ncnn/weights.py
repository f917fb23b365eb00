"""Reader of ncnn's `.ncnn.bin`: the layers' weight blobs back to back, in layer order.

A flagged blob (ncnn's ModelBin type 0) starts with a 4-byte flag word:
  0x01306B47   fp16 values (what pnnx writes by default), padded to 4 bytes
  0x000D4B38   int8 values, padded to 4 bytes (only meaningful with int8 scales)
  0x0002C056   fp32 values
  0 (all four bytes zero)  fp32 values
  other non-zero bytes     table-quantized: 256 fp32 levels, then one uint8 index a value
An unflagged blob (type 1: biases, norms' statistics, MemoryData) is raw fp32.

The storage is kept (`Attribute.dtype` "f16" for fp16 weights, "f32" otherwise): ncnn widens
fp16 weights to fp32 at load, so the engine computes with exactly the values the phone has.
Every size is checked against the bytes left and max_tensor_elements before reading.
"""

from __future__ import annotations

import numpy as np

from .. import limits as _limits
from ..errors import WeightError
from ..graph import Attribute
from .param import NcnnLayer
from .schema import WeightSpec, weights

FP16_TAG = 0x01306B47
INT8_TAG = 0x000D4B38
FP32_TAG = 0x0002C056


def _align4(n: int) -> int:
    return (n + 3) & ~3


class BinReader:
    def __init__(self, data: bytes, name: str) -> None:
        self.data = memoryview(data)
        self.name = name
        self.pos = 0

    def _take(self, n: int, layer: NcnnLayer, what: str) -> memoryview:
        if self.pos + n > len(self.data):
            raise WeightError(
                f"{self.name} ends at byte {len(self.data):,}: the {what} needs {n:,} bytes from byte {self.pos:,} "
                "(is this the .bin written with this .param?)",
                operator=layer.name,
                op_type=layer.type,
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def read(self, layer: NcnnLayer, spec: WeightSpec) -> tuple[str, np.ndarray]:
        """(storage dtype name, the values in the spec's shape)."""
        count = _limits.check_elements(spec.shape, f"weight '{spec.name}' of layer '{layer.name}'")
        what = f"weight '{spec.name}' ({count:,} values)"
        if not spec.flagged:
            return "f32", np.frombuffer(self._take(4 * count, layer, what), "<f4").reshape(spec.shape)
        flag = bytes(self._take(4, layer, f"flag word of {what}"))
        tag = int.from_bytes(flag, "little")
        if tag == FP16_TAG:
            raw = self._take(_align4(2 * count), layer, f"fp16 {what}")
            return "f16", np.frombuffer(raw[: 2 * count], "<f2").reshape(spec.shape)
        if tag == INT8_TAG:
            raise WeightError(
                f"{what} is stored as int8 (flag 0x000D4B38): int8-quantized ncnn models are not supported; "
                "open the float model (pnnx's ncnn files before ncnn2int8)",
                operator=layer.name,
                op_type=layer.type,
            )
        if tag == FP32_TAG or tag == 0:
            return "f32", np.frombuffer(self._take(4 * count, layer, f"fp32 {what}"), "<f4").reshape(spec.shape)
        table = np.frombuffer(self._take(256 * 4, layer, f"quantization table of {what}"), "<f4")
        index = np.frombuffer(self._take(_align4(count), layer, f"quantized {what}")[:count], "u1")
        return "f32", table[index].reshape(spec.shape)


def load_weights(layers: list[NcnnLayer], data: bytes, name: str) -> list[dict[str, Attribute]]:
    """Each layer's weights, by name (its schema's layout), read from `data` in layer order."""
    reader = BinReader(data, name)
    out: list[dict[str, Attribute]] = []
    for layer in layers:
        attrs: dict[str, Attribute] = {}
        for spec in _specs(layer):
            dtype, values = reader.read(layer, spec)
            attrs[spec.name] = Attribute(dtype, spec.shape, values)
        out.append(attrs)
    if reader.pos != len(data):
        raise WeightError(
            f"{name} has {len(data) - reader.pos:,} byte(s) after the last layer's weights "
            f"(read {reader.pos:,} of {len(data):,}): is this the .bin written with this .param?"
        )
    return out


def specs_only(layers: list[NcnnLayer]) -> list[dict[str, Attribute]]:
    """The weights' shapes without their values (a graph read without its .bin)."""
    return [{s.name: Attribute("f32", s.shape) for s in _specs(layer)} for layer in layers]


def write_bin(layers: list[NcnnLayer], weights: list[dict[str, Attribute]], fp16: bool) -> bytes:
    """A .ncnn.bin of these weights with every flagged blob stored as fp16 (`fp16`, what pnnx
    writes by default) or fp32 (pnnx's fp16=0); unflagged blobs stay raw fp32, as ncnn reads
    them. Widening fp16 weights to fp32 keeps their values (it cannot bring back the lost bits)."""
    parts: list[bytes] = []
    for layer, attrs in zip(layers, weights):
        for spec in _specs(layer):
            data = attrs[spec.name].data
            assert data is not None
            values = np.ascontiguousarray(data, "<f4").ravel()
            if not spec.flagged:
                parts.append(values.tobytes())
            elif fp16:
                raw = values.astype("<f2").tobytes()
                parts += [FP16_TAG.to_bytes(4, "little"), raw, b"\0" * (_align4(len(raw)) - len(raw))]
            else:
                parts += [b"\0\0\0\0", values.tobytes()]
    return b"".join(parts)


def _specs(layer: NcnnLayer) -> list[WeightSpec]:
    try:
        return weights(layer)
    except ValueError as e:
        raise WeightError(str(e), operator=layer.name, op_type=layer.type) from None
