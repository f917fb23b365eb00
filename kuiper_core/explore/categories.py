"""Operator categories and their colours: one palette shared by every view of a graph."""

from __future__ import annotations

from functools import lru_cache

# Category -> fill colour (light, so black labels stay readable; colour-blind-safe hues).
CATEGORY_COLORS: dict[str, str] = {
    "io": "#e0e0e0",
    "conv": "#9ecae1",
    "linear": "#c6dbef",
    "norm": "#fdd0a2",
    "activation": "#c7e9c0",
    "pool": "#dadaeb",
    "shape": "#fff2ae",
    "expression": "#fbb4c4",
    "reduce": "#d9f0d3",
    "attention": "#f2b7f2",
    "recurrent": "#b3e2cd",
    "other": "#ffffff",
}

_IO = {
    "pnnx.Input",
    "pnnx.Output",
    "pnnx.Attribute",
    "prim::TupleConstruct",
    "prim::TupleUnpack",
    "prim::ListConstruct",
}

# Substrings of the type's last component (after "nn." / "F." / "torch." / "Tensor."),
# lower-cased, checked in this order: the first match wins ("conv" before "norm" keeps
# nothing ambiguous; "batchnorm" never contains "conv").
_RULES: list[tuple[str, tuple[str, ...]]] = [
    ("expression", ("expression", "maximum", "minimum")),
    ("attention", ("attention", "scaled_dot_product")),
    ("recurrent", ("lstm", "gru", "rnn")),
    ("conv", ("conv", "fold", "unfold", "pixel_shuffle", "pixel_unshuffle")),
    ("norm", ("norm", "instance_norm", "local_response")),
    ("pool", ("pool",)),
    ("linear", ("linear", "matmul", "bmm", "addmm", "einsum", "baddbmm", "mm")),
    (
        "activation",
        (
            "relu",
            "sigmoid",
            "tanh",
            "gelu",
            "silu",
            "swish",
            "mish",
            "elu",
            "selu",
            "softmax",
            "softplus",
            "softsign",
            "hardswish",
            "hardsigmoid",
            "hardtanh",
            "hardshrink",
            "softshrink",
            "tanhshrink",
            "leaky",
            "prelu",
            "threshold",
            "logsigmoid",
            "glu",
            "dropout",
            "clamp",
            "clip",
        ),
    ),
    (
        "reduce",
        (
            "mean",
            "sum",
            "max",
            "min",
            "std",
            "var",
            "prod",
            "norm",
            "argmax",
            "argmin",
            "logsumexp",
            "amax",
            "amin",
            "cumsum",
        ),
    ),
    (
        "shape",
        (
            "flatten",
            "reshape",
            "view",
            "permute",
            "transpose",
            "cat",
            "concat",
            "stack",
            "split",
            "chunk",
            "slice",
            "select",
            "squeeze",
            "unsqueeze",
            "expand",
            "repeat",
            "pad",
            "upsample",
            "interpolate",
            "tensor_split",
            "narrow",
            "roll",
            "flip",
            "gather",
            "index",
            "contiguous",
            "to",
            "type_as",
            "zeros",
            "ones",
            "full",
            "arange",
            "size",
            "shape",
            "identity",
            "channel_shuffle",
            "channelshuffle",
            "masked_fill",
            "where",
            "tile",
            "unbind",
        ),
    ),
]


@lru_cache(maxsize=4096)  # a 1,500-operator graph asks for a few dozen types, thousands of times
def category(op_type: str) -> str:
    """The display category of a PNNX operator type, e.g. 'nn.Conv2d' -> 'conv'."""
    if op_type in _IO:
        return "io"
    base = op_type.rsplit(".", 1)[-1].lower().lstrip("_")
    for name, keys in _RULES:
        if any(k == base or (len(k) > 3 and k in base) for k in keys):
            return name
    # Short keys ('mm', 'to', 'cat', 'max'…) only match the whole name or a prefix word.
    for name, keys in _RULES:
        if any(base.startswith(k) for k in keys if len(k) <= 3):
            return name
    return "other"
