"""kuiper_core.explore.session_link, stepper_cache and upload_names: what a link opens, the URL
a session writes, the session's Forward stepper and an uploaded file's shown name."""

from __future__ import annotations

import numpy as np
from conftest import ROOT

from kuiper_core.explore import session_link as link
from kuiper_core.explore.stepper_cache import StepperCache
from kuiper_core.explore.upload_names import display_name
from kuiper_core.explore.upload_store import StoredModel, content_digest
from kuiper_core.formats import open_model
from kuiper_core.runtime import RuntimeGraph

BUNDLED = ["digits_cnn", "tiny_mlp"]
STORED = StoredModel(content_digest({"param": b"x"}), "up.pnnx.param", {"param": b"x"})


def _find(digest: str) -> StoredModel | None:
    return STORED if digest == STORED.digest else None


def test_a_link_without_a_model_opens_the_default() -> None:
    linked = link.model_from_link(None, None, BUNDLED, _find)
    assert linked.choice == {"source": "bundled", "name": "digits_cnn"} and linked.note is None
    assert link.model_from_link(None, None, [], _find).choice is None


def test_a_bundled_model_the_app_does_not_have_opens_the_default_and_says_so() -> None:
    assert link.model_from_link(None, "tiny_mlp", BUNDLED, _find).choice == link.bundled_choice("tiny_mlp")
    linked = link.model_from_link(None, "resnet99", BUNDLED, _find)
    assert linked.choice == link.bundled_choice("digits_cnn")
    assert linked.note is not None and "`resnet99`" in linked.note and "`digits_cnn`" in linked.note
    markdown = link.model_from_link(None, "[x](http://e.com)", BUNDLED, _find)
    assert markdown.note is not None and "http" not in markdown.note  # a link's text is never repeated


def test_an_upload_comes_back_from_the_store_or_is_lost() -> None:
    found = link.model_from_link(STORED.digest, "tiny_mlp", BUNDLED, _find)
    assert found.stored is STORED and found.choice == link.upload_choice(STORED) and found.note is None
    lost = link.model_from_link("0" * 16, None, BUNDLED, _find)
    assert lost.choice == {"source": "lost", "name": "", "digest": "0" * 16} and lost.stored is None


def test_an_upload_digest_the_app_never_wrote_is_ignored_and_said() -> None:
    asked: list[str] = []

    def find(digest: str) -> StoredModel | None:
        asked.append(digest)
        return None

    for text in ("0" * 15, "0" * 17, "G" * 16, "../../etc/passwd"):
        linked = link.model_from_link(text, None, BUNDLED, find)
        assert linked.choice == link.bundled_choice("digits_cnn") and linked.note == link.BAD_UPLOAD_NOTE
    assert asked == []
    both = link.model_from_link("bad", "resnet99", BUNDLED, find)
    assert both.note is not None and both.note.startswith(link.BAD_UPLOAD_NOTE) and "resnet99" in both.note


def test_the_url_names_the_model_the_input_and_the_page_position() -> None:
    page = {"step": "4", "q": None}
    assert link.link_params(link.bundled_choice("tiny_mlp"), None, page) == {"model": "tiny_mlp", "step": "4"}
    assert link.link_params(link.upload_choice(STORED), "ab" * 8, {}) == {"upload": STORED.digest, "input": "ab" * 8}
    assert link.link_params(link.lost_choice("1" * 16), None, {}) == {"upload": "1" * 16}  # re-uploading restores it
    assert link.link_params(None, None, {"step": "2"}) == {"step": "2"}


def test_messages_name_the_digest_and_the_sizes() -> None:
    assert "`abc`" in link.lost_model_message("abc")
    assert "(3 MB)" in link.unkept_note(3 << 20, 1 << 30) and "1 GB" in link.unkept_note(3 << 20, 1 << 30)
    assert link.is_digest("0123456789abcdef") and not link.is_digest(None) and not link.is_digest("0123456789ABCDEF")


def test_the_stepper_is_kept_while_the_model_and_input_stay() -> None:
    runtime = RuntimeGraph.from_graph(open_model(ROOT / "sample_models" / "tiny_mlp.pnnx.param").graph).build()
    x, y = np.zeros((1, 1, 8, 8), np.float32), np.ones((1, 1, 8, 8), np.float32)
    cache = StepperCache()
    first = cache.get("m", runtime, [x])
    first.step()
    assert cache.get("m", runtime, [x.copy()]) is first and first.cursor == 0  # same content: kept
    assert cache.get("m", runtime, [y]) is not first  # another input
    second = cache.get("m", runtime, [y])
    assert cache.get("other", runtime, [y]) is not second  # another model


def test_an_uploaded_name_is_shown_without_path_controls_or_markdown() -> None:
    assert display_name("C:\\Users\\me\\model.onnx") == "model.onnx"
    assert display_name("a\x00b\u202e.pnnx.param") == "ab.pnnx.param"
    shown = display_name("[x](http://www.e.com)`!<b>.onnx")
    assert not any(c in shown for c in "`[]<>") and "www." not in shown.lower() and shown.endswith(".onnx")
    assert display_name("") == "model.pnnx.param"
    long = display_name("a" * 300 + ".onnx")
    assert len(long) == 120 and long.endswith("…")
