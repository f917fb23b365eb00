"""kuiper_core.explore.dot: the graph as DOT for the browser renderer."""

from __future__ import annotations

import re
import time

import pytest
from conftest import SAMPLES

from kuiper_core.explore.categories import CATEGORY_COLORS, category
from kuiper_core.explore.dot import (
    HIGHLIGHT_CLASS,
    HIGHLIGHT_COLOR,
    LEGEND_ID,
    graph_dot,
    graph_view,
    neighbourhood,
    quote,
)
from kuiper_core.graph import Graph
from kuiper_core.pnnx import read_param

# -- a tiny DOT reader, enough to check what the renderer will see ---------------------------
_TOKEN = re.compile(
    r'\s+|(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->)|(?P<punct>[{}\[\];=,])|(?P<id>[A-Za-z_][A-Za-z0-9_.]*|-?[0-9.]+)|(?P<html><)'
)


def tokens(dot: str) -> list[str]:
    """Tokenise DOT; HTML labels (<...> balanced) become one token. Fails on anything else."""
    out, i = [], 0
    while i < len(dot):
        m = _TOKEN.match(dot, i)
        assert m is not None, f"untokenisable DOT at {i}: {dot[i:i + 40]!r}"
        if m.group("html"):
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(dot[j], 0)
                j += 1
                if depth == 0:
                    break
            out.append(dot[i:j])
            i = j
            continue
        if m.lastgroup:
            out.append(m.group(m.lastgroup))
        i = m.end()
    return out


def unquote(tok: str) -> str:
    assert tok.startswith('"'), tok
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), tok[1:-1])


def parse(dot: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """(nodes {id: attrs}, edges [(src, dst, attrs)]) of the statements at any depth."""
    toks = tokens(dot)
    assert toks[0] == "digraph" and toks.count("{") == toks.count("}")
    nodes: dict[str, dict[str, str]] = {}
    edges = []

    def attrs(k: int) -> tuple[dict[str, str], int]:
        d: dict[str, str] = {}
        if k < len(toks) and toks[k] == "[":
            k += 1
            while toks[k] != "]":
                key, eq, val = toks[k], toks[k + 1], toks[k + 2]
                assert eq == "=", toks[k : k + 3]
                d[key] = unquote(val) if val.startswith('"') else val
                k += 3
                if toks[k] == ",":
                    k += 1
            k += 1
        return d, k

    k = 0
    while k < len(toks):
        t = toks[k]
        if t.startswith('"'):
            if toks[k + 1] == "->":
                (a, b), (d, k) = (unquote(t), unquote(toks[k + 2])), attrs(k + 3)
                edges.append((a, b, d))
            else:
                d, k = attrs(k + 1)
                nodes[unquote(t)] = d
        elif t == "[":  # attributes of a graph/node/edge default statement
            _, k = attrs(k)
        else:
            k += 1
    for a, b, _ in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} to an undeclared node"
    return nodes, edges


def load(name: str) -> Graph:
    return read_param(SAMPLES / f"{name}.pnnx.param")


# -- categories -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op_type, expected",
    [
        ("nn.Conv2d", "conv"), ("nn.ConvTranspose2d", "conv"), ("F.conv2d", "conv"),
        ("nn.BatchNorm2d", "norm"), ("nn.LayerNorm", "norm"), ("F.group_norm", "norm"),
        ("nn.ReLU", "activation"), ("F.softmax", "activation"), ("nn.Hardswish", "activation"),
        ("nn.MaxPool2d", "pool"), ("nn.AdaptiveAvgPool2d", "pool"),
        ("torch.flatten", "shape"), ("Tensor.view", "shape"), ("torch.cat", "shape"), ("nn.Upsample", "shape"),
        ("pnnx.Expression", "expression"),
        ("pnnx.Input", "io"), ("pnnx.Output", "io"), ("pnnx.Attribute", "io"), ("prim::TupleConstruct", "io"),
        ("nn.Linear", "linear"), ("torch.matmul", "linear"),
        ("torch.mean", "reduce"), ("torch.sum", "reduce"),
        ("nn.MultiheadAttention", "attention"), ("nn.LSTM", "recurrent"),
        ("nn.SomethingNew", "other"),
    ],
)
def test_category(op_type: str, expected: str) -> None:
    assert category(op_type) == expected
    assert expected in CATEGORY_COLORS


def test_quote_escapes_quotes_backslashes_newlines() -> None:
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


# -- a whole small model ------------------------------------------------------------------------
def test_tiny_mlp_nodes_edges_labels_and_legend() -> None:
    g = load("tiny_mlp")
    nodes, edges = parse(graph_dot(g))
    ops = {n: a for n, a in nodes.items() if n != LEGEND_ID}
    assert list(ops) == [op.name for op in g.operators]
    # Every producer->consumer link of the .param is an edge labelled with the operand's shape.
    assert [(a, b, d["label"]) for a, b, d in edges] == [
        ("pnnx_input_0", "torch.flatten_0", "1x1x8x8"),
        ("torch.flatten_0", "fc1", "1x64"),
        ("fc1", "act", "1x32"),
        ("act", "fc2", "1x32"),
        ("fc2", "F.softmax_1", "1x10"),
        ("F.softmax_1", "pnnx_output_0", "1x10"),
    ]
    assert ops["fc1"]["label"].split("\n")[:3] == ["fc1", "nn.Linear", "out_features=32"]
    assert ops["fc1"]["fillcolor"] == CATEGORY_COLORS["linear"]
    assert ops["act"]["fillcolor"] == CATEGORY_COLORS["activation"]
    # The legend lists exactly the categories present, each with its colour.
    legend = nodes[LEGEND_ID]["label"]
    for cat in ("io", "shape", "linear", "activation"):
        assert f'BGCOLOR="{CATEGORY_COLORS[cat]}">{cat}<' in legend
    assert ">conv<" not in legend
    # No highlight unless asked.
    assert all("class" not in a for a in ops.values())


def test_highlight_and_node_colors() -> None:
    g = load("tiny_mlp")
    nodes, _ = parse(graph_dot(g, highlight="act", node_colors={"fc2": "#ff0000"}))
    assert nodes["act"]["class"] == HIGHLIGHT_CLASS and nodes["act"]["color"] == HIGHLIGHT_COLOR
    assert nodes["act"]["penwidth"] == "4"
    assert [n for n, a in nodes.items() if a.get("class") == HIGHLIGHT_CLASS] == ["act"]
    assert nodes["fc2"]["fillcolor"] == "#ff0000"
    assert nodes["fc1"]["fillcolor"] == CATEGORY_COLORS["linear"]


def test_repeated_input_is_one_edge_per_operand() -> None:
    g = Graph()
    a = g.add_operand("a")
    b = g.add_operand("b")
    g.add_operator("pnnx.Input", "in", [], [a])
    g.add_operator("torch.cat", "cat", [a, a], [b], dim=1)
    g.add_operator("pnnx.Output", "out", [b], [])
    _, edges = parse(graph_dot(g))
    assert [(s, d) for s, d, _ in edges] == [("in", "cat"), ("cat", "out")]


def test_odd_names_stay_valid_dot() -> None:
    g = Graph()
    a = g.add_operand('x"1')
    b = g.add_operand("y\\2")
    g.add_operator("pnnx.Input", 'in"put', [], [a])
    g.add_operator("pnnx.Expression", "e\\x{1}", [a], [b], expr='mul(@0,"2")')
    g.add_operator("pnnx.Output", "out->1", [b], [])
    nodes, edges = parse(graph_dot(g, highlight="e\\x{1}"))
    assert {'in"put', "e\\x{1}", "out->1"} <= set(nodes)
    assert [(s, d) for s, d, _ in edges] == [('in"put', "e\\x{1}"), ("e\\x{1}", "out->1")]
    assert nodes["e\\x{1}"]["label"].endswith('expr=mul(@0,"2")')


# -- selections -----------------------------------------------------------------------------------
def test_focus_is_the_k_hop_neighbourhood() -> None:
    g = load("resnet18")
    centre = g.operators[10]
    one = {centre.name} | {o.name for o in g.successors(centre)} | {o.name for o in g.predecessors(centre)}
    assert neighbourhood(g, centre.name, 1) == one
    two = set(one)
    for name in one:
        op = g.operator(name)
        two |= {o.name for o in g.successors(op) + g.predecessors(op)}
    assert neighbourhood(g, centre.name, 2) == two
    view = graph_view(g, focus=centre.name, hops=2)
    assert set(view.shown) == two
    nodes, _ = parse(view.dot)
    assert nodes[centre.name]["peripheries"] == "2"
    # Nodes at the border have hidden neighbours: dashed.
    border = [n for n in two if n not in one]
    assert any("dashed" in nodes[n]["style"] for n in border)
    assert "dashed" not in nodes[centre.name].get("style", "")


def test_unknown_focus_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        graph_dot(load("tiny_mlp"), focus="nope")


def test_type_and_name_filters() -> None:
    g = load("resnet18")
    convs = [op.name for op in g.operators if op.type == "nn.Conv2d"]
    assert graph_view(g, type_filter={"nn.Conv2d"}).shown == convs
    relu = graph_view(g, name_filter="RELU")  # case-insensitive, name or type
    assert relu.shown == [op.name for op in g.operators if "relu" in op.name.lower() or "relu" in op.type.lower()]
    assert relu.shown
    none = graph_view(g, name_filter="no-such-operator")
    assert none.shown == [] and none.selected == 0
    parse(none.dot)  # still valid DOT


def test_window_selects_file_positions() -> None:
    g = load("resnet18")
    view = graph_view(g, window=(5, 12))
    assert view.shown == [op.name for op in g.operators[5:12]]


# -- big graphs -------------------------------------------------------------------------------------
def test_deep1500_overview_groups_cover_every_operator_once() -> None:
    g = load("deep1500")
    assert len(g.operators) >= 1500
    target = g.operators[777].name
    view = graph_view(g, highlight=target, max_nodes=400)
    assert view.overview and view.shown == [] and view.selected == len(g.operators)
    names = [n for grp in view.groups for n in grp.names]
    assert names == [op.name for op in g.operators]
    assert 20 <= len(view.groups) <= 60
    nodes, edges = parse(view.dot)
    assert len(nodes) == len(view.groups) + 1  # + legend
    highlighted = [n for n, a in nodes.items() if a.get("class") == HIGHLIGHT_CLASS]
    assert len(highlighted) == 1 and target in next(gr for gr in view.groups if gr.node_id == highlighted[0]).names
    # The residual chain links consecutive groups.
    links = {(a, b) for a, b, _ in edges}
    for x, y in zip(view.groups, view.groups[1:]):
        assert (x.node_id, y.node_id) in links


def test_deep1500_opened_group_and_full_graph() -> None:
    g = load("deep1500")
    view = graph_view(g, max_nodes=400)
    grp = view.groups[3]
    opened = graph_view(g, max_nodes=400, window=(grp.start, grp.stop))
    assert opened.shown == grp.names
    t0 = time.perf_counter()
    full = graph_view(g, max_nodes=5000)
    assert time.perf_counter() - t0 < 2.0
    nodes, edges = parse(full.dot)
    assert len(nodes) == len(g.operators) + 1
    n_links = len({(o.name, c.name, operand.name) for o in g.operators for operand in o.outputs for c in operand.consumers})
    assert len(edges) == n_links


def test_focus_inside_a_big_graph_is_drawn_in_detail() -> None:
    g = load("deep1500")
    name = g.operators[700].name
    view = graph_view(g, focus=name, hops=3, highlight=name)
    assert not view.overview and name in view.shown and len(view.shown) < 40
