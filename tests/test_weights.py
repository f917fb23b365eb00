"""The .bin reader and the writer: real files load; bad archives name operator and weight;
load -> save -> load gives the same graph."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kuiper_core.errors import KuiperError, WeightError
from kuiper_core.pnnx import load_graph, save
from conftest import OPS

CASE = OPS / "io_attribute_const"  # one pnnx.Attribute "bias" with @data=(1,4,1,1)f32


def test_real_bin_is_zip64_store_only_and_loads() -> None:
    with zipfile.ZipFile(CASE / "model.pnnx.bin") as zf:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    g = load_graph(CASE / "model.pnnx.param")
    data = g.operator("bias").attrs["data"].data
    assert data.shape == (1, 4, 1, 1) and data.dtype == np.float32 and data.flags.aligned
    # Shared by every run and every app session: writing into a weight must fail.
    assert not data.flags.writeable


def _copy_case(tmp_path: Path) -> Path:
    for f in ("model.pnnx.param",):
        shutil.copy(CASE / f, tmp_path / f)
    return tmp_path / "model.pnnx.param"


def _write_bin(path: Path, entries: dict[str, bytes], compress: int = zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        for k, v in entries.items():
            zf.writestr(k, v)


GOOD_BYTES = np.arange(4, dtype="<f4").tobytes()


@pytest.mark.parametrize(
    "what, entries, compress, words",
    [
        ("missing entry", {"other.data": GOOD_BYTES}, zipfile.ZIP_STORED, "no entry 'bias.data'"),
        ("short entry", {"bias.data": GOOD_BYTES[:12]}, zipfile.ZIP_STORED, "has 12 bytes"),
        ("long entry", {"bias.data": GOOD_BYTES + b"\0" * 4}, zipfile.ZIP_STORED, "has 20 bytes"),
        ("compressed entry", {"bias.data": GOOD_BYTES}, zipfile.ZIP_DEFLATED, "compressed"),
    ],
)
def test_bad_bin_names_operator_and_weight(tmp_path: Path, what: str, entries: dict, compress: int, words: str) -> None:
    param = _copy_case(tmp_path)
    _write_bin(tmp_path / "model.pnnx.bin", entries, compress)
    with pytest.raises(WeightError) as info:
        load_graph(param)
    msg = str(info.value)
    assert "operator 'bias' (pnnx.Attribute)" in msg and words in msg, msg


def test_missing_and_non_zip_bin(tmp_path: Path) -> None:
    param = _copy_case(tmp_path)
    with pytest.raises(WeightError, match="not found"):
        load_graph(param)
    (tmp_path / "model.pnnx.bin").write_bytes(b"\x80\x04 a pickle, never unpickled")
    with pytest.raises(WeightError, match="not a PNNX .bin"):
        load_graph(param)


def test_truncated_archive(tmp_path: Path) -> None:
    param = _copy_case(tmp_path)
    raw = (CASE / "model.pnnx.bin").read_bytes()
    (tmp_path / "model.pnnx.bin").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(KuiperError):
        load_graph(param)


@pytest.mark.parametrize(
    "param",
    sorted(OPS.glob("*/model.pnnx.param")),
    ids=lambda p: p.parent.name,
)
def test_load_save_load_gives_the_same_graph(tmp_path: Path, param: Path) -> None:
    g = load_graph(param)
    save(g, tmp_path / "m.pnnx.param")
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin") as zf:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    g2 = load_graph(tmp_path / "m.pnnx.param")
    assert g2.equals(g)
    for op in g.operators:
        for k, a in op.attrs.items():
            assert np.array_equal(g2.operator(op.name).attrs[k].data, a.data)
