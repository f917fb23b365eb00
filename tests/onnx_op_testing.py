"""One ONNX node, built here with onnx.helper, run by onnxruntime and by the engine on what
the real pnnx converter made of it (tests/test_onnx_ops.py): `case(...)` describes it,
`check(case, tmp_path)` builds, converts, runs both and compares every output.

Inputs of a case: a plain array is a graph input (fed at run time), `C(array)` a constant
(an initializer: pnnx writes it as a pnnx.Attribute, an input-less pnnx.Expression or a
folded param), None an omitted optional input (`""`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from conftest import max_err_ok


@dataclass(frozen=True)
class C:
    """A constant input (an ONNX initializer)."""

    value: np.ndarray


@dataclass
class Case:
    op: str
    inputs: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    opset: int = 17
    kept: str | None = None  # the type pnnx must keep in its output (default: op)
    rel: float = 1e-4


def case(
    op: str, *inputs: Any, outputs: int = 1, opset: int = 17, kept: str | None = None, rel: float = 1e-4, **attrs: Any
) -> Case:
    return Case(op, list(inputs), attrs, outputs, opset, kept, rel)


def resize_case(x: np.ndarray, *, roi=None, scales=None, sizes=None, opset: int = 13, **attrs: Any) -> Case:
    """A Resize of the graph input x, its roi / scales / sizes constants (omitted when None)."""
    ins: list[Any] = [
        x,
        None if roi is None else C(np.array(roi, np.float32)),
        None if scales is None else C(np.array(scales, np.float32)),
        None if sizes is None else C(np.array(sizes, np.int64)),
    ]
    while ins[-1] is None:
        ins.pop()
    return case("Resize", *ins, opset=opset, **attrs)


def resize_to_shape_of(x: np.ndarray, **attrs: Any) -> Any:
    """The ONNX model Resize(x, sizes=Shape(z)) (inputs x and z): z has x's N and C and dynamic
    H, W, so pnnx cannot fold the sizes."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["z"], ["s"]), helper.make_node("Resize", ["x", "", "", "s"], ["y"], **attrs)]
    graph = helper.make_graph(
        nodes,
        "resize_to",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [*x.shape[:2], "H", "W"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def model_of(c: Case) -> tuple[Any, dict[str, np.ndarray]]:
    import onnx
    from onnx import helper, numpy_helper

    names, graph_inputs, inits, feeds = [], [], [], {}
    for k, v in enumerate(c.inputs):
        if v is None:
            names.append("")
            continue
        name = f"i{k}"
        names.append(name)
        if isinstance(v, C):
            inits.append(numpy_helper.from_array(np.asarray(v.value), name))
        else:
            arr = np.asarray(v)
            graph_inputs.append(
                helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape)
            )
            feeds[name] = arr
    outs = [f"o{k}" for k in range(c.outputs)]
    node = helper.make_node(c.op, names, outs, **c.attrs)
    # Output types from ONNX's shape inference (onnxruntime checks declared against actual).
    probe = helper.make_graph([node], "case", graph_inputs, [], inits)
    probe_model = helper.make_model(probe, opset_imports=[helper.make_opsetid("", c.opset)])
    inferred = {
        vi.name: vi.type.tensor_type.elem_type for vi in onnx.shape_inference.infer_shapes(probe_model).graph.value_info
    }
    graph_outputs = [helper.make_tensor_value_info(o, inferred.get(o, onnx.TensorProto.FLOAT), None) for o in outs]
    graph = helper.make_graph([node], "case", graph_inputs, graph_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)])
    model.ir_version = 8
    return model, feeds


def check(c: Case, tmp_path: Path, before_pnnx: Callable[[Any], Any] | None = None) -> None:
    """onnxruntime's outputs = the engine's on pnnx's conversion, which keeps the ONNX node."""
    model, feeds = model_of(c)
    check_model(model, feeds, c.kept or c.op, tmp_path, c.rel, before_pnnx)


def check_model(
    model: Any,
    feeds: dict[str, np.ndarray],
    kept: str,
    tmp_path: Path,
    rel: float = 1e-4,
    before_pnnx: Callable[[Any], Any] | None = None,
) -> None:
    """An ONNX model run by onnxruntime and by the engine on pnnx's conversion, which must
    keep an operator of type `kept`: every output the same. `before_pnnx` changes (in place)
    the copy pnnx converts; onnxruntime runs the model as it was."""
    import onnx
    import onnxruntime as ort

    from kuiper_core.formats import open_model

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    if before_pnnx is not None:
        model = copy.deepcopy(model)
        before_pnnx(model)
    path = tmp_path / "case.onnx"
    onnx.save_model(model, str(path))
    m = open_model(path, cache_dir=tmp_path / "cache")
    types = [op.type for op in m.graph.operators]
    assert kept in types, f"pnnx did not keep {kept}: {types}"
    got = m.build().forward(*feeds.values())
    assert len(got) == len(expected), (len(got), len(expected))
    _compare(got, expected, rel)


def _compare(got: Any, expected: list[np.ndarray], rel: float) -> None:
    for k, (y, ref) in enumerate(zip(got, expected)):
        assert np.asarray(y).dtype == ref.dtype, f"output {k}: dtype {np.asarray(y).dtype}, onnxruntime {ref.dtype}"
        ok, err, bound = max_err_ok(np.asarray(y), ref, rel=rel)
        assert ok, f"output {k}: shape {np.shape(y)} vs {ref.shape}, max err {err:.3g} > {bound:.3g}"


_DTYPE_NAMES = {
    "float32": "f32",
    "float64": "f64",
    "int64": "i64",
    "int32": "i32",
    "bool": "bool",
    "uint8": "u8",
    "int8": "i8",
}


def check_line(c: Case, params: str = "") -> None:
    """For an operator pnnx turns into a torch form when it converts the node alone (e.g. an
    Expand of a constant shape): the node's .param line written as pnnx writes a kept ONNX
    node (type, ONNX attributes as `params`, inputs positionally), run by the engine, against
    onnxruntime on the ONNX node. Inputs given as C(...) are left out of the line (pnnx
    folds them into `params`); the others are the graph's inputs."""
    import onnxruntime as ort

    from kuiper_core import RuntimeGraph
    from kuiper_core.pnnx import parse_param

    model, feeds = model_of(c)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    arrays = list(feeds.values())
    lines = [
        f"pnnx.Input in{k} 0 1 i{k} #i{k}=({','.join(map(str, a.shape))}){_DTYPE_NAMES[a.dtype.name]}"
        for k, a in enumerate(arrays)
    ]
    ins = " ".join(f"i{k}" for k in range(len(arrays)))
    outs = " ".join(f"o{k}" for k in range(c.outputs))
    lines.append(f"{c.op} node {len(arrays)} {c.outputs} {ins} {outs} {params}".rstrip())
    lines += [f"pnnx.Output out{k} 1 0 o{k}" for k in range(c.outputs)]
    text = f"7767517\n{len(lines)} {len(arrays) + c.outputs}\n" + "\n".join(lines) + "\n"
    got = RuntimeGraph.from_graph(parse_param(text)).build().forward(*arrays)
    _compare(got, expected, c.rel)
