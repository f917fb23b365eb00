"""Reference mode (`executor="reference"`: the interpreter calling each layer's plain definition,
Layer.reference) on every bundled sample and test export, against PyTorch's committed outputs;
and the engine's own forward (`"auto"`: the fast kernels, prepared) against reference mode.

Reference mode is the one numerical oracle of every fast kernel and executor: it must match
PyTorch wherever the engine is meant to (tolerance: conftest.max_err_ok, 1e-4 of the output's
largest magnitude), and every executor must match it within the same tolerance
(tests/test_executors.py checks the executors against the interpreter bit for bit or within it).
An export the engine refuses (a KuiperError in both modes) is no case for either.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from conftest import ROOT, max_err_ok
from kuiper_core import KuiperError
from tools.golden_outputs import models

MODELS = {key: (param, inputs) for key, param, inputs in models()}
FAST = ("sample_models/digits_cnn", "sample_models/tiny_mlp", "ops/act_softmax_dim0", "value_shapes/one_hot_free")


def _expected(key: str, param: Path) -> list[np.ndarray] | None:
    """PyTorch's outputs for the model's committed inputs (None where none are committed)."""
    if key.startswith("sample_models/"):
        path = param.with_name(param.name.replace(".pnnx.param", ".expected.npz"))
        prefix, suffix = "", ""
    elif (param.parent / "expected.npz").exists():
        path, prefix, suffix = param.parent / "expected.npz", "out", ""
    else:
        path, prefix, suffix = param.parent / "runs.npz", "out", "_0"
    if not path.exists():
        return None
    with np.load(path) as z:
        if not prefix:
            return [z[k] for k in z.files]
        names = sorted(
            (k for k in z.files if k.startswith(prefix) and k.endswith(suffix)), key=lambda k: int(k[3:].split("_")[0])
        )
        return [z[k] for k in names]


def _flat(values: list) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for v in values:
        out.extend(_flat(list(v)) if isinstance(v, (list, tuple)) else [np.asarray(v)])
    return out


@pytest.mark.parametrize("key", [k if k in FAST else pytest.param(k, marks=pytest.mark.slow) for k in MODELS])
def test_reference_mode_gives_pytorchs_outputs_and_the_fast_kernels_match_it(key: str) -> None:
    param, inputs = MODELS[key]
    expected = _expected(key, param)
    try:
        fast = _flat(kuiper_core.load(param).forward(*inputs))
    except KuiperError:
        with pytest.raises(KuiperError):
            kuiper_core.load(param, executor="reference").forward(*inputs)
        return
    reference_graph = kuiper_core.load(param, executor="reference")
    reference = _flat(reference_graph.forward(*inputs))
    assert reference_graph.last_executor == "reference"
    assert len(reference) == len(fast)
    for k, (a, r) in enumerate(zip(fast, reference)):
        assert a.shape == r.shape and a.dtype == r.dtype, f"output {k}: {a.shape} {a.dtype} vs {r.shape} {r.dtype}"
        ok, err, bound = max_err_ok(a, r)
        assert ok, f"output {k}: the fast kernels {err:.3g} from reference mode (> {bound:.3g})"
    if expected is None or len(expected) != len(reference):
        return
    for k, (r, want, a) in enumerate(zip(reference, expected, fast)):
        if not max_err_ok(a, want)[0]:
            continue  # a gap the engine's own tests list (tests/test_ops.py): not reference mode's to close
        ok, err, bound = max_err_ok(r, want)
        assert ok, f"output {k}: reference mode {err:.3g} from PyTorch's (> {bound:.3g})"


def test_every_bundled_model_is_a_case() -> None:
    assert {k.split("/")[0] for k in MODELS} >= {"sample_models", "optlevel", "ops", "value_shapes"}
    assert all(p.is_relative_to(ROOT) for p, _ in MODELS.values())
