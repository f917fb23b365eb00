"""Attention: nn.MultiheadAttention and F.scaled_dot_product_attention.

How pnnx writes nn.MultiheadAttention (verified with pnnx 20261020 / torch 2.13):
- params: embed_dim num_heads kdim vdim bias add_bias_kv add_zero_attn, and batch_first=True
  only when set (absent means False). No dropout, no average_attn_weights.
- weights: @in_proj_weight (3E, E) when kdim == vdim == embed_dim, else @q_proj_weight (E, E),
  @k_proj_weight (E, kdim), @v_proj_weight (E, vdim); with bias @in_proj_bias (3E) and
  @out_proj.bias; always @out_proj.weight (E, E); with add_bias_kv @bias_k, @bias_v (1, 1, E).
- inputs are deduplicated: 1 input = self-attention (q = k = v), 2 = (query, key = value),
  3 = (query, key, value); an attention mask is an extra input named `$attn_mask`. A
  self-attention's one input may be named `$input` (Swin at optlevel 2: `$input=7
  $attn_mask=8`, the mask (windows·heads, L, S) from the shifted windows and position bias). pnnx writes
  q = k != v and q = v != k also as 2 inputs, indistinguishable from (query, key = value).
  pnnx writes key_padding_mask as `$attn_mask` too. Where it folded that mask into a constant
  it names it (`pnnx.Attribute pnnx_fold_key_padding_mask.1`, a (B, S) additive mask of a
  seq-first nn.TransformerEncoder given src_key_padding_mask): read as the key padding mask it
  was. Any other (B, S) mask is refused (it cannot be told from an (L, S) one when B = L; the
  conversion check then finds the disagreement).
- `attn_mask_repeat=True` is this engine's, written by FuseAttention (passes/attention.py): the
  (P·heads, L, S) mask repeats along the batch, B a multiple of P (Swin's windows, a mask per
  window, at any batch: what its view (B/P, P, heads, L, S) + mask computes). PyTorch has no such
  argument; without it the mask must be (L, S) or (B·heads, L, S), as in PyTorch.
- outputs: attn_output and/or attn_weights, unused ones dropped (see module_outputs.py);
  the weights are (B, L, S) averaged over heads, or (B, heads, L, S) per head.

Computation is batched over heads (no loop): projections are one matmul each (one for q, k
and v together in self-attention), the 1/sqrt(head_dim) scale is folded into the query
projection at build time, and the softmax subtracts the row max.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from ..graph import Operand, Operator, Shape
from .activation import softmax
from .broadcast import expanded
from .linear import matmul_bias
from .halves import SplitRequest, halves_call, split_rows
from .module_outputs import match_outputs
from .registry import Layer, Prepared, register
from .windows import scratch

F32 = np.float32
NEG_INF = F32(-np.inf)


def _divides(h: int, rows: int, total: int) -> bool:
    """`rows` is a whole number of periods of `h` heads that repeats a whole number of times in `total`."""
    return rows > 0 and rows % h == 0 and total % rows == 0


def additive_mask(mask: np.ndarray, true_means_masked: bool) -> np.ndarray:
    """A float32 mask to add to the scores: bool masks become 0 / -inf, float masks pass."""
    if mask.dtype == np.bool_:
        blocked = mask if true_means_masked else ~mask
        return np.where(blocked, NEG_INF, F32(0))
    return mask.astype(F32, copy=False)


def _folded_key_padding(mask: Operand) -> bool:
    """pnnx's constant of a folded key_padding_mask (see the module's docstring)."""
    producer = mask.producer
    return producer is not None and producer.type == "pnnx.Attribute" and "key_padding_mask" in producer.name


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T + mask) v over the last two axes; q already scaled. Returns (out, probs)."""
    scores = np.matmul(q, np.swapaxes(k, -1, -2))
    if mask is not None:
        scores += mask
    probs = np.empty_like(scores)
    softmax(scores, probs, scores.ndim - 1)  # not in place: its fast path needs the scores
    return np.matmul(probs, v), probs


@register("nn.MultiheadAttention")
class MultiheadAttention(Layer):
    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        E = self.embed_dim = self.int_param("embed_dim")
        h = self.num_heads = self.int_param("num_heads")
        self.kdim = self.int_param("kdim", E)
        self.vdim = self.int_param("vdim", E)
        self.batch_first = bool(self.param("batch_first", False))
        self.add_bias_kv = bool(self.param("add_bias_kv", False))
        self.add_zero_attn = bool(self.param("add_zero_attn", False))
        self.mask_repeat = bool(self.param("attn_mask_repeat", False))
        if E <= 0 or h <= 0 or E % h:
            raise self.error(f"embed_dim ({E}) must be a positive multiple of num_heads ({h})")
        self.head_dim = E // h
        scale = F32(1.0 / np.sqrt(self.head_dim))

        # Projection weights, transposed for `x @ w`, the query's scaled by 1/sqrt(head_dim).
        bq: np.ndarray | None
        bk: np.ndarray | None
        bv: np.ndarray | None
        if "in_proj_weight" in op.attrs:
            if self.kdim != E or self.vdim != E:
                raise self.error(
                    f"@in_proj_weight needs kdim == vdim == embed_dim, got kdim={self.kdim} vdim={self.vdim}"
                )
            w = self._expect("in_proj_weight", (3 * E, E))
            wq, wk, wv = w[:E], w[E : 2 * E], w[2 * E :]
        else:
            wq = self._expect("q_proj_weight", (E, E))
            wk = self._expect("k_proj_weight", (E, self.kdim))
            wv = self._expect("v_proj_weight", (E, self.vdim))
        if "in_proj_bias" in op.attrs:
            b = self._expect("in_proj_bias", (3 * E,))
            bq, bk, bv = b[:E] * scale, b[E : 2 * E], b[2 * E :]
        else:
            bq = bk = bv = None
        self.wq, self.wk, self.wv = (wq * scale).T.copy(), wk.T.copy(), wv.T.copy()
        self.bq, self.bk, self.bv = bq, bk, bv
        self.wo = self._expect("out_proj.weight", (E, E)).T.copy()
        self.bo = self._expect("out_proj.bias", (E,)) if "out_proj.bias" in op.attrs else None
        if self.add_bias_kv:
            self.bias_k = self._expect("bias_k", (1, 1, E)).reshape(1, 1, E)
            self.bias_v = self._expect("bias_v", (1, 1, E)).reshape(1, 1, E)

        self.mask_index, self.qkv_index = self._input_roles(op)
        if not 1 <= len(self.qkv_index) <= 3:
            raise self.error(
                f"expected 1 to 3 inputs (query[, key[, value]]) besides attn_mask, got {len(self.qkv_index)}"
            )
        n = len(self.qkv_index)
        self.roles = {1: (0, 0, 0), 2: (0, 1, 1), 3: (0, 1, 2)}[n]  # query, key, value -> qkv_index slot
        # Fused projections where operands coincide: one matmul instead of two or three.
        self.w_fused: np.ndarray | None
        self.b_fused: np.ndarray | None
        if n == 1 and self.kdim == self.vdim == E:
            self.w_fused = np.concatenate([self.wq, self.wk, self.wv], axis=1)
            self.b_fused = None if bq is None else np.concatenate([bq, bk, bv])
        elif n == 2 and self.kdim == self.vdim:
            self.w_fused = np.concatenate([self.wk, self.wv], axis=1)
            self.b_fused = None if bk is None else np.concatenate([bk, bv])
        else:
            self.w_fused = self.b_fused = None
        self._check_inputs()
        self.extra_keys = int(self.add_bias_kv) + int(self.add_zero_attn)
        self.outputs = match_outputs(
            self,
            self._output_shapes(),
            [("output",), ("weights",), ("head_weights",), ("output", "weights"), ("output", "head_weights")],
        )

    # -- build --------------------------------------------------------------------------
    def _input_roles(self, op: Operator) -> tuple[int | None, list[int]]:
        """Which input is the mask (if any) and which are query[, key[, value]]."""
        # Newer pnnx names a self-attention's one input `$input` (its Python passes it as query,
        # key and value: Swin's windows with their shifted-window mask `$attn_mask`).
        # Its ONNX import can name all three instead (`$query=0 $key=1 $value=2`: a seq-first
        # attention with kdim/vdim at batch 1): then they are taken by name.
        roles = [i for i, n in enumerate(op.input_names) if n == "attn_mask"]
        named = {n: i for i, n in enumerate(op.input_names) if n in ("query", "key", "value")}
        unknown = {n for n in op.input_names if n not in ("", "input", "attn_mask", *named)}
        if unknown or (named and ("query" not in named or len(named) + len(roles) != len(op.inputs))):
            raise self.error(
                f"unsupported named input(s) {sorted(unknown or op.input_names)}; expected $input or "
                "$query[, $key[, $value]], and $attn_mask"
            )
        mask_index = roles[0] if roles else None
        qkv_index = [i for i in range(len(op.inputs)) if i != mask_index]
        if named:
            qkv_index = [named[n] for n in ("query", "key", "value") if n in named]
        if mask_index is not None and len(op.inputs) == 2:
            # pnnx 20261020 writes a self-attention whose mask is a module buffer (a causal
            # mask, a pnnx.Attribute) with its two operands in the wrong order: the query
            # sits where the name says attn_mask (its own generated Python then passes the
            # mask as the query). Swap only when the file's reading is impossible (the
            # "query" cannot be one) and the swapped one fits.
            q, m = (op.inputs[i] for i in (qkv_index[0], mask_index))
            E = self.embed_dim
            if q.shape is not None and not self._fits(q, E) and self._fits(m, E):
                return qkv_index[0], [mask_index]
        return mask_index, qkv_index

    def _expect(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        return self.shaped_weight(key, shape, f"embed_dim={self.embed_dim} kdim={self.kdim} vdim={self.vdim}")

    def _operand_shape(self, role: int) -> Shape | None:
        return self.op.inputs[self.qkv_index[self.roles[role]]].shape

    @staticmethod
    def _fits(operand: Operand, size: int) -> bool:
        """Whether a declared operand can be a query/key/value of feature size `size`."""
        shape = operand.shape
        if shape is None:
            return True
        bad_dtype = operand.dtype is not None and operand.dtype not in ("f32", "f16", "f64")
        return len(shape) in (2, 3) and not (isinstance(shape[-1], int) and shape[-1] != size) and not bad_dtype

    def _check_inputs(self) -> None:
        for role, (what, size) in enumerate((("query", self.embed_dim), ("key", self.kdim), ("value", self.vdim))):
            operand = self.op.inputs[self.qkv_index[self.roles[role]]]
            shape = operand.shape
            if not self._fits(operand, size):
                assert shape is not None
                raise self.error(
                    f"{what} is operand {operand.name} shaped {tuple(shape)} {operand.dtype or ''}, expected a float "
                    f"({'batch, seq' if self.batch_first else 'seq, batch'}, {size}) or unbatched (seq, {size}) tensor"
                )

    def _batch_seq(self, shape: Shape) -> tuple:
        if len(shape) == 2:
            return None, shape[0]
        return (shape[0], shape[1]) if self.batch_first else (shape[1], shape[0])

    def _output_shapes(self) -> dict[str, Shape | None]:
        q_shape, k_shape = self._operand_shape(0), self._operand_shape(1)
        if q_shape is None or k_shape is None:
            return {"output": q_shape, "weights": None, "head_weights": None}
        B, L = self._batch_seq(q_shape)
        _, S = self._batch_seq(k_shape)
        if isinstance(S, int):
            S += int(self.add_bias_kv) + int(self.add_zero_attn)
        lead: Shape = () if len(q_shape) == 2 else (B,)  # B is None for unbatched, and for a `?` batch
        return {"output": q_shape, "weights": lead + (L, S), "head_weights": lead + (self.num_heads, L, S)}

    @property
    def key_padding(self) -> bool:
        """The mask is a key padding mask pnnx folded and passed as $attn_mask (module docstring)."""
        index, operands = self.mask_index, self.op.inputs  # (a layer made in a test may have no operands)
        return index is not None and index < len(operands) and _folded_key_padding(operands[index])

    # -- run ----------------------------------------------------------------------------
    def _check_work(self, inputs: list[np.ndarray]) -> None:
        """Projections and scores counted from the shapes (flops) before any work: a long
        sequence of a narrow model asks for minutes within every tensor limit."""
        self.check_work(self.flops([np.shape(a) for a in inputs], []), "the attention")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        self._check_work(inputs)
        ops = [inputs[i] for i in self.qkv_index]
        query, key, value = (ops[r] for r in self.roles)
        unbatched = query.ndim == 2
        if unbatched:  # (seq, E) -> (1, seq, E)
            query, key, value = query[None], key[None], value[None]
        elif not self.batch_first:  # (seq, batch, E) -> (batch, seq, E) views
            query, key, value = (a.transpose(1, 0, 2) for a in (query, key, value))
        B, L, E = query.shape
        h, d = self.num_heads, self.head_dim

        q, k, v = self._project(ops, query, key, value)
        if self.add_bias_kv:
            k = np.concatenate([k, np.broadcast_to(self.bias_k, (B, 1, E))], axis=1)
            v = np.concatenate([v, np.broadcast_to(self.bias_v, (B, 1, E))], axis=1)
        # (B, seq, E) -> (B, heads, seq, head_dim)
        q = q.reshape(B, L, h, d).transpose(0, 2, 1, 3)
        k = k.reshape(B, -1, h, d).transpose(0, 2, 1, 3)
        v = v.reshape(B, -1, h, d).transpose(0, 2, 1, 3)
        if self.add_zero_attn:
            zeros = np.zeros((B, h, 1, d), F32)
            k, v = np.concatenate([k, zeros], axis=2), np.concatenate([v, zeros], axis=2)

        mask = None
        if self.mask_index is not None:
            mask = self._mask(inputs[self.mask_index], B, L, k.shape[2])
        attn, probs = attend(q, k, v, mask)

        # (B, heads, L, d) -> (L, B, E) or (B, L, E), then the output projection.
        attn = attn.transpose(0, 2, 1, 3).reshape(B, L, E)
        if not (unbatched or self.batch_first):
            attn = attn.transpose(1, 0, 2)
        y = np.matmul(attn, self.wo)
        if self.bo is not None:
            y += self.bo
        if unbatched:
            y, probs = y[0], probs[0]
        values = {"output": y, "head_weights": probs}
        if "weights" in self.outputs:
            values["weights"] = probs.mean(axis=-3, dtype=F32)  # averaged over heads
        return [values[name] for name in self.outputs]

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        """Batched self-attention (one float32 input, at most a mask, no extra keys, only the
        output): `self_attention`, its work arrays in scratch and the output written in place."""
        if (
            self.w_fused is None
            or self.key_padding  # (B, 1, 1, S): the batched kernels take (L, S) or per-head masks
            or len(self.qkv_index) != 1
            or self.extra_keys
            or self.outputs != ("output",)
            or len(inputs) != 1 + (self.mask_index is not None)
            or len(out) != 1
        ):
            return None
        x, y = inputs[self.qkv_index[0]], out[0]
        if (
            x.ndim != 3
            or x.shape[-1] != self.embed_dim
            or x.dtype != F32
            or not x.flags.c_contiguous
            or y.shape != x.shape
            or y.dtype != F32
            or not y.flags.c_contiguous
        ):
            return None
        B, L = (x.shape[0], x.shape[1]) if self.batch_first else (x.shape[1], x.shape[0])
        mask = None
        if self.mask_index is not None:
            mask = inputs[self.mask_index]
            try:  # its shape is checked now; its values are read at each call
                self._mask(mask, B, L, L)
            except Exception:
                return None
        self._check_work(inputs)  # (the prepared call runs without forward)
        rows = B * L
        if split is not None and rows * self.flops_per_row() >= 2 * split.sizes.min_half_work:
            per_batch = mask is None or mask.ndim == 2 or mask.shape[0] == B * self.num_heads
            if B >= 2 and self.batch_first and per_batch:
                return self._split_batch(split, x, y, mask, B, L)
            if self.num_heads >= 2 and rows >= 2:
                return self._split_heads(split, x, y, mask, B, L)
        return self._attention_call(x, y, mask, B, L)

    @property
    def perm(self) -> tuple[int, ...]:
        """(B, L, h, d) or (L, B, h, d) -> (B, h, L, d)."""
        return (0, 2, 1, 3) if self.batch_first else (1, 2, 0, 3)

    def _attention_call(
        self, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None, B: int, L: int, bound: bool = False
    ) -> Callable[..., None]:
        """self_attention on x into y (`bound`: on these arrays, a half's call: no arguments)."""
        assert self.w_fused is not None
        rows, E = B * L, self.embed_dim
        b_qkv, bo = expanded(self.b_fused, (rows, 3 * E)), expanded(self.bo, (rows, E))
        masking = None if mask is None else partial(self._mask, mask, B, L, L)
        call = partial(self_attention, self.w_fused, b_qkv, self.wo, bo, self.num_heads, self.perm, masking)
        if bound:
            return partial(call, [x], [y])
        position = self.qkv_index[0]  # not 0 only where pnnx lists the mask first
        return call if position == 0 else partial(_on_input, call, position)

    def flops_per_row(self) -> int:
        """Multiply-adds of the projections per input row (self-attention)."""
        return 4 * self.embed_dim * self.embed_dim

    def _split_batch(
        self, split: SplitRequest, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None, B: int, L: int
    ) -> Prepared:
        """Self-attention over two halves of the batch (halves.py):
        independent, each with its part of a per-batch mask (Swin's 64 windows at 56x56)."""
        h = split_rows(B)
        halves = []
        for b0, b1 in ((0, h), (h, B)):
            part = None
            if mask is not None:
                part = mask if mask.ndim == 2 else mask[b0 * self.num_heads : b1 * self.num_heads]
            halves.append(self._attention_call(x[b0:b1], y[b0:b1], part, b1 - b0, L, bound=True))
        return halves_call(split, halves[0], halves[1], [x], [y])

    def _split_heads(
        self, split: SplitRequest, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None, B: int, L: int
    ) -> Prepared:
        """Self-attention in two steps of two halves (halves.py): the heads in two halves (each its columns of the q/k/v projection and its
        heads' attention, into a shared buffer), then the output projection in two halves of
        the rows. Inside a split forward the BLAS runs one thread: unsplit, the ViT-B/16's
        attention (525 M multiply-adds a layer) would leave the other core idle."""
        assert self.w_fused is not None
        s0, s1, E = x.shape
        rows, heads, d = s0 * s1, self.num_heads, self.head_dim
        attn = split.array((s0, s1, heads, d), F32)
        x2, attn2, y2 = x.reshape(rows, E), attn.reshape(rows, E), y.reshape(rows, E)
        h = heads // 2
        parts = ((0, h), (h, heads))
        masking = None if mask is None else partial(self._mask, mask, B, L, L)
        head_halves = [
            partial(
                attend_heads,
                x2,
                [self.w_fused[:, i * E + lo * d : i * E + hi * d] for i in range(3)],
                None if self.b_fused is None else [self.b_fused[i * E + lo * d : i * E + hi * d] for i in range(3)],
                (s0, s1),
                self.perm,
                masking,
                (lo, hi),
                attn[:, :, lo:hi],
            )
            for lo, hi in parts
        ]
        r = split_rows(rows)
        row_halves = [
            partial(matmul_bias, attn2[r0:r1], self.wo, expanded(self.bo, (r1 - r0, E)), y2[r0:r1])
            for r0, r1 in ((0, r), (r, rows))
        ]
        pairs = tuple(split.pair(first, second) for first, second in (head_halves, row_halves))
        return partial(_run_steps, pairs)

    def _project(
        self, ops: list[np.ndarray], query: np.ndarray, key: np.ndarray, value: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, k, v projections (B, seq, E), with one matmul for operands that coincide."""
        E = self.embed_dim
        if self.w_fused is not None and len(ops) == 1:
            qkv = np.matmul(query, self.w_fused)
            if self.b_fused is not None:
                qkv += self.b_fused
            return qkv[..., :E], qkv[..., E : 2 * E], qkv[..., 2 * E :]
        q = np.matmul(query, self.wq)
        if self.bq is not None:
            q += self.bq
        if self.w_fused is not None:  # key is value
            kv = np.matmul(key, self.w_fused)
            if self.b_fused is not None:
                kv += self.b_fused
            return q, kv[..., :E], kv[..., E:]
        k, v = np.matmul(key, self.wk), np.matmul(value, self.wv)
        if self.bk is not None:
            k += self.bk
            v += self.bv
        return q, k, v

    def _mask(self, mask: np.ndarray, B: int, L: int, S_total: int) -> np.ndarray:
        """attn_mask (L, S) or (B*heads, L, S), bool True = blocked, as an additive (.., L, S_total)."""
        h = self.num_heads
        m = additive_mask(np.asarray(mask), true_means_masked=True)
        S = S_total - self.extra_keys
        if self.key_padding and m.shape == (B, S):
            m = m.reshape(B, 1, 1, S)  # per batch, the same for every head and query
        elif m.ndim == 2 and m.shape == (L, S):
            pass
        elif m.ndim == 3 and m.shape == (B * h, L, S):
            m = m.reshape(B, h, L, S)
        elif self.mask_repeat and m.ndim == 3 and m.shape[1:] == (L, S) and _divides(h, m.shape[0], B * h):
            period = m.shape[0] // h  # the mask of `period` batches, repeated for all B
            m = np.tile(m.reshape(period, h, L, S), (B // period, 1, 1, 1))
        else:
            period = " (repeated along the batch)" if self.mask_repeat else ""
            raise self.error(f"attn_mask has shape {mask.shape}, expected ({L}, {S}) or ({B * h}, {L}, {S}){period}")
        if self.extra_keys:  # bias_k / zero-attention keys are never masked
            m = np.concatenate([m, np.zeros(m.shape[:-1] + (self.extra_keys,), F32)], axis=-1)
        return m

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        shapes = [inputs[i] for i in self.qkv_index]
        q_shape, k_shape = shapes[self.roles[0]], shapes[self.roles[1]]
        B, L = self._batch_seq(q_shape)
        _, S = self._batch_seq(k_shape)
        B = B or 1
        E = self.embed_dim
        proj = B * (L * E * E + S * (self.kdim + self.vdim) * E + L * E * E)
        scores = B * L * (S + self.extra_keys) * E * 2  # q k^T and probs v over all heads
        return int(proj + scores)


def self_attention(
    w_qkv: np.ndarray,
    b_qkv: np.ndarray | None,
    wo: np.ndarray,
    bo: np.ndarray | None,
    heads: int,
    perm: tuple[int, ...],
    masking: Callable[[], np.ndarray] | None,
    inputs: list[np.ndarray],
    out: list[np.ndarray],
) -> None:
    """MultiheadAttention.forward for one 3-D float32 input (query = key = value) and at most a
    mask (`masking()`: the additive mask, (L, S) or (B, heads, L, S)): the same products, with
    the heads as strided views of the q/k/v projection, the attention written straight into
    (.., heads, head_dim) order, and no per-call checks."""
    x = inputs[0]
    s0, s1, E = x.shape
    d = E // heads
    rows = s0 * s1
    qkv = scratch("mha.qkv", (rows, 3 * E), F32)
    np.matmul(x.reshape(rows, E), w_qkv, qkv)
    if b_qkv is not None:
        qkv += b_qkv
    parts = qkv.reshape(s0, s1, 3, heads, d)
    q, k, v = (parts[:, :, i].transpose(perm) for i in range(3))  # (B, h, L, d) views
    attn = scratch("mha.attn", (s0, s1, heads, d), F32)
    _attend(q, k, v, None if masking is None else masking(), attn.transpose(perm))
    matmul_bias(attn.reshape(rows, E), wo, bo, out[0].reshape(rows, E))


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, out: np.ndarray) -> None:
    """softmax(q k^T + mask) v into out, all (B, heads, L, .) views; the scores and
    probabilities in this thread's scratch."""
    B, heads, L = q.shape[:3]
    scores = scratch("mha.scores", (B, heads, L, k.shape[2]), F32)
    probs = scratch("mha.probs", scores.shape, F32)
    np.matmul(q, k.swapaxes(-1, -2), scores)
    if mask is not None:
        scores += mask
    softmax(scores, probs, 3)
    np.matmul(probs, v, out)


def _on_input(call: Callable[[list, list], None], position: int, inputs: list, out: list) -> None:
    """call([the query's input], out): the prepared call of a layer whose inputs include a mask."""
    call([inputs[position]], out)


def attend_heads(
    x2: np.ndarray,
    w: list[np.ndarray],
    b: list[np.ndarray] | None,
    lead: tuple[int, int],
    perm: tuple[int, ...],
    masking: Callable[[], np.ndarray] | None,
    head_range: tuple[int, int],
    attn: np.ndarray,
) -> None:
    """Heads [lo, hi) of a self-attention into `attn` (s0, s1, hi - lo, d): their q, k and v
    (x2 times the heads' columns `w` of the fused projection, plus `b`), scores (plus their
    part of the mask), softmax, values."""
    s0, s1 = lead
    heads, d = attn.shape[2], attn.shape[3]
    q, k, v = (scratch(f"mha.part{i}", (x2.shape[0], heads * d), F32) for i in range(3))
    for i, part in enumerate((q, k, v)):
        matmul_bias(x2, w[i], None if b is None else b[i], part)
    q4, k4, v4 = (a.reshape(s0, s1, heads, d).transpose(perm) for a in (q, k, v))  # (B, h, L, d)
    mask = None if masking is None else masking()
    if mask is not None and mask.ndim == 4:
        mask = mask[:, head_range[0] : head_range[1]]
    _attend(q4, k4, v4, mask, attn.transpose(perm))


def _run_steps(steps: tuple, inputs: list[np.ndarray], out: list[np.ndarray]) -> None:
    """A split call of several steps, each a pair of halves (SplitRequest.pair), one after the other."""
    for pair in steps:
        pair()


@register("F.scaled_dot_product_attention")
class ScaledDotProductAttention(Layer):
    """softmax(q k^T * scale + mask) v over (..., L, E) tensors; bool attn_mask True = attend."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.is_causal = bool(self.param("is_causal", False))
        scale = self.param("scale", None)
        if scale is not None and not isinstance(scale, (int, float)):
            raise self.error(f"parameter 'scale' must be a number or None, got {scale!r}")
        self.scale = None if scale is None else F32(scale)
        self.enable_gqa = bool(self.param("enable_gqa", False))
        names = ["query", "key", "value", "attn_mask"]
        given = [n for n in op.input_names if n]
        if any(n not in names for n in given):
            raise self.error(f"unexpected named input(s) {given}; expected {names}")
        if given:
            self.index = {n: op.input_names.index(n) for n in names if n in op.input_names}
        else:  # positional
            self.index = dict(zip(names, range(len(op.inputs))))
        if any(n not in self.index for n in names[:3]) or len(op.inputs) > 4:
            raise self.error(
                f"expected inputs query, key, value and optionally attn_mask, got {len(op.inputs)} input(s)"
            )
        if self.is_causal and "attn_mask" in self.index:
            raise self.error("is_causal=True together with an attn_mask input is not allowed (as in PyTorch)")
        self._causal: dict[tuple[int, int], np.ndarray] = {}

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        q, k, v = (inputs[self.index[n]] for n in ("query", "key", "value"))
        if (
            q.ndim < 2
            or k.ndim != q.ndim
            or v.ndim != q.ndim
            or q.shape[-1] != k.shape[-1]
            or k.shape[-2] != v.shape[-2]
        ):
            raise self.error(
                f"query {q.shape}, key {k.shape}, value {v.shape} do not fit (..., L, E), (..., S, E), (..., S, Ev)"
            )
        scale = self.scale if self.scale is not None else F32(1.0 / np.sqrt(q.shape[-1]))
        if self.enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
            if q.shape[-3] % k.shape[-3]:
                raise self.error(f"enable_gqa: query heads {q.shape[-3]} not a multiple of key heads {k.shape[-3]}")
            rep = q.shape[-3] // k.shape[-3]
            k, v = np.repeat(k, rep, axis=-3), np.repeat(v, rep, axis=-3)
        try:
            np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        except ValueError:
            gqa = "" if self.enable_gqa else " (different head counts need enable_gqa=True)"
            raise self.error(
                f"query {q.shape}, key {k.shape} and value {v.shape} have batch dims that do not broadcast{gqa}"
            ) from None
        L, S = q.shape[-2], k.shape[-2]
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        self.check_size(batch + (L, S), "the attention scores")  # 16 GiB for a (65536, 1024) query and key
        self.check_work(math.prod(batch) * L * S * (q.shape[-1] + v.shape[-1]), "the attention")
        mask = None
        if "attn_mask" in self.index:
            mask = additive_mask(np.asarray(inputs[self.index["attn_mask"]]), true_means_masked=False)
        elif self.is_causal:
            mask = self._causal_mask(L, S)
        y, _ = attend(q * scale, k, v, mask)
        return [y.astype(F32, copy=False)]

    def _causal_mask(self, L: int, S: int) -> np.ndarray:
        """-inf above the diagonal of an (L, S) grid, top-left aligned like torch's tril."""
        m = self._causal.get((L, S))
        if m is None:
            m = np.where(np.tri(L, S, dtype=bool), F32(0), NEG_INF)
            self._causal[(L, S)] = m
        return m

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        q, k, v = (inputs[self.index[n]] for n in ("query", "key", "value"))
        batch = int(np.prod(q[:-2])) if len(q) > 2 else 1
        return batch * q[-2] * k[-2] * (q[-1] + v[-1])
