"""Hypothesis fuzz cases for the app: mutated uploads through Streamlit's AppTest, run by
tests/test_fuzz.py in a subprocess under an address-space limit. Whatever is uploaded, no page
may raise, and each case stays within its time budget."""

from __future__ import annotations

import io
import time

import numpy as np
from fuzz_engine import SAMPLES, SETTINGS, mutated_bin, mutated_param
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

ROOT = SAMPLES.parent
UPLOADABLE = [
    (SAMPLES / f"{n}.pnnx.param", SAMPLES / f"{n}.pnnx.bin", SAMPLES / f"{n}.input.npy")
    for n in ("tiny_mlp", "digits_cnn", "expr_zoo")
]
PAGES = [
    "pages/2_graph.py",
    "pages/3_order.py",
    "pages/4_expressions.py",
    "pages/5_forward.py",
    "pages/6_profile.py",
    "pages/7_ir.py",
    "pages/8_passes.py",
    "pages/1_home.py",
]
CASE_SECONDS = 30.0


def _check(at: AppTest, what: str) -> None:
    assert not at.exception, (what, [e.value for e in at.exception])


@st.composite
def uploads(draw: st.DrawFn) -> tuple[bytes, bytes | None, bytes | None, str]:
    how = draw(st.sampled_from(["intact", "param", "param", "bin"]))
    if how == "intact":  # a good model: the hostile part is the .npy input
        param_path, bin_path, _ = draw(st.sampled_from(UPLOADABLE))
        param, bin_bytes, what = param_path.read_bytes(), bin_path.read_bytes(), param_path.name
    elif how == "param":  # one value or shape changed: most still load, and reach the input and Forward
        param, bin_path, _, what = draw(mutated_param(UPLOADABLE, ("value", "shape", "token"), 1))
        bin_bytes = bin_path.read_bytes()
    else:
        param, bin_bytes, _, what = draw(mutated_bin(UPLOADABLE))
    if draw(st.integers(0, 4)) == 0:
        bin_bytes = None
    npy = None
    if draw(st.booleans()):
        dtype = draw(st.sampled_from(["f4", "f8", "i8", "u1", "?", "c8"]))
        shape = draw(st.sampled_from([(1, 16), (0, 16), (2, 16), (1, 1, 8, 8), (3, 1, 8, 8), (), (16,), (1, 3, 8, 8)]))
        buf = io.BytesIO()
        np.save(buf, np.zeros(shape, dtype))
        raw = buf.getvalue()
        npy = raw[: draw(st.integers(0, len(raw)))] if draw(st.integers(0, 3)) == 0 else raw
    return param, bin_bytes, npy, what


@settings(max_examples=10, **SETTINGS)
@given(uploads())
def test_mutated_uploads(case: tuple[bytes, bytes | None, bytes | None, str]) -> None:
    param, bin_bytes, npy, what = case
    t0 = time.perf_counter()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=CASE_SECONDS)
    at.run()
    at.file_uploader(key="home_param").upload("fuzz.pnnx.param", param)
    if bin_bytes is not None:
        at.file_uploader(key="home_bin").upload("fuzz.pnnx.bin", bin_bytes)
    next(b for b in at.button if b.label == "Load uploaded model").click().run()
    _check(at, what)
    if npy is not None and any(r.key == "home_input_kind" for r in at.radio):
        at.radio(key="home_input_kind").set_value("npy").run()
        at.file_uploader(key="home_npy").upload("x.npy", npy).run()
        _check(at, what + " + .npy")
    for page in PAGES:
        at.switch_page(page).run()
        _check(at, f"{what} on {page}")
    assert time.perf_counter() - t0 < CASE_SECONDS, what
