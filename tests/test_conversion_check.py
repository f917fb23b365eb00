"""The check of a conversion (kuiper_core/formats/conversion_check.py): a converted file that
computes something else than the original is caught on both routes (.onnx against onnxruntime,
.pt against torch), named where it first departs, stored with the cached conversion, and
`kuiper run` refuses it unless told to accept it.

The converter is the real pnnx, wrapped (KUIPER_PNNX names the wrapper) by a script that alters
what pnnx wrote, as a lossy converter rewrite would: a weight scaled, a padding turned to
'reflect', a reshape given the other order of the same dims. The model and its input come from
tools/export_conversion_check.py (tests/data/conversion_check/)."""

from __future__ import annotations

import json
import stat
import sys

import numpy as np
import pytest

from conftest import DATA
from kuiper_core.cli import main
from kuiper_core.formats import base, converter_available
from kuiper_core.formats.conversion_check import (
    AGREES,
    CHECKS_FILE,
    DISAGREES,
    NOT_CHECKED,
    PASSED,
    ConversionCheck,
    engine_digest,
)
from kuiper_core.formats.convert import ENV_CONVERTER, find_converter
from kuiper_core.pnnx import parse_param
from kuiper_core.references.conversion_check import open_cached, open_model, probe_inputs

HERE = DATA / "conversion_check"
X = HERE / "probe.input.npy"
needs_pnnx = pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
needs_ort = pytest.mark.skipif(
    not (base.installed("onnxruntime") and base.installed("onnx")), reason="onnxruntime is not installed"
)
needs_torch = pytest.mark.skipif(not base.installed("torch"), reason="torch is not installed")
ROUTES = [pytest.param("onnx", marks=needs_ort), pytest.param("pt", marks=needs_torch)]

# The wrapper: the real pnnx, then one alteration of what it wrote (ALTER below).
_WRAPPER = """#!{python}
import re, subprocess, sys, zipfile
import numpy as np
code = subprocess.call([{real!r}] + sys.argv[1:])
param = "model.pnnx.param"
text = open(param).read()
if {alter!r} == "padding":
    text = text.replace("padding_mode=zeros", "padding_mode=reflect")
elif {alter!r} == "reshape":
    text = text.replace("(1,16,6)", "(1,TMP)").replace("(1,6,16)", "(1,16,6)").replace("(1,TMP)", "(1,6,16)")
elif {alter!r} == "weight":
    linear = re.search(r"^nn.Linear +(\\S+)", text, re.M).group(1)
    with zipfile.ZipFile("model.pnnx.bin") as z:
        entries = {{n: z.read(n) for n in z.namelist()}}
    w = np.frombuffer(entries[linear + ".weight"], "<f4").copy()
    w[7] += 0.5
    entries[linear + ".weight"] = w.tobytes()
    with zipfile.ZipFile("model.pnnx.bin", "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
open(param, "w").write(text)
sys.exit(code)
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _altering_converter(tmp_path, monkeypatch, alter: str) -> None:
    real = str(find_converter().path)
    path = tmp_path / f"pnnx_{alter}"
    path.write_text(_WRAPPER.format(python=sys.executable, real=real, alter=alter))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(ENV_CONVERTER, str(path))


@pytest.mark.slow  # real conversions and a framework per route
@needs_pnnx
@pytest.mark.parametrize("route", ROUTES)
def test_an_honest_conversion_agrees(route):
    model = open_model(HERE / f"probe.{route}")
    check = model.check
    assert check is not None and check.status == AGREES, check.text()
    assert check.outputs[0].max_error is not None and check.outputs[0].max_error < 1e-5
    framework = "onnxruntime" if route == "onnx" else "torch"
    assert check.reference.startswith(framework) and "original" in check.reference
    assert "seeded random (seed 0): 1x2x4x6 f32" in check.probe
    (y,) = model.build().forward(np.load(X))  # and the engine gives PyTorch's answer on the example
    np.testing.assert_allclose(y, np.load(HERE / "probe.expected.npz")["out0"], atol=1e-5)


@pytest.mark.slow
@needs_pnnx
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "alter, departs",
    [("weight", "nn.Linear"), ("padding", "nn.Conv2d"), ("reshape", "Tensor.reshape")],
)
def test_an_altered_conversion_is_caught_where_it_departs(tmp_path, monkeypatch, route, alter, departs):
    _altering_converter(tmp_path, monkeypatch, alter)
    model = open_model(HERE / f"probe.{route}")
    check = model.check
    assert check is not None and check.status == DISAGREES, check.text()
    worst = check.worst
    assert worst is not None and worst.failed and worst.max_error > 1e-3
    assert "DISAGREES" in check.headline() and "output 0" in check.headline()
    first = check.first
    assert first is not None and first.type == departs, check.text()
    if route == "pt" and alter == "weight":
        # pnnx's own code reads the same altered weights: only the output departs, and that is said
        assert "converter changed the model" in check.reason, check.text()


@pytest.mark.slow
@needs_pnnx
@needs_ort
def test_the_verdict_survives_the_cache_and_a_reload(tmp_path, monkeypatch, private_cache):
    _altering_converter(tmp_path, monkeypatch, "weight")
    first = open_model(HERE / "probe.onnx")
    assert first.check is not None and first.check.disagrees
    stored = json.loads((first.conversion.directory / CHECKS_FILE).read_text())
    assert list(stored) == [f"seeded-0@{engine_digest()}"]  # another engine version checks again
    again = open_model(HERE / "probe.onnx")  # the cache: no conversion, no framework run
    assert again.conversion.cached and again.check == first.check
    reloaded = open_cached(first.conversion.key)  # the app after a reload: by key, without the source
    assert reloaded is not None and reloaded.check == first.check
    assert ConversionCheck.from_json(first.check.to_json()) == first.check


@pytest.mark.slow
@needs_pnnx
@needs_ort
def test_a_verdict_another_engine_gave_is_not_reused(tmp_path, monkeypatch, private_cache):
    """The verdict is the engine's answer too: after an engine change (a layer fixed, or broken)
    the cached conversion is checked again (fresh exports: a Resize fixed while its stored
    verdict still said DISAGREES)."""
    from kuiper_core.formats import conversion_check

    first = open_model(HERE / "probe.onnx")
    assert first.check is not None and first.check.status == AGREES
    monkeypatch.setattr(conversion_check, "engine_digest", lambda: "another-engine")
    again = open_model(HERE / "probe.onnx")
    assert again.conversion.cached and again.check is not None and again.check.status == AGREES
    stored = json.loads((first.conversion.directory / CHECKS_FILE).read_text())
    assert sorted(stored) == sorted([f"seeded-0@{engine_digest()}", "seeded-0@another-engine"])


@pytest.mark.slow
@needs_pnnx
@needs_ort
def test_run_refuses_a_disagreeing_conversion_unless_accepted(tmp_path, monkeypatch, capsys):
    _altering_converter(tmp_path, monkeypatch, "padding")
    model = str(HERE / "probe.onnx")
    out = tmp_path / "y.npy"
    assert main(["run", model, "--input", str(X), "--output", str(out)]) == 3
    err = capsys.readouterr().err
    assert "error: " in err and "not run" in err and "--accept-disagreement" in err and "output 0" in err
    assert "first departing operand" in err and "nn.Conv2d" in err  # the warning names where
    assert not out.exists()
    assert main(["run", model, "--input", str(X), "--output", str(out), "--accept-disagreement"]) == 0
    assert out.exists()
    for command in (["inspect", model], ["compare", model, "--input", str(X)]):
        main(command)
        assert "DISAGREES" in capsys.readouterr().err
    assert main(["convert", model, "-o", str(tmp_path / "conv"), "-q"]) == 0
    assert "DISAGREES" in capsys.readouterr().out


@pytest.mark.slow
@needs_pnnx
@needs_ort
def test_the_users_input_is_the_probe_and_sets_the_shapes(tmp_path, capsys):
    # dynamic batch, height and width: converted at the input's shapes, checked on that input
    x = np.random.default_rng(3).standard_normal((2, 2, 5, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(HERE / "dynamic.onnx"), "--input", str(tmp_path / "x.npy")]) == 0
    err = capsys.readouterr().err
    assert "conversion checked: agrees with onnxruntime" in err, err
    model = open_model(HERE / "dynamic.onnx", inputs=[x])
    assert model.conversion.inputshape == "[2,2,5,7]" and model.graph.inputs[0].outputs[0].shape == (2, 2, 5, 7)
    assert model.check.agrees and model.check.probe.startswith("the given input")
    stored = json.loads((model.conversion.directory / CHECKS_FILE).read_text())
    assert [k.split("-")[0] for k in stored] == ["input"]
    # without an input, pnnx guesses the open dims: said, and the probe runs at its guess
    guessed = open_model(HERE / "dynamic.onnx")
    assert guessed.conversion.guessed and "pnnx guessed" in guessed.conversion.note
    dims = guessed.conversion.guessed.split("]")[0].lstrip("[").replace(",", "x")
    assert guessed.check.agrees and f"{dims} f32" in guessed.check.probe, (
        guessed.conversion.guessed,
        guessed.check.probe,
    )
    # a file that fixes its shapes (this .onnx at batch 1) is converted at them: pnnx takes no other
    batch3 = np.concatenate([np.load(X)] * 3)
    fixed = open_model(HERE / "probe.onnx", inputs=[batch3])
    assert fixed.conversion.inputshape is None
    # onnxruntime does not take batch 3 for it: the verdict is the seeded probe's, said so
    assert fixed.check.agrees and "the original does not run on the given input" in fixed.check.reason


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_not_checked_says_why(monkeypatch):
    monkeypatch.setattr(base, "installed", lambda module: module not in ("onnxruntime", "torch"))
    model = open_model(HERE / "probe.onnx")
    assert model.check is not None and model.check.status == NOT_CHECKED
    assert "onnxruntime is not installed" in model.check.headline()
    assert not (model.conversion.directory / CHECKS_FILE).exists()  # checked once it is installed


@pytest.mark.slow  # a real conversion and onnxruntime
@needs_pnnx
@needs_ort
def test_the_check_runs_under_the_conversions_time_limit(monkeypatch):
    from kuiper_core.references import isolated

    seen = []
    real = isolated._spawn

    def spawn(what, job, inputs, timeout):
        seen.append(timeout)
        return real(what, job, inputs, timeout)

    monkeypatch.setattr(isolated, "_spawn", spawn)
    model = open_model(HERE / "probe.onnx", timeout=123.0)
    assert model.check is not None and model.check.agrees and seen == [123.0]
    from kuiper_core.formats.convert import converter_memory

    assert isolated.memory_limit() == converter_memory()  # the framework's address space is the converter's


def test_integer_probes_stay_within_what_the_graph_indexes():
    text = (
        "7767517\n3 2\n"
        "pnnx.Input in0 0 1 0 #0=(2,7)i64\n"
        "nn.Embedding emb 1 1 0 1 embedding_dim=4 num_embeddings=3 sparse=False @weight=(3,4)f32 #0=(2,7)i64 #1=(2,7,4)f32\n"
        "pnnx.Output out0 1 0 1 #1=(2,7,4)f32\n"
    )
    (x,), said = probe_inputs(parse_param(text, "emb.param"))
    assert x.dtype == np.int64 and x.shape == (2, 7) and x.min() >= 0 and x.max() <= 2 and "in 0..2" in said
    gather = text.replace(
        "nn.Embedding emb 1 1 0 1 embedding_dim=4 num_embeddings=3 sparse=False @weight=(3,4)f32",
        "torch.gather g 1 1 0 1 dim=0",
    )
    from kuiper_core.references.conversion_check import ProbeError

    with pytest.raises(ProbeError, match="integer input 0 indexes with operator g .torch.gather."):
        probe_inputs(parse_param(gather, "gather.param"))


def test_a_batch_baked_into_a_reshape_is_named_not_folded_into_another_dim():
    # pnnx traced at batch 1 writes a reshape target with the batch baked in; at batch 6 the
    # permuted input no longer differs in dim 0 only, so no batch rule applies and the -1 takes
    # the batch: (1,120,1,240) where the original gives (6,120,1,40) (PP-OCR rec at batch 6)
    from kuiper_core import ShapeError
    from kuiper_core.runtime import RuntimeGraph

    text = (
        "7767517\n4 3\n"
        "pnnx.Input in0 0 1 0 #0=(1,40,120)f32\n"
        "torch.permute p 1 1 0 1 dims=(1,0,2) $input=0 #0=(1,40,120)f32 #1=(40,1,120)f32\n"
        "Tensor.reshape r 1 1 1 2 shape=(1,120,1,-1) $input=1 #1=(40,1,120)f32 #2=(1,120,1,40)f32\n"
        "pnnx.Output out0 1 0 2 #2=(1,120,1,40)f32\n"
    )
    runtime = RuntimeGraph.from_graph(parse_param(text, "baked.param")).build()
    (y,) = runtime.forward(np.ones((1, 40, 120), np.float32))  # at the traced batch: as declared
    assert y.shape == (1, 120, 1, 40)
    with pytest.raises(ShapeError, match=r"operator 'r' \(Tensor.reshape\).*batch 6, traced at batch 1.*dim 3"):
        runtime.forward(np.ones((6, 40, 120), np.float32))
    # a dim that follows the batch one for one (sequence-first) is no fold: (1,6,120) runs
    seq = text.replace("shape=(1,120,1,-1)", "shape=(1,1,-1)").replace("#2=(1,120,1,40)f32", "#2=(1,1,4800)f32")
    seq = seq.replace("Tensor.reshape r", "torch.permute q").replace("shape=(1,1,-1)", "dims=(1,0,2)")
    seq = seq.replace("#2=(1,1,4800)f32", "#2=(1,40,120)f32")
    (z,) = RuntimeGraph.from_graph(parse_param(seq, "seq.param")).build().forward(np.ones((6, 40, 120), np.float32))
    assert z.shape == (6, 40, 120)


def _resize_onnx(path, out: int, **attrs) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    sizes = numpy_helper.from_array(np.array([1, 2, out, out], np.int64), "sizes")
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["r"], **attrs)]
    nodes.append(helper.make_node("Relu", ["r"], ["y"]))
    graph = helper.make_graph(nodes, "g", [x], [y], [sizes])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


@pytest.mark.slow  # real conversions and onnxruntime
@needs_pnnx
@needs_ort
def test_a_resize_pnnx_rewrites_wrongly_is_caught_and_given_back_its_onnx_semantics(tmp_path, monkeypatch):
    """pnnx 20261020 writes ONNX's default nearest Resize (half_pixel, round_prefer_floor) at a
    non-integer ratio as F.interpolate(mode=nearest), which rounds otherwise (docs/coverage.md):
    a converter rewrite that changes the answer. The check finds it where it departs; the
    conversion then makes it the engine's ONNX Resize, and the check agrees."""
    from kuiper_core.formats import convert

    _resize_onnx(tmp_path / "r.onnx", 7, mode="nearest")
    with monkeypatch.context() as m:  # as pnnx wrote it: no normalisation before it
        m.setattr(convert, "prepare", lambda model_file, kind, inputshape, *a, **k: inputshape)
        check = open_model(tmp_path / "r.onnx", cache_dir=tmp_path / "as_written").check
    assert check is not None and check.disagrees, check.text()
    assert check.first is not None and check.first.type == "F.interpolate" and check.worst.max_error > 0.1
    fixed = open_model(tmp_path / "r.onnx")  # kept as a Resize before pnnx: nothing left to restore
    assert [op.type for op in fixed.graph.operators][1] == "Resize"
    assert fixed.check.agrees, fixed.check.text()
    # one torch computes alike (nearest at a whole ratio, 4 -> 8) stays pnnx's F.interpolate
    _resize_onnx(tmp_path / "whole.onnx", 8, mode="nearest")
    whole = open_model(tmp_path / "whole.onnx")
    assert [op.type for op in whole.graph.operators][1] == "F.interpolate" and whole.check.agrees
    # linear asymmetric, cubic with its own coefficient: made ONNX Resizes, agree
    for name, attrs in (("lin", {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}),
                        ("cub", {"mode": "cubic", "cubic_coeff_a": -0.5})):  # fmt: skip
        _resize_onnx(tmp_path / f"{name}.onnx", 7, **attrs)
        model = open_model(tmp_path / f"{name}.onnx")
        assert [op.type for op in model.graph.operators][1] == "Resize" and model.check.agrees, model.check.text()


def test_a_passing_output_is_explore_compare_s_ok():
    """The verdict (formats/, below explore/) names explore.compare's OK status by its value."""
    from kuiper_core.explore.compare import OK

    assert PASSED == OK
