"""Spectrograms: ONNX's STFT (kept by pnnx as an ONNX node) and torch.stft (from TorchScript),
with torch.view_as_real / view_as_complex, which pnnx writes beside torch.stft's complex output.

Both cut the signal into frames `hop` apart, multiply each by the window and take its
discrete Fourier transform (NumPy's FFT, in float64, then the output dtype). They differ in
their edges: ONNX's STFT takes only whole frames of the signal as given; torch.stft with
center=True first pads n_fft/2 on both sides (pad_mode), centres a window shorter than n_fft
in it, and can normalise by 1/sqrt(n_fft). ONNX returns (batch, frames, bins, 2) real/imag
pairs, torch (batch, bins, frames) complex numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Operator
from ._onnx import expect_inputs, inputs_constant, scalar_of
from .registry import Layer, register


def frames_spectrum(signal: np.ndarray, length: int, hop: int, window: np.ndarray | None, onesided: bool) -> np.ndarray:
    """(batch, n) real or complex -> (batch, frames, bins) complex128: the DFT of each frame of
    `length` entries, `hop` apart, times the window."""
    frames = np.lib.stride_tricks.sliding_window_view(signal, length, axis=-1)[:, ::hop, :]
    if window is not None:
        frames = frames * window
    return np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)


@register("STFT")
class OnnxSTFT(Layer):
    """`STFT(signal, frame_step, window, frame_length; onesided=1)`: signal (batch, length, 1)
    real or (…, 2) complex -> (batch, frames, bins, 2), frames = 1 + (length - frame_length) //
    frame_step, bins = frame_length // 2 + 1 when onesided. pnnx drops an omitted window or
    frame_length: a 1-D input after frame_step is the window, a scalar the frame_length."""

    @classmethod
    def shape_follows_values(cls, op: Operator) -> bool:
        return not inputs_constant(op)

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.onesided = bool(self.int_param("onesided", 1))
        expect_inputs(self, "signal, frame_step, window, frame_length", 2, 4)

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        hop = int(scalar_of(self, inputs[1], "frame_step"))
        window, length = None, None
        for v in inputs[2:]:
            arr = np.asarray(v)
            if arr.ndim == 1 and arr.size > 1 and window is None:
                window = arr
            else:
                length = int(scalar_of(self, arr, "frame_length"))
        if x.ndim == 2:  # (batch, length): a real signal without its last axis
            x = x[..., None]
        if x.ndim != 3 or x.shape[2] not in (1, 2):
            raise self.error(f"signal must be (batch, length, 1) real or (batch, length, 2) complex, got {x.shape}")
        length = length if length is not None else (window.size if window is not None else None)
        if length is None:
            raise self.error("needs a window or a frame_length")
        if window is not None and window.size != length:
            raise self.error(f"window has {window.size} entries, frame_length is {length}")
        if hop < 1 or not 1 <= length <= x.shape[1]:
            raise self.error(f"expected frame_step >= 1 and 1 <= frame_length <= {x.shape[1]}, got {hop}, {length}")
        complex_in = x.shape[2] == 2
        if complex_in and self.onesided:
            raise self.error("onesided=1 needs a real signal (last dim 1), got a complex one")
        signal = x[..., 0] + 1j * x[..., 1] if complex_in else x[..., 0].astype(np.float64)
        spectrum = frames_spectrum(signal, length, hop, window, self.onesided)
        return [np.stack([spectrum.real, spectrum.imag], axis=-1).astype(x.dtype)]


_PAD_MODES = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


@register("torch.stft")
class TorchSTFT(Layer):
    """`torch.stft(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
    onesided, return_complex)`: x (length) or (batch, length) -> (batch?, bins, frames), complex
    (or real/imag pairs in a last dim of 2 with return_complex=False). The window is an input
    (`$window`) or absent (a rectangle of win_length ones)."""

    def __init__(self, op: Operator) -> None:
        super().__init__(op)
        self.n_fft = self.int_param("n_fft", low=1)
        hop = self.param("hop_length", None)
        self.hop = self.n_fft // 4 if hop is None else self.int_param("hop_length", low=1)
        win = self.param("win_length", None)
        self.win_length = self.n_fft if win is None else self.int_param("win_length", low=1, high=self.n_fft)
        self.center = bool(self.param("center", True))
        mode = self.param("pad_mode", "reflect")
        if mode not in _PAD_MODES:
            raise self.error(f"pad_mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
        self.pad_mode: Any = _PAD_MODES[str(mode)]  # np.pad's name of it
        self.normalized = bool(self.param("normalized", False))
        onesided = self.param("onesided", None)
        self.onesided = True if onesided is None else bool(onesided)
        self.return_complex = bool(self.param("return_complex", True))
        self.window_input = 1 if len(op.inputs) > 1 else None
        expect_inputs(self, "input, window", 1, 2)

    def _window(self, inputs: list[Any], dtype: np.dtype) -> np.ndarray:
        if self.window_input is None:
            w = np.ones(self.win_length, dtype)
        else:
            w = np.asarray(inputs[self.window_input])
            if w.shape != (self.win_length,):
                raise self.error(f"window must have win_length={self.win_length} entries, got shape {w.shape}")
        left = (self.n_fft - self.win_length) // 2  # a shorter window sits in the middle of n_fft
        return np.pad(w, (left, self.n_fft - self.win_length - left))

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if x.ndim not in (1, 2):
            raise self.error(f"expected a 1-D or 2-D signal, got shape {x.shape}")
        signal = x.reshape(-1, x.shape[-1]).astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        if self.center:
            half = self.n_fft // 2
            if self.pad_mode == "reflect" and signal.shape[-1] <= half:
                raise self.error(f"reflect padding of {half} needs a signal longer than that, got {signal.shape[-1]}")
            signal = np.pad(signal, ((0, 0), (half, half)), mode=self.pad_mode)
        if signal.shape[-1] < self.n_fft:
            raise self.error(f"a signal of {signal.shape[-1]} entries is shorter than n_fft={self.n_fft}")
        onesided = self.onesided and x.dtype.kind != "c"
        spectrum = frames_spectrum(signal, self.n_fft, self.hop, self._window(inputs, np.dtype(np.float64)), onesided)
        if self.normalized:
            spectrum = spectrum / np.sqrt(self.n_fft)
        y = spectrum.transpose(0, 2, 1)  # (batch, bins, frames)
        y = y.reshape(x.shape[:-1] + y.shape[1:])
        complex_dtype = np.complex128 if x.dtype == np.float64 or x.dtype == np.complex128 else np.complex64
        if self.return_complex:
            return [np.ascontiguousarray(y, dtype=complex_dtype)]
        return [
            np.stack([y.real, y.imag], axis=-1).astype(np.float64 if complex_dtype == np.complex128 else np.float32)
        ]


@register("torch.view_as_real")
class ViewAsReal(Layer):
    """Complex (…) -> real (…, 2): the real and imaginary parts side by side."""

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        z = np.asarray(inputs[0])
        if z.dtype.kind != "c":
            raise self.error(f"expected a complex input, got {z.dtype}")
        return [np.stack([z.real, z.imag], axis=-1)]


@register("torch.view_as_complex")
class ViewAsComplex(Layer):
    """Real (…, 2) -> complex (…)."""

    def forward(self, inputs: list[Any], out: list[np.ndarray | None]) -> list[np.ndarray]:
        x = np.asarray(inputs[0])
        if x.dtype.kind != "f" or x.ndim == 0 or x.shape[-1] != 2:
            raise self.error(f"expected a float input whose last dim is 2, got {x.dtype} {x.shape}")
        dtype = np.complex128 if x.dtype == np.float64 else np.complex64
        return [(x[..., 0] + 1j * x[..., 1]).astype(dtype)]
