"""Readable reference convolutions: the definitions the fast kernels are tested against.

`conv2d_reference` is a convolution as it is written on the blackboard: for every kernel tap
(i, j), take the padded input shifted by that tap (a strided slice), multiply it by the tap's
weights and add it up, group by group. `conv_transpose2d_reference` is the transpose: every
input pixel scatters its weighted kernel onto the output. `conv3d_reference` and
`conv_transpose3d_reference` are the same over (D, H, W). All accumulate in float64 and are
slow on purpose; conv.py, conv_kernels.py and winograd.py hold the fast paths (im2col GEMM,
Winograd, pointwise GEMM), volume.py the 3-D ones built on them, and
tests/test_conv_kernels.py and tests/test_volume.py check them against these.
"""

from __future__ import annotations

import numpy as np

from .windows import out_size, pad_spatial


def conv2d_reference(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilation: tuple[int, int] = (1, 1),
    groups: int = 1,
    padding_mode: str = "zeros",
) -> np.ndarray:
    """y (N, O, OH, OW) = conv2d(x (N, C, H, W), weight (O, C/groups, KH, KW)); pads = (top, bottom, left, right)."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    (sh, sw), (dh, dw) = stride, dilation
    xp = pad_spatial(x, pads, padding_mode).astype(np.float64)  # a copy: pad_spatial may return scratch
    oh = out_size(h, kh, sh, pads[0], pads[1], dh)
    ow = out_size(w, kw, sw, pads[2], pads[3], dw)
    og = o // groups
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xg = xp[:, g * cg : (g + 1) * cg]
        wg = weight[g * og : (g + 1) * og].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                # The input every output position sees through tap (i, j).
                shifted = xg[:, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw]
                y[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", shifted, wg[:, :, i, j])
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    return y.astype(np.result_type(x.dtype, weight.dtype))


def conv_transpose2d_reference(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
    output_padding: tuple[int, int] = (0, 0),
    dilation: tuple[int, int] = (1, 1),
    groups: int = 1,
) -> np.ndarray:
    """y = conv_transpose2d(x (N, C, H, W), weight (C, O/groups, KH, KW)), as torch defines it."""
    n, c, h, w = x.shape
    _, og, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + output_padding[0]
    full_w = (w - 1) * sw + dw * (kw - 1) + 1 + output_padding[1]
    cg = c // groups
    canvas = np.zeros((n, og * groups, full_h, full_w))
    for g in range(groups):
        xg = x[:, g * cg : (g + 1) * cg].astype(np.float64)
        wg = weight[g * cg : (g + 1) * cg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                # Tap (i, j) of every input pixel lands at (row * sh + i * dh, col * sw + j * dw).
                canvas[
                    :,
                    g * og : (g + 1) * og,
                    i * dh : i * dh + (h - 1) * sh + 1 : sh,
                    j * dw : j * dw + (w - 1) * sw + 1 : sw,
                ] += np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
    y = canvas[:, :, ph : full_h - ph, pw : full_w - pw]
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return y.astype(np.result_type(x.dtype, weight.dtype))


def conv3d_reference(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: tuple[int, int, int] = (1, 1, 1),
    padding: tuple[int, int, int] = (0, 0, 0),
    dilation: tuple[int, int, int] = (1, 1, 1),
    groups: int = 1,
) -> np.ndarray:
    """y (N, O, OD, OH, OW) = conv3d(x (N, C, D, H, W), weight (O, C/groups, KD, KH, KW)), zero padding."""
    o, cg, *k = weight.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    size = [out_size(x.shape[2 + i], k[i], stride[i], padding[i], padding[i], dilation[i]) for i in range(3)]
    og = o // groups
    y = np.zeros((x.shape[0], o, *size))
    for g in range(groups):
        xg = xp[:, g * cg : (g + 1) * cg]
        wg = weight[g * og : (g + 1) * og].astype(np.float64)
        for a in range(k[0]):
            for b in range(k[1]):
                for c in range(k[2]):
                    # The input every output position sees through tap (a, b, c).
                    at = [t * dilation[i] for i, t in enumerate((a, b, c))]
                    shifted = xg[
                        :,
                        :,
                        at[0] : at[0] + stride[0] * (size[0] - 1) + 1 : stride[0],
                        at[1] : at[1] + stride[1] * (size[1] - 1) + 1 : stride[1],
                        at[2] : at[2] + stride[2] * (size[2] - 1) + 1 : stride[2],
                    ]
                    y[:, g * og : (g + 1) * og] += np.einsum("ncdhw,oc->nodhw", shifted, wg[:, :, a, b, c])
    if bias is not None:
        y += bias.reshape(1, o, 1, 1, 1)
    return y.astype(np.result_type(x.dtype, weight.dtype))


def conv_transpose3d_reference(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: tuple[int, int, int] = (1, 1, 1),
    padding: tuple[int, int, int] = (0, 0, 0),
    output_padding: tuple[int, int, int] = (0, 0, 0),
    dilation: tuple[int, int, int] = (1, 1, 1),
    groups: int = 1,
) -> np.ndarray:
    """y = conv_transpose3d(x (N, C, D, H, W), weight (C, O/groups, KD, KH, KW)), as torch defines it."""
    n, c, *size = x.shape
    _, og, *k = weight.shape
    full = [(size[i] - 1) * stride[i] + dilation[i] * (k[i] - 1) + 1 + output_padding[i] for i in range(3)]
    cg = c // groups
    canvas = np.zeros((n, og * groups, *full))
    for g in range(groups):
        xg = x[:, g * cg : (g + 1) * cg].astype(np.float64)
        wg = weight[g * cg : (g + 1) * cg].astype(np.float64)
        for a in range(k[0]):
            for b in range(k[1]):
                for c_ in range(k[2]):
                    # Tap (a, b, c) of every input voxel lands at (i·stride + a·dilation, …).
                    at = [t * dilation[i] for i, t in enumerate((a, b, c_))]
                    canvas[
                        :,
                        g * og : (g + 1) * og,
                        at[0] : at[0] + (size[0] - 1) * stride[0] + 1 : stride[0],
                        at[1] : at[1] + (size[1] - 1) * stride[1] + 1 : stride[1],
                        at[2] : at[2] + (size[2] - 1) * stride[2] + 1 : stride[2],
                    ] += np.einsum("ncdhw,co->nodhw", xg, wg[:, :, a, b, c_])
    p = padding
    y = canvas[:, :, p[0] : full[0] - p[0], p[1] : full[1] - p[1], p[2] : full[2] - p[2]]
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1, 1)
    return y.astype(np.result_type(x.dtype, weight.dtype))
