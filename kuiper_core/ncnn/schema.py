"""What ncnn's numbered params mean, their defaults, and which weights each layer reads.

From ncnn's layer sources (each layer's load_param and load_model) and its operator
docs (docs/developer-guide/operators.md). `PARAMS[type][id] = (name, default)`;
`weights(layer)` lists the blobs its load_model reads from the .bin, in order: name, shape
(the layer's own view of them) and whether the blob has a flag word (ncnn's type 0: fp32,
fp16 or int8 storage decided by the file) or is raw fp32 (type 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .param import NcnnLayer, ParamValue

_CONV = {
    0: ("num_output", 0),
    1: ("kernel_w", 0),
    11: ("kernel_h", "kernel_w"),
    2: ("dilation_w", 1),
    12: ("dilation_h", "dilation_w"),
    3: ("stride_w", 1),
    13: ("stride_h", "stride_w"),
    4: ("pad_left", 0),
    15: ("pad_right", "pad_left"),
    14: ("pad_top", "pad_left"),
    16: ("pad_bottom", "pad_top"),
    18: ("pad_value", 0.0),
    5: ("bias_term", 0),
    6: ("weight_data_size", 0),
    7: ("group", 1),
    8: ("int8_scale_term", 0),
    9: ("activation_type", 0),
    10: ("activation_params", []),
    19: ("dynamic_weight", 0),
}
_DECONV = {
    **{k: v for k, v in _CONV.items() if k not in (18, 19)},
    18: ("output_pad_right", 0),
    19: ("output_pad_bottom", "output_pad_right"),
    20: ("output_w", 0),
    21: ("output_h", "output_w"),
    28: ("dynamic_weight", 0),
}
_ACT = {9: ("activation_type", 0), 10: ("activation_params", [])}

PARAMS: dict[str, dict[int, tuple[str, object]]] = {
    "Input": {0: ("w", 0), 1: ("h", 0), 11: ("d", 0), 2: ("c", 0)},
    "Convolution": _CONV,
    "ConvolutionDepthWise": _CONV,
    "Convolution1D": {
        0: ("num_output", 0),
        1: ("kernel_w", 0),
        2: ("dilation_w", 1),
        3: ("stride_w", 1),
        4: ("pad_left", 0),
        15: ("pad_right", "pad_left"),
        18: ("pad_value", 0.0),
        5: ("bias_term", 0),
        6: ("weight_data_size", 0),
        **_ACT,
    },
    "Deconvolution": _DECONV,
    "DeconvolutionDepthWise": _DECONV,
    "InnerProduct": {
        0: ("num_output", 0),
        1: ("bias_term", 0),
        2: ("weight_data_size", 0),
        8: ("int8_scale_term", 0),
        **_ACT,
    },
    "Pooling": {
        0: ("pooling_type", 0),
        1: ("kernel_w", 0),
        11: ("kernel_h", "kernel_w"),
        2: ("stride_w", 1),
        12: ("stride_h", "stride_w"),
        3: ("pad_left", 0),
        14: ("pad_right", "pad_left"),
        13: ("pad_top", "pad_left"),
        15: ("pad_bottom", "pad_top"),
        4: ("global_pooling", 0),
        5: ("pad_mode", 0),
        6: ("avgpool_count_include_pad", 0),
        7: ("adaptive_pooling", 0),
        8: ("out_w", 0),
        18: ("out_h", "out_w"),
    },
    "BinaryOp": {0: ("op_type", 0), 1: ("with_scalar", 0), 2: ("b", 0.0)},
    "Eltwise": {0: ("op_type", 0), 1: ("coeffs", [])},
    "UnaryOp": {0: ("op_type", 0)},
    "ReLU": {0: ("slope", 0.0)},
    "Clip": {0: ("min", -3.4028235e38), 1: ("max", 3.4028235e38)},
    "HardSwish": {0: ("alpha", 0.2), 1: ("beta", 0.5)},
    "HardSigmoid": {0: ("alpha", 0.2), 1: ("beta", 0.5)},
    "ELU": {0: ("alpha", 0.1)},
    "GELU": {0: ("fast_gelu", 0)},
    "PReLU": {0: ("num_slope", 0)},
    "Sigmoid": {},
    "Swish": {},
    "Mish": {},
    "TanH": {},
    "SELU": {0: ("alpha", 1.67326324), 1: ("lambda", 1.050700987)},
    "Softplus": {},
    "Split": {},
    "Noop": {},
    "Dropout": {0: ("scale", 1.0)},
    "Flatten": {},
    "Concat": {0: ("axis", 0)},
    "Reshape": {
        0: ("w", -233),
        1: ("h", -233),
        11: ("d", -233),
        2: ("c", -233),
        3: ("permute", 0),
        6: ("shape_expr", None),
        12: ("input_batch_axis", 233),
        13: ("output_batch_axis", 233),
    },
    "Permute": {0: ("order_type", 0)},
    "ShuffleChannel": {0: ("group", 1), 1: ("reverse", 0)},
    "PixelShuffle": {0: ("upscale_factor", 1), 1: ("mode", 0)},
    "Reorg": {0: ("stride", 1), 1: ("mode", 0)},
    "Softmax": {0: ("axis", 0), 1: ("fixbug0", 0)},
    "BatchNorm": {0: ("channels", 0), 1: ("eps", 0.0)},
    "LayerNorm": {0: ("affine_size", 0), 1: ("eps", 0.001), 2: ("affine", 1)},
    "GroupNorm": {0: ("group", 1), 1: ("channels", 0), 2: ("eps", 0.001), 3: ("affine", 1)},
    "InstanceNorm": {0: ("channels", 0), 1: ("eps", 0.001), 2: ("affine", 1)},
    "Padding": {
        0: ("top", 0),
        1: ("bottom", 0),
        2: ("left", 0),
        3: ("right", 0),
        4: ("type", 0),
        5: ("value", 0.0),
        6: ("per_channel_pad_data_size", 0),
        7: ("front", 0),
        8: ("behind", 0),
    },
    "Crop": {
        0: ("woffset", 0),
        1: ("hoffset", 0),
        13: ("doffset", 0),
        2: ("coffset", 0),
        3: ("outw", 0),
        4: ("outh", 0),
        14: ("outd", 0),
        5: ("outc", 0),
        6: ("woffset2", 0),
        7: ("hoffset2", 0),
        15: ("doffset2", 0),
        8: ("coffset2", 0),
        9: ("starts", []),
        10: ("ends", []),
        11: ("axes", []),
    },
    "Slice": {0: ("slices", []), 1: ("axis", 0), 2: ("indices", [])},
    "Gemm": {
        0: ("alpha", 1.0),
        1: ("beta", 1.0),
        2: ("transA", 0),
        3: ("transB", 0),
        4: ("constantA", 0),
        5: ("constantB", 0),
        6: ("constantC", 0),
        7: ("constantM", 0),
        8: ("constantN", 0),
        9: ("constantK", 0),
        10: ("constant_broadcast_type_C", 0),
        11: ("output_N1M", 0),
        12: ("output_elempack", 0),
        13: ("output_elemtype", 0),
        14: ("output_transpose", 0),
        18: ("int8_scale_term", 0),
    },
    "MatMul": {0: ("transB", 0)},
    "LSTM": {
        0: ("num_output", 0),
        1: ("weight_data_size", 0),
        2: ("direction", 0),
        3: ("hidden_size", "num_output"),
        8: ("int8_scale_term", 0),
    },
    "GRU": {0: ("num_output", 0), 1: ("weight_data_size", 0), 2: ("direction", 0), 8: ("int8_scale_term", 0)},
    "RNN": {0: ("num_output", 0), 1: ("weight_data_size", 0), 2: ("direction", 0), 8: ("int8_scale_term", 0)},
    "MultiHeadAttention": {
        0: ("embed_dim", 0),
        1: ("num_heads", 1),
        2: ("weight_data_size", 0),
        3: ("kdim", "embed_dim"),
        4: ("vdim", "embed_dim"),
        5: ("attn_mask", 0),
        6: ("scale", 0.0),
    },
    "MemoryData": {0: ("w", 0), 1: ("h", 0), 11: ("d", 0), 2: ("c", 0), 21: ("load_type", 1)},
    "ExpandDims": {0: ("expand_w", 0), 1: ("expand_h", 0), 11: ("expand_d", 0), 2: ("expand_c", 0), 3: ("axes", [])},
    "Squeeze": {0: ("squeeze_w", 0), 1: ("squeeze_h", 0), 11: ("squeeze_d", 0), 2: ("squeeze_c", 0), 3: ("axes", [])},
    "Interp": {
        0: ("resize_type", 0),
        1: ("height_scale", 1.0),
        2: ("width_scale", 1.0),
        3: ("output_height", 0),
        4: ("output_width", 0),
        5: ("dynamic_target_size", 0),
        6: ("align_corner", 0),
    },
    "Reduction": {
        0: ("operation", 0),
        1: ("reduce_all", 1),
        2: ("coeff", 1.0),
        3: ("axes", []),
        4: ("keepdims", 0),
        5: ("fixbug0", 0),
    },
}

ACTIVATIONS = {0: "none", 1: "ReLU", 2: "LeakyReLU", 3: "Clip", 4: "Sigmoid", 5: "Mish", 6: "HardSwish"}


class Params:
    """A layer's params read by name, with ncnn's defaults (a default may name another param:
    kernel_h defaults to kernel_w): `integer`, `number`, `integers`, `numbers` (ValueError for
    a value of the wrong kind, naming the param by id and name)."""

    def __init__(self, layer_type: str, params: dict[int, ParamValue]) -> None:
        self.table = PARAMS.get(layer_type, {})
        self.values = params
        self.ids = {name: pid for pid, (name, _) in self.table.items()}

    def get(self, name: str) -> object:
        pid = self.ids[name]
        if pid in self.values:
            return self.values[pid]
        default = self.table[pid][1]
        if isinstance(default, str):
            return self.get(default)
        return default

    def text(self, name: str) -> str:
        """A string param ('' where it is not given)."""
        v = self.get(name)
        if v is None:
            return ""
        if not isinstance(v, str):
            raise ValueError(f"param {self.ids[name]} ({name}) must be a string, got {v!r}")
        return v

    def integer(self, name: str) -> int:
        v = self.get(name)
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if not isinstance(v, int):
            raise ValueError(f"param {self.ids[name]} ({name}) must be an int, got {v!r}")
        return v

    def number(self, name: str) -> float:
        v = self.get(name)
        if not isinstance(v, (int, float)):
            raise ValueError(f"param {self.ids[name]} ({name}) must be a number, got {v!r}")
        return float(v)

    def integers(self, name: str) -> list[int]:
        v = self.get(name)
        if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
            raise ValueError(f"param {self.ids[name]} ({name}) must be an array of ints, got {v!r}")
        return [int(x) for x in v]

    def numbers(self, name: str) -> list[float]:
        v = self.get(name)
        if not isinstance(v, list):
            raise ValueError(f"param {self.ids[name]} ({name}) must be an array, got {v!r}")
        return [float(x) for x in v]


def named(layer_type: str, params: dict[int, ParamValue]) -> list[tuple[int, str, ParamValue]]:
    """The params a line gives, each with its meaning (`?` for an id ncnn's docs do not list
    for this type), in id order: what the Graph page shows."""
    table = PARAMS.get(layer_type, {})
    return [(pid, table[pid][0] if pid in table else "?", v) for pid, v in sorted(params.items())]


@dataclass(frozen=True)
class WeightSpec:
    name: str
    shape: tuple[int, ...]
    flagged: bool  # ncnn's type 0: a flag word says fp32 / fp16 / int8 / table-quantized


def _conv_weights(p: Params, layer_type: str, ndim: int) -> list[WeightSpec]:
    n_out, size = p.integer("num_output"), p.integer("weight_data_size")
    if p.integer("int8_scale_term"):
        raise ValueError("int8 quantized convolutions (8=int8_scale_term) are not supported: run the float model")
    if p.ids.get("dynamic_weight") is not None and p.integer("dynamic_weight"):
        raise ValueError("dynamic_weight=1 (the weight as an input blob) is not supported")
    kernel = [p.integer("kernel_w")] if ndim == 1 else [p.integer("kernel_h"), p.integer("kernel_w")]
    group = p.integer("group") if "group" in p.ids and layer_type.endswith("DepthWise") else 1
    maxk = math.prod(kernel)
    if n_out <= 0 or maxk <= 0 or group <= 0 or size % (maxk * n_out) or n_out % group:
        raise ValueError(
            f"weight_data_size {size} does not fit num_output {n_out}, kernel {kernel} and group {group} "
            "(expected num_output x in_channels/group x kernel elements)"
        )
    per = size // (maxk * n_out)  # in_channels / group
    specs = [WeightSpec("weight", (n_out, per, *kernel), True)]
    if p.integer("bias_term"):
        specs.append(WeightSpec("bias", (n_out,), False))
    return specs


GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}  # gate rows per hidden unit


def _recurrent_weights(p: Params, t: str) -> list[WeightSpec]:
    """LSTM/GRU/RNN: input-to-hidden, biases, hidden-to-hidden (and LSTM's projection), each
    (directions, rows, cols) in one flagged blob per kind."""
    if p.integer("int8_scale_term"):
        raise ValueError(f"int8 quantized {t} (8=int8_scale_term) is not supported: run the float model")
    n_out, dirs = p.integer("num_output"), 2 if p.integer("direction") == 2 else 1
    hidden = p.integer("hidden_size") if t == "LSTM" else n_out
    rows = hidden * GATES[t]
    if n_out <= 0 or hidden <= 0 or p.integer("weight_data_size") % (dirs * rows):
        raise ValueError(f"weight_data_size {p.integer('weight_data_size')} is not a multiple of {dirs * rows}")
    size = p.integer("weight_data_size") // (dirs * rows)
    bias_rows = {"LSTM": 4, "GRU": 4, "RNN": 1}[t]  # GRU: r, u, and n's input and hidden biases
    specs = [
        WeightSpec("weight_xc", (dirs, rows, size), True),
        WeightSpec("bias_c", (dirs, bias_rows, hidden), True),
        WeightSpec("weight_hc", (dirs, rows, n_out), True),
    ]
    if t == "LSTM" and n_out != hidden:
        specs.append(WeightSpec("weight_hr", (dirs, n_out, hidden), True))
    return specs


def weights(layer: NcnnLayer) -> list[WeightSpec]:
    """The weight blobs `layer` reads from the .bin, in order (ValueError: params that make no
    weight layout)."""
    t, p = layer.type, Params(layer.type, layer.params)
    if t in ("Convolution", "ConvolutionDepthWise", "Deconvolution", "DeconvolutionDepthWise"):
        return _conv_weights(p, t, 2)
    if t == "Convolution1D":
        return _conv_weights(p, t, 1)
    if t == "InnerProduct":
        n_out, size = p.integer("num_output"), p.integer("weight_data_size")
        if p.integer("int8_scale_term"):
            raise ValueError("int8 quantized InnerProduct (8=int8_scale_term) is not supported: run the float model")
        if n_out <= 0 or size % n_out:
            raise ValueError(f"weight_data_size {size} is not a multiple of num_output {n_out}")
        specs = [WeightSpec("weight", (n_out, size // n_out), True)]
        if p.integer("bias_term"):
            specs.append(WeightSpec("bias", (n_out,), False))
        return specs
    if t == "BatchNorm":
        c = p.integer("channels")
        return [WeightSpec(n, (c,), False) for n in ("slope", "mean", "var", "bias")]
    if t == "LayerNorm":
        n = p.integer("affine_size")
        return [WeightSpec("gamma", (n,), False), WeightSpec("beta", (n,), False)] if p.integer("affine") else []
    if t in ("GroupNorm", "InstanceNorm"):
        n = p.integer("channels")
        return [WeightSpec("gamma", (n,), False), WeightSpec("beta", (n,), False)] if p.integer("affine") else []
    if t == "PReLU":
        return [WeightSpec("slope", (max(p.integer("num_slope"), 1),), False)]
    if t == "MemoryData":
        dims = [p.integer("c"), p.integer("d"), p.integer("h"), p.integer("w")]
        shape = tuple(d for d in dims if d)
        return [WeightSpec("data", shape or (1,), False)]
    if t == "Padding":
        n = p.integer("per_channel_pad_data_size")
        return [WeightSpec("per_channel_pad", (n,), False)] if n else []
    if t == "Gemm":
        specs = []
        m, n, k = p.integer("constantM"), p.integer("constantN"), p.integer("constantK")
        if p.integer("int8_scale_term"):
            raise ValueError("int8 quantized Gemm (18=int8_scale_term) is not supported: run the float model")
        if p.integer("constantA"):
            specs.append(WeightSpec("A", (m, k) if p.integer("transA") == 0 else (k, m), True))
        if p.integer("constantB"):
            specs.append(WeightSpec("B", (n, k) if p.integer("transB") else (k, n), True))
        if p.integer("constantC"):
            c_shape = {0: (1,), 1: (m,), 2: (m,), 3: (m, n), 4: (n,)}.get(p.integer("constant_broadcast_type_C"))
            if c_shape is not None:
                specs.append(WeightSpec("C", c_shape, True))
        return specs
    if t in GATES:
        return _recurrent_weights(p, t)
    if t == "MultiHeadAttention":
        e, size = p.integer("embed_dim"), p.integer("weight_data_size")
        kdim, vdim = p.integer("kdim"), p.integer("vdim")
        if e <= 0 or size % e:
            raise ValueError(f"weight_data_size {size} is not a multiple of embed_dim {e}")
        qdim = size // e
        return [
            WeightSpec("q_weight", (e, qdim), True),
            WeightSpec("q_bias", (e,), False),
            WeightSpec("k_weight", (e, kdim), True),
            WeightSpec("k_bias", (e,), False),
            WeightSpec("v_weight", (e, vdim), True),
            WeightSpec("v_bias", (e,), False),
            WeightSpec("out_weight", (qdim, e), True),
            WeightSpec("out_bias", (qdim,), False),
        ]
    return []
