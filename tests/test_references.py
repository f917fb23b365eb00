"""References computed for you and `kuiper compare`: an error injected into one operator is
found at that operator whatever the references come from (onnxruntime's values mapped by
structure, pnnx's code run with torch, a user's forward-hook .npz, another model's run);
.npz keys by operand, outN, operator name or module path; the CLI's exit codes."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper_core
from conftest import DATA, SAMPLES
from kuiper_core.cli import main
from kuiper_core.explore import compare as C
from kuiper_core.formats import converter_available, open_model
from kuiper_core.formats.base import installed
from kuiper_core.references import ReferenceError, framework_references
from kuiper_core.references.compare import compare
from kuiper_core.references.hooks import hook_snippet

USER = DATA / "user_models"
needs_pnnx = pytest.mark.skipif(not converter_available(), reason="the pnnx converter is not installed")
needs_ort = pytest.mark.skipif(
    not (installed("onnxruntime") and installed("onnx")), reason="onnxruntime and onnx are not installed"
)
needs_torch = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path_factory.getbasetemp() / "kuiper_cache"))


def _perturbed(path, operator: str, by: float = 0.01):
    """The model with one operator's weight off by `by`: an engine bug there."""
    model = open_model(path)
    weight = model.graph.operator(operator).attrs["weight"]
    weight.data = weight.data + np.float32(by)
    return model


def _second_conv(model) -> str:
    return [op.name for op in model.graph.operators if op.type == "nn.Conv2d"][1]


@pytest.mark.slow  # a real conversion
@needs_pnnx
@needs_ort
def test_onnx_references_find_an_injected_error_where_it_is():
    name = _second_conv(open_model(USER / "mobilenet_v2.onnx"))
    report = compare(
        _perturbed(USER / "mobilenet_v2.onnx", name), USER / "mobilenet_v2.input.npy", framework=["onnxruntime"]
    )
    assert not report.ok and report.first is not None
    assert report.first.operator == name, report.summary()
    assert "first divergence: operator " + name in report.summary()
    assert report.first.comparison.where is not None and report.first.comparison.max_error > 1e-3
    # everything before it was compared and agreed
    before = [r for r in report.rows if r.index < report.first.index]
    assert before and all(not r.failed for r in before)


@pytest.mark.slow  # a real conversion
@needs_pnnx
@needs_ort
def test_onnx_graphs_too_big_to_align_map_only_agreeing_values(monkeypatch):
    """Past the alignment table's size only values that agree are mapped: an operand the engine
    gets wrong is then unmapped, never compared with the wrong ONNX value; the outputs still are."""
    from kuiper_core.references import onnx_values

    monkeypatch.setattr(onnx_values, "MAX_CELLS", 10)
    clean = compare(USER / "convnext.onnx", USER / "convnext.input.npy", framework=["onnxruntime"])
    assert clean.ok and len(clean.rows) == clean.computed and "too big to align" in clean.summary()
    model = open_model(USER / "convnext.onnx")
    name = _second_conv(model)
    wrong = model.graph.operator(name).outputs[0].name
    broken = compare(_perturbed(USER / "convnext.onnx", name), USER / "convnext.input.npy", framework=["onnxruntime"])
    assert wrong in broken.unchecked  # unmapped, not compared with some other value
    outputs = C.output_operand_names(model.graph)
    assert all(not r.failed for r in broken.rows if r.operand not in outputs), broken.summary()


def test_an_aligned_pair_whose_values_differ_moves_to_the_value_holding_ours():
    """A fresh dynamo export of a 2-layer bidirectional GRU: onnxruntime lists the first GRU's
    Y_h before the Transpose/Reshape of its Y, so the order-preserving alignment paired our
    (Y, h_n) with the second GRU's h_n: `compare --framework` said 0.93 off at gru_9 where
    every output agreed. Values that hold our numbers win; all-alike ones (zeros) never do."""
    from kuiper_core.references.onnx_values import _by_values

    r = np.random.default_rng(0)
    h1, h2, y1 = r.standard_normal((2, 3)), r.standard_normal((2, 3)), r.standard_normal((4, 3))
    theirs = [("val_80", "GRU", h1), ("val_94", "Reshape", y1), ("val_164", "GRU", h2), ("zeros", "GRU", 0 * h1)]
    # ours: 0 = layer-1 Y, 1 = layer-1 h_n (holds h1), 2 = layer-2 h_n (holds h2); 1.5: the values agree
    score = np.array([[-np.inf, 1.5, -np.inf, -np.inf], [1.5, -np.inf, 1.0, 1.0], [1.0, -np.inf, 1.5, 1.0]])
    assert _by_values([(0, 1), (1, 2)], score, theirs) == [(0, 1), (1, 0), (2, 2)]
    # a real divergence: nothing else holds our numbers (the zeros do not count), the pair stays
    wrong = np.array([[-np.inf, 1.5, -np.inf, -np.inf], [1.0, -np.inf, 1.0, 1.5], [1.0, -np.inf, 1.5, 1.0]])
    assert _by_values([(0, 1), (1, 2)], wrong, theirs) == [(0, 1), (1, 2)]


@pytest.mark.slow  # a real conversion
@needs_pnnx
@needs_torch
def test_torchscript_references_find_an_injected_error_where_it_is():
    name = _second_conv(open_model(USER / "shufflenet.pt"))
    report = compare(_perturbed(USER / "shufflenet.pt", name), USER / "shufflenet.input.npy", framework=True)
    assert report.first is not None and report.first.operator == name
    assert len(report.rows) == report.computed  # every operand compared


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_reference_info_says_what_applies():
    onnx_model = open_model(USER / "lstm.onnx")
    assert "onnxruntime" in onnx_model.references.methods or onnx_model.references.missing
    pnnx_model = open_model(SAMPLES / "tiny_mlp.pnnx.param")
    assert pnnx_model.references.methods == () and not pnnx_model.references.available
    with pytest.raises(ReferenceError, match="no reference can be computed for .*tiny_mlp"):
        framework_references(pnnx_model, [np.load(SAMPLES / "tiny_mlp.input.npy")])


def test_npz_keys_name_operands_every_way():
    g = kuiper_core.load(SAMPLES / "tiny_mlp.pnnx.param").graph
    ops = {op.name: op for op in g.operators}
    assert "fc1" in ops and "fc2" in ops  # the sample's module paths
    z = {
        "1": np.zeros(1),
        "v_2": np.zeros(1),
        "fc1": np.zeros(2),  # same operand as "2"? only if fc1 produces it
        "module.fc2": np.zeros(3),
        "fc2:0": np.zeros(4),
        "out0": np.zeros(5),
        "layer9.conv": np.zeros(6),
        "fc2:7": np.zeros(7),
    }
    m = C.match_references(g, z)
    assert m.operands["1"] == "1" and m.operands["v_2"] == "2"
    assert m.operands["fc1"] == ops["fc1"].outputs[0].name
    assert m.operands["module.fc2"] == m.operands["fc2:0"] == ops["fc2"].outputs[0].name
    assert m.operands["out0"] == C.output_operand_names(g)[0]
    assert sorted(m.unmatched) == ["fc2:7", "layer9.conv"] and m.matched == 6
    np.testing.assert_array_equal(m.refs["1"], np.zeros(1))  # an operand named directly wins


def test_unmatched_keys_get_a_hint():
    g = kuiper_core.load(SAMPLES / "resnet18.pnnx.param").graph
    if any(op.name.startswith("convbn") for op in g.operators):
        assert "fused each BatchNorm" in (C.match_references(g, {"layer1.0.bn1": np.zeros(1)}).hint or "")


@needs_torch
@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_forward_hook_npz_from_the_snippet(tmp_path):
    """A user's own torch model, traced; its references written by the copyable snippet."""
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.act = nn.ReLU()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 4))

        def forward(self, x):
            return self.head(self.pool(self.act(self.conv1(x))))

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 3, 8, 8)
    torch.jit.trace(net, (x,)).save(str(tmp_path / "net.pt"))
    np.save(tmp_path / "input.npy", x.numpy())
    namespace: dict = {}
    exec(hook_snippet(), namespace)
    keys = namespace["save_references"](net, [x], str(tmp_path / "refs.npz"))
    assert {"conv1", "act", "pool", "head.0", "head.1", "out0"} <= set(keys)
    report = compare(tmp_path / "net.pt", tmp_path / "input.npy", reference=tmp_path / "refs.npz")
    assert report.ok, report.summary()
    compared = {r.operator for r in report.rows}
    assert {"conv1", "act", "pool", "head.1"} <= compared, report.summary()
    # every operand by module path alone, but the Flatten pnnx turned into a torch.flatten of its own name
    assert report.unmatched_keys == ["head.0"] and len(report.rows) == report.computed - 1


@pytest.mark.slow  # a real conversion
@needs_pnnx
def test_against_the_same_model_after_kuiper_opt(tmp_path, capsys):
    param = SAMPLES / "resnet18.pnnx.param"
    x = SAMPLES / "resnet18.input.npy"
    assert main(["opt", str(param), "-O", "2", "-o", str(tmp_path / "opt.pnnx.param")]) == 0
    capsys.readouterr()
    assert main(["compare", str(param), "--input", str(x), "--against", str(tmp_path / "opt.pnnx.param")]) == 0
    out = capsys.readouterr().out
    assert "opt.pnnx.param run on the same input" in out and "no divergence" in out
    report = compare(param, x, against=tmp_path / "opt.pnnx.param")
    assert len(report.rows) > 20  # pnnx's operand names survive the passes


def test_against_a_model_that_differs_points_at_the_operator(tmp_path, capsys):
    from kuiper_core.pnnx import load_graph
    from kuiper_core.pnnx.writer import save

    param = SAMPLES / "tiny_mlp.pnnx.param"
    graph = load_graph(param)
    weight = graph.operator("fc2").attrs["weight"]
    weight.data = weight.data * np.float32(1.5)
    save(graph, tmp_path / "changed.pnnx.param")
    x = str(SAMPLES / "tiny_mlp.input.npy")
    assert main(["compare", str(param), "--input", x, "--against", str(tmp_path / "changed.pnnx.param")]) == 1
    out = capsys.readouterr().out
    assert "first divergence: operator fc2 (nn.Linear)" in out
    report = compare(param, x, against=tmp_path / "changed.pnnx.param")
    assert [r.operator for r in report.rows if not r.failed][:2] == ["torch.flatten_0", "fc1"]


def test_cli_compare_exit_codes(tmp_path, capsys):
    param = SAMPLES / "tiny_mlp.pnnx.param"
    x = SAMPLES / "tiny_mlp.input.npy"
    refs = SAMPLES / "tiny_mlp.operands.npz"
    assert main(["compare", str(param), "--input", str(x), "--reference", str(refs)]) == 0
    out = capsys.readouterr().out
    assert "no divergence" in out and "within tolerance" in out
    with np.load(refs) as z:
        bad = dict(z)
    key = sorted(bad, key=int)[2]
    bad[key] = bad[key] + 0.5
    np.savez(tmp_path / "bad.npz", **bad, nothing_here=np.zeros(1))
    assert main(["compare", str(param), "--input", str(x), "--reference", str(tmp_path / "bad.npz"), "--failed"]) == 1
    out = capsys.readouterr().out
    assert "first divergence: operator " in out and "max |error| 0.5" in out and "at [" in out
    assert "1 reference key(s) matched nothing: nothing_here" in out
    # a wider tolerance lets it pass
    args = ["compare", str(param), "--input", str(x), "--reference", str(tmp_path / "bad.npz"), "--atol", "1"]
    assert main(args) == 0
    capsys.readouterr()
    # bad input: 2
    assert main(["compare", str(param), "--input", str(tmp_path / "none.npy"), "--reference", str(refs)]) == 2
    assert main(["compare", str(param), "--input", str(x), "--reference", str(refs), "--framework"]) == 2
    assert main(["compare", str(param), "--input", str(x)]) == 2  # nothing to compare with
    err = capsys.readouterr().err
    assert "nothing to compare" in err and "Traceback" not in err
    # nothing compared at all is no pass
    np.savez(tmp_path / "none.npz", nope=np.zeros(1))
    assert main(["compare", str(param), "--input", str(x), "--reference", str(tmp_path / "none.npz")]) == 1
    assert "nothing was compared" in capsys.readouterr().out


@pytest.mark.slow  # a real conversion
@needs_pnnx
@needs_ort
def test_compare_without_an_input_uses_seeded_random_ones(capsys):
    assert main(["compare", str(USER / "lstm.onnx"), "--framework"]) == 0
    out = capsys.readouterr().out
    assert "input: seeded random (standard normal, seed 0) of shape 1x12x16 f32" in out and "no divergence" in out


def test_a_saved_run_is_a_reference_for_another(tmp_path, capsys):
    param, x = str(SAMPLES / "tiny_mlp.pnnx.param"), str(SAMPLES / "tiny_mlp.input.npy")
    refs = str(SAMPLES / "tiny_mlp.operands.npz")
    assert main(["compare", param, "--input", x, "--reference", refs, "--save", str(tmp_path / "run.npz")]) == 0
    assert "wrote 5 operand(s) of this run" in capsys.readouterr().out
    assert main(["compare", param, "--input", x, "--reference", str(tmp_path / "run.npz")]) == 0
    assert "5 of 5 computed operands compared" in capsys.readouterr().out


def test_csv_of_the_table(tmp_path, capsys):
    param = SAMPLES / "tiny_mlp.pnnx.param"
    args = ["compare", str(param), "--input", str(SAMPLES / "tiny_mlp.input.npy")]
    args += ["--reference", str(SAMPLES / "tiny_mlp.operands.npz"), "--csv", str(tmp_path / "t.csv")]
    assert main(args) == 0
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0].startswith("#,operator,type,operand,status,max_abs_error") and len(lines) > 3


def test_the_engines_run_in_a_comparison_stops_at_its_time_limit():
    """A conversion check's engine half is bounded like its framework half: compare() stops
    between operators once `engine_timeout` has passed, with a LimitError that says so."""
    from kuiper_core.errors import LimitError

    model = SAMPLES / "tiny_mlp.pnnx.param"
    expected = dict(np.load(SAMPLES / "tiny_mlp.expected.npz"))
    x = np.load(SAMPLES / "tiny_mlp.input.npy")
    with pytest.raises(LimitError, match=r"took more than 0 s \(stopped after 1 operators\)") as caught:
        compare(model, [x], reference=expected, engine_timeout=0.0)
    assert caught.value.limit == "max_child_seconds"
    report = compare(model, [x], reference=expected, engine_timeout=60.0)  # within its time: the whole run
    assert report.rows and not report.first
