"""The expression engine: tokens, parser, printer, reverse Polish, evaluation, errors.

Numbers here are worked out by hand or by plain NumPy on the spot; the comparison with
PyTorch is in test_expression_torch.py and with real pnnx exports in
test_expression_pnnx.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core import expression as ex
from kuiper_core.errors import InputError, KuiperError, ModelError, ParseError
from kuiper_core.graph import Graph
from kuiper_core.layers.registry import create_layer

# -- lexer ---------------------------------------------------------------------------------


def test_tokens_kinds_text_and_columns() -> None:
    toks = ex.tokens("add(@0,-1.000000e-05)")
    assert [(t.kind.value, t.text, t.start, t.end) for t in toks] == [
        ("name", "add", 0, 3),
        ("(", "(", 3, 4),
        ("operand", "@0", 4, 6),
        (",", ",", 6, 7),
        ("number", "-1.000000e-05", 7, 20),
        (")", ")", 20, 21),
    ]
    assert toks[2].column == 5


def test_tokens_names_with_dots_lists_and_literals() -> None:
    toks = ex.tokens("[torch.float(@0),True,None,inf,-inf]")
    assert [t.text for t in toks] == [
        "[",
        "torch.float",
        "(",
        "@0",
        ")",
        ",",
        "True",
        ",",
        "None",
        ",",
        "inf",
        ",",
        "-inf",
        "]",
    ]
    assert [t.kind.value for t in toks if t.text in ("inf", "-inf")] == ["number", "number"]


def test_tokens_skip_spaces_and_rebuild_the_text() -> None:
    text = "add( @0 , mul(@1,2) )"
    toks = ex.tokens(text)
    assert all(text[t.start : t.end] == t.text for t in toks)
    assert "".join(t.text for t in toks) == text.replace(" ", "")


# -- parser and printer -----------------------------------------------------------------------

REAL = [
    "add(div(mul(add(@0,@1),sub(@2,@3)),add(mul(@4,@4),1.0)),pow(@5,2))",
    "mul(exp(neg(abs(@0))),3.0)",
    "sub(sqrt(@0),neg(@1))",
    "mul(@0,rsqrt(add(mul(@0,@0),1.000000e-05)))",
    "add(floor(mul(@0,4.0)),square(@0))",
    "sub(maximum(@0,@1),minimum(@0,mul(@1,0.5)))",
    "[size(@0,0),mul(3,size(@0,2))]",
    "[int(size(@0,0)),-1]",
    "sub(add(or(and(@0,@1),xor(@0,5)),lshift(@0,2)),rshift(@1,1))",
    "torch.float(size(@0,1))",
    "size(@0)",
    "add(@0,-3)",
    "add(@0,True)",
    "[]",
]


@pytest.mark.parametrize("text", REAL)
def test_print_parse_round_trip(text: str) -> None:
    ast = ex.parse(text)
    assert ex.to_text(ast) == text
    assert ex.same_tree(ex.parse(ex.to_text(ast)), ast)


def test_ast_nodes_keep_their_spans() -> None:
    text = "mul(exp(neg(abs(@0))),3.0)"
    ast = ex.parse(text)
    assert isinstance(ast, ex.Call) and ast.name == "mul" and ast.span == (0, len(text))
    exp_node, const = ast.args
    assert ex.span_text(text, exp_node) == "exp(neg(abs(@0)))"
    assert isinstance(const, ex.Constant) and const.value == 3.0 and const.span == (22, 25)
    assert [type(n).__name__ for n in ex.walk(ast)] == ["Call", "Call", "Call", "Call", "OperandRef", "Constant"]


def test_constants_keep_type_and_text() -> None:
    ast = ex.parse("add(add(@0,1.000000e-05),add(-3,0.5))")
    consts = [n for n in ex.walk(ast) if isinstance(n, ex.Constant)]
    assert [(c.value, type(c.value), c.text) for c in consts] == [
        (1e-05, float, "1.000000e-05"),
        (-3, int, "-3"),
        (0.5, float, "0.5"),
    ]


def test_spaces_are_allowed_and_printing_drops_them() -> None:
    assert ex.to_text(ex.parse(" add ( @0 , 1 ) ")) == "add(@0,1)"


def test_seed_in_order_display() -> None:
    # Seed 000: ShowNodes prints the in-order traversal of the binary tree.
    assert ex.inorder(ex.parse("add(mul(@0,@1),@2)")) == ["NUM: 0", "MUL", "NUM: 1", "ADD", "NUM: 2"]
    assert ex.inorder(ex.parse("add(mul(@0,@1),mul(@2,@3))")) == [
        "NUM: 0",
        "MUL",
        "NUM: 1",
        "ADD",
        "NUM: 2",
        "MUL",
        "NUM: 3",
    ]
    # The seed's lab exercise: `div`, which KuiperInfer's tokenizer could not read.
    assert ex.inorder(ex.parse("add(@0,div(@1,@2))")) == ["NUM: 0", "ADD", "NUM: 1", "DIV", "NUM: 2"]
    a, b, c = (np.array([1.0, 2.0], np.float32), np.array([6.0, 8.0], np.float32), np.array([3.0, 4.0], np.float32))
    np.testing.assert_array_equal(ex.evaluate("add(@0,div(@1,@2))", [a, b, c]), [3.0, 4.0])


def test_reverse_polish_order() -> None:
    assert ex.rpn_text(ex.parse("add(mul(@0,@1),@2)")) == "@0 @1 mul @2 add"
    assert ex.rpn_text(ex.parse("add(@0,mul(@1,@2))")) == "@0 @1 @2 mul add"
    assert ex.rpn_text(ex.parse("[size(@0,0),-1]")) == "@0 0 size -1 []/2"
    nodes = ex.to_rpn(ex.parse("sub(sqrt(@0),neg(@1))"))
    assert [ex.label(n) for n in nodes] == ["@0", "sqrt", "@1", "neg", "sub"]


# -- errors ------------------------------------------------------------------------------------

# (text, column, length, words the message must contain)
MALFORMED = [
    ("", 1, 1, "empty expression"),
    ("   ", 1, 1, "empty expression"),
    ("add(@0,", 8, 1, "found the end"),
    ("add(@0,@1", 10, 1, "missing ')' to close 'add(' opened at column 4"),
    ("ad(@0,@1)", 1, 2, "unknown function 'ad'; did you mean 'add'?"),
    ("mul(sqr(@0),2)", 5, 3, "did you mean 'sqrt'?"),
    ("add(@0,maximun(@1,@2))", 8, 7, "did you mean 'maximum'?"),
    ("frobnicate(@0)", 1, 10, "unknown function 'frobnicate'"),
    ("add(@0)", 1, 7, "'add' takes 2 arguments, got 1"),
    ("neg(@0,@1)", 1, 10, "'neg' takes 1 argument, got 2"),
    ("size(@0,1,2)", 1, 12, "'size' takes 1 or 2 arguments, got 3"),
    ("add()", 1, 5, "'add' takes 2 arguments, got 0"),
    ("add(@0,@1))", 11, 1, "unexpected trailing text"),
    ("add(@0,@1) mul", 12, 3, "unexpected trailing text 'mul'"),
    ("@0@1", 3, 2, "unexpected trailing text"),
    ("add(@0 @1)", 8, 2, "expected ',' or ')'"),
    ("add @0", 5, 2, "expected '(' after 'add'"),
    ("add(@,1)", 5, 1, "'@' must be followed by an input number"),
    ("add(@0,1x)", 8, 2, "malformed number '1x'"),
    ("add(@0,$)", 8, 1, "unexpected character '$'"),
    ("[@0,1", 6, 1, "missing ']' to close '['"),
    ("add(@0,1]", 9, 1, "expected ',' or ')'"),
    (")", 1, 1, "found ')'"),
    ("mul(@0,1.000000e+00+2.000000e+00j)", 20, 1, "complex constants"),
    ("add(@0,trunc)", 13, 1, "expected '(' after 'trunc', found ')'"),
]


@pytest.mark.parametrize("text,column,length,words", MALFORMED, ids=[m[0] or "<empty>" for m in MALFORMED])
def test_malformed_expressions_point_at_the_culprit(text: str, column: int, length: int, words: str) -> None:
    with pytest.raises(ParseError) as info:
        ex.parse(text)
    err = info.value
    assert isinstance(err, KuiperError)
    assert words in err.message
    assert (err.column, err.length) == (column, length)
    # The rendering shows the text and a caret under the culprit.
    lines = str(err).splitlines()
    assert lines[0].startswith(f"<input>:1:{column}: ")
    if text.strip():
        assert lines[1] == text
        assert lines[2] == " " * (column - 1) + "^" * length


def test_operand_beyond_the_inputs_names_index_and_count() -> None:
    x = np.ones(3, np.float32)
    with pytest.raises(ParseError) as info:
        ex.evaluate("add(@0,mul(@1,@3))", [x, x])
    assert "@3" in info.value.message and "only 2 input(s)" in info.value.message
    assert info.value.column == 15
    with pytest.raises(KuiperError, match="no inputs"):
        ex.evaluate(ex.parse("@0"), [])


def test_type_errors_are_input_errors() -> None:
    with pytest.raises(InputError, match="bitwise 'and' needs integer or bool tensors, got float32"):
        ex.evaluate("and(@0,@1)", [np.ones(2, np.float32), np.ones(2, np.float32)])
    with pytest.raises(InputError, match="out of range"):
        ex.evaluate("size(@0,3)", [np.ones((2, 3), np.float32)])
    with pytest.raises(InputError, match="int\\(\\) needs one value"):
        ex.evaluate("int(@0)", [np.ones(3, np.float32)])
    with pytest.raises(InputError, match="needs numbers or tensors"):
        ex.evaluate("add(@0,None)", [np.ones(3, np.float32)])


# -- evaluation -------------------------------------------------------------------------------


def test_float32_stays_float32_with_python_constants() -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    y = ex.evaluate("add(mul(@0,0.1),div(1,3.0))", [x])
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x * np.float32(0.1) + np.float32(1 / 3.0))


def test_broadcasting_shapes() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    s = rng.standard_normal((1, 4, 1, 1)).astype(np.float32)
    t = rng.standard_normal((1, 1, 8, 8)).astype(np.float32)
    y = ex.evaluate("sub(add(mul(@0,@1),@2),0.25)", [a, s, t])
    assert y.shape == (1, 4, 8, 8) and y.dtype == np.float32
    np.testing.assert_allclose(y, a * s + t - np.float32(0.25), rtol=1e-6)
    # broadcasting that grows the result beyond every input
    y = ex.evaluate("mul(@0,@1)", [s, t])
    assert y.shape == (1, 4, 8, 8)


def test_semantics_follow_pytorch() -> None:
    x = np.array([-7.0, -2.5, -0.5, 0.5, 1.5, 2.5, 7.0], np.float32)
    np.testing.assert_array_equal(ex.evaluate("remainder(@0,3)", [x]), [2.0, 0.5, 2.5, 0.5, 1.5, 2.5, 1.0])
    np.testing.assert_array_equal(ex.evaluate("fmod(@0,3)", [x]), [-1.0, -2.5, -0.5, 0.5, 1.5, 2.5, 1.0])
    np.testing.assert_array_equal(ex.evaluate("floor_divide(@0,2)", [x]), [-4.0, -2.0, -1.0, 0.0, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(ex.evaluate("round(@0)", [x]), [-7.0, -2.0, -0.0, 0.0, 2.0, 2.0, 7.0])
    nan = np.array([np.nan, -3.0, 0.0, 2.0], np.float32)
    np.testing.assert_array_equal(ex.evaluate("sign(@0)", [nan]), [0.0, -1.0, 0.0, 1.0])
    y = ex.evaluate("max(@0,1.0)", [nan])
    assert np.isnan(y[0]) and list(y[1:]) == [1.0, 1.0, 2.0]
    i = np.array([-7, 7], np.int64)
    np.testing.assert_array_equal(ex.evaluate("floor_divide(@0,2)", [i]), [-4, 3])
    np.testing.assert_array_equal(ex.evaluate("remainder(@0,-3)", [i]), [-1, -2])


def test_integer_promotion_rules() -> None:
    i = np.arange(1, 5, dtype=np.int64)
    assert ex.evaluate("mul(@0,0.5)", [i]).dtype == np.float32  # torch: int tensor * 0.5 -> float32
    assert ex.evaluate("div(@0,@0)", [i]).dtype == np.float32  # true division of ints
    assert ex.evaluate("sqrt(@0)", [i]).dtype == np.float32
    assert ex.evaluate("add(@0,2)", [i]).dtype == np.int64
    assert ex.evaluate("floor(@0)", [i]).dtype == np.int64
    assert ex.evaluate("add(@0,@1)", [i.astype(np.int32), np.ones(4, np.float16)]).dtype == np.float16
    assert ex.evaluate("add(@0,@1)", [i.astype(np.float32), np.ones(4, np.float64)]).dtype == np.float64
    assert ex.evaluate("add(@0,1)", [i > 2]).dtype == np.int64
    assert ex.evaluate("and(@0,@1)", [i > 1, i < 4]).dtype == np.bool_
    np.testing.assert_array_equal(ex.evaluate("erf(@0)", [np.array([0, 1], np.int64)]), np.float32([0.0, 0.8427008]))


def test_sizes_casts_and_lists() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    assert ex.evaluate("size(@0,1)", [x]) == 3
    assert ex.evaluate("size(@0,-1)", [x]) == 4
    assert ex.evaluate("size(@0)", [x]) == (2, 3, 4)
    assert ex.evaluate("div(size(@0,2),8)", [x]) == 0.5  # Python arithmetic on sizes
    assert ex.evaluate("floor_divide(size(@0,2),3)", [x]) == 1
    assert ex.evaluate("[int(size(@0,0)),-1]", [x]) == [2, -1]
    assert ex.evaluate("[size(@0,0),mul(3,size(@0,2))]", [x]) == [2, 12]
    assert ex.evaluate("int(div(size(@0,2),3))", [x]) == 1
    assert ex.evaluate("torch.float(size(@0,1))", [x]) == 3.0
    y = ex.evaluate("mul(@0,size(@0,2))", [np.ones((2, 3, 4), np.float32)])
    assert y.dtype == np.float32 and float(y.max()) == 4.0
    c = ex.evaluate("torch.long(@0)", [np.array([1.7, -1.7], np.float32)])
    assert c.dtype == np.int64 and list(c) == [1, -1]
    assert ex.evaluate("torch.bool(@0)", [np.array([0.0, 2.0], np.float32)]).tolist() == [False, True]
    assert ex.evaluate("int(@0)", [np.array([3.9], np.float32)]) == 3


def test_constant_only_subtrees_are_python_arithmetic() -> None:
    x = np.ones(2, np.float32)
    y = ex.evaluate("mul(@0,add(neg(2),div(1,4)))", [x])
    assert y.dtype == np.float32 and list(y) == [-1.75, -1.75]
    plan = ex.compile_plan(ex.parse("mul(@0,add(neg(2),div(1,4)))"), [np.float32])
    assert len(plan.steps) == 1  # the constants were folded at build time


def test_compiled_plan_reuses_buffers_and_writes_into_out() -> None:
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    ast = ex.parse("mul(exp(neg(abs(@0))),3.0)")
    plan = ex.compile_plan(ast, [np.float32])
    assert [s.node.name for s in plan.steps] == ["abs", "neg", "exp", "mul"]
    assert [s.inplace for s in plan.steps] == [None, 0, 0, 0]
    out = np.empty((4, 4), np.float32)
    y = plan.run([x], out=out)
    assert y is out
    np.testing.assert_allclose(out, np.exp(-np.abs(x)) * 3.0, rtol=1e-6)
    # A buffer of the wrong shape is not used.
    y2 = plan.run([x], out=np.empty((2, 8), np.float32))
    np.testing.assert_array_equal(y2, out)
    # The input is never written.
    np.testing.assert_array_equal(x, np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4))


def test_inplace_is_skipped_when_the_temporary_would_have_to_grow() -> None:
    s = np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1)
    t = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    y = ex.evaluate("add(neg(@0),@1)", [s, t])  # neg(@0) is (1,4,1,1), the sum (1,4,2,3)
    np.testing.assert_array_equal(y, -s + t)


def test_traced_evaluation_records_every_push_and_apply() -> None:
    a, b, c = np.float32([1, 2]), np.float32([3, 4]), np.float32([10, 20])
    tr = ex.evaluate_traced("add(mul(@0,@1),@2)", [a, b, c])
    assert [(s.kind, s.token) for s in tr.steps] == [
        ("push", "@0"),
        ("push", "@1"),
        ("apply", "mul"),
        ("push", "@2"),
        ("apply", "add"),
    ]
    mul = tr.steps[2]
    assert [list(v) for v in mul.args] == [[1, 2], [3, 4]]
    assert list(mul.result) == [3, 8]
    assert [e.label for e in tr.steps[3].stack] == ["mul(@0,@1)", "@2"]
    assert [e.label for e in tr.steps[4].stack] == ["add(mul(@0,@1),@2)"]
    assert list(tr.result) == [13, 28]
    # Earlier snapshots are not changed by later steps (no buffer reuse when tracing).
    assert list(tr.steps[2].stack[0].value) == [3, 8]
    assert "pop 2, apply mul" in mul.describe()
    # The traced and the compiled path agree.
    np.testing.assert_array_equal(tr.result, ex.evaluate("add(mul(@0,@1),@2)", [a, b, c]))


def test_trace_shows_constants_without_folding() -> None:
    tr = ex.trace("mul(@0,add(1,2))", [np.float32([1, 2])])
    assert [s.token for s in tr.steps] == ["@0", "1", "2", "add", "mul"]
    assert tr.steps[3].result == 3


# -- deep nesting ---------------------------------------------------------------------------------

DEEP = 100_000


@pytest.mark.slow
def test_100000_deep_nesting_parses_prints_and_evaluates() -> None:
    text = "neg(" * DEEP + "@0" + ")" * DEEP
    ast = ex.parse(text)
    assert ex.depth(ast) == DEEP + 1
    assert ex.to_text(ast) == text
    assert len(ex.to_rpn(ast)) == DEEP + 1
    np.testing.assert_array_equal(ex.evaluate(ast, [np.float32([1, -2])]), [1, -2])  # even count
    wide = "add(" * DEEP + "@0" + ",1)" * DEEP
    np.testing.assert_array_equal(ex.evaluate(wide, [np.float32([0.0])]), [DEEP])
    deep_right = "add(@0," * DEEP + "@0" + ")" * DEEP
    tr = ex.evaluate_traced(deep_right, [np.float32([1.0])])
    assert max(s.depth for s in tr.steps) == DEEP + 1
    np.testing.assert_array_equal(tr.result, [DEEP + 1])


@pytest.mark.slow
def test_100000_deep_malformed_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="missing '\\)'"):
        ex.parse("neg(" * DEEP + "@0")
    with pytest.raises(ParseError):
        ex.parse("[" * DEEP)


# -- the pnnx.Expression layer ---------------------------------------------------------------------


def _expression_op(expr: str, shapes: list[tuple[int, ...]], out_shape: tuple[int, ...], dtype: str = "f32"):
    g = Graph()
    ins = [g.add_operand(str(i)) for i in range(len(shapes))]
    for operand, shape in zip(ins, shapes):
        operand.shape, operand.dtype = shape, dtype
    out = g.add_operand("out")
    out.shape, out.dtype = out_shape, "f32"
    op = g.add_operator("pnnx.Expression", "pnnx_expr_0", ins, [out], expr=expr)
    op.line = 7
    return op


def test_layer_compiles_once_and_writes_the_output_buffer() -> None:
    op = _expression_op("add(mul(@0,2),@1)", [(1, 4, 5, 5), (1, 4, 1, 1)], (1, 4, 5, 5))
    layer = create_layer(op)
    x = np.random.default_rng(1).standard_normal((1, 4, 5, 5)).astype(np.float32)
    b = np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1)
    buf = np.empty((1, 4, 5, 5), np.float32)
    (y,) = layer.forward([x, b], [buf])
    assert y is buf
    np.testing.assert_array_equal(y, x * 2 + b)
    (y2,) = layer.forward([x[:1], b], [None])  # no buffer: a fresh array
    np.testing.assert_array_equal(y2, y)


def test_layer_never_returns_its_input() -> None:
    op = _expression_op("@0", [(3,)], (3,))
    x = np.ones(3, np.float32)
    (y,) = create_layer(op).forward([x], [None])
    assert y is not x and np.array_equal(y, x)


def test_layer_bad_expr_names_the_operator_with_a_caret() -> None:
    op = _expression_op("add(@0,sqr(@1))", [(3,), (3,)], (3,))
    with pytest.raises(ModelError) as info:
        create_layer(op)
    msg = str(info.value)
    assert "pnnx_expr_0" in msg and "line 7" in msg and "did you mean 'sqrt'" in msg
    assert "add(@0,sqr(@1))\n       ^^^" in msg
    assert isinstance(info.value.__cause__, ParseError) and info.value.__cause__.column == 8


def test_layer_rejects_operands_beyond_its_inputs() -> None:
    with pytest.raises(ModelError, match="uses @2 but the operator has 2 input"):
        create_layer(_expression_op("add(@0,@2)", [(3,), (3,)], (3,)))


def test_repeated_commas_read_as_one_like_pnnx() -> None:
    """pnnx writes `add(@0,,mul(@1,2.0))` for torch.add(x, y, alpha=2.0) at optlevel 1; its
    own reader skips empty tokens. A comma with nothing before it is still an error."""
    assert ex.to_text(ex.parse("sub(1.0,add(@0,,mul(@1,2.0)))")) == "sub(1.0,add(@0,mul(@1,2.0)))"
    with pytest.raises(ParseError, match="found ','"):
        ex.parse("add(,@0)")


def test_layer_list_expression_gives_a_list_of_ints() -> None:
    """An output without a `#` annotation is a value (a shape here): a Python list, like
    the ints TorchScript computes, not a tensor."""
    op = _expression_op("[size(@0,0),mul(3,size(@0,2))]", [(2, 3, 4)], (2,))
    op.outputs[0].shape, op.outputs[0].dtype = None, None
    (y,) = create_layer(op).forward([np.zeros((5, 3, 6), np.float32)], [None])
    assert y == [5, 18] and all(type(v) is int for v in y)


def test_workspace_reuse_never_leaks_into_returned_results() -> None:
    text = "add(div(mul(add(@0,@1),sub(@2,@3)),add(mul(@4,@4),1.0)),pow(@5,2))"
    plan = ex.compile_plan(ex.parse(text), [np.float32] * 6)
    assert any(s.buffer is not None for s in plan.steps) and plan.steps[-1].buffer is None
    rng = np.random.default_rng(5)
    xs1 = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(6)]
    xs2 = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(6)]
    y1 = plan.run(xs1)
    keep = y1.copy()
    y2 = plan.run(xs2)
    np.testing.assert_array_equal(y1, keep)  # the second run did not write into the first result
    for xs, y in ((xs1, y1), (xs2, y2)):
        a, b, c, d, e, f = xs
        np.testing.assert_allclose(y, (a + b) * (c - d) / (e * e + 1) + f * f, rtol=1e-6)
    # Another batch size reallocates the workspace instead of failing.
    xs3 = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(6)]
    assert plan.run(xs3).shape == (5, 3)
    # List results never hold workspace buffers.
    lp = ex.compile_plan(ex.parse("[mul(add(@0,1),2),size(@0,0)]"), [np.float32])
    first = lp.run([np.zeros(2, np.float32)])
    lp.run([np.ones(2, np.float32)])
    assert first[0].tolist() == [2.0, 2.0] and first[1] == 2


def test_float_functions_of_python_ints_are_floats() -> None:
    """pnnx writes `x / x.size(2)` as mul(…,reciprocal(size(@1,2))): on the int 8 that is
    0.125 (Python's float), never NumPy's integer reciprocal 0."""
    x = np.zeros((1, 2, 8), np.float32)
    assert ex.evaluate(ex.parse("reciprocal(size(@0,2))"), [x]) == 0.125
    assert ex.evaluate(ex.parse("sqrt(9)"), []) == 3.0 and isinstance(ex.evaluate(ex.parse("sqrt(9)"), []), float)
    assert ex.evaluate(ex.parse("add(size(@0,2),1)"), [x]) == 9


@pytest.mark.parametrize(
    "text", ["add(@0,@1)", "mul(@1,@0)", "neg(@0)", "add(@0,2)", "mul(add(@0,@1),@1)", "sub(@1,@0)"]
)
def test_bound_plans_match_run(text: str) -> None:
    """Plan.bind (one kernel on the inputs called directly, or the general loop) gives what
    Plan.run gives, into the caller's buffer, call after call."""
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((1, 4)).astype(np.float32)]
    plan = ex.compile_plan(ex.parse(text), [np.float32, np.float32])
    expected = plan.run(xs)
    out = np.full(expected.shape, np.nan, expected.dtype)
    f = plan.bind(xs, out)
    if f is None:
        pytest.skip(f"{text}: not bindable")
    for _ in range(2):
        f(xs, [out])
        np.testing.assert_array_equal(out, expected)
