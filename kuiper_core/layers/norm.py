"""Normalisation: BatchNorm, InstanceNorm, GroupNorm, LayerNorm, RMSNorm, LocalResponseNorm,
F.normalize, and the F.* forms pnnx leaves when weights are not module parameters.

Inference only: BatchNorm (and InstanceNorm with track_running_stats) use the running
statistics, folded at build into one per-channel scale and shift. The others normalise by
statistics of the input itself (biased variance, like torch), over rows of a 2-D view:

    LayerNorm / RMSNorm   the trailing `normalized_shape` dims
    GroupNorm             each (sample, group of channels)
    InstanceNorm          each (sample, channel)

F.* forms take their tensors either as `$weight=` / `$bias=` / `$running_mean=` inputs
(computed or constant operands, so read at forward) or as `weight=None` params.
"""

from __future__ import annotations

from functools import partial
from collections.abc import Callable

import numpy as np

from ..graph import Operator
from ..limits import PYTHON_STEP_WORK
from ._common import output_like
from .broadcast import expanded
from .reduce import vector_norm
from .halves import SplitRequest, halves_call, split_flat, split_leading
from .registry import Layer, Prepared, register
from .torch_args import input_index

F32 = np.float32


# -- shared helpers ----------------------------------------------------------------------


def channel_shaped(vec: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) vector shaped (C, 1, ..., 1) to broadcast over dim 1 of an ndim-rank tensor."""
    return vec.reshape((-1,) + (1,) * max(ndim - 2, 0))


def normalize_rows(x2: np.ndarray, y2: np.ndarray, eps: F32, avg: np.ndarray | None = None) -> None:
    """y2 = (x2 - mean) / sqrt(var + eps) for each row of 2-D x2 (biased var).

    Two passes for the mean, in the input's dtype: with a large offset (x ~ 1000 +- 2) the
    first mean is off in its last digits, but x - mean is then exact and small, so the mean
    of those residuals corrects it (the digits the normalised output is made of survive).
    Row means are matrix-vector products (BLAS, many accumulators): cheaper than NumPy's
    reductions over short rows. `avg`: the vector of 1/n in x2's dtype, when the caller keeps one.

    The variance is the sum of squared deviations divided by n, as torch computes it (its
    row moments): where that sum passes the dtype's range (deviations ~1e19 in float32 over a
    few elements) it is inf and the row normalises to 0, torch's answer, where weighting each
    square by 1/n first would keep it finite and give ±1.
    """
    n = x2.shape[1]
    if avg is None:
        avg = row_average_vector(n, x2.dtype)
    np.subtract(x2, np.matmul(x2, avg)[:, None], out=y2)
    y2 -= np.matmul(y2, avg)[:, None]  # the residual correction
    with np.errstate(over="ignore"):  # a square or the sum past the range: inf (above)
        var = np.matmul(np.square(y2), np.ones_like(avg))
    var /= x2.dtype.type(n) if n else 1
    var += eps
    np.sqrt(var, out=var)
    np.divide(y2, var[:, None], out=y2)


def row_average_vector(n: int, dtype: np.dtype) -> np.ndarray:
    """(1/n, ..., 1/n): a row's mean as a matrix-vector product."""
    return np.full(n, 1.0 / n if n else 0.0, dtype)


def rows_view(y: np.ndarray, rows: int) -> np.ndarray:
    """y as (rows, -1) sharing memory (y must be C-contiguous)."""
    return y.reshape(rows, -1)


def contiguous_output(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """An output buffer that can be viewed as rows (a non-contiguous `out` is not used)."""
    y = output_like(x, out)
    return y if y.flags.c_contiguous else np.empty(x.shape, y.dtype)


def as_float(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(np.float32)


class OptionalTensors:
    """Where an F.* norm gets each optional tensor: a named input, or `name=None`."""

    def __init__(self, layer: Layer, names: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
        self.index: dict[str, int | None] = {}
        for name in names:
            idx = input_index(layer.op, name)
            if idx is None:
                value = layer.param(name, None)
                if value is not None:
                    raise layer.error(f"'{name}' must be an input tensor (${name}=...) or None, got {value!r}")
                if name in required:
                    raise layer.error(f"expected the input ${name}=")
            self.index[name] = idx

    def get(self, inputs: list[np.ndarray], name: str) -> np.ndarray | None:
        idx = self.index[name]
        return None if idx is None else np.asarray(inputs[idx])


def check_vector(layer: Layer, name: str, v: np.ndarray | None, n: int) -> np.ndarray | None:
    """A per-channel tensor of n entries as a flat array (None passes through)."""
    if v is None:
        return None
    if v.size != n:
        raise layer.error(f"expected '{name}' with {n} entries (one per channel), got shape {v.shape}")
    return v.reshape(n)


def fold_running_stats(
    mean: np.ndarray, var: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """BatchNorm as y = x * scale + shift; folded in float64, then float32."""
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean.astype(np.float64) * scale
    if bias is not None:
        shift = shift + bias
    return scale.astype(np.float32), shift.astype(np.float32)


def _channel_affine(
    scale: np.ndarray | None, shift: np.ndarray | None, inputs: list[np.ndarray], out: list[np.ndarray]
) -> None:
    apply_channel_affine(inputs[0], out[0], scale, shift)


def apply_channel_affine(x: np.ndarray, y: np.ndarray, scale: np.ndarray | None, shift: np.ndarray | None) -> None:
    """y = x * scale[c] + shift[c] over dim 1 (either may be None)."""
    if scale is not None:
        np.multiply(x, channel_shaped(scale, x.ndim), out=y)
    elif y is not x:
        np.copyto(y, x)
    if shift is not None:
        y += channel_shaped(shift, x.ndim)


class Norm(Layer):
    """One input (plus F.* tensor inputs) -> one output of the same shape."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if not op.inputs or len(op.outputs) != 1:
            raise self.error(f"expected an input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
        eps = self.param("eps", 1e-5)
        self.eps = F32(np.finfo(np.float32).eps if eps is None else self.float_param("eps", eps))
        self.in_shape = op.inputs[0].shape

    def check_channels(self, shape: tuple, n: int, what: str = "channels") -> None:
        if len(shape) < 2:
            raise self.error(f"expected an input of rank >= 2 (N, C, ...), got shape {tuple(shape)}")
        if isinstance(shape[1], int) and shape[1] != n:
            raise self.error(f"expected {n} {what} in dim 1, got shape {tuple(shape)}")

    def affine_weights(self, n_key: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """@weight / @bias when `affine` (or elementwise_affine) is on, checked against n_key."""
        w = self.weight("weight", required=False)
        b = self.weight("bias", required=False)
        n = self.int_param(n_key) if n_key in self.op.params else None
        if n is not None:
            w = check_vector(self, "@weight", w, n)
            b = check_vector(self, "@bias", b, n)
        return (None if w is None else w.astype(np.float32), None if b is None else b.astype(np.float32))


# -- running statistics ------------------------------------------------------------------


@register("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d")
class BatchNorm(Norm):
    """(x - running_mean) / sqrt(running_var + eps) * weight + bias, folded into x * s + t.

    pnnx fuses a BatchNorm that follows a convolution into the convolution at optlevel 2,
    so this layer sees the others (after an input, a ReLU, a concat...).
    """

    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        n = self.int_param("num_features")
        mean = check_vector(self, "@running_mean", self.weight("running_mean"), n)
        var = check_vector(self, "@running_var", self.weight("running_var"), n)
        w, b = self.affine_weights("num_features")
        if self.param("affine", w is not None) and (w is None or b is None):
            raise self.error("affine=True needs @weight and @bias")
        assert mean is not None and var is not None
        self.n = n
        self.scale, self.shift = fold_running_stats(mean, var, w, b, float(self.eps))
        if self.in_shape is not None:
            self.check_channels(self.in_shape, n)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        self.check_channels(x.shape, self.n)
        y = output_like(x, out[0])
        apply_channel_affine(x, y, self.scale, self.shift)
        return [y]

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        """x * s + t with the checks done once; asked to split, at batch 1, as two halves of
        the channels (DenseNet's BatchNorms before each conv are a fifth of its time)."""
        x, y = inputs[0], out[0]
        if x.dtype.kind != "f" or y.shape != x.shape or y.dtype != x.dtype or x.ndim < 2 or x.shape[1] != self.n:
            return None
        if not (
            split is not None and x.shape[0] == 1 and self.n >= 2 and x.size >= 2 * split.sizes.min_elements(cheap=True)
        ):
            return partial(_channel_affine, self.scale, self.shift)
        h = self.n // 2
        first, second = (
            partial(apply_channel_affine, x[:, part], y[:, part], self.scale[part], self.shift[part])
            for part in (slice(0, h), slice(h, None))
        )
        return halves_call(split, first, second, inputs, out)


@register("F.batch_norm")
class FunctionalBatchNorm(Norm):
    """F.batch_norm(x, running_mean, running_var, weight, bias) with tensor inputs.

    The statistics arrive as operands (often pnnx.Attribute), so the fold into scale and
    shift happens per call; it costs O(C).
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if self.param("training", False) is True:
            raise self.error("training=True batch statistics are not supported at inference")
        self.tensors = OptionalTensors(
            self, ("running_mean", "running_var", "weight", "bias"), ("running_mean", "running_var")
        )

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        if x.ndim < 2:
            raise self.error(f"expected an input of rank >= 2 (N, C, ...), got shape {x.shape}")
        n = x.shape[1]
        vec = {k: check_vector(self, k, self.tensors.get(inputs, k), n) for k in self.tensors.index}
        mean, var = vec["running_mean"], vec["running_var"]
        assert mean is not None and var is not None  # required: OptionalTensors checked them at build
        scale, shift = fold_running_stats(mean, var, vec["weight"], vec["bias"], float(self.eps))
        y = output_like(x, out[0])
        apply_channel_affine(x, y, scale, shift)
        return [y]


# -- statistics of the input ---------------------------------------------------------------


@register("nn.InstanceNorm1d", "nn.InstanceNorm2d", "nn.InstanceNorm3d")
class InstanceNorm(Norm):
    """Normalise each (sample, channel) over its spatial dims; with track_running_stats the
    eval-mode layer uses the running statistics instead, exactly like BatchNorm.

    InstanceNormNd also takes an unbatched (C, *spatial) input of one rank less.
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.n = self.int_param("num_features")
        self.spatial = int(op.type[-2])  # nn.InstanceNorm2d -> 2
        self.weight_, self.bias_ = self.affine_weights("num_features")
        if self.param("affine", False) and (self.weight_ is None or self.bias_ is None):
            raise self.error("affine=True needs @weight and @bias")
        self.folded: tuple[np.ndarray, np.ndarray] | None = None
        if self.param("track_running_stats", False):
            mean = check_vector(self, "@running_mean", self.weight("running_mean"), self.n)
            var = check_vector(self, "@running_var", self.weight("running_var"), self.n)
            assert mean is not None and var is not None  # required weights: read or an error
            self.folded = fold_running_stats(mean, var, self.weight_, self.bias_, float(self.eps))
        if self.in_shape is not None:
            self.batched(tuple(self.in_shape))

    def batched(self, shape: tuple) -> bool:
        """True for (N, C, *spatial), False for unbatched (C, *spatial); else an error."""
        rank = self.spatial + 2
        if len(shape) not in (rank, rank - 1):
            raise self.error(f"expected a {rank}-D (N, C, ...) or {rank - 1}-D unbatched input, got shape {shape}")
        batched = len(shape) == rank
        c = shape[1] if batched else shape[0]
        if isinstance(c, int) and c != self.n:
            raise self.error(f"expected {self.n} channels, got shape {shape}")
        return batched

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        y = contiguous_output(x, out[0])
        xb, yb = (x, y) if self.batched(x.shape) else (x[None], y[None])
        if self.folded is not None:
            apply_channel_affine(xb, yb, *self.folded)
        else:
            instance_norm(xb, yb, self.eps, self.weight_, self.bias_)
        return [y]


def instance_norm(x: np.ndarray, y: np.ndarray, eps: F32, w: np.ndarray | None, b: np.ndarray | None) -> None:
    """Per (sample, channel) statistics over the spatial dims, then the channel affine."""
    normalize_rows(x.reshape(x.shape[0] * x.shape[1], -1), rows_view(y, x.shape[0] * x.shape[1]), eps)
    if w is not None or b is not None:
        apply_channel_affine(y, y, w, b)


@register("F.instance_norm")
class FunctionalInstanceNorm(Norm):
    """F.instance_norm(x, weight=..., bias=...) over (N, C, *spatial), input statistics.

    use_input_stats=False (running statistics) is not something pnnx converts (it leaves
    aten::instance_norm), so only input statistics are supported.
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if self.param("use_input_stats", True) is False:
            raise self.error("use_input_stats=False is not supported (only input statistics)")
        self.tensors = OptionalTensors(self, ("weight", "bias"))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        if x.ndim < 3:
            raise self.error(f"expected an input of rank >= 3 (N, C, *spatial), got shape {x.shape}")
        n = x.shape[1]
        w = check_vector(self, "weight", self.tensors.get(inputs, "weight"), n)
        b = check_vector(self, "bias", self.tensors.get(inputs, "bias"), n)
        y = contiguous_output(x, out[0])
        instance_norm(x, y, self.eps, w, b)
        return [y]


@register("nn.GroupNorm", "F.group_norm")
class GroupNorm(Norm):
    """Normalise each (sample, group of C/G channels) together, then a per-channel affine."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.groups = self.int_param("num_groups")
        if self.groups < 1:
            raise self.error(f"expected num_groups >= 1, got {self.groups}")
        if op.type == "F.group_norm":
            self.tensors: OptionalTensors | None = OptionalTensors(self, ("weight", "bias"))
            self.w = self.b = None
        else:
            self.tensors = None
            self.w, self.b = self.affine_weights("num_channels")
            if self.param("affine", False) and (self.w is None or self.b is None):
                raise self.error("affine=True needs @weight and @bias")
        if self.in_shape is not None:
            self.check_groups(tuple(self.in_shape))

    def check_groups(self, shape: tuple) -> None:
        if len(shape) < 2:
            raise self.error(f"expected an input of rank >= 2 (N, C, ...), got shape {shape}")
        c = shape[1]
        if isinstance(c, int) and c % self.groups:
            raise self.error(f"{c} channels do not split into num_groups={self.groups} groups")
        if isinstance(c, int) and self.w is not None and self.w.size != c:
            raise self.error(f"expected {self.w.size} channels (num_channels), got shape {shape}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        self.check_groups(x.shape)
        w, b = self.w, self.b
        if self.tensors is not None:
            w = check_vector(self, "weight", self.tensors.get(inputs, "weight"), x.shape[1])
            b = check_vector(self, "bias", self.tensors.get(inputs, "bias"), x.shape[1])
        y = contiguous_output(x, out[0])
        rows = x.shape[0] * self.groups
        normalize_rows(x.reshape(rows, -1), rows_view(y, rows), self.eps)
        if w is not None or b is not None:
            apply_channel_affine(y, y, w, b)
        return [y]


class TrailingNorm(Norm):
    """Shared by LayerNorm and RMSNorm: statistics over the trailing `normalized_shape` dims;
    the weight and bias have that shape (module @attrs, or F.* inputs)."""

    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        shape = self.ints_param("normalized_shape")
        if not shape or any(d < 1 for d in shape):
            raise self.error(f"expected a non-empty normalized_shape of positive dims, got {shape}")
        self.norm_shape = shape
        self.size = int(np.prod(shape))
        self.tensors: OptionalTensors | None = None
        self.w = self.b = None
        if op.type.startswith("F."):
            self.tensors = OptionalTensors(self, ("weight", "bias"))
        else:
            self.w = self.trailing_weight("weight")
            self.b = self.trailing_weight("bias")
            if self.param("elementwise_affine", False) and self.w is None:
                raise self.error("elementwise_affine=True needs @weight")
        if self.in_shape is not None:
            self.check_trailing(tuple(self.in_shape))

    def trailing_weight(self, key: str) -> np.ndarray | None:
        v = self.weight(key, required=False)
        if v is None:
            return None
        if v.size != self.size:
            raise self.error(f"expected @{key} of shape {self.norm_shape}, got {v.shape}")
        return v.reshape(self.norm_shape).astype(np.float32)

    def check_trailing(self, shape: tuple) -> None:
        k = len(self.norm_shape)
        tail = shape[-k:] if len(shape) >= k else None
        if tail is None or any(isinstance(d, int) and d != n for d, n in zip(tail, self.norm_shape)):
            raise self.error(
                f"expected an input ending in dims {self.norm_shape} (normalized_shape), got shape {shape}"
            )

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        self.check_trailing(x.shape)
        w, b = self.w, self.b
        if self.tensors is not None:
            w, b = (self.tensors.get(inputs, k) for k in ("weight", "bias"))
            for key, v in (("weight", w), ("bias", b)):
                if v is not None and v.size != self.size:
                    raise self.error(f"expected '{key}' of shape {self.norm_shape}, got {v.shape}")
        y = contiguous_output(x, out[0])
        rows = x.size // self.size if self.size else 0
        self.normalize(x.reshape(rows, self.size), rows_view(y, rows))
        if w is not None:
            y *= w.reshape(self.norm_shape)
        if b is not None:
            y += b.reshape(self.norm_shape)
        return [y]

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        x, y = inputs[0], out[0]
        if self.tensors is not None or x.dtype.kind != "f" or y.shape != x.shape or y.dtype != x.dtype:
            return None
        self.check_trailing(x.shape)
        whole = self._prepare_rows(inputs, out)
        if self.size and split is not None:  # its rows in two halves
            # split_leading: a view's rows (ConvNeXt's LayerNorm reads a permuted map), along
            # a leading axis
            lead = x.ndim - len(self.norm_shape)
            return (
                split_flat(split, self._prepare_rows, inputs, out, unit=self.size)
                or split_leading(split, self._prepare_rows, inputs, out, max_axis=lead)
                or whole
            )
        return whole

    def _prepare_rows(self, inputs: list[np.ndarray], out: list[np.ndarray]) -> Prepared:
        """The prepared call over inputs[0]'s rows of `size` elements (the whole array, or a
        flat part of whole rows)."""
        shape = (inputs[0].size // self.size if self.size else 0, self.size)
        # The weight and bias expanded to the whole output: one flat pass each (broadcast.py).
        w, b = (None if v is None else v.reshape(self.size) for v in (self.w, self.b))
        return partial(_norm_rows, self.normalize, shape, expanded(w, shape), expanded(b, shape))

    def normalize(self, x2: np.ndarray, y2: np.ndarray) -> None:
        raise NotImplementedError


def _norm_rows(
    normalize: Callable[[np.ndarray, np.ndarray], None],
    rows: tuple[int, int],
    w: np.ndarray | None,
    b: np.ndarray | None,
    inputs: list[np.ndarray],
    out: list[np.ndarray],
) -> None:
    """TrailingNorm's prepared call (nn.* weights): normalise the rows, then the affine."""
    y = out[0].reshape(rows)
    normalize(inputs[0].reshape(rows), y)
    if w is not None:
        y *= w
    if b is not None:
        y += b


@register("nn.LayerNorm", "F.layer_norm")
class LayerNorm(TrailingNorm):
    """(x - mean) / sqrt(var + eps) over the trailing dims, then * weight + bias.

    pnnx writes nn.LayerNorm(bias=False) as elementwise_affine=False and drops the weight:
    a pnnx limitation this layer cannot undo.
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self._avg: dict[np.dtype, np.ndarray] = {}

    def normalize(self, x2: np.ndarray, y2: np.ndarray) -> None:
        avg = self._avg.get(x2.dtype)
        if avg is None:
            avg = self._avg[x2.dtype] = row_average_vector(self.size, x2.dtype)
        normalize_rows(x2, y2, self.eps, avg)


@register("nn.RMSNorm", "F.rms_norm")
class RMSNorm(TrailingNorm):
    """x / sqrt(mean(x^2) + eps) * weight; eps=None means float32's machine epsilon."""

    def normalize(self, x2: np.ndarray, y2: np.ndarray) -> None:
        ms = np.mean(np.square(x2), axis=1, keepdims=True)
        ms += self.eps
        np.sqrt(ms, out=ms)
        np.divide(x2, ms, out=y2)


# -- across channels -------------------------------------------------------------------------


@register("nn.LocalResponseNorm", "F.local_response_norm")
class LocalResponseNorm(Norm):
    """x / (k + alpha/size * sum of x^2 over a window of `size` channels)^beta.

    The window is centred as torch pads it: size//2 channels before, (size-1)//2 after,
    zeros beyond the edges, and the sum is always divided by `size`.
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.size = self.int_param("size", low=1, high=self.size_limit)
        self.alpha = F32(self.float_param("alpha", 1e-4) / self.size)
        self.beta = F32(self.float_param("beta", 0.75))
        self.k = F32(self.float_param("k", 1.0))
        if self.in_shape is not None and len(self.in_shape) < 3:
            raise self.error(f"expected an input of rank >= 3 (N, C, ...), got shape {tuple(self.in_shape)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        if x.ndim < 3:
            raise self.error(f"expected an input of rank >= 3 (N, C, ...), got shape {x.shape}")
        c, before = x.shape[1], self.size // 2
        y = output_like(x, out[0])
        if c == 0:
            return [y]
        # Window offsets whose c channels reach the real ones (the rest only add zeros):
        # at most 2c - 1 of them, however large `size` is.
        lo, hi = max(0, before - c + 1), min(self.size, before + c)
        self.check_work((hi - lo) * (x.size + PYTHON_STEP_WORK), f"a window of {hi - lo:,} channels over {x.shape}")
        padded = np.zeros((x.shape[0], hi - 1 + c - lo) + x.shape[2:], x.dtype)
        np.square(x, out=padded[:, before - lo : before - lo + c])
        np.copyto(y, padded[:, 0:c])
        for offset in range(1, hi - lo):  # a loop over the window, not over elements
            y += padded[:, offset : offset + c]
        y *= self.alpha
        y += self.k
        np.power(y, self.beta, out=y)
        np.divide(x, y, out=y)
        return [y]


@register("F.normalize")
class Normalize(Norm):
    """x / max(||x||_p, eps) along dim (L2 by default), as F.normalize."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.p = self.float_param("p", 2.0)
        self.dim = self.int_param("dim", 1)
        self.eps = F32(self.float_param("eps", 1e-12))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = as_float(inputs[0])
        if not -max(x.ndim, 1) <= self.dim < max(x.ndim, 1):
            raise self.error(f"dim {self.dim} is out of range for a tensor of rank {x.ndim}")
        axis = self.dim % max(x.ndim, 1) if x.ndim else None
        norm = vector_norm(x, self.p, axis, keepdims=True)
        np.maximum(norm, self.eps, out=norm)
        y = output_like(x, out[0])
        np.divide(x, norm, out=y)
        return [y]
