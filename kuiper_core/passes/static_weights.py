"""FoldStaticWeights: a functional layer whose weights are constants becomes the module
layer holding them (pnnx's fuse_static_conv / convtranspose / linear / batchnorm /
layernorm / groupnorm at optlevel 2).

`F.conv2d(x, w, b)` where `w` and `b` come from `pnnx.Attribute` operators is
`nn.Conv2d` with `@weight`/`@bias`; the attribute operators go once nothing else reads
them. After this a BatchNorm written as `F.batch_norm` can fold into its convolution.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Operator, ParamValue
from .manager import graph_pass, record
from .rewrite import remove_input, remove_operator, set_weight

# The weight arguments each functional type takes from operands.
_WEIGHT_ARGS = {
    "conv": ("weight", "bias"),
    "linear": ("weight", "bias"),
    "batch_norm": ("running_mean", "running_var", "weight", "bias"),
    "layer_norm": ("weight", "bias"),
    "group_norm": ("weight", "bias"),
}


def _constant_array(op: Operator, arg: str) -> np.ndarray | None | bool:
    """The array fed to argument `arg` by a pnnx.Attribute; None when the argument is
    absent or None; False when it is computed (not foldable)."""
    for i, name in enumerate(op.input_names):
        if name == arg:
            producer = op.inputs[i].producer
            attr = producer.attrs.get("data") if producer is not None and producer.type == "pnnx.Attribute" else None
            return attr.data if attr is not None and attr.data is not None else False
    return None if op.params.get(arg) is None else False


def _ints(value: ParamValue, n: int, default: int) -> list[int] | str:
    if value is None:
        return [default] * n
    if isinstance(value, str):
        return value  # padding='same' / 'valid'
    if isinstance(value, int):
        return [value] * n
    if not isinstance(value, list):
        raise TypeError(f"expected an int, ints or a padding name, got {value!r}")
    return list(value)


def _conv(op: Operator, w: np.ndarray, b: np.ndarray | None) -> tuple[str, dict[str, ParamValue]]:
    dims = int(op.type[-2])
    transposed = "transpose" in op.type
    groups = op.params.get("groups", 1) or 1
    p: dict[str, ParamValue] = {
        "in_channels": int(w.shape[0] if transposed else w.shape[1] * groups),
        "out_channels": int(w.shape[1] * groups if transposed else w.shape[0]),
        "kernel_size": [int(k) for k in w.shape[2:]],
        "stride": _ints(op.params.get("stride"), dims, 1),
        "padding": _ints(op.params.get("padding"), dims, 0),
        "dilation": _ints(op.params.get("dilation"), dims, 1),
        "groups": groups,
        "bias": b is not None,
    }
    if transposed:
        p["output_padding"] = _ints(op.params.get("output_padding"), dims, 0)
        return f"nn.ConvTranspose{dims}d", p
    p["padding_mode"] = "zeros"
    return f"nn.Conv{dims}d", p


def _make(op: Operator, arrays: dict[str, np.ndarray | None]) -> tuple[str, dict[str, ParamValue]] | None:
    t, w = op.type, arrays.get("weight")
    if t.startswith(("F.conv1d", "F.conv2d", "F.conv3d", "F.conv_transpose1d", "F.conv_transpose2d")) and w is not None:
        return _conv(op, w, arrays.get("bias"))
    if t == "F.linear" and w is not None:
        return "nn.Linear", {
            "in_features": int(w.shape[1]),
            "out_features": int(w.shape[0]),
            "bias": arrays.get("bias") is not None,
        }
    mean = arrays.get("running_mean")
    if t == "F.batch_norm" and mean is not None and arrays.get("running_var") is not None:
        if op.params.get("training") is True:
            return None
        rank = len(op.inputs[0].shape) if op.inputs[0].shape is not None else None
        kind = {2: "1d", 3: "1d", 4: "2d", 5: "3d"}.get(rank or 0)
        if kind is None:
            return None
        return f"nn.BatchNorm{kind}", {
            "num_features": int(mean.size),
            "eps": op.params.get("eps", 1e-5),
            "affine": True,
        }
    if t == "F.layer_norm" and w is not None:
        return "nn.LayerNorm", {
            "normalized_shape": op.params.get("normalized_shape"),
            "eps": op.params.get("eps", 1e-5),
            "elementwise_affine": True,
        }
    if t == "F.group_norm" and w is not None:
        return "nn.GroupNorm", {
            "num_groups": op.params.get("num_groups"),
            "num_channels": int(w.size),
            "eps": op.params.get("eps", 1e-5),
            "affine": True,
        }
    return None


def _family(op_type: str) -> str | None:
    for key in ("conv", "linear", "batch_norm", "layer_norm", "group_norm"):
        if op_type.startswith("F.") and key in op_type:
            return key
    return None


def _fill(name: str, arrays: dict[str, np.ndarray | None], n: int | None) -> None:
    """Affine defaults for norms given None: weight ones, bias zeros."""
    if n is None:
        return
    if arrays.get("weight") is None and name in ("batch_norm",):
        arrays["weight"] = np.ones(n, np.float32)
    if arrays.get("bias") is None and name in ("batch_norm", "layer_norm", "group_norm"):
        w = arrays.get("weight")
        arrays["bias"] = np.zeros(n if w is None else w.shape, np.float32)


@graph_pass(
    "FoldStaticWeights",
    2,
    required=("FoldConstantParams",),
    description="F.conv*/F.linear/F.*_norm with constant weights become nn.* layers holding them",
)
def fold_static_weights(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for op in [o for o in graph.operators if _family(o.type) is not None]:
        family = _family(op.type)
        assert family is not None
        if op.input_name(0) not in ("input", ""):
            continue
        found = {arg: _constant_array(op, arg) for arg in _WEIGHT_ARGS[family]}
        arrays = {arg: v for arg, v in found.items() if not isinstance(v, bool)}
        if len(arrays) != len(found):
            continue  # a weight computed at run time (False): stays functional
        mean = arrays.get("running_mean")
        _fill(family, arrays, int(mean.size) if isinstance(mean, np.ndarray) else None)
        made = _make(op, arrays)
        if made is None:
            continue
        new_type, params = made
        feeders = []
        for i in reversed(range(1, len(op.inputs))):
            feeders.append(remove_input(op, i).producer)
        op.input_names = ["input"]
        was = op.type
        op.type, op.params = new_type, params
        for key, value in arrays.items():
            if isinstance(value, np.ndarray):
                set_weight(op, key, value)
        for f in feeders:
            if f is not None and f.type == "pnnx.Attribute" and not any(o.consumers for o in f.outputs):
                remove_operator(graph, f)
        record("folded", op.name, f"{was} with constant weights → {new_type}")
        changed = True
    return graph, changed
