"""`kuiper opt`: optimise a .param or .kir, print the per-pass log, save a model that the
engine (and pnnx's format) reads back and that still gives PyTorch's outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from conftest import SAMPLES, max_err_ok
from kuiper_core.cli import main
from kuiper_core.pnnx import read_param

ZOO = SAMPLES / "passes" / "pass_zoo.o1.pnnx.param"
SEED = SAMPLES / "passes" / "conv_bn_relu.o1.pnnx.param"


def opt(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["opt", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def matches_pytorch(param: Path, name: str, bin_path: Path | None = None) -> None:
    x = np.load(SAMPLES / "passes" / f"{name}.input.npy")
    (y,) = kuiper_core.load(param, bin_path).forward(x)
    with np.load(SAMPLES / "passes" / f"{name}.expected.npz") as z:
        ok, err, bound = max_err_ok(y, z["out0"])
    assert ok, f"{err:.3g} > {bound:.3g}"


def test_opt_writes_param_and_bin_and_prints_each_pass(tmp_path, capsys):
    out = tmp_path / "zoo.opt.pnnx.param"
    code, stdout, _ = opt(capsys, str(ZOO), "-O2", "-o", str(out))
    assert code == 0
    assert out.exists() and (tmp_path / "zoo.opt.pnnx.bin").exists()
    n = len(read_param(out).operators)
    assert n <= len(read_param(SAMPLES / "passes" / "pass_zoo.o2.pnnx.param").operators)
    assert f"{len(read_param(ZOO).operators)} → {n} operators" in stdout
    assert "FoldBatchNorm" in stdout and "folded bn1: nn.BatchNorm2d into conv1" in stdout and "ms" in stdout
    matches_pytorch(out, "pass_zoo")


def test_disable_require_and_levels(tmp_path, capsys):
    out = tmp_path / "o.pnnx.param"
    code, stdout, _ = opt(capsys, str(SEED), "-O2", "--disable", "FoldBatchNorm", "-o", str(out))
    assert code == 0 and "nn.BatchNorm2d" in out.read_text()
    code, stdout, _ = opt(capsys, str(SEED), "-O1", "-o", str(out))
    assert "nn.BatchNorm2d" in out.read_text()  # BN folding is level 2
    code, stdout, _ = opt(capsys, str(SEED), "-O1", "--require", "FoldBatchNorm", "-o", str(out))
    assert "nn.BatchNorm2d" not in out.read_text() and "FoldBatchNorm" in stdout
    matches_pytorch(out, "conv_bn_relu")


def test_print_after_and_check(tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.load(SAMPLES / "passes" / "conv_bn_relu.input.npy"))
    code, stdout, _ = opt(
        capsys,
        str(SEED),
        "-o",
        str(tmp_path / "o.pnnx.param"),
        "--print-after",
        "FoldBatchNorm",
        "--print-after",
        "FuseSlices",
        "--check",
        str(x),
    )
    assert code == 0
    assert '// ----- after FoldBatchNorm -----\n{\n  (%x.1) = "pnnx.Input"' in stdout  # the textual IR
    assert "FuseSlices changed nothing" in stdout
    assert "check: 1 output(s), max |optimised − original| =" in stdout


def test_kir_in_and_out(tmp_path, capsys):
    kir = tmp_path / "seed.kir"
    code, _, _ = opt(capsys, str(SEED), "-o", str(kir))
    assert code == 0 and (tmp_path / "seed.bin").exists()
    assert kir.read_text().startswith("{") and '"nn.BatchNorm2d"' not in kir.read_text()
    matches_pytorch(kir, "conv_bn_relu")
    back = tmp_path / "back.pnnx.param"
    code, _, _ = opt(capsys, str(kir), "-O1", "-o", str(back))  # .kir in, its sibling .bin found
    assert code == 0
    matches_pytorch(back, "conv_bn_relu")


def test_list_and_errors(tmp_path, capsys):
    code, stdout, _ = opt(capsys, "--list")
    assert code == 0 and "FoldBatchNorm" in stdout and "O2" in stdout and "requires FoldConstantParams" in stdout
    code, _, err = opt(capsys, str(SEED), "-o", str(tmp_path / "o.pnnx.param"), "--disable", "NoSuchPass")
    assert code == 2 and "unknown pass 'NoSuchPass'" in err
    code, _, err = opt(capsys, str(SEED))
    assert code == 2 and "-o OUTPUT" in err
    code, _, err = opt(capsys, str(tmp_path / "missing.pnnx.param"), "-o", str(tmp_path / "o.pnnx.param"))
    assert code == 2 and "cannot read" in err and "Traceback" not in err


@pytest.mark.parametrize("level", [0, 1, 2])
def test_every_level_gives_a_loadable_model(tmp_path, capsys, level):
    out = tmp_path / f"o{level}.pnnx.param"
    assert opt(capsys, str(ZOO), f"-O{level}", "-o", str(out))[0] == 0
    matches_pytorch(out, "pass_zoo")  # -O0: the export as it was, written back


EFFICIENTNET_O0 = Path(__file__).parent / "data" / "styles" / "efficientnet_precision" / "o0"


def _ill_conditioned_input(tmp_path: Path) -> Path:
    """The export's own input, randn·2 + 0.5: it saturates the squeeze-excitation sigmoids."""
    x = tmp_path / "x.npy"
    with np.load(EFFICIENTNET_O0 / "inputs.npz") as z:
        np.save(x, z["in0"])
    return x


def _opt_o2_checked(capsys, tmp_path, out):
    """`kuiper opt -O2 -o OUT --check X` on the EfficientNet o0 file and an ill-conditioned input."""
    model, x = str(EFFICIENTNET_O0 / "model.pnnx.param"), str(_ill_conditioned_input(tmp_path))
    return opt(capsys, model, "-O2", "-o", str(out), "--check", x)


def test_check_judges_o2_rounding_by_the_inputs_own_float32_sensitivity(tmp_path, capsys, monkeypatch):
    """EfficientNet's layout at optlevel 0 on an ill-conditioned input: folding its batch norms
    moves the outputs past a fixed share of their scale, as float32 rounding moves the original's
    there (its error against float64, 1-ulp input changes): rounding, written, and said so.

    The share is -O2's 1e-4 lowered to 1e-6 here: how far folding moves these outputs depends on
    which kernels run (0.02 on outputs up to ~1500 since the 27 Nov depthwise choices, within
    1e-4; 1e-4 was passed before), and the test is of the judgment past it."""
    monkeypatch.setattr("kuiper_core.passes.exactness.ROUNDING", 1e-6)
    out = tmp_path / "o.pnnx.param"
    code, stdout, stderr = _opt_o2_checked(capsys, tmp_path, out)
    assert code == 0 and out.exists(), stderr
    assert "more than float rounding usually moves them" in stdout and "rounding, not an error" in stdout
    assert "its own float32 error against a float64 run is" in stdout and "1-ulp changes of the input" in stdout


def test_check_still_flags_a_wrong_rewrite_on_an_ill_conditioned_input(tmp_path, capsys, monkeypatch):
    """A rewrite that changes the function (one folded convolution's bias off by 5 %) is beyond
    any rounding: an engine bug, with what rounding explains named."""
    import kuiper_core.passes as passes

    real = passes.optimize

    def wrong(graph, *args, **kwargs):
        result = real(graph, *args, **kwargs)
        conv = next(op for op in result.after.operators if op.type == "nn.Conv2d" and "bias" in op.attrs)
        conv.attrs["bias"].data = conv.attrs["bias"].data * np.float32(1.05) + np.float32(0.05)
        return result

    monkeypatch.setattr(passes, "optimize", wrong)
    out = tmp_path / "o.pnnx.param"
    code, _, stderr = _opt_o2_checked(capsys, tmp_path, out)
    assert code == 1 and not out.exists()
    assert "check failed" in stderr and "float32 rounding explains up to" in stderr and "engine bug" in stderr
