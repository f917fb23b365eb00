"""Property tests: random expression trees over the whole function set.

Trees are built here as plain tuples, printed to text by this file's own printer, and
evaluated by this file's own reference (a direct recursive NumPy evaluator written from
PyTorch's documented semantics, with `math.erf` for erf). The engine must read the text
back to the same text and compute the same values. Runs without torch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kuiper_core import expression as ex  # noqa: E402

F32 = np.float32

# -- the reference: name -> function on float32 arrays ----------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])

REF_UNARY: dict[str, Any] = {
    "abs": np.abs,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "ceil": np.ceil,
    "cos": np.cos,
    "cosh": np.cosh,
    "erf": lambda x: _erf(x.astype(np.float64)).astype(x.dtype),
    "exp": np.exp,
    "expm1": np.expm1,
    "floor": np.floor,
    "log": np.log,
    "log10": np.log10,
    "log1p": np.log1p,
    "neg": lambda x: -x,
    "reciprocal": lambda x: F32(1) / x,
    "round": np.round,  # half to even
    "rsqrt": lambda x: F32(1) / np.sqrt(x),
    "sign": lambda x: np.where(np.isnan(x), F32(0), np.sign(x)).astype(x.dtype),
    "sin": np.sin,
    "sinh": np.sinh,
    "sqrt": np.sqrt,
    "square": lambda x: x * x,
    "tan": np.tan,
    "tanh": np.tanh,
    "trunc": np.trunc,
}


def _pow(a: Any, b: Any) -> Any:
    # torch's pow kernels compute a scalar exponent 2 as a*a and 0.5 as sqrt(a)
    if np.ndim(b) == 0 and np.ndim(a) > 0 and float(b) == 2.0:
        return a * a
    if np.ndim(b) == 0 and np.ndim(a) > 0 and float(b) == 0.5:
        return np.sqrt(a)
    return np.power(a, b)


REF_BINARY: dict[str, Any] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "fmod": np.fmod,
    "pow": lambda a, b: _pow(a, b),
    "atan2": np.arctan2,
    "max": np.maximum,
    "maximum": np.maximum,
    "min": np.minimum,
    "minimum": np.minimum,
    "logaddexp": np.logaddexp,
}
REF_INT_BINARY: dict[str, Any] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "fmod": np.fmod,
    "max": np.maximum,
    "minimum": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
REF_INT_UNARY: dict[str, Any] = {"neg": lambda x: -x, "abs": np.abs, "square": lambda x: x * x, "sign": np.sign}

# The test must cover the engine's whole float function set.
assert set(REF_UNARY) == set(ex.UNARY_NAMES)
assert set(REF_BINARY) | {"and", "or", "xor", "lshift", "rshift"} == set(ex.BINARY_NAMES)

# Trees: ("@", i) | ("const", value, text) | (name, child, ...)
Tree = tuple


def show(tree: Tree) -> str:
    if tree[0] == "@":
        return f"@{tree[1]}"
    if tree[0] == "const":
        return tree[2]
    return f"{tree[0]}(" + ",".join(show(c) for c in tree[1:]) + ")"


def reference(tree: Tree, inputs: list[np.ndarray], int_mode: bool = False) -> np.ndarray:
    """Float mode: float32 inputs; a constant becomes a float32 scalar (torch's weak scalar)."""
    if tree[0] == "@":
        return inputs[tree[1]]
    if tree[0] == "const":
        return np.int64(tree[1]) if int_mode else F32(tree[1])
    args = [reference(c, inputs, int_mode) for c in tree[1:]]
    if int_mode:
        if tree[0] in ("lshift", "rshift"):
            f = np.left_shift if tree[0] == "lshift" else np.right_shift
            return f(args[0], args[1])
        table = REF_INT_UNARY if len(args) == 1 else REF_INT_BINARY
    else:
        table = REF_UNARY if len(args) == 1 else REF_BINARY
    return table[tree[0]](*args)


# -- strategies -----------------------------------------------------------------------------------

FLOATS = [0.5, -1.5, 2.0, 3.0, 0.25, 1e-05, -0.1, 10.0]


@st.composite
def float_constant(draw: Any) -> Tree:
    if draw(st.booleans()):
        v = draw(st.integers(-5, 5))
        return ("const", v, str(v))
    v = draw(st.sampled_from(FLOATS))
    style = draw(st.sampled_from(["repr", "e"]))
    return ("const", v, repr(v) if style == "repr" else f"{v:e}")


def float_trees(n_inputs: int) -> Any:
    leaf = st.integers(0, n_inputs - 1).map(lambda i: ("@", i))

    def extend(children: Any) -> Any:
        unary = st.tuples(st.sampled_from(sorted(REF_UNARY)), children)
        binary = st.tuples(st.sampled_from(sorted(REF_BINARY)), children, children)
        with_const_right = st.tuples(st.sampled_from(sorted(REF_BINARY)), children, float_constant())
        with_const_left = st.tuples(st.sampled_from(sorted(REF_BINARY)), float_constant(), children)
        return st.one_of(unary, binary, with_const_right, with_const_left)

    return st.recursive(leaf, extend, max_leaves=16)


def int_trees(n_inputs: int) -> Any:
    leaf = st.integers(0, n_inputs - 1).map(lambda i: ("@", i))
    small = st.integers(-9, 9).map(lambda v: ("const", v, str(v)))
    divisor = st.integers(1, 7).flatmap(lambda v: st.sampled_from([v, -v])).map(lambda v: ("const", v, str(v)))
    shift = st.integers(0, 4).map(lambda v: ("const", v, str(v)))

    def extend(children: Any) -> Any:
        safe = ["add", "sub", "mul", "max", "minimum", "and", "or", "xor"]
        return st.one_of(
            st.tuples(st.sampled_from(sorted(REF_INT_UNARY)), children),
            st.tuples(st.sampled_from(safe), children, children),
            st.tuples(st.sampled_from(safe), children, small),
            st.tuples(st.sampled_from(["floor_divide", "remainder", "fmod"]), children, divisor),
            st.tuples(st.sampled_from(["lshift", "rshift"]), children, shift),
        )

    return st.recursive(leaf, extend, max_leaves=8)


SHAPES = [(1, 4, 8, 8), (1, 4, 1, 1), (1, 1, 8, 8)]


def _float_inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * 2).astype(np.float32) for s in SHAPES]


def _assert_same(y: Any, ref: np.ndarray, text: str) -> None:
    assert isinstance(y, np.ndarray), text
    assert y.dtype == ref.dtype, f"{text}: dtype {y.dtype} != {ref.dtype}"
    assert y.shape == ref.shape, f"{text}: shape {y.shape} != {ref.shape}"
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-6, equal_nan=True, err_msg=text)


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(tree=float_trees(3))
def test_random_trees_round_trip_through_print_and_parse(tree: Tree) -> None:
    text = show(tree)
    ast = ex.parse(text)
    assert ex.to_text(ast) == text
    assert "".join(t.text for t in ex.tokens(text)) == text
    assert ex.same_tree(ex.parse(ex.to_text(ast)), ast)
    # Reverse Polish order has one entry per node, calls after their arguments.
    assert len(ex.to_rpn(ast)) == sum(1 for _ in ex.walk(ast))


@pytest.mark.slow
@SETTINGS
@given(tree=float_trees(3), seed=st.integers(0, 2**31 - 1))
def test_random_float_trees_match_the_reference_with_broadcasting(tree: Tree, seed: int) -> None:
    text = show(tree)
    inputs = _float_inputs(seed)
    with np.errstate(all="ignore"):
        ref = np.asarray(reference(tree, inputs))
    # Inputs that a tree does not use still count for @N; the result broadcasts over the used ones.
    _assert_same(ex.evaluate(text, inputs), ref, text)
    # The compiled plan writing into a caller's buffer and the traced stack machine agree.
    plan = ex.compile_plan(ex.parse(text), [np.float32] * 3)
    buf = np.empty(ref.shape, np.float32)
    _assert_same(plan.run(inputs, out=buf), ref, text)
    _assert_same(np.asarray(ex.evaluate_traced(text, inputs).result), ref, text)


@pytest.mark.slow
@SETTINGS
@given(tree=int_trees(2), seed=st.integers(0, 2**31 - 1))
def test_random_integer_trees_match_the_reference(tree: Tree, seed: int) -> None:
    text = show(tree)
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-20, 20, (2, 8)), rng.integers(-20, 20, (2, 1))]
    with np.errstate(all="ignore"):
        ref = np.asarray(reference(tree, inputs, int_mode=True))
    _assert_same(ex.evaluate(text, inputs), ref, text)
