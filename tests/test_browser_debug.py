"""Debugging your own model in a real browser (issue 22): Chromium driven by Playwright.

A user's small conv net (tests/data/debug_models, made by tools/export_debug_fixtures.py)
uploaded with PyTorch forward-hook references; a reload after the upload keeps the model; the
first failure the page offers is the node drawn red; every tensor downloaded, uploaded back
and a saved run compared with another input.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from app_server import (
    SCREENSHOTS,
    VIEW,
    skip_without_browser,
    chromium_page,
    current_highlight,
    exception_boxes,
    goto_page,
    pick_bundled_model,
    streamlit_server,
    wait_caught_up,
    wait_idle,
)
from conftest import DATA, SAMPLES

from kuiper_core import load
from kuiper_core.explore import compare as C

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

skip_without_browser()

DEBUG = DATA / "debug_models"


def _converter() -> bool:
    from kuiper_core.formats import converter_available

    return converter_available()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def page():
    with streamlit_server(timeout=120) as url, chromium_page(width=1400, height=1000) as p:
        p.goto(url)
        p.get_by_text("Kuiper Explorer").first.wait_for()
        wait_idle(p)
        p.kx_url = url  # type: ignore[attr-defined]
        yield p


def button(page, name):
    return page.get_by_role("button", name=name, exact=True)


def upload(page, label: str, name: str, data: bytes) -> None:
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    box.locator('input[type="file"]').set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}]
    )
    box.get_by_text(name).wait_for()
    wait_idle(page)


def alerts(page) -> list[str]:
    return page.locator('[data-testid="stAlert"]').all_inner_texts()


def fill_of(page, title: str) -> str | None:
    """The fill the graph viewer gave the node titled `title`."""
    return page.locator(VIEW).first.evaluate(
        """(v, title) => { const g = [...v.querySelectorAll('svg g.node')]
                   .find(g => g.querySelector(':scope > title').textContent === title);
                 const s = g && g.querySelector('polygon, path, ellipse'); return s ? s.getAttribute('fill') : null; }""",
        title,
    )


def run_all(page, total: int) -> None:
    if not button(page, "End").is_disabled():
        button(page, "End").click()
    page.get_by_text(re.compile(rf"^Operator {total} of {total}")).wait_for(timeout=120_000)
    wait_caught_up(page)


def colour_mode(page) -> str:
    radio = page.locator('[data-testid="stRadio"]').filter(has_text="run so far")
    return radio.locator("label:has(input:checked)").inner_text().strip()


def test_hook_keyed_references_of_an_uploaded_model(page) -> None:
    upload(page, "model.pnnx.param", "small_cnn.pnnx.param", (DEBUG / "small_cnn.pnnx.param").read_bytes())
    upload(page, "model.pnnx.bin", "small_cnn.pnnx.bin", (DEBUG / "small_cnn.pnnx.bin").read_bytes())
    button(page, "Load uploaded model").click()
    page.get_by_text("Summary of small_cnn.pnnx.param").wait_for()
    wait_idle(page)
    page.locator('[data-testid="stRadio"]').filter(has_text="Input to use").get_by_text("upload a .npy").click()
    wait_idle(page)
    buf = io.BytesIO()
    np.save(buf, np.load(DEBUG / "small_cnn.input.npy"))
    upload(page, "A .npy array", "input.npy", buf.getvalue())
    goto_page(page, "forward")
    run_all(page, 11)
    assert colour_mode(page) == "run so far"  # nothing to compare with yet
    upload(page, "Reference .npz", "hooks.npz", (DEBUG / "small_cnn.hooks.npz").read_bytes())
    page.get_by_text(re.compile("7 of 11 operators run so far compared")).wait_for()
    wait_idle(page)
    said = " ".join(alerts(page))
    assert "all 7 within tolerance" in said and "2 match nothing" in said, said
    assert colour_mode(page) == "error vs reference"  # switched by the upload
    assert fill_of(page, "block.conv") == C.ERROR_COLORS[C.OK] and fill_of(page, "fc") == C.ERROR_COLORS[C.OK]
    assert not page.get_by_text("def save_references").first.is_visible()  # the snippet waits in its expander
    page.get_by_text("Make a reference file from your PyTorch model").click()
    page.get_by_text("def save_references").first.wait_for()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "forward_hook_references.png"), full_page=True)
    assert exception_boxes(page) == []


def test_a_reload_after_an_upload_keeps_the_model(page) -> None:
    assert "upload=" in page.url and "step=11" in page.url, page.url
    page.reload()
    page.get_by_text(re.compile(r"^Operator 11 of 11")).wait_for(timeout=120_000)
    wait_idle(page)
    main = page.locator('[data-testid="stMain"]').inner_text()
    assert "small_cnn.pnnx.param" in main and "digits_cnn" not in main
    assert "Model: small_cnn.pnnx.param" in page.locator('[data-testid="stSidebar"]').inner_text()
    # a link to an upload this server never had says so, and opens no other model
    page.goto(page.kx_url + "/forward?upload=0123456789abcdef")  # type: ignore[attr-defined]
    page.get_by_text(re.compile("this server no longer has")).wait_for()
    wait_idle(page)
    assert "digits_cnn" not in page.locator('[data-testid="stMain"]').inner_text()
    assert exception_boxes(page) == []


def test_the_first_failure_is_the_node_drawn_red(page) -> None:
    pick_bundled_model(page, "digits_cnn")
    goto_page(page, "forward")
    g = load(SAMPLES / "digits_cnn.pnnx.param")
    order = [r.name for r in g.order]
    bad = next(r for r in g.order if r.type == "nn.Linear")
    with np.load(SAMPLES / "digits_cnn.operands.npz") as z:
        refs = dict(z)
    refs[bad.op.outputs[0].name] = refs[bad.op.outputs[0].name] + 0.01
    buf = io.BytesIO()
    np.savez(buf, **refs)
    upload(page, "Reference .npz", "off_by_0.01.npz", buf.getvalue())
    run_all(page, len(order))
    go = button(page, f"Go to the first failure: {bad.name} (operator {order.index(bad.name) + 1})")
    go.click()
    page.get_by_text(
        re.compile(rf"^Operator {order.index(bad.name) + 1} of {len(order)}: {re.escape(bad.name)}")
    ).wait_for()
    wait_idle(page)
    assert current_highlight(page) == [bad.name]
    assert fill_of(page, bad.name) == C.ERROR_COLORS["first bad"]
    assert exception_boxes(page) == []


def test_download_every_tensor_then_compare_with_a_saved_run(page, tmp_path) -> None:
    page.goto(page.kx_url + "/forward?model=digits_cnn")  # type: ignore[attr-defined]  # a fresh session
    page.get_by_text("Step through Forward").first.wait_for(timeout=120_000)
    wait_idle(page)
    run_all(page, 12)
    with page.expect_download() as d:
        button(page, "Download every tensor computed so far (.npz)").click()
    path = tmp_path / "run.npz"
    d.value.save_as(path)
    button(page, "Save this run to compare with later").click()
    page.get_by_text(re.compile("Saved 'run 1: digits_cnn")).wait_for()
    wait_idle(page)
    upload(page, "Reference .npz", "run.npz", path.read_bytes())  # the download, back as a reference
    page.get_by_text(re.compile("12 of 12 operators run so far compared with the uploaded run.npz")).wait_for()
    assert any("all 12 within tolerance" in a for a in alerts(page)), alerts(page)
    # another input, compared with the saved run
    goto_page(page, "home")
    page.locator('[data-testid="stRadio"]').filter(has_text="Input to use").get_by_text("seeded random").click()
    wait_idle(page)
    goto_page(page, "forward")
    page.locator('[data-testid="stRadio"]').filter(has_text="a reference file").get_by_text(
        re.compile("saved run 1: digits_cnn")
    ).click()
    wait_idle(page)
    run_all(page, 12)
    said = " ".join(alerts(page))
    assert "compared with the saved run 'run 1: digits_cnn, the model's sample input'" in said, said
    assert "over tolerance" in said
    assert page.get_by_role("button", name=re.compile(r"Go to the first failure: .*\(operator 1\)")).count() == 1
    assert exception_boxes(page) == []


def _open_converted(page, path, shape: str | None = None, x: np.ndarray | None = None) -> None:
    """Home: upload an .onnx / TorchScript file, convert it with pnnx, use `x` (default: small_cnn's
    sample input)."""
    goto_page(page, "home")
    upload(page, "model.pnnx.param, .kir, .onnx", path.name, path.read_bytes())
    if shape is not None:
        field = page.get_by_role("textbox", name="Input shape(s) for pnnx")
        field.fill(shape)
        field.press("Enter")
        wait_idle(page)
    button(page, "Load uploaded model").click()
    page.get_by_text(f"Summary of {path.name}").wait_for(timeout=600_000)
    wait_idle(page)
    assert page.get_by_text(re.compile("converted from .* by pnnx")).count() >= 1
    kinds = page.locator('[data-testid="stRadio"]').filter(has_text="Input to use")
    kinds.get_by_text("seeded random").click()  # the radio may still show the previous model's choice
    wait_idle(page)
    kinds.get_by_text("upload a .npy").click()
    wait_idle(page)
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text="A .npy array")
    chosen = box.locator('[data-testid="stFileUploaderDeleteBtn"] button')
    if chosen.count():  # the uploader still shows the file chosen for the previous model
        chosen.first.click()
        wait_idle(page)
    buf = io.BytesIO()
    np.save(buf, np.load(DEBUG / "small_cnn.input.npy") if x is None else x)
    upload(page, "A .npy array", "input.npy", buf.getvalue())


@pytest.mark.skipif(not _converter(), reason="the pnnx converter is not installed")
@pytest.mark.parametrize(
    "file",
    [
        pytest.param("small_cnn.onnx", marks=pytest.mark.skipif(not _has("onnxruntime"), reason="needs onnxruntime")),
        pytest.param("small_cnn.pt", marks=pytest.mark.skipif(not _has("torch"), reason="needs torch")),
    ],
)
def test_upload_convert_and_compare_every_operator(page, file: str) -> None:
    """An .onnx or a TorchScript .pt: uploaded, converted by pnnx, references computed from its
    framework, Run all: every operator that makes a tensor is compared, all within tolerance."""
    _open_converted(page, DEBUG / file)
    goto_page(page, "forward")
    button(page, re.compile(r"^Compute references with")).click()
    page.get_by_text(re.compile("a reference for every one of the 9 operands")).wait_for(timeout=120_000)
    wait_idle(page)
    run_all(page, 11)
    said = " ".join(alerts(page))
    assert "11 of 11 operators run so far compared" in said and "all 11 within tolerance" in said, said
    assert colour_mode(page) == "error vs reference"
    fills = page.locator(VIEW).first.evaluate(
        "v => [...v.querySelectorAll('svg g.node')].map(g => g.querySelector('polygon, path, ellipse').getAttribute('fill'))"
    )
    assert fills.count(C.ERROR_COLORS[C.OK]) == 11, fills  # every operator green, the output node too (issue 38)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"forward_{file.replace('.', '_')}.png"), full_page=True)
    if file.endswith(".onnx"):  # docs/own_model.md's picture: the references and the error table
        page.get_by_role("heading", name="Compare with").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / "forward_compare.png"))
    assert exception_boxes(page) == []


def compare_every_operator(page, path, x: np.ndarray) -> tuple[int, int]:
    """Upload → convert → Compute references → Run all for any .onnx / .pt: (operators compared,
    operators run), every compared one within tolerance and drawn green."""
    from kuiper_core.formats import open_model

    total = len(open_model(path).graph.operators)  # the same conversion the app makes (cached)
    _open_converted(page, path, x=x)
    goto_page(page, "forward")
    button(page, re.compile(r"^Compute references with")).click()
    page.get_by_text(re.compile(r"computed a reference for (every one of the|\d+ of the) \d+ operands")).wait_for(
        timeout=600_000
    )
    wait_idle(page)
    run_all(page, total)
    said = " ".join(alerts(page))
    match = re.search(rf"(\d+) of {total} operators run so far compared .*: all \1 within tolerance", said)
    assert match, said
    assert colour_mode(page) == "error vs reference"
    assert exception_boxes(page) == []
    return int(match.group(1)), total


@pytest.mark.skipif(not _converter(), reason="the pnnx converter is not installed")
@pytest.mark.parametrize(
    "ext",
    [
        pytest.param("onnx", marks=pytest.mark.skipif(not _has("onnxruntime"), reason="needs onnxruntime")),
        pytest.param("pt", marks=pytest.mark.skipif(not _has("torch"), reason="needs torch")),
    ],
)
def test_a_torchvision_model_built_here_is_compared_operator_by_operator(page, tmp_path, ext: str) -> None:
    """torchvision's SqueezeNet 1.1 (10 classes, 64×64: built and exported here, nothing committed)
    as a user's .onnx or traced .pt: every operator that makes a tensor is compared, all green."""
    if not _has("torch"):
        pytest.skip("building the torchvision model needs torch")
    import torch

    try:
        from tools.export_user_models import squeezenet
        from tools.torchvision_cpu import torchvision  # noqa: F401 - skips when it cannot import
    except ImportError as e:
        pytest.skip(f"torchvision: {e}")
    torch.manual_seed(0)
    module, x = squeezenet()
    module = module.eval()
    path = tmp_path / f"squeezenet1_1.{ext}"
    if ext == "pt":
        torch.jit.trace(module, (x,)).save(str(path))
    else:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
            torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=17)
    compared, total = compare_every_operator(page, path, x.numpy())
    # every operator (pnnx.Output: the output it passes on), give or take pnnx.Input where only onnxruntime maps
    assert compared >= total - 2, (compared, total)
