"""Issue 11: hostile files and inputs. Each case once crashed, exhausted memory, hung or gave
a silently wrong answer; each must now be a clear KuiperError (CLI exit 2) or a correct result.

One test per case of the issue, in its order; `hostile.write_model` writes the files by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from conftest import OPS, ROOT
from hostile import param_text, patch_zip, write_model
from kuiper_core import expression as ex
from kuiper_core import limits
from kuiper_core.errors import (
    InputError,
    KuiperError,
    LimitError,
    ModelError,
    ParseError,
    WeightError,
    excerpt,
)
from kuiper_core.explore import inputs as kx_inputs
from kuiper_core.explore import walkthrough as W
from kuiper_core.graph import float32_to_bf16
from kuiper_core.npy import read_npy, read_npz
from kuiper_core.pnnx import load_graph, load_weights, parse_param, save


def kuiper(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kuiper_core.cli", *args], capture_output=True, text=True, cwd=ROOT)


def f32(*values: float) -> bytes:
    return np.asarray(values, np.float32).tobytes()


# -- silently wrong ----------------------------------------------------------------------------------
def test_bf16_weights_are_widened_to_float32(tmp_path: Path) -> None:
    """nn.Linear with bf16 weights returned 64640 (raw uint16 bits) instead of 2.5."""
    bits = lambda *v: float32_to_bf16(np.asarray(v, np.float32)).tobytes()  # noqa: E731
    p = write_model(
        tmp_path,
        [
            "pnnx.Input in 0 1 x #x=(1,2)f32",
            "nn.Linear lin 1 1 x y bias=True in_features=2 out_features=1 @bias=(1)bf16 @weight=(1,2)bf16 #y=(1,1)f32",
            "pnnx.Output out 1 0 y",
        ],
        {"lin.weight": bits(1.0, 0.5), "lin.bias": bits(0.5)},
    )
    g = kuiper_core.load(p)
    (y,) = g.forward(np.array([[1.0, 2.0]], np.float32))
    assert y.dtype == np.float32 and y[0, 0] == 2.5  # 1*1 + 2*0.5 + 0.5, exact in bf16
    attr = g.graph.operator("lin").attrs["weight"]
    assert attr.dtype == "bf16" and attr.data.dtype == np.float32  # the name stays bf16
    save(g.graph, tmp_path / "again.pnnx.param")  # written back as bf16 bits, loaded the same
    assert load_graph(tmp_path / "again.pnnx.param").operator("lin").attrs["weight"] == attr


def test_bf16_writer_rounds_to_nearest_even() -> None:
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, np.nan], np.float32)  # ties go to even
    assert float32_to_bf16(x).tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80, 0x7FC0]


INT8_MODEL = [
    "pnnx.Input in 0 1 x #x=(3)i8",
    "pnnx.Expression e 1 1 x y expr=add(@0,1) #y=(3)i8",
    "pnnx.Output out 1 0 y",
]


def test_int64_input_out_of_i8_range_is_refused_not_wrapped(tmp_path: Path) -> None:
    """An int64 300 fed to an i8 input became 44."""
    g = kuiper_core.load(write_model(tmp_path, INT8_MODEL))
    with pytest.raises(InputError, match="values from 1 to 300 do not fit in int8"):
        g.forward(np.array([1, 2, 300], np.int64))
    (y,) = g.forward(np.array([1, -2, 100], np.int64))  # in range: cast exactly
    assert y.dtype == np.int8 and y.tolist() == [2, -1, 101]
    with pytest.raises(InputError, match="overflows float32"):
        kuiper_core.load(OPS / "linear_1d_input" / "model.pnnx.param").forward(np.full(5, 1e300))


def test_declared_f16_output_fails_alike_at_every_batch(tmp_path: Path) -> None:
    """A wrong f16 annotation made batch 1 compute in f16 (the planned buffer) while batch 2 errored."""
    g = kuiper_core.load(
        write_model(
            tmp_path,
            [
                "pnnx.Input in 0 1 x #x=(3,5)f32",
                "nn.ReLU r0 1 1 x a #a=(3,5)f16",
                "nn.ReLU r1 1 1 a b #b=(3,5)f32",
                "pnnx.Output out 1 0 b",
            ],
        )
    )
    messages = []
    for batch in (3, 6, 3):
        with pytest.raises(ModelError) as info:
            g.forward(np.ones((batch, 5), np.float32))
        messages.append(str(info.value))
    assert all("'r0'" in m and "declares (3,5)f16: wrong dtype" in m for m in messages), messages


def test_forward_never_hands_out_a_weight_array() -> None:
    """forward() returned a pnnx.Attribute's own array: writing into it changed later runs
    (and every app session sharing the model)."""
    case = OPS / "io_attribute_const"
    g = kuiper_core.load(case / "model.pnnx.param")
    x = np.load(case / "inputs.npz")["in0"]
    first = [y.copy() for y in g.forward(x)]
    for y in g.forward(x):
        y[...] = 12345  # the caller's own copy
    assert all(np.array_equal(a, b) for a, b in zip(first, g.forward(x)))
    weight = g.graph.operator("bias").attrs["data"].data
    with pytest.raises(ValueError):
        weight[...] = 0  # read-only: shared by every run


def _one_weight_model(tmp_path: Path, entries: list[tuple[object, bytes]]) -> Path:
    return write_model(
        tmp_path,
        [
            "pnnx.Input in 0 1 x #x=(1,4)f32",
            "pnnx.Attribute w 0 1 c @data=(1,4)f32 #c=(1,4)f32",
            "pnnx.Expression e 2 1 x c y expr=add(@0,@1) #y=(1,4)f32",
            "pnnx.Output out 1 0 y",
        ],
        entries,
    )


def test_duplicate_zip_entries_are_refused(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):  # Python's writer only warns
        p = _one_weight_model(tmp_path, [("w.data", f32(1, 1, 1, 1)), ("w.data", f32(9, 9, 9, 9))])
    with pytest.raises(WeightError, match="appears 2 times, but 1 weight"):
        kuiper_core.load(p)


def test_nul_in_entry_name_cannot_shadow_a_weight(tmp_path: Path) -> None:
    """zipfile cuts 'w.data\\0.txt' to 'w.data': it would stand in for the real entry."""
    p = _one_weight_model(tmp_path, [("w.dataX.txt", f32(9, 9, 9, 9))])
    bin_path = p.with_suffix(".bin")
    bin_path.write_bytes(patch_zip(bin_path.read_bytes(), rename=(b"w.dataX.txt", b"w.data\0.txt")))
    assert zipfile.ZipFile(bin_path).namelist() == ["w.data"]  # what a plain reader sees
    with pytest.raises(WeightError, match="NUL"):
        kuiper_core.load(p)


def test_cli_output_is_written_to_exactly_the_given_path(tmp_path: Path) -> None:
    """--output y.out wrote y.out.npy but printed y.out."""
    case = OPS / "linear_1d_input"
    np.save(tmp_path / "x.npy", np.load(case / "inputs.npz")["in0"])
    out = tmp_path / "y.out"
    r = kuiper("run", str(case / "model.pnnx.param"), "--input", str(tmp_path / "x.npy"), "--output", str(out))
    assert r.returncode == 0 and r.stdout.startswith(f"{out}:"), r.stderr
    assert out.exists() and not (tmp_path / "y.out.npy").exists()
    np.testing.assert_allclose(np.load(out), np.load(case / "expected.npz")["out0"], rtol=1e-5)


# -- memory and time bombs -----------------------------------------------------------------------------
def test_shape_whose_element_count_overflows_int64(tmp_path: Path) -> None:
    lines = ["pnnx.Input in 0 1 x #x=(4294967296,4294967296,4)f32", "pnnx.Output out 1 0 x"]
    with pytest.raises(ParseError, match="more elements than fit in 64 bits") as info:
        parse_param(param_text(lines), "m.pnnx.param")
    assert info.value.line == 3


def test_tiny_file_declaring_a_huge_input_gets_no_random_input(tmp_path: Path) -> None:
    """A 3-line upload declaring (1,3,16000,16000): the Home page built a random input of it."""
    g = kuiper_core.load(
        write_model(tmp_path, ["pnnx.Input in 0 1 x #x=(1,3,16000,16000)f32", "pnnx.Output out 1 0 x"])
    )
    ((_, shape, dtype),) = kx_inputs.input_specs(g.graph)
    with pytest.raises(LimitError, match="max_tensor_elements") as info:
        kx_inputs.synthetic_input("random", shape, dtype)
    assert info.value.value == 3 * 16000 * 16000


@pytest.mark.slow
def test_ordering_trace_memory_is_linear() -> None:
    """The trace copied the whole stack at each step: 12,000 operators took over 3 GB."""
    n = 12_000
    succ = {f"n{i}": [f"n{i + 1}"] + ([f"n{i + 2}"] if i + 2 <= n else []) for i in range(n)} | {f"n{n}": []}
    tracemalloc.start()
    try:
        for algorithm in ("dfs", "kahn"):
            w = W.walkthrough(succ, algorithm)
            for step in (0, len(w) // 2, len(w) - 1):  # what the page reads at a step
                W.node_colors(w, step)
                W.toy_dot(w, step) if step == 0 else None
            assert W.step_of_node(w, f"n{n}") is not None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60e6, f"{peak / 1e6:.0f} MB"
    last = W.walkthrough(succ, "dfs").state(-1)  # the state is still all there
    assert last.kind == "reverse" and len(last.output) == n + 1 and last.output[0] == "n0"


def _build(tmp_path: Path, lines: list[str], seconds: float = 2.0) -> kuiper_core.RuntimeGraph:
    t0 = time.perf_counter()
    try:
        return kuiper_core.load(write_model(tmp_path, lines))
    finally:
        assert time.perf_counter() - t0 < seconds


def test_select_on_dim_3e8_is_refused_at_build(tmp_path: Path) -> None:
    """Tensor.select dim=300000000 built 3e8 slices."""
    lines = [
        "pnnx.Input in 0 1 x #x=(2,3)f32",
        "Tensor.select s 1 1 x y dim=300000000 index=0",
        "pnnx.Output out 1 0 y",
    ]
    with pytest.raises(ModelError, match="'s'.*dim"):
        _build(tmp_path, lines)


def test_upsample_to_20000_squared_is_a_limit_not_a_3gb_table(tmp_path: Path) -> None:
    lines = [
        "pnnx.Input in 0 1 x #x=(1,1,4,4)f32",
        "nn.Upsample up 1 1 x y mode=nearest size=(20000,20000)",
        "pnnx.Output out 1 0 y",
    ]
    with pytest.raises(LimitError, match="operator 'up'.*400,000,000 elements.*max_tensor_elements"):
        _build(tmp_path, lines)


def test_planned_buffers_are_capped_in_total(tmp_path: Path) -> None:
    lines = ["pnnx.Input in 0 1 x #x=(1,256,256)f32"]
    lines += [f"nn.ReLU r{i} 1 1 {'x' if i == 0 else f'a{i - 1}'} a{i} #a{i}=(1,256,256)f32" for i in range(6)]
    lines += ["pnnx.Expression last 2 1 a0 a5 y expr=add(@0,@1) #y=(1,256,256)f32", "pnnx.Output out 1 0 y"]
    p = write_model(tmp_path, lines)
    assert kuiper_core.load(p).plan.total_bytes >= 2 * 256 * 256 * 4  # each buffer is small
    with limits.use(max_planned_bytes=256 * 256 * 4):
        with pytest.raises(LimitError, match="max_planned_bytes"):
            kuiper_core.load(p)


def test_long_line_is_refused_before_it_costs_memory(tmp_path: Path) -> None:
    """One 130 MB line cost 3 GB; max_line_chars (1 MiB) stops it before tokenizing."""
    long = "pnnx.Input in 0 1 x #x=(1)f32 " + "k=1 " * 300_000  # 1.2 MB
    text = param_text([long, "pnnx.Output out 1 0 x"])
    with pytest.raises(LimitError, match=r"line 3 is 1,200,0\d\d characters.*max_line_chars") as info:
        parse_param(text, "big.pnnx.param")
    assert len(str(info.value)) < 600  # the excerpt, not the line


def test_expand_to_4e10_elements_is_a_limit_not_a_hang(tmp_path: Path) -> None:
    p = write_model(
        tmp_path,
        ["pnnx.Input in 0 1 x #x=(1,1)f32", "Tensor.expand e 1 1 x y sizes=(200000,200000)", "pnnx.Output out 1 0 y"],
    )
    g = kuiper_core.load(p)
    t0 = time.perf_counter()
    with pytest.raises(LimitError, match="operator 'e'.*40,000,000,000 elements"):
        g.forward(np.ones((1, 1), np.float32))
    assert time.perf_counter() - t0 < 10  # a hang guard (the old code never finished), not a speed test


def test_expression_operand_index_is_limited() -> None:
    """Typing add(@0,@3000000) on the Expressions page made 3 million example tensors."""
    with pytest.raises(LimitError, match="max_expression_operand") as info:
        ex.parse("add(@0,@3000000)")
    assert info.value.column == 8 and info.value.value == 3_000_000
    with pytest.raises(LimitError, match="max_expression_operand"):
        ex.parse("@" + "9" * 5000)  # past int()'s 4,300 digits


def test_expression_depth_is_limited() -> None:
    deep = "neg(" * 50 + "@0" + ")" * 50
    assert ex.depth(ex.parse(deep)) == 51
    with pytest.raises(LimitError, match="nests deeper.*max_expression_depth = 10"):
        ex.parse(deep, limits.DEFAULT.replace(max_expression_depth=10))


@pytest.mark.parametrize(
    "limit, text",
    [
        ("max_param_bytes", param_text(["pnnx.Input in 0 1 x", "pnnx.Output out 1 0 x"]) + "\n" * 1000),
        ("max_line_chars", param_text(["pnnx.Input in 0 1 x" + " " * 100, "pnnx.Output out 1 0 x"])),
        ("max_operators", "7767517\n200 1\n"),
        ("max_tensor_elements", param_text(["pnnx.Attribute a 0 1 x @data=(100,100)f32", "pnnx.Output out 1 0 x"])),
    ],
)
def test_every_text_limit_has_its_own_message(limit: str, text: str) -> None:
    small = limits.DEFAULT.replace(max_param_bytes=1000, max_line_chars=60, max_operators=100, max_tensor_elements=1000)
    with pytest.raises(LimitError) as info:
        parse_param(text, "m.pnnx.param", small)
    assert info.value.limit == limit and f"limit {limit} = " in str(info.value)


def test_limits_defaults_and_overrides() -> None:
    d = limits.DEFAULT
    assert (d.max_line_chars, d.max_operators, d.max_tensor_elements) == (1 << 20, 100_000, 1 << 28)
    with limits.use(max_operators=5) as lim:
        assert limits.current() is lim and lim.max_operators == 5
    assert limits.current() is d
    with pytest.raises(TypeError, match="max_nothing"):
        d.replace(max_nothing=1)


def test_graph_keeps_the_limits_it_was_loaded_under(tmp_path: Path) -> None:
    p = write_model(
        tmp_path, ["pnnx.Input in 0 1 x #x=(2,8)f32", "Tensor.repeat r 1 1 x y sizes=(1,4)", "pnnx.Output out 1 0 y"]
    )
    with limits.use(max_tensor_elements=40):
        g = kuiper_core.load(p)
    with pytest.raises(LimitError, match="operator 'r'.*64 elements"):
        g.forward(np.ones((2, 8), np.float32))  # outside the with: still the graph's limits
    assert kuiper_core.load(p).forward(np.ones((2, 8), np.float32))[0].shape == (2, 32)


# -- tracebacks instead of errors -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line, where",
    [
        ("nn.ReLU r 1 1 x y alpha=" + "9" * 4400, "integer '9999"),
        ("nn.ReLU r 1 1 x y alpha=(1," + "9" * 4400 + ")", "integer '9999"),
        ("nn.ReLU r 1 1 x y #y=(1," + "9" * 4400 + ")f32", "dimension '9999"),
        ("nn.ReLU r 1 1 x y alpha=9223372036854775808", "does not fit in 64 bits"),
    ],
)
def test_huge_integers_in_params_and_shapes_are_located_errors(line: str, where: str) -> None:
    lines = ["pnnx.Input in 0 1 x #x=(1,2)f32", line, "pnnx.Output out 1 0 y"]
    with pytest.raises(ParseError, match=where) as info:
        parse_param(param_text(lines), "m.pnnx.param")
    assert info.value.line == 4 and len(str(info.value)) < 800


def test_huge_integer_in_an_expression_is_a_located_error() -> None:
    with pytest.raises(ParseError, match="does not fit in 64 bits") as info:
        ex.parse("add(@0," + "9" * 4400 + ")")
    assert info.value.column == 8


@pytest.mark.parametrize("flag, what", [(0x1, "encrypted"), (0x20, "compressed patched"), (0x40, "strongly encrypted")])
def test_zip_entries_with_refused_flags(tmp_path: Path, flag: int, what: str) -> None:
    p = _one_weight_model(tmp_path, [("w.data", f32(1, 2, 3, 4))])
    p.with_suffix(".bin").write_bytes(patch_zip(p.with_suffix(".bin").read_bytes(), flags=flag))
    with pytest.raises(WeightError, match=what):
        kuiper_core.load(p)


def test_zero_d_weight(tmp_path: Path) -> None:
    lines = [
        "pnnx.Input in 0 1 x #x=(3)f32",
        "pnnx.Attribute s 0 1 c @data=()f32 #c=()f32",
        "pnnx.Expression e 2 1 x c y expr=mul(@0,@1) #y=(3)f32",
        "pnnx.Output out 1 0 y",
    ]
    with pytest.raises(WeightError, match="has 0 bytes.*needs 4"):
        kuiper_core.load(write_model(tmp_path, lines, {"s.data": b""}))
    g = kuiper_core.load(write_model(tmp_path, lines, {"s.data": f32(2.5)}, name="ok"))
    assert g.forward(np.array([1, 2, 3], np.float32))[0].tolist() == [2.5, 5.0, 7.5]


def test_truncated_bin_is_a_weight_error(tmp_path: Path) -> None:
    p = _one_weight_model(tmp_path, [("w.data", f32(1, 2, 3, 4))])
    raw = bytearray(p.with_suffix(".bin").read_bytes())
    p.with_suffix(".bin").write_bytes(raw[: len(raw) // 2])  # cut: the directory is gone too
    with pytest.raises(WeightError):
        kuiper_core.load(p)


def test_bin_listing_far_more_entries_than_weights(tmp_path: Path) -> None:
    """Each central-directory entry costs a ZipInfo before anything is checked: a 200 MB
    upload of 46-byte entries would cost gigabytes. Refused from the end record's count."""
    entries = [("w.data", f32(1, 2, 3, 4))] + [(f"e{i}", b"") for i in range(2000)]
    with pytest.raises(WeightError, match="lists 2,001 entries for a model with 1 weight"):
        kuiper_core.load(_one_weight_model(tmp_path, entries))


def test_input_operator_without_output(tmp_path: Path) -> None:
    p = write_model(tmp_path, ["pnnx.Input in 0 0", "pnnx.Input in2 0 1 x", "pnnx.Output out 1 0 x"])
    with pytest.raises(ModelError, match="operator 'in'.*pnnx.Input takes no inputs and gives one output"):
        kuiper_core.load(p)


def test_batch_zero_input_is_refused() -> None:
    g = kuiper_core.load(OPS / "linear_addmm" / "model.pnnx.param")
    shape = g.graph.inputs[0].outputs[0].shape
    with pytest.raises(InputError, match="batch 0"):
        g.forward(*[np.zeros((0,) + tuple(shape[1:]), np.float32)] * len(g.graph.inputs))


def test_npy_header_claiming_a_huge_array(tmp_path: Path) -> None:
    header = np.lib.format.header_data_from_array_1_0(np.zeros((1,), np.float32))
    header["shape"] = (100000, 100000)
    path = tmp_path / "huge.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(b"\0" * 16)
    with pytest.raises(LimitError, match="10,000,000,000 elements"):
        read_npy(path)
    header["shape"] = (1000, 1000)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(b"\0" * 16)
    with pytest.raises(InputError, match="4,000,000 bytes, but only 16 follow"):
        read_npy(path)
    r = kuiper("run", str(OPS / "linear_1d_input" / "model.pnnx.param"), "--input", str(path))
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "array", [np.zeros(3, dtype=[("a", "f4"), ("b", "i4")]), np.array(["x"]), np.array([{}], object)]
)
def test_npy_of_no_numbers_is_refused(tmp_path: Path, array: np.ndarray) -> None:
    path = tmp_path / "odd.npy"
    np.save(path, array, allow_pickle=True)
    with pytest.raises(InputError):
        read_npy(path)


def test_npz_member_inflating_past_any_array_is_refused(tmp_path: Path) -> None:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb.npy", b"\0" * (20 << 20))  # 20 MB of zeros deflate to ~20 KB
    with pytest.raises(InputError, match="inflates to 20,971,520 bytes"):
        read_npz(buf.getvalue(), "refs.npz", limits.DEFAULT.replace(max_tensor_elements=1000))


@pytest.mark.slow
def test_cli_output_naming_a_directory_exits_2(tmp_path: Path) -> None:
    case = OPS / "linear_1d_input"
    np.save(tmp_path / "x.npy", np.load(case / "inputs.npz")["in0"])
    r = kuiper("run", str(case / "model.pnnx.param"), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr and "Traceback" not in r.stderr


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    src = OPS / "linear_1d_input"
    p = tmp_path / "model.pnnx.param"
    p.write_bytes(b"\xef\xbb\xbf" + (src / "model.pnnx.param").read_bytes())
    (tmp_path / "model.pnnx.bin").write_bytes((src / "model.pnnx.bin").read_bytes())
    y = kuiper_core.load(p).forward(np.load(src / "inputs.npz")["in0"])[0]
    np.testing.assert_allclose(y, np.load(src / "expected.npz")["out0"], rtol=1e-5)


def test_error_on_a_15mb_line_shows_an_excerpt_around_the_caret() -> None:
    line = "a" * 15_000_000 + " bad " + "b" * 100
    e = ParseError("unknown thing 'bad'", path="m.param", line=3, column=15_000_002, source_line=line, length=3)
    text = str(e)
    assert len(text) < 600
    src, caret = text.splitlines()[1:3]
    assert src[caret.index("^") : caret.index("^") + 3] == "bad" and src.startswith("…") and src.endswith("…")
    short = excerpt("x = bad", 5, 3)
    assert short == "x = bad\n    ^^^"  # short lines are shown whole


def test_long_messages_are_clipped() -> None:
    e = ModelError("parameter 'k' must be an int, got " + repr(list(range(100_000))), operator="op")
    assert len(str(e)) < 2200 and "characters cut" in str(e)


def test_unexpected_layer_build_failure_names_the_operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net: a param no check caught is still an error naming the operator."""
    from kuiper_core.layers import activation

    def boom(self, op):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(activation.ReLU, "__init__", boom)
    lines = ["pnnx.Input in 0 1 x #x=(1,2)f32", "nn.ReLU r 1 1 x y", "pnnx.Output out 1 0 y"]
    with pytest.raises(ModelError, match="operator 'r' \\(nn.ReLU\\): invalid parameters: ZeroDivisionError"):
        kuiper_core.load(write_model(tmp_path, lines))


def test_every_error_is_a_kuiper_error() -> None:
    for cls in (ParseError, ModelError, WeightError, InputError, LimitError):
        assert issubclass(cls, KuiperError)


# -- found by our own hostile corpus (tools/hostile_corpus.py) ------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "symlink_loop"])
def test_special_files_are_refused_not_read(tmp_path: Path, kind: str) -> None:
    """A FIFO as .param/.bin/.npy blocked forever; /dev/zero never ended."""
    import os

    target = tmp_path / "special"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev_zero":
        target.symlink_to("/dev/zero")
    elif kind == "directory":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "loop")
        (tmp_path / "loop").symlink_to(target)
    case = OPS / "conv_2d_basic"
    x = tmp_path / "x.npy"
    np.save(x, np.load(case / "inputs.npz")["in0"])
    param = case / "model.pnnx.param"
    for argv in (
        ["run", str(target), "--input", str(x)],
        ["run", str(param), "--bin", str(target), "--input", str(x)],
        ["run", str(param), "--input", str(target)],
    ):
        r = subprocess.run(
            [sys.executable, "-m", "kuiper_core.cli", *argv], capture_output=True, text=True, cwd=ROOT, timeout=30
        )
        assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr, r.stderr


def test_non_ascii_whitespace_belongs_to_a_name(tmp_path: Path) -> None:
    """pnnx splits tokens on ASCII whitespace only: a NBSP is part of an operand's name."""
    lines = [
        "pnnx.Input in 0 1 a\u00a0x #a\u00a0x=(1,3)f32",
        "nn.ReLU r 1 1 a\u00a0x y #y=(1,3)f32",
        "pnnx.Output out 1 0 y",
    ]
    g = kuiper_core.load(write_model(tmp_path, lines, counts=(3, 2)))
    assert "a\u00a0x" in g.graph.operands
    assert g.forward(np.float32([[-1, 0, 2]]))[0].tolist() == [[0, 0, 2]]


@pytest.mark.parametrize("text", ["floor_divide(@0,0)", "remainder(@0,@1)", "fmod(@0,0)", "floor_divide(5,0)"])
def test_integer_division_by_zero_is_an_error_as_in_pytorch(text: str) -> None:
    """NumPy gives 0 (and a warning) where PyTorch raises ZeroDivisionError."""
    a, b = np.int64([[7, -3, 0]]), np.int64([[2, 0, -1]])
    for run in (ex.evaluate, lambda t, xs: ex.evaluate_traced(t, xs).result):
        with pytest.raises(InputError, match="integer division by zero"):
            run(text, [a, b])
    assert ex.evaluate("remainder(@0,0.0)", [a]).dtype == np.float32  # a float divisor gives nan, as in torch


@pytest.mark.slow
def test_cli_limits_can_be_raised_or_lowered() -> None:
    """A legitimately big model must stay runnable from the command line: --limit NAME=VALUE."""
    param = str(OPS / "linear_1d_input" / "model.pnnx.param")
    r = kuiper("--limit", "max_tensor_elements=10", "inspect", param)
    assert r.returncode == 2 and "limit max_tensor_elements = 10" in r.stderr
    assert kuiper("--limit", "max_tensor_elements=1_000", "inspect", param).returncode == 0
    r = kuiper("--limit", "max_nothing=1", "inspect", param)
    assert r.returncode == 2 and "unknown limit 'max_nothing'" in r.stderr


@pytest.mark.parametrize("where", ["a_directory", "missing/folder/out.pnnx.param"])
def test_cli_opt_output_that_cannot_be_written(tmp_path: Path, where: str) -> None:
    (tmp_path / "a_directory").mkdir()
    r = kuiper("opt", str(ROOT / "sample_models" / "tiny_mlp.pnnx.param"), "-o", str(tmp_path / where))
    assert r.returncode == 2 and r.stderr.startswith("error:") and "internal" not in r.stderr, r.stderr


def test_repeated_operator_names(tmp_path: Path) -> None:
    """pnnx writes repeated names at optlevel 0 (and repeated .bin entries, in operator order):
    both operators run, each with its own weight. (Support landed with the optlevel work.)"""
    lines = [
        "pnnx.Input in 0 1 x #x=(1,2)f32",
        "nn.Linear lin 1 1 x a bias=False in_features=2 out_features=2 @weight=(2,2)f32 #a=(1,2)f32",
        "nn.Linear lin 1 1 a b bias=False in_features=2 out_features=2 @weight=(2,2)f32 #b=(1,2)f32",
        "pnnx.Output out 1 0 b",
    ]
    entries = [("lin.weight", f32(2, 0, 0, 2)), ("lin.weight", f32(3, 0, 0, 3))]
    with pytest.warns(UserWarning, match="Duplicate name"):
        p = write_model(tmp_path, lines, entries)
    g = kuiper_core.load(p)
    assert [r.name for r in g.order] == ["in", "lin", "lin", "out"]
    assert g.forward(np.float32([[1, -2]]))[0].tolist() == [[6, -12]]
    r = kuiper("inspect", str(p))
    assert r.returncode == 0 and r.stdout.count(" lin ") == 2


def test_cli_prints_a_python_number_output(tmp_path: Path) -> None:
    """An expression output that is a Python value (optlevel 0 keeps them) is printed, not a crash."""
    lines = ["pnnx.Input in 0 1 x #x=(1,3)f32", "pnnx.Expression e 1 1 x y expr=True", "pnnx.Output out 1 0 y"]
    np.save(tmp_path / "x.npy", np.ones((1, 3), np.float32))
    r = kuiper("run", str(write_model(tmp_path, lines)), "--input", str(tmp_path / "x.npy"))
    assert r.returncode == 0 and "output 0: ()bool" in r.stdout, r.stderr


@pytest.mark.slow
def test_fusing_a_long_relu_chain_stays_fast(tmp_path: Path) -> None:
    """FuseExpressions re-read the growing expression at every fusion: 1,000 ReLUs took 38 s,
    20,000 (a 600 KB upload, on the app's Passes page) would never finish."""
    from kuiper_core.passes import optimize

    n = 2000
    lines = ["pnnx.Input i 0 1 x0 #x0=(1,4)f32"] + [f"nn.ReLU r{k} 1 1 x{k} x{k + 1}" for k in range(n)]
    g = parse_param(param_text(lines + [f"pnnx.Output o 1 0 x{n}"]))
    t0 = time.perf_counter()
    result = optimize(g, 2)
    assert time.perf_counter() - t0 < 20
    x = np.float32([[-1, 0.5, 2, -3]])
    y = kuiper_core.RuntimeGraph.from_graph(result.after).build().forward(x)[0]
    assert y.tolist() == np.maximum(x, 0).tolist()


@pytest.mark.parametrize(
    "array",
    [
        np.array([[[[1e308, -1e308], [0.0, np.nan]]]]),
        np.zeros((1, 0, 4, 4), np.float32),
        np.zeros((1, 2, 0, 3), np.float32),
        np.full((1, 2, 3, 3), np.inf, np.float32),
        np.full((1, 2, 3, 3), 3e38, np.float32),
        np.full((1, 1, 2, 2), np.finfo(np.float64).max),
    ],
    ids=["range_overflows", "no_channels", "empty_planes", "all_inf", "constant_3e38", "constant_max"],
)
def test_tensor_pictures_of_odd_tensors(array: np.ndarray) -> None:
    """The Forward page's statistics, histogram and channel mosaic of any output: a range
    that overflows float64 (histogram raised, colours indexed garbage), a constant 3e38 (its
    one bin had no width), 0 channels (raised). Found by the tensor-view fuzz test."""
    from kuiper_core.explore import tensors as T

    with np.errstate(all="ignore"):
        T.tensor_stats(array)
        counts, edges = T.histogram(array)
        assert np.isfinite(edges).all()
        mosaic, _ = T.channel_grid(array)
    assert mosaic.dtype == np.uint8 and mosaic.ndim == 3
    if array.size and np.isfinite(array).any():
        assert counts.sum() == np.isfinite(array).sum()


# -- the textual IR (.kir) and the passes: new attack surface ----------------------------------------------
def _kir(name: str = "expr_zoo") -> str:
    from kuiper_core import print_ir

    return print_ir(load_graph(ROOT / "sample_models" / f"{name}.pnnx.param"))


def test_ir_operation_count_is_limited() -> None:
    """A .kir of 200,000 one-line operations was parsed whole (74 s): max_operators applies."""
    from kuiper_core import ir

    ops = "\n".join(f'  (%{i}) = "pnnx.Input" @i{i} () : () -> pnnx.tensor<1xf32>' for i in range(60))
    with limits.use(max_operators=50):
        with pytest.raises(LimitError, match="more than 50 operations.*max_operators = 50") as info:
            ir.parse_ir("{\n" + ops + "\n}", "m.kir")
    assert info.value.line == 52


def test_ir_arrays_nesting_deeper_than_any_layer_reads(tmp_path: Path) -> None:
    """5,000 nested (Array)[ in a parameter parsed fine, then a layer's error message, the .param
    writer and the passes recursed: `kuiper opt` exited 1 with a RecursionError."""
    n = 5000
    text = _kir().replace("padding_mode:", "extra:(Array)[" + "(Array)[" * n + "]" * (n + 1) + ", padding_mode:", 1)
    (tmp_path / "m.kir").write_text(text)
    (tmp_path / "m.bin").write_bytes((ROOT / "sample_models" / "expr_zoo.pnnx.bin").read_bytes())
    r = kuiper("opt", str(tmp_path / "m.kir"), "-o", str(tmp_path / "o.pnnx.param"))
    assert r.returncode == 2 and "arrays nest deeper than 64 levels (limit max_param_depth = 64)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr) < 1000


@pytest.mark.parametrize(
    "old, new",
    [
        ("(Int32)3", "(Double)" + "9" * 5000),
        ("(Int32)3", "(Double)1e" + "9" * 5000),
        ("tensor<1x3", "tensor<" + "9" * 5000 + "x3"),
        ("(Int32)3", "(Int32)3" + "x" * 5000),
    ],
)
def test_ir_huge_numbers_are_cut_in_messages(old: str, new: str) -> None:
    from kuiper_core import ir

    with pytest.raises(ParseError) as info:
        ir.parse_ir(_kir().replace(old, new, 1), "m.kir")
    assert len(info.value.message) < 200 and "…" in info.value.message and len(str(info.value)) < 700


@pytest.mark.parametrize(
    "case",
    ["ops/shape_dyn_slice_end", "ops_o0/tensor_constant_to", "ops/conv_2d_unbatched", "ops_o0/linear_einsum_param"],
)
@pytest.mark.parametrize("level", [1, 2])
def test_passes_keep_pytorchs_answer_on_real_exports(case: str, level: int) -> None:
    """Found by differential fuzzing of `kuiper opt` (op cases and their mutants, optimised and
    run): RemoveNoOps took a slice with its end in a $end operand for a full slice (a silently
    wrong (2,5) for (2,3)); FoldConstantParams made Tensor.to's $input number a parameter (the
    layer then had no input); the verifier read an unbatched conv's channels at axis 1;
    FoldConstantParams removed an unread constant (`value=None`) but reported no change."""
    from conftest import DATA, max_err_ok
    from kuiper_core.passes import optimize

    d = DATA / case
    with np.load(d / "inputs.npz") as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    with np.load(d / "expected.npz") as z:
        refs = [z[f"out{i}"] for i in range(len(z.files))]
    after = optimize(load_graph(d / "model.pnnx.param"), level).after
    ys = kuiper_core.RuntimeGraph.from_graph(after).build().forward(*xs)
    assert len(ys) == len(refs)
    for y, ref in zip(ys, refs):
        ok, err, bound = max_err_ok(np.asarray(y), ref)
        assert ok, f"{case} -O{level}: max abs err {err:.3g} > {bound:.3g}"


# -- found by tools/fuzz_params.py on the optlevel-0 op cases and the optlevel models -----------------------
def _run_with(case: str, old: str, new: str) -> None:
    """Load a real export under tests/data with one piece of its text replaced, build and run it."""
    from conftest import DATA

    d = DATA / case
    text = (d / "model.pnnx.param").read_text()
    assert text.count(old) == 1, old
    with np.load(d / "inputs.npz") as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    graph = parse_param(text.replace(old, new), "m.pnnx.param")
    load_weights(graph, d / "model.pnnx.bin")
    kuiper_core.RuntimeGraph.from_graph(graph).build().forward(*xs)


@pytest.mark.parametrize(
    "case, old, new, message",
    [
        # a $src that does not broadcast to the view it is copied into (raw ValueError from NumPy)
        (
            "ops_o1/tensor_arange_posenc",
            "pnnx_expr_22             0 1 129 expr=0",
            "pnnx_expr_22 0 1 129 expr=2",
            r"Tensor.copy_8.*cannot copy a source of shape \(5, 4\) into \$self of shape \(3, 4\)",
        ),
        # a string constant as torch.where's $input (could not convert string to float)
        (
            "ops_o0/tensor_where_scalars",
            "pnnx_2                   0 1 5 value=1.0",
            "pnnx_2 0 1 5 value=tanh",
            r"torch.where_1.*\$input must be a tensor or a number, got str",
        ),
        # int(inf) (OverflowError)
        (
            "ops_o0/shape_dyn_select",
            "pnnx_7                   0 1 33 value=1",
            "pnnx_7 0 1 33 value=1e309",
            r"pnnx_9.*cannot convert -inf to an integer",
        ),
        # arange to infinity: at build from a constant, at run time from a computed bound (OverflowError)
        (
            "ops_o0/tensor_arange_posenc",
            "pnnx_16                  0 1 112 value=2",
            "pnnx_16 0 1 112 value=1e309",
            r"torch.arange_6.*must be finite",
        ),
        (
            "ops_o1/tensor_arange_posenc",
            "pnnx_expr_42             1 1 x.1 7 expr=size(@0,1)",
            "pnnx_expr_42 1 1 x.1 7 expr=mul(size(@0,1),1e309)",
            r"torch.arange_5.*must be finite, got \[0, inf, 1\]",
        ),
        # return_indices not a bool, or a (values, indices) tuple read as a tensor (AttributeError downstream)
        (
            "optlevel/digits_cnn/dyn",
            "return_indices=False",
            "return_indices=(0,0)",
            r"'pool'.*return_indices must be True or False",
        ),
        (
            "optlevel/digits_cnn/dyn",
            "return_indices=False",
            "return_indices=True",
            r"'pool'.*one \(values, indices\) tuple, but operator 'torch.flatten_0' \(torch.flatten\) reads it as a tensor",
        ),
        # Winograd's padded input was allocated before any size check: 95 GiB, the out-of-memory net caught it
        (
            "optlevel/digits_cnn/dyn",
            "padding=(1,1) padding_mode=zeros stride=(1,1) @bias=(32)f32",
            "padding=(20000,20000) padding_mode=zeros stride=(1,1) @bias=(32)f32",
            r"convbn2d_1.*the padded input of shape \(1,16,40008,40008\).*max_tensor_elements",
        ),
    ],
)
def test_optlevel0_layers_refuse_hostile_operands(case: str, old: str, new: str, message: str) -> None:
    with pytest.raises(KuiperError, match=message) as info:
        _run_with(case, old, new)
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, KuiperError), (
        "caught only by the safety net"
    )
    assert "ran out of memory" not in str(info.value)


# -- the CLI: every error case of the issue exits 2 with a one-paragraph message --------------------------
_X = ["pnnx.Input in 0 1 x #x=(1,4)f32"]
_CLI_CASES = {
    # name: (.param lines, .bin entries or None, input array)
    "int64_into_i8": (INT8_MODEL, None, np.array([1, 2, 300], np.int64)),
    "duplicate_entries": (None, "dup", np.ones((1, 4), np.float32)),
    "shape_overflows_int64": (
        ["pnnx.Input in 0 1 x #x=(4294967296,4294967296,4)f32", "pnnx.Output out 1 0 x"],
        None,
        np.ones((1, 4), np.float32),
    ),
    "select_dim_3e8": (
        _X + ["Tensor.select s 1 1 x y dim=300000000 index=0", "pnnx.Output out 1 0 y"],
        None,
        np.ones((1, 4), np.float32),
    ),
    "upsample_20000": (
        [
            "pnnx.Input in 0 1 x #x=(1,1,4,4)f32",
            "nn.Upsample up 1 1 x y mode=nearest size=(20000,20000)",
            "pnnx.Output out 1 0 y",
        ],
        None,
        np.ones((1, 1, 4, 4), np.float32),
    ),
    "expand_4e10": (
        ["pnnx.Input in 0 1 x #x=(1,1)f32", "Tensor.expand e 1 1 x y sizes=(200000,200000)", "pnnx.Output out 1 0 y"],
        None,
        np.ones((1, 1), np.float32),
    ),
    "int_of_4400_digits": (
        _X + ["nn.ReLU r 1 1 x y alpha=" + "9" * 4400, "pnnx.Output out 1 0 y"],
        None,
        np.ones((1, 4), np.float32),
    ),
    "expression_operand_3e6": (
        _X + ["pnnx.Expression e 1 1 x y expr=add(@0,@3000000)", "pnnx.Output out 1 0 y"],
        None,
        np.ones((1, 4), np.float32),
    ),
    "zero_d_weight_0_bytes": (
        [
            "pnnx.Input in 0 1 x #x=(3)f32",
            "pnnx.Attribute s 0 1 c @data=()f32 #c=()f32",
            "pnnx.Expression e 2 1 x c y expr=mul(@0,@1) #y=(3)f32",
            "pnnx.Output out 1 0 y",
        ],
        {"s.data": b""},
        np.ones(3, np.float32),
    ),
    "input_without_output": (
        ["pnnx.Input in 0 0", "pnnx.Input in2 0 1 x", "pnnx.Output out 1 0 x"],
        None,
        np.ones((1, 4), np.float32),
    ),
    "batch_0": (_X + ["nn.ReLU r 1 1 x y #y=(1,4)f32", "pnnx.Output out 1 0 y"], None, np.ones((0, 4), np.float32)),
    "encrypted_entry": (None, "encrypted", np.ones((1, 4), np.float32)),
}


@pytest.mark.parametrize("name", sorted(_CLI_CASES))
def test_issue_cases_exit_2_from_the_cli(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`kuiper run` on each error case of the issue: exit status 2, `error: …` (or the IR's
    `file:line:col: error:`) on stderr, never a traceback or an internal error (exit 1)."""
    from kuiper_core.cli import main

    lines, weights, x = _CLI_CASES[name]
    if lines is None:  # the one-weight model with a hostile .bin
        p = _one_weight_model(tmp_path, [("w.data", f32(1, 1, 1, 1))])
        if weights == "dup":
            with pytest.warns(UserWarning):
                p = _one_weight_model(tmp_path, [("w.data", f32(1, 1, 1, 1)), ("w.data", f32(9, 9, 9, 9))])
        else:
            p.with_suffix(".bin").write_bytes(patch_zip(p.with_suffix(".bin").read_bytes(), flags=0x1))
    else:
        p = write_model(tmp_path, lines, weights)
    np.save(tmp_path / "x.npy", x)
    code = main(["run", str(p), "--input", str(tmp_path / "x.npy")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "Traceback" not in err and len(err) < 2500, (code, err)


# -- a 15 MB line: the message shows a window around the caret, through every parser -------------------------
@pytest.mark.parametrize(
    "bad, what",
    [
        ("#x=(1)f99", "unknown dtype 'f99'"),
        ("a=" + "9" * 5000, "does not fit in 64 bits"),
        ("#x=(1,2", "expected ')' to close the shape"),
    ],
)
def test_error_on_a_15mb_param_line_is_cut_around_the_caret(bad: str, what: str) -> None:
    line = "pnnx.Input in 0 1 x " + " " * 15_000_000 + " " + bad
    with limits.use(max_line_chars=16_000_000), pytest.raises(ParseError, match=re.escape(what)) as info:
        parse_param("7767517\n2 1\n" + line + "\npnnx.Output out 1 0 x\n", "m.pnnx.param")
    text = str(info.value)
    assert len(text) < 700 and info.value.column > 15_000_000
    source, caret = text.splitlines()[1:3]
    assert source.startswith("…") and source[caret.index("^")] in bad  # under the culprit


def test_error_on_a_15mb_expression_or_ir_line_is_cut_around_the_caret() -> None:
    from kuiper_core import ir

    # (past max_expression_chars by default: a LimitError before any tokenizing)
    with (
        limits.use(max_expression_chars=16_000_000),
        pytest.raises(ParseError, match="unexpected character '\\?'") as info,
    ):
        ex.parse("add(@0,1" + " " * 15_000_000 + ",?)")
    assert len(str(info.value)) < 700
    source, caret = str(info.value).splitlines()[1:3]
    assert source[caret.index("^")] == "?"
    kir = _kir().replace("{\n", "{ " + " " * 15_000_000 + "?? \n", 1)
    with limits.use(max_line_chars=16_000_000), pytest.raises(ParseError) as info:
        ir.parse_ir(kir, "m.kir")
    assert len(str(info.value)) < 700 and info.value.line == 1


@pytest.mark.parametrize(
    "case, old, new, error, message",
    [
        (
            "ops_o0/tensor_constant_to",
            "pnnx_1                   0 1 22 value=2.0",
            "pnnx_1 0 1 22 value=relu",
            ModelError,
            r"Tensor.to_2.*expected a tensor or a number to convert, got str",
        ),
        (
            "ops_o1/tensor_arange_posenc",
            "pnnx_expr_38             0 1 112 expr=2",
            "pnnx_expr_38 0 1 112 expr=1e-320",
            ModelError,
            r"torch.arange_6.*arange\(0, 8, 1e-320\) has no finite length",
        ),
        (
            "ops_o1/tensor_arange_posenc",
            "pnnx_expr_46             0 1 18 expr=0",
            "pnnx_expr_46 0 1 18 expr=-1e308",
            LimitError,
            r"torch.arange_6.*arange\(-1e\+308, 8, 2\) would have 5e\+307 elements",
        ),
        (
            "ops_o1/tensor_arange_posenc",
            "pnnx_expr_46             0 1 18 expr=0",
            "pnnx_expr_46 0 1 18 expr=-2147483647",
            LimitError,
            r"torch.arange_6.*1.074e\+09 elements",
        ),
    ],
)
def test_optlevel0_constants_of_the_wrong_kind(case: str, old: str, new: str, error: type, message: str) -> None:
    """A string constant into Tensor.to (could not convert string to float), an arange whose
    length is infinite (OverflowError) or over the limit ('Maximum allowed size exceeded')."""
    with pytest.raises(error, match=message) as info:
        _run_with(case, old, new)
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, KuiperError)


def test_opt_check_treats_matching_nan_and_inf_as_equal() -> None:
    """`kuiper opt --check` printed `max |optimised − original| = nan` whenever an output held a
    NaN (nan − nan), in the same place before and after: found by the hostile corpus."""
    from kuiper_core.cli import _difference

    a = np.float32([np.nan, np.inf, -np.inf, 1.0])
    assert _difference(a, a.copy()) == 0.0
    assert _difference(a, np.float32([1.0, np.inf, -np.inf, 1.0])) == np.inf  # a NaN appeared or went
    assert _difference(a, np.float32([np.nan, -np.inf, -np.inf, 1.0])) == np.inf
    assert _difference(a, np.float32([np.nan, np.inf, -np.inf, 1.5])) == 0.5
    assert _difference(np.complex64([1 + 1j]), np.complex64([1 + 2j])) == 1.0


def test_passes_verify_only_after_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kuiper opt` on a 20,000-ReLU chain (a 600 KB upload, the app's Passes page) took 29 s,
    half of it re-verifying the whole graph after each of ~26 pass runs that changed nothing."""
    from kuiper_core.passes import manager, optimize

    calls = []
    real = manager.verify_graph
    monkeypatch.setattr(manager, "verify_graph", lambda g: calls.append(len(g.operators)) or real(g))
    n = 300
    lines = ["pnnx.Input i 0 1 x0 #x0=(1,4)f32"] + [f"nn.ReLU r{k} 1 1 x{k} x{k + 1}" for k in range(n)]
    result = optimize(parse_param(param_text(lines + [f"pnnx.Output o 1 0 x{n}"])), 2)
    changed = sum(1 for row in result.log.rows if row.summary != "no change")
    assert len(result.log.rows) > 20 and len(calls) == changed < 5, (len(calls), changed)
