"""Helpers for layer unit tests: one-operator graphs written as .param text, exported
cases, and the batch-stacking check.

The batch-stacking check is how batch > 1 is tested against PyTorch without re-running
torch: run a case at k times its traced batch, and compare with the k separate runs
stacked along the batch axis. The first part is the exported input, so that run is also
compared with PyTorch's output (expected.npz).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence

import numpy as np

import kuiper_core
from conftest import OPS, max_err_ok
from kuiper_core.bundles import open_bundle
from kuiper_core import RuntimeGraph
from kuiper_core.layers.registry import Layer, create_layer
from kuiper_core.pnnx import parse_param


def param_text(*lines: str) -> str:
    """A .param file from operator lines; the header counts are computed."""
    operands: set[str] = set()
    for line in lines:
        t = line.split()
        n_in, n_out = int(t[2]), int(t[3])
        operands.update(t[4 : 4 + n_in + n_out])
    return "7767517\n" + f"{len(lines)} {len(operands)}\n" + "\n".join(lines) + "\n"


def graph_of(*lines: str) -> RuntimeGraph:
    """A built RuntimeGraph from operator lines (pnnx.Input/Output included by the caller)."""
    return RuntimeGraph.from_graph(parse_param(param_text(*lines))).build()


def layer_of(line: str, *input_shapes: str) -> Layer:
    """The layer of one operator line whose inputs are operands 0, 1, … (annotated in the
    line itself); `input_shapes` are `#0=(2,3)f32`-style annotations for pnnx.Input lines."""
    ins = [f"pnnx.Input in{i} 0 1 {i} {s}" for i, s in enumerate(input_shapes)]
    graph = parse_param(param_text(*ins, line))
    return create_layer(graph.operators[-1])


def case_io(case: str) -> tuple[Path, list[np.ndarray], list[np.ndarray]]:
    bundle = open_bundle(OPS / case)
    return OPS / case, bundle.inputs, bundle.expected


def assert_close(y: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert np.shape(y) == np.shape(ref), f"{what}: shape {np.shape(y)} != {np.shape(ref)}"
    ok, err, bound = max_err_ok(y, ref)
    assert ok, f"{what}: max abs err {err:.3g} > {bound:.3g}"


def check_batch_stacking(case: str, parts: int = 3, out_axes: Sequence[int] | None = None, seed: int = 0) -> None:
    """Run `case` at `parts` times its batch and compare with `parts` separate runs.

    Inputs whose dim 0 equals the first input's are batched (others, e.g. a (1,3,1)
    broadcast operand, are shared). Output k is stacked along out_axes[k] (default 0).
    """
    path, ins, exp = case_io(case)
    g = kuiper_core.load(path / "model.pnnx.param")
    rng = np.random.default_rng(seed)
    b0 = ins[0].shape[0]
    batched = [x.ndim > 0 and x.shape[0] == b0 for x in ins]
    groups = [ins] + [
        [rng.standard_normal(x.shape).astype(x.dtype) if b else x for x, b in zip(ins, batched)]
        for _ in range(parts - 1)
    ]
    big = [np.concatenate([grp[i] for grp in groups]) if b else x for i, (x, b) in enumerate(zip(ins, batched))]
    separate = [[np.array(y) for y in g.forward(*grp)] for grp in groups]
    for k, (y, ref) in enumerate(zip(separate[0], exp)):
        assert_close(y, ref, f"{case} out{k} at the traced batch vs PyTorch")
    ys = g.forward(*big)
    assert len(ys) == len(exp)
    axes = list(out_axes) if out_axes is not None else [0] * len(ys)
    for k, y in enumerate(ys):
        stacked = np.concatenate([run[k] for run in separate], axis=axes[k])
        assert_close(y, stacked, f"{case} out{k} at batch {big[0].shape[0]} vs {parts} stacked runs")
        assert y.dtype == exp[k].dtype, f"{case} out{k}: dtype {y.dtype} != PyTorch's {exp[k].dtype}"
