"""Issue 35's hostile uploads for the readers of untrusted bytes (kuiper_core/budgets.py):
pickles, zip directories and members, ONNX external data, corrupt files and odd --bin paths.
Each file is made by tools/hostile_uploads.py in a temporary folder; every case must end in
a KuiperError that says what and where, or in the plain answer, within a few seconds and a
small fraction of memory (the expensive ones run in a child under an address-space limit)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kuiper_core import budgets
from kuiper_core.errors import ConversionError, InputError, KuiperError, LimitError
from kuiper_core.explore import model_files as F
from kuiper_core.formats import OpenOptions
from kuiper_core.formats import causal_attention as C
from kuiper_core.formats.base import Context, installed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import hostile_uploads as H  # noqa: E402

needs_onnx = pytest.mark.skipif(not installed("onnx"), reason="building ONNX models needs the onnx package")


def _limited(code: str, memory: int = 1 << 30, timeout: float = 60) -> subprocess.CompletedProcess:
    """`code` in a child Python under an address-space limit (a regression would take it
    down, not the test run or the machine)."""
    prelude = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tools")])}
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


# -- pickles ------------------------------------------------------------------------------------------
def test_a_module_holding_itself_is_walked_once() -> None:
    root = budgets.load_pickle(H.pickle_cycle(), "data.pkl", C._stub_class)
    assert [path for path, _ in budgets.walk_once(root, C._attributes)] == [""]
    assert root.state["a"] is root


def test_a_dag_of_2_to_the_70_paths_is_70_objects() -> None:
    root = budgets.load_pickle(H.pickle_dag(70), "data.pkl", C._stub_class)
    assert len(list(budgets.walk_once(root, C._attributes))) == 70


def test_a_class_named_again_and_again_is_made_once() -> None:
    items = budgets.load_pickle(H.pickle_class_bomb(50_000), "data.pkl", C._stub_class)
    assert len(items) == 50_000 and len({id(c) for c in items}) == 1


def test_class_budgets_are_said_with_their_limit() -> None:
    with pytest.raises(LimitError, match="MAX_PICKLE_CLASSES"):
        budgets.load_pickle(H.pickle_distinct_classes(budgets.MAX_PICKLE_CLASSES + 1), "data.pkl", C._stub_class)
    with pytest.raises(LimitError, match="MAX_GLOBAL_NAME_CHARS"):
        budgets.load_pickle(H.pickle_class_bomb(3, 1 << 20), "data.pkl", C._stub_class)
    with pytest.raises(LimitError, match="MAX_PICKLE_BYTES"):
        budgets.load_pickle(b"\x80\x02" + b"N0" * (budgets.MAX_PICKLE_BYTES // 2) + b"N.", "data.pkl", C._stub_class)
    with pytest.raises(KuiperError, match="data.pkl: not a pickle"):
        budgets.load_pickle(H.pickle_cycle()[:-3], "data.pkl", C._stub_class)


def test_the_readers_take_the_data_pkl_libtorch_reads(tmp_path) -> None:
    """A second folder's data.pkl listed before the real one (a self-holding module, a 2^70 DAG)
    is not what libtorch reads, nor what the shape guess or the causal-mask reader read."""
    for pkl in (H.pickle_cycle(), H.pickle_dag(70)):
        data = H.second_folder_pt(pkl)
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            assert z.namelist().index("evil/data.pkl") < z.namelist().index("small_cnn/data.pkl")
            assert budgets.torchscript_pickle(z) == "small_cnn/data.pkl"
            paths = C.module_paths(z)
        assert paths[""].endswith("SmallCNN") and any(q.endswith("Conv2d") for q in paths.values())
        assert F.guess_inputshape(data) == "[1,3,224,224]"


def test_the_same_hostile_pickles_as_the_real_data_pkl_end(tmp_path) -> None:
    """The real folder's data.pkl itself replaced: the walks still end, and a module with no
    state (NEWOBJ without BUILD) is a ConversionError naming the member, not an AttributeError."""
    for pkl in (H.pickle_cycle(), H.pickle_dag(70), H.pickle_class_bomb(20_000)):
        data = H.torchscript_with({}, replace={"data.pkl": pkl})
        assert F.guess_inputshape(data) == F.DEFAULT_SHAPE
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            C.module_paths(z)
    with zipfile.ZipFile(io.BytesIO(H.torchscript_with({}, replace={"data.pkl": H.pickle_stateless()}))) as z:
        with pytest.raises(ConversionError, match=r"small_cnn/data.pkl: the module '\(the root\)' .* has no state"):
            C.module_paths(z)


# -- zip archives -------------------------------------------------------------------------------------
@pytest.mark.slow  # a child process: seconds on a loaded machine
def test_a_code_member_inflating_past_its_budget_is_not_read(tmp_path) -> None:
    path = tmp_path / "bomb.pt"
    path.write_bytes(H.inflating_code_pt(budgets.MAX_MEMBER_BYTES + 1))
    assert path.stat().st_size < 1 << 20
    run = _limited(
        "from pathlib import Path\nfrom kuiper_core.formats.causal_attention import causal_attention_paths\n"
        f"causal_attention_paths(Path({str(path)!r}))\n",
        memory=1 << 30,
    )
    assert "ConversionError" in run.stderr and "inflates to 67,108,865 bytes" in run.stderr, run.stderr[-2000:]
    assert "MAX_MEMBER_BYTES" in run.stderr


def test_members_read_together_are_counted_before_each_read() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(3):
            z.writestr(f"m/{i}", b"\0" * 1000)
    with zipfile.ZipFile(buf) as z:
        copied = budgets.Copied(z, "the upload", total=2500)
        copied.read("m/0"), copied.read("m/1")
        with pytest.raises(LimitError, match="inflate to 3,000 bytes together"):
            copied.read("m/2")


@pytest.mark.parametrize(("entries", "claimed"), [(100_001, None), (3, 1_000_000), (100_001, 10)])
def test_a_zip_listing_too_many_entries_is_refused_before_it_is_parsed(entries: int, claimed: int | None) -> None:
    """From the end record (1,000,000 claimed) or the directory's headers (100,001 held, 10
    claimed): no ZipInfo is made."""
    data = H.zip_listing(entries, claimed)
    with pytest.raises(LimitError, match="MAX_ZIP_ENTRIES"):
        budgets.check_zip_directory(data, "the upload")
    with pytest.raises(LimitError, match="MAX_ZIP_ENTRIES"):
        Context(data, OpenOptions(name="x.pt")).zip_names
    assert F.kind_of(data, "x.pt") is None  # the app's look at an upload: no format, quickly


@pytest.mark.slow  # zipfile parses 70,000 entries: seconds on a loaded machine
def test_a_zip64_end_record_is_read_too() -> None:
    with pytest.raises(LimitError, match="1,000,000 entries"):
        budgets.check_zip_directory(H.zip_listing(2, claimed=1_000_000), "z")
    budgets.check_zip_directory(H.zip_listing(70_000), "z")  # zip64, within the limit
    assert len(zipfile.ZipFile(io.BytesIO(H.zip_listing(70_000))).infolist()) == 70_000


def test_an_npz_listing_too_many_members_is_refused_before_it_is_parsed() -> None:
    from kuiper_core.npy import read_npz

    with pytest.raises(LimitError, match="MAX_ZIP_ENTRIES"):
        read_npz(H.zip_listing(3, 1_000_000), "x.npz")


# -- ONNX -----------------------------------------------------------------------------------------------
@needs_onnx
def test_one_external_file_named_by_200_tensors_is_counted_200_times(tmp_path) -> None:
    from kuiper_core.formats.onnx_external import self_contained

    model = tmp_path / "m.onnx"
    model.write_bytes(H.onnx_shared_external(200, 16 << 20))
    assert model.stat().st_size < 20_000
    (tmp_path / "w.data").write_bytes(b"\0" * (16 << 20))
    with pytest.raises(LimitError, match=r"counted per tensor: 200 tensors name 1 file"):
        self_contained(model, "m.onnx")
    with pytest.raises(LimitError, match="MAX_ONNX_BYTES"):
        self_contained(model.read_bytes(), "m.onnx", (tmp_path / "w.data").read_bytes())


@pytest.mark.slow  # a child process: seconds on a loaded machine
@needs_onnx
def test_the_cli_refuses_it_without_copying(tmp_path) -> None:
    (tmp_path / "m.onnx").write_bytes(H.onnx_shared_external(200, 16 << 20))
    (tmp_path / "w.data").write_bytes(b"\0" * (16 << 20))
    run = _limited(
        f"import sys; sys.argv = ['kuiper', 'inspect', {str(tmp_path / 'm.onnx')!r}]\n"
        "from kuiper_core.cli import main\nsys.exit(main())\n",
        memory=2 << 30,
    )
    assert run.returncode == 2 and "MAX_ONNX_BYTES" in run.stderr, run.stderr[-2000:]


@needs_onnx
def test_external_data_behind_an_overlong_varint_is_found() -> None:
    import onnx

    from kuiper_core.formats.onnx_external import external_files, may_have_external_data, self_contained

    data = H.onnx_hidden_external("../../etc/passwd")
    assert b"\n\x08location" not in data
    model = onnx.load_model_from_string(data)  # protobuf reads it
    assert model.graph.initializer[0].external_data[0].value == "../../etc/passwd"
    assert may_have_external_data(data)
    assert external_files(data) == []  # not a plain name: never looked up
    with pytest.raises(ConversionError, match="only a file beside the model is read"):
        self_contained(data, "m.onnx")


@needs_onnx
def test_every_message_field_of_onnx_is_walked_before_a_parse() -> None:
    """The wire walk's table is onnx.proto's: every field that holds a message, from the model
    down (a field it missed is one protobuf fills without the walk counting it)."""
    import onnx

    from kuiper_core.formats.onnx_external import _MESSAGES

    seen: set[tuple[str, str]] = set()
    stack = [("model", onnx.ModelProto.DESCRIPTOR)]
    while stack:
        kind, descriptor = stack.pop()
        if (kind, descriptor.full_name) in seen:
            continue
        seen.add((kind, descriptor.full_name))
        fields = {f.number: f.message_type for f in descriptor.fields if f.message_type is not None}
        if kind == "tensor":
            del fields[13]  # external_data: counted as found
        assert set(_MESSAGES[kind]) == set(fields), (kind, descriptor.full_name)
        stack += [(_MESSAGES[kind][n], m) for n, m in fields.items()]


@needs_onnx
@pytest.mark.slow  # a 40 MB shape walked twice: ~1.5-1.9 s each
@pytest.mark.parametrize("external", [True, False])
def test_a_shape_of_millions_of_dims_is_counted_before_protobuf_parses_it(external: bool) -> None:
    """2,100,000 dims of one value_info (4 MB; 20,000,000 of them, 40 MB, took 1.6 GB in the
    server's process to read an upload's external data in): past MAX_PROTOBUF_FIELDS before
    protobuf makes an object of each, on both parses in the caller's process."""
    from kuiper_core.formats.converted import fixes_input_shapes
    from kuiper_core.formats.onnx_external import parse_model, self_contained

    data = H.onnx_dims_bomb(2_100_000, external)
    if external:
        with pytest.raises(LimitError, match="MAX_PROTOBUF_FIELDS"):
            self_contained(data, "m.onnx", b"\0" * 16)
    else:
        with pytest.raises(LimitError, match="MAX_PROTOBUF_FIELDS"):
            parse_model(data, "m.onnx")
        assert not fixes_input_shapes(data, "onnx")  # its inputs are fixed, but it is not read
    assert fixes_input_shapes(H.onnx_dims_bomb(10, external=False), "onnx")


@needs_onnx
def test_the_walk_reads_as_deep_as_protobuf_and_no_deeper() -> None:
    """Messages nested as deep as protobuf reads them (a subgraph's value_info now counts
    its type's messages too) are walked; one level more is refused by both."""
    import onnx

    from kuiper_core.formats.onnx_external import external_tensors

    deepest = H.onnx_nested_types(48)
    onnx.load_model_from_string(deepest)
    assert external_tensors(deepest) == 0
    with pytest.raises(Exception, match="recursion|Error parsing|nested|depth"):
        onnx.load_model_from_string(H.onnx_nested_types(49))
    with pytest.raises(ConversionError, match="messages nested more than 100 deep"):
        external_tensors(H.onnx_nested_types(49))


@pytest.mark.parametrize("cut", [1, 39, 100])
def test_a_corrupt_onnx_is_a_located_error(tmp_path, cut: int) -> None:
    """A 39-byte cut of a real .onnx: not protobuf's DecodeError, the byte where it breaks."""
    from kuiper_core.formats.onnx_external import external_tensors

    data = (ROOT / "tests" / "data" / "debug_models" / "small_cnn.onnx").read_bytes()[:cut]
    with pytest.raises(ConversionError, match=r"not a readable ONNX model: byte \d+"):
        external_tensors(data, "cut.onnx")


@pytest.mark.parametrize("bin_kind", ["directory", "fifo", "device"])
def test_bin_naming_no_regular_file_is_refused_before_reading(tmp_path, bin_kind: str) -> None:
    from kuiper_core.formats import open_model

    weights = {"directory": tmp_path, "device": Path("/dev/zero")}.get(bin_kind)
    if bin_kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        weights = tmp_path / "fifo"
        os.mkfifo(weights)
    model = ROOT / "tests" / "data" / "debug_models" / "small_cnn.onnx"
    with pytest.raises(ConversionError, match=r"cannot read the weights file .*(directory|regular file)"):
        open_model(model, bin_path=weights, cache_dir=tmp_path / "cache")


def test_input_shapes_take_ascii_digits_only() -> None:
    from kuiper_core.formats.convert import inputshape_text

    assert inputshape_text("[1,3,8,8]") == "[1,3,8,8]"
    for text in ("[١,٣,8,8]", "[1,3,８,8]", "[𝟏,3]"):
        with pytest.raises(InputError, match="is not a list of shapes"):
            inputshape_text(text)


# -- the same files uploaded to the app ------------------------------------------------------------------
@pytest.mark.slow  # AppTest runs of Home, a few seconds each
@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("cycle.pt", lambda: H.second_folder_pt()),
        ("dag.pt", lambda: H.torchscript_with({}, replace={"data.pkl": H.pickle_dag(70)})),
        ("bomb.pt", lambda: H.torchscript_with({}, replace={"data.pkl": H.pickle_class_bomb(20_000, 900)})),
        ("stateless.pt", lambda: H.torchscript_with({}, replace={"data.pkl": H.pickle_stateless()})),
        ("entries.pt", lambda: H.zip_listing(3, 1_000_000)),
        ("shared.onnx", lambda: H.onnx_shared_external(200, 1 << 20)),
        ("hidden.onnx", lambda: H.onnx_hidden_external()),
        ("cut.onnx", lambda: (ROOT / "tests" / "data" / "debug_models" / "small_cnn.onnx").read_bytes()[:39]),
    ],
)
def test_each_hostile_upload_leaves_home_working(name: str, make) -> None:
    """Uploaded (Home looks at it at every rerun: its format, its shape guess, whether it keeps
    external data) and loaded: no exception, and a clear message where it cannot open."""
    if name.endswith(".onnx") and not installed("onnx"):
        pytest.skip("building ONNX models needs the onnx package")
    from apptest_helpers import app, no_exception

    at = app()
    at.file_uploader(key="home_param").upload(name, make()).run()
    no_exception(at)
    at.button(key="home_load_upload").click().run()
    no_exception(at)
    at.run()  # a rerun looks at the upload again
    no_exception(at)


@pytest.mark.parametrize(("method", "flags"), [(99, 0), (8, 1)])  # an unknown compression; an encrypted member
def test_a_member_zipfile_cannot_read_is_a_conversion_error(tmp_path, method: int, flags: int) -> None:
    """A code/ member pnnx never reads, with a compression method zipfile does not know or the
    encrypted flag: a ConversionError naming the member, not NotImplementedError/RuntimeError."""
    data = bytearray(H.torchscript_with({}, replace={"code/__torch__/extra.py": b"# scaled_dot_product_attention(\n"}))
    name = b"small_cnn/code/__torch__/extra.py"
    for signature, method_at, flags_at in ((b"PK\x03\x04", 8, 6), (b"PK\x01\x02", 10, 8)):
        at = data.find(signature + b"\x14\x00" if signature == b"PK\x03\x04" else signature)
        while at >= 0:
            header_name_at = at + (30 if signature == b"PK\x03\x04" else 46)
            if data[header_name_at : header_name_at + len(name)] == name:
                data[at + method_at : at + method_at + 2] = method.to_bytes(2, "little")
                data[at + flags_at : at + flags_at + 2] = flags.to_bytes(2, "little")
            at = data.find(signature, at + 4)
    path = tmp_path / "m.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(ConversionError, match="extra.py' cannot be read"):
        C.causal_attention_paths(path)


# -- ncnn shape expressions ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr",
    ["inf", "*(1e308,10.0)", "trunc(1e400)", "nan", "round(nan)", "-1,99999999999999999999999", "big"],
)
def test_a_shape_expression_past_every_size_is_the_layers_error(expr: str) -> None:
    """An ncnn Reshape's `6="…"` whose values are infinite, NaN or past int64: a ModelError
    naming the operator and the expression, not an OverflowError only the runtime's safety net
    caught ("failed while running"); 100,000 nested products (a 800,000-digit integer, more
    work at each step) stop at the first value past the bound."""
    import time

    import numpy as np

    from kuiper_core import limits
    from kuiper_core.errors import ModelError
    from kuiper_core.ncnn import load_ncnn_bytes
    from kuiper_core.runtime.runtime_graph import RuntimeGraph

    text = H.ncnn_shape_expression(H.ncnn_product_bomb() if expr == "big" else expr)
    binary = (ROOT / "tests" / "data" / "ncnn" / "tiny_mlp.fp32.ncnn.bin").read_bytes()
    x = np.zeros((1, 8, 8), np.float32)
    started = time.perf_counter()
    with limits.use(max_line_chars=2 << 20), pytest.raises(ModelError, match="shape expression") as e:
        RuntimeGraph.from_graph(load_ncnn_bytes(text, binary, "m.ncnn.param")).build().forward(x)
    assert "failed while running" not in str(e.value) and "flatten_4" in str(e.value)
    assert time.perf_counter() - started < 5
