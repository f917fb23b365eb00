"""AppTest: the Passes page on its presets and on the current model."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import ROOT, SAMPLES

from kuiper_core.pnnx import read_param

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

PRESETS = SAMPLES / "passes"


def passes_page(source: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/8_passes.py").run()
    if source is not None:
        at.radio(key="passes_source").set_value(source).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def fill_colors(dot: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r'^"([^"]+)" \[[^\n]*fillcolor="([^"]+)"', dot, re.M)}


def test_seed_preset_folds_batchnorm_and_shows_both_graphs():
    at = passes_page("conv_bn_relu")
    m = metrics(at)
    o1, o2 = (len(read_param(PRESETS / f"conv_bn_relu.o{k}.pnnx.param").operators) for k in (1, 2))
    assert (m["Operators before"], m["Operators after"], m["pnnx optlevel 2"]) == (str(o1), str(o2), str(o2))
    before, after = (el.proto.spec for el in at.get("graphviz_chart"))
    assert fill_colors(before)["bn"] == "#f4a3a3"  # removed: red on the left
    assert "bn" not in fill_colors(after) and fill_colors(after)["conv"] == "#ffd166"  # rewritten: amber
    log = at.dataframe[1].value
    assert list(log["pass"]) == ["FoldBatchNorm"] and list(log["what changed"]) == ["1 folded"]
    assert any("folded bn: nn.BatchNorm2d into conv" in c.value for c in at.code)
    assert any(c.language == "diff" and '-  (%10) = "nn.BatchNorm2d"' in c.value for c in at.code)
    assert any("same outputs" in s.value for s in at.success)
    checks = at.dataframe[2].value
    assert list(checks["equal"]) == ["yes"]


@pytest.mark.slow
def test_pass_zoo_reports_every_pass_and_levels_change_the_result():
    at = passes_page("pass_zoo")
    m = metrics(at)
    assert int(m["Operators after"]) <= int(m["pnnx optlevel 2"]) < int(m["Operators before"])
    picker = next(s for s in at.selectbox if s.label == "What a pass did")
    assert len(picker.options) >= 10  # one diff per pass that changed something
    at.radio(key="passes_level").set_value(1).run()
    level1 = int(metrics(at)["Operators after"])
    assert int(m["Operators after"]) < level1 < int(m["Operators before"])
    assert set(at.dataframe[1].value["level"]) == {1}
    at.multiselect(key="passes_required").set_value(["FoldBatchNorm"]).run()
    assert "FoldBatchNorm" in set(at.dataframe[1].value["pass"])  # required beats the level
    at.radio(key="passes_level").set_value(0).run()
    at.multiselect(key="passes_required").set_value([]).run()
    assert metrics(at)["Operators after"] == m["Operators before"]
    assert any("No pass ran" in i.value for i in at.info)
    assert not at.exception


def test_running_only_chosen_passes():
    at = passes_page("pass_zoo")
    at.multiselect(key="passes_only").set_value(["RemoveUnused", "FoldBatchNorm"]).run()
    assert set(at.dataframe[1].value["pass"]) <= {"FoldBatchNorm", "RemoveUnused"}
    after = at.get("graphviz_chart")[1].proto.spec
    assert '"bn1"' not in after and '"drop"' in after  # BN folded, dropout (RemoveNoOps) kept
    assert not at.exception


def test_disabling_a_pass_keeps_its_operators():
    at = passes_page("pass_zoo")
    at.multiselect(key="passes_disabled").set_value(["FoldBatchNorm"]).run()
    after = at.get("graphviz_chart")[1].proto.spec
    assert '"bn1"' in after and "FoldBatchNorm" not in set(at.dataframe[1].value["pass"])
    assert any("same outputs" in s.value for s in at.success)


def test_current_model_is_optimised_and_checked_against_the_original():
    at = passes_page("current")
    m = metrics(at)
    assert m["pnnx optlevel 2"] == "—" and int(m["Operators after"]) <= int(m["Operators before"])
    checks = at.dataframe[-1].value
    assert (checks["equal"] == "yes").all() and np.isfinite(checks["max |after − before|"]).all()
    assert [b.label for b in at.get("download_button")] == [
        "Download digits_cnn.opt.pnnx.param",
        "Download digits_cnn.opt.pnnx.bin",
    ]


def test_the_url_keeps_the_start_and_the_level():
    import apptest_helpers as helpers

    at = helpers.app(None, "pages/8_passes.py", query={"start": "pass_zoo", "level": "1"})
    assert at.radio(key="passes_source").value == "pass_zoo" and at.radio(key="passes_level").value == 1
    at.radio(key="passes_level").set_value(2).run()
    assert at.query_params["level"] in ("2", ["2"]) and at.query_params["start"] in ("pass_zoo", ["pass_zoo"])


@pytest.mark.slow
def test_a_huge_pass_diff_is_cut_on_the_page_and_downloaded_whole():
    """deep1500's FuseExpressions rewrites 424 KB of text: the page draws its start (the
    browser highlighted all of it for seconds on every visit) and offers the whole diff."""
    import apptest_helpers as helpers

    at = helpers.app("deep1500", "pages/8_passes.py")
    at.radio(key="passes_source").set_value("current").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = next(c.value for c in at.code if c.language == "diff")
    assert shown.startswith("--- before FuseExpressions") and len(shown.splitlines()) == 400
    assert any("The first 400 of" in c.value for c in at.caption)
    assert "Download the whole diff of FuseExpressions (.diff)" in [b.label for b in at.get("download_button")]
