"""ncnn's LSTM, GRU and RNN: one layer over a (T, input) blob, forward, reverse or both
(outputs side by side), with the initial states as optional extra bottoms and the final ones as
extra tops. Gate rows as ncnn stores them: LSTM i f o g, GRU r u n (n's hidden bias apart)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...layers.activation import sigmoid
from ...limits import PYTHON_STEP_WORK
from .base import F32, NcnnLayer, ncnn_layer

Step = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _sig(x: np.ndarray) -> np.ndarray:
    return sigmoid(x, np.empty_like(x))


@ncnn_layer("LSTM", "GRU", "RNN")
class Recurrent(NcnnLayer):
    """0=num_output, 1=weight_data_size, 2=direction (0 forward, 1 reverse, 2 both), LSTM's
    3=hidden_size (a projection to num_output where they differ)."""

    n_inputs = None

    def setup(self) -> None:
        self.n_out = self.p.integer("num_output")
        self.hidden = self.p.integer("hidden_size") if self.ncnn_type == "LSTM" else self.n_out
        self.direction = self.p.integer("direction")
        if self.direction not in (0, 1, 2):
            raise ValueError(f"param 2 (direction) must be 0, 1 or 2, got {self.direction}")
        states = 2 if self.ncnn_type == "LSTM" else 1
        if len(self.op.inputs) not in (1, 1 + states):
            raise ValueError(f"expected 1 or {1 + states} bottom blobs (the sequence, then the initial states)")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        if x.ndim != 2:
            raise self.error(f"expected a (T, input) blob, got shape {x.shape}")
        dirs = 2 if self.direction == 2 else 1
        per_step = PYTHON_STEP_WORK + self.w("weight_xc")[0].size + self.w("weight_hc")[0].size
        self.check_work(dirs * x.shape[0] * per_step, f"{x.shape[0]:,} time steps")
        h0 = self._state(inputs, 1, dirs, self.n_out)
        c0 = self._state(inputs, 2, dirs, self.hidden) if self.ncnn_type == "LSTM" else None
        ys, hs, cs = [], [], []
        for d in range(dirs):
            reverse = self.direction == 1 or d == 1
            y, h, c = self._run(x, d, reverse, h0[d], None if c0 is None else c0[d])
            ys.append(y)
            hs.append(h)
            if c is not None:
                cs.append(c)
        outs = [np.concatenate(ys, axis=1)]
        if len(self.op.outputs) > 1:
            outs.append(np.stack(hs))  # (directions, num_output)
            if cs:
                outs.append(np.stack(cs))
        return outs

    def _state(self, inputs: list[np.ndarray], i: int, dirs: int, size: int) -> np.ndarray:
        if len(inputs) <= i:
            return np.zeros((dirs, size), F32)
        s = np.asarray(inputs[i], F32)
        if s.size != dirs * size:
            raise self.error(f"initial state {i} has shape {s.shape}: expected {dirs} x {size}")
        return s.reshape(dirs, size)

    def _run(
        self, x: np.ndarray, d: int, reverse: bool, h: np.ndarray, c: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        wx, b, wh = self.w("weight_xc")[d], self.w("bias_c")[d], self.w("weight_hc")[d]
        n = self.hidden
        xs = x @ wx.T  # every time step's input part at once
        y = np.empty((x.shape[0], self.n_out), F32)
        for t in range(x.shape[0])[::-1] if reverse else range(x.shape[0]):
            g = xs[t] + h @ wh.T
            if self.ncnn_type == "LSTM":
                assert c is not None
                i, f, o = _sig(g[:n] + b[0]), _sig(g[n : 2 * n] + b[1]), _sig(g[2 * n : 3 * n] + b[2])
                c = f * c + i * np.tanh(g[3 * n :] + b[3])
                h = o * np.tanh(c)
                if self.n_out != n:
                    h = self.w("weight_hr")[d] @ h
            elif self.ncnn_type == "GRU":
                r, u = _sig(xs[t][:n] + (h @ wh[:n].T) + b[0]), _sig(xs[t][n : 2 * n] + (h @ wh[n : 2 * n].T) + b[1])
                cand = np.tanh(xs[t][2 * n :] + b[2] + r * (h @ wh[2 * n :].T + b[3]))
                h = (1 - u) * cand + u * h
            else:
                h = np.tanh(g + b[0])
            y[t] = h
        return y, h.astype(F32), c
