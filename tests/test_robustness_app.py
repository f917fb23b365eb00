"""Issue 11, the app's part: hostile uploads through Streamlit's AppTest. Whatever is uploaded,
every page keeps working and says what went wrong; nothing is left on the server's disk."""

from __future__ import annotations

import io
import struct
import sys
import zlib

import numpy as np
import pytest
from conftest import ROOT, SAMPLES

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_app_home_graph_profile import app, no_exception, upload  # noqa: E402

PAGES = [
    "pages/2_graph.py",
    "pages/3_order.py",
    "pages/4_expressions.py",
    "pages/5_forward.py",
    "pages/6_profile.py",
    "pages/7_ir.py",
    "pages/8_passes.py",
]


def tiny_mlp() -> tuple[bytes, bytes]:
    return (SAMPLES / "tiny_mlp.pnnx.param").read_bytes(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes()


def shown(at: AppTest) -> str:
    return "\n".join([e.value for e in at.error] + [c.value for c in at.code])


def test_a_failing_load_does_not_break_every_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader caught only KuiperError and current_model() runs for the sidebar on every
    page: one bad upload raised everywhere until a browser reload."""
    import kuiper_core.pnnx

    def engine_bug(*args: object, **kwargs: object) -> None:
        raise RuntimeError("an engine bug")

    monkeypatch.setattr(kuiper_core.pnnx, "load_graph_bytes", engine_bug)
    at = upload(app(), b"7767517\n0 0\n", name="bug.pnnx.param")
    no_exception(at)
    assert "internal error while loading the model: RuntimeError: an engine bug" in shown(at)
    for page in PAGES:
        at.switch_page(page).run()
        no_exception(at)
        if page == "pages/2_graph.py":
            assert "Cannot use model 'bug.pnnx.param'" in shown(at)


def test_a_session_whose_model_cannot_load_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    at = upload(app(), *tiny_mlp())
    no_exception(at)
    common = sys.modules["pages.common"]

    def gone(*args: object, **kwargs: object) -> None:
        raise OSError("the cache was lost")

    monkeypatch.setattr(common, "load_uploaded", gone)
    at.switch_page("pages/2_graph.py").run()
    no_exception(at)
    at.switch_page("pages/1_home.py").run()
    no_exception(at)
    assert "could not be loaded and was closed" in "\n".join(e.value for e in at.error)


def test_long_utf8_file_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 300-byte UTF-8 name failed: it was used as a file name in a temp folder."""
    import tempfile

    def no_disk(*args: object, **kwargs: object) -> None:
        raise AssertionError("uploads must not be written to disk")

    monkeypatch.setattr(tempfile, "mkdtemp", no_disk)  # and nothing is left in a temp folder
    name = "模型" * 100 + "\n.pnnx.param"  # 600+ bytes, and a control character
    assert len(name.encode()) > 300
    at = upload(app(), *tiny_mlp(), name=name)
    no_exception(at)
    assert not at.error
    title = next(h.value for h in at.header if h.value.startswith("2. Summary"))
    assert "模型模型" in title and "\n" not in title and title.endswith("…`")  # shown cut to 120 characters


def test_error_details_show_no_tracebacks() -> None:
    """Tracebacks showed the server's paths: unexpected exceptions show their type only."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "type"


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.mark.parametrize(
    "array, message",
    [
        (np.zeros((0, 1, 8, 8), np.float32), "batch 0"),
        (np.zeros((1, 1, 8, 8), dtype=[("a", "f4"), ("b", "f4")]), "expected an array of numbers"),
    ],
)
def test_odd_npy_uploads_are_errors_on_home(array: np.ndarray, message: str) -> None:
    at = app()
    at.radio(key="home_bundled").set_value("digits_cnn").run()
    at.radio(key="home_input_kind").set_value("npy").run()
    at.file_uploader(key="home_npy").upload("x.npy", _npy(array)).run()
    no_exception(at)
    assert message in shown(at)


def test_tiny_upload_declaring_a_huge_input() -> None:
    """A 3-line upload declaring (1,3,16000,16000): Home built a random input of it."""
    text = b"7767517\n2 1\npnnx.Input in 0 1 x #x=(1,3,16000,16000)f32\npnnx.Output out 1 0 x\n"
    at = upload(app(), text, name="huge.pnnx.param")
    no_exception(at)
    assert "768,000,000 elements" in shown(at) and "max_tensor_elements" in shown(at)
    at.switch_page("pages/5_forward.py").run()
    no_exception(at)


def test_expression_page_refuses_a_huge_operand_number() -> None:
    at = app()
    at.switch_page("pages/4_expressions.py").run()
    at.radio(key="expr_mode").set_value("Type one").run()
    at.text_input(key="expr_text").set_value("add(@0,@3000000)").run()
    no_exception(at)
    assert "max_expression_operand" in shown(at)


def test_upload_over_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    at = app()
    common = sys.modules["pages.common"]
    monkeypatch.setattr(common, "APP_LIMITS", common.APP_LIMITS.replace(max_upload_bytes=1000))
    param, bin_bytes = tiny_mlp()
    at = upload(at, param + b"\n\n", bin_bytes)  # new bytes: not a model cached by another test
    no_exception(at)
    assert "upload is" in shown(at) and "max_upload_bytes" in shown(at)


def _png_claiming(width: int, height: int) -> bytes:
    """A valid 1x1 PNG whose header says width x height (a decompression bomb's header)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (1, 1)).save(buf, format="PNG")
    data = bytearray(buf.getvalue())
    ihdr = data[12:29]  # 'IHDR' + 13 bytes
    ihdr[4:12] = struct.pack(">II", width, height)
    data[12:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(ihdr)))
    return bytes(data)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_picture_claiming_gigapixels_is_refused_before_decoding() -> None:
    pytest.importorskip("PIL")
    at = app()
    at.radio(key="home_bundled").set_value("digits_cnn").run()
    at.radio(key="home_input_kind").set_value("image").run()
    at.file_uploader(key="home_img").upload("bomb.png", _png_claiming(10000, 10000), "image/png").run()
    no_exception(at)
    assert "10000x10000 pixels" in shown(at) and "max_tensor_elements" in shown(at)
    at.file_uploader(key="home_img").upload("worse.png", _png_claiming(60000, 60000), "image/png").run()
    no_exception(at)  # Pillow's own bomb check comes first here
    assert "decompression bomb" in shown(at)


@pytest.mark.slow
def test_hostile_names_on_every_page() -> None:
    """Operator and operand names are any tokens: quotes, backslashes, HTML, DOT record syntax,
    right-to-left marks, emoji, 3,000 characters. Every page lays them out without raising."""
    names = ["<b>\"x\\y'</b>", "{a|b}<c>", "\u202eevil\u200d", "🙂" * 3, "n" * 3000, "a\u00a0b", "%&$#@!"]
    ops = [f"pnnx.Input {names[0]} 0 1 {names[1]} #{names[1]}=(1,4)f32"]
    prev = names[1]
    for k, name in enumerate(names[2:]):
        out = f"{name}_o{k}"
        ops.append(f"nn.ReLU {name} 1 1 {prev} {out} #{out}=(1,4)f32")
        prev = out
    ops.append(f"pnnx.Expression {names[0]}e 1 1 {prev} y expr=add(@0,1.5) #y=(1,4)f32")
    ops.append(f"pnnx.Output {names[1]}o 1 0 y")
    text = "7767517\n" + f"{len(ops)} {len(ops) - 1}\n" + "\n".join(ops) + "\n"
    at = upload(app(), text.encode(), name="<img src=x onerror=alert(1)>.pnnx.param")
    no_exception(at)
    assert not at.error, shown(at)
    for page in PAGES + ["pages/1_home.py"]:
        at.switch_page(page).run()
        no_exception(at)


def test_ir_editor_runs_typed_text_under_the_apps_limits() -> None:
    """The IR page's editor parsed, built and ran typed text under the engine's defaults
    (2^28 elements a tensor, operands up to @4096) in the shared app process."""
    at = app()
    at.radio(key="home_bundled").set_value("expr_zoo").run()
    at.switch_page("pages/7_ir.py").run()
    area = at.text_area[0]
    assert "add(@0,@1)" in area.value
    area.set_value(area.value.replace("add(@0,@1)", "add(@0,@300)", 1)).run()
    at.button(key="ir_run").click().run()
    no_exception(at)
    assert "limit max_expression_operand = 256" in shown(at)


@pytest.mark.slow
def test_uploads_leave_nothing_in_the_temp_folder(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every upload was copied to a temp folder that was never deleted: uploads are now read
    from memory, so after a model, an input and every page the temp folder is still empty
    (nothing to clean up on eviction or exit)."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))
    param, bin_bytes = tiny_mlp()
    at = upload(app(), param + b"\n", bin_bytes, name="leave_nothing.pnnx.param")
    no_exception(at)
    at.radio(key="home_input_kind").set_value("npy").run()
    at.file_uploader(key="home_npy").upload("x.npy", _npy(np.zeros((1, 1, 8, 8), np.float32))).run()
    for page in PAGES + ["pages/1_home.py"]:
        at.switch_page(page).run()
        no_exception(at)
    assert list(scratch.rglob("*")) == []


def test_a_memory_error_on_a_page_is_said_so_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: pages caught only KuiperError; a MemoryError (a size no limit foresaw, e.g. an
    .npz asking for 24 GiB) escaped as a raw exception. Now it is a LimitError saying so."""
    import kuiper_core.explore.profile as profile

    def no_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError("Unable to allocate 24.0 GiB for an array")

    monkeypatch.setattr(profile, "profile_model", no_memory)
    at = app()
    at.switch_page("pages/6_profile.py").run()
    at.button(key="profile_run").click().run()  # (the server may hold an earlier test's profile)
    no_exception(at)
    assert "ran out of memory" in shown(at) and "The model failed while running" in "\n".join(e.value for e in at.error)
