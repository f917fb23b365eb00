"""ONNX Resize nodes that pnnx would rewrite with a different answer, kept as Resize nodes.

pnnx (20261020) turns a `Resize` with constant sizes or scales into torch's `F.interpolate`
(its pass_level2 F_interpolate_onnx / _dynamic patterns). It reads only `mode` and, for
linear/cubic, whether the coordinates are `half_pixel` or `align_corners`; it ignores
`cubic_coeff_a`, `exclude_outside`, `antialias`, every other coordinate mode and the
nearest rounding, so many variants come out with torch's semantics instead of ONNX's
(docs/coverage.md has the table). It does not rewrite a node whose `roi` is a non-empty
constant or whose `nearest_mode` is other than `floor`: then it keeps the ONNX node, which
the engine runs with the ONNX spec's semantics (layers/onnx_resize.py).

So, before pnnx: a Resize whose rewrite would change the answer gets the identity roi
(starts 0, ends 1 on every axis). ONNX reads roi only for `tf_crop_and_resize`, so the model
means what it meant (onnxruntime, which runs inside pnnx, gives the same outputs) and pnnx
keeps the node. Whether the rewrite would change the answer is found, per node at its
shapes, by running both semantics on a seeded probe: torch's `F.interpolate` as pnnx would
write it (layers/resize.py's Interpolate) and ONNX's Resize (layers/onnx_resize.py's
OnnxResize). A node whose sizes are not constant is always kept: the F.interpolate pnnx
writes for it has a size computed at run time, which the engine's F.interpolate cannot run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operand, Operator

ROI_SUFFIX = "/kept_roi"  # the identity roi's initializer: `<node output>/kept_roi`
PROBE_ELEMENTS = 1 << 20  # largest probe output (a larger node is kept: the Resize layer runs it right)
PROBE_TOLERANCE = 1e-5  # of the probe's largest value: float32 table rounding is far below, a semantic change far above


def keep_lossy_resizes(model: Any) -> list[str]:
    """Give every Resize of `model` (an onnx.ModelProto, changed in place) that pnnx would
    rewrite with a different answer the identity roi. Returns one note per node changed."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    graph = model.graph
    nodes = [n for n in graph.node if n.op_type == "Resize" and n.domain in ("", "ai.onnx")]
    if opset is None or opset < 11 or not nodes:  # Resize-10 has no roi input (convert.py upgrades it first)
        return []
    constants = _constants(graph)
    shapes = _shapes(graph)
    if any(n.input[0] not in shapes for n in nodes):
        shapes = _shapes(_inferred(model).graph)
    notes = []
    for node in nodes:
        why = _why_lossy(node, constants, shapes)
        if why is None:
            continue
        axes = _attributes(node).get("axes")
        k = len(axes) if axes is not None else len(shapes[node.input[0]]) if node.input[0] in shapes else None
        if k is None:
            notes.append(
                f"Resize '{node.name or node.output[0]}' ({why}) left to pnnx: the rank of its input is unknown"
            )
            continue
        _add_identity_roi(graph, node, k)
        notes.append(f"Resize '{node.name or node.output[0]}' kept as an ONNX node ({why})")
    return notes


def pnnx_keeps(attrs: dict[str, Any], roi: np.ndarray | None) -> bool:
    """Whether pnnx keeps a Resize (opset >= 11) as an ONNX node whatever its sizes: its
    patterns refuse a non-empty constant roi, and a nearest_mode other than floor (or none)."""
    if roi is not None and roi.size:
        return True
    return attrs.get("mode", "nearest") == "nearest" and attrs.get("nearest_mode", "floor") != "floor"


def _why_lossy(node: Any, constants: dict[str, np.ndarray], shapes: dict[str, tuple[int | None, ...]]) -> str | None:
    """Why pnnx's F.interpolate would differ from the node, or None when pnnx keeps the node
    anyway or its rewrite gives the same answer."""
    attrs = _attributes(node)
    inputs = list(node.input) + [""] * (4 - len(node.input))
    if pnnx_keeps(attrs, _value(inputs[1], constants)):
        return None
    sizes, scales = _value(inputs[3], constants), _value(inputs[2], constants)
    given = sizes if sizes is not None and sizes.size else scales if scales is not None and scales.size else None
    if given is None:
        return "sizes computed at run time"
    shape = shapes.get(inputs[0])
    if shape is None:
        return "input rank unknown"
    if "axes" in attrs or not 3 <= len(shape) <= 5 or len(given) != len(shape):
        return None  # pnnx's pattern wants N, C and every spatial dim: it keeps the node
    if given is sizes and any(d is not None and d != int(v) for d, v in zip(shape[:2], sizes[:2])):
        return None  # N or C resized: pnnx keeps the node (a dynamic N or C may match: probed)
    if given is scales and tuple(float(v) for v in scales[:2]) != (1.0, 1.0):
        return None
    spatial = shape[2:]
    if any(d is None for d in spatial):
        return "spatial size unknown"
    probe_shape = (1, 1, *(int(d) for d in spatial if d is not None))
    if _elements(_probe_output(given, probe_shape, given is sizes)) > PROBE_ELEMENTS:
        return "too large to compare"
    try:
        onnx_answer = _run(_onnx_operator(attrs, sizes, scales, probe_shape), probe_shape)
    except Exception:  # noqa: BLE001  -- not a Resize the spec allows: onnxruntime (inside pnnx) says why
        return None
    try:
        torch_answer = _run(
            _interpolate_operator(attrs, sizes if given is sizes else None, scales, probe_shape), probe_shape
        )
    except Exception as e:  # noqa: BLE001  -- torch's form cannot say it at all (e.g. bicubic of a 3-D input)
        return f"F.interpolate cannot say it: {str(e)[:120]}"
    if torch_answer.shape != onnx_answer.shape:
        return f"F.interpolate gives shape {torch_answer.shape[2:]}, ONNX {onnx_answer.shape[2:]}"
    err = float(np.abs(torch_answer - onnx_answer).max())
    if err > PROBE_TOLERANCE * float(np.abs(onnx_answer).max()):
        return f"F.interpolate's answer is {err:.2g} off ONNX's on a probe"
    return None


def _probe_output(given: np.ndarray, shape: tuple[int, ...], are_sizes: bool) -> list[int]:
    if are_sizes:
        return [int(v) for v in given[2:]]
    return [int(np.floor(n * float(v))) for n, v in zip(shape[2:], given[2:])]


def _interpolate_operator(
    attrs: dict[str, Any], sizes: np.ndarray | None, scales: np.ndarray | None, shape: tuple[int, ...]
) -> Operator:
    """The F.interpolate pnnx writes for the node (its F_interpolate_onnx pattern's write)."""
    mode, coordinates = attrs.get("mode", "nearest"), attrs.get("coordinate_transformation_mode", "half_pixel")
    params: dict[str, Any] = {}
    if mode in ("linear", "cubic") and coordinates in ("half_pixel", "align_corners"):
        params["align_corners"] = coordinates == "align_corners"
    spatial = len(shape) - 2
    if mode == "linear":
        mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[spatial]
    elif mode == "cubic":
        mode = "bicubic"
    params["mode"] = mode
    if sizes is not None:
        params["size"] = [int(v) for v in sizes[2:]]
    else:
        assert scales is not None
        params["scale_factor"] = [_as_written(v) for v in scales[2:]]
        params["recompute_scale_factor"] = False
    return _operator("F.interpolate", params, shape)


def _onnx_operator(
    attrs: dict[str, Any], sizes: np.ndarray | None, scales: np.ndarray | None, shape: tuple[int, ...]
) -> Operator:
    """The node as pnnx writes a kept Resize: attributes and constant sizes/scales as params,
    at the probe's N = C = 1."""
    params = dict(attrs)
    if sizes is not None and sizes.size:
        params["sizes"] = [1, 1, *(int(v) for v in sizes[2:])]
    elif scales is not None:
        params["scales"] = [_as_written(v) for v in scales]
    return _operator("Resize", params, shape)


def _as_written(v: float) -> float:
    """A float32 as the engine reads it back from pnnx's .param: pnnx writes its shortest
    decimal (0.6, not 0.6000000238), and nearest indices at exact boundaries follow that."""
    return float(np.format_float_positional(np.float32(v), unique=True, trim="0"))


def _operator(op_type: str, params: dict[str, Any], shape: tuple[int, ...]) -> Operator:
    op = Operator(op_type, "probe", params=params)
    op.inputs = [Operand("x", shape=shape, dtype="f32")]
    op.outputs = [Operand("y", dtype="f32")]
    op.input_names = ["input"]
    return op


def _run(op: Operator, shape: tuple[int, ...]) -> np.ndarray:
    from ..layers.registry import create_layer

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return np.asarray(create_layer(op).forward([x], [None])[0], dtype=np.float64)


# -- reading and changing the ONNX graph ---------------------------------------------------------------
def _attributes(node: Any) -> dict[str, Any]:
    import onnx

    out = {}
    for a in node.attribute:
        value = onnx.helper.get_attribute_value(a)
        out[a.name] = value.decode() if isinstance(value, bytes) else list(value) if isinstance(value, list) else value
    return out


def _constants(graph: Any) -> dict[str, np.ndarray]:
    """Initializers and Constant nodes' values (small ones are all a Resize reads)."""
    import onnx

    values = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer if _elements(i.dims) <= 64}
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value" and _elements(a.t.dims) <= 64:
                    values[n.output[0]] = onnx.numpy_helper.to_array(a.t)
    return values


def _elements(dims: Any) -> int:
    return int(np.prod(list(dims), dtype=np.int64))


def _value(name: str, constants: dict[str, np.ndarray]) -> np.ndarray | None:
    return constants.get(name) if name else None


def _shapes(graph: Any) -> dict[str, tuple[int | None, ...]]:
    """The shape of every value whose rank is known (None for a dynamic dim)."""
    shapes = {}
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = v.type.tensor_type
        if v.type.HasField("tensor_type") and t.HasField("shape"):
            shapes[v.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return shapes


def _inferred(model: Any) -> Any:
    """The model with onnx's inferred shapes (not done when the file has them: it copies the
    whole model, weights too)."""
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001  -- inference is a help: unknown shapes keep their nodes
        return model


def _add_identity_roi(graph: Any, node: Any, k: int) -> None:
    import onnx

    name = node.output[0] + ROI_SUFFIX
    roi = np.array([0.0] * k + [1.0] * k, dtype=np.float32)
    graph.initializer.append(onnx.numpy_helper.from_array(roi, name))
    while len(node.input) < 2:
        node.input.append("")
    node.input[1] = name
