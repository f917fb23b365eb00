"""kuiper_core.explore.references: which operand each key of a reference .npz is for.

Keys by operand number, by forward() output, by operator name / module path (what forward
hooks give) and `NAME:i` for a tuple output are matched; everything else is listed with a
reason, never dropped silently. A saved run uploads back as a reference that matches fully.
"""

from __future__ import annotations

import io

import numpy as np
from conftest import DATA, OPS, SAMPLES

import kuiper_core
from kuiper_core.pnnx import read_param
from kuiper_core.explore import references as R

LSTM = OPS / "rnn_lstm_proj"  # nn.LSTM `rnn` with three outputs
DEBUG = DATA / "debug_models"  # a user's small conv net (tools/export_debug_fixtures.py)


def _graph(param):
    return read_param(param)  # the graph only: no 46 MB of ResNet-18 weights


def test_module_paths_match_the_operators_pnnx_kept() -> None:
    g = _graph(SAMPLES / "resnet18.pnnx.param")
    z = np.zeros(1, np.float32)
    keys = {"layer1.0.relu": z, "fc": z, "maxpool": z, "layer1.0.conv1": z, "layer1.0.bn1": z, "17": z}
    match = R.match_keys(g, keys)
    op = {o.name: o for o in g.operators}
    assert match.refs.keys() == {op["layer1.0.relu"].outputs[0].name, op["fc"].outputs[0].name, "3", "17"}
    assert match.counts() == {R.BY_OPERATOR: 3, R.BY_OPERAND: 1}
    assert sorted(match.unmatched) == ["layer1.0.bn1", "layer1.0.conv1"]
    assert "convbn2d" in match.reasons["layer1.0.conv1"]


def test_a_wrapper_prefix_is_removed() -> None:
    g = _graph(SAMPLES / "resnet18.pnnx.param")
    z = np.zeros(1, np.float32)
    match = R.match_keys(g, {"module.fc": z, "model.layer1.0.relu": z, "module.layer9": z})
    assert match.matched == 2 and match.unmatched == ["module.layer9"]


def test_tuple_outputs_by_index_and_a_bare_name_says_how_to_key_them() -> None:
    g = _graph(LSTM / "model.pnnx.param")
    z = np.zeros(1, np.float32)
    match = R.match_keys(g, {"rnn:0": z, "rnn:2": z, "rnn:3": z, "rnn": z})
    assert set(match.refs) == {"1", "3"}
    assert "rnn:0 … rnn:2" in match.reasons["rnn"] and "3 outputs" in match.reasons["rnn:3"]


def test_an_operand_name_wins_over_other_keys_for_the_same_operand() -> None:
    g = _graph(LSTM / "model.pnnx.param")
    a, b = np.ones(1, np.float32), np.zeros(1, np.float32)
    match = R.match_keys(g, {"out0": b, "rnn:0": b, "1": a})
    assert match.refs["1"] is not b and match.refs["1"][0] == 1 and sorted(match.duplicates) == ["out0", "rnn:0"]
    assert match.unmatched == [] and match.matched == 3


def test_later_calls_of_a_module_pnnx_renamed_are_explained() -> None:
    g = _graph(SAMPLES / "resnet18.pnnx.param")
    match = R.match_keys(g, {"layer1.0.relu#2": np.zeros(1), "out3": np.zeros(1)})
    assert "runs once in this graph" in match.reasons["layer1.0.relu#2"]
    assert "1 output (out0…out0)" in match.reasons["out3"] or "has 1 output" in match.reasons["out3"]


def test_a_saved_run_matches_itself_completely() -> None:
    m = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    x = np.load(SAMPLES / "digits_cnn.input.npy")
    run = m.steps(x)
    for _ in run:
        pass
    arrays = R.run_arrays(run.values, m.outputs_of(run.values))
    assert "out0" in arrays
    back = dict(np.load(io.BytesIO(R.npz_bytes(arrays))))
    match = R.match_keys(m.graph, back)
    assert match.unmatched == [] and match.duplicates == ["out0"]
    assert set(match.refs) == {k for k in arrays if k != "out0"}


def test_saved_runs_are_bounded_oldest_first() -> None:
    def run(label: str, n: int) -> R.SavedRun:
        return R.SavedRun(label, "m", {"0": np.zeros(n, np.float32)}, 3, 3)

    runs: list[R.SavedRun] = []
    for i in range(4):
        runs, dropped = R.keep_runs(runs, run(f"r{i}", 10), max_runs=3, max_bytes=10**6)
    assert [r.label for r in runs] == ["r1", "r2", "r3"] and dropped == ["r0"]
    runs, dropped = R.keep_runs(runs, run("big", 300_000), max_runs=3, max_bytes=10**6)
    assert [r.label for r in runs] == ["big"] and dropped == ["r1", "r2", "r3"]
    assert "complete" in runs[0].describe()


def test_fused_batchnorm_keys_are_placed_only_in_execution_order() -> None:
    """The keys' order places a BatchNorm pnnx fused (compare.fused_keys): keys written sorted
    (or shuffled) place none, and nothing is compared wrongly."""
    m = kuiper_core.load(DEBUG / "small_cnn.pnnx.param")
    with np.load(DEBUG / "small_cnn.hooks.npz") as z:
        hooks = dict(z)
    shuffled = {k: hooks[k] for k in ["fc", "relu", "conv1", "block.conv", "bn1", "pool", "block.act", "out0"]}
    match = R.match_keys(m.graph, shuffled)
    assert sorted(match.unmatched) == ["bn1", "conv1"]
    # a BatchNorm key whose shape differs from the fused operator's output is not placed either
    wrong = dict(hooks, bn1=hooks["bn1"][:, :1])
    assert "bn1" in R.match_keys(m.graph, wrong).unmatched


def test_hook_keyed_references_of_a_users_model_compare_against_pytorch() -> None:
    """small_cnn.hooks.npz was written by the app's hook snippet from the torch model pnnx converted
    (tools/export_debug_fixtures.py): the modules pnnx kept match by name and agree with the
    engine; the BatchNorm pnnx fused into its convolution is compared with the fused operator
    (placed by the keys' order), the convolution's own output and the ReLU's second call are
    listed with reasons."""
    from kuiper_core.explore import compare as C

    m = kuiper_core.load(DEBUG / "small_cnn.pnnx.param")
    with np.load(DEBUG / "small_cnn.hooks.npz") as z:
        hooks = dict(z)
    match = R.match_keys(m.graph, hooks)
    assert sorted(match.unmatched) == ["conv1", "relu#2"]
    assert "runs once" in match.reasons["relu#2"] and "into convbn2d_0" in match.reasons["conv1"]
    assert match.duplicates == ["out0"]  # fc's output, also given as out0
    run = m.steps(np.load(DEBUG / "small_cnn.input.npy"))
    checks = C.check_events(list(run), match.refs)
    compared = {c.name for c in checks if c.status != C.NO_REF}
    # pnnx.Output is compared too: against the output it passes on (fc's, also given as out0)
    assert compared == {"convbn2d_0", "relu", "pool", "block.conv", "block.act", "fc", "pnnx_output_0"}
    assert all(c.status == C.OK for c in checks if c.status != C.NO_REF)
