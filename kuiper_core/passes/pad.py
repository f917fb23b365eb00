"""FoldPadIntoConv: a pad that only feeds a convolution becomes the convolution's own
padding (pnnx's fuse_pad_conv1d/2d).

Zero (constant 0) padding adds to the conv's `padding`; reflect, replicate and circular
padding become its `padding_mode` when the conv pads nothing itself. nn.Conv pads the two
sides of a dim equally, so only symmetric pads over the spatial dims fold.
"""

from __future__ import annotations

from ..graph import Graph, Operator
from .manager import graph_pass, record
from .op_kinds import CONV_TYPES
from .rewrite import remove_operator, set_input, sole_consumer

_MODULE_MODES = {
    "Zero": "constant",
    "Constant": "constant",
    "Reflection": "reflect",
    "Replication": "replicate",
    "Circular": "circular",
}
_CONV_MODE = {"constant": "zeros", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


def _pad_spec(pad: Operator) -> tuple[str, list[tuple[int, int]]] | None:
    """(mode, [(before, after) for the trailing dims, last dim first])."""
    p = pad.params
    if pad.type == "F.pad":
        mode, amounts, value = p.get("mode", "constant"), p.get("pad"), p.get("value", 0.0)
    elif pad.type.startswith("nn.") and "Pad" in pad.type:
        kind = pad.type[3:].split("Pad")[0]
        if kind not in _MODULE_MODES:
            return None
        mode, amounts, value = _MODULE_MODES[kind], p.get("padding"), p.get("value", 0.0)
        if isinstance(amounts, int):
            amounts = [amounts] * (2 * int(pad.type[-2]))
    else:
        return None
    if len(pad.inputs) != 1 or not isinstance(amounts, list) or len(amounts) % 2 or not amounts:
        return None
    if mode == "constant" and value not in (0, 0.0, None):
        return None
    if not all(isinstance(a, int) and a >= 0 for a in amounts):
        return None
    return str(mode), [(amounts[i], amounts[i + 1]) for i in range(0, len(amounts), 2)]


def _conv_padding(conv: Operator, dims: int) -> list[int] | None:
    padding = conv.params.get("padding", 0)
    if padding == "valid":
        return [0] * dims
    if isinstance(padding, int):
        return [padding] * dims
    if isinstance(padding, list) and len(padding) == dims and all(isinstance(v, int) for v in padding):
        return list(padding)
    return None  # 'same' or something unexpected


@graph_pass("FoldPadIntoConv", 2, description="a symmetric pad that only feeds a convolution becomes its padding")
def fold_pad_into_conv(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for conv in [op for op in graph.operators if op.type in CONV_TYPES]:
        x = conv.inputs[0] if len(conv.inputs) == 1 else None
        pad = x.producer if x is not None else None
        if x is None or pad is None or sole_consumer(x) is not conv:
            continue
        spec = _pad_spec(pad)
        dims = int(conv.type[-2])
        padding = _conv_padding(conv, dims)
        if spec is None or padding is None:
            continue
        mode, pairs = spec
        pairs = pairs + [(0, 0)] * (dims - len(pairs))
        if len(pairs) > dims and any(b or a for b, a in pairs[dims:]):
            continue  # pads the channel or batch dim
        pairs = pairs[:dims]
        if any(b != a for b, a in pairs):
            continue  # asymmetric: nn.Conv cannot express it
        extra = [b for b, _ in reversed(pairs)]  # first spatial dim first
        conv_mode = conv.params.get("padding_mode", "zeros")
        if _CONV_MODE[mode] == conv_mode:
            new_padding = [p + e for p, e in zip(padding, extra)]
        elif conv_mode == "zeros" and not any(padding):
            new_padding = extra
            conv.params["padding_mode"] = _CONV_MODE[mode]
        else:
            continue
        conv.params["padding"] = new_padding
        set_input(conv, 0, pad.inputs[0])
        remove_operator(graph, pad)
        record("folded", pad.name, f"{pad.type} ({mode}) into {conv.name}: padding={tuple(new_padding)}")
        changed = True
    return graph, changed
