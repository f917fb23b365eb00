"""ncnn's layers one at a time, with the param variants the exports do not all reach (SAME
padding, ceil-mode average pooling, broadcasting, every Permute order, crops, slices, resize
modes, reductions…), each checked against ncnn itself: the same .ncnn.param and .ncnn.bin run
by the `ncnn` binding in this process (skipped without ncnn; test_ncnn runs it in run_ncnn's child). Weights are random, written
with ncnn's flag words by ncnn_case (fp32: flag 0; raw for unflagged blobs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kuiper_core.ncnn import load_ncnn
from kuiper_core.references.ncnn_blobs import ncnn_blobs
from kuiper_core.references.ncnn_compare import rel_error
from kuiper_core.runtime import RuntimeGraph

pytest.importorskip("ncnn")

RNG = np.random.default_rng(0)


def ncnn_case(tmp: Path, layers: list[str], weights: list[tuple[bool, np.ndarray]]) -> Path:
    """An .ncnn.param of `layers` (after the Input `in0`) and its .bin: (flagged, values) in order."""
    blobs = {"in0"}
    for line in layers:
        words = line.split()
        n_in, n_out = int(words[2]), int(words[3])
        blobs.update(words[4 + n_in : 4 + n_in + n_out])
    text = f"7767517\n{len(layers) + 1} {len(blobs)}\nInput in0 0 1 in0\n" + "\n".join(layers) + "\n"
    param = tmp / "case.ncnn.param"
    param.write_text(text)
    data = b"".join((b"\0\0\0\0" if flagged else b"") + np.asarray(v, "<f4").tobytes() for flagged, v in weights)
    (tmp / "case.ncnn.bin").write_bytes(data)
    return param


def check(
    tmp: Path, layers: list[str], x: np.ndarray, weights: list[tuple[bool, np.ndarray]] = (), tol: float = 1e-5
) -> dict:
    param = ncnn_case(tmp, layers, list(weights))
    graph = load_ncnn(param)
    run = RuntimeGraph.from_graph(graph).build().steps(x.astype(np.float32))
    for _ in run:
        pass
    blobs = [b for b in graph.operands if b != "in0"]
    # ncnn in this process with run_ncnn's options ({}: BASELINE); the child run_ncnn starts
    # (interpreter and imports, ~0.3 s a call) is checked by test_ncnn's every-blob test
    theirs = ncnn_blobs(param, param.with_suffix(".bin"), {"in0": x.astype(np.float32)}, blobs, {})
    for b in blobs:
        ours = np.asarray(run.values[b])
        assert ours.shape == theirs[b].shape, (b, ours.shape, theirs[b].shape)
        assert rel_error(ours, theirs[b]) <= tol, (b, rel_error(ours, theirs[b]))
    return {b: run.values[b] for b in blobs}


def w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


X3 = w(4, 7, 9)


@pytest.mark.parametrize(
    "params",
    [
        "0=6 1=3 11=3 2=1 3=2 4=1 5=1 6=216",  # stride 2, pad 1, bias
        "0=6 1=3 11=2 2=2 12=1 3=1 13=2 4=-233 5=1 6=144 9=1",  # SAME_UPPER, dilation, fused ReLU
        "0=6 1=3 11=3 3=2 4=-234 5=0 6=216 9=2 -23310=1,0.1",  # SAME_LOWER, leaky
        "0=6 1=1 5=1 6=24 9=3 -23310=2,-0.5,0.5",  # 1x1, clip
        "0=6 1=3 4=1 14=0 15=2 16=1 18=0.5 5=1 6=216 9=6 -23310=2,0.2,0.5",  # asymmetric pads, pad value, hardswish
        "0=6 1=3 4=1 5=1 6=216 9=4",  # sigmoid
        "0=6 1=3 4=1 5=1 6=216 9=5",  # mish
    ],
)
def test_convolution(tmp_path, params):
    p = dict(kv.split("=") for kv in params.split())
    n = int(p["6"])
    weights = [(True, w(n))] + ([(False, w(6))] if p.get("5") == "1" else [])
    check(tmp_path, [f"Convolution conv 1 1 in0 y {params}"], X3, weights)


def test_depthwise_and_grouped_convolution(tmp_path):
    check(
        tmp_path, ["ConvolutionDepthWise dw 1 1 in0 y 0=4 1=3 4=1 5=1 6=36 7=4 9=1"], X3, [(True, w(36)), (False, w(4))]
    )
    check(tmp_path, ["ConvolutionDepthWise g 1 1 in0 y 0=6 1=3 3=2 4=1 5=0 6=108 7=2"], X3, [(True, w(108))])


def test_deconvolution(tmp_path):
    check(
        tmp_path,
        ["Deconvolution up 1 1 in0 y 0=3 1=4 11=4 3=2 13=2 4=1 5=1 6=192"],
        X3,
        [(True, w(192)), (False, w(3))],
    )


POOLINGS = [
    "0=0 1=3 2=2 3=1 5=0",  # max, ceil mode (the tail padded)
    "0=1 1=3 2=2 3=1 5=0 6=0",  # avg without the padding
    "0=1 1=3 2=2 3=1 5=0 6=1",  # avg with the padding
    "0=1 1=2 2=2 5=1",  # valid
    "0=0 1=3 2=2 5=2",  # SAME_UPPER
    "0=1 1=3 2=2 5=3 6=0",  # SAME_LOWER
    "0=0 4=1",  # global max: a 1-D blob
    "0=1 4=1",  # global avg
    "0=1 7=1 8=4 18=3",  # adaptive avg
    "0=0 7=1 8=2 18=5",  # adaptive max
]


def _fan_out(lines: list[str]) -> list[str]:
    """`in0` split to one copy a line (`{x}` in each line names its bottom, `{y}` its top)."""
    n = len(lines)
    split = f"Split s 1 {n} in0 " + " ".join(f"x{i}" for i in range(n))
    return [split] + [line.format(x=f"x{i}", y=f"y{i}", i=i) for i, line in enumerate(lines)]


def test_pooling(tmp_path):
    check(tmp_path, _fan_out([f"Pooling pool{{i}} 1 1 {{x}} {{y}} {p}" for p in POOLINGS]), X3)


def test_binaryop_scalar_and_broadcast(tmp_path):
    """Every op_type: with a scalar, with a blob of the same shape, with a row broadcast."""
    x = np.abs(X3) + 0.5  # pow's base positive
    layers = ["MemoryData full 0 1 b 0=9 1=7 2=4", "MemoryData row 0 1 r 0=9"]
    lines = []
    for op in range(12):
        lines += [
            f"BinaryOp scalar{op} 1 1 {{x}} {{y}} 0={op} 1=1 2=1.5",
            f"BinaryOp same{op} 2 1 {{x}} b {{y}} 0={op}".replace(" b {y}", " b_{i} {y}"),
            f"BinaryOp rows{op} 2 1 {{x}} r {{y}} 0={op}".replace(" r {y}", " r_{i} {y}"),
        ]
    fanned = _fan_out(lines)
    n = len(lines)
    layers += [f"Split sb 1 {n} b " + " ".join(f"b_{i}" for i in range(n))]
    layers += [f"Split sr 1 {n} r " + " ".join(f"r_{i}" for i in range(n))]
    weights = [(False, np.abs(w(4, 7, 9)) + 0.5), (False, np.abs(w(9)) + 0.5)]
    check(tmp_path, layers + fanned, x, weights, tol=1e-5)


def test_binaryop_per_channel_and_lower_rank(tmp_path):
    layers = [
        "Split s 1 3 in0 a0 a1 a2",
        "MemoryData ch 0 1 c 0=1 1=1 2=4",
        "BinaryOp perc 2 1 a0 c y0 0=2",
        "MemoryData plane 0 1 p 0=9 1=7 2=1",
        "BinaryOp plane 2 1 a1 p y1 0=0",
        "MemoryData col 0 1 q 0=1 1=7 2=1",
        "BinaryOp col 2 1 q a2 y2 0=1",
    ]
    check(tmp_path, layers, X3, [(False, w(4)), (False, w(7, 9)), (False, w(7))])


def test_unaryop(tmp_path):
    x = np.abs(X3) * 0.4 + 0.05  # in every op's domain (sqrt, log, asin, acos)
    check(tmp_path, _fan_out([f"UnaryOp u{op} 1 1 {{x}} {{y}} 0={op}" for op in range(20)]), x)


ACTIVATIONS = [
    "ReLU r 1 1 in0 y",
    "ReLU r 1 1 in0 y 0=0.1",
    "Clip c 1 1 in0 y 0=-0.5 1=0.7",
    "HardSwish h 1 1 in0 y 0=0.1666667 1=0.5",
    "HardSigmoid h 1 1 in0 y 0=0.2 1=0.5",
    "Sigmoid s 1 1 in0 y",
    "Swish s 1 1 in0 y",
    "Mish m 1 1 in0 y",
    "TanH t 1 1 in0 y",
    "ELU e 1 1 in0 y 0=0.7",
    "GELU g 1 1 in0 y",
    "GELU g 1 1 in0 y 0=1",
    "Dropout d 1 1 in0 y",
    "Softmax s 1 1 in0 y 0=1 1=1",
    "Softmax s 1 1 in0 y 0=-1 1=1",
]


def test_activations(tmp_path):
    parts = [a.replace(" in0 y", " {x} {y}").split(" ", 2) for a in ACTIVATIONS]
    lines = [f"{kind} {name}{{i}} {rest}" for kind, name, rest in parts]
    check(tmp_path, _fan_out(lines), X3)


def test_prelu_batchnorm_layernorm_eltwise(tmp_path):
    layers = [
        "Split s 1 6 in0 a b c d e f",
        "PReLU p 1 1 a y0 0=4",
        "BatchNorm bn 1 1 b y1 0=4 1=0.001",
        "LayerNorm ln 1 1 c y2 0=9 1=0.00001 2=1",
        "LayerNorm ln2 1 1 d y3 0=63 1=0.00001 2=0",
        "Eltwise sum 2 1 e f y4 0=1 -23301=2,0.5,-2.0",
        "Eltwise prod 2 1 y0 y1 y5 0=0",
        "Eltwise max 2 1 y2 y3 y6 0=2",
    ]
    var = np.abs(w(4)) + 0.1
    weights = [(False, w(4)), (False, w(4)), (False, w(4)), (False, var), (False, w(4)), (False, w(9)), (False, w(9))]
    check(tmp_path, layers, X3, weights)


def test_innerproduct_gemm_matmul(tmp_path):
    x2 = w(5, 8)
    layers = [
        "Split s 1 4 in0 a b c d",
        "InnerProduct fc 1 1 a y0 0=3 1=1 2=24 9=1",  # per row of a 2-D blob
        "Flatten f 1 1 b fb",
        "InnerProduct fc2 1 1 fb y1 0=4 1=0 2=160",
        "Gemm g 1 1 c y2 0=0.5 1=2.0 2=0 3=1 4=0 5=1 6=1 7=5 8=6 9=8 10=4",
        "Permute t 1 1 d dt 0=1",
        "MatMul m 2 1 y0 y0 y3 0=1",
    ]
    weights = [(True, w(24)), (False, w(3)), (True, w(160)), (True, w(6, 8)), (True, w(6))]
    check(tmp_path, layers, x2, weights)


def test_multiheadattention(tmp_path):
    x2 = w(6, 8)
    e = 8
    weights = []
    for _ in range(4):
        weights += [(True, w(e * e)), (False, w(e))]
    check(tmp_path, ["MultiHeadAttention a 1 1 in0 y 0=8 1=2 2=64 3=8 4=8"], x2, weights, tol=1e-5)


def test_permute_3d(tmp_path):
    check(tmp_path, _fan_out([f"Permute p{order} 1 1 {{x}} {{y}} 0={order}" for order in range(6)]), X3)


def test_shapes(tmp_path):
    layers = [
        "Split s 1 9 in0 a b c d e f g h i",
        "Reshape r 1 1 a y0 0=-1 1=4",
        "Reshape r2 1 1 b y1 0=0 1=-1 2=2",
        "Flatten f 1 1 c y2",
        "Concat cat 2 1 d e y3 0=1",
        "Slice sl 1 3 f y4 y5 y6 -23300=3,2,-233,-233 1=0",
        "Crop cr 1 1 g y7 -23309=2,1,2 -23310=2,-1,6 -23311=2,1,2",
        "Crop cr2 1 1 h y8 0=1 1=2 2=1 3=5 4=3 5=2",
        "ExpandDims ex 1 1 i y9 -23303=1,0",
        "Squeeze sq 1 1 y9 y10 -23303=1,0",
    ]
    check(tmp_path, layers, X3)


def test_padding_interp_reduction(tmp_path):
    layers = [
        "Split s 1 9 in0 a b c d e f g h i",
        "Padding p 1 1 a y0 0=1 1=2 2=0 3=3 4=0 5=0.25",
        "Padding p2 1 1 b y1 0=2 1=1 2=2 3=1 4=1 7=1 8=1",
        "Padding p3 1 1 c y2 0=2 1=1 2=2 3=1 4=2",
        "Interp i 1 1 d y3 0=1 1=2.0 2=2.0",
        "Interp i2 1 1 e y4 0=2 3=11 4=5",
        "Interp i3 1 1 f y5 0=2 3=13 4=17 6=1",
        "Reduction r 1 1 g y6 0=3 1=0 -23303=2,1,2 4=1 5=1",
        "Reduction r2 1 1 h y7 0=4 1=0 -23303=1,0 4=0 5=1",
        "Reduction r3 1 1 i y8 0=10 1=1 4=0 5=1",
    ]
    check(tmp_path, layers, X3)


def test_group_and_instance_norm_selu_softplus(tmp_path):
    layers = [
        "Split s 1 5 in0 a b c d e",
        "GroupNorm g 1 1 a y0 0=2 1=4 2=0.01 3=1",
        "GroupNorm g2 1 1 b y1 0=4 1=4 2=0.001 3=0",
        "InstanceNorm n 1 1 c y2 0=4 1=0.00001 2=1",
        "SELU se 1 1 d y3",
        "Softplus sp 1 1 e y4",
    ]
    check(tmp_path, layers, X3 * 3, [(False, w(4)), (False, w(4)), (False, w(4)), (False, w(4))])


def test_pixel_shuffle_and_reorg(tmp_path):
    layers = [
        "Split s 1 4 in0 a b c d",
        "PixelShuffle ps 1 1 a y0 0=2",
        "PixelShuffle ps2 1 1 b y1 0=2 1=1",
        "Reorg r 1 1 c y2 0=2",
        "Reorg r2 1 1 d y3 0=2 1=1",
    ]
    check(tmp_path, layers, w(8, 4, 6))


@pytest.mark.parametrize("direction", [0, 1, 2])
def test_recurrent_layers(tmp_path, direction):
    """LSTM (with and without a projection), GRU and RNN over a (T, input) blob, each direction;
    weights as ncnn stores them (one flagged blob per kind for all directions)."""
    d, t, n_in, hid = 2 if direction == 2 else 1, 6, 5, 4
    x = w(t, n_in)
    layers = [
        "Split s 1 4 in0 a b c e",
        f"LSTM l 1 1 a y0 0={hid} 1={d * 4 * hid * n_in} 2={direction}",
        f"LSTM lp 1 1 b y1 0=3 1={d * 4 * hid * n_in} 2={direction} 3={hid}",
        f"GRU g 1 1 c y2 0={hid} 1={d * 3 * hid * n_in} 2={direction}",
        f"RNN r 1 1 e y3 0={hid} 1={d * hid * n_in} 2={direction}",
    ]
    weights = [
        *[(True, v) for v in (w(d, 4 * hid, n_in), w(d, 4, hid), w(d, 4 * hid, hid))],
        *[(True, v) for v in (w(d, 4 * hid, n_in), w(d, 4, hid), w(d, 4 * hid, 3), w(d, 3, hid))],
        *[(True, v) for v in (w(d, 3 * hid, n_in), w(d, 4, hid), w(d, 3 * hid, hid))],
        *[(True, v) for v in (w(d, hid, n_in), w(d, 1, hid), w(d, hid, hid))],
    ]
    check(tmp_path, layers, x, weights)


def test_lstm_with_states_in_and_out(tmp_path):
    layers = [
        "Split s 1 3 in0 a b c",
        "Reduction r 1 1 b h0 0=3 1=0 -23303=1,0 4=1 5=1",
        "Reduction r2 1 1 c c0 0=4 1=0 -23303=1,0 4=1 5=1",
        "LSTM l 3 3 a h0 c0 y0 h1 c1 0=5 1=100 2=0",
    ]
    check(tmp_path, layers, w(7, 5), [(True, v) for v in (w(1, 20, 5), w(1, 4, 5), w(1, 20, 5))])


@pytest.mark.parametrize("shape", [(4, 3, 4), (5, 5), (3, 2, 2, 3)])
def test_binaryop_per_channel_wins_where_the_last_dim_is_as_long(tmp_path, shape):
    """A 1-D blob as long as both the channels and the last dim runs along the channels (found on
    EfficientNet-B0 at 64x64: its first SE block scales 32 channels of a 32x32 map)."""
    axes = ",".join(str(i) for i in range(1, len(shape)))
    layers = [
        "Split s 1 2 in0 a b",
        f"Reduction r 1 1 b v 0=3 1=0 -23303={len(shape) - 1},{axes} 4=0 5=1",
        "BinaryOp m 2 1 a v y 0=2",
    ]
    check(tmp_path, layers, w(*shape))


def test_reshape_by_shape_expression(tmp_path):
    """6=shape_expr (newer pnnx writes it for ConvNeXt's channels-last LayerNorm): sizes from the
    bottoms' dims, prefix operators, a second bottom lending its dims."""
    layers = [
        "Split s 1 4 in0 a b c d",
        'Reshape r 1 1 a y0 6="0w,-1"',
        'Reshape r2 1 1 b y1 6="*(0c,0h),0w"',
        "Interp i 1 1 c ref 0=1 3=7 4=18",
        'Reshape r3 2 1 d ref y2 6="//(1w,2),1h,-1"',
        'Reshape r4 1 1 y1 y3 6="//(0w,7),-1,3"',
        'Reshape r5 1 1 y2 y4 12=0 13=0 6="1,1,//(252,0n),0n"',  # ConvNeXt's head: a batch entry
    ]
    got = check(tmp_path, layers, X3)
    assert got["y0"].shape == (28, 9) and got["y2"].shape == (4, 7, 9) and got["y3"].shape == (3, 21, 4)
    assert got["y4"].shape == (252, 1, 1)


def test_shuffle_channel(tmp_path):
    layers = ["Split s 1 2 in0 a b", "ShuffleChannel sc 1 1 a y0 0=3", "ShuffleChannel sc2 1 1 b y1 0=2 1=1"]
    check(tmp_path, layers, w(6, 3, 4))


def test_padding_per_channel_values(tmp_path):
    """6=per_channel_pad_data_size: each output channel's own constant, new channels included."""
    layers = ["Padding p 1 1 in0 y0 0=1 1=2 2=0 3=3 4=0 5=9.0 6=7 7=1 8=2"]
    check(tmp_path, layers, X3, [(False, w(7))])


@pytest.mark.parametrize("shape", [(4, 7, 9), (2, 4, 5), (2, 2, 3), (1, 12, 16)])
def test_bicubic_interp(tmp_path, shape):
    """Bicubic up and down, by scale and by size, with and without align_corner: ncnn clamps the
    taps that fall outside the blob (small blobs included). By a scale that does not divide the
    size, ncnn steps 1/scale input pixels per output pixel (bilinear too)."""
    layers = [
        "Split s 1 6 in0 a b c d e f",
        "Interp i6 1 1 f y5 0=2 1=0.5 2=0.75",
        "Interp i 1 1 a y0 0=3 1=2.0 2=2.0",
        "Interp i2 1 1 b y1 0=3 3=11 4=5",
        "Interp i3 1 1 c y2 0=3 3=13 4=17 6=1",
        "Interp i4 1 1 d y3 0=3 1=0.5 2=0.5",
        "Interp i5 1 1 e y4 0=3 3=3 4=2 6=1",
    ]
    check(tmp_path, layers, w(*shape))
