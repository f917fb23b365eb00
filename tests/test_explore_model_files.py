"""kuiper_core.explore.model_files: what Home opens from an upload or a server path."""

from __future__ import annotations

import io
import os

import pytest
from conftest import DATA, SAMPLES

from kuiper_core.errors import InputError, LimitError
from kuiper_core.explore import model_files as F

DEBUG = DATA / "debug_models"


def test_the_format_is_told_by_content_not_the_name() -> None:
    assert F.kind_of((DEBUG / "small_cnn.onnx").read_bytes(), "model.bin") == "onnx"
    assert F.kind_of((DEBUG / "small_cnn.pt").read_bytes(), "whatever") == "torchscript"
    assert F.kind_of((SAMPLES / "digits_cnn.pnnx.param").read_bytes(), "x.txt") == "pnnx"
    assert F.kind_of(b"not a model at all", "notes.txt") is None


def test_traced_torchscript_records_its_input_shapes() -> None:
    assert not F.asks_for_shape((DEBUG / "small_cnn.pt").read_bytes(), "small_cnn.pt")
    assert F.asks_for_shape((DEBUG / "small_cnn_untraced.pt").read_bytes(), "small_cnn_untraced.pt")
    assert not F.asks_for_shape((DEBUG / "small_cnn.onnx").read_bytes(), "small_cnn.onnx")


def test_the_shape_field_is_checked() -> None:
    assert F.shape_problem("[1,3,16,16]", required=True) is None
    assert F.shape_problem("[1,3,224,224],[1,10]i64", required=True) is None
    assert "needs its input shape" in (F.shape_problem(" ", required=True) or "")
    assert F.shape_problem("", required=False) is None
    assert "not a list of shapes" in (F.shape_problem("1,3,x", required=False) or "")


def test_a_server_path_opens_a_param_with_its_sibling_bin() -> None:
    request = F.from_path(str(SAMPLES / "digits_cnn.pnnx.param"), 1 << 30)
    assert request.kind == "pnnx" and request.bin == (SAMPLES / "digits_cnn.pnnx.bin").read_bytes()
    onnx = F.from_path(str(DEBUG / "small_cnn.onnx"), 1 << 30)
    assert onnx.kind == "onnx" and onnx.bin is None and onnx.name == "small_cnn.onnx"


@pytest.mark.parametrize(
    "path, says",
    [
        ("", "type the path"),
        ("/etc/passwd", "not a model file name"),
        (str(DEBUG / "missing.onnx"), "no such file"),
    ],
)
def test_a_bad_server_path_says_what_is_wrong(path: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        F.from_path(path, 1 << 30)


def test_a_server_path_is_read_within_the_upload_limit() -> None:
    with pytest.raises(LimitError):
        F.from_path(str(DEBUG / "small_cnn.onnx"), 1000)


def test_the_shape_guess_reads_the_first_layer_of_a_torchscript_file() -> None:
    from kuiper_core.budgets import load_pickle

    assert F._first_layer(load_pickle(_data_pkl(DEBUG / "small_cnn_untraced.pt"), "data.pkl", F._shapes_only)) == (
        "Conv2d",
        (8, 3, 3, 3),
    )
    assert F.guess_inputshape((DEBUG / "small_cnn_untraced.pt").read_bytes()) == "[1,3,224,224]"
    assert F.guess_inputshape((DATA / "user_models" / "lstm.pt").read_bytes()) == "[1,16,16]"  # nn.LSTM(16, …)
    assert F.guess_inputshape(b"not a zip") == F.DEFAULT_SHAPE


def test_the_shape_guess_runs_nothing_from_the_file(tmp_path) -> None:
    """A data.pkl naming any other global (os.system) is refused: the plain guess, nothing run."""
    import pickle
    import zipfile

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("m/data.pkl", pickle.dumps(Evil()))
        z.writestr("m/code/__torch__.py", "")
    assert F.guess_inputshape(buf.getvalue()) == F.DEFAULT_SHAPE
    assert not (tmp_path / "ran").exists()


def test_the_shape_guess_follows_the_first_layer(tmp_path) -> None:
    torch = pytest.importorskip("torch")

    grey = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU())
    torch.jit.script(grey).save(str(tmp_path / "grey.pt"))
    assert F.guess_inputshape((tmp_path / "grey.pt").read_bytes()) == "[1,1,224,224]"
    words = torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 2))
    torch.jit.script(words).save(str(tmp_path / "words.pt"))
    assert F.guess_inputshape((tmp_path / "words.pt").read_bytes()) == "[1,16]i64"


def _data_pkl(path) -> bytes:
    import zipfile

    with zipfile.ZipFile(path) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1))


def test_the_values_field_reads_names_and_small_integers_and_points_at_what_does_not() -> None:
    """Home's field for an .onnx's small integer inputs (model_files.parse_values)."""
    from kuiper_core.errors import InputError
    from kuiper_core.explore.model_files import parse_values, values_problem

    assert parse_values("") == {} and values_problem("  ") is None
    assert parse_values(" sr = 8000 , mode=[1, -2];k=3") == {"sr": 8000, "mode": [1, -2], "k": 3}
    for text, column, expected in (
        ("sr", 3, "'='"),
        ("sr=1e4", 5, "','"),
        ("sr=١٦", 4, "an integer"),  # ASCII digits only
        ("x=[1,2,3,4,5,6,7,8,9]", 3, "an integer or [up to 8"),
        ("=3", 1, "an input's name"),
    ):
        with pytest.raises(InputError) as caught:
            parse_values(text)
        message = str(caught.value)
        assert f"column {column}: expected {expected}" in message and message.endswith("^"), message
    assert "at most 400" in (values_problem("a=1," * 200) or "")
