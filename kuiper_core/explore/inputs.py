"""Input tensors for a model: synthetic ones (seeded random, zeros, ones) and pictures.

Decoding and resizing a picture needs an image library, which the engine does not depend
on; the app does that (Pillow) and hands the resized pixels here, where the NumPy part of
the bundled models' preprocessing happens: invert, scale to 0..1, per-channel mean/std,
HWC -> NCHW float32.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import InputError
from ..graph import FIXED_INPUT_PARAM, Graph, format_shape, numpy_dtype
from ..limits import check_elements

INPUT_KINDS = ("sample", "random", "zeros", "ones", "npy", "image")
FREE_DIM_DEFAULT = 32  # size of an open (`?`) input dim other than the batch, unless chosen


def input_specs(
    graph: Graph,
    fallback_shape: Sequence[int] | None = None,
    sizes: Mapping[str, Mapping[int, int]] | None = None,
    declared: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
) -> list[tuple[str, tuple[int, ...], str]]:
    """(operand name, static shape, dtype name) of every model input; `declared`: (shape, dtype)
    known from elsewhere for an input the file declares none of (pnnx writes no shape for a 0-d one).

    Unknown dims (`?` or `%name`: a dynamic-shape export, pnnx's inputshape2) take the size
    chosen in `sizes` (operand name -> {dim: size}, see `free_dims`), else the one of
    `fallback_shape` (the models.json shape) when the ranks agree, else 1 for the batch
    (dim 0) and FREE_DIM_DEFAULT for the others (a size of 1 is too small for most
    convolutional nets: a 2x2 pool of a 1x1 map fails).
    """
    specs = []
    for op in graph.inputs:
        operand = op.outputs[0]
        shape = operand.shape
        if shape is None and declared and operand.name in declared:
            specs.append((operand.name, *declared[operand.name]))
            continue
        if shape is None:
            if fallback_shape is None:
                raise InputError(f"input '{operand.name}' has no declared shape: upload a .npy instead")
            dims = tuple(int(d) for d in fallback_shape)
        else:
            fb = list(fallback_shape) if fallback_shape is not None and len(fallback_shape) == len(shape) else None
            chosen = (sizes or {}).get(operand.name, {})
            dims = tuple(
                d if isinstance(d, int) else int(chosen.get(i) or (fb[i] if fb else 1 if i == 0 else FREE_DIM_DEFAULT))
                for i, d in enumerate(shape)
            )
            if any(n < 1 for n in dims):
                raise InputError(f"input '{operand.name}': sizes must be >= 1, got {dims}")
        specs.append((operand.name, dims, operand.dtype or "f32"))
    return specs


def free_dims(graph: Graph) -> list[tuple[str, int]]:
    """(input operand name, dim) of every input dim the file leaves open (`?` or `%name`):
    a model exported with dynamic shapes runs at any size there."""
    return [
        (op.outputs[0].name, i)
        for op in graph.inputs
        for i, d in enumerate(op.outputs[0].shape or ())
        if not isinstance(d, int)
    ]


def fixed_values(graph: Graph) -> dict[str, np.ndarray]:
    """Input operand name -> the one value its file was converted for (a pnnx.Input's `value=`,
    formats/onnx_given.py), of the declared dtype: made-up inputs use it (the engine refuses others)."""
    fixed = {}
    for op in graph.inputs:
        operand = op.outputs[0]
        if FIXED_INPUT_PARAM in op.params:
            a = np.asarray(op.params[FIXED_INPUT_PARAM], dtype=numpy_dtype(operand.dtype or "i64"))
            shape = operand.static_shape
            fixed[operand.name] = a.reshape(shape) if shape is not None and a.size == int(np.prod(shape)) else a
    return fixed


def synthetic_input(kind: str, shape: Sequence[int], dtype: str = "f32", seed: int = 0) -> np.ndarray:
    """'random' (standard normal, seeded; integers in 0..9 for integer dtypes), 'zeros' or 'ones'."""
    dt = numpy_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    check_elements(shape, f"a {kind} input")  # a 3-line file may declare a (1,3,16000,16000) input
    if kind == "zeros":
        return np.zeros(shape, dt)
    if kind == "ones":
        return np.ones(shape, dt)
    if kind == "random":
        rng = np.random.default_rng(seed)
        if dt.kind in "iu":
            return rng.integers(0, 10, size=shape).astype(dt)
        if dt.kind == "b":
            return rng.random(shape) < 0.5
        return rng.standard_normal(shape).astype(dt)
    raise InputError(f"unknown synthetic input kind {kind!r}: expected random, zeros or ones")


def image_to_input(pixels: np.ndarray, preprocess: Mapping[str, Any] | None, shape: Sequence[int]) -> np.ndarray:
    """Resized uint8 pixels (H, W) or (H, W, C) -> a float32 NCHW tensor of `shape`.

    preprocess (models.json): invert (255 - p), then p/255, then (p - mean[c]) / std[c].
    """
    if len(shape) != 4:
        raise InputError(
            f"a picture can only feed a 4-D NCHW input, this model's input is {format_shape(tuple(shape))}"
        )
    n, c, h, w = (int(d) for d in shape)
    px = np.asarray(pixels)
    if px.ndim == 2:
        px = px[:, :, None]
    if px.ndim != 3 or px.shape[:2] != (h, w):
        raise InputError(f"picture has shape {px.shape}, expected {h}x{w} pixels")
    if px.shape[2] != c:
        raise InputError(f"picture has {px.shape[2]} channel(s), the model takes {c}")
    pp = dict(preprocess or {})
    x = px.astype(np.float32)
    if pp.get("invert"):
        x = np.float32(255.0) - x
    x = x / np.float32(255.0)
    mean = np.asarray(pp.get("mean", [0.0]), np.float32).reshape(1, 1, -1)
    std = np.asarray(pp.get("std", [1.0]), np.float32).reshape(1, 1, -1)
    x = (x - mean) / std
    chw = np.ascontiguousarray(x.transpose(2, 0, 1), dtype=np.float32)
    return np.broadcast_to(chw, (n, c, h, w)).copy()


def check_array(array: np.ndarray, shape: Sequence[int], name: str) -> np.ndarray:
    """An uploaded array must be numbers of the input's shape (batch may differ, not be 0)."""
    a = np.asarray(array)
    if a.dtype.kind not in "biufc" or a.dtype.fields is not None:
        raise InputError(f"uploaded array for input '{name}' has dtype {a.dtype}: expected numbers")
    if a.ndim != len(shape) or tuple(a.shape[1:]) != tuple(shape[1:]):
        raise InputError(
            f"uploaded array for input '{name}' has shape {format_shape(a.shape)}, expected {format_shape(tuple(shape))} "
            "(batch may vary)"
        )
    if a.ndim and a.shape[0] == 0:
        raise InputError(f"uploaded array for input '{name}' has batch 0 (shape {a.shape}): it needs at least one item")
    return a
