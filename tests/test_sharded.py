"""forward() at batch >= 2 split by images over two threads (runtime/sharded.py), where asked for
(`executor="sharded"`): the same numbers as each half run alone at one BLAS thread, the whole
forward where the graph mixes images or the batch is 1, errors naming their operator,
concurrent forwards apart, a forked child. Speed lives in bench/."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import kuiper_core
from kuiper_core import threads
from kuiper_core.errors import ModelError
from kuiper_core.runtime import sharded
from conftest import OPS, SAMPLES, max_err_ok

pytestmark = [
    pytest.mark.skipif(not threads.blas_reachable(), reason="NumPy's OpenBLAS thread count is out of reach"),
    pytest.mark.slow,  # UNet at batch 3-4, several graphs a test: 2-10 s each
]


def _unet_batch(n: int, **options: object) -> tuple[kuiper_core.RuntimeGraph, np.ndarray, np.ndarray]:
    param = SAMPLES / "unet.pnnx.param"
    if not param.exists():
        pytest.skip("sample model unet not exported")
    x = np.load(SAMPLES / "unet.input.npy")
    rng = np.random.default_rng(0)
    xs = np.concatenate([x] + [rng.standard_normal(x.shape).astype(np.float32) for _ in range(n - 1)])
    runtime = kuiper_core.load(param, executor="sharded", threads=2, **options)  # type: ignore[arg-type]
    return runtime, xs, np.load(SAMPLES / "unet.expected.npz")["out0"]


@pytest.mark.parametrize("n", [4, 3])
def test_sharded_forward_equals_each_half_run_alone(n: int) -> None:
    runtime, xs, expected = _unet_batch(n)
    before = threads.blas_threads()
    y = runtime.forward(xs)[0]
    assert runtime.last_executor == "sharded"
    assert threads.blas_threads() == before  # restored
    assert np.array_equal(runtime.forward(xs)[0], y)  # the same bits every call
    # Each shard is a whole forward of its images at one BLAS thread: the same kernels, the same bits.
    alone = kuiper_core.load(SAMPLES / "unet.pnnx.param", threads=1)
    half = (n + 1) // 2
    assert np.array_equal(y, np.concatenate([alone.forward(xs[:half])[0], alone.forward(xs[half:])[0]]))
    whole = kuiper_core.load(SAMPLES / "unet.pnnx.param", executor="prepared", threads=2)
    assert max_err_ok(y, whole.forward(xs)[0])[0]
    assert whole.last_executor == "prepared"
    assert max_err_ok(y[:1], expected)[0]  # PyTorch's output for the sample image


def test_one_image_runs_whole() -> None:
    runtime, xs, _ = _unet_batch(4)
    runtime.forward(xs[:1])
    assert runtime.last_executor == "prepared"
    runtime.forward(xs)
    assert runtime.last_executor == "sharded"


def test_softmax_over_the_batch_is_never_sharded() -> None:
    """Every shape stays batch-major, but each output mixes every image."""
    param = OPS / "act_softmax_dim0" / "model.pnnx.param"
    runtime = kuiper_core.load(param, executor="sharded", threads=2)
    x = np.random.default_rng(1).standard_normal((4, 10)).astype(np.float32)
    y = runtime.forward(x)[0]
    assert runtime.last_executor == "prepared"
    e = np.exp(x - x.max(0))
    assert max_err_ok(y, e / e.sum(0))[0]
    program = runtime.program
    assert program is not None
    whole = kuiper_core.runtime.prepared.record(program, [x])
    half = kuiper_core.runtime.prepared.record(program, [x[:2]])
    assert not sharded.keeps_images_apart(program, whole.shapes, half.shapes, 4, 2)


def test_a_batch_reduction_fails_the_batch_major_rule() -> None:
    runtime, xs, _ = _unet_batch(4)
    program = runtime.program
    assert program is not None
    whole = kuiper_core.runtime.prepared.record(program, [xs])
    half = kuiper_core.runtime.prepared.record(program, [xs[:2]])
    assert sharded.keeps_images_apart(program, whole.shapes, half.shapes, 4, 2)
    # An operand whose dim 0 does not follow the batch (as a mean over it would make).
    shapes = dict(half.shapes)
    name = next(iter(k for k in shapes if k not in program.run_constants and k != runtime.input_operands[0]))
    shapes[name] = ((1,) + shapes[name][0][1:], shapes[name][1])
    assert not sharded.keeps_images_apart(program, whole.shapes, shapes, 4, 2)


@pytest.mark.parametrize("failing", [0, 1])
def test_an_error_inside_a_shard_names_its_operator(failing: int) -> None:
    runtime, xs, _ = _unet_batch(4)
    program = runtime.program
    assert program is not None
    with threads.using_blas_threads(1):
        sf = sharded.ShardedForward.make(program, [xs])
    assert sf is not None
    shard = sf.shards[failing]
    k = len(shard.calls) // 2

    def broken() -> None:
        raise ValueError("broken kernel")

    shard.calls[k] = broken
    with pytest.raises(ModelError, match="broken kernel") as info:
        sf.run([xs])
    assert info.value.operator == shard.names[k]


def test_concurrent_sharded_forwards_do_not_mix() -> None:
    runtime, xs, _ = _unet_batch(4)
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal(xs.shape).astype(np.float32) for _ in range(4)]
    serial = [runtime.forward(b)[0].copy() for b in batches]
    assert runtime.last_executor == "sharded"
    other = kuiper_core.load(SAMPLES / "unet.pnnx.param", threads=2)  # another count, at the same time
    with ThreadPoolExecutor(3) as pool:
        parallel = list(pool.map(lambda b: runtime.forward(b)[0], batches * 2))
        whole = list(pool.map(lambda b: other.forward(b)[0], batches))
    for i, y in enumerate(parallel):
        assert np.array_equal(y, serial[i % 4])
    alone = kuiper_core.load(SAMPLES / "unet.pnnx.param", threads=2)
    for b, y in zip(batches, whole):
        assert np.array_equal(y, alone.forward(b)[0])  # never at the sharded forward's one thread


def test_a_forked_child_runs_sharded_forwards() -> None:
    """The parent's worker thread does not exist in a fork: the child makes its own."""
    import multiprocessing

    runtime, xs, _ = _unet_batch(4)
    expected = runtime.forward(xs)[0]

    def child() -> None:
        ok = np.array_equal(runtime.forward(xs)[0], expected) and runtime.last_executor == "sharded"
        os._exit(0 if ok else 1)

    p = multiprocessing.get_context("fork").Process(target=child)
    p.start()
    p.join(30)
    if p.exitcode is None:
        p.kill()
    assert p.exitcode == 0


def test_sequence_first_attention_is_never_sharded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """nn.MultiheadAttention without batch_first: dim 0 is the sequence, which attention
    mixes, yet with only its attention output every shape follows dim 0. The last guard
    (sharded outputs against the interpreter's) keeps it whole; PyTorch's outputs still."""
    import shutil

    case = OPS / "attn_mha_self"
    lines = (case / "model.pnnx.param").read_text().splitlines()
    attn = next(line for line in lines if line.startswith("nn.MultiheadAttention"))
    fields = attn.split()
    fields[2:7] = ["1", "1", "0", "1"]  # one input, one output: the attention output only
    fields = [f for f in fields if not f.startswith("#2=")]
    (tmp_path / "model.pnnx.param").write_text(
        "\n".join(
            [
                "7767517",
                "3 2",
                lines[2],
                " ".join(fields),
                "pnnx.Output              pnnx_output_0            1 0 1",
                "",
            ]
        )
    )
    shutil.copy(case / "model.pnnx.bin", tmp_path / "model.pnnx.bin")
    with np.load(case / "inputs.npz") as z:
        x = z["in0"]
    with np.load(case / "expected.npz") as z:
        expected = z["out0"]
    runtime = kuiper_core.load(tmp_path / "model.pnnx.param", executor="sharded", threads=2)
    program = runtime.program
    assert program is not None
    whole = kuiper_core.runtime.prepared.record(program, [x])
    part = kuiper_core.runtime.prepared.record(program, [x[:3]])
    # The shape rule alone would allow it: the guard is what refuses.
    assert sharded.keeps_images_apart(program, whole.shapes, part.shapes, 5, 3)
    y = runtime.forward(x)[0]
    assert runtime.last_executor == "prepared"
    assert max_err_ok(y, expected)[0]
