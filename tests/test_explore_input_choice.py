"""kuiper_core.explore.input_choice: the session's chosen input resolved to arrays, with what
they truly are, without Streamlit."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.errors import LimitError
from kuiper_core.explore.app_limits import APP_LIMITS
from kuiper_core.explore.input_choice import kept_input, kept_input_key, resolve_input, shared_synthetic
from kuiper_core.explore.loaded_model import LoadedModel
from kuiper_core.explore.tensors import arrays_digest

ONE = [("in0", (1, 1, 8, 8), "f32")]
TWO = [("a", (1, 4), "f32"), ("b", (2, 3), "f32")]


def _model(sample: bool = True, examples: int = 0) -> LoadedModel:
    model = LoadedModel("k", "m", "bundled")
    if sample:
        model.sample_input = np.full((1, 1, 8, 8), 7, np.float32)
    if examples:
        model.examples = np.arange(examples * 64, dtype=np.float32).reshape(examples, 1, 8, 8)
        model.example_labels = np.arange(examples)
    return model


def test_the_sample_input_is_the_default() -> None:
    model = _model()
    got = resolve_input(model, None, ONE, {})
    assert got.is_sample and got.arrays[0] is model.sample_input and got.note is None
    assert got.description == "the model's sample input"


def test_a_model_without_a_sample_falls_back_to_seeded_random_and_says_so() -> None:
    got = resolve_input(_model(sample=False), {"kind": "sample", "seed": 3}, ONE, {})
    assert got.kind == "random" and not got.is_sample and got.note == "this model has no sample input"
    assert got.description == "seeded random numbers (seed 3) (this model has no sample input)"
    again = resolve_input(_model(sample=False), {"kind": "random", "seed": 3}, ONE, {})
    np.testing.assert_array_equal(got.arrays[0], again.arrays[0])  # the same seed, the same numbers
    assert again.note is None and got.arrays[0].shape == (1, 1, 8, 8)


def test_several_inputs_get_one_array_each_with_its_own_seed() -> None:
    got = resolve_input(_model(), {"kind": "sample", "seed": 0}, TWO, {})  # a sample is for one input
    assert [a.shape for a in got.arrays] == [(1, 4), (2, 3)] and got.kind == "random"
    zeros = resolve_input(_model(), {"kind": "zeros"}, TWO, {})
    assert zeros.description == "zeros" and all(not a.any() for a in zeros.arrays)


def test_a_held_out_example_by_index_with_its_label() -> None:
    model = _model(examples=3)
    got = resolve_input(model, {"kind": "example", "index": 2}, ONE, {})
    assert got.kind == "example" and got.description == "held-out example 3 of 3, a 2"
    assert model.examples is not None
    np.testing.assert_array_equal(got.arrays[0], model.examples[2:3])
    out_of_range = resolve_input(model, {"kind": "example", "index": 3}, ONE, {})
    assert out_of_range.kind == "random" and out_of_range.note == "this model has no bundled examples"


def test_an_uploaded_array_or_drawing_and_what_is_missing() -> None:
    x = np.ones((1, 1, 8, 8), np.float32)
    got = resolve_input(_model(), {"kind": "npy"}, ONE, {"npy": (x, "x.npy")})
    assert got.arrays[0] is x and got.description == "uploaded array x.npy"
    drawn = resolve_input(_model(), {"kind": "drawing"}, ONE, {"drawing": (x, None)})
    assert drawn.description == "your drawing"
    nothing = resolve_input(_model(), {"kind": "drawing"}, ONE, {})
    assert nothing.kind == "random" and nothing.note == "nothing drawn yet"
    no_file = resolve_input(_model(), {"kind": "image"}, ONE, {"npy": (x, "x.npy")})
    assert no_file.note == "no usable file yet"


def test_an_unknown_kind_is_seeded_random_without_a_note() -> None:
    got = resolve_input(_model(), {"kind": "from an old session", "seed": 1}, ONE, {})
    assert got.kind == "random" and got.note is None


def test_the_synthetic_maker_is_the_caller_s() -> None:
    calls: list[tuple[str, tuple[int, ...], str, int]] = []

    def make(kind: str, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
        calls.append((kind, shape, dtype, seed))
        return np.zeros(shape, np.float32)

    resolve_input(_model(), {"kind": "ones", "seed": 5}, TWO, {}, make)
    assert calls == [("ones", (1, 4), "f32", 5), ("ones", (2, 3), "f32", 6)]


def test_a_shared_synthetic_input_is_read_only_and_within_the_limits() -> None:
    a = shared_synthetic("ones", (2, 3), "f32", 0, APP_LIMITS)
    assert not a.flags.writeable and a.sum() == 6
    with pytest.raises(LimitError):
        shared_synthetic("random", (1, 3, 16000, 16000), "f32", 0, APP_LIMITS)


def test_an_input_is_kept_under_the_digest_of_its_content() -> None:
    x = np.arange(6, dtype=np.float32)
    digest, kept = kept_input("npy", x, "x.npy")
    assert digest == arrays_digest([x]) and kept.digest == kept_input_key(digest) == f"input:{digest}"
    assert kept.value == ("npy", x, "x.npy") and kept.nbytes == 24
