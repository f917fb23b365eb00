"""Operator categories and their colours: one palette shared by every view of a graph."""

from __future__ import annotations

from functools import lru_cache

# Category -> fill colour: Okabe & Ito's colour-blind-safe hues (orange #E69F00, sky blue
# #56B4E9, bluish green #009E73, yellow #F0E442, blue #0072B2, vermillion #D55E00, reddish
# purple #CC79A7), each as a tint chosen so that every pair stays apart for normal,
# protanope and deuteranope vision (CIEDE2000 >= 8, tests/test_palette.py) and black text
# keeps a contrast of at least 6.5:1.
CATEGORY_COLORS: dict[str, str] = {
    "io": "#d9d9d9",  # grey
    "conv": "#56b4e9",  # sky blue
    "linear": "#9ec9e2",  # blue, 38 % tint
    "norm": "#ebb233",  # orange, 80 %
    "activation": "#33b18f",  # bluish green, 80 %
    "pool": "#d694b9",  # reddish purple, 80 %
    "shape": "#fbf7ca",  # yellow, 28 %
    "expression": "#dd7e33",  # vermillion, 80 %
    "reduce": "#f0e442",  # yellow
    "attention": "#efc29e",  # vermillion, 38 %
    "recurrent": "#d0eaf9",  # sky blue, 28 %
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
    ("conv", ("conv", "fold", "unfold", "pixel_shuffle", "pixel_unshuffle", "col2im")),
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
            "reduce",  # ONNX's ReduceMax, ReduceMin… (kept by pnnx)
            "topk",
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
            "range",
            "nonzero",
            "onehot",
            "scatter",
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
