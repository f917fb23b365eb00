"""The deployed ncnn model as a reference (references/ncnn_deployed.py, explore/deployed.py): ncnn's
own blobs lined up with a PNNX model's operands, checked against the ncnn binding's run and
PyTorch's committed outputs; the input shape given to an ncnn upload; the ncnn files beside a
.pnnx.param found."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, SAMPLES

from kuiper_core.errors import InputError
from kuiper_core.explore import deployed, references
from kuiper_core.explore.model_files import ncnn_needs_shape
from kuiper_core.explore.ncnn_view import rel_error
from kuiper_core.formats import open_model
from kuiper_core.references import ReferenceError, engine_values
from kuiper_core.references.ncnn_deployed import deployed_files, deployed_references

NCNN = DATA / "ncnn"
needs_ncnn = pytest.mark.skipif(importlib.util.find_spec("ncnn") is None, reason="needs pip install ncnn")


def _beside(tmp: Path, name: str, tag: str) -> Path:
    """The bundled PNNX files with the ncnn export of the same seeded module beside them (as pnnx writes)."""
    for ext in ("param", "bin"):
        shutil.copy(SAMPLES / f"{name}.pnnx.{ext}", tmp / f"m.pnnx.{ext}")
        shutil.copy(NCNN / f"{name}.{tag}.ncnn.{ext}", tmp / f"m.ncnn.{ext}")
    return tmp / "m.pnnx.param"


def test_the_ncnn_files_beside_a_pnnx_model_are_found(tmp_path) -> None:
    opened = open_model(_beside(tmp_path, "vit_tiny", "fp32"))
    assert deployed_files(opened) == (tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin")
    (tmp_path / "m.ncnn.bin").unlink()
    assert deployed_files(open_model(tmp_path / "m.pnnx.param")) is None  # a .param alone is no deployed model
    assert deployed_files(open_model(SAMPLES / "tiny_mlp.pnnx.param")) is None
    with pytest.raises(ReferenceError, match="has no deployed ncnn model"):
        deployed_references(open_model(SAMPLES / "tiny_mlp.pnnx.param"), [], {})


def test_an_ncnn_upload_takes_its_input_shape_from_the_opener() -> None:
    param, weights = (
        (NCNN / "digits_cnn.fp32.ncnn.param").read_bytes(),
        (NCNN / "digits_cnn.fp32.ncnn.bin").read_bytes(),
    )
    assert ncnn_needs_shape(param, "m.ncnn.param")  # pnnx's Input line has no 0=w 1=h 2=c
    assert not ncnn_needs_shape(param.replace(b"0 1 in0", b"0 1 in0 0=8 1=8 2=1"), "m.ncnn.param")
    opened = open_model(param, bin_path=weights, name="m.ncnn.param", inputshape="[1,8,8]")
    assert opened.graph.inputs[0].outputs[0].shape == (1, 8, 8)
    x = np.load(NCNN / "digits_cnn.input.npy")
    with np.load(NCNN / "digits_cnn.expected.npz") as z:
        assert rel_error(opened.build().forward(x)[0], z["out0"]) < 1e-5  # PyTorch's answer
    with pytest.raises(InputError, match=r"does not fit the ncnn model's 1 input blob\(s\) \(in0\)"):
        open_model(param, bin_path=weights, name="m.ncnn.param", inputshape="[0,8,8]")


@needs_ncnn
def test_ncnn_blobs_line_up_with_a_pnnx_models_operands(tmp_path) -> None:
    """vit_tiny's PNNX model and its fp32 ncnn export: ncnn's blobs (the binding's run) on our
    operands by content; the output is ncnn's own and within 1e-5 of PyTorch's."""
    from kuiper_core.references.isolated import run_ncnn

    opened = open_model(_beside(tmp_path, "vit_tiny", "fp32"))
    x = np.load(SAMPLES / "vit_tiny.input.npy")
    ours = engine_values(opened, [x])
    run = deployed_references(opened, [x], ours, why=False)
    assert run.computed - len(run.unmapped) >= 60  # measured 65 of 74: the rest fused into ncnn layers
    out = references.compare.output_operand_names(opened.graph)[0]
    assert run.blobs[out] == "out0" and run.refs[out].shape == ours[out].shape
    _, (theirs,) = run_ncnn([(tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin", {})], {"in0": x[0]}, ["out0"], 120)
    np.testing.assert_array_equal(run.refs[out].reshape(-1), theirs["out0"].reshape(-1))
    with np.load(SAMPLES / "vit_tiny.expected.npz") as z:
        assert rel_error(run.refs[out], z["out0"]) < 1e-5
    for operand, ref in run.refs.items():  # each is ours up to float32 rounding (not a neighbour's value)
        assert rel_error(ours[operand], ref) < 1e-4, operand
    with pytest.raises(ReferenceError, match="batch 1 only"):
        deployed_references(opened, [np.concatenate([x, x])], ours, why=False)


def test_rows_say_ours_vs_ncnn_vs_pytorch_per_operator() -> None:
    class Event:
        index, name, type, inputs = 2, "conv", "nn.Conv2d", {}
        outputs = {"5": np.array([1.0, 2.0], np.float32)}

    ncnn, torch = {"5": np.array([1.0, 2.002], np.float32)}, {"5": np.array([1.0, 2.0], np.float32)}
    row = deployed.operator_row(Event(), ncnn, torch, {"5": "convrelu_0"})
    assert row["#"] == 3 and row["ncnn blob"] == "convrelu_0" and row[deployed.OURS_TORCH] == 0.0
    assert row[deployed.OURS_NCNN] == pytest.approx(0.002 / 2.002, rel=1e-3)
    assert row[deployed.NCNN_TORCH] == pytest.approx(0.001, rel=1e-3)
    assert deployed.step_text(row).startswith("ncnn blob `convrelu_0`: ours vs ncnn 9.99e-04")
    alone = deployed.operator_row(Event(), {}, {}, {})
    assert alone[deployed.OURS_NCNN] is None and "no ncnn blob" in deployed.step_text(alone)
    assert references.reference_choices(False, False, [], True, True) == ["framework", "ncnn", "upload"]


@needs_ncnn
def test_a_blob_of_another_size_than_ours_is_a_shape_mismatch_not_a_crash() -> None:
    from kuiper_core.explore import compare

    opened = open_model(NCNN / "digits_cnn.fp32.ncnn.param")
    x = np.load(NCNN / "digits_cnn.input.npy")
    ours = engine_values(opened, [x])
    ours["2"] = np.zeros((32, 7, 7), np.float32)  # as a wrong layer of ours would make it
    run = deployed_references(opened, [x], ours, why=False)
    assert run.refs["2"].shape == (32, 8, 8)  # ncnn's own
    assert compare.compare(ours["2"], run.refs["2"]).status == compare.SHAPE
    assert rel_error(ours["out0"], run.refs["out0"]) < 1e-5
