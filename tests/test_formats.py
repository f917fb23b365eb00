"""The format registry (kuiper_core.formats): every model is opened by its content, the
suffix only a hint; files that are no model say what they are. No converter needed here
(tests/test_convert.py runs the real one)."""

from __future__ import annotations

import io
import shutil
import zipfile

import numpy as np
import pytest

import kuiper_core
from conftest import DATA, SAMPLES, without_traced_inputs
from kuiper_core import InputError, ParseError, RuntimeGraph, WeightError
from kuiper_core.formats import Context, OpenOptions, detect, open_model
from kuiper_core.formats.convert import inputshape_text
from kuiper_core.formats.onnx import looks_like_onnx

USER = DATA / "user_models"
TINY = SAMPLES / "tiny_mlp.pnnx.param"


def _format(source, **options) -> str:
    return detect(Context(source, OpenOptions(**options))).NAME


def test_pnnx_by_content_whatever_the_name(tmp_path):
    odd = tmp_path / "weights_and_all.txt"
    shutil.copy(TINY, odd)
    assert _format(odd) == "pnnx"
    model = open_model(odd, bin_path=SAMPLES / "tiny_mlp.pnnx.bin")
    assert model.format == "pnnx" and len(model.graph.operators) == 7
    x = np.load(SAMPLES / "tiny_mlp.input.npy")
    (y,) = model.build().forward(x)
    (want,) = kuiper_core.load(TINY).forward(x)
    np.testing.assert_array_equal(y, want)


def test_each_format_detected_by_content(tmp_path):
    assert _format(TINY) == "pnnx"
    kir = tmp_path / "m.txt"
    kir.write_text("// a comment first\n" + kuiper_core.print_ir(kuiper_core.load(TINY).graph))
    assert _format(kir) == "kir"
    assert _format(USER / "lstm.onnx") == "onnx"
    assert _format((USER / "lstm.pt").read_bytes()) == "torchscript"  # bytes: no name at all
    assert _format((USER / "lstm.onnx").read_bytes()) == "onnx"


def test_onnx_detection_is_not_fooled():
    assert looks_like_onnx((USER / "mobilenet_v2.onnx").read_bytes()[:100])
    assert not looks_like_onnx(b"7767517\n2 2\n")
    assert not looks_like_onnx(b"\x08\x07")  # one field: too little to tell
    assert not looks_like_onnx(b"PK\x03\x04" + b"\0" * 100)
    assert not looks_like_onnx(np.random.default_rng(0).bytes(4096))


def test_bytes_with_bytes_weights():
    model = open_model(TINY.read_bytes(), bin_path=(SAMPLES / "tiny_mlp.pnnx.bin").read_bytes(), name="up.pnnx.param")
    assert model.format == "pnnx" and model.source is None and model.files is None
    x = np.load(SAMPLES / "tiny_mlp.input.npy")
    np.testing.assert_array_equal(model.build().forward(x)[0], kuiper_core.load(TINY).forward(x)[0])
    with pytest.raises(WeightError, match="no up.pnnx.bin was given"):
        open_model(TINY.read_bytes(), name="up.pnnx.param")
    assert open_model(TINY.read_bytes(), weights=False).graph.parameter_count() > 0  # shapes only


def test_kir_bytes_and_weights(tmp_path):
    text = kuiper_core.print_ir(kuiper_core.load(TINY).graph).encode()
    model = open_model(text, bin_path=(SAMPLES / "tiny_mlp.pnnx.bin").read_bytes(), name="m.kir")
    assert model.format == "kir" and model.ir_module is not None
    x = np.load(SAMPLES / "tiny_mlp.input.npy")
    np.testing.assert_array_equal(model.build().forward(x)[0], kuiper_core.load(TINY).forward(x)[0])


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (
            lambda p: shutil.copy(SAMPLES / "tiny_mlp.pnnx.bin", p),
            "a PNNX .bin (the weights only): open its .pnnx.param",
        ),
        (lambda p: p.write_bytes(b"\0\0\0\0" + bytes(12)), "an ncnn .bin"),
        (lambda p: p.write_bytes(_zip({"m/data.pkl": b"x", "m/data/0": b"0"})), "a PyTorch checkpoint"),
        (lambda p: p.write_bytes(_zip({"m/archive_format": b"pt2", "m/models/x.json": b"{}"})), "torch.export"),
        (lambda p: p.write_bytes(b"\x80\x02\x8a\x0alegacy"), "legacy torch.save"),
    ],
    ids=["pnnx-bin", "ncnn-bin", "checkpoint", "pt2", "legacy-pickle"],
)
def test_files_that_are_no_model_say_what_they_are(tmp_path, make, said):
    path = tmp_path / ("model.ncnn.bin" if "ncnn" in said else "model.pt")
    make(path)
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        open_model(path)


def test_ncnn_param_opens_by_content(tmp_path):
    """ncnn's .param shares PNNX's magic line; its bare layer types tell it apart."""
    path = tmp_path / "model.param"
    path.write_text("7767517\n2 2\nInput data 0 1 data\nReLU r 1 1 data out\n")
    (tmp_path / "model.bin").write_bytes(b"")
    model = open_model(path)
    assert model.format == "ncnn" and [op.type for op in model.graph.operators][:2] == ["pnnx.Input", "ncnn.ReLU"]
    np.testing.assert_array_equal(model.build().forward(np.array([-1.0, 2.0], np.float32))[0], [0.0, 2.0])


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_unknown_and_missing_files(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    with pytest.raises(InputError, match="not a model file this engine reads; expected a PNNX .param"):
        open_model(junk)
    with pytest.raises(InputError, match=r"cannot read .*missing\.onnx: no such file"):
        open_model(tmp_path / "missing.onnx")
    # .param and .kir keep their readers' own messages (by the suffix hint)
    with pytest.raises(ParseError, match="cannot read .param file: no such file"):
        open_model(tmp_path / "missing.pnnx.param")
    bad = tmp_path / "bad.param"
    bad.write_text("7767518\n")
    with pytest.raises(ParseError):
        open_model(bad)
    with pytest.raises(InputError, match="unknown model format 'caffe'"):
        open_model(TINY, format="caffe")


def test_load_and_runtime_graph_go_through_the_registry(tmp_path):
    kir = tmp_path / "tiny.kir"
    kir.write_text(kuiper_core.print_ir(kuiper_core.load(TINY).graph))
    shutil.copy(SAMPLES / "tiny_mlp.pnnx.bin", tmp_path / "tiny.bin")
    x = np.load(SAMPLES / "tiny_mlp.input.npy")
    want = kuiper_core.load(TINY).forward(x)[0]
    np.testing.assert_array_equal(kuiper_core.load(kir).forward(x)[0], want)
    np.testing.assert_array_equal(
        RuntimeGraph(kir, reader=lambda p, b: open_model(p, bin_path=b).graph).build().forward(x)[0], want
    )
    loaded = kuiper_core.load(TINY.read_bytes(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes())
    np.testing.assert_array_equal(loaded.forward(x)[0], want)


def test_pnnx_sibling_python_is_found(tmp_path):
    for suffix in (".pnnx.param", ".pnnx.bin"):
        shutil.copy(SAMPLES / f"tiny_mlp{suffix}", tmp_path / f"m{suffix}")
    assert open_model(tmp_path / "m.pnnx.param").files.python is None
    (tmp_path / "m_pnnx.py").write_text("# pnnx's code\n")
    files = open_model(tmp_path / "m.pnnx.param").files
    assert files.python == tmp_path / "m_pnnx.py" and files.bin == tmp_path / "m.pnnx.bin"


@pytest.mark.parametrize(
    ("given", "text"),
    [
        ("[1,3,224,224]", "[1,3,224,224]"),
        ("1, 3, 224, 224", "[1,3,224,224]"),
        ("[1,3,8,8]f32,[1,10]i64", "[1,3,8,8]f32,[1,10]i64"),
        ((1, 3, 8, 8), "[1,3,8,8]"),
        ([(1, 3, 8, 8), (1, 4)], "[1,3,8,8],[1,4]"),
        (None, None),
    ],
)
def test_input_shapes(given, text):
    assert inputshape_text(given) == text


@pytest.mark.parametrize("bad", ["[1,3,a]", "[1,3]x9", "1;3", [(1, "a")]])
def test_bad_input_shapes_name_the_flag(bad):
    with pytest.raises(InputError, match=r"inputshape .* expected e\.g\. \[1,3,224,224\]"):
        inputshape_text(bad)


def test_needs_inputshape_only_for_torchscript_without_recorded_shapes():
    from kuiper_core.formats import needs_inputshape

    traced = (USER / "lstm.pt").read_bytes()
    assert not needs_inputshape(traced) and not needs_inputshape(USER / "lstm.onnx") and not needs_inputshape(TINY)
    assert needs_inputshape(without_traced_inputs(traced), name="scripted.pt")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".param", ".kir", ".onnx", ".pt", ".bin", ""])
def test_hostile_bytes_get_a_kuiper_error_never_another(tmp_path, monkeypatch, suffix):
    """Truncations of every kind of model file and random bytes, under every name: opening them
    raises a KuiperError (the converter here fails at once) or opens, nothing else."""
    fake = tmp_path / "fake_pnnx"
    fake.write_text("#!/bin/sh\necho 'cannot read it'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KUIPER_PNNX", str(fake))
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(7)
    sources = [TINY.read_bytes(), (USER / "lstm.onnx").read_bytes(), (USER / "lstm.pt").read_bytes()]
    sources.append(kuiper_core.print_ir(kuiper_core.load(TINY).graph).encode())
    cases = [data[:n] for data in sources for n in (0, 1, 7, 64, len(data) // 2, len(data) - 1)]
    cases += [rng.bytes(n) for n in (1, 100, 5000)] + [b"PK\x03\x04" + rng.bytes(200), b"\x08\x07\x12\x03abc"]
    for i, data in enumerate(cases):
        path = tmp_path / f"case{i}{suffix}"
        path.write_bytes(data)
        for source in (path, data):
            try:
                open_model(source, name=path.name)
            except kuiper_core.KuiperError:
                pass
