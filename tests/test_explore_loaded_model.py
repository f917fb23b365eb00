"""kuiper_core.explore.loaded_model and bundled_models: the app's model record, read and built
without raising, and the bundled catalogue, without Streamlit."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

from kuiper_core.errors import LimitError
from kuiper_core.explore import bundled_models as bundled
from kuiper_core.explore.app_limits import APP_LIMITS, check_upload_size
from kuiper_core.explore.loaded_model import RELEASED, LoadedModel, load_upload, model_bytes, read_model, release
from kuiper_core.formats import OpenedModel, open_model
from kuiper_core.graph import Graph

SAMPLES = ROOT / "sample_models"
TINY = (SAMPLES / "tiny_mlp.pnnx.param").read_bytes(), (SAMPLES / "tiny_mlp.pnnx.bin").read_bytes()


def test_an_upload_is_read_and_built() -> None:
    model = load_upload("d" * 16, "tiny.pnnx.param", *TINY, open_model, APP_LIMITS)
    assert model.ok and model.error is None and model.source == "upload"
    assert model.opened is not None and model.graph is model.opened.graph
    (y,) = model.runtime.forward(np.zeros((1, 1, 8, 8), np.float32)) if model.runtime else (None,)
    assert y is not None and y.shape == (1, 10) and np.isclose(y.sum(), 1.0)  # a softmax


def test_a_parse_failure_is_kept_as_located_text_not_raised() -> None:
    model = load_upload(
        "e" * 16, "bad.pnnx.param", b"7767517\n1 1\nnot an operator line\n", None, open_model, APP_LIMITS
    )
    assert not model.ok and model.graph is None
    assert model.error_kind is not None and model.error and "bad.pnnx.param" in model.error


def test_a_build_failure_keeps_the_graph() -> None:
    param = TINY[0].replace(b"nn.ReLU ", b"nn.NoSuchLayer ")
    model = load_upload("f" * 16, "odd.pnnx.param", param, TINY[1], open_model, APP_LIMITS)
    assert model.graph is not None and model.runtime is None and not model.ok
    assert model.error and "NoSuchLayer" in model.error


def test_an_engine_bug_is_said_without_a_traceback_and_the_folder_is_hidden() -> None:
    def read() -> Graph:
        raise RuntimeError("/srv/app/x exploded")

    model = read_model(LoadedModel("k", "m", "upload"), read, APP_LIMITS, hide="/srv/app/")
    assert model.error == "internal error while loading the model: RuntimeError: x exploded"
    assert model.error_kind == "RuntimeError"


def test_an_upload_over_the_size_limit_is_refused_before_it_is_read() -> None:
    small = APP_LIMITS.replace(max_upload_bytes=100)
    with pytest.raises(LimitError, match="the .npz upload is 101 bytes"):
        check_upload_size("the .npz", b"x" * 101, small)
    check_upload_size("the .npz", b"x" * 100, small)
    opened: list[Any] = []

    def opener(*args: Any, **kwargs: Any) -> OpenedModel:
        opened.append(args)
        return open_model(*args, **kwargs)

    model = load_upload("a" * 16, "big.pnnx.param", *TINY, opener, small)
    assert not model.ok and model.error_kind == "LimitError" and opened == []


def test_model_bytes_counts_weights_and_arrays_and_release_empties() -> None:
    model = load_upload("b" * 16, "tiny.pnnx.param", *TINY, open_model, APP_LIMITS)
    assert model.graph is not None
    weights = model.graph.weight_bytes()
    assert weights == (32 * 64 + 32 + 10 * 32 + 10) * 4
    before = model_bytes(model)
    assert before >= weights
    model.sample_input = np.zeros(1000, np.float32)
    assert model_bytes(model) == before + 4000
    release(model)
    assert model.graph is None and model.runtime is None and model.sample_input is None
    assert model_bytes(model) == 0 and model.error == RELEASED


def test_the_catalogue_lists_present_models_default_first() -> None:
    names = list(bundled.catalogue(SAMPLES))
    assert names[0] == "digits_cnn" and "resnet18" in names
    assert bundled.catalogue(SAMPLES / "no such folder") == {}


def test_the_catalogue_leaves_out_a_model_whose_files_are_missing(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "models.json", tmp_path / "models.json")
    for ext in ("param", "bin"):
        shutil.copy(SAMPLES / f"tiny_mlp.pnnx.{ext}", tmp_path)
    assert list(bundled.catalogue(tmp_path)) == ["tiny_mlp"]


def test_the_digest_follows_the_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one")
    first = bundled.files_digest([a, b])  # b absent: empty
    assert len(first) == 16 and bundled.stamps([a, b])[1] == (0, 0)
    b.write_bytes(b"")
    assert bundled.files_digest([a, b]) == first
    a.write_bytes(b"two")
    assert bundled.files_digest([a, b]) != first and bundled.stamps([a])[0][0] == 3


def test_a_bundled_model_comes_with_its_arrays() -> None:
    meta = bundled.catalogue(SAMPLES)["digits_cnn"]
    model = bundled.load_bundled(SAMPLES, "digits_cnn", "digest", meta, open_model, APP_LIMITS)
    assert model.ok and model.source == "bundled" and model.description
    assert model.sample_input is not None and model.sample_input.shape == (1, 1, 8, 8)
    assert len(model.expected) == 1 and model.expected[0].shape == (1, 10)
    assert model.examples is not None and model.example_labels is not None
    assert len(model.examples) == len(model.example_labels) > 0
    assert model.runtime is not None
    (y,) = model.runtime.forward(model.sample_input)
    np.testing.assert_allclose(y, model.expected[0], rtol=1e-4, atol=1e-5)


def test_a_broken_bundled_file_is_said_without_the_server_s_folder(tmp_path: Path) -> None:
    folder = tmp_path / "sample_models"
    folder.mkdir()
    (folder / "m.pnnx.param").write_text("7767517\n1 1\nbroken\n")
    model = bundled.load_bundled(folder, "m", "digest", {}, open_model, APP_LIMITS)
    assert model.error is not None and "m.pnnx.param:3:" in model.error
    assert str(tmp_path) not in model.error and model.sample_input is None and model.expected == []
