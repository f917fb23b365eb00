"""Weights the runtime does not hold are let go of after build and read again when asked
(Attribute.release, pnnx/weights.py BinEntry), and `kuiper_core.load` reads none at load
(Attribute.defer: a convolution's kernel reads its weight when it is made, at the first
run): the same bytes, or an error naming the operator when the file changed; never a
silent other weight."""

from __future__ import annotations

import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kuiper_core
from kuiper_core.errors import WeightError
from kuiper_core.explore.passes_view import diff_graphs
from kuiper_core.passes.rewrite import clone_graph
from kuiper_core.pnnx import load_graph, load_graph_bytes
from kuiper_core.pnnx import weights as weights_module
from kuiper_core.runtime import RuntimeGraph
from conftest import SAMPLES

MODEL = "resnet18"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A copy of the sample (the tests change and delete its .bin)."""
    for suffix in (".pnnx.param", ".pnnx.bin"):
        shutil.copy(SAMPLES / f"{MODEL}{suffix}", tmp_path / f"model{suffix}")
    return tmp_path / "model.pnnx.param"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The entries read again after load, in order."""
    seen: list[str] = []
    original = weights_module.BinEntry.read

    def read(self: weights_module.BinEntry) -> np.ndarray:
        seen.append(self.entry)
        return original(self)

    monkeypatch.setattr(weights_module.BinEntry, "read", read)
    return seen


def _attrs(graph: kuiper_core.RuntimeGraph) -> list[tuple[str, str, kuiper_core.Attribute]]:
    assert graph.graph is not None
    return [(op.name, k, a) for op in graph.graph.operators for k, a in op.attrs.items()]


def _gone(graph: kuiper_core.RuntimeGraph) -> list[tuple[str, str, kuiper_core.Attribute]]:
    """Weights no longer in memory (released, and no layer holds them)."""
    return [t for t in _attrs(graph) if t[2].released and t[2]._weak() is None]  # type: ignore[misc]


def _expected() -> tuple[np.ndarray, np.ndarray]:
    x = np.load(SAMPLES / f"{MODEL}.input.npy")
    with np.load(SAMPLES / f"{MODEL}.expected.npz") as z:
        return x, z[z.files[0]]


@pytest.mark.slow
def test_winograd_weights_are_let_go_of_and_read_back_bit_for_bit(model: Path, reads: list[str]) -> None:
    g = kuiper_core.load(model)
    assert sum(a.nbytes for _, _, a in _gone(g)) > 44e6  # no conv weight is read at load
    x, expected = _expected()
    out = g.forward(x)[0]
    assert np.abs(out - expected).max() <= 1e-4 * np.abs(expected).max()
    gone = _gone(g)
    # ResNet-18 at batch 1: every stride-1 3x3 conv keeps only Winograd's U (~37 MB of
    # weights, 28 of them layer4's); im2col computes with views of its weights, which stay.
    assert sum(a.nbytes for _, _, a in gone) > 36e6
    fresh = load_graph(model)
    before = len(reads)
    for name, key, attr in gone:
        data = attr.data
        assert data is not None and data is attr.data  # held here: read once
        np.testing.assert_array_equal(data, fresh.operator(name).attrs[key].data)
        assert not data.flags.writeable and data.flags.aligned
    assert len(reads) - before == len(gone)


def test_load_reads_no_convolution_weight_and_checks_the_whole_bin(model: Path, reads: list[str]) -> None:
    g = kuiper_core.load(model)
    convs = [(name, a) for name, key, a in _attrs(g) if key == "weight" and name.startswith("convbn2d")]
    assert len(convs) == 20 and not any(name + ".weight" in reads for name, _ in convs)
    assert all(a.released and a.source is not None for _, a in convs)
    assert sum(a.nbytes for _, a in convs) > 44e6  # 45 MB of weights not copied at load


@pytest.mark.slow
def test_held_weights_stay_one_array_and_forwards_read_nothing(model: Path, reads: list[str]) -> None:
    g = kuiper_core.load(model)
    x, _ = _expected()
    g.forward(x)
    first = len(reads)
    for _ in range(3):
        g.forward(x)
    list(g.steps(x))
    assert len(reads) == first  # every kernel made at the first forward holds what it needs
    held = [a for _, _, a in _attrs(g) if a.released and a._weak() is not None]  # type: ignore[misc]
    assert held and all(a.data is a.data for a in held)  # a layer's array, shared: no copy
    assert len(reads) == first


@pytest.mark.slow
def test_a_changed_or_deleted_file_is_an_error_naming_the_operator(model: Path) -> None:
    g = kuiper_core.load(model)
    x, expected = _expected()
    held = kuiper_core.load(model)
    out = held.forward(x)[0]  # its kernels, made now, hold what they need: no read after
    name, key, attr = next(t for t in _gone(g) if t[0] == "convbn2d_3")
    bin_path = model.with_name("model.pnnx.bin")
    raw = bytearray(bin_path.read_bytes())
    source = attr.source
    assert isinstance(source, weights_module.BinEntry)
    raw[source.offset + 5] ^= 0x40  # one bit of that weight's bytes
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(WeightError) as info:
        attr.data
    msg = str(info.value)
    assert f"operator '{name}'" in msg and "changed since it was loaded" in msg and f"{name}.{key}" in msg, msg
    x, expected = _expected()
    with pytest.raises(WeightError) as info:  # its kernel, made at the first run, reads it
        g.forward(x)
    assert f"operator '{name}'" in str(info.value)
    assert np.array_equal(held.forward(x)[0], out) and np.abs(out - expected).max() <= 1e-4 * np.abs(expected).max()
    bin_path.unlink()
    with pytest.raises(WeightError, match="no such file"):
        attr.data


@pytest.mark.slow
def test_weights_from_bytes_given_or_rewritten_by_a_pass_are_kept(model: Path) -> None:
    bin_path = model.with_name("model.pnnx.bin")
    graph = load_graph_bytes(model.read_bytes(), bin_path.read_bytes())
    rt = RuntimeGraph.from_graph(graph).build()
    assert not any(a.released for _, _, a in _attrs(rt))  # nothing to read them again from
    own = load_graph(model)  # a graph the caller holds (it may save it over its .bin)
    assert not any(a.released for _, _, a in _attrs(RuntimeGraph.from_graph(own).build()))
    g = kuiper_core.load(model)
    _, _, attr = _gone(g)[0]
    new = np.zeros(attr.shape, np.float32)
    attr.data = new  # what a pass does: a new array, no longer the file's
    assert attr.data is new and attr.source is None
    g.graph.release_weights()  # type: ignore[union-attr]
    assert attr.data is new


def test_copies_pickles_and_diffs_of_released_weights(model: Path) -> None:
    g = kuiper_core.load(model)
    assert g.graph is not None
    clone = clone_graph(g.graph)
    diff = diff_graphs(g.graph, clone)
    assert not (diff.changed or diff.added or diff.removed)
    name, key, attr = _gone(g)[0]
    copied = clone.operator(name).attrs[key]
    assert copied.released and copied.identity == attr.identity
    np.testing.assert_array_equal(copied.data, attr.data)
    back = pickle.loads(pickle.dumps(attr))
    assert not back.released
    np.testing.assert_array_equal(back.data, attr.data)
    assert back == attr


def test_a_corrupt_payload_is_caught_at_load(model: Path) -> None:
    g = load_graph(model)
    attr = g.operator("convbn2d_3").attrs["weight"]
    source = attr.source
    assert isinstance(source, weights_module.BinEntry)
    bin_path = model.with_name("model.pnnx.bin")
    raw = bytearray(bin_path.read_bytes())
    raw[source.offset + source.size - 1] ^= 1  # the last bit of its data
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(WeightError) as err:
        load_graph(model)
    msg = str(err.value)
    assert "'convbn2d_3.weight'" in msg and "CRC-32" in msg and "operator 'convbn2d_3'" in msg, msg


@pytest.mark.slow
def test_a_local_header_naming_another_entry_is_refused(model: Path) -> None:
    bin_path = model.with_name("model.pnnx.bin")
    with zipfile.ZipFile(bin_path) as zf:
        info = zf.infolist()[0]
    raw = bytearray(bin_path.read_bytes())
    at = info.header_offset + 30
    name = info.filename.encode()
    raw[at : at + len(name)] = name[:-1] + b"X"
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(WeightError, match="local header names"):
        load_graph(model)


def test_a_model_loaded_by_a_relative_path_reads_its_own_file_after_a_chdir(
    model: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.chdir(model.parent)
    g = kuiper_core.load("model.pnnx.param")
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # no model.pnnx.bin here
    name, key, attr = _gone(g)[0]
    np.testing.assert_array_equal(attr.data, load_graph(model).operator(name).attrs[key].data)


@pytest.mark.slow
def test_the_first_run_lets_go_of_each_weight_as_its_kernel_is_made(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not all at once: the first run would then hold every weight and every Winograd U at
    once (ResNet-18 b1: a peak 37 MiB over the forward's). Loading transforms nothing."""
    import kuiper_core.layers.conv_factory as conv  # the kernel factory makes the Winograd U

    g = kuiper_core.load(model)
    held: list[int] = []  # bytes of weights alive at each Winograd transform
    for name in ("transform_weights", "transform_weights_rows"):
        original = getattr(conv, name)

        def transform(*args: object, original=original) -> np.ndarray:
            held.append(sum(a.nbytes for _, _, a in _attrs(g) if a.data_if_held() is not None))
            return original(*args)

        monkeypatch.setattr(conv, name, transform)
    assert held == []
    x, expected = _expected()
    out = g.forward(x)[0]
    assert np.abs(out - expected).max() <= 1e-4 * np.abs(expected).max()
    total = sum(a.nbytes for _, _, a in _attrs(g))
    assert len(held) == 13  # layers 1-4's stride-1 3x3 convs, at the first run
    assert max(held) < 0.4 * total  # never most of the weights at once (layer4: its im2col views and one U)


@pytest.mark.slow
def test_a_new_thread_reads_no_weight_again(model: Path, reads: list[str]) -> None:
    """The app runs every click on a new thread (Streamlit) and kernels are per thread: the
    first thread's kernels die with it, so a weight that only they held (im2col's views)
    would be read from the .bin again by the next thread. The layer keeps what they use."""
    import threading

    g = kuiper_core.load(model)
    x, expected = _expected()
    held: list[object] = []

    def run() -> None:
        out = g.forward(x)[0]
        assert np.abs(out - expected).max() <= 1e-4 * np.abs(expected).max()
        walk = g.steps(x)  # as the app's stepper: its values kept, so each walk is its own
        for _ in walk:
            pass
        held.append(walk.values)

    first = threading.Thread(target=run)
    first.start()
    first.join()
    del first
    import gc

    gc.collect()
    before = len(reads)
    second = threading.Thread(target=run)
    second.start()
    second.join()
    assert reads[before:] == []
