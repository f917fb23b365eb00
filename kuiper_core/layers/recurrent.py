"""Recurrent layers: nn.RNN, nn.GRU, nn.LSTM (multi-layer, bidirectional, batch_first).

How pnnx writes them (verified with pnnx 20261020 / torch 2.13):
- params: input_size hidden_size num_layers bias batch_first bidirectional (+ proj_size for
  LSTM, nonlinearity=tanh|relu for RNN); weights named like torch's parameters:
  @weight_ih_l{k}[_reverse] (G*H, in), @weight_hh_l{k}[_reverse] (G*H, H_out),
  @bias_ih_l{k}[_reverse], @bias_hh_l{k}[_reverse] (G*H), LSTM with proj_size: @weight_hr_l{k}
  (P, H). Gate blocks in torch order: LSTM i,f,g,o; GRU r,z,n.
- inputs: x, then the initial state if the model passes one: h0 (RNN/GRU), h0 and c0 (LSTM);
  an LSTM given (h, h) gets one deduplicated state input used for both.
- outputs: output, h_n (, c_n) with the unused ones dropped; see module_outputs.py.

Computation: the input projection of every timestep is one matmul per layer (both
directions at once); only the recurrence loops over time, as it must.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from ..graph import Shape
from ..limits import PYTHON_STEP_WORK
from .module_outputs import dims_compatible, match_outputs, ordered_subsets
from .registry import Layer, register

F32 = np.float32
# Scalars as 0-d arrays: a ufunc converts a Python or NumPy scalar on every call (~0.2 us,
# a third of a small step's op).
_HALF = np.array(0.5, F32)


def _sigmoid_of_half_(x: np.ndarray) -> np.ndarray:
    """σ(a) = (1 + tanh(a/2)) / 2 in place, for x holding a/2: the weights and biases of the
    sigmoid gates are halved at build (`_sigmoid_rows`; exact in binary), which saves a pass
    per step. Via tanh: no overflow for large |a|, stays float32."""
    np.tanh(x, out=x)
    np.multiply(x, _HALF, out=x)
    np.add(x, _HALF, out=x)
    return x


@dataclass
class _Direction:
    """One layer and direction. The recurrence keeps its states as columns, (size, B):
    W_hh @ h is then a GEMM with the weight as its left operand, which OpenBLAS runs 1.3-1.5x
    faster than h^T @ W_hh^T for batches of 2-32 (a batch-8 LSTM step 18.5 -> 13 us); at
    batch 1 both are a GEMV and h^T @ W_hh^T (`w_hh_t`) is the faster one."""

    w_hh: np.ndarray  # (G*H, H_out), as torch's weight_hh (gates permuted, sigmoid rows halved)
    w_hh_t: np.ndarray  # (H_out, G*H): its transpose, contiguous, for batch 1
    b_hn: np.ndarray | None = None  # GRU: the n-gate hidden bias (G*H - 2H, 1), inside r * (...)
    w_hr: np.ndarray | None = None  # LSTM with proj_size: (P, H), torch's weight_hr

    def recurrent_gemm(self, batch: int, out: np.ndarray) -> Callable[[np.ndarray], object]:
        """h (H_out, B) -> out (G*H, B) = W_hh @ h, in the faster form for this batch."""
        if batch == 1:
            w_t, out_row = self.w_hh_t, out.T
            return lambda h: np.matmul(h.T, w_t, out=out_row)
        w = self.w_hh
        return lambda h: np.matmul(w, h, out=out)


@dataclass
class _Layer:
    w_ih: np.ndarray  # (in, D*G*H): both directions' input projections side by side
    b_x: np.ndarray | None  # (D*G*H,) bias folded into the input projection
    directions: list[_Direction]


class _Recurrent(Layer):
    gates = 1
    states: tuple[str, ...] = ("h_n",)  # final states the module returns

    def __init__(self, op) -> None:
        super().__init__(op)
        self.hidden_size = self.int_param("hidden_size")
        self.num_layers = self.int_param("num_layers", 1)
        self.bias = bool(self.param("bias", True))
        self.batch_first = bool(self.param("batch_first", False))
        self.num_directions = 2 if self.param("bidirectional", False) else 1
        self.proj_size = self.int_param("proj_size", 0)
        if self.hidden_size <= 0 or self.num_layers <= 0 or not 0 <= self.proj_size < self.hidden_size:
            raise self.error(
                f"expected hidden_size > 0, num_layers > 0 and 0 <= proj_size < hidden_size, got "
                f"hidden_size={self.hidden_size} num_layers={self.num_layers} proj_size={self.proj_size}"
            )
        self.out_size = self.proj_size or self.hidden_size  # size of h
        w0 = self.weight("weight_ih_l0")
        self.input_size = self.int_param("input_size", int(w0.shape[1]) if w0.ndim == 2 else 0)

        self.layers = [self._load_layer(k) for k in range(self.num_layers)]

        n_states = len(self.states)
        if len(op.inputs) not in (1, 2, 1 + n_states):
            raise self.error(
                f"expected 1 input (x) or {1 + n_states} (x, {', '.join(s[:1] + '0' for s in self.states)}), "
                f"got {len(op.inputs)}"
            )
        self._check_input_shapes()
        self.outputs = match_outputs(
            self, self._output_shapes(), ordered_subsets(("output",) + self.states, len(op.outputs))
        )

    # -- build --------------------------------------------------------------------------
    def _load_layer(self, k: int) -> _Layer:
        G, H = self.gates, self.hidden_size
        in_size = self.input_size if k == 0 else self.num_directions * self.out_size
        w_ihs, b_xs, directions = [], [], []
        for d in range(self.num_directions):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            w_ih = self._expect(f"weight_ih{sfx}", (G * H, in_size))
            w_hh = self._expect(f"weight_hh{sfx}", (G * H, self.out_size))
            b_ih = self._expect(f"bias_ih{sfx}", (G * H,)) if self.bias else None
            b_hh = self._expect(f"bias_hh{sfx}", (G * H,)) if self.bias else None
            w_hr = self._expect(f"weight_hr{sfx}", (self.proj_size, H)) if self.proj_size else None
            perm = self._gate_order()
            w_ih, w_hh = w_ih[perm], w_hh[perm]  # fancy indexing: copies, safe to scale
            half = self._sigmoid_rows()
            w_ih[:half] *= 0.5
            w_hh[:half] *= 0.5
            b_hn = None
            b_x = None
            if b_ih is not None and b_hh is not None:
                b_ih, b_hh = b_ih[perm], b_hh[perm]
                b_ih[:half] *= 0.5
                b_hh[:half] *= 0.5
                b_x, b_hn = self._fold_bias(b_ih, b_hh)
            w_ihs.append(w_ih.T)
            b_xs.append(b_x)
            directions.append(
                _Direction(w_hh, np.ascontiguousarray(w_hh.T), None if b_hn is None else b_hn[:, None], w_hr)
            )
        w_ih_all = np.ascontiguousarray(np.concatenate(w_ihs, axis=1))
        b_all = np.concatenate([b for b in b_xs if b is not None]) if self.bias else None
        return _Layer(w_ih_all, b_all, directions)

    def _expect(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        return self.shaped_weight(
            key,
            shape,
            f"input_size={self.input_size} hidden_size={self.hidden_size} proj_size={self.proj_size} "
            f"bidirectional={self.num_directions == 2} ({self.gates} gate block(s))",
        )

    def _gate_order(self) -> np.ndarray:
        """Row permutation of the gate blocks into the order `_scan` expects."""
        return np.arange(self.gates * self.hidden_size)

    def _sigmoid_rows(self) -> int:
        """How many leading gate rows (after `_gate_order`) go through a sigmoid: their
        weights and biases are halved at build (see `_sigmoid_of_half_`)."""
        return 0

    def _fold_bias(self, b_ih: np.ndarray, b_hh: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(bias added to x @ W_ih, bias kept apart for the recurrence)."""
        return b_ih + b_hh, None

    def _time_batch(self, x_shape: Shape | tuple[int, ...]) -> tuple:
        """(T, B) for an input shape; B is None when unbatched (2-D), and either may be
        None for a `?` dim of a dynamic-shape export: ask the rank, not B, which it is."""
        if len(x_shape) == 2:
            return x_shape[0], None
        return (x_shape[1], x_shape[0]) if self.batch_first else (x_shape[0], x_shape[1])

    def _check_input_shapes(self) -> None:
        x_shape = self.op.inputs[0].shape
        if x_shape is None:
            return
        if len(x_shape) not in (2, 3) or (isinstance(x_shape[-1], int) and x_shape[-1] != self.input_size):
            raise self.error(
                f"input has shape {tuple(x_shape)}, expected ({'batch, seq' if self.batch_first else 'seq, batch'}, "
                f"{self.input_size}) or unbatched (seq, {self.input_size})"
            )
        _, B = self._time_batch(x_shape)
        lead = (self.num_layers * self.num_directions,) + ((B,) if len(x_shape) == 3 else ())
        sizes = {"h_n": self.out_size, "c_n": self.hidden_size}
        for operand, state in zip(self.op.inputs[1:], self.states):
            want = lead + (sizes[state],)
            if not dims_compatible(operand.shape, want):
                raise self.error(f"initial state {state[0]}0 has shape {operand.shape}, expected {want}")

    def _output_shapes(self) -> dict[str, Shape | None]:
        x_shape = self.op.inputs[0].shape
        if x_shape is None:
            return {name: None for name in ("output",) + self.states}
        T, B = self._time_batch(x_shape)
        L, D = self.num_layers, self.num_directions
        if len(x_shape) == 2:
            output: Shape = (T, D * self.out_size)
            lead: Shape = (L * D,)
        else:
            output = (B, T, D * self.out_size) if self.batch_first else (T, B, D * self.out_size)
            lead = (L * D, B)
        shapes: dict[str, Shape | None] = {"output": output, "h_n": lead + (self.out_size,)}
        if "c_n" in self.states:
            shapes["c_n"] = lead + (self.hidden_size,)
        return shapes

    # -- run ----------------------------------------------------------------------------
    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], dtype=F32)
        unbatched = x.ndim == 2
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise self.error(
                f"input has shape {x.shape}, expected 3-D (or unbatched 2-D) with last dim {self.input_size}"
            )
        if unbatched:
            seq = x[:, None, :]  # (T, 1, F); torch ignores batch_first for unbatched input
            batch_first = False
        else:
            batch_first = self.batch_first
            seq = x  # in the caller's layout: (B, T, F) or (T, B, F)
        T, B = (seq.shape[1], seq.shape[0]) if batch_first else seq.shape[:2]
        D, H, P = self.num_directions, self.hidden_size, self.out_size
        steps = T * len(self.layers) * D  # each a Python step (2^22 of a 1-wide LSTM: minutes)
        self.check_work(self.flops([x.shape], []) + steps * PYTHON_STEP_WORK, f"{T:,} time steps")

        init = self._initial_states(inputs[1:], B, unbatched)
        finals = {s: np.empty_like(s0) for s, s0 in zip(self.states, init)}
        GH = self.gates * H

        for k, layer in enumerate(self.layers):
            # Layer output in the caller's layout; `tm` is its time-major view.
            buf = np.empty((B, T, D * P) if batch_first else (T, B, D * P), F32)
            tm = buf.transpose(1, 0, 2) if batch_first else buf
            # Every timestep's input projection, both directions, in one 2-D GEMM over the
            # layer input in its own layout (a 3-D matmul over the time-major view of a
            # batch-first input ran T small GEMMs: a 2-layer LSTM at batch 8 over 100 steps
            # spent 3.9 ms outside its steps, now 2.7).
            xp = np.matmul(np.ascontiguousarray(seq).reshape(-1, seq.shape[-1]), layer.w_ih)
            if layer.b_x is not None:
                xp += layer.b_x
            xp = xp.reshape(B, T, -1).transpose(1, 0, 2) if batch_first else xp.reshape(T, B, -1)
            for d, direction in enumerate(layer.directions):
                i = k * D + d
                times = range(T) if d == 0 else range(T - 1, -1, -1)
                # The recurrence works on columns (see _Direction): each step's (G*H, B).
                xp_d = np.ascontiguousarray(xp[:, :, d * GH : (d + 1) * GH].transpose(0, 2, 1))
                out_d = tm[:, :, d * P : (d + 1) * P]
                states = [np.ascontiguousarray(s[i].T) for s in init]
                result = self._scan(direction, xp_d, states, times, out_d)
                for s, value in zip(self.states, result):
                    finals[s][i] = value.T
            seq = buf

        values = {"output": buf, **finals}
        if unbatched:
            values = {"output": buf[:, 0], **{s: v[:, 0] for s, v in finals.items()}}
        return [values[name] for name in self.outputs]

    def _initial_states(self, given: list[np.ndarray], B: int, unbatched: bool) -> list[np.ndarray]:
        """h0 (, c0) as (layers*directions, B, size) arrays: the given ones, or zeros."""
        L, D = self.num_layers, self.num_directions
        sizes = (self.out_size, self.hidden_size)
        if not given:
            return [np.zeros((L * D, B, size), F32) for _, size in zip(self.states, sizes)]
        if len(given) < len(self.states):  # an LSTM given (h, h): pnnx keeps one input
            given = given * len(self.states)
        states = []
        for name, s, size in zip(self.states, given, sizes):
            s = np.asarray(s, dtype=F32)
            want = (L * D, size) if unbatched else (L * D, B, size)
            if s.shape != want:
                raise self.error(f"initial state {name[0]}0 has shape {s.shape}, expected {want}")
            states.append(s[:, None, :] if unbatched else s)
        return states

    def _scan(
        self, d: _Direction, xp: np.ndarray, states: list[np.ndarray], times: range, dst: np.ndarray
    ) -> list[np.ndarray]:
        """Run the recurrence over `times`: xp (T, G*H, B) the input projections, states and
        the final states returned as columns (size, B); h_t goes to dst[t] (B, H_out).

        Each step computes h_t at batch 1 in its own place in the output (`direct`: a (1, H_out)
        row there is the (H_out, 1) column), else in a buffer copied out after."""
        raise NotImplementedError

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        T, B = self._time_batch(inputs[0])
        steps = int(T) * int(B or 1)
        GH, D = self.gates * self.hidden_size, self.num_directions
        macs = 0
        for layer in self.layers:
            macs += steps * layer.w_ih.size  # input projection, both directions
            macs += steps * D * (self.out_size * GH + (self.hidden_size * self.proj_size))
        return macs


@register("nn.RNN")
class RNN(_Recurrent):
    """h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act = tanh or relu."""

    gates = 1

    def __init__(self, op) -> None:
        nonlinearity = op.params.get("nonlinearity", "tanh")
        super().__init__(op)
        if nonlinearity not in ("tanh", "relu"):
            raise self.error(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.relu = nonlinearity == "relu"

    def _scan(self, d, xp, states, times, dst):
        (h,) = states
        hp = np.empty_like(xp[0])
        gemm = d.recurrent_gemm(h.shape[1], hp)
        buf, direct = np.empty_like(h), h.shape[1] == 1
        for t in times:
            gemm(h)
            h = dst[t].T if direct else buf
            np.add(hp, xp[t], out=h)
            if self.relu:
                np.maximum(h, 0, out=h)
            else:
                np.tanh(h, out=h)
            if not direct:
                np.copyto(dst[t], h.T)
        return [h]


@register("nn.GRU")
class GRU(_Recurrent):
    """r, z = σ(x W_ir,z + b_ir,z + h W_hr,z + b_hr,z); n = tanh(x W_in + b_in + r * (h W_hn + b_hn));
    h' = (1 - z) * n + z * h."""

    gates = 3

    def _fold_bias(self, b_ih, b_hh):
        H = self.hidden_size
        b_x = b_ih.copy()
        b_x[: 2 * H] += b_hh[: 2 * H]  # r and z biases add up; b_hn must stay inside r * (...)
        return b_x, b_hh[2 * H :].copy()

    def _sigmoid_rows(self) -> int:
        return 2 * self.hidden_size  # r, z

    def _scan(self, d, xp, states, times, dst):
        (h,) = states
        H = self.hidden_size
        hp = np.empty_like(xp[0])  # W_hh h: (3H, B)
        gemm = d.recurrent_gemm(h.shape[1], hp)
        rz = np.empty_like(hp[: 2 * H])
        r, z = rz[:H], rz[H:]
        n = hp[2 * H :]
        bufs, direct = [np.empty_like(h), np.empty_like(h)], h.shape[1] == 1  # h, h' alternate
        for t in times:
            gemm(h)
            x = xp[t]
            _sigmoid_of_half_(np.add(x[: 2 * H], hp[: 2 * H], out=rz))
            if d.b_hn is not None:
                n += d.b_hn
            n *= r
            n += x[2 * H :]
            np.tanh(n, out=n)
            h_next = dst[t].T if direct else bufs[t % 2]  # h' = n + z * (h - n)
            np.subtract(h, n, out=h_next)
            h_next *= z
            h_next += n
            h = h_next
            if not direct:
                np.copyto(dst[t], h.T)
        return [h]


@register("nn.LSTM")
class LSTM(_Recurrent):
    """i, f, o = σ(...), g = tanh(...); c' = f * c + i * g; h' = o * tanh(c') (then h' W_hr^T
    with proj_size)."""

    gates = 4
    states = ("h_n", "c_n")

    def _gate_order(self) -> np.ndarray:
        # torch's i,f,g,o -> i,f,o,g: the sigmoid gates are the first 3H rows, g the rest.
        H = self.hidden_size
        return np.concatenate([np.arange(0, 2 * H), np.arange(3 * H, 4 * H), np.arange(2 * H, 3 * H)])

    def _sigmoid_rows(self) -> int:
        return 3 * self.hidden_size  # i, f, o

    def _scan(self, d, xp, states, times, dst):
        h0, c0 = states
        H = self.hidden_size
        B = h0.shape[1]
        gates = np.empty_like(xp[0])  # (4H, B)
        gemm = d.recurrent_gemm(B, gates)
        ifo, i, f, o, g = gates[: 3 * H], gates[:H], gates[H : 2 * H], gates[2 * H : 3 * H], gates[3 * H :]
        c = c0.copy()  # updated in place; the caller's initial state stays as given
        tmp = np.empty((H, B), F32)
        h = h0
        buf, direct = np.empty((self.out_size, B), F32), B == 1
        h_full = np.empty((H, B), F32) if d.w_hr is not None else None
        for t in times:
            gemm(h)
            gates += xp[t]
            np.tanh(gates, out=gates)  # i, f, o: tanh(a/2) (rows halved at build); g: tanh(a)
            np.multiply(ifo, _HALF, out=ifo)
            np.add(ifo, _HALF, out=ifo)  # σ(a) = (1 + tanh(a/2)) / 2
            c *= f
            np.multiply(i, g, out=tmp)
            c += tmp
            np.tanh(c, out=tmp)
            h = dst[t].T if direct else buf
            if h_full is None:
                np.multiply(o, tmp, out=h)
            else:
                np.multiply(o, tmp, out=h_full)
                np.matmul(d.w_hr, h_full, out=h)
            if not direct:
                np.copyto(dst[t], h.T)
        return [h, c]
