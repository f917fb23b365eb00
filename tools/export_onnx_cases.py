"""Small ONNX graphs whose operators pnnx keeps as ONNX's (no torch form), converted by the real
pnnx, with onnxruntime's output: tests/data/onnx_cases/NAME.{onnx,pnnx.param,pnnx.bin,
input.npy (one input) or inputs.npz (in0, in1, ...), expected.npz}; and one TorchScript case
(torch.stft), with torch's output. tests/test_layer_index.py finds the types in the
.pnnx.param; the engine's outputs are checked against the recorded ones
(tests/test_layers_tensor_ops.py, tests/test_onnx_ops.py: these run without pnnx or torch;
size_unsqueeze also at several widths, size_unsqueeze.widths.npz;
test_onnx_ops.py also converts one-node models of every attribute variant at test time).

    python tools/export_onnx_cases.py

Needs onnx, onnxruntime and pnnx; torch for the TorchScript case (skipped without it).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "onnx_cases"
sys.path.insert(0, str(ROOT))


def gather() -> tuple[Any, list[np.ndarray]]:
    """Reshape + Gather with constant (1, C, 1, 1) indices: how torch.onnx.export's dynamo
    exporter writes convnext's view after its pooling (pnnx keeps the Gather)."""
    from onnx import TensorProto, helper, numpy_helper

    c = 6
    index = np.random.default_rng(0).permutation(c).reshape(1, c, 1, 1).astype(np.int64)
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
        helper.make_node("Reshape", ["m", "shape"], ["flat"]),
        helper.make_node("Gather", ["flat", "index"], ["g"], axis=0),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([2, 3], np.int64), "axes"),
        numpy_helper.from_array(np.array([c], np.int64), "shape"),
        numpy_helper.from_array(index, "index"),
    ]
    graph = helper.make_graph(
        nodes,
        "gather",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 1, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model, [np.random.default_rng(1).standard_normal((1, c, 4, 4)).astype(np.float32)]


def _graph(
    name: str, nodes: list, inputs: dict[str, np.ndarray], outputs: dict[str, int], inits: dict[str, Any], opset: int
) -> Any:
    """A model of `nodes`; inputs by name (their arrays give type and shape), outputs by name
    and ONNX element type, constants (initializers) by name."""
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in inputs.items()
        ],
        [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


F, I64 = 1, 7  # ONNX element types FLOAT, INT64


def reductions() -> tuple[Any, list[np.ndarray]]:
    """ReduceMax/ReduceMin (axes as an input), ArgMax (last index), ArgMin, TopK (k an input)."""
    from onnx import helper as h

    x = np.round(np.random.default_rng(2).standard_normal((2, 3, 5)) * 2).astype(np.float32)  # ties
    nodes = [
        h.make_node("ReduceMax", ["x", "axes12"], ["max"], keepdims=1),
        h.make_node("ReduceMin", ["x", "axes2"], ["min"], keepdims=0),
        h.make_node("ArgMax", ["x"], ["argmax"], axis=1, keepdims=0, select_last_index=1),
        h.make_node("ArgMin", ["x"], ["argmin"], axis=2, keepdims=1),
        h.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1, largest=1),
    ]
    inits = {"axes12": np.array([1, 2], np.int64), "axes2": np.array([2], np.int64), "k": np.array([3], np.int64)}
    outs = {"max": F, "min": F, "argmax": I64, "argmin": I64, "values": F, "indices": I64}
    return _graph("reductions", nodes, {"x": x}, outs, inits, 18), [x]


def indexing() -> tuple[Any, list[np.ndarray]]:
    """GatherElements, GatherND, ScatterND (add), CumSum (exclusive), NonZero of a ReLU (its
    count follows the values), OneHot."""
    from onnx import helper as h

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ids = np.array([[0, 3, -1], [4, 9, 2]], np.int64)
    nodes = [
        h.make_node("GatherElements", ["x", "ge_index"], ["ge"], axis=1),
        h.make_node("GatherND", ["x", "nd_index"], ["nd"]),
        h.make_node("ScatterND", ["x", "sc_index", "sc_updates"], ["sc"], reduction="add"),
        h.make_node("CumSum", ["x", "axis"], ["cs"], exclusive=1),
        h.make_node("Relu", ["x"], ["r"]),
        h.make_node("NonZero", ["r"], ["nz"]),
        h.make_node("OneHot", ["ids", "depth", "onoff"], ["oh"], axis=-1),
    ]
    inits = {
        "ge_index": rng.integers(-3, 3, (2, 2, 4)).astype(np.int64),
        "nd_index": np.array([[1, 2], [0, -1]], np.int64),
        "sc_index": np.array([[1, 0], [1, 0]], np.int64),
        "sc_updates": rng.standard_normal((2, 4)).astype(np.float32),
        "axis": np.array(2, np.int64),
        "depth": np.array(5, np.int64),
        "onoff": np.array([0.0, 1.0], np.float32),
    }
    outs = {"ge": F, "nd": F, "sc": F, "cs": F, "nz": I64, "oh": F}
    return _graph("indexing", nodes, {"x": x, "ids": ids}, outs, inits, 16), [x, ids]


def tensors() -> tuple[Any, list[np.ndarray]]:
    """Pad (axes), Clip with a tensor min, Expand of a shape computed from the data (pnnx keeps
    it: nudenet's case), Col2Im."""
    from onnx import TensorProto
    from onnx import helper as h

    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    lo = np.array(-0.2, np.float32)
    s0 = np.array([7.0, 3.0, 1.0], np.float32)  # the shape as data: Expand to (2, 3, 4) below
    cols = rng.standard_normal((1, 12, 9)).astype(np.float32)
    nodes = [
        h.make_node("Pad", ["x", "pads", "value", "pad_axes"], ["pad"], mode="constant"),
        h.make_node("Clip", ["x", "lo"], ["clip"]),
        h.make_node("Mul", ["s0", "zero"], ["s1"]),
        h.make_node("Add", ["s1", "base"], ["s2"]),
        h.make_node("Cast", ["s2"], ["shape"], to=TensorProto.INT64),
        h.make_node("ReduceMean", ["x", "mean_axes"], ["m"], keepdims=0),
        h.make_node("Expand", ["m", "shape"], ["expand"]),
        h.make_node("Col2Im", ["cols", "image", "block"], ["col2im"]),
    ]
    inits = {
        "pads": np.array([1, 2, 3, 1], np.int64),
        "value": np.array(1.5, np.float32),
        "pad_axes": np.array([1, 3], np.int64),
        "zero": np.array(0.0, np.float32),
        "base": np.array([2.0, 1.0, 4.0], np.float32),
        "mean_axes": np.array([0, 3], np.int64),
        "image": np.array([4, 4], np.int64),
        "block": np.array([2, 2], np.int64),
    }
    outs = {"pad": F, "clip": F, "expand": F, "col2im": F}
    return _graph("tensors", nodes, {"x": x, "lo": lo, "s0": s0, "cols": cols}, outs, inits, 18), [x, lo, s0, cols]


def recurrent() -> tuple[Any, list[np.ndarray]]:
    """LSTM (bidirectional, bias, initial states), GRU (linear_before_reset, as torch exports),
    RNN: weights as constant inputs, as the exporters write them."""
    from onnx import helper as h

    rng = np.random.default_rng(5)
    H, x = 4, rng.standard_normal((5, 2, 3)).astype(np.float32)
    h0, c0 = rng.standard_normal((2, 2, H)).astype(np.float32), rng.standard_normal((2, 2, H)).astype(np.float32)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    inits = {
        "lw": w(2, 4 * H, 3), "lr": w(2, 4 * H, H), "lb": w(2, 8 * H),
        "gw": w(1, 3 * H, 3), "gr": w(1, 3 * H, H), "gb": w(1, 6 * H),
        "rw": w(1, H, 3), "rr": w(1, H, H), "rb": w(1, 2 * H),
    }  # fmt: skip
    nodes = [
        h.make_node(
            "LSTM",
            ["x", "lw", "lr", "lb", "", "h0", "c0"],
            ["ly", "lh", "lc"],
            hidden_size=H,
            direction="bidirectional",
        ),
        h.make_node("GRU", ["x", "gw", "gr", "gb"], ["gy", "gh"], hidden_size=H, linear_before_reset=1),
        h.make_node("RNN", ["x", "rw", "rr", "rb"], ["ry"], hidden_size=H),
    ]
    outs = {"ly": F, "lh": F, "lc": F, "gy": F, "gh": F, "ry": F}
    return _graph("recurrent", nodes, {"x": x, "h0": h0, "c0": c0}, outs, inits, 14), [x, h0, c0]


def resize_stft() -> tuple[Any, list[np.ndarray]]:
    """Resize in the modes torch's interpolate has no form for (pytorch_half_pixel nearest
    rounding up; tf_crop_and_resize), STFT with a Hann window."""
    from onnx import helper as h

    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    signal = rng.standard_normal((2, 64, 1)).astype(np.float32)
    nodes = [
        h.make_node(
            "Resize",
            ["x", "", "", "sizes"],
            ["near"],
            mode="nearest",
            coordinate_transformation_mode="pytorch_half_pixel",
            nearest_mode="round_prefer_ceil",
        ),
        h.make_node(
            "Resize",
            ["x", "roi", "scales"],
            ["crop"],
            mode="linear",
            coordinate_transformation_mode="tf_crop_and_resize",
            extrapolation_value=0.5,
        ),
        h.make_node("STFT", ["signal", "step", "window"], ["stft"], onesided=1),
    ]
    inits = {
        "sizes": np.array([1, 3, 7, 9], np.int64),
        "roi": np.array([0, 0, 0.1, 0.2, 1, 1, 0.9, 1.2], np.float32),
        "scales": np.array([1, 1, 2, 2], np.float32),
        "step": np.array(4, np.int64),
        "window": (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32),
    }
    outs = {"near": F, "crop": F, "stft": F}
    return _graph("resize_stft", nodes, {"x": x, "signal": signal}, outs, inits, 17), [x, signal]


def elementwise() -> tuple[Any, list[np.ndarray]]:
    """Shrink with a bias (without one pnnx writes F.hardshrink), on float and integer inputs."""
    from onnx import helper as h

    x = np.random.default_rng(5).standard_normal((2, 3, 5)).astype(np.float32)
    n = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    nodes = [
        h.make_node("Shrink", ["x"], ["y"], bias=0.25, lambd=0.8),
        h.make_node("Shrink", ["n"], ["m"], bias=1.5, lambd=2.0),
    ]
    return _graph("elementwise", nodes, {"x": x, "n": n}, {"y": F, "m": 6}, {}, 13), [x, n]


CASES = {
    "gather": gather,
    "reductions": reductions,
    "indexing": indexing,
    "tensors": tensors,
    "recurrent": recurrent,
    "resize_stft": resize_stft,
    "elementwise": elementwise,
}


def torch_stft() -> None:
    """tests/data/onnx_cases/torch_stft.*: a traced torch.stft (Hann window, centred) whose
    complex output goes through torch.view_as_real, then view_as_complex and abs: a magnitude
    spectrogram; torch's output as expected.npz."""
    import torch

    class Spectrogram(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("window", torch.hann_window(32))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            pairs = torch.view_as_real(torch.stft(x, 32, hop_length=8, window=self.window, return_complex=True))
            return pairs, torch.view_as_complex(pairs * 2.0).abs()

    x = np.random.default_rng(7).standard_normal((2, 200)).astype(np.float32)
    module = Spectrogram().eval()
    with torch.no_grad():
        ys = [y.numpy() for y in module(torch.from_numpy(x))]
    with tempfile.TemporaryDirectory() as tmp:
        torch.jit.trace(module, torch.from_numpy(x)).save(f"{tmp}/torch_stft.pt")
        _save("torch_stft", Path(f"{tmp}/torch_stft.pt"), [x], ys, inputshape=[list(x.shape)])
    (OUT / "torch_stft.pt").unlink()  # the traced file is 10 KB of TorchScript; the .pnnx files say it all


def torch_onnx_exports() -> None:
    """tests/data/onnx_cases/torch_lstm.*, torch_misc.*, torch_trilu.*, torch_scatter.*,
    torch_roll.*: torch.onnx.export's own ONNX (opset 17) of a 2-layer bidirectional batch_first
    nn.LSTM (pnnx keeps ONNX's LSTM, weights as inputs), of topk / argmax / cumsum / amax (kept
    as TopK, ArgMax, CumSum, ReduceMax), of tril / triu (kept as Trilu), of scatter /
    scatter_add (kept as ScatterElements), of a roll without dims (pnnx keeps its 1-D Slices)
    and of a seq-first nn.MultiheadAttention with kdim/vdim at batch 1 (pnnx names its inputs
    `$query $key $value`), with onnxruntime's outputs. The last two through torch 2.13's
    default exporter (it needs onnxscript; the other refuses the roll and writes no fused
    attention)."""
    import onnxruntime as ort
    import torch

    torch.manual_seed(0)

    class Lstm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y, (h, _) = self.lstm(x)
            return y, h

    class Misc(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values, indices = torch.topk(x, 3, dim=-1)
            return values, indices, torch.argmax(x, dim=1), torch.cumsum(x, dim=2), x.amax(dim=(1, 2))

    class Triangles(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.tril(x, 1), torch.triu(x, -2)

    class Roll(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.roll(x, 7), torch.roll(x, -2, 1)

    class Scatters(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            index = torch.tensor([[[2, 0, 1, 3, 3], [1, 1, 0, 2, 2]]]).expand(x.shape[0], 2, 5)
            return torch.zeros_like(x).scatter(1, index, x[:, :2, :5]), x.scatter_add(2, index, x[:, 2:, :5])

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = torch.nn.MultiheadAttention(16, 2, kdim=10, vdim=6)

        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.att(q, k, v)

    rng = np.random.default_rng(8)

    def randn(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    for name, module, xs in (
        ("torch_lstm", Lstm(), [randn(2, 5, 6)]),
        ("torch_misc", Misc(), [randn(2, 4, 6)]),
        ("torch_trilu", Triangles(), [randn(2, 3, 5, 6)]),
        ("torch_scatter", Scatters(), [randn(2, 4, 6)]),
        ("torch_roll", Roll(), [randn(2, 3, 5)]),
        ("torch_mha_kv", Attention(), [randn(5, 1, 16), randn(7, 1, 10), randn(7, 1, 6)]),
    ):
        path = OUT / f"{name}.onnx"
        args = tuple(torch.from_numpy(x) for x in xs)
        if name in ("torch_roll", "torch_mha_kv"):
            torch.onnx.export(module.eval(), args, str(path), opset_version=18, external_data=False)
        else:
            torch.onnx.export(module.eval(), args, str(path), dynamo=False, opset_version=17)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feeds = {i.name: x for i, x in zip(session.get_inputs(), xs)}
        _save(name, path, xs, session.run(None, feeds))


def size_unsqueeze() -> None:
    """tests/data/onnx_cases/size_unsqueeze.*: ddddocr's OCR head in small (issue 34): an LSTM
    over a dynamic width, its output reshaped to [size(0), 1, -1] through ONNX's Shape -> Gather
    -> Unsqueeze -> Concat. pnnx cannot see through the LSTM, so it keeps `size(@0,0)` as an
    expression whose value torch.unsqueeze reads as a tensor. Run at the width pnnx traces (9)
    and at two others: their inputs and onnxruntime's outputs in size_unsqueeze.widths.npz
    (`in{k}`, `out{k}`)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    c, hid, out = 4, 3, 5
    rng = np.random.default_rng(0)

    def f32(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    def size(src: str, dim: int, name: str) -> list[Any]:
        return [
            helper.make_node("Shape", [src], [name + "_shape"]),
            helper.make_node("Gather", [name + "_shape", f"dim{dim}"], [name], axis=0),
        ]

    zeros = numpy_helper.from_array(np.zeros(1, np.float32))
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),  # (W, 1, C)
        *size("t", 1, "batch"),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["one", "batch1", "hid"], ["state_shape"], axis=0),
        helper.make_node("ConstantOfShape", ["state_shape"], ["h0"], value=zeros),
        helper.make_node("LSTM", ["t", "W", "R", "B", "", "h0", "h0"], ["ys"], hidden_size=hid),  # (W, 1, 1, H)
        helper.make_node("Transpose", ["ys"], ["yt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "seq"], ["h"]),  # (W, 1, H)
        *size("h", 0, "n0"),
        *size("h", 1, "n1"),
        *size("h", 2, "n2"),
        helper.make_node("Mul", ["n0", "n1"], ["rows"]),
        helper.make_node("Unsqueeze", ["rows", "axes"], ["rows1"]),
        helper.make_node("Unsqueeze", ["n2", "axes"], ["n21"]),
        helper.make_node("Concat", ["rows1", "n21"], ["flat"], axis=0),
        helper.make_node("Reshape", ["h", "flat"], ["f"]),  # (W, H)
        helper.make_node("Gemm", ["f", "w", "b"], ["z"], transB=1),  # (W, out)
        helper.make_node("Unsqueeze", ["n0", "axes"], ["n01"]),
        helper.make_node("Unsqueeze", ["n1", "axes"], ["n11"]),
        helper.make_node("Concat", ["n01", "n11", "minus"], ["shape"], axis=0),  # [W, 1, -1]
        helper.make_node("Reshape", ["z", "shape"], ["y"]),  # (W, 1, out)
    ]
    inits = {
        "W": f32(1, 4 * hid, c),
        "R": f32(1, 4 * hid, hid),
        "B": f32(1, 8 * hid),
        "w": f32(out, hid),
        "b": f32(out),
        "seq": np.array([0, 0, -1], np.int64),
        **{f"dim{d}": np.array(d, np.int64) for d in range(3)},
        "axes": np.array([0], np.int64),
        "one": np.array([1], np.int64),
        "hid": np.array([hid], np.int64),
        "minus": np.array([-1], np.int64),
    }
    graph = helper.make_graph(
        nodes,
        "size_unsqueeze",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["width", 1, out])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = OUT / "size_unsqueeze.onnx"
    onnx.save_model(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    xs = [np.random.default_rng(w).standard_normal((1, c, w)).astype(np.float32) for w in (9, 17, 1)]
    ys = [session.run(None, {"x": x})[0] for x in xs]
    _save("size_unsqueeze", path, xs[:1], ys[:1])
    np.savez(
        OUT / "size_unsqueeze.widths.npz",
        **{f"in{k}": x for k, x in enumerate(xs)},
        **{f"out{k}": y for k, y in enumerate(ys)},
    )


def _save(name: str, source: Path, inputs: list[np.ndarray], outputs: list[np.ndarray], **convert: Any) -> None:
    from kuiper_core.formats import open_model

    if source.parent != OUT:
        shutil.copyfile(source, OUT / source.name)
    with tempfile.TemporaryDirectory() as cache:
        files = open_model(OUT / source.name, cache_dir=cache, **convert).files
        assert files is not None and files.param is not None and files.bin is not None
        shutil.copyfile(files.param, OUT / f"{name}.pnnx.param")
        shutil.copyfile(files.bin, OUT / f"{name}.pnnx.bin")
    if len(inputs) == 1:
        np.save(OUT / f"{name}.input.npy", inputs[0])
    else:
        np.savez(OUT / f"{name}.inputs.npz", **{f"in{i}": x for i, x in enumerate(inputs)})
    np.savez(OUT / f"{name}.expected.npz", **{f"out{i}": y for i, y in enumerate(outputs)})
    print(f"{name}: {', '.join(p.name for p in sorted(OUT.glob(name + '.*')))}")


def main() -> int:
    import onnx
    import onnxruntime as ort

    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in CASES.items():
        model, xs = build()
        onnx.save_model(model, str(OUT / f"{name}.onnx"))
        session = ort.InferenceSession(str(OUT / f"{name}.onnx"), providers=["CPUExecutionProvider"])
        ys = session.run(None, {i.name: x for i, x in zip(session.get_inputs(), xs)})
        _save(name, OUT / f"{name}.onnx", xs, ys)
    size_unsqueeze()
    if importlib.util.find_spec("torch") is not None:
        torch_stft()
        torch_onnx_exports()
    else:
        print(
            "torch_stft, torch_lstm, torch_misc, torch_trilu, torch_scatter, torch_roll, torch_mha_kv: skipped (need torch)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
