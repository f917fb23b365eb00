"""Models whose output sizes follow their input values (one_hot without num_classes, a bool
mask's selection, repeat_interleave by a tensor of counts), converted by real pnnx
(tools/export_value_shapes.py), against PyTorch's outputs for several input sets.

pnnx annotates those outputs from its own dummy data, so before Layer.shape_follows_values
the engine refused PyTorch's answer even for the traced input, and a batch sharded over two
threads failed on one_hot's per-shard class counts with a bare ValueError."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, SAMPLES, max_err_ok

import kuiper_core
from kuiper_core.errors import ShapeError

CASES = DATA / "value_shapes"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "model.pnnx.param").exists())


def _runs(name: str) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """(inputs, PyTorch's outputs) per input set."""
    with np.load(CASES / name / "runs.npz") as z:
        sets = sorted({int(k.split("_")[1]) for k in z.files})
        pick = lambda prefix, k: [
            z[f"{prefix}{i}_{k}"]
            for i in range(len(z.files))  # noqa: E731
            if f"{prefix}{i}_{k}" in z.files
        ]
        return [(pick("in", k), pick("out", k)) for k in sets]


def _same(ys: list[np.ndarray], refs: list[np.ndarray]) -> None:
    assert len(ys) == len(refs)
    for y, ref in zip(ys, refs):
        assert y.shape == ref.shape and y.dtype == ref.dtype
        assert max_err_ok(y, ref)[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_input_set_gives_pytorchs_answer(name: str) -> None:
    model = kuiper_core.load(CASES / name / "model.pnnx.param")
    assert model.value_shaped, "the layer did not say its shape follows the values"
    runs = _runs(name)
    assert len({tuple(y.shape for y in refs) for _, refs in runs}) > 1, "the sets must differ in output size"
    for _ in range(2):  # a second round: nothing kept from one run's shapes may serve another
        for inputs, refs in runs:
            _same(model.forward(*inputs), refs)
            run = model.steps(*inputs)
            for _event in run:
                pass
            _same(model.outputs_of(run.values), refs)


def test_a_batch_is_never_sharded_where_images_mix() -> None:
    """Sharded, each half of the batch would have its own class count: the halves cannot be
    put back together (and must not be)."""
    model = kuiper_core.load(CASES / "one_hot_free" / "model.pnnx.param", executor="sharded", threads=2)
    inputs, refs = _runs("one_hot_free")[3]
    assert inputs[0].shape[0] == 4
    for _ in range(3):
        _same(model.forward(*inputs), refs)
        assert model.last_executor != "sharded"


def test_only_the_operands_computed_from_a_value_sized_one_are_loose() -> None:
    model = kuiper_core.load(CASES / "one_hot_sum" / "model.pnnx.param")
    # one_hot (3), its float copy (4), the sum over its rows (5), the sum plus x.sum() (7);
    # x.sum() (6) is computed from x alone
    assert model.value_shaped == {"3", "4", "5", "7"}
    assert kuiper_core.load(SAMPLES / "digits_cnn.pnnx.param").value_shaped == frozenset()
    # x[:, i] with an int64 tensor i and a None (prim::Constant) in the list: sized by i's shape
    assert kuiper_core.load(DATA / "ops_o0" / "index_tensor_input" / "model.pnnx.param").value_shaped == frozenset()


@pytest.mark.parametrize("annotation, wrong", [("#3=(10,1)f32", "shape"), ("#3=(10)f16", "dtype")])
def test_rank_and_dtype_are_still_checked(tmp_path: Path, annotation: str, wrong: str) -> None:
    for f in ("model.pnnx.param", "model.pnnx.bin"):
        shutil.copy(CASES / "bool_mask" / f, tmp_path / f)
    param = tmp_path / "model.pnnx.param"
    text = param.read_text()
    assert text.count("#3=(10)f32") == 2
    param.write_text(text.replace("#3=(10)f32", annotation))
    inputs, _ = _runs("bool_mask")[0]
    with pytest.raises(ShapeError, match=f"wrong {wrong}") as info:
        kuiper_core.load(param).forward(*inputs)
    assert info.value.operator == "Tensor.index_1"
    if wrong == "shape":
        assert "its dims follow the input values, its rank does not" in str(info.value)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("level", [1, 2])
def test_optimised_graphs_keep_every_answer(name: str, level: int) -> None:
    """FoldStaticShapes bakes declared sizes into a static export's graph; a size that follows
    the values was declared from pnnx's dummy data (mask_size_o0: `size(0)` of the selection
    would become 10 whatever the input)."""
    from kuiper_core.passes import optimize
    from kuiper_core.pnnx import load_graph

    after = optimize(load_graph(CASES / name / "model.pnnx.param"), level).after
    model = kuiper_core.RuntimeGraph.from_graph(after).build()
    for inputs, refs in _runs(name):
        _same(model.forward(*inputs), refs)
