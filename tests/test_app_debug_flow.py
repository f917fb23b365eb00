"""AppTest: debugging your own model on the Forward page (issue 22).

References arriving switch the graph to the error view; the first failure the page offers is
the operator drawn red; every tensor of a run can be saved (and downloaded) with or without
references and a later run compared with it; an .npz keyed by PyTorch module paths (forward
hooks) compares the operators pnnx kept and lists what matched nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA, SAMPLES

import kuiper_core
from kuiper_core.explore import compare as C

pytest.importorskip("streamlit")
from apptest_helpers import (  # noqa: E402
    FORWARD,
    HOME,
    app,
    click,
    forward_go,
    forward_step,
    highlight,
    no_exception,
    texts,
    viewer_colors,
    viewers,
)

DEBUG = DATA / "debug_models"  # tools/export_debug_fixtures.py


def _upload_model(at, stem: str = "small_cnn") -> None:
    _upload_model_files(at, DEBUG / f"{stem}.pnnx.param", DEBUG / f"{stem}.pnnx.bin")


def _upload_model_files(at, param, bin_path) -> None:
    at.file_uploader(key="home_param").upload(param.name, param.read_bytes())
    at.file_uploader(key="home_bin").upload(bin_path.name, bin_path.read_bytes())
    next(b for b in at.button if b.label == "Load uploaded model").click().run()
    no_exception(at)


def _use_input(at, array: np.ndarray) -> None:
    at.session_state["kx_input"] = {"kind": "npy", "seed": 0}
    at.session_state["kx_input_arrays"] = {"npy": (array, "input.npy")}


@pytest.mark.slow
def test_hook_keyed_references_switch_to_the_error_view_and_compare_what_pnnx_kept() -> None:
    at = app()
    _upload_model(at)
    _use_input(at, np.load(DEBUG / "small_cnn.input.npy"))
    at.switch_page(FORWARD).run()
    no_exception(at)
    assert at.radio(key="fw_color_mode").value == "progress"  # nothing to compare with yet
    forward_go(at, 10**6)
    at.file_uploader(key="forward_refs").upload("hooks.npz", (DEBUG / "small_cnn.hooks.npz").read_bytes()).run()
    no_exception(at)
    assert at.radio(key="fw_color_mode").value == "errors"  # references arrived: the error view
    said = " ".join(texts(at.success))
    assert "7 of 11 operators run so far compared with the uploaded hooks.npz: all 7 within tolerance" in said, said
    warning = " ".join(texts(at.warning))
    assert "7 of 9 arrays matched" in warning and "2 match nothing" in warning, warning
    unmatched = next(df.value for df in at.dataframe if "why" in df.value.columns)
    assert sorted(unmatched["key"]) == ["conv1", "relu#2"]
    assert not any("def save_references" in c.value for c in at.code)  # drawn when its expander opens:
    at.session_state["fw_hooks"] = True  # (a click on it)
    at.run()
    assert any("def save_references" in c.value for c in at.code)  # the hook snippet to copy


@pytest.mark.slow
def test_the_colour_view_chosen_stays_while_stepping() -> None:
    at = app("resnet18", FORWARD)
    assert at.radio(key="fw_color_mode").value == "errors"  # PyTorch's references for the sample
    at.radio(key="fw_color_mode").set_value("progress").run()
    forward_step(at, 2)
    assert at.radio(key="fw_color_mode").value == "progress"


@pytest.mark.slow
def test_the_first_failure_offered_is_the_node_drawn_red() -> None:
    at = app("digits_cnn", FORWARD)
    at.radio(key="fw_color_mode").set_value("progress").run()
    g = kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param")
    order = [r.name for r in g.order]
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        refs = dict(z)
    bad = [r for r in g.order if r.type == "nn.Linear"][0]
    refs[bad.op.outputs[0].name] = refs[bad.op.outputs[0].name] + 0.01  # the injected error
    at.session_state["kx_refs"], at.session_state["kx_refs_name"] = refs, "off.npz"
    forward_go(at, 10**6)
    assert at.radio(key="fw_color_mode").value == "errors"
    button = next(b for b in at.button if b.key == "fw_show_bad")
    assert f"{bad.name} (operator {order.index(bad.name) + 1})" in button.label
    click(at, "fw_show_bad")
    colors = viewer_colors(at)
    assert highlight(at) == bad.name and colors[bad.name] == C.ERROR_COLORS["first bad"]
    later = order[order.index(bad.name) + 1 :]
    assert all(colors.get(n) != C.ERROR_COLORS["first bad"] for n in later)


@pytest.mark.slow
def test_save_a_run_and_compare_another_input_with_it() -> None:
    at = app("digits_cnn", FORWARD)
    click(at, "fw_save_run")  # nothing has run yet: said so, nothing saved
    assert any("Nothing has run yet" in w.value for w in at.warning)
    assert "kx_saved_runs" not in at.session_state or not at.session_state["kx_saved_runs"]
    forward_go(at, 10**6)
    click(at, "fw_save_run")
    assert any("Saved 'run 1: digits_cnn, the model's sample input'" in s.value for s in at.success)
    # the same input against the saved run: every operator equal
    at.radio(key="fw_ref_choice").set_value("run:run 1: digits_cnn, the model's sample input").run()
    forward_go(at, 10**6)
    said = " ".join(texts(at.success))
    assert "12 of 12 operators run so far compared with the saved run 'run 1" in said and "all 12" in said, said
    # another input: the page compares with the run, and the first difference is the first operator after the input
    at.switch_page(HOME).run()
    at.radio(key="home_input_kind").set_value("random").run()
    at.switch_page(FORWARD).run()
    no_exception(at)
    assert at.radio(key="fw_ref_choice").value.startswith("run:run 1")
    forward_go(at, 10**6)
    assert any("over tolerance" in e.value for e in at.error), texts(at.error)
    first = next(b for b in at.button if b.key == "fw_show_bad")
    assert "(operator 1)" in first.label  # the input itself differs


@pytest.mark.slow
def test_every_tensor_is_downloadable_without_references() -> None:
    at = app()
    _upload_model(at)  # an uploaded model on seeded random input: no references at all
    at.switch_page(FORWARD).run()
    dl = [d for d in at.get("download_button") if "every tensor" in d.proto.label]
    assert dl and "empty until a Step" in dl[0].proto.help  # never disabled (no whole-page rerun to enable it)
    forward_step(at)
    dl = [d for d in at.get("download_button") if "every tensor" in d.proto.label]
    assert dl and not dl[0].proto.disabled
    assert not at.button(key="fw_save_run").disabled


def _param(at, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


@pytest.mark.slow
def test_an_uploaded_model_survives_a_reload_by_its_digest_in_the_url() -> None:
    at = app()
    _upload_model(at)
    at.switch_page(FORWARD).run()
    forward_step(at, 3)
    digest = _param(at, "upload")
    assert digest and _param(at, "model") is None and _param(at, "step") == "3"
    reloaded = app(None, FORWARD, query={"upload": digest, "step": "3"})  # a new session from the same URL
    assert any("`small_cnn.pnnx.param`: 11 operators" in c.value for c in reloaded.caption)
    assert highlight(reloaded) == "relu" and not reloaded.warning
    assert _param(reloaded, "upload") == digest


@pytest.mark.slow
def test_a_link_to_an_upload_the_server_no_longer_has_says_so() -> None:
    at = app(None, FORWARD, query={"upload": "0123456789abcdef", "step": "2"})
    said = " ".join(texts(at.warning))
    assert "no longer has" in said and "0123456789abcdef" in said and "Upload the model again" in said
    assert not viewers(at)  # no model: not quietly digits_cnn
    assert _param(at, "upload") == "0123456789abcdef"  # the link stays: re-uploading restores it
    at.switch_page(HOME).run()
    no_exception(at)
    assert any("no longer has" in w.value for w in at.warning)
    assert "No model loaded" in " ".join([m.value for m in at.sidebar.markdown] + [c.value for c in at.sidebar.caption])


@pytest.mark.slow
def test_a_link_to_a_bundled_model_that_does_not_exist_says_what_opened_instead() -> None:
    at = app(None, FORWARD, query={"model": "resnet1000"})
    assert any("`resnet1000` that this app does not have: opened `digits_cnn` instead" in w.value for w in at.warning)


@pytest.mark.slow
def test_a_failing_operator_shows_its_failing_output_first() -> None:
    """nn.LSTM makes three tensors; its hidden state alone is off: going to the first failure
    shows that tensor (the one that made the node red), not the operator's last output."""
    case = DATA / "ops" / "rnn_lstm_proj"
    at = app()
    at.file_uploader(key="home_param").upload("lstm.pnnx.param", (case / "model.pnnx.param").read_bytes())
    at.file_uploader(key="home_bin").upload("lstm.pnnx.bin", (case / "model.pnnx.bin").read_bytes())
    next(b for b in at.button if b.label == "Load uploaded model").click().run()
    with np.load(case / "inputs.npz") as z:
        _use_input(at, z["in0"])
    with np.load(case / "operands.npz") as z:
        refs = dict(z)
    refs["2"] = refs["2"] + 0.01  # the LSTM's second output (h_n)
    at.session_state["kx_refs"], at.session_state["kx_refs_name"] = refs, "off.npz"
    at.switch_page(FORWARD).run()
    forward_go(at, 10**6)
    click(at, "fw_show_bad")
    assert highlight(at) == "rnn"
    tensors = next(g for g in at.get("button_group") if g.key == "fw_tensor_1")
    assert tensors.value == "out %2", tensors.value
    assert any("over tolerance" in e.value for e in at.error)


@pytest.mark.slow
def test_compare_the_model_after_kuiper_opt_with_a_run_saved_before(tmp_path) -> None:
    """resnet18 run and saved; `kuiper opt -O2` fuses each ReLU into its convolution; the
    optimised model uploaded and compared with the saved run: every operator it kept agrees,
    and the operands the passes removed are listed as such."""
    import subprocess
    import sys

    from conftest import ROOT

    out = tmp_path / "resnet18.opt.pnnx.param"
    cmd = [sys.executable, "-m", "kuiper_core.cli", "opt", str(SAMPLES / "resnet18.pnnx.param"), "-O2", "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=300)
    at = app("resnet18", FORWARD)
    forward_go(at, 10**6)
    click(at, "fw_save_run")
    at.switch_page(HOME).run()
    _upload_model_files(at, out, out.with_suffix(".bin"))
    _use_input(at, np.load(SAMPLES / "resnet18.input.npy"))
    at.switch_page(FORWARD).run()
    at.radio(key="fw_ref_choice").set_value("run:run 1: resnet18, the model's sample input").run()
    forward_go(at, 10**6)
    said = " ".join(texts(at.success))
    assert "43 of 43 operators run so far compared with the saved run 'run 1: resnet18" in said, said
    assert "all 43 within tolerance" in said
    unmatched = next(df.value for df in at.dataframe if "why" in df.value.columns)
    assert len(unmatched) == 8 and unmatched["why"].str.contains("optimisation removed it").all()


@pytest.mark.slow
def test_the_difference_view_is_scaled_from_zero_to_the_tolerance() -> None:
    """digits_cnn's first conv agrees with PyTorch within float noise: its difference picture
    runs from 0 to the tolerance (not from the noise's min to its max) and says so."""
    at = app("digits_cnn", FORWARD)
    forward_step(at, 2)
    at.session_state["fw_view"] = "difference"
    at.run()
    no_exception(at)
    caption = " ".join(c.value for c in at.caption)
    assert "coloured from 0 to" in caption and "(the tolerance)" in caption, caption
