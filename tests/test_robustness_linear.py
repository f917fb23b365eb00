"""Issue 27, linear parsers: work that grew with the square of an input's size.

Each test times a size n and 4n (the best of two runs each): linear code takes ~4x as long,
the quadratic versions took ~16x (and seconds to minutes in absolute terms, noted per test).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kuiper_core import ir
from kuiper_core.errors import LimitError
from kuiper_core.explore import walkthrough as W
from kuiper_core.pnnx import parse_param


def _seconds(work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t)
    return best


def _grows_linearly(make: Callable[[int], Callable[[], object]], n: int, absolute: float) -> None:
    small, big = _seconds(make(n)), _seconds(make(4 * n))
    assert big < absolute, f"{4 * n}: {big:.2f} s"
    assert big < 8 * small + 1.0, f"n={n}: {small:.3f} s, 4n: {big:.3f} s (quadratic gives ~16x)"


def _param_line(n: int) -> str:
    """One operator with n inputs, each named by `$` and annotated by `#` (a ~1 MB line at n=40,000)."""
    big = (
        f"torch.cat cat {n} 1 {' '.join('x' for _ in range(n))} y dim=0 "
        + " ".join(f"$a{k}=x" for k in range(n))
        + " "
        + " ".join("#x=(1)f32" for _ in range(n))
        + f" #y=({n})f32"
    )
    return f"7767517\n3 3\npnnx.Input i 0 1 x #x=(1)f32\n{big}\npnnx.Output o 1 0 y\n"


@pytest.mark.slow
def test_param_annotations_are_looked_up_by_name() -> None:
    """Before: every `$`/`#` scanned the line's operands: a 0.97 MB line took 88 s to inspect
    (10,000 operands: 36 s). After: 40,000 operands in about a second."""
    texts = {n: _param_line(n) for n in (10_000, 40_000)}
    _grows_linearly(lambda n: lambda: parse_param(texts[n]), 10_000, 20.0)
    g = parse_param(texts[40_000])
    cat = g.operators[1]
    assert len(cat.inputs) == 40_000 and cat.input_names[:2] == ["a0", "a1"] and cat.input_names[-1] == "a39999"


def _kir_results(n: int) -> str:
    results = ", ".join(f"%r{i}" for i in range(n))
    types = ", ".join("pnnx.tensor<1xf32>" for _ in range(n))
    return (
        '{\n  (%x) = "pnnx.Input" @in0 () : () -> pnnx.tensor<4xf32>\n'
        f'  ({results}) = "torch.chunk" @c (%x) {{chunks:(Int32){n}, dim:(Int32)0}} : '
        f"(pnnx.tensor<4xf32>) -> ({types})\n}}\n"
    )


@pytest.mark.slow
def test_kir_duplicate_results_are_checked_by_set() -> None:
    """Before: each result was compared with every earlier one: 16,000 results took 5.7 s."""
    texts = {n: _kir_results(n) for n in (8_000, 32_000)}
    _grows_linearly(lambda n: lambda: ir.parse_module(texts[n], check=False), 8_000, 30.0)
    with pytest.raises(Exception, match="value %r1 is already defined at 3:9"):
        ir.parse_module(_kir_results(4).replace("%r3)", "%r1)"), check=False)


@pytest.mark.parametrize("size", [20_000, 80_000])
def test_typed_graph_counts_nodes_while_reading(size: int) -> None:
    """Before: `a1..aN -> b1..bN` built N² edges with a linear search each before the 60-node
    check: a 20 KB paste cost 34 s of server CPU, 80 KB ~35 minutes. After: refused at node 61
    (or for its length), in milliseconds, with the place."""
    n = size // 12
    text = ", ".join(f"a{i}" for i in range(n)) + " -> " + ", ".join(f"b{i}" for i in range(n))
    text = text[:size]
    t = time.perf_counter()
    with pytest.raises(LimitError) as info:
        W.parse_edges(text)
    assert time.perf_counter() - t < 1.0
    e = info.value
    assert e.limit in ("typed graph nodes", "typed graph characters"), e
    if e.limit == "typed graph nodes":
        assert e.line == 1 and text[e.column - 1 :].startswith("a60"), e.render()


def test_typed_graph_with_every_edge_is_fast() -> None:
    """60 nodes, every edge (a dense paste within the limits): read at once, edges kept once."""
    names = [f"n{i}" for i in range(60)]
    text = "\n".join(f"{', '.join(names)} -> {', '.join(names)}" for _ in range(40))
    t = time.perf_counter()
    g = W.parse_edges(text)
    assert time.perf_counter() - t < 2.0
    assert len(g) == 60 and all(g[n] == names for n in names)
