"""Resizing and padding: Upsample / F.interpolate (nearest, nearest-exact, linear, bilinear,
bicubic, trilinear), PixelShuffle / PixelUnshuffle, and the padding modules and F.pad.

Everything is a gather along the trailing (spatial) dims by index tables made once per input
shape: at build from the declared shape, or on the first forward of a new shape (cached).

Resize tables follow PyTorch's CPU kernels (aten/src/ATen/native/UpSample.h) to the bit for
nearest, where one rounding step picks a different pixel:
- the output size is floor(in * scale_factor) in double precision, or `size`;
- the kernel's scale is float32: 1/scale_factor when one was given (and not recomputed),
  else in/out; align_corners uses (in-1)/(out-1);
- nearest: src = min(floorf(dst * scale), in-1); only the 2-D kernel special-cases an axis
  with out == in (a copy) or out == 2*in (src = dst >> 1), even when a scale_factor says
  otherwise; nearest-exact: src = min(floorf((dst + 0.5) * scale), in-1);
- linear: src = scale*(dst+0.5)-0.5 clamped at 0 (or scale*dst with align_corners), two taps
  floor(src) and the next one inside, weight src-floor(src); out == in is a copy;
- cubic: the same src unclamped, four taps floor(src)-1..+2 clamped to the edge, Keys'
  kernel with A = -0.75.
"""

from __future__ import annotations

import copy

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..graph import Operator, ParamValue
from .registry import Layer, register

F32 = np.float32

# mode -> number of spatial dims it needs (None: any of 1, 2, 3)
MODES: dict[str, int | None] = {
    "nearest": None,
    "nearest-exact": None,
    "linear": 1,
    "bilinear": 2,
    "bicubic": 2,
    "trilinear": 3,
}


# -- index tables ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisTable:
    """How one output axis reads its input axis: out[i] = sum_t weight[i, t] * in[index[i, t]]."""

    index: np.ndarray  # (out, taps) int64
    weight: np.ndarray | None  # (out, taps) float32; None for nearest (one tap, weight 1)


def kernel_scale(n_in: int, n_out: int, scale: float | None) -> F32:
    """torch's compute_scales_value: float32(1/scale) when given, else float32(in)/out."""
    if scale is not None and scale > 0:
        return F32(1.0 / scale)
    return F32(n_in) / F32(n_out)


def area_scale(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> F32:
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return F32(n_in - 1) / F32(n_out - 1) if n_out > 1 else F32(0)
    return kernel_scale(n_in, n_out, scale)


def source_coords(n_out: int, s: F32, align_corners: bool, clamp_negative: bool) -> np.ndarray:
    """torch's area_pixel_compute_source_index for every dst (float32 result)."""
    dst = np.arange(n_out)
    if align_corners:
        return dst.astype(F32) * s
    # scale * (dst + 0.5) - 0.5 is evaluated in double in C++ and stored as float.
    src = (float(s) * (dst + 0.5) - 0.5).astype(F32)
    if clamp_negative:
        np.maximum(src, F32(0), out=src)
    return src


def nearest_table(n_in: int, n_out: int, scale: float | None, exact: bool, shortcuts: bool) -> AxisTable:
    """`shortcuts`: torch's 2-D nearest kernel copies an axis with out == in and halves
    indices for out == 2*in, whatever the scale_factor; its 1-D and 3-D kernels do not."""
    dst = np.arange(n_out)
    if shortcuts and n_out == n_in:
        src = dst
    elif shortcuts and n_out == 2 * n_in:
        src = dst >> 1
    else:
        s = kernel_scale(n_in, n_out, scale)
        if exact:
            pos = ((dst + 0.5) * float(s)).astype(F32)  # a double product, narrowed for floorf
        else:
            pos = dst.astype(F32) * s  # int * float is a float multiply in C++
        src = np.minimum(np.floor(pos).astype(np.int64), n_in - 1)
    return AxisTable(src[:, None], None)


def linear_table(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> AxisTable | None:
    if n_out == n_in:
        return None  # torch copies, whatever the scale
    s = area_scale(n_in, n_out, align_corners, scale)
    src = source_coords(n_out, s, align_corners, clamp_negative=True)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam1 = np.clip(src - i0.astype(F32), F32(0), F32(1)).astype(F32)
    i1 = i0 + (i0 < n_in - 1)
    return AxisTable(np.stack([i0, i1], axis=1), np.stack([F32(1) - lam1, lam1], axis=1))


def cubic_table(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> AxisTable:
    s = area_scale(n_in, n_out, align_corners, scale)
    src = source_coords(n_out, s, align_corners, clamp_negative=False)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - i0.astype(F32), F32(0), F32(1)).astype(np.float64)
    a = -0.75

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weight = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1).astype(F32)
    index = np.clip(i0[:, None] + np.arange(-1, 3)[None, :], 0, n_in - 1)
    return AxisTable(index, weight)


def resample_axis(x: np.ndarray, axis: int, table: AxisTable, out: np.ndarray | None) -> np.ndarray:
    """One weighted gather along `axis` (into `out` when given)."""
    if table.weight is None:
        return np.take(x, table.index[:, 0], axis=axis, out=out, mode="clip")
    shape = [1] * x.ndim
    shape[axis] = -1
    y: np.ndarray | None = None
    for t in range(table.index.shape[1]):  # 2 or 4 taps
        tap = np.take(x, table.index[:, t], axis=axis, mode="clip")
        tap *= table.weight[:, t].reshape(shape)
        if y is None:
            if out is not None:
                np.copyto(out, tap)
                y = out
            else:
                y = tap
        else:
            y += tap
    assert y is not None
    return y


def flat_gather_index(tables: list[np.ndarray], in_tail: tuple[int, ...]) -> np.ndarray:
    """Per-axis source indices of the trailing dims -> one flat index into the trailing block."""
    mesh = np.ix_(*tables)
    return np.ravel_multi_index(mesh, in_tail).reshape(-1)


def gather_trailing(x: np.ndarray, flat: np.ndarray, k: int, out_tail: tuple[int, ...], y: np.ndarray) -> np.ndarray:
    """y[..., *out_tail] = x[..., *in_tail] gathered through `flat`, in one pass."""
    lead = x.shape[: x.ndim - k]
    n_lead = int(np.prod(lead, dtype=np.int64))
    x2 = x.reshape(n_lead, -1)
    y2 = y.reshape(n_lead, -1) if y.flags.c_contiguous else None
    if y2 is None:
        return np.take(x2, flat, axis=1, mode="clip").reshape(lead + out_tail)
    np.take(x2, flat, axis=1, out=y2, mode="clip")
    return y


# -- Upsample / interpolate ------------------------------------------------------------------


@dataclass(frozen=True)
class ResizePlan:
    """Everything forward needs for one input spatial shape."""

    out_spatial: tuple[int, ...]
    flat: np.ndarray | None  # nearest modes: one gather over all spatial dims
    axes: tuple[tuple[int, AxisTable], ...]  # other modes: (axis from the end, table), run in order


@register(
    "nn.Upsample",
    "F.interpolate",
    "F.upsample",
    "F.upsample_nearest",
    "nn.UpsamplingNearest2d",
    "nn.UpsamplingBilinear2d",
)
class Interpolate(Layer):
    """Resize the spatial dims (all after N, C) by `size` or `scale_factor`.

    pnnx writes F.interpolate as F.upsample / F.upsample_nearest unless it needs
    recompute_scale_factor or mode=nearest-exact (F.upsample_bilinear too, with mode and
    align_corners as params); nn.UpsamplingBilinear2d means bilinear with align_corners=True.
    """

    FIXED_MODE = {
        "F.upsample_nearest": ("nearest", False),
        "nn.UpsamplingNearest2d": ("nearest", False),
        "nn.UpsamplingBilinear2d": ("bilinear", True),
    }

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            raise self.error(
                f"expected 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)} "
                "(a size computed at run time is not supported)"
            )
        if op.type in self.FIXED_MODE:
            self.mode, self.align_corners = self.FIXED_MODE[op.type]
        else:
            mode = self.param("mode", "nearest")
            if not isinstance(mode, str) or mode not in MODES:
                raise self.error(f"mode {mode!r} is not supported; expected one of {', '.join(MODES)}")
            self.mode = mode
            self.align_corners = bool(self.param("align_corners", False) or False)
        if self.param("antialias", False):
            raise self.error("antialias=True is not supported")
        self.size = self.optional_ints("size")
        self.scale = self.optional_floats("scale_factor")
        if (self.size is None) == (self.scale is None):
            raise self.error("expected exactly one of size and scale_factor")
        # With recompute_scale_factor the kernel derives its scale from the sizes.
        self.pass_scale = self.scale is not None and not self.param("recompute_scale_factor", False)
        self.plans: dict[tuple[int, ...], ResizePlan] = {}
        shape = op.inputs[0].static_shape
        if shape is not None:
            plan = self.plan(shape)
            declared = op.outputs[0].shape
            want = tuple(shape[:2]) + plan.out_spatial
            if declared is not None and len(declared) == len(want):
                if any(isinstance(d, int) and d != w for d, w in zip(declared, want)):
                    raise self.error(f"computed output shape {want} differs from the declared {tuple(declared)}")

    def optional_ints(self, key: str) -> tuple[int, ...] | None:
        value = self.param(key, None)
        if value is None:
            return None
        return self.ints_param(key, high=self.size_limit)

    def optional_floats(self, key: str) -> tuple[float, ...] | None:
        value = self.param(key, None)
        if value is None:
            return None
        values = value if isinstance(value, list) else [value]
        if not values or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= self.size_limit for v in values
        ):
            raise self.error(f"parameter '{key}' must be positive number(s) at most {self.size_limit:,}, got {value!r}")
        return tuple(float(v) for v in values)

    def plan(self, shape: tuple[int, ...]) -> ResizePlan:
        """The plan for an input shape (N, C, *spatial), made once per spatial shape."""
        in_spatial = tuple(shape[2:])
        plan = self.plans.get(in_spatial)
        if plan is None:
            plan = self.make_plan(in_spatial)
            self.plans[in_spatial] = plan
        return plan

    def per_dim(self, values: tuple, k: int, key: str) -> tuple:
        if len(values) == 1:
            return values * k
        if len(values) != k:
            raise self.error(f"'{key}' has {len(values)} entries for {k} spatial dims")
        return values

    def make_plan(self, in_spatial: tuple[int, ...]) -> ResizePlan:
        k = len(in_spatial)
        need = MODES[self.mode]
        if not 1 <= k <= 3 or (need is not None and need != k):
            want = f"{need + 2}-D" if need is not None else "3-D to 5-D"
            raise self.error(f"mode {self.mode!r} needs a {want} input (N, C, *spatial), got {k + 2}-D")
        if self.size is not None:
            out = self.per_dim(self.size, k, "size")
            scales: tuple[float | None, ...] = (None,) * k
        else:
            assert self.scale is not None
            factors = self.per_dim(self.scale, k, "scale_factor")
            out = tuple(int(math.floor(n * f)) for n, f in zip(in_spatial, factors))
            scales = factors if self.pass_scale else (None,) * k
        if any(n < 1 for n in in_spatial) or any(o < 1 for o in out):
            raise self.error(f"input spatial size {in_spatial} and output size {out} must be positive")
        self.check_size(out, "the resized image")  # the index tables are at least this big
        if self.mode in ("nearest", "nearest-exact"):
            exact = self.mode == "nearest-exact"
            shortcuts = k == 2 and not exact
            index = [nearest_table(n, o, s, exact, shortcuts).index[:, 0] for n, o, s in zip(in_spatial, out, scales)]
            if all(len(i) == n and (i == np.arange(n)).all() for i, n in zip(index, in_spatial)):
                return ResizePlan(out, None, ())  # a copy
            return ResizePlan(out, flat_gather_index(index, in_spatial), ())
        axes = []
        for i, (n, o, s) in enumerate(zip(in_spatial, out, scales)):
            table = (
                cubic_table(n, o, self.align_corners, s)
                if self.mode == "bicubic"
                else linear_table(n, o, self.align_corners, s)
            )
            if table is not None:
                axes.append((i - k, table, o / n))
        axes.sort(key=lambda a: a[2])  # shrinking axes first: later passes touch less data
        return ResizePlan(out, None, tuple((ax, t) for ax, t, _ in axes))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.dtype.kind != "f":
            x = x.astype(np.float32)
        if x.ndim < 3:
            raise self.error(f"expected an input (N, C, *spatial) of rank 3 to 5, got shape {x.shape}")
        plan = self.plan(x.shape)
        out_shape = x.shape[:2] + plan.out_spatial
        y = out[0] if out[0] is not None and out[0].shape == out_shape else None
        if y is None:
            self.check_size(out_shape)
        if plan.flat is not None:
            return [
                gather_trailing(
                    x,
                    plan.flat,
                    len(plan.out_spatial),
                    plan.out_spatial,
                    y if y is not None else np.empty(out_shape, x.dtype),
                )
            ]
        if not plan.axes:  # same size: a copy
            y = y if y is not None else np.empty(out_shape, x.dtype)
            np.copyto(y, x)
            return [y]
        cur = x
        for i, (axis, table) in enumerate(plan.axes):
            last = i == len(plan.axes) - 1
            cur = resample_axis(cur, x.ndim + axis, table, y if last else None)
        return [cur]


_NEAREST_EXACT = tuple(f"aten::_upsample_nearest_exact{d}d" for d in (1, 2, 3))


@register(*_NEAREST_EXACT)
class UpsampleNearestExact(Interpolate):
    """F.interpolate(mode='nearest-exact') as pnnx wrote it before late 2025 (20250530):
    TorchScript's aten::_upsample_nearest_exact{1,2,3}d, `(input, None, scale_factors)` or
    `(input, output_size, None…)` (one None scale per spatial dim)."""

    arg_names = ("input", "size", "scales_0", "scales_1", "scales_2")
    FIXED_MODE = {t: ("nearest-exact", False) for t in _NEAREST_EXACT}

    def __init__(self, op: Operator) -> None:
        bound = copy.copy(op)  # (a BoundOperator: keeps its source)
        bound.params = params = dict(op.params)
        scales = [params.pop(f"scales_{i}", None) for i in range(3)]
        if isinstance(scales[0], list):
            params["scale_factor"] = scales[0]
        elif any(s is not None for s in scales):
            # output_size with scales (the kernel would use the scales): in no pnnx export seen
            raise ModelError(f"output_size with scales {scales} is not supported", operator=op.name, op_type=op.type)
        super().__init__(bound)


# -- pixel shuffle ---------------------------------------------------------------------------


@register("nn.PixelShuffle", "F.pixel_shuffle")
class PixelShuffle(Layer):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r): channel blocks become r x r pixel blocks."""

    key = "upscale_factor"

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.r = self.int_param(self.key, low=1, high=self.size_limit)
        shape = op.inputs[0].shape if op.inputs else None
        if shape is not None:
            self.check(tuple(shape))

    def check(self, shape: tuple) -> None:
        if len(shape) < 3:
            raise self.error(f"expected an input (*, C, H, W) of rank >= 3, got shape {shape}")
        c = shape[-3]
        if isinstance(c, int) and c % (self.r * self.r):
            raise self.error(f"{c} channels are not divisible by {self.key}^2 = {self.r * self.r}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        self.check(x.shape)
        *lead, c, h, w = x.shape
        r = self.r
        blocks = x.reshape(*lead, c // (r * r), r, r, h, w)
        n = len(lead)
        perm = list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2]  # (..., C, H, r, W, r)
        out_shape = (*lead, c // (r * r), h * r, w * r)
        y = (
            out[0]
            if out[0] is not None and out[0].shape == out_shape and out[0].flags.c_contiguous
            else np.empty(out_shape, x.dtype)
        )
        np.copyto(y.reshape(*lead, c // (r * r), h, r, w, r), blocks.transpose(perm))
        return [y]


@register("nn.PixelUnshuffle", "F.pixel_unshuffle")
class PixelUnshuffle(PixelShuffle):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of PixelShuffle."""

    key = "downscale_factor"

    def check(self, shape: tuple) -> None:
        if len(shape) < 3:
            raise self.error(f"expected an input (*, C, H, W) of rank >= 3, got shape {shape}")
        for d in shape[-2:]:
            if isinstance(d, int) and d % self.r:
                raise self.error(f"height and width must be divisible by {self.key}={self.r}, got shape {shape}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        self.check(x.shape)
        *lead, c, h, w = x.shape
        r = self.r
        n = len(lead)
        pixels = x.reshape(*lead, c, h // r, r, w // r, r)
        perm = list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3]  # (..., C, r, r, H, W)
        out_shape = (*lead, c * r * r, h // r, w // r)
        y = (
            out[0]
            if out[0] is not None and out[0].shape == out_shape and out[0].flags.c_contiguous
            else np.empty(out_shape, x.dtype)
        )
        np.copyto(y.reshape(*lead, c, r, r, h // r, w // r), pixels.transpose(perm))
        return [y]


@register("nn.ChannelShuffle")
class ChannelShuffle(Layer):
    """ShuffleNet's shuffle: (N, C, *) viewed as (N, g, C/g, *), axes 1 and 2 swapped,
    back to (N, C, *). pnnx writes the reshape-transpose-reshape as this at optlevel 2
    (F.channel_shuffle it leaves as aten::channel_shuffle)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.groups = self.int_param("groups")
        if self.groups < 1:
            raise self.error(f"expected groups >= 1, got {self.groups}")
        shape = op.inputs[0].shape if op.inputs else None
        if shape is not None:
            self.check(tuple(shape))

    def check(self, shape: tuple) -> None:
        if len(shape) < 2:
            raise self.error(f"expected an input (N, C, *) of rank >= 2, got shape {shape}")
        if isinstance(shape[1], int) and shape[1] % self.groups:
            raise self.error(f"{shape[1]} channels are not divisible by groups={self.groups}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        self.check(x.shape)
        n, c, *rest = x.shape
        g = self.groups
        y = (
            out[0]
            if out[0] is not None and out[0].shape == x.shape and out[0].flags.c_contiguous
            else np.empty(x.shape, x.dtype)
        )
        np.copyto(y.reshape(n, c // g, g, *rest), x.reshape(n, g, c // g, *rest).swapaxes(1, 2))
        return [y]


# -- padding ---------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad_source_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Which input index each output position along one axis reads (non-constant modes).

    s = j - before is the position relative to the input, so negative pads crop. Reflect
    and replicate mirror/clamp about the original edges; circular (torch pads by slicing)
    crops first and wraps around what is left.
    """
    if mode == "circular":
        lo, hi = max(-before, 0), n - max(-after, 0)
        kept = hi - lo
        s = np.arange(kept + max(before, 0) + max(after, 0)) - max(before, 0)
        return lo + np.mod(s, max(kept, 1))
    s = np.arange(n + before + after) - before
    if mode == "reflect":
        s = np.abs(s)
        return np.where(s > n - 1, 2 * (n - 1) - s, s)
    return np.clip(s, 0, n - 1)  # replicate


@dataclass(frozen=True)
class PadPlan:
    out_shape: tuple[int, ...]  # of the padded trailing dims
    src: tuple[slice, ...]  # constant mode: the input block that is kept ...
    dst: tuple[slice, ...]  # ... and where it goes
    grows: bool  # constant mode: any positive pad (else a pure crop, no fill)
    flat: np.ndarray | None  # other modes: one gather over the trailing dims


@register(
    "F.pad",
    "nn.ZeroPad2d",
    "nn.ConstantPad1d",
    "nn.ConstantPad2d",
    "nn.ConstantPad3d",
    "nn.ReflectionPad1d",
    "nn.ReflectionPad2d",
    "nn.ReplicationPad1d",
    "nn.ReplicationPad2d",
    "nn.ReplicationPad3d",
)
class Pad(Layer):
    """Pad (or, with negative amounts, crop) the trailing dims.

    `pad` / `padding` lists (before, after) pairs starting from the LAST dim, as F.pad does;
    it may reach into the channel and batch dims (constant mode). pnnx writes the pad
    modules it has no rule for (nn.ZeroPad1d/3d, nn.ReflectionPad3d, nn.CircularPad*d) as F.pad.
    """

    MODULE_MODES = {
        "Zero": "constant",
        "Constant": "constant",
        "Reflection": "reflect",
        "Replication": "replicate",
        "Circular": "circular",
    }

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if not op.inputs or len(op.outputs) != 1:
            raise self.error(f"expected an input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
        lim = self.size_limit  # a pad beyond it gives no tensor the limits allow
        mode: ParamValue
        if op.type == "F.pad":
            mode = self.param("mode", "constant")
            pads = self.ints_param("pad", low=-lim, high=lim)
        else:
            kind = op.type[3:].split("Pad")[0]  # nn.ReflectionPad2d -> Reflection
            mode = self.MODULE_MODES[kind]
            dims = int(op.type[-2])
            n = 2 * dims if isinstance(self.param("padding"), int) else None
            pads = self.ints_param("padding", n, low=-lim, high=lim)
            if len(pads) != 2 * dims:
                raise self.error(f"expected padding with {2 * dims} entries, got {pads}")
        if not isinstance(mode, str) or mode not in PAD_MODES:
            raise self.error(f"mode {mode!r} is not supported; expected one of {', '.join(PAD_MODES)}")
        self.mode: str = mode
        if len(pads) % 2 or not pads:
            raise self.error(f"expected an even number of pad amounts (before, after per dim), got {pads}")
        value = self.param("value", 0.0)
        self.value = F32(0.0 if value is None else self.float_param("value", value))
        # (before, after) for the trailing dims, first dim first.
        pairs = [(pads[i], pads[i + 1]) for i in range(0, len(pads), 2)]
        self.pairs = tuple(reversed(pairs))
        self.plans: dict[tuple[int, ...], PadPlan] = {}
        shape = op.inputs[0].static_shape
        if shape is not None:
            self.plan(shape)

    def plan(self, shape: tuple[int, ...]) -> PadPlan:
        k = len(self.pairs)
        if len(shape) < k:
            raise self.error(f"{len(self.pairs) * 2} pad amounts need an input of rank >= {k}, got shape {shape}")
        tail = tuple(shape[len(shape) - k :])
        plan = self.plans.get(tail)
        if plan is None:
            plan = self.make_plan(tail)
            self.plans[tail] = plan
        return plan

    def make_plan(self, tail: tuple[int, ...]) -> PadPlan:
        out_tail = tuple(n + b + a for n, (b, a) in zip(tail, self.pairs))
        if any(o < 0 for o in out_tail):  # 0 is allowed: torch returns an empty tensor
            raise self.error(f"padding {self.pairs} leaves no output for input dims {tail}")
        self.check_size(out_tail, "the padded block")  # (and the index table of non-constant modes)
        if self.mode == "constant":
            src = tuple(slice(max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(tail, self.pairs))
            dst = tuple(slice(max(b, 0), max(b, 0) + (s.stop - s.start)) for s, (b, _) in zip(src, self.pairs))
            grows = any(b > 0 or a > 0 for b, a in self.pairs)
            return PadPlan(out_tail, src, dst, grows, None)
        for n, (b, a) in zip(tail, self.pairs):
            if self.mode == "reflect" and (b >= n or a >= n):
                raise self.error(f"reflect padding {(b, a)} must be smaller than the input dim {n}")
            kept = n - max(-b, 0) - max(-a, 0)  # circular crops first, then wraps what is left
            if self.mode == "circular" and (b > kept or a > kept):
                raise self.error(
                    f"circular padding {(b, a)} must not exceed the input dim {n} (after cropping: {kept})"
                )
        tables = [pad_source_index(n, b, a, self.mode) for n, (b, a) in zip(tail, self.pairs)]
        return PadPlan(out_tail, (), (), True, flat_gather_index(tables, tail))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        plan = self.plan(x.shape)
        k = len(self.pairs)
        out_shape = x.shape[: x.ndim - k] + plan.out_shape
        y = out[0] if out[0] is not None and out[0].shape == out_shape else None
        if y is None:
            self.check_size(out_shape)
            y = np.empty(out_shape, x.dtype)
        if plan.flat is not None:
            return [gather_trailing(x, plan.flat, k, plan.out_shape, y)]
        if plan.grows:
            y.fill(self.value)
        y[(Ellipsis,) + plan.dst] = x[(Ellipsis,) + plan.src]
        return [y]
