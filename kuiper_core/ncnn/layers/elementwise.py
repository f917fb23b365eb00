"""ncnn's elementwise layers and normalisations: activations, UnaryOp, BinaryOp, Eltwise,
Split/Dropout/Noop, BatchNorm, LayerNorm and Softmax. A blob's first dim is its channel."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...layers.activation import gelu_reference, sigmoid, softmax_reference
from .base import F32, NcnnLayer, axis_of, hardswish, mish, ncnn_layer

Fn = Callable[[np.ndarray], np.ndarray]


class Pointwise(NcnnLayer):
    """y = f(x) elementwise; subclasses set `f` in setup."""

    f: Fn

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [np.asarray(self.f(np.asarray(inputs[0], F32)), F32)]


@ncnn_layer("ReLU")
class ReLU(Pointwise):
    def setup(self) -> None:
        slope = F32(self.p.number("slope"))
        self.f = (lambda x: np.maximum(x, F32(0))) if slope == 0 else (lambda x: np.where(x < 0, x * slope, x))


@ncnn_layer("Clip")
class Clip(Pointwise):
    def setup(self) -> None:
        lo, hi = F32(self.p.number("min")), F32(self.p.number("max"))
        self.f = lambda x: np.clip(x, lo, hi)


@ncnn_layer("HardSwish", "HardSigmoid")
class Hard(Pointwise):
    """HardSwish x * clip(alpha x + beta, 0, 1); HardSigmoid clip(alpha x + beta, 0, 1)."""

    def setup(self) -> None:
        a, b = F32(self.p.number("alpha")), F32(self.p.number("beta"))
        if self.ncnn_type == "HardSwish":
            self.f = lambda x: hardswish(x, a, b)
        else:
            self.f = lambda x: np.clip(x * a + b, F32(0), F32(1))


@ncnn_layer("Sigmoid", "Swish", "Mish", "TanH", "GELU", "ELU", "SELU", "Softplus")
class Activation(Pointwise):
    def setup(self) -> None:
        t = self.ncnn_type
        if t == "Sigmoid":
            self.f = lambda x: sigmoid(x, np.empty_like(x))
        elif t == "Swish":
            self.f = lambda x: x * sigmoid(x, np.empty_like(x))
        elif t == "Mish":
            self.f = mish
        elif t == "TanH":
            self.f = np.tanh
        elif t == "ELU":
            alpha = F32(self.p.number("alpha"))
            self.f = lambda x: np.where(x < 0, alpha * np.expm1(np.minimum(x, 0)), x)
        elif t == "SELU":
            alpha, scale = F32(self.p.number("alpha")), F32(self.p.number("lambda"))
            self.f = lambda x: scale * np.where(x < 0, alpha * np.expm1(np.minimum(x, 0)), x)
        elif t == "Softplus":
            self.f = lambda x: np.logaddexp(x, F32(0))  # log(1 + e^x) without overflow
        elif self.p.integer("fast_gelu"):
            c = F32(np.sqrt(2 / np.pi))
            self.f = lambda x: F32(0.5) * x * (F32(1) + np.tanh(c * (x + F32(0.044715) * x**3)))
        else:
            self.f = _gelu


def _gelu(x: np.ndarray) -> np.ndarray:
    y = np.empty_like(x)
    gelu_reference(x, y)
    return y


@ncnn_layer("PReLU")
class PReLU(Pointwise):
    """Slopes per channel (the first dim), or one for all (0=num_slope 1)."""

    def setup(self) -> None:
        self.slope = self.w("slope")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        s = self.slope
        if s.size > 1:
            if x.shape[0] != s.size:
                raise self.error(f"{s.size} slopes for a blob of {x.shape[0]} channels")
            s = s.reshape((-1,) + (1,) * (x.ndim - 1))
        return [np.where(x < 0, x * s, x)]


UNARY: dict[int, tuple[str, Fn]] = {
    0: ("abs", np.abs),
    1: ("neg", np.negative),
    2: ("floor", np.floor),
    3: ("ceil", np.ceil),
    4: ("square", np.square),
    5: ("sqrt", np.sqrt),
    6: ("rsqrt", lambda x: F32(1) / np.sqrt(x)),
    7: ("exp", np.exp),
    8: ("log", np.log),
    9: ("sin", np.sin),
    10: ("cos", np.cos),
    11: ("tan", np.tan),
    12: ("asin", np.arcsin),
    13: ("acos", np.arccos),
    14: ("atan", np.arctan),
    15: ("reciprocal", lambda x: F32(1) / x),
    16: ("tanh", np.tanh),
    17: ("log10", np.log10),
    18: ("round", np.rint),
    19: ("trunc", np.trunc),
}


@ncnn_layer("UnaryOp")
class UnaryOp(Pointwise):
    def setup(self) -> None:
        op = self.p.integer("op_type")
        if op not in UNARY:
            raise ValueError(f"param 0 (op_type) must be 0..{len(UNARY) - 1}, got {op}")
        fn = UNARY[op][1]
        self.f = lambda x: _quiet(fn, x)


def _quiet(fn: Fn, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):  # sqrt(-1) is NaN in ncnn too
        return fn(x)


BINARY: dict[int, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    0: ("add", np.add),
    1: ("sub", np.subtract),
    2: ("mul", np.multiply),
    3: ("div", np.divide),
    4: ("max", np.maximum),
    5: ("min", np.minimum),
    6: ("pow", np.power),
    7: ("rsub", lambda a, b: b - a),
    8: ("rdiv", lambda a, b: b / a),
    9: ("rpow", lambda a, b: np.power(b, a)),
    10: ("atan2", np.arctan2),
    11: ("ratan2", lambda a, b: np.arctan2(b, a)),
}


def broadcast_b(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """ncnn's broadcast of the lower-rank b against a: a 1-D b as long as a's channels (its
    first dim) runs along the channels (ncnn's per-channel rule, first even where the last dim
    is as long: an SE block's scale on a square map of as many channels); else a 1-D b as long
    as a's last dim, or of one value, runs along the rows (NumPy's rule). None for other
    rank mismatches: ncnn lines those up its own way (a (4, 7, 9) and a (7, 9) blob give
    (7, 9, 9) in ncnn 1.0.20261020), which pnnx never writes (it reshapes to equal ranks)."""
    if b.ndim == a.ndim:
        return b
    if b.ndim == 1 and b.shape[0] == a.shape[0] and b.shape[0] != 1:
        return b.reshape((-1,) + (1,) * (a.ndim - 1))
    if b.ndim == 1 and b.shape[0] in (1, a.shape[-1]) or b.ndim == 0:
        return b
    return None


@ncnn_layer("BinaryOp")
class BinaryOp(NcnnLayer):
    """0=op_type (add sub mul div max min pow rsub rdiv rpow atan2 ratan2), 1=with_scalar:
    one blob and 2=b, else two blobs broadcast (broadcast_b)."""

    n_inputs = None

    def setup(self) -> None:
        op = self.p.integer("op_type")
        if op not in BINARY:
            raise ValueError(f"param 0 (op_type) must be 0..{len(BINARY) - 1}, got {op}")
        self.fn = BINARY[op][1]
        self.scalar = bool(self.p.integer("with_scalar"))
        want = 1 if self.scalar else 2
        if len(self.op.inputs) != want:
            raise ValueError(
                f"expected {want} bottom blob(s) with with_scalar={int(self.scalar)}, got {len(self.op.inputs)}"
            )
        self.b = F32(self.p.number("b"))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        a = np.asarray(inputs[0], F32)
        if self.scalar:
            b: np.ndarray = np.asarray(self.b)
        else:
            b = np.asarray(inputs[1], F32)
            lined = broadcast_b(a, b) if a.ndim >= b.ndim else broadcast_b(b, a)
            if lined is None:
                raise self.error(
                    f"blobs of shapes {a.shape} and {b.shape}: ncnn's broadcast of blobs of different ranks "
                    "is only per channel or per row (a 1-D blob); expected equal ranks"
                )
            if a.ndim >= b.ndim:
                b = lined
            else:
                a = lined
        with np.errstate(all="ignore"):
            try:
                return [np.asarray(self.fn(a, b), F32)]
            except ValueError:
                raise self.error(f"blobs of shapes {a.shape} and {b.shape} do not broadcast") from None


@ncnn_layer("Eltwise")
class Eltwise(NcnnLayer):
    """0=op_type (0 prod, 1 sum with 1=coeffs per blob, 2 max) over blobs of one shape."""

    n_inputs = None

    def setup(self) -> None:
        self.kind = self.p.integer("op_type")
        self.coeffs = self.p.numbers("coeffs")
        if self.kind not in (0, 1, 2):
            raise ValueError(f"param 0 (op_type) must be 0 (prod), 1 (sum) or 2 (max), got {self.kind}")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        xs = [np.asarray(v, F32) for v in inputs]
        if any(x.shape != xs[0].shape for x in xs):
            raise self.error(f"expected blobs of one shape, got {[x.shape for x in xs]}")
        if self.kind == 1 and self.coeffs:
            if len(self.coeffs) != len(xs):
                raise self.error(f"{len(self.coeffs)} coeffs for {len(xs)} blobs")
            y = xs[0] * F32(self.coeffs[0])
            for x, c in zip(xs[1:], self.coeffs[1:]):
                y = y + x * F32(c)
            return [y]
        fn = {0: np.multiply, 1: np.add, 2: np.maximum}[self.kind]
        y = xs[0]
        for x in xs[1:]:
            y = fn(y, x)
        return [np.array(y, F32)]


@ncnn_layer("Split", "Noop")
class Split(NcnnLayer):
    """The bottom blob to every top blob (ncnn shares it; pnnx inserts one per fan-out)."""

    returns_views = True
    n_inputs = None

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        return [inputs[0]] * len(self.op.outputs) if inputs else []


@ncnn_layer("Dropout")
class Dropout(Pointwise):
    def setup(self) -> None:
        scale = F32(self.p.number("scale"))
        self.f = (lambda x: x) if scale == 1 else (lambda x: x * scale)


@ncnn_layer("BatchNorm")
class BatchNorm(NcnnLayer):
    """(x - mean) / sqrt(var + eps) * slope + bias along the channels (the first dim)."""

    def setup(self) -> None:
        eps = F32(self.p.number("eps"))
        slope, mean, var, bias = (self.w(n) for n in ("slope", "mean", "var", "bias"))
        self.a = slope / np.sqrt(var + eps)
        self.b = bias - mean * self.a

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        if x.shape[0] != self.a.size:
            raise self.error(f"{self.a.size} channels in the weights, {x.shape[0]} in the blob {x.shape}")
        shape = (-1,) + (1,) * (x.ndim - 1)
        return [x * self.a.reshape(shape) + self.b.reshape(shape)]


@ncnn_layer("LayerNorm")
class LayerNorm(NcnnLayer):
    """Normalises over the last dims whose sizes multiply to 0=affine_size (w, or h*w), eps 1=;
    2=affine: then gamma and beta."""

    def setup(self) -> None:
        self.size = self.p.integer("affine_size")
        self.eps = F32(self.p.number("eps"))
        self.gamma = self.w("gamma") if self.p.integer("affine") else None
        self.beta = self.w("beta") if self.p.integer("affine") else None

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        n, tail = 1, 0
        while n < self.size and tail < x.ndim:
            tail += 1
            n *= x.shape[-tail]
        if n != self.size:
            raise self.error(f"affine_size {self.size} is not the size of the last dims of the blob {x.shape}")
        y = _normalized(x, tuple(range(x.ndim - tail, x.ndim)), self.eps)
        if self.gamma is not None and self.beta is not None:
            y = y * self.gamma.reshape(x.shape[-tail:]) + self.beta.reshape(x.shape[-tail:])
        return [y.astype(F32)]


def _normalized(x: np.ndarray, axes: tuple[int, ...], eps: np.float32) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over `axes`, as ncnn's norm layers write it."""
    mean = x.mean(axis=axes, keepdims=True)
    var = np.square(x - mean).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


@ncnn_layer("GroupNorm", "InstanceNorm")
class ChannelGroupNorm(NcnnLayer):
    """GroupNorm: 0=group, 1=channels, 2=eps, 3=affine; InstanceNorm: 0=channels, 1=eps,
    2=affine (one group per channel). Channels are the blob's first dim; gamma/beta per channel."""

    def setup(self) -> None:
        self.channels = self.p.integer("channels")
        self.groups = self.p.integer("group") if self.ncnn_type == "GroupNorm" else self.channels
        if self.groups < 1 or self.channels % self.groups:
            raise ValueError(f"channels {self.channels} is not a multiple of group {self.groups}")
        self.eps = F32(self.p.number("eps"))
        self.affine = bool(self.p.integer("affine"))

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        if x.shape[0] != self.channels:
            raise self.error(f"expected {self.channels} channels (the blob's first dim), got shape {x.shape}")
        grouped = x.reshape(self.groups, -1)
        y = _normalized(grouped, (1,), self.eps).reshape(x.shape)
        if self.affine:
            at = (self.channels,) + (1,) * (x.ndim - 1)
            y = y * self.w("gamma").reshape(at) + self.w("beta").reshape(at)
        return [y.astype(F32)]


@ncnn_layer("Softmax")
class Softmax(NcnnLayer):
    """Along 0=axis (counted over the blob's dims; 1=fixbug0 must be 1, as pnnx writes)."""

    def setup(self) -> None:
        self.axis = self.p.integer("axis")
        if not self.p.integer("fixbug0"):
            raise ValueError("param 1 (fixbug0) = 0: ncnn's legacy axis numbering is not supported (pnnx writes 1=1)")

    def forward(self, inputs: list[np.ndarray], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0], F32)
        try:
            axis = axis_of(self.axis, x.ndim)
        except ValueError as e:
            raise self.error(str(e)) from None
        y = np.empty_like(x)
        softmax_reference(x, y, axis)
        return [y]
