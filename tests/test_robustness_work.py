"""Issue 35, the fifth round: an operator's work is counted before it is done.

Every tensor of these files is within max_tensor_elements, yet one operator over broadcast
views of the input's one number asked for minutes of CPU (an (8192, 8192) matmul of a
240-byte `.pnnx.param`: 5.5e11 multiply-adds; ncnn's adaptive pooling to (8000, 8000): a
Python step per output position) or for a work buffer no limit counted (an attention's
16 GiB of scores, an unfold's 1 TiB of columns, a max pool's windows gathered for its
indices). Each is now a LimitError naming the operator and the limit, in milliseconds. The
files are made by tools/hostile_uploads.py.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kuiper_core import limits
from kuiper_core.errors import KuiperError, LimitError
from kuiper_core.explore.app_limits import APP_LIMITS
from kuiper_core.explore.inputs import input_specs
from kuiper_core.formats import open_model
from kuiper_core.layers.linear import einsum_work
from kuiper_core.runtime import RuntimeGraph

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import hostile_uploads as H  # noqa: E402

# What each file's refusal names (pnnx cases at the app's limits): the operator, after the limit
PNNX_REFUSED = {
    case: tuple(said.split(" ", 1))
    for case, said in (
        line.split(" ", 1)
        for line in """
matmul max_operator_work operator 'mm' (torch.matmul)
einsum max_operator_work operator 'es' (torch.einsum)
max_pool max_operator_work operator 'p' (F.max_pool2d)
adaptive_avg_pool max_operator_work operator 'a' (F.adaptive_avg_pool2d)
conv2d max_operator_work operator 'c' (F.conv2d)
conv_transpose_taps max_operator_work operator 'c' (F.conv_transpose2d)
local_response_norm max_operator_work operator 'l' (F.local_response_norm)
pool_row_phases max_operator_work operator 'p' (F.max_pool2d)
nms max_operator_work operator 'n' (pnnx.custom_op.torchvision.nms): non-maximum suppression of 200,000
unfold max_tensor_elements operator 'u' (F.unfold): the columns
attention max_tensor_elements operator 'a' (F.scaled_dot_product_attention): the attention scores
max_pool_indices max_tensor_elements operator 'p' (F.max_pool2d): the windows gathered for the indices
""".strip().splitlines()
    )
}


def _run(data: bytes, name: str, lim: limits.Limits) -> list[np.ndarray]:
    """Open `data` as the app does an upload (from memory, under `lim`), build it and run it on ones."""
    with limits.use(lim):
        graph = open_model(data, name=name).graph
        runtime = RuntimeGraph.from_graph(graph).build()
        return runtime.forward(*(np.ones(shape, np.float32) for _, shape, _ in input_specs(graph)))


@pytest.mark.parametrize("case", sorted(PNNX_REFUSED))
def test_a_tiny_file_cannot_ask_one_operator_for_minutes(case: str) -> None:
    data = H.pnnx_work_bombs()[case]
    assert len(data) < 600
    start = time.perf_counter()
    with pytest.raises(LimitError) as info:
        _run(data, f"{case}.pnnx.param", APP_LIMITS)
    limit, where = PNNX_REFUSED[case]
    assert info.value.limit == limit and where in str(info.value), info.value
    assert time.perf_counter() - start < 1.0  # before: 17 s to over a minute each, or 16 GiB to 1 TiB asked


def test_a_recurrent_layer_counts_its_time_steps() -> None:
    """A 1-wide LSTM (32 bytes of weights) over 2^22 broadcast time steps ran past 30 s."""
    param, weights = H.pnnx_lstm_steps()
    with limits.use(APP_LIMITS):
        graph = open_model(param, bin_path=weights, name="lstm.pnnx.param").graph
        runtime = RuntimeGraph.from_graph(graph).build()
        with pytest.raises(LimitError) as info:
            runtime.forward(np.ones((1, 1, 1), np.float32))
    assert info.value.limit == "max_operator_work" and "operator 'rnn' (nn.LSTM): 4,194,304 time steps" in str(
        info.value
    )
    with limits.use(APP_LIMITS):  # a few steps run
        param, weights = H.pnnx_lstm_steps(16)
        graph = open_model(param, bin_path=weights, name="lstm.pnnx.param").graph
        assert RuntimeGraph.from_graph(graph).build().forward(np.ones((1, 1, 1), np.float32))[0].shape == (16, 1, 1)


def test_the_count_is_exact_for_a_product() -> None:
    """An (n, n) @ (n, n) is n^3 multiply-adds: at exactly that limit it runs, one less refuses it."""
    data, n = H.pnnx_work_bombs(64)["matmul"], 64
    y = _run(data, "m.pnnx.param", limits.DEFAULT.replace(max_operator_work=n**3))[0]
    assert y.shape == (n, n) and np.all(y == n)
    with pytest.raises(LimitError) as info:
        _run(data, "m.pnnx.param", limits.DEFAULT.replace(max_operator_work=n**3 - 1))
    assert info.value.value == n**3 and "multiplying (64, 64) by (64, 64)" in str(info.value)


def test_einsum_work_counts_every_index_once() -> None:
    assert einsum_work("ij,jk->ik", [(2, 3), (3, 5)]) == 30
    assert einsum_work("...ij,...jk->...ik", [(7, 2, 3), (1, 3, 5)]) == 7 * 30
    assert einsum_work("ii->i", [(4, 4)]) == 4
    assert einsum_work("ij,jk->ik", [(2, 3)]) == 6  # what the shapes give; np.einsum says what is missing
    assert einsum_work("ijk->i", [(2, 3)]) == 0  # the shapes do not fit: np.einsum says why


@pytest.mark.parametrize("case", ["matmul", "pooling", "adaptive_pooling"])
def test_ncnn_layers_count_their_work_too(case: str) -> None:
    n = 512  # n^3 = 1.3e8 multiply-adds, n^2 Python steps: over a limit of 2^24
    with pytest.raises(LimitError) as info:
        _run(H.ncnn_work_bombs(n)[case], f"{case}.ncnn.param", limits.DEFAULT.replace(max_operator_work=1 << 24))
    assert info.value.limit == "max_operator_work" and "(ncnn." in str(info.value), info.value


def test_ncnn_adaptive_pooling_to_8192_squared_is_refused_at_the_apps_limits() -> None:
    """One number pooled to (8192, 8192): 67 million Python steps (over a minute before)."""
    with pytest.raises(LimitError) as info:
        _run(H.ncnn_work_bombs()["adaptive_pooling"], "a.ncnn.param", APP_LIMITS)
    assert info.value.limit == "max_operator_work" and "adaptive pooling of (1, 1) to (8192, 8192)" in str(info.value)


# -- expressions: their length is counted before they are read -----------------------------------------
def _expression_chain(n: int, expr: str) -> str:
    lines = ["pnnx.Input in 0 1 0 #0=(1)f32"]
    lines += [f"pnnx.Expression x{i} 1 1 {i} {i + 1} expr={expr} #{i}=(1)f32 #{i + 1}=(1)f32" for i in range(n)]
    lines.append(f"pnnx.Output out 1 0 {n} #{n}=(1)f32")
    return f"7767517\n{len(lines)} {n + 1}\n" + "\n".join(lines) + "\n"


def test_a_long_expression_is_refused_before_it_is_tokenized() -> None:
    """A 9 MB paste on the Expressions page took 71 s and 3 GB at every rerun."""
    from kuiper_core import expression as ex

    start = time.perf_counter()
    with pytest.raises(LimitError) as info:
        ex.parse("@0," * 3_000_000, APP_LIMITS)
    assert info.value.limit == "max_expression_chars" and info.value.value == 9_000_000
    assert time.perf_counter() - start < 0.1


def test_a_graphs_expressions_are_counted_together() -> None:
    """62 lines of 786 KB expressions (a 48 MB .param, each line within max_line_chars) took
    ~7 minutes to build; now the sum is checked before any layer is made."""
    expr = "add(add(@0,@0),add(@0,@0))"  # 26 characters
    text = _expression_chain(4, expr).encode()
    assert len(_run(text, "e.pnnx.param", limits.DEFAULT.replace(max_expression_chars=4 * 26))[0]) == 1
    with pytest.raises(LimitError) as info:
        _run(text, "e.pnnx.param", limits.DEFAULT.replace(max_expression_chars=4 * 26 - 1))
    assert info.value.value == 4 * 26 and "characters of expressions in the graph" in str(info.value)


# -- the Expressions page's walk: linear in the steps, its stack cut -------------------------------------
def _tree(depth: int) -> str:
    return "@0" if depth == 0 else f"add({_tree(depth - 1)},{_tree(depth - 1)})"


def _walk(text: str) -> tuple[list, list[str], object, object]:
    from kuiper_core import expression as ex
    from kuiper_core.explore import expression_view as V
    from kuiper_core.explore import walk_frames

    ast = ex.parse(text, APP_LIMITS)
    trace = ex.evaluate_traced(ast, V.example_inputs(1))
    view = V.ast_dot(ast, V.operand_labels(None, 1))
    graph, panels = walk_frames.expression_frames(view, trace, V.operand_labels(None, 1), "x")
    return graph, panels, view, trace


def test_the_walks_colours_are_the_overlays_kept_as_it_goes() -> None:
    graph, _, view, trace = _walk("mul(add(@0,1),neg(" + _tree(4) + "))")
    for i in range(len(trace.steps)):  # type: ignore[attr-defined]
        colors, node = view.overlay_colors(trace, i)  # type: ignore[attr-defined]
        assert graph[i + 1] == {"highlight": node, "colors": colors}


def test_a_deep_chains_walk_shows_the_top_of_its_stack() -> None:
    """`add(@0,add(@0,…))` 999 deep: every step listed the whole stack and wrote each label's
    whole subtree before cutting it to 40 characters (84 s and 280 MB of steps; a balanced
    8,191-node tree: 68 s a rerun)."""
    from kuiper_core.explore.expression_view import STACK_SHOWN

    start = time.perf_counter()
    _, panels, _, trace = _walk("add(@0," * 999 + "@0" + ")" * 999)
    assert time.perf_counter() - start < 2.0
    deepest = max(range(len(trace.steps)), key=lambda i: trace.steps[i].depth)  # type: ignore[attr-defined]
    assert trace.steps[deepest].depth == 1000  # type: ignore[attr-defined]
    assert panels[deepest + 1].count("top ▸") == 1 and f"… and {1000 - STACK_SHOWN:,} more below" in panels[deepest + 1]
    assert sum(map(len, panels)) < 5_000_000  # 66 MB (and 15 s) before


def test_to_text_stops_past_most() -> None:
    from kuiper_core import expression as ex

    text = _tree(8)
    ast = ex.parse(text)
    assert ex.to_text(ast) == text
    cut = ex.to_text(ast, most=40)
    assert 40 < len(cut) < 60 and text.startswith(cut)


def test_the_expressions_page_walks_at_most_its_budget_of_nodes() -> None:
    from kuiper_core.explore import expression_view as V
    from kuiper_core.explore.app_limits import EXPRESSION_WALK_NODES
    from kuiper_core import expression as ex

    V.check_walkable(ex.parse(_tree(11)))  # 4,095 nodes
    with pytest.raises(LimitError) as info:
        V.check_walkable(ex.parse(_tree(12)))
    assert info.value.limit == "EXPRESSION_WALK_NODES" and info.value.value == 8191 > EXPRESSION_WALK_NODES


@pytest.mark.slow
def test_the_expressions_page_refuses_a_tree_past_its_walk_at_once() -> None:
    """Through AppTest: an 8,191-node paste (33 KB) took 68 s at every rerun of the page."""
    pytest.importorskip("streamlit")
    from test_robustness_app import app, no_exception, shown

    at = app()
    at.switch_page("pages/4_expressions.py").run()
    at.radio(key="expr_mode").set_value("Type one").run()
    start = time.perf_counter()
    at.text_input(key="expr_text").set_value(_tree(12)).run()
    no_exception(at)
    assert "EXPRESSION_WALK_NODES" in shown(at) and time.perf_counter() - start < 5.0


def test_a_roi_a_billion_wide_is_refused_before_its_samples_are_made() -> None:
    """torchvision's roi_align with sampling_ratio 0 takes samples by the roi's size: a roi
    1e9 wide asked for 1.4e8 samples a bin, every bin, in one array per roi."""
    text = (
        "7767517\n4 4\npnnx.Input x 0 1 0 #0=(1,2,8,8)f32\npnnx.Input r 0 1 1 #1=(1,5)f32\n"
        "pnnx.custom_op.torchvision.roi_align a 2 1 0 1 2 arg_2=1.0 arg_3=7 arg_4=7 arg_5=0 arg_6=False "
        "$arg_0=0 $arg_1=1 #0=(1,2,8,8)f32 #1=(1,5)f32 #2=(1,2,7,7)f32\npnnx.Output out 1 0 2\n"
    )
    x = np.ones((1, 2, 8, 8), np.float32)
    with limits.use(APP_LIMITS):
        runtime = RuntimeGraph.from_graph(open_model(text.encode(), name="r.pnnx.param").graph).build()
        assert runtime.forward(x, np.array([[0, 0, 0, 7, 7]], np.float32))[0].shape == (1, 2, 7, 7)
        start = time.perf_counter()
        with pytest.raises(LimitError) as info:
            runtime.forward(x, np.array([[0, 0, 0, 1e9, 1e9]], np.float32))
        assert info.value.limit == "max_tensor_elements" and "one roi's samples" in str(info.value)
        with pytest.raises(KuiperError, match="infinite or NaN"):
            runtime.forward(x, np.array([[0, 0, 0, np.inf, 1]], np.float32))
        assert time.perf_counter() - start < 0.5


# -- ncnn Input shapes: an error, not a guess ----------------------------------------------------------
@pytest.mark.parametrize(
    "dims, shape",
    [
        ("0=-5 1=3 2=2", None),  # was read as a (2, 3) blob
        ("0=0 1=5 2=3", None),  # was read as (3, 5)
        ("0=4 2=3", None),  # w and c without h
        ("0=4.5 1=3", None),
        ("0=4", (4,)),
        ("0=4 1=3", (3, 4)),
        ("0=4 1=3 2=2", (2, 3, 4)),
        ("0=4 1=3 11=5 2=2", (2, 5, 3, 4)),
        ("", "none"),
    ],
)
def test_an_ncnn_input_declares_a_layout_ncnn_reads_or_nothing(dims: str, shape: object) -> None:
    from kuiper_core.errors import ModelError

    text = f"7767517\n2 2\nInput in 0 1 data {dims}\nReLU r 1 1 data out\n".encode()
    if shape is None:
        with pytest.raises(ModelError, match=r"operator 'in' \(Input\): line 3: .* give no blob shape"):
            open_model(text, name="m.ncnn.param")
        return
    graph = open_model(text, name="m.ncnn.param").graph
    assert graph.inputs[0].outputs[0].shape == (None if shape == "none" else shape)


# -- the tensor panels read a tensor a piece at a time -----------------------------------------------
@pytest.mark.slow
def test_the_tensor_panels_never_copy_a_whole_tensor_to_float64() -> None:
    """The Forward page on an (8192, 8192) broadcast view of one number (a step of the einsum
    file above, reached by `?step=2`): 4 s and 2.3 GB resident a view; stats, histogram and
    heatmap each made float64 copies, masks and padded copies of the whole tensor."""
    import tracemalloc

    from kuiper_core.explore import tensor_view, tensors

    view = np.broadcast_to(np.float32(2.0), (4096, 4096))  # 64 MB as float32: the old copies 128-512 MB each
    rng = np.random.default_rng(0)
    real = rng.standard_normal((4096, 4096)).astype(np.float32)
    real[5, 7], real[100, 4000] = np.nan, -np.inf
    for a in (view, real, real.T):
        tracemalloc.start()
        stats, (counts, _), (cells, factors) = (
            tensors.tensor_stats(a),
            tensors.histogram(a),
            tensor_view.block_reduce(a),
        )
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 48 << 20, peak
        finite = a[np.isfinite(a)].astype(np.float64)
        assert (stats["nan"], stats["inf"], counts.sum()) == (
            a.size - finite.size - (a is not view) * 1,
            (a is not view) * 1,
            finite.size,
        )
        assert stats["min"] == finite.min() and stats["max"] == finite.max()
        assert stats["mean"] == pytest.approx(finite.mean(), rel=1e-9, abs=1e-12)
        assert stats["std"] == pytest.approx(finite.std(), rel=1e-9)
        assert cells.shape == (96, 96) and factors == (43, 43)
        assert np.isnan(cells).sum() == (0 if a is view else 2)


@pytest.mark.parametrize("model, name", [("sample_models/vit_tiny.pnnx.param", "blocks.0.attn.mha")])
def test_multihead_attention_counts_its_work_on_both_paths(model: str, name: str) -> None:
    """nn.MultiheadAttention's projections and scores (its flops, from the shapes) are checked
    before the work, in forward and in the prepared call (which runs without forward)."""
    graph = open_model(ROOT / model).graph
    layer = RuntimeGraph.from_graph(graph).build().operators[name].layer
    op = next(o for o in graph.operators if o.name == name)
    inputs = [np.ones(o.shape, np.float32) for o in op.inputs]
    work = layer.flops([x.shape for x in inputs], [])
    out = [np.empty(op.outputs[0].shape, np.float32)]
    for run in (lambda: layer.forward(inputs, [None]), lambda: layer.prepare(inputs, out)):
        with limits.use(limits.DEFAULT.replace(max_operator_work=work)):
            assert run() is not None  # at exactly its work it runs (or is prepared)
        with limits.use(limits.DEFAULT.replace(max_operator_work=work - 1)), pytest.raises(LimitError) as info:
            run()
        assert info.value.value == work and "the attention" in str(info.value)
