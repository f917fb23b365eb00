"""An ncnn model as the project's Graph, so the runtime, the Forward stepper and the Graph page
work on it unchanged: each layer an Operator of type `ncnn.<Type>` (its layer in
kuiper_core/ncnn/layers/), its params keyed by ncnn's ids as text ("0", "11"; an array param
`-23309=…` as "9"), its weights Attributes in the storage the .bin has (f16 or f32); each blob
an Operand of the same name. `Input` becomes `pnnx.Input` (the runtime feeds it), and every
blob no layer reads gets a `pnnx.Output` (ncnn has no output layer: an app extracts blobs)."""

from __future__ import annotations

from ..graph import Attribute, Graph, Operand
from .param import NcnnParam

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
            dims = [layer.params.get(k, 0) for k in (2, 11, 1, 0)]
            known = tuple(int(d) for d in dims if isinstance(d, int) and d > 0)
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


def _output_rank(operand: Operand) -> tuple[int, int]:
    name = operand.name
    return (0, int(name[3:])) if name.startswith("out") and name[3:].isdigit() else (1, 0)


def ncnn_type(op_type: str) -> str | None:
    """The ncnn layer type of a graph op type (`ncnn.Convolution` -> `Convolution`), or None."""
    if op_type == "pnnx.Input":
        return INPUT
    return op_type.removeprefix("ncnn.") if op_type.startswith("ncnn.") else None
