"""ncnn files (kuiper_core/ncnn): real pnnx exports (tests/data/ncnn, made by tools/export_ncnn.py
at fp32 and fp16 weights) run by the engine against PyTorch's outputs of the same modules, every
blob against the ncnn binding (where installed), the readers' located errors, and
`kuiper compare --ncnn`. Exports of bigger models are made on the fly when torch and pnnx are
installed (slow)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, slow_cases
from kuiper_core import LimitError, ParseError, WeightError, limits
from kuiper_core.formats import open_model
from kuiper_core.formats.base import installed
from kuiper_core.ncnn import load_ncnn
from kuiper_core.references.ncnn_compare import rel_error
from kuiper_core.runtime import RuntimeGraph

NCNN = DATA / "ncnn"
MODELS = sorted({p.name.split(".")[0] for p in NCNN.glob("*.ncnn.param")})
EXPORTS = [(m, tag) for m in MODELS for tag in ("fp32", "fp16") if (NCNN / f"{m}.{tag}.ncnn.param").exists()]
# fp16 weights (pnnx's default) cost this much at the output; fp32 weights nothing but the sums' order
TOLERANCE = {"fp32": 2e-5, "fp16": 5e-3}


def run_all(graph, x: np.ndarray) -> dict[str, np.ndarray]:
    run = RuntimeGraph.from_graph(graph).build().steps(x)
    for _ in run:
        pass
    return {k: np.asarray(v) for k, v in run.values.items()}


@pytest.mark.parametrize(("name", "tag"), EXPORTS, ids=[f"{m}-{t}" for m, t in EXPORTS])
def test_exports_match_pytorch(name, tag):
    model = open_model(NCNN / f"{name}.{tag}.ncnn.param")
    assert model.format == "ncnn"
    x = np.load(NCNN / f"{name}.input.npy")
    outs = model.build().forward(x)
    with np.load(NCNN / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    assert len(outs) == len(expected)
    for y, want in zip(outs, expected):
        # ncnn's shapes have no batch dim; an InnerProduct over a (1, n) blob keeps its rows
        assert np.squeeze(y).shape == np.squeeze(want).shape, (y.shape, want.shape)
        err = rel_error(y.reshape(want.shape), want)
        assert err <= TOLERANCE[tag], err
    stored = {a.dtype for op in model.graph.operators for a in op.attrs.values() if a.shape != (1,)}
    assert ("f16" in stored) == (tag == "fp16")  # the weights kept as the file stores them


@functools.cache
def _ncnn_blobs(name: str, blobs: tuple[str, ...]) -> dict[str, dict[str, np.ndarray]]:
    """ncnn's value of each of `blobs` in each of `name`'s exports with those blobs, by tag: one
    child (run_ncnn, ncnn imported once) runs the fp32 and the fp16 export on the same input."""
    from kuiper_core.references.isolated import run_ncnn

    tags = [t for m, t in EXPORTS if m == name and tuple(load_ncnn(NCNN / f"{m}.{t}.ncnn.param").operands) == blobs]
    params = [NCNN / f"{name}.{t}.ncnn.param" for t in tags]
    x = np.load(NCNN / f"{name}.input.npy")
    _, runs = run_ncnn([(p, p.with_suffix(".bin"), {}) for p in params], {"in0": x}, list(blobs), 120)
    return dict(zip(tags, runs))


@pytest.mark.parametrize(
    ("name", "tag"), slow_cases(EXPORTS, {("mobilenet_v3_small", "fp16")}), ids=[f"{m}-{t}" for m, t in EXPORTS]
)
def test_every_blob_matches_ncnn(name, tag):
    pytest.importorskip("ncnn")
    param = NCNN / f"{name}.{tag}.ncnn.param"
    graph = load_ncnn(param)
    x = np.load(NCNN / f"{name}.input.npy")
    ours = run_all(graph, x)
    blobs = list(graph.operands)
    theirs = _ncnn_blobs(name, tuple(blobs))[tag]
    for b in blobs:
        assert ours[b].shape == theirs[b].shape, b
        assert rel_error(ours[b], theirs[b]) <= 1e-4, (b, rel_error(ours[b], theirs[b]))


def test_graph_names_params_and_storage():
    graph = load_ncnn(NCNN / "digits_cnn.fp16.ncnn.param")
    conv = graph.operator("convrelu_0")
    assert conv.type == "ncnn.Convolution" and conv.params["0"] == 16 and conv.params["9"] == 1
    assert conv.attrs["weight"].shape == (16, 1, 3, 3) and conv.attrs["weight"].dtype == "f16"
    assert conv.attrs["bias"].dtype == "f32"  # biases are raw fp32 whatever the flag words say
    assert [op.type for op in graph.inputs] == ["pnnx.Input"]
    assert [op.inputs[0].name for op in graph.outputs] == ["out0"]
    from kuiper_core.ncnn.schema import named

    assert "activation_type" in [n for _, n, _ in named("Convolution", {9: 1})]


def write(tmp: Path, text: str, data: bytes = b"") -> Path:
    p = tmp / "m.ncnn.param"
    p.write_text(text)
    (tmp / "m.ncnn.bin").write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("text", "line", "col", "said"),
    [
        ("7767518\n1 1\nInput in0 0 1 in0\n", 1, 1, "magic number 7767517"),
        ("7767517\n1 x\nInput in0 0 1 in0\n", 2, 3, "expected a count"),
        ("7767517\n2 2\nInput in0 0 1 in0\nReLU r 1 1 nope y\n", 4, 12, "used before any layer produces it"),
        ("7767517\n2 2\nInput in0 0 1 in0\nReLU r 1 1 in0 y 0=abc\n", 4, 20, "expected a number"),
        ("7767517\n2 2\nInput in0 0 1 in0\nReLU r 1 1 in0 y 40=1\n", 4, 18, "out of range"),
        ("7767517\n2 2\nInput in0 0 1 in0\nCrop c 1 1 in0 y -23309=2,1\n", 4, 25, "count,v1"),
        ("7767517\n2 2\nInput in0 0 1 in0\nReLU r 1 1 in0\n", 4, 12, "has only 1 name"),
        ("7767517\n3 2\nInput in0 0 1 in0\nReLU r 1 1 in0 y\n", 2, 1, "declares 3 layer"),
        ("7767517\n2 2\nInput in0 0 1 in0\nReLU r 1 1 in0 in0\n", 4, 16, "already produced"),
        ("7767517\n2 2\nInput in0 0 1 in0\nTensor.reshape t 1 1 in0 y\n", 4, 1, "PNNX operator pnnx left"),
        ('7767517\n2 2\nInput in0 0 1 in0\nReshape r 1 1 in0 y 6="0w,-1\n', 4, 23, "expected a number"),
    ],
)
def test_param_errors_are_located(tmp_path, text, line, col, said):
    with pytest.raises(ParseError, match=said) as info:
        load_ncnn(write(tmp_path, text))
    e = info.value
    assert (e.line, e.column) == (line, col), e
    assert "^" in str(e) and str(e).startswith(f"{tmp_path / 'm.ncnn.param'}:{line}:{col}:")


CONV = "7767517\n2 2\nInput in0 0 1 in0\nConvolution c 1 1 in0 y 0=2 1=1 5=1 6=6\n"


def test_bin_errors_name_the_layer(tmp_path):
    good = b"\0\0\0\0" + np.arange(6, dtype="<f4").tobytes() + np.ones(2, "<f4").tobytes()
    assert load_ncnn(write(tmp_path, CONV, good)).operator("c").attrs["weight"].shape == (2, 3, 1, 1)
    with pytest.raises(WeightError, match=r"operator 'c' \(Convolution\).*needs 8 bytes from byte 28"):
        load_ncnn(write(tmp_path, CONV, good[:-4]))
    with pytest.raises(WeightError, match="4 byte.* after the last layer"):
        load_ncnn(write(tmp_path, CONV, good + b"\0" * 4))
    with pytest.raises(WeightError, match="int8"):
        load_ncnn(write(tmp_path, CONV, bytes.fromhex("384b0d00") + b"\0" * 8 + b"\0" * 8))
    with pytest.raises(WeightError, match="does not fit num_output 2"):
        load_ncnn(write(tmp_path, CONV.replace("6=6", "6=7"), good))


def test_fp16_and_table_quantized_weights(tmp_path):
    values = np.array([0.5, -1.25, 3.0, 0.1, 2.0, -0.75], np.float32)
    fp16 = (0x01306B47).to_bytes(4, "little") + values.astype("<f2").tobytes()
    bias = np.array([0.25, -0.5], "<f4").tobytes()
    w = load_ncnn(write(tmp_path, CONV, fp16 + bias)).operator("c").attrs["weight"]
    assert w.dtype == "f16" and np.array_equal(np.asarray(w.data).ravel(), values.astype(np.float16))
    table = np.linspace(-2, 2, 256, dtype="<f4")
    index = np.array([3, 200, 0, 255, 17, 128], "u1")
    quantized = bytes([1, 0, 0, 0]) + table.tobytes() + index.tobytes() + b"\0\0"
    w = load_ncnn(write(tmp_path, CONV, quantized + bias)).operator("c").attrs["weight"]
    assert np.array_equal(np.asarray(w.data).ravel(), table[index])


def test_sizes_are_checked_before_reading(tmp_path):
    huge = CONV.replace("0=2 1=1 5=1 6=6", "0=65536 1=1 5=0 6=4294967296")
    with limits.use(max_tensor_elements=1 << 20), pytest.raises(LimitError):
        load_ncnn(write(tmp_path, huge, b"\0" * 16))


def test_format_registry_and_messages(tmp_path):
    from kuiper_core.formats import detect, Context, OpenOptions
    from kuiper_core.errors import InputError

    param = NCNN / "tiny_mlp.fp32.ncnn.param"
    assert detect(Context(param, OpenOptions())).NAME == "ncnn"
    assert detect(Context(DATA.parent.parent / "sample_models" / "tiny_mlp.pnnx.param", OpenOptions())).NAME == "pnnx"
    odd = tmp_path / "model.txt"  # by content, whatever the name
    odd.write_bytes(param.read_bytes())
    model = open_model(odd, bin_path=NCNN / "tiny_mlp.fp32.ncnn.bin")
    assert model.format == "ncnn" and "ncnn" in model.describe()
    data = open_model(param.read_bytes(), name="m.ncnn.param", bin_path=(NCNN / "tiny_mlp.fp32.ncnn.bin").read_bytes())
    x = np.load(NCNN / "tiny_mlp.input.npy")
    np.testing.assert_array_equal(data.build().forward(x)[0], model.build().forward(x)[0])
    binfile = tmp_path / "m.ncnn.bin"
    binfile.write_bytes((NCNN / "tiny_mlp.fp32.ncnn.bin").read_bytes())
    with pytest.raises(InputError, match="an ncnn .bin"):
        open_model(binfile)


def test_shape_errors_name_the_layer():
    from kuiper_core.errors import ModelError

    model = open_model(NCNN / "digits_cnn.fp32.ncnn.param")
    with pytest.raises(
        ModelError, match=r"operator 'convrelu_0' \(ncnn.Convolution\).*1 input channels, the blob has 3"
    ):
        model.build().forward(np.zeros((3, 8, 8), np.float32))


@pytest.mark.slow
def test_compare_cli_explains_fp16_storage(tmp_path):
    """`kuiper compare --ncnn` on the fp16 export: ours vs ncnn per blob, PyTorch at the output,
    the option table; exit 0 (our run within tolerance of both)."""
    pytest.importorskip("ncnn")
    cmd = [
        sys.executable, "-m", "kuiper_core.cli", "compare", str(NCNN / "vit_tiny.fp16.ncnn.param"), "--ncnn",
        "--input", str(NCNN / "vit_tiny.input.npy"), "--reference", str(NCNN / "vit_tiny.expected.npz"),
        "--rtol", "1e-3",
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr + res.stdout
    out = res.stdout
    assert "ncnn weights stored as fp16" in out and "why it differs (errors against PyTorch)" in out
    assert "use_fp16_storage" in out and "weights widened to fp32" in out
    assert "= out0 (name)" in out


def _pnnx_export(name: str, tmp: Path) -> Path:
    pytest.importorskip("torch")
    if not installed("pnnx"):
        pytest.skip("pnnx is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from export_ncnn import export

    return export(name, tmp)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenetv3", "yolov5s_mini", "unet"])
def test_bigger_exports_match_pytorch(tmp_path, name):
    """torchvision's ResNet-18 and the bundled MobileNetV3, YOLOv5s-mini (a detector) and U-Net,
    converted here by the real pnnx at fp32 and fp16 weights, run by the engine against PyTorch."""
    out = _pnnx_export(name, tmp_path)
    x = np.load(out / f"{name}.input.npy")
    with np.load(out / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    # measured: YOLOv5s-mini's heads are 3e-5 from PyTorch at fp32 and 1.5e-2 with fp16 weights,
    # where ncnn's own outputs agree with ours (below)
    tolerance = {"fp32": 1e-4, "fp16": 2e-2}
    for tag in ("fp32", "fp16"):
        param = out / f"{name}.{tag}.ncnn.param"
        model = open_model(param)
        outs = model.build().forward(x)
        errs = [rel_error(y, e) for y, e in zip(outs, expected)]
        assert max(errs) <= tolerance[tag], (tag, errs)
        if installed("ncnn"):
            from kuiper_core.references.isolated import run_ncnn

            names = [op.inputs[0].name for op in model.graph.outputs]
            _, (theirs,) = run_ncnn([(param, param.with_suffix(".bin"), {})], {"in0": x}, names, 300)
            assert max(rel_error(y, theirs[n]) for y, n in zip(outs, names)) <= 1e-4


@pytest.mark.slow
def test_why_names_the_weight_storage_with_pytorch_per_layer(tmp_path):
    """With pnnx's NAME_pnnx.py beside the files (torch), every blob is lined up with a PyTorch
    operand, and the fp32 export's option table names fp16 weight storage and its first layer."""
    pytest.importorskip("ncnn")
    pytest.importorskip("torch")
    if not installed("pnnx"):
        pytest.skip("pnnx is not installed")
    import shutil

    import pnnx
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from export_ncnn import MODELS

    from kuiper_core.references.ncnn_compare import compare_ncnn

    torch.manual_seed(0)
    module, x = MODELS["digits_cnn"]()
    torch.jit.trace(module.eval(), (x,)).save(str(tmp_path / "m.pt"))
    subprocess.run(
        [pnnx.EXEC_PATH, "m.pt", "inputshape=[1,1,8,8]", "fp16=0"], cwd=tmp_path, check=True, capture_output=True
    )
    assert (tmp_path / "m_pnnx.py").exists()
    report = compare_ncnn(tmp_path / "m.ncnn.param", [x.numpy()[0]], options=("use_fp16_storage",))
    aligned = [r for r in report.rows if r.torch_operand is not None]
    assert len(aligned) >= len(report.rows) - 1  # every blob has its PyTorch operand
    assert report.reference == "PyTorch" and report.weights == "fp32"
    assert max(r.ours_vs_torch for r in aligned if r.ours_vs_torch is not None) < 1e-5
    # fp16 weights move the first convolution by 4.8e-4 (the softmax at the end hides it)
    fp16 = next(r for r in report.runs if r.label.startswith("weights as fp16"))
    assert fp16.first_layer == "convrelu_0" and fp16.first_error is not None and fp16.first_error > 1e-4
    base = next(r for r in report.runs if r.label.startswith("baseline"))
    assert base.first_layer is None and base.final_error < 1e-5
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.slow
def test_graph_page_data_names_params_and_origins(tmp_path):
    """The Graph page's ncnn view: params named, and the PNNX operators behind each layer found by
    content (the bundled vit_tiny's PNNX files are the same seeded module as this export)."""
    import shutil

    from conftest import SAMPLES
    from kuiper_core.explore.ncnn_view import deployed_rows

    for suffix in (".param", ".bin"):
        shutil.copy(NCNN / f"vit_tiny.fp32.ncnn{suffix}", tmp_path / f"m.ncnn{suffix}")
        shutil.copy(SAMPLES / f"vit_tiny.pnnx{suffix}", tmp_path / f"m.pnnx{suffix}")
    opened = open_model(tmp_path / "m.ncnn.param")
    caption, rows = deployed_rows(opened, np.load(NCNN / "vit_tiny.input.npy"), with_origins=True)
    by_name = {r["layer"]: r for r in rows}
    assert "num_output=64 [0]" in by_name["conv_18"]["params"] and "f32" in by_name["conv_18"]["weights"]
    assert by_name["splitncnn_0"]["from PNNX"] == "(ncnn's own fan-out)"
    assert by_name["conv_18"]["from PNNX"] == "patch_embed"
    assert by_name["attention_33"]["from PNNX"] == "blocks.0.attn.mha"
    assert by_name["transpose_56"]["from PNNX"] == "torch.flatten_25, torch.transpose_26"  # two fused into one
    assert caption.endswith("m.ncnn.param: the ncnn model itself (86 layers)")
    # the input's shape, from the PNNX files beside (pnnx's ncnn Input has none): the app can make one
    assert opened.graph.inputs[0].outputs[0].shape == (3, 32, 32)


def test_forward_stepper_walks_the_deployed_graph():
    from kuiper_core.explore.stepper import ForwardStepper

    model = open_model(NCNN / "mobilenet_v3_small.fp16.ncnn.param")
    x = np.load(NCNN / "mobilenet_v3_small.input.npy")
    stepper = ForwardStepper(model.build(), [x])
    seen = []
    while (event := stepper.step()) is not None:
        seen.append(event.type)
    assert stepper.error is None and len(seen) == stepper.total
    assert "ncnn.ConvolutionDepthWise" in seen and "ncnn.Split" in seen
    with np.load(NCNN / "mobilenet_v3_small.expected.npz") as z:
        assert rel_error(np.asarray(stepper.values["out0"]), z["out0"]) <= TOLERANCE["fp16"]


def test_shape_expressions_read_as_ncnn_reads_them():
    from kuiper_core.ncnn.shape_expr import blobs_used, evaluate

    shapes = [(4, 7, 9), (2, 5)]
    assert evaluate("0w,-1", shapes) == [9, -1]
    assert evaluate("*(0c,0h),//(1w,2),max(1h,3)", shapes) == [28, 2, 3]
    assert evaluate("+(0w,/(1w,2))", shapes) == [11]  # a float result truncated to a size
    assert blobs_used("0w,1h,1c") == 2 and blobs_used("-1") == 0
    for bad, said in [
        ("2w", "reads bottom 2"),
        ("//(0w,0)", "divides by zero"),
        ("sqrt(0w)", "not a size"),
        ("", "empty"),
    ]:
        with pytest.raises(ValueError, match=said):
            evaluate(bad, shapes)
