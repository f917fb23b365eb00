"""An ncnn model as the project's Graph, so the runtime, the Forward stepper and the Graph page
work on it unchanged: each layer an Operator of type `ncnn.<Type>` (its layer in
kuiper_core/ncnn/layers/), its params keyed by ncnn's ids as text ("0", "11"; an array param
`-23309=…` as "9"), its weights Attributes in the storage the .bin has (f16 or f32); each blob
an Operand of the same name. `Input` becomes `pnnx.Input` (the runtime feeds it), and every
blob no layer reads gets a `pnnx.Output` (ncnn has no output layer: an app extracts blobs)."""

from __future__ import annotations

from ..errors import ModelError
from ..graph import Attribute, Graph, Operand
from .param import NcnnLayer, NcnnParam

INPUT = "Input"


def build_graph(param: NcnnParam, weights: list[dict[str, Attribute]]) -> Graph:
    graph = Graph(source=param.path)
    for layer, attrs in zip(param.layers, weights):
        inputs = [graph.operands[b] for b in layer.bottoms]
        outputs = [graph.add_operand(t) for t in layer.tops]
        op_type = "pnnx.Input" if layer.type == INPUT else f"ncnn.{layer.type}"
        op = graph.add_operator(op_type, layer.name, inputs, outputs)
        op.params = {str(k): v for k, v in layer.params.items()}
        op.attrs = attrs
        op.line = layer.line
        if layer.type == INPUT:  # 0=w 1=h 11=d 2=c when given: the blob's declared shape
            known = _input_shape(layer)
            if known:
                outputs[0].shape, outputs[0].dtype = known, "f32"
    # pnnx names the model's outputs out0, out1, …: in that order (the graph's output order)
    sinks = sorted((o for o in graph.operands.values() if not o.consumers), key=_output_rank)
    taken = {op.name for op in graph.operators}
    for operand in sinks:
        name = f"output_{operand.name}"
        while name in taken:
            name += "_"
        taken.add(name)
        graph.add_operator("pnnx.Output", name, [operand])
    return graph


def _input_shape(layer: NcnnLayer) -> tuple[int, ...] | None:
    """An Input's (c, d, h, w) as ncnn lays a blob out: (w), (h, w), (c, h, w) or (c, d, h, w),
    or None when it gives none. Anything else is an error, not a guess: `0=-5 1=3 2=2` was read
    as a (2, 3) blob, `0=0 1=5 2=3` as (3, 5)."""
    c, d, h, w = (layer.params.get(k, 0) for k in (2, 11, 1, 0))
    dims = (c, d, h, w)
    if dims == (0, 0, 0, 0):
        return None
    layouts = {(0, 0, 0, 1): 1, (0, 0, 1, 1): 2, (1, 0, 1, 1): 3, (1, 1, 1, 1): 4}
    given = tuple(int(isinstance(v, int) and v > 0) for v in dims)
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in dims) or given not in layouts:
        raise ModelError(
            f"line {layer.line}: its 0=w 1=h 11=d 2=c ({w!r}, {h!r}, {d!r}, {c!r}) give no blob shape: expected w; "
            "w and h; w, h and c; or all four, each a whole number >= 1 (or none of them: the shape is given when "
            "the model is opened)",
            operator=layer.name,
            op_type=INPUT,
        )
    return tuple(v for v, g in zip(dims, given) if g and isinstance(v, int))


def _output_rank(operand: Operand) -> tuple[int, int]:
    name = operand.name
    return (0, int(name[3:])) if name.startswith("out") and name[3:].isdigit() else (1, 0)


def ncnn_type(op_type: str) -> str | None:
    """The ncnn layer type of a graph op type (`ncnn.Convolution` -> `Convolution`), or None."""
    if op_type == "pnnx.Input":
        return INPUT
    return op_type.removeprefix("ncnn.") if op_type.startswith("ncnn.") else None
