"""The layered layout of big graphs (explore/layout.py): every node and edge of the DOT is
drawn, as Graphviz would name them for the viewer; no two nodes overlap; edges point down."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET

import pytest
from conftest import SAMPLES, slow_cases

from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.layout import layout_svg, text_width
from kuiper_core.pnnx import read_param

S = "{http://www.w3.org/2000/svg}"


def all_open(name: str):
    g = read_param(SAMPLES / f"{name}.pnnx.param")
    v = graph_view(g)
    return g, graph_view(g, expanded={x.id for x in v.tree.walk() if x.id})


def boxes(svg: str) -> dict[str, tuple[float, float, float, float]]:
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{S}g"):
        if g.get("class") == "node":
            xs, ys = [], []
            for cmd, args in re.findall(r"([MHVQZ])([^MHVQZ]*)", g.find(f"{S}path").get("d")):
                nums = [float(t) for t in re.split(r"[ ,]+", args.strip()) if t]
                if cmd == "H":
                    xs += nums
                elif cmd == "V":
                    ys += nums
                else:
                    xs += nums[0::2]
                    ys += nums[1::2]
            out[g.find(f"{S}title").text] = (min(xs), min(ys), max(xs), max(ys))
    return out


@pytest.mark.parametrize("name", slow_cases(["resnet18", "deep1500", "mobilenetv3"], {"deep1500"}))
def test_every_node_and_edge_drawn_without_overlap(name: str) -> None:
    g, view = all_open(name)
    svg = layout_svg(view.dot)
    b = boxes(svg)
    assert set(b) == {op.name for op in g.operators}
    root = ET.fromstring(svg)
    edges = [e for e in root.iter(f"{S}g") if e.get("class") == "edge"]
    assert len(edges) == view.dot.count(" -> ")
    for e in edges:  # every edge points down: from the bottom of one box to the top of another
        path = e.find(f"{S}path").get("d")
        x0, y0 = (float(t) for t in path[1:].split(" ")[0].split(","))
        tip = e.find(f"{S}polygon").get("points").split(" ")[1]
        x1, y1 = (float(t) for t in tip.split(","))
        assert y0 < y1
        src = [n for n, box in b.items() if abs(box[3] - y0) < 0.2 and box[0] <= x0 <= box[2]]
        dst = [n for n, box in b.items() if abs(box[1] - y1) < 0.2 and box[0] <= x1 <= box[2]]
        assert len(src) == 1 and len(dst) == 1, (src, dst)
    rows: dict[float, list] = {}
    for box in b.values():
        rows.setdefault(round((box[1] + box[3]) / 2, 1), []).append(box)
    for row in rows.values():
        row.sort()
        assert all(p[2] <= q[0] for p, q in zip(row, row[1:])), "two nodes of a rank overlap"


def test_labels_are_the_dots_and_fit_their_boxes() -> None:
    g, view = all_open("resnet18")
    root = ET.fromstring(layout_svg(view.dot))
    conv = next(x for x in root.iter(f"{S}g") if x.get("class") == "node" and x.find(f"{S}title").text == "convbn2d_0")
    lines = [t.text for t in conv.iter(f"{S}text")]
    assert lines[:2] == ["convbn2d_0", "nn.Conv2d"] and "kernel_size=(7,7)" in lines
    x0, _, x1, _ = boxes(ET.tostring(root, encoding="unicode"))["convbn2d_0"]
    assert max(text_width(s) for s in lines) < x1 - x0


def test_deep1500_is_laid_out_in_well_under_a_second() -> None:
    _, view = all_open("deep1500")
    layout_svg.cache_clear()
    t0 = time.perf_counter()
    layout_svg(view.dot)
    assert time.perf_counter() - t0 < 3.0  # ~0.3 s alone; Graphviz in the browser took 5-15 s
