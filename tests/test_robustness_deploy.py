"""Issue 35: the classroom deployment safe by default. No path on the server is offered unless
KUIPER_SERVER_MODELS names the one folder it reads from (and then nothing outside it, and no
message that tells which paths exist); link values are validated and never rendered as
Markdown; no server path reaches a page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from apptest_helpers import FORWARD, HOME, app, no_exception, texts

from kuiper_core.errors import InputError
from kuiper_core.explore import model_files as F
from kuiper_core.explore.messages import error_text, hide_server_paths

ROOT = Path(__file__).resolve().parent.parent
DEBUG = ROOT / "tests" / "data" / "debug_models"
PHISH = "x[Session expired: log in again](https://evil.example/login)"


# -- the server's models folder ---------------------------------------------------------------------
def _models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("small_cnn.pnnx.param", "small_cnn.pnnx.bin", "small_cnn.onnx"):
        (folder / name).write_bytes((DEBUG / name).read_bytes())
    (tmp_path / "secret.onnx").write_bytes((DEBUG / "small_cnn.onnx").read_bytes())
    (folder / "link.onnx").symlink_to(tmp_path / "secret.onnx")
    (folder / "sub").mkdir()
    return folder


def test_a_file_in_the_folder_opens_by_its_name(tmp_path) -> None:
    folder = _models(tmp_path)
    request = F.from_path("small_cnn.pnnx.param", 1 << 30, folder)
    assert request.kind == "pnnx" and request.bin is not None
    assert F.from_path(str(folder / "small_cnn.onnx"), 1 << 30, folder).kind == "onnx"  # absolute, inside


@pytest.mark.parametrize(
    "path",
    [
        "../secret.onnx",  # exists, outside
        "link.onnx",  # a symlink inside pointing outside
        "/etc/passwd",
        "/etc/no-such-file.onnx",
        "missing.onnx",
        "sub",  # a folder
        "sub/../../secret.onnx",
        "small_cnn.pnnx.bin",  # no model file name
        ".",
    ],
)
def test_anything_else_gets_one_message_that_says_nothing_of_existence(tmp_path, path: str) -> None:
    folder = _models(tmp_path)
    with pytest.raises(InputError) as info:
        F.from_path(path, 1 << 30, folder)
    assert str(info.value).split(":", 1)[1] == (
        " give the name of a model file in this server's models folder (a name ending in "
        + ", ".join(s for m in F.BY_NAME.values() for s in m.SUFFIXES)
        + ")"
    )


def test_a_fifo_in_the_folder_does_not_hang(tmp_path) -> None:
    folder = _models(tmp_path)
    os.mkfifo(folder / "pipe.onnx")
    with pytest.raises(InputError, match="models folder"):
        F.from_path("pipe.onnx", 1 << 30, folder)


def test_the_folder_comes_from_the_environment_only(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(F.SERVER_MODELS_ENV, raising=False)
    assert F.server_models_folder() is None
    monkeypatch.setenv(F.SERVER_MODELS_ENV, str(tmp_path / "nowhere"))
    assert F.server_models_folder() is None
    monkeypatch.setenv(F.SERVER_MODELS_ENV, str(tmp_path))
    assert F.server_models_folder() == tmp_path.resolve()


def test_no_recipe_in_deploy_sets_a_models_folder_outside_one_configured_folder() -> None:
    """Safe by default: the field is off unless KUIPER_SERVER_MODELS is set, and no recipe
    sets it to a folder holding anything but models (root, home, the repository)."""
    for recipe in (ROOT / "deploy").iterdir():
        text = recipe.read_text(errors="replace")
        for line in text.splitlines():
            if "KUIPER_SERVER_MODELS" in line and "=" in line:
                value = line.split("=", 1)[1].strip().strip("\"'")
                assert value not in ("/", "~", "$HOME", ".", "/app", "/srv"), (recipe.name, line)


# -- server paths on a page -------------------------------------------------------------------------------
def test_a_converter_crash_shows_no_server_path() -> None:
    from kuiper_core.errors import ConversionError

    crash = ConversionError(
        "m.onnx: the pnnx converter failed (exit code -11); its last lines:\n"
        f"  could not load {ROOT}/.venv/lib/python3.11/site-packages/pnnx/libtorch.so\n"
        "  #3 0x7f01 in pnnx::load_onnx (/usr/lib/x86_64-linux-gnu/libstdc++.so.6+0x1b2)\n"
        "  Exception raised from size at /home/builder/pytorch/c10/core/TensorImpl.h:1234 (most recent call first):\n"
        "  frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /opt/venv/lib/libc10.so)\n"
        "  frame #1: <unknown function> + 0x1b2 (0x7f in /opt/venv/lib/libtorch_cpu.so)\n"
        "  see https://github.com/pnnx/pnnx/issues for help"
    )
    shown = error_text(crash)
    assert str(ROOT) not in shown and "/usr/lib" not in shown and "site-packages" not in shown
    assert "…/libtorch.so" in shown and "https://github.com/pnnx/pnnx/issues" in shown
    assert "frame #" not in shown and "0x7f01" not in shown and "(1 line of a C++ backtrace left out)" in shown
    assert "(2 lines of a C++ backtrace left out)" in shown
    assert "…/TensorImpl.h:1234" in shown and "/home/builder" not in shown
    assert hide_server_paths("add(@0,@1)/2 and [1,3,224,224] and m.pnnx.param:4:2") == (
        "add(@0,@1)/2 and [1,3,224,224] and m.pnnx.param:4:2"
    )


# -- links -------------------------------------------------------------------------------------------------
def _markdown_of(at) -> str:
    parts = []
    for kind in (at.warning, at.error, at.info, at.markdown, at.caption, at.success):
        parts += texts(kind)
    return "\n".join(str(p) for p in parts)


@pytest.mark.slow  # AppTest runs: seconds on a loaded machine
@pytest.mark.parametrize(
    "query",
    [
        {"model": PHISH},
        {"upload": PHISH},
        {"upload": "`x`[a](https://evil.example)"},
        {"model": "m" * 5000},
        {"upload": "0" * 5000},
    ],
)
def test_a_link_value_never_becomes_markdown_on_a_page(query: dict[str, str]) -> None:
    for page in (HOME, FORWARD):
        at = app(None, page, query=query)
        no_exception(at)
        shown = _markdown_of(at)
        assert "](" not in shown and "evil.example" not in shown, shown
        assert "m" * 100 not in shown and "0" * 100 not in shown


@pytest.mark.slow  # AppTest runs: seconds on a loaded machine
def test_a_valid_link_value_is_still_said() -> None:
    at = app(None, HOME, query={"model": "no_such_model"})
    no_exception(at)
    assert any("`no_such_model`" in w for w in texts(at.warning)), texts(at.warning)
    at = app(None, HOME, query={"upload": "0123456789abcdef"})
    no_exception(at)
    assert any("`0123456789abcdef`" in w for w in texts(at.warning)), texts(at.warning)


@pytest.mark.parametrize(
    "name", ["x`[Log in](evil.example)`.onnx", "www.evil.example.pnnx.param", "![i](a.png).onnx", "a<script>.onnx"]
)
def test_an_uploaded_file_name_is_inert_as_markdown(name: str) -> None:
    import sys

    sys.path.insert(0, str(ROOT))
    from pages.common import display_name

    shown = display_name(name)
    assert not any(c in shown for c in "`[]<>") and "www." not in shown.lower()
    assert shown.endswith(name.rsplit(".", 1)[1])


@pytest.mark.parametrize(
    "name",
    [
        "[Session_expired](https://evil.example/login)",
        "<img/src=x/onerror=alert(1)>",
        "www.evil.example",
        "a@evil.example",
        ":red[x]**y**_z_",
        "a`b``c`",
        "`lead",
        "x\ny",
    ],
)
def test_a_models_own_names_are_inert_as_markdown(name: str) -> None:
    """Operator, operand, weight and input names (any text a `.param` or `.kir` holds) as the
    pages put them into Markdown: every ASCII punctuation character escaped outside code spans
    (with autolinks broken), and a code span they cannot end; one line either way.
    tests/test_browser_links.py checks the Graph page in Chromium."""
    import re

    from kuiper_core.explore.upload_names import code_span, md_text

    text = md_text(name)
    assert "\n" not in text and not re.search(r"(?<!\\)[\[\]()<>`*_:@]", text)
    assert "://" not in text and "www." not in text.lower()
    assert re.sub(r"\\(.)", r"\1", text).replace("\u2060", "") == name.replace("\n", " ")
    span = code_span(name)
    fence = re.match(r"`+", span).group(0)
    inner = span[len(fence) : -len(fence)]
    assert span.endswith(fence) and fence not in inner and "\n" not in span
    assert inner.strip(" ") == name.replace("\n", " ")


def test_a_verdict_quoting_a_node_name_shows_no_link_and_no_path() -> None:
    """A 2 KB `.onnx` of 12 Adds over a ConstantOfShape of 2^26, every node named
    `[Session expired: log in again](https://evil.example/login) N`: pnnx folds it, and the
    check's onnxruntime (every value kept) runs out of memory with a message quoting the node's
    name and its build path; the verdict's headline was a real link in every page's sidebar."""
    import re

    from kuiper_core.explore.conversion_verdict import verdict_view
    from kuiper_core.formats.conversion_check import not_checked

    said = (
        "the framework could not run the original on the probe: no reference could be computed: onnxruntime "
        "failed: IsolatedRunError: onnxruntime failed: Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status "
        "code returned while running Add node. Name:'[Session expired: log in again](https://evil.example/login)"
        " 7' Status Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:360 void* "
        "onnxruntime::BFCArena::AllocateRawInternal"
    )
    view = verdict_view(not_checked(said))
    assert view is not None
    shown = view.line  # what every page's model line draws
    assert not re.search(r"(?<!\\)[\[\]()]", shown) and "://" not in shown
    plain = re.sub(r"\\(.)", r"\1", shown).replace("\u2060", "")
    assert "onnxruntime_src" not in plain and "…/bfc_arena.cc:360" in plain and "Name:'[Session expired" in plain


def test_homes_tables_keep_a_types_markdown_inert() -> None:
    """A `.param` operator type with a backtick (`` `[Log_in](https://evil.example) ``) left its
    code span in Home's type table and was a link; names in the other columns were Markdown."""
    import re

    from kuiper_core.explore.summary import markdown_table

    evil = "`[Log_in](https://evil.example)"
    text = markdown_table([{"type": evil, "count": "[x](https://evil.example)"}], code=("type",))
    row = text.splitlines()[2]
    assert row.startswith("| `` `[Log_in](https://evil.example) `` | ")  # one code span holding it all
    assert not re.search(r"(?<!\\)[\[\]()]", row.split(" | ")[1]) and "://" not in row.split(" | ")[1]
