"""kuiper_core.explore.compare: what the Forward page may claim about correctness.

References are PyTorch's (pnnx's per-operand tensors of a real export); an operator is
'within tolerance' only when something was compared, a wrong-shaped reference is a shape
mismatch (not an infinite error), and an .npz naming no operand is reported.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import OPS, SAMPLES

import kuiper_core
from kuiper_core.explore import compare as C

LSTM = OPS / "rnn_lstm_proj"  # nn.LSTM with a 3-tuple output, pnnx operand references


def _inputs(case):
    with np.load(case / "inputs.npz") as z:
        return [z[f"in{i}"] for i in range(len(z.files))]


def test_max_abs_error_and_tolerance_edge_cases() -> None:
    a = np.array([1.0, np.nan, np.inf], np.float32)
    assert C.max_abs_error(a, a.copy()) == 0.0
    assert C.max_abs_error(a, np.array([1.0, 2.0, np.inf], np.float32)) == np.inf
    assert C.max_abs_error(np.array([1, 5]), np.array([1, 2])) == 3.0
    assert C.tolerance(np.array([-300.0, 2.0])) == pytest.approx(0.03)
    assert C.difference(np.array([True, False]), np.array([True, True])).tolist() == [0.0, 1.0]


def test_a_wrong_shape_is_a_shape_mismatch_not_infinity() -> None:
    c = C.compare(np.zeros((1, 1008, 8), np.float32), np.zeros((1, 8, 1008), np.float32))
    assert c.status == C.SHAPE and c.max_error is None and c.ratio is None
    assert "1x1008x8" in c.text() and "1x8x1008" in c.text() and "inf" not in c.text().lower()
    ok = C.compare(np.ones(3, np.float32), np.ones(3, np.float32) + 1e-6)
    assert ok.status == C.OK and ok.ratio == pytest.approx(0.01, rel=0.1)


def test_output_references_map_out_n_through_tuples() -> None:
    g = kuiper_core.load(LSTM / "model.pnnx.param")
    assert C.output_operand_names(g.graph) == ["1", "2", "3"]
    with np.load(LSTM / "expected.npz") as z:
        match = C.match_references(g.graph, dict(z))
    assert set(match.refs) == {"1", "2", "3"} and match.unmatched == []


def test_an_npz_naming_no_operand_is_reported_not_silently_dropped() -> None:
    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    match = C.match_references(g.graph, {"conv1.weight": np.zeros(3), "logits": np.zeros(10), "out7": np.zeros(1)})
    assert match.refs == {} and match.matched == 0 and sorted(match.unmatched) == ["conv1.weight", "logits", "out7"]
    operand = next(iter(g.graph.operands))
    match = C.match_references(g.graph, {operand: np.zeros(1), "nope": np.zeros(1)})
    assert set(match.refs) == {operand} and match.unmatched == ["nope"] and match.matched == 1


def test_operator_checks_against_pytorch_count_what_was_compared() -> None:
    g = kuiper_core.load(LSTM / "model.pnnx.param")
    events = list(g.steps(*_inputs(LSTM)))
    with np.load(LSTM / "expected.npz") as z:
        refs = C.references_for(g.graph, dict(z))
    with np.load(LSTM / "operands.npz") as z:
        refs.update(dict(z))
    checks = C.check_events(events, refs)
    by_name = {c.name: c for c in checks}
    assert by_name["rnn"].status == C.OK
    assert C.first_bad(checks) is None
    s = C.summarize(checks)
    assert s.run == len(events) and s.compared == sum(c.status != C.NO_REF for c in checks) and s.compared >= 1
    level, text = C.verdict(s, "PyTorch")
    assert level == "success" and f"{s.compared} of {s.run} operators" in text
    # A wrong reference for the LSTM's hidden state flags that operator, first.
    bad = dict(refs)
    bad["2"] = bad["2"] + 0.5
    checks = C.check_events(events, bad)
    first = C.first_bad(checks)
    assert first is not None and first.name == "rnn" and first.status == C.OVER
    assert first.worst is not None and first.worst.max_error == pytest.approx(0.5, abs=1e-3)
    colors = C.error_colors(checks)
    assert colors["rnn"] == C.ERROR_COLORS["first bad"]
    assert "pnnx_output_0" not in colors  # not compared: neutral in the graph, not "green"
    # A reference of the wrong shape is a shape mismatch in the table, and a failure.
    wrong = dict(refs)
    wrong["2"] = np.zeros((7, 7), np.float32)
    rows = C.check_rows(C.check_events(events, wrong))
    row = next(r for r in rows if r["operator"] == "rnn")
    assert row["status"] == C.SHAPE and row["max |error|"] is None and "shape mismatch" in row["detail"]
    assert rows[0]["#"] == 1  # numbered from 1, like the stepper


@pytest.mark.slow
def test_nothing_compared_is_never_all_within_tolerance() -> None:
    g = kuiper_core.load(SAMPLES / "resnet18.pnnx.param")
    x = np.load(SAMPLES / "resnet18.input.npy")
    events = []
    for e in g.steps(x):
        events.append(e)
        if len(events) == 44:
            break
    with np.load(SAMPLES / "resnet18.expected.npz") as z:
        refs = C.references_for(g.graph, dict(z))  # only out0 (not its operands): the last operator's input
    s = C.summarize(C.check_events(events, refs))
    assert (s.run, s.compared) == (44, 0)
    level, text = C.verdict(s, "PyTorch")
    assert level == "warning" and "nothing was compared" in text and "within tolerance" not in text
    one = C.CheckSummary(run=51, compared=1, ok=1, over=0, shape=0)
    assert C.verdict(one, "PyTorch") == (
        "success",
        "1 of 51 operators run so far compared with PyTorch: within tolerance; 50 have no reference.",
    )


def test_rows_csv() -> None:
    rows = [{"#": 1, "operator": "a", "max |error|": None}, {"#": 2, "operator": "b,c", "max |error|": 0.5}]
    assert C.rows_csv(rows) == '#,operator,max |error|\n1,a,\n2,"b,c",0.5\n'


def test_check_cache_compares_each_event_once_per_set_of_references() -> None:
    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        refs = dict(z)
    events = list(g.steps(np.load(SAMPLES / "digits_cnn.input.npy")))
    cache = C.CheckCache()
    first = cache.checks(events[:5], refs, "a")
    again = cache.checks(events, refs, "a")
    assert again[:5] == first and all(x is y for x, y in zip(again, first))  # not recomputed
    assert [c.status for c in again] == [c.status for c in C.check_events(events, refs)]
    wrong = {k: v + 1 for k, v in refs.items()}
    other = cache.checks(events, wrong, "b")  # other references: computed afresh
    assert other[1] is not again[1] and other[1].status == C.OVER


def test_the_output_node_is_compared_with_the_output_it_passes_on() -> None:
    """pnnx.Output has no outputs of its own: its check is the model's output it passes on, so
    a fully compared model has no grey 'not compared' node left (issue 38)."""
    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    x = np.load(SAMPLES / "digits_cnn.input.npy")
    events = list(g.steps(x))
    (out,) = g.forward(x)
    refs = C.references_for(g.graph, {"out0": out})
    checks = C.check_events(events, refs)
    assert [c.type for c in checks if c.status != C.NO_REF] == [events[-2].type, "pnnx.Output"]
    assert checks[-1].status == C.OK and list(checks[-1].outputs) == list(events[-1].inputs)
    wrong = C.check_events(events, {k: v + 1.0 for k, v in refs.items()})
    assert wrong[-1].status == C.OVER  # a wrong output shows on the output node too
    assert C.CheckCache().checks(events, refs, "t")[-1] == checks[-1]


def test_onnx_node_names_per_operator_and_in_the_table() -> None:
    from kuiper_core.explore.references import operator_onnx_nodes

    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param").graph
    first = next(op for op in g.operators if op.type not in ("pnnx.Input", "pnnx.Output"))
    output = next(op for op in g.operators if op.type == "pnnx.Output")
    nodes = {first.outputs[0].name: "/conv1/Conv", output.inputs[0].name: "/fc/Gemm"}
    by_op = operator_onnx_nodes(g, nodes)
    assert by_op[first.name] == "/conv1/Conv" and by_op[output.name] == "/fc/Gemm"
    assert len(by_op) == 3  # the operator making the output, and pnnx.Output passing it on
    check = C.OperatorCheck(1, first.name, first.type, C.NO_REF, {})
    assert C.check_rows([check], by_op)[0]["ONNX node"] == "/conv1/Conv"
    assert "ONNX node" not in C.check_rows([check])[0]  # no .onnx: no column
