"""`kuiper print` and `kuiper run FILE.kir`: the printed text prints to itself, runs like the
.param it came from, and every problem exits 2 with an MLIR-style located error."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES
from test_cli import kuiper

from kuiper_core import ir
from kuiper_core.cli import main
from kuiper_core.pnnx import read_param

NAME = "digits_cnn"
PARAM = SAMPLES / f"{NAME}.pnnx.param"
BIN = SAMPLES / f"{NAME}.pnnx.bin"


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def x(tmp_path: Path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.load(SAMPLES / f"{NAME}.input.npy"))
    return path


@pytest.fixture
def kir(tmp_path: Path) -> Path:
    path = tmp_path / f"{NAME}.kir"
    path.write_text(ir.print_graph(read_param(PARAM)))
    return path


def test_print_param_then_print_the_text_again_is_identical(capsys, kir: Path) -> None:
    code, printed, _ = run_main(capsys, "print", str(PARAM))
    assert code == 0 and printed == kir.read_text()
    code, again, _ = run_main(capsys, "print", str(kir))
    assert code == 0 and again == printed


def test_run_kir_gives_the_same_outputs_as_the_param(capsys, kir: Path, x: Path, tmp_path: Path) -> None:
    assert run_main(capsys, "run", str(PARAM), "--input", str(x), "--output", str(tmp_path / "a.npy"))[0] == 0
    assert (
        run_main(capsys, "run", str(kir), "--bin", str(BIN), "--input", str(x), "--output", str(tmp_path / "b.npy"))[0]
        == 0
    )
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    with np.load(SAMPLES / f"{NAME}.expected.npz") as z:
        assert np.allclose(np.load(tmp_path / "b.npy"), z["out0"], atol=1e-5)


def test_run_finds_a_sibling_bin_and_inspect_reads_kir(capsys, kir: Path, tmp_path: Path) -> None:
    shutil.copy(BIN, tmp_path / f"{NAME}.pnnx.bin")
    code, out, _ = run_main(capsys, "inspect", str(kir))
    assert code == 0 and "nn.Conv2d" in out


def _error(capsys, *args: str) -> tuple[str, str, str]:
    code, _, err = run_main(capsys, *args)
    assert code == 2, err
    head, source, caret = err.rstrip("\n").split("\n")[:3]
    assert "Traceback" not in err
    return head, source, caret


def _points_at(head: str, source: str, caret: str, text: str) -> None:
    col = int(re.match(r"[^:]+:\d+:(\d+): error: ", head).group(1))
    assert caret.index("^") == col - 1
    assert source[col - 1 :].startswith(text), (source[col - 1 :], text)


def test_parse_error_exits_2_in_mlirs_format(capsys, kir: Path, x: Path) -> None:
    kir.write_text(kir.read_text().replace("($input=%5)", "($input=%50)"))
    for args in (("print", str(kir)), ("run", str(kir), "--bin", str(BIN), "--input", str(x))):
        head, source, caret = _error(capsys, *args)
        assert head.startswith(f"{kir}:8:") and "error: use of undefined value %50" in head
        _points_at(head, source, caret, "%50")


def test_a_weight_missing_from_the_bin_is_located(capsys, kir: Path, x: Path) -> None:
    kir.write_text(kir.read_text().replace("@fc2 ", "@fc_two "))
    head, source, caret = _error(capsys, "run", str(kir), "--bin", str(BIN), "--input", str(x))
    assert "fc_two.bias" in head
    _points_at(head, source, caret, "(pnnx.weight)<10xf32>")


def test_a_weight_of_another_shape_is_located(capsys, kir: Path, x: Path) -> None:
    # 16 -> 17 bias values: the layer would notice too, but the .bin entry's size is checked first.
    kir.write_text(
        kir.read_text()
        .replace("out_channels:(Int32)16,", "out_channels:(Int32)17,", 1)
        .replace("@bias:(pnnx.weight)<16xf32>", "@bias:(pnnx.weight)<17xf32>", 1)
    )
    head, source, caret = _error(capsys, "run", str(kir), "--bin", str(BIN), "--input", str(x))
    assert "convbn2d_0.bias" in head and "68" in head
    _points_at(head, source, caret, "(pnnx.weight)<17xf32>")


def test_no_bin_is_located_at_the_first_weight(capsys, kir: Path, x: Path) -> None:
    head, source, caret = _error(capsys, "run", str(kir), "--input", str(x))
    assert "no .bin was given" in head
    _points_at(head, source, caret, "(pnnx.weight)<16xf32>")


def test_a_layer_refusing_an_attribute_is_located(capsys, kir: Path, x: Path) -> None:
    kir.write_text(kir.read_text().replace("{dim:(Int32)1}", '{dim:(String)"one"}'))
    for args in (("print", str(kir)), ("run", str(kir), "--bin", str(BIN), "--input", str(x))):
        head, source, caret = _error(capsys, *args)
        assert "F.softmax @F.softmax_1: parameter 'dim' must be an int" in head
        _points_at(head, source, caret, '(String)"one"')


def test_unreadable_files(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.kir"
    bad.write_bytes(b"{\n  \xff\n}\n")
    code, _, err = run_main(capsys, "print", str(bad))
    assert code == 2 and err.startswith(f"{bad}:2:3: error: not a text file")
    code, _, err = run_main(capsys, "print", str(tmp_path / "missing.kir"))
    assert code == 2 and "cannot read" in err


def test_allow_unregistered(capsys, tmp_path: Path) -> None:
    text = '{\n  (%0) = "pnnx.Input" @in () : () -> pnnx.tensor<1xf32>\n  (%1) = "my.Op" @m (%0) : (pnnx.tensor<1xf32>) -> pnnx.tensor<1xf32>\n}\n'
    path = tmp_path / "m.kir"
    path.write_text(text)
    assert "unknown dialect 'my'" in _error(capsys, "print", str(path))[0]
    code, out, _ = run_main(capsys, "print", "--allow-unregistered", str(path))
    assert code == 0 and out == text


@pytest.mark.slow
def test_end_to_end_in_a_subprocess(tmp_path: Path, kir: Path) -> None:
    r = kuiper("print", str(kir))
    assert r.returncode == 0 and r.stdout == kir.read_text()
    kir.write_text(kir.read_text()[:-40])
    r = kuiper("print", str(kir))
    assert r.returncode == 2 and re.match(rf"{re.escape(str(kir))}:\d+:\d+: error: ", r.stderr)
