"""Activations: elementwise functions, softmax-style reductions, GLU, dropout and identity.

Each nn.* module shares one class with its F.* twin (pnnx writes `torch.relu`/`Tensor.relu`
as `F.relu`, and `F.prelu` as `nn.PReLU`). The param names are the same for both forms
(`negative_slope`, `alpha`, `min_val`/`max_val`, `beta`/`threshold`, `lambd`, `dim`).

All kernels write into the preallocated output and keep float32 as float32: constants are
np.float32; GELU's float64 reference (erfc) serves float64 inputs and the tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache, partial

import numpy as np

from ..graph import Operator
from . import clamp
from ._common import output_like
from .halves import SplitRequest, split_flat
from .registry import Layer, Prepared, register
from .windows import scratch

F32 = np.float32


class Elementwise(Layer):
    """y = f(x), same shape; subclasses implement `compute(x, y)` writing into y.

    `inplace_safe`: compute stays right when y is x (it never reads x after writing y),
    so the runtime may run it in place (see Layer.overwritable_inputs)."""

    inplace_safe = False
    splittable = True
    # Asked to split (prepare's `split`): in two flat halves from split.sizes.min_elements(cheap)
    # elements a half (`cheap`: the one-pass piecewise linear ones). Not for layers whose value
    # depends on the position (PReLU's per-channel slopes).
    pointwise = True
    cheap = False
    # Prepared calls of the multi-pass (not `cheap`) pointwise ones run over flat blocks of
    # this many elements: their 3-4 passes (and the scratch) then stay in L2 instead of
    # streaming a big map through memory each pass. SiLU on (1, 32, 112, 112): 551 -> 418 us;
    # (1, 96, 112, 112): 1.81 -> 1.23 ms; below 2 blocks no change (one thread).
    BLOCK = 1 << 15

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if not op.inputs or len(op.outputs) != 1:
            raise self.error(f"expected 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.dtype.kind != "f":
            x = x.astype(np.float32)
        y = output_like(x, out[0])
        self.compute(x, y)
        return [y]

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        f = self.prepare_whole(inputs, out)
        if f is None or split is None or not self.pointwise:
            return f
        return split_flat(split, self.prepare_whole, inputs, out, self.cheap) or f

    def prepare_whole(self, inputs: list[np.ndarray], out: list[np.ndarray]) -> Prepared | None:
        """The prepared function over the whole arrays (Layer.prepare)."""
        x, y = inputs[0], out[0]
        if x.dtype.kind != "f" or y.shape != x.shape or y.dtype != x.dtype:
            return None
        if self.pointwise and not self.cheap and x.flags.c_contiguous and y.flags.c_contiguous:
            blocks = self.blocks(x.size)
            if len(blocks) > 1:
                return partial(_compute_blocks, self.compute, blocks)
        return self._compute_prepared

    def _compute_prepared(self, inputs: list[np.ndarray], out: list[np.ndarray]) -> None:
        self.compute(inputs[0], out[0])

    def blocks(self, n: int) -> tuple[tuple[int, int], ...]:
        """(start, stop) of equal blocks of at most BLOCK elements (no short last one)."""
        if n == 0:
            return ()
        step = -(-n // -(-n // self.BLOCK))
        return tuple((start, min(start + step, n)) for start in range(0, n, step))

    def overwritable_inputs(self) -> tuple[int, ...]:
        return (0,) if self.inplace_safe else ()

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError


def _compute_blocks(
    compute: Callable[[np.ndarray, np.ndarray], None],
    blocks: tuple[tuple[int, int], ...],
    inputs: list[np.ndarray],
    out: list[np.ndarray],
) -> None:
    """Elementwise's prepared call over contiguous arrays, block by block (see BLOCK)."""
    xf, yf = inputs[0].reshape(-1), out[0].reshape(-1)
    for start, stop in blocks:
        compute(xf[start:stop], yf[start:stop])


# -- piecewise linear ------------------------------------------------------------------


@register("nn.ReLU", "F.relu")
class ReLU(Elementwise):
    cheap = True
    inplace_safe = True
    fuses_into_writer = True

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        clamp.maximum(x, F32(0), y)


@register("nn.Hardtanh", "F.hardtanh")
class Hardtanh(Elementwise):
    """clamp(x, min_val, max_val); ReLU6 is the (0, 6) case."""

    cheap = True

    inplace_safe = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.lo, self.hi = self.bounds()
        if self.lo > self.hi:
            raise self.error(f"expected min_val <= max_val, got min_val={self.lo}, max_val={self.hi}")

    def bounds(self) -> tuple[F32, F32]:
        return F32(self.float_param("min_val", -1.0)), F32(self.float_param("max_val", 1.0))

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        clamp.clip(x, self.lo, self.hi, y)


@register("nn.ReLU6", "F.relu6")
class ReLU6(Hardtanh):
    def bounds(self) -> tuple[F32, F32]:
        return F32(0), F32(6)


@register("nn.LeakyReLU", "F.leaky_relu")
class LeakyReLU(Elementwise):
    """x if x > 0 else slope * x, as max(x, slope*x) (slope <= 1) or min(x, slope*x)."""

    cheap = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.slope = F32(self.negative_slope())

    def negative_slope(self) -> float:
        return self.float_param("negative_slope", 0.01)

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.multiply(x, self.slope, out=y)
        (np.maximum if self.slope <= 1 else np.minimum)(x, y, out=y)


@register("nn.RReLU", "F.rrelu")
class RReLU(LeakyReLU):
    """At inference RReLU is a leaky ReLU with the mean slope (lower + upper) / 2."""

    def negative_slope(self) -> float:
        return (self.float_param("lower", 1.0 / 8) + self.float_param("upper", 1.0 / 3)) / 2


@register("nn.PReLU")
class PReLU(Elementwise):
    """x if x > 0 else w[c] * x, with one learned slope per channel (dim 1) or one in all.

    pnnx writes `F.prelu(x, w)` as nn.PReLU too, and an nn.PReLU() with a single slope as
    nn.LeakyReLU, so a one-slope nn.PReLU only comes from other exporters.
    """

    pointwise = False  # its slopes go by channel

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        w = np.asarray(self.weight("weight"), dtype=np.float32).reshape(-1)
        n = self.int_param("num_parameters", w.size)
        if w.size != n or n < 1:
            raise self.error(f"expected @weight with num_parameters={n} entries, got {w.size}")
        shape = op.inputs[0].shape
        if n > 1 and shape is not None:
            if len(shape) < 2 or (isinstance(shape[1], int) and shape[1] != n):
                raise self.error(f"expected an input with {n} channels in dim 1, got shape {tuple(shape)}")
        self.w = w
        self._by_rank: dict[int, np.ndarray] = {}

    def slopes(self, ndim: int) -> np.ndarray:
        """The weight shaped to broadcast over dim 1 of an ndim-rank input (cached)."""
        w = self._by_rank.get(ndim)
        if w is None:
            if self.w.size == 1:
                w = self.w.reshape(())
            elif ndim < 2:
                raise self.error(f"a {self.w.size}-slope PReLU needs an input with a channel dim, got rank {ndim}")
            else:
                w = self.w.reshape((-1,) + (1,) * (ndim - 2))
            self._by_rank[ndim] = w
        return w

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        _prelu(self, x, self.slopes(x.ndim), y)


def _prelu(layer: Layer, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """y = x where x > 0, else w·x, with w shaped to broadcast over dim 1 (or 0-d)."""
    if x.ndim >= 2 and w.ndim and x.shape[1] != w.shape[0]:
        raise layer.error(f"input has {x.shape[1]} channels, the layer has {w.shape[0]} slopes")
    np.multiply(x, w, out=y)
    np.copyto(y, x, where=x > 0)


@register("F.prelu")
class FPReLU(Layer):
    """`F.prelu(x, weight)` with the slopes as an input tensor (optlevel 0/1 keep it; at
    optlevel 2 pnnx writes nn.PReLU with the weight inside)."""

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0] if inputs[0].dtype.kind == "f" else inputs[0].astype(np.float32)
        w = np.asarray(inputs[1], dtype=x.dtype)
        if w.size == 1:
            w = w.reshape(())
        elif x.ndim < 2:
            raise self.error(f"a {w.size}-slope prelu needs an input with a channel dim, got rank {x.ndim}")
        else:
            w = w.reshape((-1,) + (1,) * (x.ndim - 2))
        y = output_like(x, out[0])
        _prelu(self, x, w, y)
        return [y]


@register("nn.Threshold", "F.threshold")
class Threshold(Elementwise):
    """x if x > threshold else value."""

    cheap = True

    inplace_safe = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.threshold = F32(self.float_param("threshold"))
        self.value = F32(self.float_param("value"))

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.copyto(y, x)
        np.copyto(y, self.value, where=x <= self.threshold)  # NaN stays NaN, as in torch


@register("nn.Hardshrink", "F.hardshrink")
class Hardshrink(Elementwise):
    """x if |x| > lambd else 0."""

    cheap = True

    inplace_safe = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.lambd = F32(self.float_param("lambd", 0.5))

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.copyto(y, x)
        np.copyto(y, F32(0), where=np.abs(x) <= self.lambd)  # NaN stays NaN, as in torch


@register("nn.Softshrink", "F.softshrink")
class Softshrink(Elementwise):
    """x - lambd, x + lambd or 0: that is x - clamp(x, -lambd, lambd)."""

    cheap = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        lambd = self.float_param("lambd", 0.5)
        if lambd < 0:
            raise self.error(f"expected lambd >= 0, got {lambd}")
        self.lambd = F32(lambd)

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.clip(x, -self.lambd, self.lambd, out=y)
        np.subtract(x, y, out=y)


@register("nn.Hardsigmoid", "F.hardsigmoid")
class Hardsigmoid(Elementwise):
    """min(max(x + 3, 0), 6) / 6, in torch's order of operations."""

    inplace_safe = True

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.add(x, F32(3), y)
        clamp.clip(y, F32(0), F32(6), y)
        np.divide(y, F32(6), y)


@register("nn.Hardswish", "F.hardswish")
class Hardswish(Elementwise):
    """x * min(max(x + 3, 0), 6) / 6."""

    inplace_safe = True

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        # In y itself unless y is x (in place): no work array to fetch.
        t = scratch("act.tmp", x.shape, x.dtype) if np.may_share_memory(x, y) else y
        np.add(x, F32(3), t)
        clamp.clip(t, F32(0), F32(6), t)
        np.multiply(t, x, y)
        np.divide(y, F32(6), y)


# -- exponential family ----------------------------------------------------------------


@register("nn.ELU", "F.elu")
class ELU(Elementwise):
    """scale * (max(x, 0) + alpha * expm1(min(x, 0) * input_scale)).

    One branch-free formula for ELU, SELU and CELU: expm1 only ever sees x <= 0, so it
    never overflows, and it keeps precision for small |x|.
    """

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        alpha, scale, input_scale = self.coefficients()
        self.alpha, self.scale, self.input_scale = F32(alpha), F32(scale), F32(input_scale)

    def coefficients(self) -> tuple[float, float, float]:
        """(alpha, scale, input_scale)"""
        return self.float_param("alpha", 1.0), 1.0, 1.0

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.minimum(x, F32(0), out=y)
        if self.input_scale != 1:
            np.multiply(y, self.input_scale, out=y)
        np.expm1(y, out=y)
        np.multiply(y, self.alpha, out=y)
        y += np.maximum(x, F32(0))
        if self.scale != 1:
            np.multiply(y, self.scale, out=y)


@register("nn.SELU", "F.selu")
class SELU(ELU):
    # The constants of Klambauer et al. (2017), as torch uses them.
    ALPHA = 1.6732632423543772848170429916717
    SCALE = 1.0507009873554804934193349852946

    def coefficients(self) -> tuple[float, float, float]:
        return self.ALPHA, self.SCALE, 1.0


@register("nn.CELU", "F.celu")
class CELU(ELU):
    def coefficients(self) -> tuple[float, float, float]:
        alpha = self.float_param("alpha", 1.0)
        if alpha == 0:
            raise self.error("expected a non-zero alpha for CELU")
        return alpha, 1.0, 1.0 / alpha


def sigmoid(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) into out; exp overflows to inf for x < -88, giving the right 0."""
    with np.errstate(over="ignore"):
        np.negative(x, out=out)
        np.exp(out, out=out)
    out += F32(1)
    np.reciprocal(out, out=out)
    return out


def softplus(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), which cannot overflow."""
    np.abs(x, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    out += np.maximum(x, F32(0))
    return out


# Per-channel float32 values (N, C, 1, 1...: squeeze-excitation's) of at most this many
# elements go through sigmoid and SiLU in float64, rounded once: each value scales a whole
# channel, so its rounding is amplified where EfficientNet's sigmoids saturate
# (docs/coverage.md); a few us.
SMALL_IN_FLOAT64 = 4096


def _small_in_float64(x: np.ndarray, y: np.ndarray, f: Callable[[np.ndarray], np.ndarray]) -> bool:
    """y = f(x) computed in float64 when x is float32 per-channel values (SMALL_IN_FLOAT64)."""
    if x.dtype != F32 or x.size > SMALL_IN_FLOAT64 or x.ndim < 3 or x.size != x.shape[0] * x.shape[1]:
        return False
    np.copyto(y, f(x.astype(np.float64)), casting="same_kind")
    return True


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


@register("nn.Sigmoid", "F.sigmoid")
class Sigmoid(Elementwise):
    inplace_safe = True

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        if not _small_in_float64(x, y, _sigmoid64):
            sigmoid(x, y)


@register("nn.Tanh", "F.tanh")
class Tanh(Elementwise):
    inplace_safe = True

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.tanh(x, out=y)


@register("nn.SiLU", "F.silu")
class SiLU(Elementwise):
    """x / (1 + exp(-x)): a few float32 ulps relative to the value everywhere, as PyTorch.

    The tanh form h * (1 + tanh(h)), h = x / 2, is faster (NumPy's float32 tanh beats its exp)
    but 1 + tanh(h) cancels for negative x: 185 % relative error at x ~ -20, 25x float32's
    rounding at x = -4. EfficientNet scales such small negative outputs back up (the next
    convolution's folded BN, the squeeze-excitation): on an ill-conditioned input (randn·2 +
    0.5) the tanh form left efficientnet_b0 several times further from float64 than PyTorch's
    float32. exp(-x) overflows to inf for x < -88: x / inf = -0, torch's answer."""

    inplace_safe = True

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        if _small_in_float64(x, y, silu_reference):
            return
        t = scratch("act.tmp", x.shape, x.dtype)
        np.negative(x, out=t)
        with np.errstate(over="ignore"):
            np.exp(t, out=t)
        t += F32(1)
        np.divide(x, t, out=y)


def silu_reference(x: np.ndarray) -> np.ndarray:
    """x / (1 + exp(-x)), in float64: what SiLU.compute is tested against."""
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x.astype(np.float64)))


@register("nn.Mish", "F.mish")
class Mish(Elementwise):
    """x * tanh(softplus(x))"""

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        softplus(x, y)
        np.tanh(y, out=y)
        np.multiply(y, x, out=y)


@register("nn.Softplus", "F.softplus")
class Softplus(Elementwise):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        beta = self.float_param("beta", 1.0)
        if beta == 0:
            raise self.error("expected a non-zero beta for Softplus")
        self.beta = F32(beta)
        self.threshold = F32(self.float_param("threshold", 20.0))

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        bx = x * self.beta if self.beta != 1 else x
        softplus(bx, y)
        if self.beta != 1:
            np.divide(y, self.beta, out=y)
        np.copyto(y, x, where=bx > self.threshold)


@register("nn.LogSigmoid", "F.logsigmoid")
class LogSigmoid(Elementwise):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))."""

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.abs(x, out=y)
        np.negative(y, out=y)
        np.exp(y, out=y)
        np.log1p(y, out=y)
        np.subtract(np.minimum(x, F32(0)), y, out=y)


@register("nn.Softsign", "F.softsign")
class Softsign(Elementwise):
    """x / (1 + |x|)"""

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.abs(x, out=y)
        y += F32(1)
        np.divide(x, y, out=y)


@register("nn.Tanhshrink", "F.tanhshrink")
class Tanhshrink(Elementwise):
    """x - tanh(x)"""

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.tanh(x, out=y)
        np.subtract(x, y, out=y)


# -- GELU ------------------------------------------------------------------------------

# erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0: the Chebyshev fit of
# Numerical Recipes (2nd ed., 6.2, "erfcc"), fractional error < 1.2e-7 for every z.
_ERFC_COEFFS = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)  # fmt: skip


def erfc_nonneg(z: np.ndarray) -> np.ndarray:
    """erfc(z) for float64 z >= 0 (consumed: used as scratch), relative error < 1.2e-7.

    A relative bound on erfc (not just an absolute one on erf) keeps GELU's far negative
    tail accurate, where torch's own 1 + erf(x) cancels.
    """
    t = np.multiply(z, 0.5)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERFC_COEFFS[-1])
    for c in _ERFC_COEFFS[-2::-1]:
        poly *= t
        poly += c
    np.square(z, out=z)
    poly -= z
    np.exp(poly, out=poly)
    poly *= t
    return poly


def gelu_reference(x: np.ndarray, y: np.ndarray) -> None:
    """y = x * Phi(x) = max(x, 0) - |x|/2 * erfc(|x|/sqrt 2), in float64: no branch, no
    cancellation, relative error < 2e-7 everywhere (what `gelu_float32` is tested against,
    and the path for float64 inputs)."""
    a = np.abs(x, dtype=np.float64)
    e = erfc_nonneg(a * (1.0 / math.sqrt(2.0)))
    e *= a
    e *= -0.5
    np.add(e, np.maximum(x, x.dtype.type(0)), out=y, casting="same_kind")


# float32 GELU: x * Phi(x) = x * exp(L(x)), L = log Phi linearly interpolated in a table on a
# grid of step 1/GELU_STEPS over [GELU_LO, GELU_HI]. |L''| <= 1 bounds the interpolation's
# error by 1 / (8 GELU_STEPS^2) = 3e-8 relative; beyond the grid x * Phi is 0 (below: < 1e-57)
# or x (above: 1 - Phi(6) = 1e-9 rounds away).
GELU_STEPS = 2048
GELU_LO, GELU_HI = -16.0, 6.0
GELU_WORK_ROWS = 3  # the clipped x, then its grid position, the interpolated L


@lru_cache(maxsize=1)
def gelu_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(L at the nodes, L[k + 1] - L[k], the index of x = 0): built once (~20 ms, 360 KB),
    at the first float32 GELU, from math.erfc (no cancellation in the negative tail)."""
    lo, hi = round(GELU_LO * GELU_STEPS), round(GELU_HI * GELU_STEPS)
    nodes = np.arange(lo, hi + 2) / GELU_STEPS
    logs = np.array([math.log(0.5 * math.erfc(-v / math.sqrt(2.0))) for v in nodes.tolist()])
    values, slopes = logs[:-1].astype(F32), np.diff(logs).astype(F32)
    for table in (values, slopes):
        table.flags.writeable = False
    return values, slopes, np.array(-lo, F32)


_STEPS = np.array(GELU_STEPS, F32)  # 0-d operands: the cheapest ufunc calls


@lru_cache(maxsize=8)
def _filled(value: float, n: int) -> np.ndarray:
    """A read-only row of n copies of value (array operands beat 0-d ones in np.fmax & co.)."""
    row = np.full(n, value, F32)
    row.flags.writeable = False
    return row


def gelu_float32(x: np.ndarray, y: np.ndarray, work: np.ndarray, index: np.ndarray) -> None:
    """y = x * Phi(x) for contiguous 1-D float32 x, y (y may be x), by the table of
    `gelu_tables`: 13 NumPy calls, no polynomial (29 us against 44 for the degree-9 fit it
    replaced, on the ViT's (1, 65, 128) at one thread; 2x faster on 1M values).

    Relative error 2.3e-7 * (1 + x^2/2) at most here, tested <= 4.5e-7 * (1 + x^2/2)
    against the exact value (tests/test_layers_activation.py), 6e-7 for |x| <= 3: the
    float32 rounding of L (about -x^2/2 in the negative tail) and of the exp. PyTorch's own
    float32 GELU (0.5 x (1 + erf)) cancels to 100 % error for x < -3.

    `work`: (GELU_WORK_ROWS, n) float32, `index`: (n,) intp. fmax/fmin drop NaN, so none
    reaches the index; np.maximum brings it back. +inf gives inf and -inf 0 (the limits),
    with no floating-point warning.
    """
    values, slopes, zero = gelu_tables()
    c, u, t = work
    lo = _filled(GELU_LO, x.shape[0])
    np.fmax(x, lo, c)
    np.fmin(c, _filled(GELU_HI, x.shape[0]), c)
    np.multiply(c, _STEPS, u)  # exact: a power of two
    np.floor(u, c)
    np.subtract(u, c, u)  # the fraction of a step, in [0, 1)
    np.add(c, zero, index, casting="unsafe")  # integers below 2^24: exact
    np.take(slopes, index, out=t, mode="clip")  # in range; "clip" skips the checks of "raise"
    t *= u
    np.take(values, index, out=u, mode="clip")
    t += u
    np.exp(t, t)
    np.maximum(x, lo, out=c)  # -inf times its Phi (0) would be NaN
    np.multiply(c, t, y)


@register("nn.GELU", "F.gelu")
class GELU(Elementwise):
    """x * Phi(x), exactly (approximate='none', see gelu_float32) or with torch's tanh formula."""

    SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
    BLOCK = 1 << 14  # elements per pass: the work rows (3 x 64 KB), the index (128 KB) stay in L2

    inplace_safe = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        approximate = self.param("approximate", "none")
        if approximate not in ("none", "tanh"):
            raise self.error(f"expected approximate='none' or 'tanh', got {approximate!r}")
        self.tanh = approximate == "tanh"

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        if self.tanh:
            # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))); x^3 may overflow to
            # +-inf for |x| > 7e12, where tanh gives the right +-1. y may be x: x is read
            # again only in the last multiplication.
            t = scratch("act.tmp", x.shape, x.dtype)
            with np.errstate(over="ignore"):
                np.multiply(x, x, out=t)
                np.multiply(t, x, out=t)
            np.multiply(t, F32(0.044715), out=t)
            t += x
            np.multiply(t, F32(self.SQRT_2_OVER_PI), out=t)
            np.tanh(t, out=t)
            t += F32(1)
            np.multiply(t, F32(0.5), out=t)
            np.multiply(t, x, out=y)
        elif x.dtype != np.float32:
            gelu_reference(x, y)  # float64 (and float16) inputs: the float64 path
        else:
            yf = y.reshape(-1) if y.flags.c_contiguous else np.empty(x.size, y.dtype)
            _compute_blocks(gelu_block, self.blocks(x.size), [x.reshape(-1)], [yf])
            if not y.flags.c_contiguous:
                np.copyto(y, yf.reshape(y.shape))

    def prepare_whole(self, inputs: list[np.ndarray], out: list[np.ndarray]) -> Prepared | None:
        x, y = inputs[0], out[0]
        if (
            self.tanh
            or x.dtype != F32
            or y.shape != x.shape
            or y.dtype != F32
            or not (x.flags.c_contiguous and y.flags.c_contiguous)
        ):
            return super().prepare_whole(inputs, out)
        return partial(_compute_blocks, gelu_block, self.blocks(x.size))


def gelu_block(x: np.ndarray, y: np.ndarray) -> None:
    """gelu_float32 on one block of contiguous 1-D float32 x into y, with this thread's work arrays."""
    n = x.shape[0]
    gelu_float32(x, y, scratch("gelu.work", (GELU_WORK_ROWS, n), F32), scratch("gelu.index", (n,), np.intp))


# -- along one dim ---------------------------------------------------------------------


def legacy_softmax_dim(ndim: int) -> int:
    """torch's choice when softmax is called without dim (deprecated): 0 for rank 0, 1, 3."""
    return 0 if ndim in (0, 1, 3) else 1


class AlongDim(Layer):
    """Softmax-style layers over `dim` (negative dims count from the end)."""

    default_dim: int | None = None
    splittable = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if not op.inputs or len(op.outputs) != 1:
            raise self.error(f"expected 1 input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")
        dim = self.param("dim", self.default_dim)
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
            raise self.error(f"parameter 'dim' must be an int, got {dim!r}")
        self.dim = dim
        shape = op.inputs[0].shape
        if shape is not None and dim is not None:
            self.axis(len(shape))  # validate at build when the rank is known

    def axis(self, ndim: int) -> int:
        dim = legacy_softmax_dim(ndim) if self.dim is None else self.dim
        if not -max(ndim, 1) <= dim < max(ndim, 1):
            raise self.error(f"dim {dim} is out of range for a tensor of rank {ndim}")
        return dim % max(ndim, 1)

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        if x.dtype.kind != "f":
            x = x.astype(np.float32)
        y = output_like(x, out[0])
        self.compute(x, y, self.axis(x.ndim) if x.ndim else None)
        return [y]

    def compute(self, x: np.ndarray, y: np.ndarray, axis: int | None) -> None:
        raise NotImplementedError

    def prepare(
        self, inputs: list[np.ndarray], out: list[np.ndarray], split: SplitRequest | None = None
    ) -> Prepared | None:
        """Asked to split: over the last dim of a float array, its rows in two halves; else
        None (forward)."""
        x, y = inputs[0], out[0]
        if split is None or x.ndim < 2 or x.dtype.kind != "f" or y.dtype != x.dtype:
            return None
        if self.axis(x.ndim) != x.ndim - 1:
            return None
        n = x.shape[-1]
        return split_flat(split, partial(_rows_of, self, n), inputs, out, unit=n)


def _rows_of(layer: AlongDim, n: int, inputs: list[np.ndarray], out: list[np.ndarray]) -> Prepared:
    """The prepared function of `layer` over rows of n elements of flat parts (AlongDim.prepare)."""
    return partial(_along_rows, layer, n)


def _along_rows(layer: AlongDim, n: int, inputs: list[np.ndarray], out: list[np.ndarray]) -> None:
    layer.compute(inputs[0].reshape(-1, n), out[0].reshape(-1, n), 1)


def softmax_reference(x: np.ndarray, y: np.ndarray, axis: int | None) -> None:
    """exp(x - max) / sum, the max subtracted so exp cannot overflow."""
    np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=y)
    np.exp(y, out=y)
    np.divide(y, np.add.reduce(y, axis=axis, keepdims=True), out=y)


# Rows whose sum under the global shift is below n * exp(-SOFTMAX_SPREAD) are redone with their
# own max (see softmax): the shift of every other row is within SOFTMAX_SPREAD of its row max.
SOFTMAX_SPREAD = 4.0
# Up to this global max no shift is needed: exp(x) <= e^80 and a row's sum stay finite.
SOFTMAX_UNSHIFTED_MAX = 80.0
# Below this many elements the reference's five plain calls cost less than the fast path's
# checks and calls: (1, 10) 3.2 against 5.5 us; (16, 64) 5.9 against 6.6; (260, 65) 29 against 18.
SOFTMAX_FAST_MIN_ELEMENTS = 1024


def softmax(x: np.ndarray, y: np.ndarray, axis: int | None) -> None:
    """softmax_reference; along the last axis of C-contiguous float arrays (y not x), faster:

    - no per-row max (10 us for the ViT's 260 rows of 65, the global max 1.4 us): where the
      global max m is at most 80, y = exp(x) itself (no overflow; no rounding of x - max,
      so each value is as accurate as the reference's); a row whose sum is below 1 (its max
      below -log n: its exps may lose digits to underflow) is redone with its own max;
    - above 80, one shift for all rows, m: exp(x - m) cannot overflow; a row whose sum is
      below n e^-4 (its max may be more than 4 below m) is redone with its own max. The
      shifts then differ from the row maxima by at most 4, which adds at most 2 * 4 units of
      float rounding (x - m is rounded where the reference rounds x - max) to each value's
      relative error;
    - each row's sum is a matrix-vector product with ones (BLAS: 1.5 us against NumPy's
      6.8 us); its summation order differs by float rounding only.
    - a probability under e times the smallest normal number (float32: 3.2e-38) is 0, not
      the subnormal the reference gives (`vanishing`): the CPU computes subnormals 10-25x
      slower, and Swin's shifted windows mask scores with -100 (its masked attention 6.4 ->
      2.2 ms). Off by less than 3.2e-38.
    A NaN or +inf anywhere takes the reference path, which confines NaN to its rows as torch
    does; so does m > 1e30, where x - m could overflow for x near -3.4e38.
    """
    n = x.shape[-1] if x.ndim else 0
    if (
        x.size < SOFTMAX_FAST_MIN_ELEMENTS
        or axis is None
        or axis != x.ndim - 1
        or n < 2
        or x.dtype != y.dtype
        or x.dtype not in (np.float32, np.float64)
        or not (x.flags.c_contiguous and y.flags.c_contiguous)
        or np.may_share_memory(x, y)
    ):
        softmax_reference(x, y, axis)
        return
    x2, y2 = x.reshape(-1, n), y.reshape(-1, n)
    sums = softmax_exps(x2, y2)
    if sums is None:
        softmax_reference(x, y, axis)
    else:
        np.divide(y2, sums[:, None], y2)


@lru_cache(maxsize=16)
def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    ones = np.ones(n, dtype)
    ones.flags.writeable = False
    return ones


def softmax_exps(x2: np.ndarray, y2: np.ndarray) -> np.ndarray | None:
    """softmax's first part (see there) on 2-D C-contiguous rows, y2 not x2: y2 = exp(x2 -
    shift) (shift 0, the global max or the row's max); returns the row sums, or None (y2
    unspecified) where the reference path must run (a NaN, +inf or a max above 1e30)."""
    m = np.max(x2)
    if not m < 1e30:
        return None
    n = x2.shape[1]
    # An exp below e times the smallest normal number (float32: 3.2e-38), in a row whose sum
    # is at least 1 (shifted: n e^-4), is a probability the CPU would compute as a subnormal,
    # 10-25x slower (Swin's shifted-window mask of -100): `vanishing` makes it 0 instead.
    least = math.log(np.finfo(x2.dtype).tiny) + 1.0
    if m <= SOFTMAX_UNSHIFTED_MAX:
        if np.min(x2) < least:
            vanishing(x2, least, y2)
            np.exp(y2, y2)
        else:
            np.exp(x2, y2)
        floor = 1.0
    else:
        np.subtract(x2, m, y2)
        floor = n * math.exp(-SOFTMAX_SPREAD)
        if np.min(y2) < least + math.log(floor):
            vanishing(y2, least + math.log(floor), y2)
        np.exp(y2, y2)
    ones = _ones(n, y2.dtype)
    sums = np.matmul(y2, ones)
    if sums.min() < floor:  # (NaN cannot be here: m is finite)
        low = np.flatnonzero(sums < floor)
        rows = x2[low]
        rows -= np.maximum.reduce(rows, axis=1)[:, None]  # each row's sum is now at least 1
        if np.min(rows) < least:
            vanishing(rows, least, rows)
        np.exp(rows, rows)
        y2[low] = rows
        sums[low] = np.matmul(rows, ones)
    return sums


def vanishing(x: np.ndarray, below: float, y: np.ndarray) -> None:
    """y = x with -inf where x < below (y may be x): their exps are 0, not subnormals."""
    if y is not x:
        np.copyto(y, x)
    np.copyto(y, y.dtype.type(-np.inf), where=y < below)


@register("nn.Softmax", "F.softmax")
class Softmax(AlongDim):
    def compute(self, x: np.ndarray, y: np.ndarray, axis: int | None) -> None:
        softmax(x, y, axis)


@register("nn.Softmin", "F.softmin")
class Softmin(AlongDim):
    """softmax(-x)"""

    def compute(self, x: np.ndarray, y: np.ndarray, axis: int | None) -> None:
        softmax(-x, y, axis)


@register("nn.Softmax2d")
class Softmax2d(Softmax):
    """Softmax over the channels of (C, H, W) or (N, C, H, W): dim -3."""

    default_dim = -3

    def axis(self, ndim: int) -> int:
        if ndim not in (3, 4):
            raise self.error(f"expected a 3-D or 4-D input, got rank {ndim}")
        return ndim - 3


@register("nn.LogSoftmax", "F.log_softmax")
class LogSoftmax(AlongDim):
    """x - max - log(sum(exp(x - max)))"""

    def compute(self, x: np.ndarray, y: np.ndarray, axis: int | None) -> None:
        np.subtract(x, np.max(x, axis=axis, keepdims=True), out=y)
        y -= np.log(np.sum(np.exp(y), axis=axis, keepdims=True))


@register("nn.GLU", "F.glu")
class GLU(Layer):
    """a * sigmoid(b), where a and b are the two halves of the input along dim."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.dim = self.int_param("dim", -1)
        shape = op.inputs[0].shape if op.inputs else None
        if shape is not None:
            self.halves(shape)

    def halves(self, shape: tuple) -> int:
        """Validate and return the (normalised) axis."""
        ndim = len(shape)
        if not -ndim <= self.dim < ndim:
            raise self.error(f"dim {self.dim} is out of range for a tensor of rank {ndim}")
        axis = self.dim % ndim
        if isinstance(shape[axis], int) and shape[axis] % 2:
            raise self.error(f"GLU halves dim {self.dim}, which must have even size, got {shape[axis]}")
        return axis

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = inputs[0]
        axis = self.halves(x.shape)
        a, b = np.split(x, 2, axis=axis)
        y = output_like(a, out[0])
        sigmoid(b, y)
        np.multiply(y, a, out=y)
        return [y]


# -- no-ops at inference ----------------------------------------------------------------


@register(
    "nn.Dropout",
    "nn.Dropout2d",
    "nn.Dropout3d",
    "nn.AlphaDropout",
    "F.dropout",
    "F.dropoutnd",
    "F.dropout2d",
    "F.dropout3d",
    "F.alpha_dropout",
    "F.feature_alpha_dropout",
)
class Identity(Layer):
    """Passes input 0 through by reference: dropout does nothing at inference.

    pnnx removes these at optlevel 2 (and nn.Identity at every level); a model converted at
    optlevel 1 keeps dropout, F.dropout with its `p` and `training` as extra inputs. pnnx
    names nn.Dropout1d / F.dropout1d F.dropoutnd at optlevel 0 and F.dropout2d at 1, and
    nn.FeatureAlphaDropout F.feature_alpha_dropout.
    """

    returns_views = True

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        if not op.inputs or len(op.outputs) != 1:
            raise self.error(f"expected an input and 1 output, got {len(op.inputs)} and {len(op.outputs)}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [inputs[0]]
