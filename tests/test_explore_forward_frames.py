"""Forward's frames for the browser (kuiper_core/explore/forward_frames.py): each step's panel
says what the server-drawn page said (status line, summaries, comparison) with every name
escaped, and the graph's added fills give, merged up to any step, exactly overlay.roll_up of
that step's fills (the rule the server-drawn page used)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import SAMPLES

import kuiper_core
from kuiper_core.explore import compare
from kuiper_core.explore import forward_frames as F
from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.overlay import RAN, roll_up
from kuiper_core.explore.stepper import ForwardStepper


@pytest.fixture(scope="module")
def digits():
    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    s = ForwardStepper(g, [np.load(SAMPLES / "digits_cnn.input.npy")])
    s.run_all()
    return g, s


def merged(frames: list[dict], upto: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in frames[: upto + 1]:
        out.update(f["colors"])
    return out


def test_panel_says_the_operator_its_tensors_and_their_summaries(digits) -> None:
    g, s = digits
    names = [r.name for r in g.order]
    frames = F.panel_frames(s.events, names, kernel_of=lambda e: "")
    assert len(frames) == len(names) + 1 and names[0] in frames[0] and "Before the first operator" in frames[0]
    e = next(e for e in s.events if e.type == "nn.Conv2d")
    html = frames[e.index + 1]
    assert f"<b>Operator {e.index + 1} of {len(names)}: {e.name}</b> (nn.Conv2d)" in html
    assert f"next: <code>{names[e.index + 1]}</code>" in html
    (out_name, out), *_ = e.outputs.items()
    rows = re.findall(r"<tr><td>out %([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td>((?:<td>[^<]*</td>){5})</tr>", html)
    assert rows and rows[0][:3] == (out_name, "x".join(map(str, out.shape)), "float32")
    cells = re.findall(r"<td>([^<]*)</td>", rows[0][3])
    assert [float(c) for c in cells[:4]] == pytest.approx(
        [out.min(), out.max(), out.astype(np.float64).mean(), out.astype(np.float64).std()], rel=1e-3
    )
    assert cells[4] == "0"  # no NaN / Inf
    assert "the last operator" in frames[-1]


def test_panel_escapes_names_and_says_nan_and_the_comparison() -> None:
    """A hostile operator name is text, not markup; NaN/Inf are counted; a failing comparison
    is an error box with the reference's name."""
    a = np.array([[1.0, np.nan, np.inf, 2.0]], np.float32)
    event = SimpleNamespace(
        index=0, name="<img src=x onerror=alert(1)>", type="nn.ReLU", seconds=0.001, inputs={}, outputs={"y": a}
    )
    check = compare.check_operator(0, event.name, event.type, {"y": a}, {"y": np.zeros((1, 4), np.float32)})
    html = F.operator_html(event, 3, next_name="<b>", check=check, ref_source="<PyTorch>")  # type: ignore[arg-type]
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html and "<code>&lt;b&gt;</code>" in html
    assert "<td>1 / 1</td>" in html  # one NaN, one Inf
    assert 'class="kx-s-box kx-s-error">%y against &lt;PyTorch&gt;: ' in html


@pytest.mark.parametrize("name", ["digits_cnn", "yolov5s_mini"])
def test_added_fills_merge_to_roll_up_at_every_step(name: str) -> None:
    """At every step i the merged frames are roll_up({the first i operators: RAN}) on the view's
    nodes: closed modules included (yolov5s_mini opens with modules closed)."""
    g = kuiper_core.load(SAMPLES / f"{name}.pnnx.param")
    s = ForwardStepper(g, [np.load(SAMPLES / f"{name}.input.npy")])
    s.run_all()
    view = graph_view(g.graph, show=[None])
    frames = F.graph_frames(s.events, view.unit_of, F.progress_colors(s.events), [RAN])
    assert len(frames) == len(s.events) + 1
    for i in range(len(frames)):
        want = roll_up({e.name: RAN for e in s.events[:i]}, view.unit_of, [RAN])
        assert merged(frames, i) == want, i
        assert frames[i]["highlight"] == (view.node_for(s.events[i - 1].name) if i else None)
    assert sum(len(f["colors"]) for f in frames) == len(set(view.unit_of[e.name] for e in s.events))


def test_error_fills_keep_the_first_failure_and_the_stopped_operator(digits) -> None:
    g, s = digits
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        refs = dict(z)
    relu = next(e for e in s.events if e.type == "nn.ReLU")
    refs[next(iter(relu.outputs))] = next(iter(relu.outputs.values())) + 1.0
    events = s.events[:6]  # as if Forward had stopped at the 7th operator
    stopped = events[-1].index + 1
    failed = g.order[stopped].name
    checks = compare.check_events(events, refs)
    view = graph_view(g.graph, show=[None])
    legend = [c for _, c in compare.ERROR_LEGEND] + [F.FAILED]
    frames = F.graph_frames(events, view.unit_of, F.error_colors(checks), legend, failed=failed)
    assert frames[0]["colors"] == {failed: F.FAILED} and frames[0]["highlight"] == failed
    for i in range(len(frames)):
        want = roll_up(compare.error_colors(checks[:i]) | {failed: F.FAILED}, view.unit_of, legend)
        assert merged(frames, i) == want, i
    assert merged(frames, relu.index + 1)[relu.name] == compare.ERROR_COLORS["first bad"]
    assert relu.name not in merged(frames, relu.index)


@pytest.mark.slow  # deep1500 walked for its frames: ~1.2 s
def test_deep1500_frames_stay_small() -> None:
    """Summaries only, no tensors: deep1500's 1,503 panels and graph frames, as JSON."""
    g = kuiper_core.load(SAMPLES / "deep1500.pnnx.param")
    s = ForwardStepper(g, [np.load(SAMPLES / "deep1500.input.npy")])
    s.run_all()
    names = [r.name for r in g.order]
    panels = F.panel_frames(s.events, names, kernel_of=lambda e: "")
    view = graph_view(g.graph, show=[None])
    graph = F.graph_frames(s.events, view.unit_of, F.progress_colors(s.events), [RAN])
    assert len(json.dumps(panels)) < 1_200_000 and len(json.dumps(graph)) < 120_000
    assert max(len(p) for p in panels) < 2_000
