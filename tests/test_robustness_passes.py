"""Issue 27, exact passes: -O1 never changes a number, -O2 only by float rounding, at every
batch and for IEEE's special values; `kuiper opt --check` compares signed zeros, infinities
and NaN positions and exits 1 (writing nothing) on a difference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, ROOT, max_err_ok
from hostile import param_text, write_model
from kuiper_core.cli import main
from kuiper_core.passes import batch_probe, noops, optimize
from kuiper_core.passes.exactness import output_difference, outputs_difference
from kuiper_core.pnnx import load_graph, parse_param
from kuiper_core.runtime import RuntimeGraph

sys.path.insert(0, str(ROOT / "tools"))
import fuzz_passes  # noqa: E402

IN = "pnnx.Input i 0 1 x #x=(1,4)f32"


def _run(graph, xs: list[np.ndarray]) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    with np.errstate(all="ignore"):
        return [np.asarray(y) for y in RuntimeGraph.from_graph(graph).build().forward(*xs)]


def _reciprocal_of(expr: str) -> str:
    """1 / (x <expr>): a -0.0 that turns into +0.0 shows as -inf turning into +inf."""
    return param_text(
        [
            IN,
            f"pnnx.Expression a 1 1 x y expr={expr} #x=(1,4)f32 #y=(1,4)f32",
            "pnnx.Expression d 1 1 y z expr=div(1.0,@0) #y=(1,4)f32 #z=(1,4)f32",
            "pnnx.Output o 1 0 z #z=(1,4)f32",
        ]
    )


SIGNED = [np.float32([[-0.0, 0.0, np.inf, np.nan]])]


@pytest.mark.parametrize(
    ("expr", "removed"),
    [
        ("add(@0,0.0)", False),  # before: removed, 1/(-0.0 + 0.0) = +inf became -inf
        ("add(0.0,@0)", False),
        ("add(@0,0)", False),
        ("sub(@0,-0.0)", False),
        ("add(@0,-0.0)", True),
        ("sub(@0,0.0)", True),
        ("mul(@0,1.0)", True),
        ("mul(1,@0)", True),
        ("div(@0,1.0)", True),
    ],
)
def test_signed_zero_decides_what_is_a_no_op(expr: str, removed: bool) -> None:
    g = parse_param(_reciprocal_of(expr))
    after = optimize(g, 1).after
    assert ("a" not in {op.name for op in after.operators}) == removed
    assert outputs_difference(_run(g, SIGNED), _run(after, SIGNED), exact=True) is None


def test_integer_plus_zero_is_still_removed() -> None:
    g = parse_param(
        param_text(
            [
                "pnnx.Input i 0 1 x #x=(1,4)i64",
                "pnnx.Expression a 1 1 x y expr=add(@0,0) #x=(1,4)i64 #y=(1,4)i64",
                "pnnx.Output o 1 0 y #y=(1,4)i64",
            ]
        )
    )
    assert [op.type for op in optimize(g, 1).after.operators] == ["pnnx.Input", "pnnx.Output"]


def test_check_compares_signed_zeros_and_exits_1_writing_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: -O1 removed add(@0,0.0) and `--check` printed 'inf' and exited 0."""
    model = tmp_path / "m.pnnx.param"
    model.write_text(_reciprocal_of("add(@0,0.0)"))
    x = tmp_path / "x.npy"
    np.save(x, SIGNED[0])
    out = tmp_path / "o.pnnx.param"
    assert main(["opt", str(model), "-O1", "-o", str(out), "--check", str(x)]) == 0
    assert "check: 1 output(s)" in capsys.readouterr().out and out.exists()
    out.unlink()
    (tmp_path / "o.pnnx.bin").unlink()
    monkeypatch.setattr(noops, "_neutral", lambda name, value, floating: value == noops._NEUTRAL[name])  # the old rule
    assert main(["opt", str(model), "-O1", "-o", str(out), "--check", str(x)]) == 1
    err = capsys.readouterr().err
    assert (
        "check failed" in err and "the original gives +inf, the optimised -inf" in err and "Nothing was written" in err
    )
    assert not out.exists() and not (tmp_path / "o.pnnx.bin").exists()


def test_output_difference_sees_every_kind_of_change() -> None:
    a = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0])
    assert output_difference(a, a.copy(), exact=True) is None
    for i, v in [(0, -0.0), (1, 0.0), (2, -np.inf), (3, np.nan), (4, 0.0), (5, 1.0000001)]:
        b = a.copy()
        b[i] = v
        assert output_difference(a, b, exact=True) is not None, (i, v)
        if i < 5:  # -O2 allows rounding, never a sign, an infinity or a NaN
            assert output_difference(a, b, exact=False) is not None, (i, v)
    b = a.copy()
    b[5] = 1.00001
    assert output_difference(a, b, exact=False) is None
    assert "float32(3,) became float64(3,)" in (output_difference(np.zeros(3, np.float32), np.zeros(3), exact=False))
    assert (
        output_difference(np.int64([1, 2]), np.int64([1, 3]), exact=False)
        == "at [1] the original gives 2, the optimised 3"
    )


# -- shapes as symbols: every batch ----------------------------------------------------------------
def _expand_as_model(tmp_path: Path) -> Path:
    """sum over the batch of a constant row expanded to x's batch: at batch 1 the expand_as
    has equal shapes, at batch 2 it doubles the sum."""
    lines = [
        IN,
        "pnnx.Attribute w 0 1 c @data=(1,4)f32 #c=(1,4)f32",
        "Tensor.expand_as e 2 1 c x d #c=(1,4)f32 #x=(1,4)f32 #d=(1,4)f32",
        "torch.sum s 1 1 d y dim=(0) keepdim=False #d=(1,4)f32 #y=(4)f32",
        "pnnx.Output o 1 0 y #y=(4)f32",
    ]
    return write_model(tmp_path, lines, {"w.data": np.float32([[1, 2, 3, 4]]).tobytes()})


def test_expand_as_is_a_no_op_only_where_the_shapes_are_equal_as_symbols(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: -O1 removed it (equal shapes at the traced batch): at batch 2 [2,4,6,8] became [1,2,3,4]."""
    g = load_graph(_expand_as_model(tmp_path))
    x2 = [np.ones((2, 4), np.float32)]
    assert _run(g, x2)[0].tolist() == [2, 4, 6, 8]
    for level in (1, 2):
        assert _run(optimize(g, level).after, x2)[0].tolist() == [2, 4, 6, 8]
    monkeypatch.setattr(noops, "same_symbolic_shape", lambda graph, a, b: True)  # the traced-size rule
    assert _run(optimize(g, 1).after, x2)[0].tolist() == [1, 2, 3, 4]


def test_a_dynamic_export_has_no_probe_its_question_marks_say_what_varies() -> None:
    lines = [
        "pnnx.Input i 0 1 x #x=(?,4)f32",
        "Tensor.reshape r 1 1 x y shape=(-1,4) #x=(?,4)f32 #y=(?,4)f32",
        "pnnx.Output o 1 0 y #y=(?,4)f32",
    ]
    g = parse_param(param_text(lines))
    assert batch_probe.shapes_at_batch2(g) is None
    assert batch_probe.fixed_dims(g, g.operands["y"]) == [False, True]


def _doubled(xs: list[np.ndarray]) -> list[np.ndarray]:
    """The same sample twice: PyTorch's answer for each row is its batch-1 answer."""
    return [np.concatenate([x, x], 0) if x.ndim else x for x in xs]


REAL = [
    ("optlevel/metric_head/o0", 1),  # before: -O1 failed at batch 2 (baddbmm of (2,1,8) and (1,8,4))
    ("optlevel/metric_head/o1", 1),
    ("optlevel/metric_head/o1", 2),
    ("optlevel/swin_windows/o0", 2),  # before: -O2 baked reshape (1,2,3,2,2,8) in
    ("passes/size_arith/o1", 2),  # before: -O2 reshape to (18,1,2) of an (18,4)
    ("optlevel/recurrent_states/o1", 2),  # before: -O2 folded torch.zeros(2, x.size(0), 5) to batch 1
    ("optlevel/recurrent_states/o0", 2),
]


@pytest.mark.parametrize(("case", "level"), REAL, ids=[f"{c}-O{lv}" for c, lv in REAL])
def test_real_exports_that_failed_at_batch_2(case: str, level: int) -> None:
    folder = DATA / case
    g = load_graph(folder / "model.pnnx.param")
    with np.load(folder / "inputs.npz") as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    with np.load(folder / "expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    after = optimize(g, level).after
    for inputs in (xs, _doubled(xs), fuzz_passes.input_sets(xs)["batch 2"]):
        before, got = _run(g, inputs), _run(after, inputs)
        assert outputs_difference(before, got, exact=level < 2) is None
    for y, want in zip(_run(after, _doubled(xs)), expected):  # rows that are their own sample: PyTorch's
        if y.shape == (2 * want.shape[0], *want.shape[1:]) and want.shape[0] == 1:
            ok, err, bound = max_err_ok(y[1:], want)
            assert ok, f"{err:.3g} > {bound:.3g}"


@pytest.mark.slow
def test_the_pass_fuzzer_finds_the_old_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """tools/fuzz_passes.py runs each graph at batch 1, batch 2 and with -0.0/±inf/NaN: with the
    old no-op rules back it reports the batch-2 and the signed-zero findings."""
    assert (
        fuzz_passes.main(["--mem-mb", "0", "--per-case", "0", "-k", "optlevel/metric_head/o1", "-k", "optlevel/swin"])
        == 0
    )
    monkeypatch.setattr(noops, "same_symbolic_shape", lambda graph, a, b: True)
    assert fuzz_passes.main(["--mem-mb", "0", "--per-case", "0", "-k", "optlevel/metric_head/o1"]) == 1
