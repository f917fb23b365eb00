"""ONNX's own backend test models as a corpus: every model under the installed `onnx` wheel's
`onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple}` (read from the wheel, not
copied), converted by pnnx at the shapes of its recorded inputs, given as a user gives them (`--input`:
a small integer input a shape reads is fixed at its value, formats/onnx_given.py; after
onnx_prepare.py's normalisation) and run by the engine, must give the outputs ONNX recorded with it within the
project's tolerance, or be listed in GAPS with the reason, and then stop with a KuiperError
(a message, never a bare exception). A gap that starts running fails the test: take it off.

All are slow (a child process for the normalisation, one for pnnx: 1-3 s each).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import max_err_ok

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import kuiper_core  # noqa: E402
from kuiper_core.errors import KuiperError  # noqa: E402
from kuiper_core.formats.convert import converter_available  # noqa: E402

pytestmark = pytest.mark.skipif(not converter_available(), reason="needs the pnnx converter")

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
SUITES = ("pytorch-converted", "pytorch-operator", "simple")

_STRINGS = (
    "string tensors: the engine's tensors are numbers (and pnnx refuses them: 'unsupported tensor elem data type')"
)
_SEQUENCES = "ONNX sequences (SplitToSequence, SequenceAt, ConcatFromSequence …): the engine's values are tensors"
_PNNX_SEGV = "pnnx crashes (SIGSEGV) on it after normalisation"
GAPS = {
    "test_Embedding": (
        "pnnx's ONNX import runs the graph on random indices (0..9, past the 4-row table) and crashes on "
        "onnxruntime's Gather error; its input= option (the real indices) does not reach that run"
    ),
    "test_Embedding_sparse": "as test_Embedding: pnnx runs random indices past the table",
    "test_gradient_of_add": "Gradient (ai.onnx.preview.training): training, not inference",
    "test_gradient_of_add_and_mul": "Gradient (ai.onnx.preview.training): training, not inference",
    **{f"test_sequence_model{i}": _SEQUENCES for i in range(1, 9)},
    **{
        f"test_strnorm_model_{n}": _STRINGS
        for n in (
            "monday_casesensintive_lower",
            "monday_casesensintive_nochangecase",
            "monday_casesensintive_upper",
            "monday_empty_output",
            "monday_insensintive_upper_twodim",
            "nostopwords_nochangecase",
        )
    },
}


def _cases() -> list:
    if not DATA.is_dir():
        return []
    found = []
    for suite in SUITES:
        for case in sorted((DATA / suite).iterdir()):
            if (case / "model.onnx").exists():
                found.append(pytest.param(case, id=f"{suite}/{case.name}", marks=pytest.mark.slow))
    return found


def _tensors(folder: Path, kind: str) -> list[np.ndarray]:
    files = sorted(folder.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    return [onnx.numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


_CODES = {"float32": "f32", "float64": "f64", "int64": "i64", "int32": "i32", "bool": "bool", "uint8": "u8"}


def _inputshape(arrays: list[np.ndarray]) -> str:
    return ",".join("[" + ",".join(map(str, a.shape)) + "]" + _CODES.get(str(a.dtype), "") for a in arrays)


def _run(case: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = case / "test_data_set_0"
    inputs, expected = _tensors(data, "input"), _tensors(data, "output")
    graph = kuiper_core.load(str(case / "model.onnx"), inputshape=_inputshape(inputs), inputs=inputs)  # as --input
    return graph.forward(*inputs), expected


@pytest.mark.parametrize("case", _cases())
def test_backend_model(case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUIPER_CACHE", str(tmp_path))
    gap = GAPS.get(case.name)
    if gap is not None:
        try:
            outputs, expected = _run(case)
        except KuiperError:
            return  # stops with a message, as listed
        ok = len(outputs) == len(expected) and all(max_err_ok(y, r)[0] for y, r in zip(outputs, expected))
        assert not ok, f"{case.name} runs to ONNX's recorded outputs now: take it off GAPS ({gap})"
        pytest.fail(f"{case.name} ran to other outputs than ONNX recorded, and did not stop with a message")
    with np.errstate(invalid="ignore", divide="ignore"):  # sqrt/pow of negatives: ONNX recorded NaN too
        outputs, expected = _run(case)
    assert len(outputs) == len(expected)
    for i, (y, ref) in enumerate(zip(outputs, expected)):
        ok, err, bound = max_err_ok(y, ref)
        assert ok, f"output {i}: {np.shape(y)} vs recorded {ref.shape}, max error {err:.3g} > {bound:.3g}"


def test_gaps_name_real_cases() -> None:
    """Every gap names a model that is in the corpus (a renamed one is not silently skipped)."""
    if not DATA.is_dir():
        pytest.skip("the onnx wheel ships no backend test data")
    names = {c.name for s in SUITES for c in (DATA / s).iterdir()}
    assert set(GAPS) <= names, sorted(set(GAPS) - names)
