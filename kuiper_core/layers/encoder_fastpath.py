"""aten::_transformer_encoder_layer_fwd: PyTorch's fused nn.TransformerEncoderLayer.

A TorchScript trace of nn.TransformerEncoder(Layer) made in eval mode without grad (its "fast
path": batch_first, relu or gelu, an even head count, bias) records one call per layer,
`aten::_transformer_encoder_layer_fwd`, and pnnx converts the `.pt` keeping it with its 20
positional arguments (pnnx 20261020, at every optlevel):

    src embed_dim num_heads qkv_weight qkv_bias proj_weight proj_bias use_gelu norm_first eps
    norm_weight_1 norm_bias_1 norm_weight_2 norm_bias_2 ffn_weight_1 ffn_bias_1 ffn_weight_2
    ffn_bias_2 mask mask_type

What it computes (aten/src/ATen/native/transformers/transformer.cpp and attention.cpp; each
point checked against torch 2.13 in tests/test_models_styles.py):

    x = LN1(src) if norm_first else src
    x = MHA(x) + src;          x = x if norm_first else LN1(x)
    r = x;  x = LN2(x) if norm_first else x
    x = W2 act(W1 x + b1) + b2 + r;  x = x if norm_first else LN2(x)

act is exact GELU (use_gelu) or ReLU. The attention applies its mask as a *boolean* one: a
float mask is converted to bool first (any nonzero value, -inf or 0.5 alike, masks that key
out; 0 keeps it), and a query whose keys are all masked gives NaN, as torch does. mask_type
0: the mask is (L, S); 1: a key padding mask (B, S); 2: (B, heads, L, S). The nested tensors
nn.TransformerEncoder makes from a padding mask (enable_nested_tensor) are not in any
converted file: pnnx cannot convert such a trace.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import Operand, Operator
from .activation import GELU, softmax
from .norm import normalize_rows
from .registry import Layer, register

F32 = np.float32
# The schema's arguments, in order (PyTorch's native_functions.yaml), and the scalars among them.
_ARGS = (
    "src embed_dim num_heads qkv_weight qkv_bias proj_weight proj_bias use_gelu norm_first eps norm_weight_1 "
    "norm_bias_1 norm_weight_2 norm_bias_2 ffn_weight_1 ffn_bias_1 ffn_weight_2 ffn_bias_2 mask mask_type"
).split()
_SCALARS = ("embed_dim", "num_heads", "use_gelu", "norm_first", "eps", "mask_type")
_TENSORS = tuple(a for a in _ARGS if a not in _SCALARS)


@register("aten::_transformer_encoder_layer_fwd")
class TransformerEncoderLayerFastPath(Layer):
    arg_names = tuple(_ARGS)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.embed_dim = self.int_param("embed_dim", low=1)
        self.heads = self.int_param("num_heads", low=1)
        if self.embed_dim % self.heads:
            raise self.error(f"embed_dim ({self.embed_dim}) must be a multiple of num_heads ({self.heads})")
        self.use_gelu = bool(self.param("use_gelu"))
        self.norm_first = bool(self.param("norm_first"))
        eps = self.param("eps")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise self.error(f"eps must be a number, got {eps!r}")
        self.eps = F32(eps)
        mask_type = self.param("mask_type", None)
        # The tensors arrive in schema order (values such as embed_dim became params); the
        # mask is a tensor only when the model passed one (else the param mask=None).
        want = len(_TENSORS) if op.params.get("mask", 0) is not None else len(_TENSORS) - 1
        if len(op.inputs) != want:
            raise self.error(
                f"expected {want} tensor inputs ({', '.join(_TENSORS[:want])}), got {len(op.inputs)}; "
                "the scalar arguments embed_dim num_heads use_gelu norm_first eps mask_type must be numbers"
            )
        self.has_mask = want == len(_TENSORS)
        if self.has_mask and (not isinstance(mask_type, int) or mask_type not in (0, 1, 2)):
            raise self.error(
                f"a mask needs mask_type 0, 1 or 2 (as torch: 'Mask Type should be defined'), got {mask_type!r}"
            )
        self.mask_type = mask_type if isinstance(mask_type, int) else -1  # read only with a mask
        E, h = self.embed_dim, self.heads
        self.shapes = {
            "qkv_weight": (3 * E, E),
            "qkv_bias": (3 * E,),
            "proj_weight": (E, E),
            "proj_bias": (E,),
            "norm_weight_1": (E,),
            "norm_bias_1": (E,),
            "norm_weight_2": (E,),
            "norm_bias_2": (E,),
            "ffn_bias_2": (E,),
        }
        for i, name in enumerate(_TENSORS[1:13], 1):
            shape = op.inputs[i].shape
            want_shape = self.shapes.get(name)
            if shape is not None and want_shape is not None and tuple(shape) != want_shape:
                raise self.error(f"{name} is shaped {tuple(shape)}, expected {want_shape} for embed_dim={E}")
        self.scale = F32(1.0 / math.sqrt(E // h))
        gelu = Operator("nn.GELU", f"{op.name}.gelu", inputs=[Operand("hidden")], outputs=[Operand("act")])
        self.gelu = GELU(gelu) if self.use_gelu else None

    def _weights(self, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        named = {name: np.asarray(a) for name, a in zip(_TENSORS[1:13], inputs[1:13])}
        for name, shape in self.shapes.items():
            if named[name].shape != shape:
                raise self.error(f"{name} has shape {named[name].shape}, expected {shape}")
        hidden = named["ffn_weight_1"].shape
        if (
            len(hidden) != 2
            or hidden[1] != self.embed_dim
            or named["ffn_weight_2"].shape != (self.embed_dim, hidden[0])
        ):
            raise self.error(
                f"ffn weights {hidden} and {named['ffn_weight_2'].shape} do not fit embed_dim={self.embed_dim}"
            )
        if named["ffn_bias_1"].shape != (hidden[0],):
            raise self.error(f"ffn_bias_1 has shape {named['ffn_bias_1'].shape}, expected ({hidden[0]},)")
        return named

    def _norm(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        rows = x.reshape(-1, self.embed_dim)
        y = np.empty_like(rows)
        normalize_rows(rows, y, self.eps)
        y *= w
        y += b
        return y.reshape(x.shape)

    def _mask(self, mask: np.ndarray, B: int, L: int) -> np.ndarray:
        """The boolean mask (True = masked out) broadcast against the (B, heads, L, S) scores."""
        blocked = mask if mask.dtype == np.bool_ else mask != 0
        want = {0: (L, L), 1: (B, L), 2: (B, self.heads, L, L)}[self.mask_type]
        if blocked.shape != want:
            kind = {0: "an attention mask", 1: "a key padding mask", 2: "a merged mask"}[self.mask_type]
            raise self.error(f"mask_type {self.mask_type} ({kind}) needs a mask shaped {want}, got {mask.shape}")
        return blocked.reshape(B, 1, 1, L) if self.mask_type == 1 else blocked

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        src = np.asarray(inputs[0])
        E, h = self.embed_dim, self.heads
        if src.ndim != 3 or src.shape[-1] != E:
            raise self.error(f"src must be (batch, seq, {E}) (the fast path is batch_first), got {src.shape}")
        w = self._weights(inputs)
        dtype = np.result_type(src.dtype, F32)
        src = src.astype(dtype, copy=False)
        B, L, _ = src.shape
        d = E // h

        x = self._norm(src, w["norm_weight_1"], w["norm_bias_1"]) if self.norm_first else src
        qkv = np.matmul(x, w["qkv_weight"].T) + w["qkv_bias"]
        q, k, v = (qkv[..., i * E : (i + 1) * E].reshape(B, L, h, d).transpose(0, 2, 1, 3) for i in range(3))
        scores = np.matmul(q * self.scale, k.swapaxes(-1, -2))
        if self.has_mask:
            scores = np.where(self._mask(np.asarray(inputs[13]), B, L), dtype.type(-np.inf), scores)
        probs = np.empty(scores.shape, dtype)
        softmax(np.ascontiguousarray(scores), probs, 3)
        attn = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(B, L, E)
        x = np.matmul(attn, w["proj_weight"].T) + w["proj_bias"]
        x += src
        if not self.norm_first:
            x = self._norm(x, w["norm_weight_1"], w["norm_bias_1"])
        residual = x
        if self.norm_first:
            x = self._norm(x, w["norm_weight_2"], w["norm_bias_2"])
        hidden = np.matmul(x, w["ffn_weight_1"].T) + w["ffn_bias_1"]
        if self.gelu is not None:
            hidden = self.gelu.forward([hidden], [None])[0]
        else:
            np.maximum(hidden, 0, out=hidden)
        x = np.matmul(hidden, w["ffn_weight_2"].T) + w["ffn_bias_2"]
        x += residual
        if not self.norm_first:
            x = self._norm(x, w["norm_weight_2"], w["norm_bias_2"])
        return [x.astype(dtype, copy=False)]

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        B, L, E = inputs[0] if len(inputs[0]) == 3 else (1, 1, self.embed_dim)
        hidden = inputs[9][0] if len(inputs) > 9 and inputs[9] else 0
        return int(B * L * (4 * E * E + 2 * L * E + 2 * E * hidden))
