"""Give back the ONNX Resize semantics pnnx loses when it writes a Resize as F.interpolate.

pnnx 20261020 turns an ONNX `Resize` with constant sizes or scales into `F.interpolate` (or
`F.upsample`), which can say only torch's interpolation: nearest as `asymmetric` + `floor`,
linear and cubic with `half_pixel` or `align_corners`, cubic's coefficient −0.75. ONNX's default
nearest (`half_pixel`, `round_prefer_floor`) at a non-integer ratio, the other coordinate modes,
`cubic_coeff_a`, `exclude_outside` and `antialias` then give another answer (0.15–2.8 off
onnxruntime: docs/coverage.md), and nothing in the converted file shows it.

After such a conversion each F.interpolate that stands for a Resize torch cannot express becomes
the engine's ONNX `Resize` layer (layers/onnx_resize.py: the spec, checked against onnxruntime)
with the original node's attributes and sizes or scales. The Resize nodes pnnx rewrote and the
interpolations it wrote are paired in order, and each pair must agree on the output shape:
where the counts or a shape differ nothing is changed (the conversion check still says whether
the answer is the original's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .onnx_resize import pnnx_keeps

INTERPOLATIONS = ("F.interpolate", "F.upsample", "F.upsample_nearest", "F.upsample_bilinear", "nn.Upsample")
_HALF_PIXEL = ("half_pixel", "pytorch_half_pixel")


@dataclass(frozen=True)
class _Resize:
    """An ONNX Resize node with constant sizes or scales (the ones pnnx rewrites)."""

    params: dict[str, Any]  # its attributes, and sizes= or scales= (pnnx's names for the kept node)
    sizes: tuple[int, ...] | None
    scales: tuple[float, ...] | None
    lossy: bool  # torch's interpolate cannot say what it computes

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        if self.sizes is not None:
            return self.sizes if len(self.sizes) == len(shape) else None
        if self.scales is not None and len(self.scales) == len(shape):
            return tuple(int(n * s) for n, s in zip(shape, self.scales))
        return None


def _expressible(attrs: dict[str, Any], ratios: list[float], outs: list[int]) -> bool:
    """Whether torch's F.interpolate computes what this Resize does (docs/coverage.md: integer-ratio
    nearest, half_pixel / align_corners linear and default cubic are what pnnx gets right)."""
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if attrs.get("antialias", 0) or attrs.get("exclude_outside", 0) or attrs.get("axes") is not None:
        return False
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return False
    if mode == "nearest":
        whole = all(r >= 1 and float(r).is_integer() for r in ratios)
        near = attrs.get("nearest_mode", "round_prefer_floor")
        return whole and (
            (ctm in _HALF_PIXEL and near in ("round_prefer_floor", "round_prefer_ceil"))
            or (ctm == "asymmetric" and near == "floor")
        )
    if mode == "cubic" and abs(float(attrs.get("cubic_coeff_a", -0.75)) + 0.75) > 1e-9:
        return False
    if ctm == "align_corners":
        return True
    return ctm in _HALF_PIXEL and all(n > 1 for n in outs)


def _constant_resizes(source: Path) -> list[_Resize] | None:
    """The file's Resize nodes with constant sizes/scales, in order; None when onnx is missing or
    a Resize's sizes are computed (pnnx may then keep it or fold it: no pairing is safe)."""
    from .base import installed

    if not installed("onnx"):
        return None
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source), load_external_data=False)
    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute:
            a = node.attribute[0]
            if a.name == "value":
                consts[node.output[0]] = numpy_helper.to_array(a.t)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
    found: list[_Resize] = []
    for node in model.graph.node:
        if node.op_type != "Resize":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        named = dict(zip(("X", "roi", "scales", "sizes"), node.input))
        if len(node.input) == 2:  # opset 10: (X, scales)
            named = {"X": node.input[0], "scales": node.input[1]}
        given = {k: consts.get(v) for k, v in named.items() if k != "X" and v}
        if any(v is None for v in given.values()):
            return None
        if len(node.input) != 2 and pnnx_keeps(attrs, given.get("roi")):
            continue  # kept as a Resize, not rewritten: no interpolation stands for it
        sizes = given.get("sizes")
        scales = given.get("scales")
        sizes_t = tuple(int(d) for d in sizes.reshape(-1)) if sizes is not None and sizes.size else None
        scales_t = tuple(float(s) for s in scales.reshape(-1)) if scales is not None and scales.size else None
        shape = shapes.get(node.input[0])
        if sizes_t is not None and shape and all(shape) and len(shape) == len(sizes_t):
            ratios = [o / i for o, i in zip(sizes_t, shape)]
            outs = list(sizes_t)
        elif scales_t is not None:
            ratios = list(scales_t)
            outs = [int(n * s) for n, s in zip(shape, scales_t)] if shape and all(shape) else [2] * len(scales_t)
        else:
            ratios, outs = [0.5], [1]  # unknown: not claimed expressible
        params: dict[str, Any] = {k: v for k, v in attrs.items() if isinstance(v, (int, float, str))}
        if sizes_t is not None:
            params["sizes"] = sizes_t
        elif scales_t is not None:
            params["scales"] = scales_t
        found.append(_Resize(params, sizes_t, scales_t, not _expressible(attrs, ratios[2:], outs[2:])))
    return found


def restore_resizes(source: Path, param: Path, binf: Path) -> list[str]:
    """Make each F.interpolate pnnx wrote for a Resize it cannot express the engine's ONNX
    Resize (the files rewritten in place); a note naming them, [] when none was."""
    resizes = _constant_resizes(source)
    if not resizes or not any(r.lossy for r in resizes):
        return []
    from ..pnnx import load_graph, save

    graph = load_graph(param, binf)
    interpolations = [op for op in graph.operators if op.type in INTERPOLATIONS]
    if len(interpolations) != len(resizes):
        return [
            f"the .onnx has {len(resizes)} Resize(s) pnnx rewrote and the converted file {len(interpolations)} "
            "interpolation(s): they could not be paired, so none was given back its ONNX semantics"
        ]
    changed = []
    for op, resize in zip(interpolations, resizes):
        if not resize.lossy or len(op.inputs) != 1 or not op.outputs:
            continue  # sizes pnnx passes as an operand: not a rewrite of a constant Resize
        shape_in, shape_out = op.inputs[0].static_shape, op.outputs[0].shape
        if shape_in is None or resize.out_shape(shape_in) != shape_out:
            continue
        op.type, op.params, op.input_names = "Resize", dict(resize.params), [""]
        changed.append(op.name)
    if not changed:
        return []
    save(graph, param, binf)
    shown = ", ".join(changed[:3]) + (", …" if len(changed) > 3 else "")
    return [
        f"pnnx wrote {len(changed)} ONNX Resize(s) as F.interpolate, which computes otherwise for their "
        f"modes ({shown}): Kuiper made them ONNX Resize operators with the original attributes"
    ]
