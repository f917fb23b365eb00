"""The bundled sample models (sample_models/, made by tools/export_samples.py with real pnnx).

For every model in models.json: forward() matches PyTorch's outputs of the original
module; where operand references exist, stepping reproduces every operand that pnnx's
generated *_pnnx.py computed; trained models classify their bundled real examples.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import kuiper_core
from conftest import SAMPLES, max_err_ok, slow_cases

MANIFEST = json.loads((SAMPLES / "models.json").read_text())
NAMES = list(MANIFEST)
WITH_OPERANDS = [n for n in NAMES if MANIFEST[n].get("operands")]
WITH_EXAMPLES = [n for n in NAMES if MANIFEST[n].get("examples")]


def _outputs(ys) -> list[np.ndarray]:
    return [ys] if isinstance(ys, np.ndarray) else list(ys)


def _load(name: str):
    return kuiper_core.load(SAMPLES / f"{name}.pnnx.param")


def test_manifest_is_consistent() -> None:
    assert sum(bool(m.get("default")) for m in MANIFEST.values()) == 1, "exactly one default model"
    for name, meta in MANIFEST.items():
        for key in ("description", "task", "input_shape", "image", "preprocess", "operators"):
            assert key in meta, f"{name}: models.json lacks {key}"
        x = np.load(SAMPLES / f"{name}.input.npy")
        assert list(x.shape) == meta["input_shape"], name
        assert x.dtype == np.float32, name
        counts = (SAMPLES / f"{name}.pnnx.param").read_text().splitlines()[1].split()
        assert int(counts[0]) == meta["operators"], name
        if meta["image"]:
            assert meta["preprocess"] is not None, f"{name}: image models say how to map a picture"


@pytest.mark.parametrize("name", slow_cases(NAMES, {"deep1500", "resnet18", "yolov5s_mini"}))
def test_forward_matches_pytorch(name: str) -> None:
    g = _load(name)
    ys = _outputs(g.forward(np.load(SAMPLES / f"{name}.input.npy")))
    with np.load(SAMPLES / f"{name}.expected.npz") as z:
        expected = [z[f"out{i}"] for i in range(len(z.files))]
    assert len(ys) == len(expected)
    for i, (y, ref) in enumerate(zip(ys, expected)):
        assert y.shape == ref.shape, f"out{i}: shape {y.shape} != {ref.shape}"
        assert y.dtype == ref.dtype, f"out{i}: dtype {y.dtype} != {ref.dtype}"
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"out{i}: max abs err {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("name", slow_cases(WITH_OPERANDS, {"deep1500", "resnet18", "unet", "yolov5s_mini"}))
def test_steps_match_pnnx_operands(name: str) -> None:
    g = _load(name)
    x = np.load(SAMPLES / f"{name}.input.npy")
    with np.load(SAMPLES / MANIFEST[name]["operands"]) as z:
        refs = {k: z[k] for k in z.files}
    seen: set[str] = set()
    for ev in g.steps(x):
        for operand, value in ev.outputs.items():
            if operand in refs:
                ok, err, bound = max_err_ok(value, refs[operand])
                assert ok, f"{ev.name} ({ev.type}) operand {operand}: err {err:.3g} > {bound:.3g}"
                seen.add(operand)
    missing = sorted(set(refs) - seen, key=lambda s: (len(s), s))
    assert not missing, f"operands never produced while stepping: {missing[:20]}"


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_trained_model_classifies_real_examples(name: str) -> None:
    with np.load(SAMPLES / MANIFEST[name]["examples"]) as z:
        images, labels = z["images"], z["labels"]
    assert len(labels) >= 10
    g = _load(name)
    (probs,) = _outputs(g.forward(images.astype(np.float32)))  # the whole set as one batch
    assert probs.shape == (len(labels), 10)
    accuracy = float((probs.argmax(1) == labels).mean())
    assert accuracy >= 0.9, f"{name}: accuracy {accuracy:.2f} on bundled examples"
