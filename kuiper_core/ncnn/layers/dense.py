"""ncnn's weighted layers: Convolution (2-D, depthwise, 1-D), Deconvolution, InnerProduct, Gemm,
MatMul and MultiHeadAttention, on blobs without a batch dim (CHW; a 2-D blob is (h, w))."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...layers.activation import softmax_reference
from .base import F32, NcnnLayer, activation, ncnn_layer

SAME_UPPER, SAME_LOWER = -233, -234


def same_pads(size: int, kernel_extent: int, stride: int, mode: int) -> tuple[int, int]:
    """ncnn's -233 (SAME_UPPER: the extra pad after) and -234 (SAME_LOWER: before)."""
    total = max(kernel_extent + (size - 1) // stride * stride - size, 0)
    half = total // 2
    return (half, total - half) if mode == SAME_UPPER else (total - half, half)


def conv2d(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], dilation: tuple[int, int], groups: int) -> np.ndarray:
    """y (O, OH, OW) of an already padded x (C, H, W) and w (O, C/groups, KH, KW), float32."""
    o, per, kh, kw = w.shape
    dh, dw = dilation
    eh, ew = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    win = sliding_window_view(x, (eh, ew), axis=(1, 2))[:, :: stride[0], :: stride[1], ::dh, ::dw]
    oh, ow = win.shape[1], win.shape[2]
    og = o // groups
    if per == 1 and og == 1:  # depthwise: one filter a channel
        return np.einsum("chwij,cij->chw", win, w[:, 0], dtype=F32, optimize=True)
    y = np.empty((o, oh, ow), F32)
    for g in range(groups):
        cols = win[g * per : (g + 1) * per].transpose(1, 2, 0, 3, 4).reshape(oh * ow, per * kh * kw)
        y[g * og : (g + 1) * og] = (w[g * og : (g + 1) * og].reshape(og, -1) @ cols.T).reshape(og, oh, ow)
    return y


@ncnn_layer("Convolution", "ConvolutionDepthWise", "Convolution1D")
class Convolution(NcnnLayer):
    """0=num_output 1/11=kernel 2/12=dilation 3/13=stride 4/15/14/16=pads (-233/-234: SAME)
    18=pad_value 5=bias_term 6=weight_data_size 7=group 9/10=fused activation."""

    def setup(self) -> None:
        p = self.p
        self.one_d = self.ncnn_type == "Convolution1D"
        self.weight_ = self.w("weight")
        if self.one_d:
            self.weight_ = self.weight_[:, :, None, :]
        self.bias = self.w("bias") if p.integer("bias_term") else None
        self.groups = p.integer("group") if self.ncnn_type == "ConvolutionDepthWise" else 1
        h = (1, 1, 1) if self.one_d else (p.integer("dilation_h"), p.integer("stride_h"), 0)
        self.dilation = (h[0], p.integer("dilation_w"))
        self.stride = (h[1], p.integer("stride_w"))
        for v, what in ((self.dilation, "dilation"), (self.stride, "stride")):
            if min(v) < 1:
                raise ValueError(f"{what} must be >= 1, got {v}")
        self.pads = (
            (0, 0) if self.one_d else (p.integer("pad_top"), p.integer("pad_bottom")),
            (p.integer("pad_left"), p.integer("pad_right")),
        )
        self.pad_value = p.number("pad_value")
        self.act = activation(p)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        if self.one_d:
            x = x[:, None, :] if x.ndim == 2 else x
        if x.ndim != 3:
            raise self.error(f"expected a {'(h, w)' if self.one_d else '(c, h, w)'} blob, got shape {x.shape}")
        o, per, kh, kw = self.weight_.shape
        if x.shape[0] != per * self.groups:
            raise self.error(f"the weights take {per * self.groups} input channels, the blob has {x.shape[0]}")
        pads = []
        for axis, (before, after) in enumerate(self.pads):
            k = self.weight_.shape[2 + axis]
            extent = self.dilation[axis] * (k - 1) + 1
            if before in (SAME_UPPER, SAME_LOWER):
                before, after = same_pads(x.shape[1 + axis], extent, self.stride[axis], before)
            if before < 0 or after < 0:
                raise self.error(f"pads must be >= 0 or -233/-234 (SAME), got {before}, {after}")
            pads.append((before, after))
        hp, wp = x.shape[1] + sum(pads[0]), x.shape[2] + sum(pads[1])
        self.check_size((max(o, x.shape[0]), hp, wp))  # the padded blob and the output, before either is made
        if any(a or b for a, b in pads):
            x = np.pad(x, ((0, 0), *pads), constant_values=self.pad_value)
        if hp < (kh - 1) * self.dilation[0] + 1 or wp < (kw - 1) * self.dilation[1] + 1:
            raise self.error(f"the kernel ({kh}x{kw}) is larger than the padded blob {x.shape[1:]}")
        oh = (hp - (kh - 1) * self.dilation[0] - 1) // self.stride[0] + 1
        ow = (wp - (kw - 1) * self.dilation[1] - 1) // self.stride[1] + 1
        self.check_size((oh * ow, per * kh * kw), "the columns of a group")
        self.check_work(o * oh * ow * per * kh * kw, f"a {kh}x{kw} convolution of {x.shape}")
        y = conv2d(x, self.weight_, self.stride, self.dilation, self.groups)
        if self.bias is not None:
            y += self.bias[:, None, None]
        if self.act is not None:
            y = self.act(y)
        return [y[:, 0, :] if self.one_d else y]

    def flops(self, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]]) -> int:
        return math.prod(outputs[0]) * math.prod(self.weight_.shape[1:]) if outputs else 0


@ncnn_layer("Deconvolution", "DeconvolutionDepthWise")
class Deconvolution(NcnnLayer):
    """A transposed convolution: weights (num_output, in/group, kh, kw), no kernel flip (ncnn
    scatters each input pixel with the kernel as stored); 18/19 output_pad, 20/21 output size."""

    def setup(self) -> None:
        p = self.p
        self.weight_ = self.w("weight")
        self.bias = self.w("bias") if p.integer("bias_term") else None
        self.groups = p.integer("group") if self.ncnn_type == "DeconvolutionDepthWise" else 1
        self.dilation = (p.integer("dilation_h"), p.integer("dilation_w"))
        self.stride = (p.integer("stride_h"), p.integer("stride_w"))
        self.pads = (p.integer("pad_top"), p.integer("pad_bottom"), p.integer("pad_left"), p.integer("pad_right"))
        self.output_pad = (p.integer("output_pad_bottom"), p.integer("output_pad_right"))
        self.output_size = (p.integer("output_h"), p.integer("output_w"))
        if min(self.stride + self.dilation) < 1:
            raise ValueError(f"stride and dilation must be >= 1, got {self.stride}, {self.dilation}")
        if min(self.pads) < 0 and self.output_size == (0, 0):
            raise ValueError(f"pads must be >= 0, got {self.pads}")
        self.act = activation(p)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        o, per, kh, kw = self.weight_.shape
        if x.ndim != 3 or x.shape[0] != per * self.groups:
            raise self.error(f"expected a (c, h, w) blob of {per * self.groups} channels, got shape {x.shape}")
        c, h, w = x.shape
        (sh, sw), (dh, dw) = self.stride, self.dilation
        full = (
            (h - 1) * sh + dh * (kh - 1) + 1 + self.output_pad[0],
            (w - 1) * sw + dw * (kw - 1) + 1 + self.output_pad[1],
        )
        self.check_size((o, *full))
        self.check_work(o * per * h * w * kh * kw, f"a {kh}x{kw} deconvolution of {x.shape}")
        y = np.zeros((o, *full), F32)
        og = o // self.groups
        for g in range(self.groups):
            xs = x[g * per : (g + 1) * per].reshape(per, h * w)
            for i in range(kh):
                for j in range(kw):
                    tap = (self.weight_[g * og : (g + 1) * og, :, i, j] @ xs).reshape(og, h, w)
                    y[
                        g * og : (g + 1) * og,
                        i * dh : i * dh + (h - 1) * sh + 1 : sh,
                        j * dw : j * dw + (w - 1) * sw + 1 : sw,
                    ] += tap
        top, bottom, left, right = self.pads
        if self.output_size != (0, 0):  # ncnn centres the crop to the asked size
            oh, ow = self.output_size
            top, left = (full[0] - oh) // 2, (full[1] - ow) // 2
            bottom, right = full[0] - oh - top, full[1] - ow - left
        y = y[:, top : full[0] - bottom, left : full[1] - right]
        if self.bias is not None:
            y = y + self.bias[:, None, None]
        if self.act is not None:
            y = self.act(np.ascontiguousarray(y))
        return [np.ascontiguousarray(y)]


@ncnn_layer("InnerProduct")
class InnerProduct(NcnnLayer):
    """y = W x + b: a (h, w) blob with w == num_input row by row (output (h, num_output)),
    any other blob flattened (output (num_output,)); 9/10 fused activation."""

    def setup(self) -> None:
        self.weight_ = self.w("weight")
        self.bias = self.w("bias") if self.p.integer("bias_term") else None
        self.act = activation(self.p)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        n_in = self.weight_.shape[1]
        rows = x.ndim == 2 and x.shape[1] == n_in
        x2 = x if rows else x.reshape(1, -1)
        if x2.shape[1] != n_in:
            raise self.error(f"the weights take {n_in} inputs, the blob {x.shape} has {x.size}")
        y = x2 @ self.weight_.T
        if self.bias is not None:
            y += self.bias
        if self.act is not None:
            y = self.act(y)
        return [y if rows else y[0]]


@ncnn_layer("Gemm")
class Gemm(NcnnLayer):
    """y = alpha * (op(A) op(B) + beta * C) (ncnn scales C by alpha too); A, B, C each a constant (4/5/6=constantA/B/C, then
    7/8/9=M/N/K) or an input blob; 2/3=transA/B; 10=how C broadcasts (0 scalar, 1/2 per row,
    3 full, 4 per column)."""

    n_inputs = None

    def setup(self) -> None:
        p = self.p
        for key in ("output_N1M", "output_elempack", "output_elemtype", "output_transpose"):
            if p.integer(key):
                raise ValueError(f"param {p.ids[key]} ({key}) is not supported")
        self.alpha, self.beta = F32(p.number("alpha")), F32(p.number("beta"))
        self.trans_a, self.trans_b = p.integer("transA"), p.integer("transB")
        self.a = self.w("A") if p.integer("constantA") else None
        self.b = self.w("B") if p.integer("constantB") else None
        self.c = self.w("C") if "C" in self.op.attrs else None
        self.c_type = p.integer("constant_broadcast_type_C")
        need = (self.a is None) + (self.b is None)
        if len(self.op.inputs) < need:
            raise ValueError(f"expected {need} bottom blob(s) besides the constants, got {len(self.op.inputs)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        blobs = [np.asarray(v, F32) for v in inputs]
        a = self.a if self.a is not None else blobs.pop(0)
        b = self.b if self.b is not None else blobs.pop(0)
        c = self.c if self.c is not None else (blobs.pop(0) if blobs else None)
        if self.trans_a:
            a = np.swapaxes(a, -1, -2)
        if self.trans_b:
            b = np.swapaxes(b, -1, -2)
        if a.shape[-1] != b.shape[-2]:
            raise self.error(f"A {a.shape} and B {b.shape} do not multiply (K differs)")
        self._check_product(a, b)
        y = a @ b
        if c is not None:
            if self.c is not None and self.c_type in (1, 2):
                c = c[:, None]
            y = y + c * self.beta
        return [np.asarray(y * self.alpha if self.alpha != 1 else y, F32)]


@ncnn_layer("MatMul")
class MatMul(NcnnLayer):
    """NumPy's matmul over the blobs' dims; 0=transB swaps B's last two dims first."""

    n_inputs = 2

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = (np.asarray(v, F32) for v in inputs)
        if self.p.integer("transB"):
            b = np.swapaxes(b, -1, -2)
        self._check_product(a, b)
        try:
            return [np.matmul(a, b)]
        except ValueError:
            raise self.error(f"blobs of shapes {a.shape} and {b.shape} do not multiply") from None


@ncnn_layer("MultiHeadAttention")
class MultiHeadAttention(NcnnLayer):
    """Attention over (seq, dim) blobs: q (and k, v: 1 blob = self-attention, 2 = q and kv, 3 =
    q, k, v; 5=attn_mask adds a last blob), 0=embed_dim split in 1=num_heads, 6=scale (0: 1/sqrt
    of the head dim); weights q/k/v/out with biases as nn.MultiheadAttention's."""

    n_inputs = None

    def setup(self) -> None:
        p = self.p
        self.heads = p.integer("num_heads")
        self.embed = p.integer("embed_dim")
        if self.heads < 1 or self.embed % self.heads:
            raise ValueError(f"embed_dim {self.embed} is not a multiple of num_heads {self.heads}")
        scale = p.number("scale")
        self.scale = F32(scale if scale else 1 / math.sqrt(self.embed // self.heads))
        self.mask = bool(p.integer("attn_mask"))
        self.ws = {
            n: self.w(n)
            for n in ("q_weight", "q_bias", "k_weight", "k_bias", "v_weight", "v_bias", "out_weight", "out_bias")
        }

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        blobs = [np.asarray(v, F32) for v in inputs]
        mask = blobs.pop() if self.mask else None
        if len(blobs) not in (1, 2, 3):
            raise self.error(f"expected 1 to 3 blobs (q, k, v) besides the mask, got {len(blobs)}")
        q_in = blobs[0]
        k_in = blobs[1] if len(blobs) > 1 else q_in
        v_in = blobs[2] if len(blobs) > 2 else k_in
        ws = self.ws
        for blob, key in ((q_in, "q_weight"), (k_in, "k_weight"), (v_in, "v_weight")):
            if blob.ndim != 2 or blob.shape[1] != ws[key].shape[1]:
                raise self.error(f"expected a (seq, {ws[key].shape[1]}) blob, got shape {blob.shape}")
        hd = self.embed // self.heads

        def heads(x: np.ndarray, key: str) -> np.ndarray:
            y = x @ ws[f"{key}_weight"].T + ws[f"{key}_bias"]
            return y.reshape(y.shape[0], self.heads, hd).transpose(1, 0, 2)

        q, k, v = heads(q_in, "q") * self.scale, heads(k_in, "k"), heads(v_in, "v")
        scores = q @ k.transpose(0, 2, 1)
        if mask is not None:
            scores = scores + mask
        probs = np.empty_like(scores)
        softmax_reference(scores, probs, -1)
        y = (probs @ v).transpose(1, 0, 2).reshape(q_in.shape[0], self.embed)
        return [np.asarray(y @ ws["out_weight"].T + ws["out_bias"], F32)]
