"""ncnn's layers that move data: MemoryData, Flatten, Reshape, Permute, Concat, Slice, Crop,
Squeeze, ExpandDims, Padding, Interp and Reduction. ncnn names a blob's dims w (the last), h,
d, c (the first); its params follow those names, the NumPy arrays here are (c, d, h, w)."""

from __future__ import annotations

import math

import numpy as np

from ..shape_expr import blobs_used, dims_of, evaluate
from .base import F32, NcnnLayer, axis_of, ncnn_layer

AUTO = -233  # ncnn's "not given" / "the rest" in shapes and slices
INT_MAX = 2**31 - 1


@ncnn_layer("MemoryData")
class MemoryData(NcnnLayer):
    """A constant blob (0=w 1=h 11=d 2=c; 21=load_type) read from the .bin."""

    n_inputs = 0
    returns_views = True

    def setup(self) -> None:
        self.data = self.w("data")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self.data]


@ncnn_layer("Flatten")
class Flatten(NcnnLayer):
    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.ascontiguousarray(inputs[0]).reshape(-1)]


NO_BATCH = 233  # ncnn's "no batch axis"


def _without_batch(sizes: list[int], axis: int) -> list[int]:
    """The expression's sizes (w first) less the batch's entry at logical `axis` (counted from
    the outermost; negative from the end), which must be 1: these blobs are one sample."""
    outer_first = sizes[::-1]
    at = axis + len(outer_first) if axis < 0 else axis
    if not 0 <= at < len(outer_first):
        raise ValueError(f"output batch axis {axis} is outside the {len(outer_first)} sizes of the shape expression")
    if outer_first[at] not in (1, -1):
        raise ValueError(f"the batch entry of the shape expression is {outer_first[at]}: a blob here is one sample")
    del outer_first[at]
    return outer_first[::-1]


@ncnn_layer("Reshape")
class Reshape(NcnnLayer):
    """To 0=w 1=h 11=d 2=c (how many are given decides the rank; 0 keeps the bottom's dim of
    that name, -1 is inferred), or 6=shape_expr: the sizes computed from the bottoms' dims
    (shape_expr.py; bottoms after the first only lend their dims); 3=permute (legacy, must be 0)."""

    returns_views = True
    n_inputs = None

    def setup(self) -> None:
        if self.p.integer("permute"):
            raise ValueError("param 3 (permute=1) is not supported: pnnx writes permute=0")
        p = self.p
        self.w_, self.h_, self.d_, self.c_ = p.integer("w"), p.integer("h"), p.integer("d"), p.integer("c")
        self.expr = p.text("shape_expr")
        # 12/13: where ncnn's batch sits in the input's and the output's shapes (pnnx writes them
        # with a shape expression whose `0n` is the batch). Our blobs are one sample, so the batch
        # is 1 and only the output's batch entry has to be taken out of the expression's list.
        self.batch_axis = p.integer("output_batch_axis")
        if self.batch_axis != NO_BATCH and not self.expr:
            raise ValueError("params 12/13 (batch axes) without 6=shape_expr are not supported")
        wanted = max(1, blobs_used(self.expr))
        if len(self.op.inputs) != wanted:
            raise ValueError(f"expected {wanted} bottom blob(s) (the data, then those the shape expression reads)")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.ascontiguousarray(inputs[0])
        given = {"w": self.w_, "h": self.h_, "d": self.d_, "c": self.c_}
        if self.expr:
            try:
                sizes = evaluate(self.expr, [np.shape(v) for v in inputs])
                if self.batch_axis != NO_BATCH:
                    sizes = _without_batch(sizes, self.batch_axis)
            except ValueError as e:
                raise self.error(str(e)) from None
            if not 1 <= len(sizes) <= 4:
                raise self.error(f"shape expression {self.expr!r} gives {len(sizes)} sizes: expected 1 to 4")
            names = ["w", "h", "d", "c"] if len(sizes) == 4 else ["w", "h", "c"][: len(sizes)]
            given.update(zip(names, sizes))
        else:
            names = ["w"]
            if self.h_ != AUTO:
                names.append("h")
            if self.c_ != AUTO:
                names += ["d", "c"] if self.d_ != AUTO else ["c"]
        have = dims_of(x.shape)
        shape = [have[n] if given[n] == 0 else given[n] for n in reversed(names)]
        if shape.count(-1) > 1 or any(s < -1 for s in shape):
            raise self.error(f"cannot reshape to {shape}: at most one -1 and no other negative size")
        known = math.prod(s for s in shape if s != -1)
        if -1 in shape:
            if known == 0 or x.size % known:
                raise self.error(f"cannot infer the -1 of {shape} from {x.size} values")
            shape[shape.index(-1)] = x.size // known
        if math.prod(shape) != x.size:
            raise self.error(f"a blob of shape {x.shape} ({x.size} values) cannot be reshaped to {tuple(shape)}")
        return [x.reshape(shape)]


# ncnn's order types: the output's dims (w first) named by the input's dims
_ORDERS = {
    2: ["w h", "h w"],
    3: ["w h c", "h w c", "w c h", "c w h", "h c w", "c h w"],
    4: [
        "w h d c", "h w d c", "w d h c", "d w h c", "h d w c", "d h w c",
        "w h c d", "h w c d", "w c h d", "c w h d", "h c w d", "c h w d",
        "w d c h", "d w c h", "w c d h", "c w d h", "d c w h", "c d w h",
        "h d c w", "d h c w", "h c d w", "c h d w", "d c h w", "c d h w",
    ],
}  # fmt: skip


@ncnn_layer("Permute")
class Permute(NcnnLayer):
    """0=order_type: which input dims the output's w, h, (d,) c are (_ORDERS)."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        order = self.p.integer("order_type")
        table = _ORDERS.get(x.ndim, ["w"])
        if not 0 <= order < len(table):
            raise self.error(f"param 0 (order_type) {order} is not one of ncnn's {len(table)} for a {x.ndim}-D blob")
        names = ("c", "d", "h", "w")[-x.ndim :] if x.ndim < 4 else ("c", "d", "h", "w")
        if x.ndim == 3:
            names = ("c", "h", "w")
        axis = {n: i for i, n in enumerate(names)}
        return [np.transpose(x, [axis[n] for n in reversed(table[order].split())])]


@ncnn_layer("ShuffleChannel")
class ShuffleChannel(NcnnLayer):
    """0=group, 1=reverse: channels as (group, c/group) read out transposed (ShuffleNet's
    channel shuffle; reverse undoes it: (c/group, group))."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        g = self.p.integer("group")
        if x.ndim != 3 or g < 1 or x.shape[0] % g:
            raise self.error(f"expected a (c, h, w) blob with c divisible by group {g}, got {x.shape}")
        c, h, w = x.shape
        rows, cols = (c // g, g) if self.p.integer("reverse") else (g, c // g)
        return [np.ascontiguousarray(x.reshape(rows, cols, h, w).transpose(1, 0, 2, 3)).reshape(c, h, w)]


@ncnn_layer("PixelShuffle", "Reorg")
class DepthSpace(NcnnLayer):
    """PixelShuffle (depth to space, 0=upscale_factor) and Reorg (space to depth, 0=stride) of a
    (c, h, w) blob; 1=mode 0: channels ordered (outc, sh, sw) as PyTorch's pixel_(un)shuffle,
    1: (sh, sw, outc)."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        s = self.p.integer("upscale_factor" if self.ncnn_type == "PixelShuffle" else "stride")
        if x.ndim != 3 or s < 1:
            raise self.error(f"expected a (c, h, w) blob and a factor >= 1, got {x.shape} and {s}")
        c, h, w = x.shape
        mode = self.p.integer("mode")
        if self.ncnn_type == "PixelShuffle":
            if c % (s * s):
                raise self.error(f"{c} channels do not divide by upscale_factor² = {s * s}")
            parts = x.reshape((c // (s * s), s, s, h, w) if mode == 0 else (s, s, c // (s * s), h, w))
            order = (0, 3, 1, 4, 2) if mode == 0 else (2, 3, 0, 4, 1)
            return [np.ascontiguousarray(parts.transpose(order)).reshape(c // (s * s), h * s, w * s)]
        if h % s or w % s:
            raise self.error(f"the map {h}x{w} does not divide by stride {s}")
        parts = x.reshape(c, h // s, s, w // s, s)
        order = (0, 2, 4, 1, 3) if mode == 0 else (2, 4, 0, 1, 3)
        return [np.ascontiguousarray(parts.transpose(order)).reshape(c * s * s, h // s, w // s)]


@ncnn_layer("Concat")
class Concat(NcnnLayer):
    n_inputs = None

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        xs = [np.asarray(v) for v in inputs]
        try:
            axis = axis_of(self.p.integer("axis"), xs[0].ndim)
            return [np.concatenate(xs, axis=axis)]
        except ValueError as e:
            raise self.error(f"{e} (blobs {[x.shape for x in xs]})") from None


@ncnn_layer("Slice")
class Slice(NcnnLayer):
    """Along 1=axis into the sizes of 0=slices (-233: an equal share of the rest), or at the
    points 2=indices."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        try:
            axis = axis_of(self.p.integer("axis"), x.ndim)
        except ValueError as e:
            raise self.error(str(e)) from None
        total, n = x.shape[axis], len(self.op.outputs)
        indices = self.p.integers("indices")
        if indices:
            points = [0] + [i + total if i < 0 else i for i in indices][: n - 1] + [total]
        else:
            slices = self.p.integers("slices")
            if len(slices) != n:
                raise self.error(f"{len(slices)} slices for {n} top blobs")
            points, q = [0], 0
            for i, s in enumerate(slices):
                size = (total - q) // (n - i) if s == AUTO else (total - q if s == -1 else s)
                q += size
                points.append(q)
        if points[-1] != total or any(b < a for a, b in zip(points, points[1:])):
            raise self.error(f"slices {points} do not cover the {total} entries along axis {axis}")
        index = [slice(None)] * x.ndim
        pieces = []
        for a, b in zip(points, points[1:]):
            index[axis] = slice(a, b)
            pieces.append(x[tuple(index)])
        return pieces


@ncnn_layer("Crop")
class Crop(NcnnLayer):
    """A box: 9=starts 10=ends 11=axes (ends counted from the end when negative), or the
    offsets 0/1/13/2 and sizes 3/4/14/5 (w, h, d, c; size -233: to the end, 0: up to the
    offsets 6/7/15/8 from the end)."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        p = self.p
        box = [slice(None)] * x.ndim
        starts = p.integers("starts")
        if starts:
            ends, axes = p.integers("ends"), p.integers("axes") or list(range(len(starts)))
            if not len(starts) == len(ends) == len(axes):
                raise self.error(f"starts {starts}, ends {ends} and axes {axes} differ in length")
            for s, e, a in zip(starts, ends, axes):
                try:
                    axis = axis_of(a, x.ndim)
                except ValueError as err:
                    raise self.error(str(err)) from None
                n = x.shape[axis]
                s = min(max(s + n if s < 0 else s, 0), n)
                e = n if e >= INT_MAX else min(max(e + n if e < 0 else e, 0), n)
                box[axis] = slice(s, max(e, s))
        else:
            have = dims_of(x.shape)
            names = ("c", "d", "h", "w")[-x.ndim :] if x.ndim == 4 else ("c", "h", "w")[-x.ndim :]
            for i, n in enumerate(names):
                off, size, off2 = (p.integer(f"{n}offset"), p.integer(f"out{n}"), p.integer(f"{n}offset2"))
                if size == AUTO:
                    size = have[n] - off
                elif size <= 0:
                    size = have[n] - off - off2
                if off < 0 or size < 0 or off + size > have[n]:
                    raise self.error(f"the crop of {n} ({off}, size {size}) leaves the blob {x.shape}")
                box[i] = slice(off, off + size)
        return [x[tuple(box)]]


@ncnn_layer("Squeeze", "ExpandDims")
class Squeeze(NcnnLayer):
    """Squeeze: drop size-1 dims, 3=axes or the flags 0/1/11/2 (w, h, d, c); ExpandDims: insert
    size-1 dims at 3=axes (of the output) or by the same flags."""

    returns_views = True

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        axes = self.p.integers("axes")
        squeeze = self.ncnn_type == "Squeeze"
        word = "squeeze" if squeeze else "expand"
        ndim = x.ndim if squeeze else x.ndim + (len(axes) or 1)
        try:
            if axes:
                picked = sorted({axis_of(a, ndim) for a in axes})
            else:
                names = ("c", "h", "w")[-x.ndim :] if x.ndim < 4 else ("c", "d", "h", "w")
                picked = [i for i, n in enumerate(names) if self.p.integer(f"{word}_{n}")]
            if squeeze:
                keep = [i for i in picked if x.shape[i] == 1]  # ncnn skips a named dim that is not 1
                if len(keep) == x.ndim:
                    keep = keep[:-1]  # never below 1-D
                return [np.squeeze(x, axis=tuple(keep))]
            return [np.expand_dims(x, tuple(picked))]
        except ValueError as e:
            raise self.error(f"{e} (blob {x.shape})") from None


@ncnn_layer("Padding")
class Padding(NcnnLayer):
    """0/1/2/3 = top/bottom/left/right, 7/8 = front/behind (channels), 4=type (0 constant 5=value,
    1 replicate, 2 reflect); 6=per_channel_pad_data_size: a constant per output channel, from
    the weights, in place of 5=value (for blobs with channels)."""

    def setup(self) -> None:
        p = self.p
        self.pads = (
            p.integer("front"),
            p.integer("behind"),
            p.integer("top"),
            p.integer("bottom"),
            p.integer("left"),
            p.integer("right"),
        )
        if min(self.pads) < 0:
            raise ValueError(f"negative pads {self.pads}: expected >= 0")
        self.kind, self.value = p.integer("type"), p.number("value")
        if self.kind not in (0, 1, 2):
            raise ValueError(f"param 4 (type) must be 0 (constant), 1 (replicate) or 2 (reflect), got {self.kind}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        f, b, t, bo, le, r = self.pads
        widths = [(t, bo), (le, r)] if x.ndim >= 2 else [(le, r)]
        if x.ndim == 3:
            widths = [(f, b)] + widths
        elif x.ndim == 4:
            widths = [(0, 0), (f, b)] + widths
        self.check_size([a + s + c for (a, c), s in zip(widths, x.shape)])
        if self.kind != 0:
            return [np.pad(x, widths, mode="edge" if self.kind == 1 else "reflect")]
        if not self.p.integer("per_channel_pad_data_size") or x.ndim < 3:
            return [np.pad(x, widths, constant_values=F32(self.value))]
        values = self.w("per_channel_pad").astype(F32)
        channels = x.shape[0] + f + b
        if values.size < channels:
            raise self.error(f"{values.size} per-channel pad values for {channels} output channels")
        y = np.empty([a + n + c for (a, c), n in zip(widths, x.shape)], F32)
        y[...] = values[:channels].reshape((channels,) + (1,) * (x.ndim - 1))
        y[tuple(slice(a, a + n) for (a, _), n in zip(widths, x.shape))] = x
        return [y]


def _source_positions(n_in: int, n_out: int, align: bool, step: float) -> np.ndarray:
    """Where each output pixel reads the input: corners aligned, or pixel centres `step` input
    pixels apart (1/scale where the param gives a scale, else n_in/n_out)."""
    d = np.arange(n_out, dtype=np.float64)
    if align:
        return d * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    return (d + 0.5) * step - 0.5


def _linear_table(n_in: int, n_out: int, align: bool, step: float) -> tuple[np.ndarray, np.ndarray]:
    """ncnn's linear_coeffs: source index and weight of the right neighbour, per output."""
    src = _source_positions(n_in, n_out, align, step)
    i0 = np.floor(src).astype(np.int64)
    frac = src - i0
    frac[i0 < 0], i0[i0 < 0] = 0.0, 0
    last = i0 >= n_in - 1
    i0[last], frac[last] = max(n_in - 2, 0), 1.0 if n_in > 1 else 0.0
    return i0, frac.astype(F32)


def _cubic_table(n_in: int, n_out: int, align: bool, step: float) -> tuple[np.ndarray, np.ndarray]:
    """ncnn's cubic_coeffs (Keys, A = -0.75): the four source indices and weights per output.
    ncnn moves taps that fall outside onto the edge and merges their weights, which is the
    same as reading the edge pixel for them (clamped indices)."""
    src = _source_positions(n_in, n_out, align, step).astype(F32)  # ncnn floors the float position
    i0 = np.floor(src).astype(np.int64)
    t = (src - i0).astype(F32)
    a = F32(-0.75)
    t0, t2 = t + F32(1), F32(1) - t
    w0 = a * t0**3 - 5 * a * t0**2 + 8 * a * t0 - 4 * a
    w1 = (a + 2) * t**3 - (a + 3) * t**2 + 1
    w2 = (a + 2) * t2**3 - (a + 3) * t2**2 + 1
    weights = np.stack([w0, w1, w2, F32(1) - w0 - w1 - w2], axis=1).astype(F32)
    taps = np.clip(i0[:, None] + np.arange(-1, 3), 0, n_in - 1)
    return taps, weights


@ncnn_layer("Interp")
class Interp(NcnnLayer):
    """Resize the (h, w) of a (c, h, w) blob: 0=resize_type (1 nearest, 2 bilinear, 3 bicubic),
    1/2=height/width scale or 3/4=output size, 6=align_corner."""

    def setup(self) -> None:
        p = self.p
        self.kind = p.integer("resize_type")
        if self.kind not in (1, 2, 3):
            raise ValueError(
                f"param 0 (resize_type) {self.kind} is not supported: expected 1 (nearest), 2 (bilinear) or 3 (bicubic)"
            )
        if p.integer("dynamic_target_size"):
            raise ValueError("param 5 (dynamic_target_size) is not supported")
        self.scale = (p.number("height_scale"), p.number("width_scale"))
        self.size = (p.integer("output_height"), p.integer("output_width"))
        self.align = bool(p.integer("align_corner"))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        if x.ndim != 3:
            raise self.error(f"expected a (c, h, w) blob, got shape {x.shape}")
        c, h, w = x.shape
        oh = self.size[0] or int(h * self.scale[0])
        ow = self.size[1] or int(w * self.scale[1])
        if oh < 1 or ow < 1:
            raise self.error(f"the output size ({oh}, {ow}) must be >= 1")
        self.check_size((c, oh, ow))
        hs = h / oh if self.size[0] else 1 / self.scale[0]
        ws = w / ow if self.size[1] else 1 / self.scale[1]
        if self.kind == 1:
            rows = np.minimum((np.arange(oh) * hs).astype(np.int64), h - 1)
            cols = np.minimum((np.arange(ow) * ws).astype(np.int64), w - 1)
            return [x[:, rows][:, :, cols]]
        if self.kind == 3:
            (rt, rw), (ct, cw) = _cubic_table(h, oh, self.align, hs), _cubic_table(w, ow, self.align, ws)
            cols = np.einsum("chwk,wk->chw", x[:, :, ct], cw)  # ncnn: along each row first
            return [np.einsum("chkw,hk->chw", cols[:, rt], rw).astype(F32)]
        (r0, rf), (c0, cf) = _linear_table(h, oh, self.align, hs), _linear_table(w, ow, self.align, ws)
        r1, c1 = np.minimum(r0 + 1, h - 1), np.minimum(c0 + 1, w - 1)
        rows = x[:, r0] * (F32(1) - rf)[:, None] + x[:, r1] * rf[:, None]
        return [rows[:, :, c0] * (F32(1) - cf) + rows[:, :, c1] * cf]


_REDUCE = {
    0: lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    1: lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    2: lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    3: lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    4: lambda x, a, k: np.max(x, axis=a, keepdims=k),
    5: lambda x, a, k: np.min(x, axis=a, keepdims=k),
    6: lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    7: lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    8: lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    9: lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    10: lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k)),
}


@ncnn_layer("Reduction")
class Reduction(NcnnLayer):
    """0=operation (sum asum sumsq mean max min prod l1 l2 logsum logsumexp) over 3=axes (all
    with 1=reduce_all), times 2=coeff; 4=keepdims; 5=fixbug0 must be 1 (axes count the dims)."""

    def setup(self) -> None:
        self.kind = self.p.integer("operation")
        if self.kind not in _REDUCE:
            raise ValueError(f"param 0 (operation) must be 0..10, got {self.kind}")
        if not self.p.integer("reduce_all") and not self.p.integer("fixbug0"):
            raise ValueError("param 5 (fixbug0) = 0: ncnn's legacy axis numbering is not supported (pnnx writes 5=1)")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        keep = bool(self.p.integer("keepdims"))
        try:
            axes = (
                tuple(range(x.ndim))
                if self.p.integer("reduce_all")
                else tuple(sorted({axis_of(a, x.ndim) for a in self.p.integers("axes")}))
            )
        except ValueError as e:
            raise self.error(str(e)) from None
        with np.errstate(all="ignore"):
            y = np.asarray(_REDUCE[self.kind](x, axes, keep), F32)
        coeff = self.p.number("coeff")
        if coeff != 1:
            y = y * F32(coeff)
        return [y.reshape(1) if y.ndim == 0 else y]
