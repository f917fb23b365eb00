"""The IR lexer, parser and printer on their own: every value kind round-trips exactly, names
that are not identifiers are quoted, dialects plug in, nesting needs no recursion, and every
case of the invalid corpus (tests/data/ir_invalid) fails where and how it says."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import DATA, OPS, SAMPLES

from kuiper_core import ir, limits
from kuiper_core.errors import KuiperError, LimitError, ParseError
from kuiper_core.graph import DTYPES, Attribute, Graph
from kuiper_core.ir import Dialect, Kind, default_registry, tokenize
from kuiper_core.ir.verify import verify_file, verify_text
from kuiper_core.pnnx import read_param

INVALID = sorted((DATA / "ir_invalid").glob("*.kir"))
CASES = [(path, r) for path in INVALID for r in verify_file(path)]


# -- the invalid corpus -------------------------------------------------------------------------
@pytest.mark.parametrize("path, result", CASES, ids=[f"{p.stem}:{r.first_line}" for p, r in CASES])
def test_invalid_corpus_case(path: Path, result) -> None:
    assert result.problem is None, f"{path.name}, case at line {result.first_line}: {result.problem}"


def test_corpus_is_large_and_pins_columns() -> None:
    expecting = [r for _, r in CASES if r.expected is not None]
    assert len(expecting) >= 25
    assert all(r.expected.column is not None for r in expecting)


def test_verifier_reports_a_wrong_expectation() -> None:
    """The harness could fail: a wrong column, a wrong message, a case that parses."""
    module = '{\n  (%0) = "pnnx.Input" @in () : () -> pnnx.tensor<1x4xf32>\n'
    bad_col = (
        module
        + '  // expected-error@+1:5 {{use of undefined value %7}}\n  () = "pnnx.Output" @o (%7) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
    )
    bad_msg = (
        module
        + '  // expected-error@+1:26 {{no such thing}}\n  () = "pnnx.Output" @o (%7) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
    )
    parses = (
        module + '  // expected-error@+1 {{anything}}\n  () = "pnnx.Output" @o (%0) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
    )
    right = (
        module
        + '  // expected-error@+1:26 {{use of undefined value %7}}\n  () = "pnnx.Output" @o (%7) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
    )
    assert "expected the error at 4:5" in verify_text(bad_col)[0].problem
    assert "no such thing" in verify_text(bad_msg)[0].problem
    assert "but the text parsed" in verify_text(parses)[0].problem
    assert verify_text(right)[0].problem is None
    # Cases keep the file's line numbers.
    split = right + "// -----\n" + right
    assert [r.problem for r in verify_text(split)] == [None, None]


def test_errors_read_like_mlirs() -> None:
    text = '{\n  (%0) = "pnnx.Input" @in () : () -> pnnx.tensor<1x4xf32>\n  () = "pnnx.Output" @o (%9) : (pnnx.tensor<1x4xf32>) -> ()\n}\n'
    with pytest.raises(ParseError) as info:
        ir.parse_ir(text, "m.kir")
    lines = str(info.value).split("\n")
    assert lines[0] == "m.kir:3:26: error: use of undefined value %9 (values are defined by an earlier operation)"
    assert lines[1] == '  () = "pnnx.Output" @o (%9) : (pnnx.tensor<1x4xf32>) -> ()'
    assert lines[2] == " " * 25 + "^^"


# -- values round-trip exactly ---------------------------------------------------------------------
def _one_op_graph(params: dict, *, operand: str = "0", shape=(1, 4), dtype="f32", name: str = "op") -> Graph:
    g = Graph()
    x = g.add_operand(operand)
    x.shape, x.dtype = shape, dtype
    g.add_operator("pnnx.Input", "in", [], [x])
    y = g.add_operand("y")
    op = g.add_operator("pnnx.Expression", name, [x], [y], **params)
    y.shape, y.dtype = shape, dtype
    g.add_operator("pnnx.Output", "out", [y], [])
    return g, op


def _round_trip(g: Graph) -> Graph:
    text = ir.print_graph(g)
    back = ir.parse_ir(text, check=False)
    assert back.equals(g), text
    assert ir.print_graph(back) == text
    return back


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        None,
        0,
        -1,
        2**31 - 1,
        -(2**31),
        2**31,
        -(2**63),
        2**63 - 1,
        0.1,
        1e-05,
        1.000001e-05,
        -0.0,
        1e300,
        5e-324,
        float("inf"),
        float("-inf"),
        1.0,
        3.0e20,
        "",
        "zeros",
        "add(@0,mul(@1,1.000000e-05))",
        'quote " backslash \\ tab \t newline \n',
        "ünïcødé ✓",
        "\u2028 line separator",
        "\x00\x1f",
        "[int(size(@0,0)),-1]",
        [],
        [1, 2],
        [0.5, -1.5],
        ["a", "b"],
        [True, None, 1, 1.0, "1"],
        [[1, [2, []]], [[]]],
    ],
    ids=repr,
)
def test_every_param_kind_round_trips_with_its_python_type(value) -> None:
    g, _ = _one_op_graph({"v": value})
    back = _round_trip(g)
    got = back.operator("op").params["v"]
    assert type(got) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, got) == math.copysign(1, value)  # -0.0 stays -0.0


def test_nan_round_trips() -> None:
    g, _ = _one_op_graph({"v": float("nan")})
    assert math.isnan(_round_trip(g).operator("op").params["v"])


def test_bools_and_ints_are_never_confused() -> None:
    text = ir.print_graph(_one_op_graph({"a": True, "b": 1, "c": 1.0, "d": "1", "e": None})[0])
    assert 'a:(Bool)true, b:(Int32)1, c:(Double)1.0, d:(String)"1", e:(None)none' in text


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_every_dtype(dtype: str) -> None:
    g, _ = _one_op_graph({}, dtype=dtype)
    assert f"pnnx.tensor<1x4x{dtype}>" in ir.print_graph(g)
    _round_trip(g)


@pytest.mark.parametrize(
    "shape, text",
    [
        ((), "pnnx.tensor<f32>"),
        ((1, None, 8), "pnnx.tensor<1x?x8xf32>"),
        ((1, "h", "w"), "pnnx.tensor<1x%hx%wxf32>"),
        (("batch", 3, "max_x"), 'pnnx.tensor<%batchx3x%"max_x"xf32>'),  # 'x' separates dims: quoted
        (("a b", 0), 'pnnx.tensor<%"a b"x0xf32>'),
    ],
)
def test_unknown_and_symbolic_dims(shape, text: str) -> None:
    g, _ = _one_op_graph({}, shape=shape)
    assert text in ir.print_graph(g)
    _round_trip(g)


def test_operand_without_annotation_is_pnnx_any() -> None:
    g, op = _one_op_graph({})
    op.outputs[0].shape = op.outputs[0].dtype = None
    assert "-> pnnx.any" in ir.print_graph(g)
    _round_trip(g)


@pytest.mark.parametrize("name", ["x.1", "a b", "名前", 'q"uote', "-", "@0", "%"])
def test_names_that_are_not_identifiers_are_quoted(name: str) -> None:
    g, op = _one_op_graph({name: 1}, operand=name, name=name)
    op.input_names[0] = name
    op.attrs[name] = Attribute("f32", (2,))
    _round_trip(g)


def test_weights_are_referenced_never_inlined() -> None:
    g, op = _one_op_graph({})
    import numpy as np

    op.attrs["weight"] = Attribute("f16", (3, 2), np.arange(6, dtype=np.float16).reshape(3, 2))
    text = ir.print_graph(g)
    assert "@weight:(pnnx.weight)<3x2xf16>" in text
    back = ir.parse_ir(text, check=False)
    assert back.operator("op").attrs["weight"].data is None and back.operator("op").attrs["weight"].shape == (3, 2)


def test_multi_output_and_tuple_construct_from_real_exports() -> None:
    chunk = read_param(OPS / "tensor_chunk" / "model.pnnx.param")
    text = ir.print_graph(chunk)
    assert any(line.lstrip().startswith("(%") and ", %" in line.split("=")[0] for line in text.splitlines())
    yolo = read_param(SAMPLES / "yolov5s_mini.pnnx.param")
    text = ir.print_graph(yolo)
    line = next(line for line in text.splitlines() if "prim::TupleConstruct" in line)
    assert line.endswith("-> pnnx.any")  # the tuple has no # annotation
    assert ir.parse_ir(text).equals(yolo)


def test_argument_names_and_repeated_operands() -> None:
    """An operand may feed several arguments (`$input=1 $other=1` in .param)."""
    g, op = _one_op_graph({"expr": "mul(@0,@1)"})
    x = op.inputs[0]
    op.inputs.append(x)
    x.consumers.append(op)
    op.input_names = ["input", "other"]
    text = ir.print_graph(g)
    assert "($input=%0, $other=%0)" in text
    back = _round_trip(g)
    assert back.operator("op").input_names == ["input", "other"]
    assert back.operands["0"].consumers == [back.operator("op")] * 2


# -- lexer, comments, nesting -----------------------------------------------------------------------
def test_tokens_have_spans() -> None:
    line = '(%1) = "nn.ReLU" @relu ($input=%0) {dim:(Int32)-1} : (pnnx.tensor<1x?xf32>) -> pnnx.any // done'
    toks = tokenize(line)
    kinds = [t.kind for t in toks]
    assert kinds[:4] == [Kind.LPAREN, Kind.VALUE, Kind.RPAREN, Kind.EQUAL]
    for t in toks:
        assert line[t.span.start : t.span.end] == t.text
    body = next(t for t in toks if t.kind is Kind.BODY)
    assert body.value == "1x?xf32"
    assert next(t for t in toks if t.kind is Kind.INT).text == "-1"
    assert toks[-1].text == "pnnx.any"  # the comment is skipped


def test_comments_anywhere() -> None:
    g = read_param(SAMPLES / "tiny_mlp.pnnx.param")
    text = ir.print_graph(g)
    commented = "// a model\n" + text.replace("\n  (", "\n  // the next operation\n  (").replace(
        " : ", " // no\n : ", 1
    )
    assert ir.parse_ir(commented).equals(g)


@pytest.mark.slow
def test_nesting_needs_no_recursion() -> None:
    """The parser and printer nest without recursion; by default max_param_depth (64) stops
    deeper arrays, which layers, the .param writer and the passes would recurse into."""
    depth = 100_000
    nested: list = []
    for _ in range(depth):
        nested = [nested]
    g, _ = _one_op_graph({"deep": nested})
    text = ir.print_graph(g)
    assert text.count("(Array)[") == depth + 1
    with limits.use(max_param_depth=depth + 1):
        back = ir.parse_ir(text, check=False)
    assert ir.print_graph(back) == text
    with pytest.raises(LimitError, match="arrays nest deeper than 64 levels.*max_param_depth = 64") as info:
        ir.parse_ir(text, check=False)
    assert info.value.line is not None and info.value.column > 64 * 8


@pytest.mark.slow
def test_unclosed_deep_nesting_is_a_located_error() -> None:
    g, _ = _one_op_graph({"deep": 1})
    text = ir.print_graph(g).replace("(Int32)1", "(Array)[" * 50_000 + "(Int32)1")
    with limits.use(max_param_depth=50_000):
        with pytest.raises(ParseError) as info:
            ir.parse_ir(text)
    assert "expected ',' or ']' in the array" in info.value.message


# -- dialects ------------------------------------------------------------------------------------------
class Char(str):
    """The seed's CharAttribute: one character."""


class TestParserDialect(Dialect):
    """The seed's example dialect `tp` with a `char` attribute printed `(tp.char)a`."""

    name = "tp"
    attribute_classes = (Char,)

    def op_names(self):
        return ["tp.echo"]

    def print_attribute(self, value):
        return f"(tp.char){value}"

    def parse_attribute(self, parser, kind, kind_span):
        if kind != "char":
            return super().parse_attribute(parser, kind, kind_span)
        tok = parser.parse_token(Kind.IDENT, "one character after (tp.char)")
        if len(tok.text) != 1:
            raise parser.error(tok.span, f"(tp.char) holds one character, got '{tok.text}'")
        return Char(tok.text)


SEED_OP = '{\n  (%0) = "tp.echo" @get_parameter () {parameter_name:(String)"conv2d_0.w_0", test:(tp.char)a} : () -> pnnx.tensor<64x3x7x7xf32>\n}\n'


def test_a_new_dialect_registers_its_printer_and_parser() -> None:
    registry = default_registry()
    registry.register(TestParserDialect())
    g = ir.parse_ir(SEED_OP, registry=registry)
    value = g.operators[0].params["test"]
    assert type(value) is Char and value == "a"
    assert ir.print_graph(g, registry) == SEED_OP
    with pytest.raises(ParseError, match="holds one character, got 'ab'"):
        ir.parse_ir(SEED_OP.replace("(tp.char)a", "(tp.char)ab"), registry=registry)
    with pytest.raises(ParseError, match="dialect 'tp' has no attribute kind 'byte'"):
        ir.parse_ir(SEED_OP.replace("(tp.char)a", "(tp.byte)a"), registry=registry)


def test_without_the_dialect_its_names_are_errors_that_say_which() -> None:
    with pytest.raises(ParseError, match="unknown dialect 'tp' in op 'tp.echo'"):
        ir.parse_ir(SEED_OP)
    with pytest.raises(ParseError, match="unknown dialect 'tp' in attribute kind 'tp.char'"):
        ir.parse_ir(SEED_OP, allow_unregistered=True)


def test_allow_unregistered_keeps_unknown_ops() -> None:
    text = SEED_OP.replace(", test:(tp.char)a", "")
    g = ir.parse_ir(text, allow_unregistered=True)
    assert g.operators[0].type == "tp.echo" and ir.print_graph(g) == text


def test_registry_refuses_a_second_dialect_of_the_same_name() -> None:
    registry = default_registry()
    registry.register(TestParserDialect())
    with pytest.raises(ValueError, match="already registered"):
        registry.register(TestParserDialect())


# -- every prefix of a real model's text is handled ---------------------------------------------------
@pytest.mark.slow
def test_every_truncation_is_a_located_error() -> None:
    text = ir.print_graph(read_param(SAMPLES / "tiny_mlp.pnnx.param"))
    for n in range(len(text.rstrip())):
        with pytest.raises(KuiperError) as info:
            ir.parse_ir(text[:n], "cut.kir")
        assert isinstance(info.value, ParseError), (n, info.value)
        assert info.value.line >= 1 and info.value.source_line is not None
