"""Broken IR text of our own models: truncations, stray tokens, deleted spans, duplicated or
swapped lines (redefinitions, undefined values), renamed values. Parsing either succeeds or
raises a located ParseError (a KuiperError) — never another exception, never a hang — and
what parses prints to text that parses to the same graph."""

from __future__ import annotations

import pytest
from conftest import SAMPLES

from kuiper_core import ir
from kuiper_core.errors import KuiperError, ParseError
from kuiper_core.pnnx import read_param

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TEXTS = [ir.print_graph(read_param(SAMPLES / f"{name}.pnnx.param")) for name in ("tiny_mlp", "digits_cnn", "expr_zoo")]
STRAY = [
    "%",
    "%99",
    "%0",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    ",",
    ":",
    "=",
    "->",
    '"',
    "@x",
    "$y=",
    "(Int32)",
    "(Array)[",
    "(Double)nan",
    "(Bool)",
    "pnnx.tensor<",
    "pnnx.any",
    "//",
    "\n",
    '"nn.Foo"',
    "é",
    "\t",
    "-",
    "/",
    "99999999999999999999999",
    "1e999",
    "\\",
    "x",
    "?",
    '%"',
    "(pnnx.weight)<2x2xf32>",
    "\u2028",
    "\x00",
]


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "delete", "insert", "dup_line", "swap_lines", "rename", "char"]))
        n = len(text)
        if n == 0:
            break
        i = draw(st.integers(0, n - 1))
        lines = text.split("\n")
        if kind == "truncate":
            text = text[:i]
        elif kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 40)) :]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(STRAY)) + text[i:]
        elif kind == "dup_line":
            j = draw(st.integers(0, len(lines) - 1))
            lines.insert(j, lines[draw(st.integers(0, len(lines) - 1))])
            text = "\n".join(lines)
        elif kind == "swap_lines":
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
        elif kind == "rename":
            k = draw(st.integers(0, 12))
            text = text.replace(f"%{k})", f"%{k + draw(st.integers(1, 5))})", 1)
        else:
            text = text[:i] + draw(st.characters(codec="utf-8")) + text[i + 1 :]
    return text


@pytest.mark.slow
@settings(max_examples=400, deadline=3000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(mutated())
def test_broken_text_gives_a_located_error_or_a_stable_graph(text: str) -> None:
    try:
        graph = ir.parse_ir(text, "fuzz.kir")
    except ParseError as e:
        assert e.line >= 1 and e.column >= 1 and e.source_line is not None
        assert str(e).startswith("fuzz.kir:")
        return
    except KuiperError:
        return
    printed = ir.print_graph(graph)
    assert ir.parse_ir(printed).equals(graph)
