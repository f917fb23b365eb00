"""kuiper_core.explore.dot: the graph as DOT for the browser renderer."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES

from kuiper_core.explore.categories import CATEGORY_COLORS, category
from kuiper_core.explore import modules as M
from kuiper_core.explore.dot import cluster_id, graph_dot, graph_view, group_id, neighbourhood, parse_click, quote
from kuiper_core.explore.overlay import roll_up
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
        assert m is not None, f"untokenisable DOT at {i}: {dot[i : i + 40]!r}"
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
    clusters: list[str] = []

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
        if t == "subgraph":  # subgraph "cluster x" {
            clusters.append(unquote(toks[k + 1]))
            k += 3
        elif t.startswith('"'):
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
        ("nn.Conv2d", "conv"),
        ("nn.ConvTranspose2d", "conv"),
        ("F.conv2d", "conv"),
        ("nn.BatchNorm2d", "norm"),
        ("nn.LayerNorm", "norm"),
        ("F.group_norm", "norm"),
        ("nn.ReLU", "activation"),
        ("F.softmax", "activation"),
        ("nn.Hardswish", "activation"),
        ("nn.MaxPool2d", "pool"),
        ("nn.AdaptiveAvgPool2d", "pool"),
        ("torch.flatten", "shape"),
        ("Tensor.view", "shape"),
        ("torch.cat", "shape"),
        ("nn.Upsample", "shape"),
        ("pnnx.Expression", "expression"),
        ("pnnx.Input", "io"),
        ("pnnx.Output", "io"),
        ("pnnx.Attribute", "io"),
        ("prim::TupleConstruct", "io"),
        ("nn.Linear", "linear"),
        ("torch.matmul", "linear"),
        ("torch.mean", "reduce"),
        ("torch.sum", "reduce"),
        ("nn.MultiheadAttention", "attention"),
        ("nn.LSTM", "recurrent"),
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
    view = graph_view(g)
    ops, edges = parse(view.dot)
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
    assert ops["fc1"]["label"].split("\n") == ["fc1", "nn.Linear", "in_features=64", "out_features=32"]
    assert ops["fc1"]["fillcolor"] == CATEGORY_COLORS["linear"]
    assert ops["act"]["fillcolor"] == CATEGORY_COLORS["activation"]
    # The legend (drawn by the viewer, beside the graph) lists exactly the categories present.
    assert view.legend() == [(c, CATEGORY_COLORS[c]) for c in ("io", "linear", "activation", "shape")]
    # What changes while watching is an overlay, never in the DOT.
    assert all("class" not in a and "penwidth" not in a for a in ops.values())
    assert view.node_for("fc1") == "fc1" and view.node_for(None) is None
    # Fills can still be baked in for graphs drawn without the viewer.
    baked, _ = parse(graph_dot(g, node_colors={"fc2": "#ff0000"}))
    assert baked["fc2"]["fillcolor"] == "#ff0000" and baked["fc1"]["fillcolor"] == CATEGORY_COLORS["linear"]


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
    nodes, edges = parse(graph_dot(g))
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


# -- modules ----------------------------------------------------------------------------------------
def test_module_paths_follow_pytorch_names_and_invented_names_join_a_neighbour() -> None:
    g = load("resnet18")
    paths = {k: ".".join(v) for k, v in M.module_paths(g).items()}
    assert paths["layer1.0.relu"] == "layer1.0"
    assert paths["convbn2d_1"] == "layer1.0"  # the fused conv that feeds layer1.0.relu
    assert paths["pnnx_expr_14"] == "layer1.0"  # the residual add after it
    assert paths["convbn2d_7"] == "layer2.0"  # layer2.0's downsample
    assert paths["pnnx_unique_7"] == "layer4.1"  # the last relu stays in its block...
    assert paths["avgpool"] == paths["fc"] == paths["pnnx_input_0"] == ""  # ...the head is top level


def test_small_models_open_every_module_as_clusters() -> None:
    g = load("resnet18")
    view = graph_view(g)
    nodes, _ = parse(view.dot)
    assert set(nodes) == {op.name for op in g.operators} and view.shown == [op.name for op in g.operators]
    clusters = re.findall(r'^\s*subgraph "(cluster [^"]+)"', view.dot, re.M)
    assert {"cluster layer1", "cluster layer1.0", "cluster layer4.1"} <= set(clusters)
    assert view.closed_groups == 0


def test_deep1500_opens_as_its_modules_and_a_module_opens_on_request() -> None:
    g = load("deep1500")
    assert len(g.operators) >= 1500
    view = graph_view(g, max_nodes=400)  # the app's time for it: bench/bench_app.py
    nodes, edges = parse(view.dot)
    groups = [n for n in nodes if n.startswith("group ")]
    assert 8 <= len(groups) <= 40 and len(nodes) <= 60
    # Every operator is drawn exactly once: itself, or inside exactly one closed module.
    tree = view.tree
    assert tree is not None
    closed = [gr for gr in tree.walk() if gr.id and group_id(gr) in nodes]
    covered = [n for gr in closed for n in gr.ops] + view.shown
    assert sorted(covered) == sorted(op.name for op in g.operators)
    # The residual chain links the closed range groups in order.
    links = {(a, b) for a, b, _ in edges}
    for x, y in zip(closed, closed[1:]):
        assert (group_id(x), group_id(y)) in links
    # Opening one range shows its blocks as closed modules; show= opens an operator's modules.
    first = closed[0]
    opened = graph_view(g, max_nodes=400, expanded=view.expanded | {first.id})
    assert cluster_id(first) in {unquote_cluster(c) for c in re.findall(r'subgraph ("[^"]+")', opened.dot)}
    target = g.operators[777].name
    assert view.node_for(target).startswith("group ")
    shown = graph_view(g, max_nodes=400, show=[target])
    assert shown.node_for(target) == target and len(shown.shown) < 60


def unquote_cluster(tok: str) -> str:
    return tok[1:-1]


def test_clicks_say_what_they_hit() -> None:
    assert parse_click("group blocks.0–18") == ("open", "blocks.0–18")
    assert parse_click("cluster layer1.0") == ("close", "layer1.0")
    assert parse_click("layer1.0.relu") == ("operator", "layer1.0.relu")


def test_state_colours_roll_up_to_closed_modules() -> None:
    g = load("deep1500")
    view = graph_view(g, max_nodes=400)
    inside = g.operators[500].name
    unit = view.node_for(inside)
    ok, bad = "#0f0", "#f00"
    colors = roll_up({g.operators[501].name: ok, inside: bad}, view.unit_of, [ok, bad])
    assert colors == {unit: bad}  # the failure shows on the closed module


def test_full_detail_of_deep1500_is_still_fast_and_complete() -> None:
    g = load("deep1500")
    full = graph_view(g, max_nodes=5000)
    nodes, edges = parse(full.dot)
    assert len(nodes) == len(g.operators)
    assert not full.frames and "subgraph" not in full.dot  # no frames: dot would take ~45 s
    n_links = len(
        {(o.name, c.name, operand.name) for o in g.operators for operand in o.outputs for c in operand.consumers}
    )
    assert len(edges) == n_links


def test_focus_inside_a_big_graph_is_drawn_in_detail() -> None:
    g = load("deep1500")
    name = g.operators[700].name
    view = graph_view(g, focus=name, hops=3)
    assert name in view.shown and len(view.shown) < 40 and view.closed_groups == 0


def test_edges_whose_size_follows_the_values_say_so() -> None:
    """x[x > 0]: pnnx wrote (10) for the selection from its dummy data; the edge says it varies."""
    from conftest import DATA

    graph = read_param(DATA / "value_shapes" / "bool_mask" / "model.pnnx.param")
    dot = graph_view(graph).dot
    assert '"Tensor.index_1" -> "pnnx_expr_0" [label="10 (varies)"' in dot
    assert "its size follows the input values" in dot
    assert '[label="2x5"' in dot and "2x5 (varies)" not in dot  # the input's edges are exact
