"""The .param reader: real files parse, and every kind of bad text gets a located error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuiper_core.errors import KuiperError, ParseError
from kuiper_core.pnnx import format_param, parse_param, read_param
from conftest import OPS

GOOD = """7767517
4 3
pnnx.Input               pnnx_input_0             0 1 0 #0=(1,3,8,8)f32
nn.Conv2d                conv                     1 1 0 1 bias=True dilation=(1,1) groups=1 in_channels=3 kernel_size=(3,3) out_channels=4 padding=(1,1) padding_mode=zeros stride=(1,1) @bias=(4)f32 @weight=(4,3,3,3)f32 $input=0 #0=(1,3,8,8)f32 #1=(1,4,8,8)f32
pnnx.Expression          pnnx_expr_0              2 1 1 1 2 expr=add(@0,mul(@1,1.000000e-05)) #1=(1,4,8,8)f32 #2=(1,4,8,8)f32
pnnx.Output              pnnx_output_0            1 0 2 #2=(1,4,8,8)f32
"""


def test_good_text_parses_into_the_data_model() -> None:
    g = parse_param(GOOD, "m.param")
    assert [op.type for op in g.operators] == ["pnnx.Input", "nn.Conv2d", "pnnx.Expression", "pnnx.Output"]
    conv = g.operator("conv")
    assert conv.params["kernel_size"] == [3, 3] and conv.params["bias"] is True
    assert conv.params["padding_mode"] == "zeros"
    assert conv.attrs["weight"].shape == (4, 3, 3, 3) and conv.attrs["weight"].dtype == "f32"
    assert conv.input_names == ["input"]
    assert g.operands["1"].shape == (1, 4, 8, 8) and g.operands["1"].producer is conv
    expr = g.operator("pnnx_expr_0")
    assert expr.params["expr"] == "add(@0,mul(@1,1.000000e-05))"
    assert [o.name for o in expr.inputs] == ["1", "1"]  # an input may repeat
    assert g.operands["1"].consumers == [expr, expr]


@pytest.mark.parametrize(
    "value, parsed",
    [
        ("None", None),
        ("True", True),
        ("False", False),
        ("3", 3),
        ("-2", -2),
        ("1.000000e-05", 1e-05),
        ("0.5", 0.5),
        ("1.0", 1.0),
        ("-1.5e+03", -1500.0),
        ("bilinear", "bilinear"),
        ("(1)", [1]),
        ("(1,2)", [1, 2]),
        ("(0.5,2.0)", [0.5, 2.0]),
        ("(a,b)", ["a", "b"]),
        ("()", []),
        ("add(@0,@1)", "add(@0,@1)"),
        ("[int(size(@0,0)),-1]", "[int(size(@0,0)),-1]"),
        ("%batch", "%batch"),
    ],
)
def test_param_values(value: str, parsed: object) -> None:
    text = f"7767517\n2 1\npnnx.Input in 0 1 0 k={value}\npnnx.Output out 1 0 0\n"
    g = parse_param(text)
    got = g.operators[0].params["k"]
    assert got == parsed and type(got) is type(parsed)


def test_shapes_with_unknown_and_symbolic_dims() -> None:
    text = "7767517\n2 1\npnnx.Input in 0 1 0 #0=(?,3,%h,8)f16\npnnx.Output out 1 0 0\n"
    op = parse_param(text).operands["0"]
    assert op.shape == (None, 3, "h", 8) and op.dtype == "f16" and op.static_shape is None


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", "c64", "c128"])
def test_all_dtypes(dtype: str) -> None:
    g = parse_param("7767517\n2 1\npnnx.Input in 0 1 0 #0=(2)" + dtype + "\npnnx.Output out 1 0 0\n")
    assert g.operands["0"].dtype == dtype


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_param(text, "bad.param")
    return info.value


# (what is wrong, text, line, column, words the message must contain)
BAD = [
    ("magic", "7767518\n0 0\n", 1, 1, "magic"),
    ("empty file", "", 1, 1, "magic"),
    ("counts not ints", "7767517\n2 x\n", 2, 1, "operator count"),
    ("counts missing", "7767517\n2\n", 2, 1, "operator count"),
    (
        "fewer operators than declared",
        "7767517\n3 1\npnnx.Input in 0 1 0\npnnx.Output out 1 0 0\n",
        2,
        1,
        "declares 3 operators",
    ),
    (
        "more operators than declared",
        "7767517\n1 1\npnnx.Input in 0 1 0\npnnx.Output out 1 0 0\n",
        4,
        1,
        "more operators",
    ),
    ("n_in not an int", "7767517\n2 1\npnnx.Input in 0 1 0\npnnx.Output out x 0 0\n", 4, 17, "input count"),
    (
        "n_in larger than names",
        "7767517\n2 1\npnnx.Input in 0 1 0\npnnx.Output out 2 0 0 k=1\n",
        4,
        23,
        "need 2 operand",
    ),
    (
        "n_out smaller than names",
        "7767517\n2 1\npnnx.Input in 0 1 0 1\npnnx.Output out 1 0 0\n",
        3,
        21,
        "need 1 operand",
    ),
    ("used before produced", "7767517\n2 2\npnnx.Input in 0 1 0\npnnx.Output out 1 0 7\n", 4, 21, "used before"),
    ("produced twice", "7767517\n2 1\npnnx.Input in 0 1 0\nnn.ReLU r 1 1 0 0\n", 4, 17, "already produced on line 3"),
    (
        "malformed number",
        "7767517\n2 1\npnnx.Input in 0 1 0 k=1.2.3\npnnx.Output out 1 0 0\n",
        3,
        23,
        "malformed number",
    ),
    (
        "malformed list element",
        "7767517\n2 1\npnnx.Input in 0 1 0 k=(1,2x)\npnnx.Output out 1 0 0\n",
        3,
        26,
        "malformed number",
    ),
    (
        "empty list element",
        "7767517\n2 1\npnnx.Input in 0 1 0 k=(1,,2)\npnnx.Output out 1 0 0\n",
        3,
        26,
        "empty element",
    ),
    ("unclosed list", "7767517\n2 1\npnnx.Input in 0 1 0 k=(1,2\npnnx.Output out 1 0 0\n", 3, 26, "close the list"),
    ("no value", "7767517\n2 1\npnnx.Input in 0 1 0 k=\npnnx.Output out 1 0 0\n", 3, 22, "expected a value"),
    ("not key=value", "7767517\n2 1\npnnx.Input in 0 1 0 k=1 junk\npnnx.Output out 1 0 0\n", 3, 25, "key=value"),
    ("bad dtype", "7767517\n2 1\npnnx.Input in 0 1 0 #0=(1,3)f33\npnnx.Output out 1 0 0\n", 3, 29, "unknown dtype"),
    ("bad dim", "7767517\n2 1\npnnx.Input in 0 1 0 #0=(1,-3)f32\npnnx.Output out 1 0 0\n", 3, 27, "bad dimension"),
    (
        "unclosed shape",
        "7767517\n2 1\npnnx.Input in 0 1 0 #0=(1,3f32\npnnx.Output out 1 0 0\n",
        3,
        30,
        "close the shape",
    ),
    (
        "shape without paren",
        "7767517\n2 1\npnnx.Input in 0 1 0 #0=1,3f32\npnnx.Output out 1 0 0\n",
        3,
        24,
        "expected '('",
    ),
    (
        "weight with ? dim",
        "7767517\n2 1\npnnx.Input in 0 1 0 @w=(?,3)f32\npnnx.Output out 1 0 0\n",
        3,
        25,
        "bad dimension",
    ),
    (
        "# of a foreign operand",
        "7767517\n2 1\npnnx.Input in 0 1 0 #9=(1)f32\npnnx.Output out 1 0 0\n",
        3,
        21,
        "not an input or output",
    ),
    ("$ of a foreign operand", "7767517\n2 1\npnnx.Input in 0 1 0\nnn.ReLU r 1 0 0 $input=4\n", 4, 24, "not an input"),
    (
        "conflicting shapes",
        "7767517\n2 1\npnnx.Input in 0 1 0 #0=(1,3)f32\npnnx.Output out 1 0 0 #0=(1,4)f32\n",
        4,
        26,
        "declared (1,3)f32 earlier",
    ),
    ("short operator line", "7767517\n1 0\npnnx.Input in\n", 3, 14, "type name n_in n_out"),
]


@pytest.mark.parametrize("what, text, line, column, words", BAD, ids=[b[0] for b in BAD])
def test_bad_text_is_located(what: str, text: str, line: int, column: int, words: str) -> None:
    e = _err(text)
    assert isinstance(e, KuiperError)
    assert (e.line, e.column) == (line, column), f"{what}: got {e.line}:{e.column}: {e.message}"
    assert words in e.message
    assert e.path == "bad.param"
    rendered = str(e)
    assert rendered.startswith(f"bad.param:{line}:{column}: ")
    src, caret = rendered.splitlines()[1:3]
    assert caret.index("^") == column - 1  # the caret sits under the culprit


def test_binary_file_is_a_located_error(tmp_path: Path) -> None:
    p = tmp_path / "x.param"
    p.write_bytes(b"7767517\n1 1\n\xff\xfe garbage\n")
    with pytest.raises(ParseError) as info:
        read_param(p)
    assert (info.value.line, info.value.column) == (3, 1) and "UTF-8" in info.value.message


def test_missing_file_is_a_kuiper_error(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="cannot read"):
        read_param(tmp_path / "nope.param")


@pytest.mark.parametrize("param", sorted(OPS.glob("*/model.pnnx.param")), ids=lambda p: p.parent.name)
def test_real_exports_print_back(param: Path) -> None:
    """Printing a parsed real file gives text that parses to the same graph; text with no
    floats comes back byte for byte (pnnx writes floats in more than one style)."""
    text = param.read_text()
    g = parse_param(text)
    printed = format_param(g)
    assert parse_param(printed).equals(g)
    if not any(
        isinstance(v, float) or (isinstance(v, list) and any(isinstance(x, float) for x in v))
        for op in g.operators
        for v in op.params.values()
    ):
        assert printed == text
