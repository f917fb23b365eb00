"""kuiper_core.explore.summary and .inputs: model summary, weight stats, input tensors."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
from conftest import SAMPLES

from kuiper_core.errors import InputError
from kuiper_core.explore.inputs import check_array, image_to_input, input_specs, synthetic_input
from kuiper_core.explore.summary import (
    model_summary,
    operator_details,
    operator_table,
    param_text,
    si_number,
    weight_stats,
    weight_table,
)
from kuiper_core.graph import shape_label
from kuiper_core.pnnx import load_graph, parse_param


def tiny():
    return load_graph(SAMPLES / "tiny_mlp.pnnx.param")


def test_tiny_mlp_summary() -> None:
    s = model_summary(tiny())
    assert s.operators == 7
    # fc1: 64->32 with bias, fc2: 32->10 with bias.
    assert s.parameters == 64 * 32 + 32 + 32 * 10 + 10
    assert s.weight_bytes == 4 * s.parameters
    assert dict(s.by_type) == {
        "pnnx.Input": 1,
        "torch.flatten": 1,
        "nn.Linear": 2,
        "nn.ReLU": 1,
        "F.softmax": 1,
        "pnnx.Output": 1,
    }
    assert s.by_type[0] == ("nn.Linear", 2)  # most frequent first
    assert dict(s.by_category) == {"io": 2, "shape": 1, "linear": 2, "activation": 2}
    assert [(i.name, i.shape, i.dtype) for i in s.inputs] == [("0", (1, 1, 8, 8), "f32")]
    assert [(o.name, o.shape) for o in s.outputs] == [("5", (1, 10))]


def test_operator_table_rows() -> None:
    rows = operator_table(tiny())
    assert [r["name"] for r in rows] == [
        "pnnx_input_0",
        "torch.flatten_0",
        "fc1",
        "act",
        "fc2",
        "F.softmax_1",
        "pnnx_output_0",
    ]
    fc1 = rows[2]
    assert fc1["type"] == "nn.Linear" and fc1["inputs"] == "1x64" and fc1["outputs"] == "1x32"
    assert fc1["weights"] == 64 * 32 + 32
    assert "in_features=64" in fc1["params"] and "bias=True" in fc1["params"]


def test_shape_and_param_text() -> None:
    assert shape_label((1, 3, None, 7)) == "1x3x?x7"
    assert shape_label(None) == "?" and shape_label(()) == "()"
    assert param_text([1, 1]) == "(1,1)" and param_text(True) == "True" and param_text(None) == "None"


def _bin_entry(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Read a weight straight from the .bin zip, independently of the engine's reader."""
    with zipfile.ZipFile(SAMPLES / "digits_cnn.pnnx.bin") as z:
        return np.frombuffer(z.read(name), dtype="<f4").reshape(shape)


def test_weight_stats_match_numpy_on_the_raw_bin() -> None:
    g = load_graph(SAMPLES / "digits_cnn.pnnx.param")
    op = next(op for op in g.operators if op.type == "nn.Conv2d")
    attr = op.attrs["weight"]
    raw = _bin_entry(f"{op.name}.weight", tuple(attr.shape))
    st = weight_stats("weight", attr)
    assert st.shape == tuple(attr.shape) and st.count == raw.size and st.nbytes == raw.nbytes
    assert st.min == pytest.approx(float(raw.min())) and st.max == pytest.approx(float(raw.max()))
    assert st.mean == pytest.approx(float(raw.astype(np.float64).mean()))
    assert st.std == pytest.approx(float(raw.astype(np.float64).std()))
    assert st.zeros == int((raw == 0).sum()) and st.nonfinite == 0


def test_weight_stats_count_zeros_and_nonfinite() -> None:
    g = parse_param("7767517\n3 2\npnnx.Input in 0 1 0\npnnx.Attribute w 0 1 1 @data=(4)f32\npnnx.Output out 1 0 1\n")
    attr = g.operator("w").attrs["data"]
    attr.data = np.array([0.0, np.inf, -2.0, np.nan], np.float32)
    st = weight_stats("data", attr)
    assert (st.zeros, st.nonfinite, st.min, st.max) == (1, 2, -2.0, 0.0)


def test_weight_table_has_one_column_per_weight() -> None:
    g = load_graph(SAMPLES / "digits_cnn.pnnx.param")
    conv = next(op for op in g.operators if op.type == "nn.Conv2d")
    weights = [weight_stats(k, a) for k, a in conv.attrs.items()]
    rows = weight_table(weights)
    assert [r[""] for r in rows][:3] == ["shape", "dtype", "values"]
    assert set(rows[0]) == {"", "weight", "bias"}  # narrow: a column per weight, not per statistic
    w = conv.attrs["weight"].data
    assert rows[0]["weight"] == "x".join(map(str, w.shape))
    assert float(next(r for r in rows if r[""] == "max")["weight"]) == pytest.approx(float(w.max()), rel=1e-3)


def test_operator_details() -> None:
    g = load_graph(SAMPLES / "tiny_mlp.pnnx.param")
    d = operator_details(g, "fc1")
    assert d.type == "nn.Linear" and d.category == "linear" and d.line == 5
    assert ("out_features", "32") in d.params
    assert d.inputs == [("", "1", "1x64 f32")] and d.outputs == [("2", "1x32 f32")]
    assert [w.name for w in d.weights] == ["bias", "weight"] or [w.name for w in d.weights] == ["weight", "bias"]
    assert {w.name: w.shape for w in d.weights} == {"weight": (32, 64), "bias": (32,)}
    assert d.producers == ["torch.flatten_0"] and d.consumers == ["act"]
    flat = operator_details(g, "torch.flatten_0")
    assert flat.inputs == [("input", "0", "1x1x8x8 f32")]
    with pytest.raises(KeyError):
        operator_details(g, "nope")


def test_si_number() -> None:
    assert si_number(1814825984) == "1.81 G"
    assert si_number(2368) == "2.37 k"
    assert si_number(12) == "12"


# -- inputs ---------------------------------------------------------------------------------
def test_input_specs_fill_unknown_dims() -> None:
    g = parse_param("7767517\n2 1\npnnx.Input in 0 1 x #x=(?,3,?,8)f32\npnnx.Output out 1 0 x\n")
    assert input_specs(g) == [("x", (1, 3, 32, 8), "f32")]  # batch 1, other open dims 32
    assert input_specs(g, [2, 3, 5, 8]) == [("x", (2, 3, 5, 8), "f32")]
    assert input_specs(g, None, {"x": {2: 7}}) == [("x", (1, 3, 7, 8), "f32")]  # chosen on Home
    bare = parse_param("7767517\n2 1\npnnx.Input in 0 1 x\npnnx.Output out 1 0 x\n")
    with pytest.raises(InputError):
        input_specs(bare)
    assert input_specs(bare, [1, 4]) == [("x", (1, 4), "f32")]


def test_synthetic_inputs() -> None:
    a = synthetic_input("random", (2, 3), "f32", seed=5)
    b = synthetic_input("random", (2, 3), "f32", seed=5)
    assert a.dtype == np.float32 and a.shape == (2, 3) and np.array_equal(a, b)
    assert not np.array_equal(a, synthetic_input("random", (2, 3), "f32", seed=6))
    assert np.array_equal(synthetic_input("zeros", (2,), "f32"), np.zeros(2, np.float32))
    ones = synthetic_input("ones", (2,), "i64")
    assert ones.dtype == np.int64 and ones.tolist() == [1, 1]
    ints = synthetic_input("random", (100,), "i32", seed=0)
    assert ints.dtype == np.int32 and ints.min() >= 0 and ints.max() <= 9
    with pytest.raises(InputError):
        synthetic_input("noise", (2,))


def test_image_to_input_greyscale_inverted() -> None:
    px = np.array([[0, 255], [51, 204]], np.uint8)
    x = image_to_input(px, {"invert": True, "mean": [0.0], "std": [1.0]}, (1, 1, 2, 2))
    assert x.dtype == np.float32 and x.shape == (1, 1, 2, 2)
    np.testing.assert_allclose(x[0, 0], [[1.0, 0.0], [0.8, 0.2]], atol=1e-6)


def test_image_to_input_rgb_mean_std() -> None:
    px = np.zeros((2, 3, 3), np.uint8)
    px[..., 0] = 255  # red
    mean, std = [0.5, 0.25, 0.0], [0.5, 0.5, 2.0]
    x = image_to_input(px, {"mean": mean, "std": std}, (2, 3, 2, 3))
    assert x.shape == (2, 3, 2, 3) and x.dtype == np.float32
    np.testing.assert_allclose(x[:, 0], 1.0)  # (1 - 0.5) / 0.5
    np.testing.assert_allclose(x[:, 1], -0.5)  # (0 - 0.25) / 0.5
    np.testing.assert_allclose(x[:, 2], 0.0)


def test_image_to_input_errors() -> None:
    with pytest.raises(InputError, match="channel"):
        image_to_input(np.zeros((2, 2, 3), np.uint8), None, (1, 1, 2, 2))
    with pytest.raises(InputError, match="pixels"):
        image_to_input(np.zeros((3, 2), np.uint8), None, (1, 1, 2, 2))
    with pytest.raises(InputError, match="4-D"):
        image_to_input(np.zeros((2, 2), np.uint8), None, (1, 4))


def test_check_array() -> None:
    assert check_array(np.zeros((3, 1, 8, 8)), (1, 1, 8, 8), "x").shape == (3, 1, 8, 8)  # batch may vary
    with pytest.raises(InputError, match="expected"):
        check_array(np.zeros((1, 8, 8)), (1, 1, 8, 8), "x")


def test_markdown_table_keeps_every_cell_in_its_column() -> None:
    from kuiper_core.explore.summary import markdown_table

    text = markdown_table(
        [{"": "input", "operand": "in0", "n": 3}, {"": "output", "operand": "a|b\nc", "n": 12}], code=("operand",)
    )
    assert text.splitlines() == [
        "|   | operand | n |",
        "|---|---|---|",
        "| input | `in0` | 3 |",
        "| output | `a\\|b c` | 12 |",
    ]
    assert markdown_table([]) == ""
