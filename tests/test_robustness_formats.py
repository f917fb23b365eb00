"""Hostile files through the paths added with own models (issue 27, third round): a
TorchScript upload's data.pkl read for its first layer's shape, conversions, lazy weights."""

from __future__ import annotations

import io
import struct
import sys
import threading
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from kuiper_core.explore import model_files as F
from kuiper_core.formats.convert import converter_available

DATA = Path(__file__).parent / "data"
SAMPLES = Path(__file__).parent.parent / "sample_models"


def _archive(pkl: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("m/data.pkl", pkl)
        z.writestr("m/code/__torch__.py", "x")
        z.writestr("m/constants.pkl", b"")
    return buf.getvalue()


def _in_time(fn, seconds: float = 10.0):  # type: ignore[no-untyped-def]
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return result[0]


def test_a_data_pkl_module_held_twice_in_a_cycle_is_walked_once():
    """`M.state = {a: M, b: M}` in 60 bytes: the first-layer walk took 2^64 steps (a server
    thread spinning forever on the Home page's shape guess)."""
    pkl = b"\x80\x02c__torch__\nM\n)\x81q\x00}(X\x01\x00\x00\x00ah\x00X\x01\x00\x00\x00bh\x00ub."
    assert _in_time(lambda: F.guess_inputshape(_archive(pkl))) == F.DEFAULT_SHAPE


def test_a_data_pkl_cannot_amplify_memory_through_calls():
    """One 100,000-character string given to 200 `build_intlist` calls took 160 MB from a
    100 KB upload (and any amount from a bigger one): calls no longer copy their argument."""
    big = b"a" * 100_000
    pkl = b"\x80\x02ctorch.jit._pickle\nbuild_intlist\nq\x00X" + struct.pack("<I", len(big)) + big + b"q\x010]"
    pkl += b"h\x00h\x01\x85Ra" * 200 + b"."
    tracemalloc.start()
    try:
        assert F.guess_inputshape(_archive(pkl)) == F.DEFAULT_SHAPE
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, peak


def test_no_command_writes_into_the_conversion_cache(tmp_path, monkeypatch):
    """`kuiper compare m.onnx --save CACHE/KEY/model.pnnx.bin` replaced the conversion's
    weights: every later open of m.onnx failed (`kuiper opt -o` there would serve another graph)."""
    from kuiper_core.errors import InputError
    from kuiper_core.output_files import check_target

    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path / "cache"))
    entry = tmp_path / "cache" / "convert" / "0123abcd"
    entry.mkdir(parents=True)
    (entry / "model.pnnx.bin").write_bytes(b"weights")
    (tmp_path / "link").symlink_to(entry)
    for target in (entry / "model.pnnx.bin", entry / "new.npz", tmp_path / "link" / "model.pnnx.param"):
        with pytest.raises(InputError, match="inside the conversion cache"):
            check_target(target, "--save")
    assert (entry / "model.pnnx.bin").read_bytes() == b"weights"
    assert check_target(tmp_path / "out.npz", "--save") == tmp_path / "out.npz"


def test_a_full_standard_output_is_an_error_not_an_internal_one(monkeypatch, capsys):
    """`kuiper print m > /dev/full` said "internal error: OSError" and exited 1."""
    from kuiper_core import cli

    full = open("/dev/full", "w")  # noqa: SIM115  -- closed below, after main() redirected it
    monkeypatch.setattr(sys, "stdout", full)
    try:
        code = cli.main(["print", str(SAMPLES / "tiny_mlp.pnnx.param")])
    finally:
        full.close()
    assert code == 2
    assert "cannot write to the standard output: No space left on device" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
def test_convert_never_writes_its_input_nor_outside_its_folder(tmp_path, capsys):
    """A TorchScript file named m.pnnx.bin converted with --name m wrote over itself; --name
    ../x wrote beside the -o folder."""
    from kuiper_core import cli

    source = tmp_path / "m.pnnx.bin"
    source.write_bytes((DATA / "debug_models" / "small_cnn.pt").read_bytes())
    before = source.read_bytes()
    args = ["convert", str(source), "--inputshape", "[1,3,16,16]", "-q"]
    assert cli.main([*args, "--name", "m"]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert source.read_bytes() == before
    assert cli.main([*args, "--name", "../x", "-o", str(tmp_path / "out")]) == 2
    assert "a file stem, not a path" in capsys.readouterr().err
    assert not list(tmp_path.glob("x*"))


@pytest.mark.slow
def test_mapping_onnx_values_to_a_big_graph_is_not_quadratic():
    """map_to_operands rebuilt the set of our operands once per operand (20,000 operators:
    4e8 insertions), and each multi-output operator's unmapped output scanned every ONNX value."""
    import time

    import numpy as np

    from kuiper_core.pnnx import parse_param
    from kuiper_core.references.onnx_values import OnnxRun, map_to_operands

    n = 20_000
    lines = ["pnnx.Input in 0 1 0 #0=(1,4)f32"]
    lines += [f"F.relu r{i} 1 1 {i} {i + 1} #{i}=(1,4)f32 #{i + 1}=(1,4)f32" for i in range(n)]
    lines.append(f"pnnx.Output out 1 0 {n}")
    graph = parse_param("7767517\n" + f"{n + 2} {n + 1}\n" + "\n".join(lines) + "\n", "m.pnnx.param")
    ours = {str(i): np.full((1, 4), i, np.float32) for i in range(n + 1)}
    run = OnnxRun([(f"t{i}", "Relu", ours[str(i + 1)]) for i in range(n)], [ours[str(n)]], "test")
    start = time.perf_counter()
    mapping = map_to_operands(graph, ours, run, [str(n)])
    assert time.perf_counter() - start < 20
    assert mapping.mapped == n and not mapping.unmapped


@pytest.mark.slow
@pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
def test_the_converter_runs_within_a_memory_limit(tmp_path):
    """A 214-byte .onnx whose constant subgraph (ConstantOfShape of 2^31 floats, summed) pnnx
    folds asked the converter for 8 GB of a shared server; it runs within max_planned_bytes +
    2 GiB of address space (and file size) and the error says so."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, save

    from kuiper_core import limits
    from kuiper_core.formats import open_model
    from kuiper_core.formats.convert import ConversionError

    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["c"], value=fill),
        helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
        helper.make_node("Add", ["x", "s"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [1 << 31])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [shape]), ir_version=8)
    model.opset_import[0].version = 13
    save(model, str(tmp_path / "m.onnx"))
    with limits.use(max_planned_bytes=256 << 20), pytest.raises(ConversionError, match="MiB of address space"):
        open_model(tmp_path / "m.onnx", cache_dir=tmp_path / "cache")


@pytest.mark.slow
def test_matching_reference_keys_is_linear():
    """Each key of a reference .npz that is not an operand number was looked up by scanning the
    operators (and a `name#2` key rebuilt every operator's key), and each unmatched key's reason
    rebuilt a name table: 20,000 keys on a 20,000-operator graph."""
    import time

    import numpy as np

    from kuiper_core.explore.references import match_keys
    from kuiper_core.pnnx import parse_param

    n = 20_000
    lines = ["pnnx.Input in 0 1 0 #0=(1,4)f32"]
    lines += [f"F.relu r{i} 1 1 {i} {i + 1} #{i}=(1,4)f32 #{i + 1}=(1,4)f32" for i in range(n)]
    lines.append(f"pnnx.Output out 1 0 {n}")
    graph = parse_param("7767517\n" + f"{n + 2} {n + 1}\n" + "\n".join(lines) + "\n", "m.pnnx.param")
    zero = np.zeros((1, 4), np.float32)
    npz = {f"module.r{i}": zero for i in range(0, n, 2)} | {f"x{i}#2": zero for i in range(n // 2)}
    start = time.perf_counter()
    match = match_keys(graph, npz)
    assert time.perf_counter() - start < 10
    assert match.matched == n // 2 and len(match.unmatched) == n // 2


def test_cache_eviction_is_safe_with_other_sessions(tmp_path, monkeypatch):
    """An entry removed by another session while this one counts it counts 0 (two sessions
    converting at once failed "could not be stored: No such file"); entries used in the last
    EVICT_GRACE seconds go after the older ones, but go when the cache is still over its size
    (issue 35: three 144-byte uploads made 12 MiB at a 1 MiB limit), and the one just stored
    never goes."""
    import os
    import time

    from kuiper_core.formats import convert

    root = tmp_path / "convert"
    for name, age in (("old", 3600), ("older", 7200), ("recent", 10), ("mine", 0)):
        (root / name).mkdir(parents=True)
        (root / name / "model.pnnx.bin").write_bytes(b"x" * 1000)
        (root / name / "record.json").write_text("{}")
        os.utime(root / name / "record.json", (time.time() - age, time.time() - age))
    assert convert._entry_size(root / "gone") == 0
    monkeypatch.setenv("KUIPER_CACHE_MAX_MB", str(2100 / 2**20))  # two entries
    convert._evict(root, root / "mine")
    assert sorted(p.name for p in root.iterdir()) == ["mine", "recent"]
    monkeypatch.setenv("KUIPER_CACHE_MAX_MB", "0.001")  # about one entry: the recent one goes too
    convert._evict(root, root / "mine")
    assert sorted(p.name for p in root.iterdir()) == ["mine"]
