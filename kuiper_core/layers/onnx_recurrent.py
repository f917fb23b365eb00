"""ONNX's recurrent operators, which pnnx keeps as ONNX nodes with their weights as inputs:
LSTM, GRU, RNN, with ONNX's semantics (the spec's equations, gate orders LSTM i,o,f,c and GRU
z,r,h — not torch's), directions forward / reverse / bidirectional, initial states,
sequence_lens, activations (with their alpha/beta), clip, layout, LSTM's peepholes and
input_forget, GRU's linear_before_reset.

Inputs as ONNX orders them: X, W, R, then the optional B, sequence_lens, initial_h, initial_c
(LSTM), P (LSTM). pnnx drops the omitted ones (`""`), so after X, W, R each is told by its
rank and dtype: an integer vector is sequence_lens, a 3-D tensor a state (initial_h, then
initial_c), a 2-D one B (2·G·H wide) or P (3·H wide). Outputs Y, Y_h, Y_c likewise: an
unused one is dropped, and the declared ranks (Y has 4 dims) say which are left.

A plain loop over time steps, as the spec writes it (layers/recurrent.py is the fast form of
torch's modules); the input projection of all steps is one matmul per direction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph import Operator
from ..limits import PYTHON_STEP_WORK
from .registry import Layer, register

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (np.tanh(x * 0.5) + 1) * 0.5  # no overflow for large |x|


def _activation(name: str, alpha: float | None, beta: float | None) -> Activation | None:
    """ONNX's recurrent activation functions by name (their alpha/beta defaults as the spec's)."""
    a = alpha
    b = beta
    table: dict[str, Activation] = {
        "sigmoid": _sigmoid,
        "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0),
        "leakyrelu": lambda x: np.where(x >= 0, x, x * (0.01 if a is None else a)),
        "thresholdedrelu": lambda x: np.where(x > (1.0 if a is None else a), x, 0),
        "scaledtanh": lambda x: (1.0 if a is None else a) * np.tanh(x * (1.0 if b is None else b)),
        "hardsigmoid": lambda x: np.clip(x * (0.2 if a is None else a) + (0.5 if b is None else b), 0, 1),
        "elu": lambda x: np.where(x >= 0, x, (1.0 if a is None else a) * np.expm1(np.minimum(x, 0))),
        "softsign": lambda x: x / (1 + np.abs(x)),
        "softplus": lambda x: np.logaddexp(x, 0),
        "affine": lambda x: x * (1.0 if a is None else a) + (0.0 if b is None else b),
    }
    return table.get(name.lower())


class _OnnxRecurrent(Layer):
    gates = 1  # blocks of H rows in W and R
    default_activations: tuple[str, ...] = ("Tanh",)
    n_states = 1  # initial_h (and initial_c for LSTM)
    n_outputs = 2  # Y, Y_h (, Y_c)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.hidden = self.int_param("hidden_size", low=1)
        direction = self.param("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise self.error(f"direction must be forward, reverse or bidirectional, got {direction!r}")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [str(direction)]
        self.layout = self.int_param("layout", 0, low=0, high=1)
        clip = self.param("clip", None)
        self.clip = None if clip is None else self.float_param("clip")
        self.activations = self._activations()
        if len(op.inputs) < 3:
            raise self.error(f"expected at least 3 inputs (X, W, R), got {len(op.inputs)}")
        self.outputs = self._output_slots()

    def _activations(self) -> list[list[Activation]]:
        names = self.param("activations", None)
        n = len(self.default_activations)
        if names is None:
            names = list(self.default_activations) * len(self.directions)
        if not isinstance(names, (str, list)):
            raise self.error(f"parameter 'activations' must be names, got {names!r}")
        names = [names] if isinstance(names, str) else list(names)
        alphas = self._floats("activation_alpha")
        betas = self._floats("activation_beta")
        if len(names) != n * len(self.directions):
            raise self.error(f"expected {n} activation(s) per direction, got {names}")
        fns = []
        for k, name in enumerate(names):
            fn = _activation(str(name), alphas[k] if k < len(alphas) else None, betas[k] if k < len(betas) else None)
            if fn is None:
                raise self.error(f"unknown activation {name!r}")
            fns.append(fn)
        return [fns[d * n : (d + 1) * n] for d in range(len(self.directions))]

    def _floats(self, key: str) -> list[float]:
        value = self.param(key, None)
        if value is None:
            return []
        return [float(v) for v in (value if isinstance(value, list) else [value])]

    def _output_slots(self) -> list[int]:
        """Which of Y (0), Y_h (1), Y_c (2) each output is: by declared rank where known."""
        slots, next_state = [], 1
        for k, o in enumerate(self.op.outputs):
            if o.shape is not None and len(o.shape) == 4:
                slots.append(0)
            elif o.shape is not None and len(o.shape) == 3:
                slots.append(next_state)
                next_state += 1
            else:
                slots.append(k)
        if any(s >= self.n_outputs for s in slots) or len(set(slots)) != len(slots):
            raise self.error(f"cannot tell which of Y, Y_h{', Y_c' if self.n_outputs == 3 else ''} the outputs are")
        return slots

    # -- inputs ---------------------------------------------------------------------------
    def _optional_inputs(self, inputs: list[Any], n_dir: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        states = ["initial_h", "initial_c"][: self.n_states]
        for v in inputs[3:]:
            arr = np.asarray(v)
            if arr.dtype.kind in "iu" and arr.ndim == 1:
                name = "sequence_lens"
            elif arr.ndim == 3 and states:
                name = states.pop(0)
            elif arr.ndim == 2 and arr.shape == (n_dir, 2 * self.gates * self.hidden):
                name = "B"
            elif arr.ndim == 2 and self.n_states == 2 and arr.shape == (n_dir, 3 * self.hidden):
                name = "P"
            else:
                raise self.error(f"cannot tell which optional input a {arr.dtype} tensor of shape {arr.shape} is")
            if name in found:
                raise self.error(f"two inputs read as {name}")
            found[name] = arr
        return found

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x, w, r = (np.asarray(v) for v in inputs[:3])
        n_dir, G, H = len(self.directions), self.gates, self.hidden
        if x.ndim != 3:
            raise self.error(f"X must be 3-D, got {x.shape}")
        if self.layout:
            x = x.transpose(1, 0, 2)  # (batch, seq, in) -> (seq, batch, in)
        T, B, size = x.shape
        self.check_work(n_dir * T * (PYTHON_STEP_WORK + B * G * H * (size + H)), f"{T:,} time steps")
        if w.shape != (n_dir, G * H, size) or r.shape != (n_dir, G * H, H):
            raise self.error(
                f"W {w.shape} and R {r.shape} must be {(n_dir, G * H, size)} and {(n_dir, G * H, H)} "
                f"for hidden_size={H}, {n_dir} direction(s), input size {size}"
            )
        opt = self._optional_inputs(inputs, n_dir)
        lens = opt.get("sequence_lens")
        lens = np.full(B, T, np.int64) if lens is None else lens.astype(np.int64)
        if lens.shape != (B,) or (lens < 0).any() or (lens > T).any():
            raise self.error(f"sequence_lens must be {B} lengths in 0..{T}, got {lens}")
        bias = opt.get("B", np.zeros((n_dir, 2 * G * H), x.dtype))
        h0 = opt.get("initial_h", np.zeros((n_dir, B, H), x.dtype))
        c0 = opt.get("initial_c", np.zeros((n_dir, B, H), x.dtype))
        for name, s in (("initial_h", h0), ("initial_c", c0)):
            if s.shape != (n_dir, B, H):
                raise self.error(f"{name} must be {(n_dir, B, H)}, got {s.shape}")
        y = np.zeros((T, n_dir, B, H), x.dtype)
        finals: list[list[np.ndarray]] = [[], []]
        for d, direction in enumerate(self.directions):
            steps = range(T - 1, -1, -1) if direction == "reverse" else range(T)
            xw = x @ w[d].T + bias[d, : G * H]  # every step's input projection at once
            state = (h0[d], c0[d])
            for t in steps:
                active = (t < lens)[:, None]  # past its length a sequence keeps its state
                new = self.cell(d, xw[t], state, r[d], bias[d, G * H :], opt)
                state = (np.where(active, new[0], state[0]), np.where(active, new[1], state[1]))
                y[t, d] = np.where(active, state[0], 0)
            finals[0].append(state[0])
            finals[1].append(state[1])
        results = [y, np.stack(finals[0]), np.stack(finals[1])]
        if self.layout:
            results = [y.transpose(2, 0, 1, 3), results[1].transpose(1, 0, 2), results[2].transpose(1, 0, 2)]
        return [np.ascontiguousarray(results[s], dtype=x.dtype) for s in self.outputs]

    def clipped(self, a: np.ndarray) -> np.ndarray:
        return a if self.clip is None else np.clip(a, -self.clip, self.clip)

    def cell(
        self, d: int, xw: np.ndarray, state: tuple[np.ndarray, np.ndarray], r: np.ndarray, rb: np.ndarray, opt: dict
    ) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


@register("RNN")
class OnnxRNN(_OnnxRecurrent):
    """Ht = f(Xt·Wᵀ + Ht-1·Rᵀ + Wb + Rb)."""

    def cell(self, d, xw, state, r, rb, opt):
        (f,) = self.activations[d]
        h = f(self.clipped(xw + state[0] @ r.T + rb))
        return h, state[1]


@register("GRU")
class OnnxGRU(_OnnxRecurrent):
    """Gates z, r, h: zt = f(Xt·Wzᵀ + Ht-1·Rzᵀ + Wbz + Rbz), rt likewise; ht = g(Xt·Whᵀ +
    (rt ⊙ Ht-1)·Rhᵀ + Rbh + Wbh), or with linear_before_reset g(Xt·Whᵀ + rt ⊙ (Ht-1·Rhᵀ + Rbh)
    + Wbh) (torch's form); Ht = (1 - zt) ⊙ ht + zt ⊙ Ht-1."""

    gates = 3
    default_activations = ("Sigmoid", "Tanh")

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.linear_before_reset = bool(self.int_param("linear_before_reset", 0))

    def cell(self, d, xw, state, r, rb, opt):
        f, g = self.activations[d]
        H, h_prev = self.hidden, state[0]
        zr = self.clipped(xw[:, : 2 * H] + h_prev @ r[: 2 * H].T + rb[: 2 * H])
        z, reset = f(zr[:, :H]), f(zr[:, H:])
        if self.linear_before_reset:
            hidden = reset * (h_prev @ r[2 * H :].T + rb[2 * H :])
        else:
            hidden = (reset * h_prev) @ r[2 * H :].T + rb[2 * H :]
        h = g(self.clipped(xw[:, 2 * H :] + hidden))
        return (1 - z) * h + z * h_prev, state[1]


@register("LSTM")
class OnnxLSTM(_OnnxRecurrent):
    """Gates i, o, f, c: it = f(Xt·Wiᵀ + Ht-1·Riᵀ + Pi ⊙ Ct-1 + Wbi + Rbi), ft likewise (Pf),
    ct = g(...), Ct = ft ⊙ Ct-1 + it ⊙ ct, ot = f(... + Po ⊙ Ct), Ht = ot ⊙ h(Ct); with
    input_forget ft = 1 - it."""

    gates = 4
    default_activations = ("Sigmoid", "Tanh", "Tanh")
    n_states = 2
    n_outputs = 3

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.input_forget = bool(self.int_param("input_forget", 0))

    def cell(self, d, xw, state, r, rb, opt):
        f, g, h_act = self.activations[d]
        H, (h_prev, c_prev) = self.hidden, state
        p = opt.get("P")
        pi, po, pf = (np.zeros(H, xw.dtype),) * 3 if p is None else (p[d, :H], p[d, H : 2 * H], p[d, 2 * H :])
        a = xw + h_prev @ r.T + rb
        i = f(self.clipped(a[:, :H] + pi * c_prev))
        forget = 1 - i if self.input_forget else f(self.clipped(a[:, 2 * H : 3 * H] + pf * c_prev))
        c = forget * c_prev + i * g(self.clipped(a[:, 3 * H :]))
        o = f(self.clipped(a[:, H : 2 * H] + po * c))
        return o * h_act(c), c
