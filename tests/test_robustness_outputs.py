"""Issue 27, written outputs and the `.param` writer: `kuiper opt`/`run` never destroy an
input, never block on a FIFO, leave the inputs whole on a full disk, never write a model that
does not build or does not read back as itself; the `.param` reader refuses duplicate keys.
Each case was a finding of the third hostile round (before → after in the docstrings)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from hostile import param_text, write_model
from kuiper_core.cli import main
from kuiper_core.errors import ModelError, ParseError
from kuiper_core.graph import Graph
from kuiper_core.pnnx import parse_param
from kuiper_core.pnnx.writer import format_param

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "tests" / "data" / "optlevel" / "resnet18" / "o2"

DOUBLE = [
    "pnnx.Input in0 0 1 x #x=(1,4)f32",
    "pnnx.Expression e 1 1 x y expr=mul(@0,2.0) #x=(1,4)f32 #y=(1,4)f32",
    "pnnx.Output out 1 0 y #y=(1,4)f32",
]


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _copy_resnet(tmp_path: Path) -> tuple[Path, Path]:
    param, weights = tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin"
    param.write_bytes((RESNET / "model.pnnx.param").read_bytes())
    weights.write_bytes((RESNET / "model.pnnx.bin").read_bytes())
    return param, weights


# -- the written-output rule -------------------------------------------------------------------
@pytest.mark.parametrize("target", ["m.pnnx.kir", "m.pnnx.param", "m.pnnx.bin"])
def test_opt_never_writes_over_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str) -> None:
    """Before: `opt m.pnnx.param -O2 -o m.pnnx.kir` wrote m.pnnx.bin, the input's own weights, and
    the untouched original then failed with a WeightError. After: refused, nothing touched."""
    param, weights = _copy_resnet(tmp_path)
    before = _digest(param, weights)
    code, _, err = _cli(capsys, "opt", str(param), "-O2", "-o", str(tmp_path / target))
    assert code == 2 and "is an input of this command" in err and "--in-place" in err, err
    assert _digest(param, weights) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pnnx.bin", "m.pnnx.param"]


def test_opt_in_place_replaces_the_model_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    param, _ = _copy_resnet(tmp_path)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    (want,) = kuiper_core.load(param).forward(x)
    code, _, err = _cli(capsys, "opt", str(param), "-O2", "-o", str(param), "--in-place")
    assert code == 0, err
    (got,) = kuiper_core.load(param).forward(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_outputs_that_are_not_regular_files_are_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `opt -o FIFO` blocked forever (nobody reads the pipe). After: refused like `run --output`."""
    model = write_model(tmp_path, DOUBLE)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    x = tmp_path / "x.npy"
    np.save(x, np.ones((1, 4), np.float32))
    result: list[tuple[int, str, str]] = []
    for args in (
        ["opt", str(model), "-o", str(fifo)],
        ["run", str(model), "--input", str(x), "--output", str(fifo)],
        ["run", str(model), "--input", str(x), "--output", "/dev/full"],
        ["opt", str(model), "-o", str(tmp_path)],
        ["run", str(model), "--input", str(x), "--output", str(x)],  # the input itself
        ["opt", str(model), "-o", str(tmp_path / "missing" / "o.pnnx.param")],
    ):
        worker = threading.Thread(target=lambda a=args: result.append(_cli(capsys, *a)), daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), f"{args} blocked"
        code, _, err = result[-1]
        assert code == 2 and err.startswith("error: ") and "Traceback" not in err, (args, err)
    assert "not a regular file" in result[0][2] and "not a regular file" in result[2][2]
    assert "is a directory" in result[3][2] and "is an input" in result[4][2] and "does not exist" in result[5][2]
    assert np.load(x).tolist() == [[1, 1, 1, 1]]


@pytest.mark.slow
def test_full_disk_leaves_the_input_whole_and_names_the_file(tmp_path: Path) -> None:
    """Before: in-place `opt` on a full disk exited 2 but had rewritten the .param and truncated
    the .bin, and named the wrong file. After: the input is byte for byte what it was, the
    message names the file that could not be written, no temporary file is left. (A file-size
    limit stands in for a full disk: the write fails with an OSError at the same place.)"""
    param, weights = _copy_resnet(tmp_path)
    before = _digest(param, weights)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))\n"
        "from kuiper_core.cli import main\n"
        f"sys.exit(main(['opt', {str(param)!r}, '-O1', '-o', {str(param)!r}, '--in-place']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "cannot write" in done.stderr and "m.pnnx.bin" in done.stderr and "nothing was changed" in done.stderr
    assert _digest(param, weights) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pnnx.bin", "m.pnnx.param"]


def test_opt_never_writes_a_model_that_does_not_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kir = tmp_path / "m.kir"
    kir.write_text(
        "{\n"
        '  (%x) = "pnnx.Input" @in0 () : () -> pnnx.tensor<1x4xf32>\n'
        '  (%y) = "F.leaky_relu" @lr (%x) {negative_slope:(String)"steep"} : '
        "(pnnx.tensor<1x4xf32>) -> pnnx.tensor<1x4xf32>\n"
        '  () = "pnnx.Output" @out (%y) : (pnnx.tensor<1x4xf32>) -> ()\n'
        "}\n"
    )
    out = tmp_path / "o.pnnx.param"
    code, _, err = _cli(capsys, "opt", str(kir), "-O1", "-o", str(out))
    assert code == 2 and "does not build, so nothing was written" in err and "negative_slope" in err, err
    assert not out.exists()


# -- names and values .param cannot hold ---------------------------------------------------------
def _kir_with(tmp_path: Path, name: str = "lr", slope: str = "(Double)0.1") -> Path:
    kir = tmp_path / "m.kir"
    kir.write_text(
        "{\n"
        '  (%x) = "pnnx.Input" @in0 () : () -> pnnx.tensor<1x4xf32>\n'
        f'  (%y) = "F.leaky_relu" @{name} (%x) {{negative_slope:{slope}}} : '
        "(pnnx.tensor<1x4xf32>) -> pnnx.tensor<1x4xf32>\n"
        '  () = "pnnx.Output" @out (%y) : (pnnx.tensor<1x4xf32>) -> ()\n'
        "}\n"
    )
    return kir


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (r'"l\ud800r"', "lone surrogate"),  # before: internal error UnicodeEncodeError and a 0-byte file
        ('"l r"', "whitespace"),
        (r'"l\nr 1 1 x z"', "whitespace"),  # a newline: a whole injected operator line
        ('"a=b"', "'='"),
        (r'"l\u0007r"', "control character"),
    ],
)
def test_names_param_cannot_hold_are_refused_not_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, words: str
) -> None:
    out = tmp_path / "o.pnnx.param"
    code, _, err = _cli(capsys, "opt", str(_kir_with(tmp_path, name)), "-O1", "-o", str(out))
    assert code == 2 and words in err and "F.leaky_relu" in err and "operator name" in err, err
    assert "internal error" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.kir"]  # no 0-byte file
    code, _, err = _cli(capsys, "opt", str(_kir_with(tmp_path, name)), "-O1", "-o", str(tmp_path / "o.kir"))
    assert code == 0, err  # the textual IR quotes any name


def _one_op(params: dict, name: str = "op", op_type: str = "F.leaky_relu") -> Graph:
    g = parse_param(param_text([DOUBLE[0], f"{op_type} {name} 1 1 x y", DOUBLE[2]]))
    g.operators[1].params = params
    return g


@pytest.mark.parametrize(
    "value",
    [
        "x negative_slope=-5.0",  # before: read back as negative_slope=-5.0, [-0.1,2,-0.3,4] -> [5,2,15,4]
        "1",  # before: came back as the integer 1
        "-2.5",
        "True",
        "None",
        "(1,2)",
        "",
        "nan.0",
        ["a", "b,c"],
        ["1", "2"],
    ],
)
def test_string_values_that_do_not_read_back_are_refused(value: object) -> None:
    with pytest.raises(ModelError, match=r"operator 'op' \(F.leaky_relu\): cannot be written as .param: parameter 'k'"):
        format_param(_one_op({"k": value}))


def test_every_value_that_is_written_reads_back_the_same() -> None:
    params = {
        "a": "zeros",
        "b": 1,
        "c": 1.0,
        "d": -0.0,
        "e": 2.5e-7,
        "f": [1, 2],
        "g": [0.5, -1.0],
        "h": ["x", "y"],
        "i": True,
        "j": None,
        "k": "%x",
        "l": [],
        "m": 2**40,
    }
    back = parse_param(format_param(_one_op(params))).operators[1].params
    assert back == params and all(type(back[k]) is type(v) for k, v in params.items())
    assert str(back["d"]) == "-0.0"


@pytest.mark.parametrize(
    ("line", "key", "words"),
    [
        ("F.leaky_relu r 1 1 x y negative_slope=0.1 negative_slope=-5.0", "negative_slope=", "parameter"),
        ("nn.Linear r 1 1 x y bias=False @weight=(4,4)f32 @weight=(4,4)f32", "@weight=", "weight"),
        ("torch.add r 2 1 x x y $input=x $input=x", "$input=", "argument name"),
    ],
)
def test_duplicate_keys_on_a_line_are_located_errors(line: str, key: str, words: str) -> None:
    """Before: the last of two `negative_slope=` won (pnnx's map does the same, silently)."""
    with pytest.raises(ParseError) as info:
        parse_param(param_text([DOUBLE[0], line, "pnnx.Output out 1 0 y"]), "m.pnnx.param")
    e = info.value
    col = line.rindex(" " + key) + 2  # the second one
    assert (e.line, e.column) == (4, col) and f"{words} '{key[:-1]}' is given twice" in e.message, e.render()


def test_repeated_shape_annotations_pnnx_writes_are_still_read() -> None:
    g = parse_param(param_text([DOUBLE[0], "torch.add r 2 1 x x y #x=(1,4)f32 #x=(1,4)f32", "pnnx.Output o 1 0 y"]))
    assert g.operands["x"].shape == (1, 4)


@pytest.mark.parametrize(
    ("digits", "value"),
    [("0" * 30 + "1", 1), ("-" + "0" * 40 + "7", -7), ("0005", 5)],
)
def test_int_with_leading_zeros_is_read_as_its_value(tmp_path: Path, digits: str, value: int) -> None:
    """Before: `(Int32)000…01` (more than 21 characters) was reported as '2147483648 is out of range'."""
    from kuiper_core import ir

    g = ir.parse_module(_kir_with(tmp_path, slope=f"(Int32){digits}").read_text(), check=False).graph
    assert g.operators[1].params["negative_slope"] == value


def test_a_long_int_is_reported_by_its_digits(tmp_path: Path) -> None:
    from kuiper_core import ir

    with pytest.raises(ParseError, match=r"-999999999999… \(25 digits\) is out of range for \(Int32\)"):
        ir.parse_module(_kir_with(tmp_path, slope="(Int32)-" + "0" * 50 + "9" * 25).read_text(), check=False)


def test_non_finite_params_pnnx_writes_keep_their_spelling() -> None:
    """pnnx writes a float NaN/infinity as `nan.0`/`inf.0` at optlevel 0/1: read as 'nan'/'inf',
    written as such, read back the same (the writer must not refuse a real export for it)."""
    text = param_text([DOUBLE[0], "F.hardtanh h 1 1 x y max_val=inf.0 min_val=-inf.0 v=nan.0", DOUBLE[2]])
    g = parse_param(text)
    assert parse_param(format_param(g)).operators[1].params == {"max_val": "inf", "min_val": "-inf", "v": "nan"}


@pytest.mark.slow
def test_every_real_export_is_written_as_it_was_read() -> None:
    """The writer refuses no real export: .param -> .param (and via .kir) keeps every name,
    type and value (1,031 exports in tests/data and sample_models)."""
    from kuiper_core import ir

    files = sorted((ROOT / "tests" / "data").rglob("*.param")) + sorted((ROOT / "sample_models").rglob("*.param"))
    files = [f for f in files if not f.name.endswith(".ncnn.param")]  # ncnn's format: kuiper_core/ncnn reads it
    written = 0
    for f in files:
        try:
            g = parse_param(f.read_text(encoding="utf-8"), str(f))
        except Exception:  # noqa: BLE001  -- hostile files in tests/data: not exports
            continue
        text = format_param(g)
        back = parse_param(text)
        assert [(o.type, o.name, o.params) for o in back.operators] == [
            (o.type, o.name, o.params) for o in g.operators
        ], f
        assert format_param(ir.parse_module(ir.print_graph(g), check=False).graph) == text, f
        written += 1
    assert written > 1000


# -- the other commands that write: compare --save/--csv, convert's files -----------------------
def test_compare_writes_exactly_its_paths_and_never_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `compare --save run` wrote run.npz (np.savez adds it), into a FIFO it blocked,
    over an input it destroyed it."""
    model = write_model(tmp_path, DOUBLE)
    x = tmp_path / "x.npy"
    np.save(x, np.float32([[1, 2, 3, 4]]))
    base = ["compare", str(model), "--input", str(x), "--against", str(model)]
    code, out, err = _cli(capsys, *base, "--save", str(tmp_path / "run"), "--csv", str(tmp_path / "t.csv"))
    assert code == 0, err
    assert (tmp_path / "run").exists() and not (tmp_path / "run.npz").exists() and (tmp_path / "t.csv").exists()
    with np.load(tmp_path / "run") as z:
        assert z["y"].tolist() == [[2, 4, 6, 8]]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, words in ((fifo, "not a regular file"), (x, "is an input of this command")):
        code, _, err = _cli(capsys, *base, "--save", str(target))
        assert code == 2 and words in err and "--in-place" not in err, err
    assert np.load(x).tolist() == [[1, 2, 3, 4]]


def test_convert_writes_its_files_whole_or_not_at_all(tmp_path: Path) -> None:
    from kuiper_core.errors import InputError
    from kuiper_core.formats.base import PnnxFiles
    from kuiper_core.formats.convert import export_files

    src = tmp_path / "cache"
    src.mkdir()
    (src / "model.pnnx.param").write_text("7767517\n0 0\n")
    (src / "model.pnnx.bin").write_bytes(b"PK\x05\x06" + bytes(18))
    files = PnnxFiles(src / "model.pnnx.param", src / "model.pnnx.bin")
    out = tmp_path / "out"
    assert [p.name for p in export_files(files, out, "net")] == ["net.pnnx.param", "net.pnnx.bin"]
    assert (out / "net.pnnx.param").read_text() == "7767517\n0 0\n"
    os.mkfifo(out / "fifo.pnnx.bin")
    with pytest.raises(InputError, match="not a regular file"):
        export_files(files, out, "fifo")
    assert not (out / "fifo.pnnx.param").exists()  # nothing written when one target is refused
