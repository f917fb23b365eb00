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
import re
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
from kuiper_core.formats.onnx_prepare import Prepared
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


@pytest.mark.slow  # real conversions and a framework per route
@needs_pnnx
@pytest.mark.parametrize("route", ROUTES)
def test_token_ids_of_two_dtypes_two_outputs_and_a_0d_input_are_probed_from_the_file(route):
    """tokens: f32 features and i64 ids into a 40-row Embedding, two outputs; scalar: a 0-d f32
    input, which pnnx's .param declares no shape of (its log says the one it read)."""
    tokens = open_model(HERE / f"tokens.{route}")
    check = tokens.check
    assert check is not None and check.agrees, check.text()
    assert "1x5x6 f32 standard normal, 1x5 i64 in 0..39" in check.probe, check.probe
    assert [o.index for o in check.outputs] == [0, 1] and not any(o.failed for o in check.outputs)
    scalar = open_model(HERE / f"scalar.{route}")
    assert scalar.graph.inputs[1].outputs[0].shape is None  # pnnx wrote no shape for it
    assert scalar.check is not None and scalar.check.agrees, scalar.check.text()
    assert "1x5 f32 standard normal, () f32 standard normal" in scalar.check.probe, scalar.check.probe


@pytest.mark.slow
@needs_pnnx
@needs_ort
def test_an_altered_weight_of_a_two_output_model_names_both_outputs(tmp_path, monkeypatch):
    _altering_converter(tmp_path, monkeypatch, "weight")  # the Linear before both outputs
    check = open_model(HERE / "tokens.onnx").check
    assert check is not None and check.disagrees, check.text()
    assert [o.index for o in check.outputs if o.failed] == [0, 1], check.text()
    assert check.first is not None and check.first.type == "nn.Linear", check.text()
    assert "output 0" in check.headline() and "✗ output 1" in check.text()


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
        assert "converted at pnnx's optlevel 2" in check.reason and "--optlevel 1" in check.reason, check.reason


@pytest.mark.slow
@needs_pnnx
@needs_ort
def test_the_verdict_survives_the_cache_and_a_reload(tmp_path, monkeypatch, private_cache):
    _altering_converter(tmp_path, monkeypatch, "weight")
    first = open_model(HERE / "probe.onnx")
    assert first.check is not None and first.check.disagrees
    stored = json.loads((first.conversion.directory / CHECKS_FILE).read_text())
    assert list(stored) == [f"seeded-0@{engine_digest()}"]  # another engine version checks again
    run = ["run", str(HERE / "probe.onnx"), "--input", str(X)]
    assert main(run) == 3  # checked on the user's input too: stored under its digest
    assert len(json.loads((first.conversion.directory / CHECKS_FILE).read_text())) == 2
    from kuiper_core.references import isolated

    spawned: list[str] = []  # (an error raised here would be caught as the framework failing)
    monkeypatch.setattr(isolated, "_spawn", lambda what, *a, **k: spawned.append(what))
    again = open_model(HERE / "probe.onnx")  # the cache: no conversion, no framework run
    assert again.conversion.cached and again.check == first.check
    reloaded = open_cached(first.conversion.key)  # the app after a reload: by key, without the source
    assert reloaded is not None and reloaded.check == first.check
    assert main(run) == 3 and spawned == []  # the CLI's second run: the stored verdict
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


@pytest.mark.slow  # a real conversion and a framework child per route
@needs_pnnx
@pytest.mark.parametrize("route", ROUTES)
def test_a_framework_past_the_time_limit_is_not_checked_timed_out_not_a_hang(monkeypatch, route):
    """The framework's child runs under the conversion's time limit, the current limits'
    max_child_seconds (the app's are lower) when nothing else is asked: a child that cannot finish
    in it (here: 0.05 s, less than starting Python with NumPy takes; 0.3 s was once enough for
    onnxruntime's whole run on a warm machine) is stopped and the verdict says
    so; it is not stored, so a later open checks again."""
    import time

    from kuiper_core import limits
    from kuiper_core.formats.convert import ENV_TIMEOUT
    from kuiper_core.references.conversion_check import TIMED_OUT

    monkeypatch.delenv(ENV_TIMEOUT, raising=False)
    converted = open_model(HERE / f"probe.{route}", check=False)  # converted (and cached) unchecked
    assert converted.check is None
    started = time.perf_counter()
    with limits.use(max_child_seconds=0.05):
        model = open_model(HERE / f"probe.{route}")  # the cached conversion: only the check runs
    seconds = time.perf_counter() - started
    check = model.check
    assert model.conversion.cached and check is not None and check.status == NOT_CHECKED, check
    assert check.reason.startswith(TIMED_OUT) and "0.05 s" in check.reason and ENV_TIMEOUT in check.reason, check.reason
    assert check.headline().startswith("conversion not checked: timed out")
    assert seconds < 10, seconds  # the child stopped at its limit (and the engine's side is small)
    assert not (model.conversion.directory / CHECKS_FILE).exists()
    assert open_model(HERE / f"probe.{route}").check.agrees  # under the usual limit: checked, stored
    assert (model.conversion.directory / CHECKS_FILE).exists()


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
    # values changed on the way (pnnx.Expression add(@0,45) before the embedding): no range is known
    shifted = _graph(
        3,
        "pnnx.Input in0 0 1 0 #0=(2,7)i64",
        "pnnx.Expression e 1 1 0 5 expr=add(@0,45) #0=(2,7)i64 #5=(2,7)i64",
        "nn.Embedding emb 1 1 5 1 embedding_dim=4 num_embeddings=50 sparse=False @weight=(50,4)f32 #5=(2,7)i64 #1=(2,7,4)f32",
        "pnnx.Output out0 1 0 1 #1=(2,7,4)f32",
    )
    with pytest.raises(ProbeError, match="emb .nn.Embedding. through operator e .pnnx.Expression., which changes"):
        probe_inputs(shifted)
    # ONNX's Gather left by pnnx indexes along `axis` (a (4,30) table on axis 1: 0..29), and
    # pnnx's `[@0]` before Tensor.index passes the indices unchanged (a (12,3) table: 0..11)
    onnx_gather = _graph(
        3,
        "pnnx.Input in0 0 1 0 #0=(6)i64",
        "pnnx.Attribute w 0 1 1 @data=(4,30)f32 #1=(4,30)f32",
        "Gather g 2 1 1 0 2 axis=1 #1=(4,30)f32 #0=(6)i64 #2=(4,6)f32",
        "pnnx.Output out0 1 0 2 #2=(4,6)f32",
    )
    (ids,), said = probe_inputs(onnx_gather)
    assert "in 0..29" in said and ids.max() <= 29
    index = _graph(
        4,
        "pnnx.Input in0 0 1 0 #0=(5)i64",
        "pnnx.Attribute w 0 1 1 @data=(12,3)f32 #1=(12,3)f32",
        "pnnx.Expression e 1 1 0 2 expr=[@0] #0=(5)i64",
        "Tensor.index i 2 1 1 2 3 $input=1 $expr=2 #1=(12,3)f32 #3=(5,3)f32",
        "pnnx.Output out0 1 0 3 #3=(5,3)f32",
    )
    assert "in 0..11" in probe_inputs(index)[1]
    pixels = _graph(  # an image of bytes nothing indexes with: all 256 values
        2,
        "pnnx.Input in0 0 1 0 #0=(1,3,4,4)u8",
        "Tensor.to t 1 1 0 1 dtype=torch.float copy=False #0=(1,3,4,4)u8 #1=(1,3,4,4)f32",
        "pnnx.Output out0 1 0 1 #1=(1,3,4,4)f32",
    )
    (image,), said = probe_inputs(pixels)
    assert image.dtype == np.uint8 and "in 0..255" in said and image.max() > 9


def _graph(operands: int, *lines: str):
    """A .param graph of `lines` (one operator each) with `operands` operands."""
    return parse_param(f"7767517\n{len(lines)} {operands}\n" + "\n".join(lines) + "\n", "probe.param")


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
        m.setattr(convert, "prepare", lambda model_file, kind, inputshape, *a, **k: Prepared(inputshape))
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


def _clip_onnx(path, max_input: str, constant: bool) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [] if constant else [helper.make_node("ReduceMean", ["x"], ["m"], keepdims=0)]  # a computed max
    nodes += [helper.make_node("Clip", ["x", "", max_input], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "m")] if constant else []
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def test_a_clip_with_only_a_computed_max_is_made_a_min_before_pnnx(tmp_path):
    onnx = pytest.importorskip("onnx")
    from kuiper_core.formats.onnx_prepare import max_only_clips

    _clip_onnx(tmp_path / "c.onnx", "m", constant=False)
    model = onnx.load(str(tmp_path / "c.onnx"))
    assert max_only_clips(model.graph) and [(n.op_type, list(n.input)) for n in model.graph.node][1] == (
        "Min",
        ["x", "m"],
    )
    _clip_onnx(tmp_path / "k.onnx", "m", constant=True)  # a constant max: pnnx writes torch.clamp(max=0.5), right
    kept = onnx.load(str(tmp_path / "k.onnx"))
    assert max_only_clips(kept.graph) == [] and kept.graph.node[0].op_type == "Clip"


@pytest.mark.slow  # real conversions and onnxruntime
@needs_pnnx
@needs_ort
def test_a_clip_pnnx_reads_its_max_as_a_min_is_caught_and_fixed_before_pnnx(tmp_path, monkeypatch):
    """pnnx 20261020 writes Clip(x, "", max) with a computed max as Clip(x, max): the max read as
    the min. The check finds it at the Clip; the normalisation before pnnx makes it Min(x, max)."""
    from kuiper_core.formats import convert

    _clip_onnx(tmp_path / "c.onnx", "m", constant=False)
    with monkeypatch.context() as m:  # as pnnx writes it: no normalisation before it
        m.setattr(convert, "prepare", lambda model_file, kind, inputshape, *a, **k: Prepared(inputshape))
        check = open_model(tmp_path / "c.onnx", cache_dir=tmp_path / "as_written").check
    assert check is not None and check.disagrees and check.first is not None and check.first.type == "Clip", check
    assert check.worst is not None and check.worst.max_error > 0.1
    fixed = open_model(tmp_path / "c.onnx")
    assert "expr=min(@0,@1)" in fixed.files.param.read_text() and fixed.check.agrees, fixed.check.text()


def _softmax_onnx(path, op: str, axis: int, opset: int = 11) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node(op, ["n"], ["s"], axis=axis)]
    nodes.append(helper.make_node("Neg", ["s"], ["y"]))
    graph = helper.make_graph(nodes, "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7), str(path))


def test_an_old_opset_softmax_before_the_last_axis_is_made_the_flatten_it_means(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")  # (onnx.reference takes opset 11's Softmax per axis too)
    from kuiper_core.formats.onnx_prepare import flattening_softmaxes

    def run(model):
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    x = np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)
    for op, axis in (("Softmax", 1), ("LogSoftmax", 0), ("Softmax", -2)):
        _softmax_onnx(tmp_path / "s.onnx", op, axis)
        model = onnx.shape_inference.infer_shapes(onnx.load(str(tmp_path / "s.onnx")))  # (as normalise has)
        before = run(model)
        assert flattening_softmaxes(model), (op, axis)
        assert [n.op_type for n in model.graph.node] == ["Neg", "Flatten", op, "Reshape", "Neg"]
        np.testing.assert_allclose(run(model), before, rtol=1e-6, atol=1e-7)  # onnxruntime: the same values
    for axis, opset in ((-1, 11), (2, 12), (1, 13)):  # over the last axis, or opset 13's per-axis meaning: kept
        _softmax_onnx(tmp_path / "k.onnx", "Softmax", axis, opset)
        kept = onnx.shape_inference.infer_shapes(onnx.load(str(tmp_path / "k.onnx")))
        assert flattening_softmaxes(kept) == [] and len(kept.graph.node) == 3


@pytest.mark.slow  # real conversions and onnxruntime
@needs_pnnx
@needs_ort
def test_an_old_opset_softmax_pnnx_takes_per_axis_is_caught_and_fixed_before_pnnx(tmp_path, monkeypatch):
    """pnnx 20261020 writes opset 11's Softmax(axis=1) of a (1,3,4) input, which normalises over
    the 12 values flattened from axis 1, as a softmax over dim 1 (3 values): the check names it;
    the normalisation before pnnx writes the flatten out."""
    from kuiper_core.formats import convert

    _softmax_onnx(tmp_path / "s.onnx", "Softmax", 1)
    with monkeypatch.context() as m:  # as pnnx writes it: no normalisation before it
        m.setattr(convert, "prepare", lambda model_file, kind, inputshape, *a, **k: Prepared(inputshape))
        check = open_model(tmp_path / "s.onnx", cache_dir=tmp_path / "as_written").check
    assert check is not None and check.disagrees and check.first is not None, check
    assert check.first.type == "F.softmin", check.text()  # (pnnx fuses Neg, Softmax into F.softmin(dim=1))
    assert check.worst is not None and check.worst.max_error > 0.1
    fixed = open_model(tmp_path / "s.onnx")
    assert "torch.flatten" in [op.type for op in fixed.graph.operators] and fixed.check.agrees, fixed.check.text()


def test_a_passing_output_is_explore_compare_s_ok():
    """The verdict (formats/, below explore/) names explore.compare's OK status by its value."""
    from kuiper_core.explore.compare import OK

    assert PASSED == OK


def test_the_app_shows_a_disagreement_in_the_error_colour_with_its_forward_step():
    """explore/conversion_verdict.py: what the pages draw of a verdict (tone, lines, the step)."""
    from kuiper_core.explore.conversion_verdict import ERROR, INFO, SUCCESS, verdict_view
    from kuiper_core.formats.conversion_check import ConversionCheck, Departure, OutputCheck

    out = OutputCheck(0, "5", "over tolerance", 0.8, 0.4, 1e-4, "at (0, 3)")
    first = Departure(1, "conv2d_0", "nn.Conv2d", "1", "max |error| 0.3")
    view = verdict_view(
        ConversionCheck(DISAGREES, "onnxruntime 1.32.0 running the original .onnx", "seeded", (out,), first)
    )
    assert view is not None and view.tone == ERROR and view.step == 2 and view.operator == "conv2d_0"
    line = re.sub(r"\\(.)", r"\1", view.line)  # (Markdown-escaped: names and messages shown as written)
    assert "DISAGREES with onnxruntime 1.32.0" in line and "conv2d_0" in line
    assert "conv2d\\_0" in view.link_label and "does not compute what the original does" in view.warning
    assert "first departing operand" in view.details and "step 2" in view.details
    agrees = verdict_view(ConversionCheck(AGREES, "torch 2.13.0 running the original TorchScript module", "seeded"))
    assert agrees is not None and agrees.tone == SUCCESS and agrees.step is None and not agrees.warning
    unchecked = verdict_view(ConversionCheck(NOT_CHECKED, reason="timed out: onnxruntime ran past …"))
    assert (
        unchecked is not None
        and unchecked.tone == INFO
        and "not checked: timed out" in re.sub(r"\\(.)", r"\1", unchecked.line)
    )
    assert verdict_view(None) is None  # a model that was not converted


def test_the_app_shows_the_verdict_on_the_users_input_where_one_was_stored(tmp_path):
    from types import SimpleNamespace

    from kuiper_core.explore.conversion_verdict import session_verdict, verdict_view
    from kuiper_core.formats.conversion_check import probe_key, store_check

    seeded = ConversionCheck(AGREES, "onnxruntime 1.32.0 running the original .onnx", "seeded random (seed 0): 1x2 f32")
    opened = SimpleNamespace(conversion=SimpleNamespace(directory=tmp_path), check=seeded)
    mine = [np.ones((1, 2), np.float32)]
    assert session_verdict(opened, mine) is seeded  # not checked on it yet: the seeded probe's
    on_mine = ConversionCheck(DISAGREES, seeded.reference, "the given input: (1, 2) float32")
    store_check(tmp_path, probe_key(mine), on_mine)
    assert session_verdict(opened, mine) == on_mine and session_verdict(opened, None) is seeded
    view = verdict_view(session_verdict(opened, mine))
    assert view is not None and view.line.endswith("(on your input)")
    assert session_verdict(SimpleNamespace(conversion=None, check=None), mine) is None  # not converted


def test_argmax_labels_that_differ_only_where_their_scores_tie_pass_and_say_why():
    """A label differs only where the original's two best scores are closer than twice the
    scores' largest difference: the scores are the measure (kelp-o-matic's segmentation)."""
    from kuiper_core.explore.compare import OK, OVER, Comparison
    from kuiper_core.formats.conversion_check import OutputCheck
    from kuiper_core.references.compare import Row
    from kuiper_core.references.conversion_check import _labels_at_ties

    graph = _graph(
        3,
        "pnnx.Input in0 0 1 0 #0=(1,3,8,8)f32",
        "torch.argmax am 1 1 0 1 dim=1 keepdim=False #0=(1,3,8,8)f32 #1=(1,8,8)i64",
        "pnnx.Output out0 1 0 1 #1=(1,8,8)i64",
    )

    def row(operand: str, status: str, error: float) -> Row:
        return Row(0, "am", "torch.argmax", operand, Comparison(status, error, 1e-4, (1,), (1,)))

    labels = OutputCheck(0, "1", OVER, 1.0, 1.0, 1e-4, "at (0, 3, 5)")
    passed = _labels_at_ties(graph, labels, {"0": row("0", OK, 3e-5), "1": row("1", OVER, 1.0)})
    assert passed is not None and not passed.failed
    assert "only where scores tie" in passed.text() and "6e-05" in passed.text()
    # scores over tolerance, or not compared: the labels' own verdict stands
    assert _labels_at_ties(graph, labels, {"0": row("0", OVER, 0.3)}) is None
    assert _labels_at_ties(graph, labels, {}) is None
    other = _graph(3, "pnnx.Input in0 0 1 0", "torch.abs a 1 1 0 1", "pnnx.Output out0 1 0 1")
    assert _labels_at_ties(other, labels, {"0": row("0", OK, 0.0)}) is None
