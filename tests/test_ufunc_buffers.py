"""The engine's runs use NumPy ufunc buffers of UFUNC_BUFSIZE elements (ufunc_buffers.py) and
leave the caller's buffer size as it was."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper_core.layers.activation import Sigmoid
from kuiper_core.pnnx import parse_param
from kuiper_core.runtime import RuntimeGraph
from kuiper_core.ufunc_buffers import UFUNC_BUFSIZE

PARAM = """7767517
3 2
pnnx.Input               in0                      0 1 0 #0=(1,4,32,32)f32
nn.Sigmoid               act                      1 1 0 1 #0=(1,4,32,32)f32 #1=(1,4,32,32)f32
pnnx.Output              out0                     1 0 1
"""


def test_forward_and_steps_use_the_engines_buffer_size_and_restore_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    compute = Sigmoid.compute

    def spy(self, x: np.ndarray, y: np.ndarray) -> None:
        seen.append(np.getbufsize())
        compute(self, x, y)

    monkeypatch.setattr(Sigmoid, "compute", spy)
    graph = RuntimeGraph.from_graph(parse_param(PARAM)).build()
    x = np.random.default_rng(0).standard_normal((1, 4, 32, 32)).astype(np.float32)
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    with np.errstate():
        np.setbufsize(4096)  # the caller's own
        for _ in range(3):  # the first runs record and prepare; then the prepared forward
            seen.clear()
            (y,) = graph.forward(x)
        assert seen and seen[-1] == UFUNC_BUFSIZE
        assert np.getbufsize() == 4096
        for _ in range(3):  # the first walk may take the interpreter's steps; then an arena's
            seen.clear()
            run = graph.steps(x)
            for _event in run:
                assert np.getbufsize() == 4096  # between steps: the caller's
        assert seen and seen[-1] == UFUNC_BUFSIZE
        assert np.getbufsize() == 4096
    np.testing.assert_allclose(y, want, rtol=1e-6)
