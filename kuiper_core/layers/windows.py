"""Sliding-window plumbing shared by convolution and pooling (no layers here).

- `scratch`: reusable per-thread work buffers (im2col columns, padded inputs), so a
  forward allocates nothing but its outputs.
- `pad_spatial`: pad the last two axes of an (N, C, H, W) array with a constant or by
  index tables (reflect / replicate / circular, as torch's padding modes).
- `window_view`: the (N, C, KH, KW, OH, OW) strided view of every kernel tap, no copy.
- `out_size` / `same_padding`: PyTorch's output-size and padding='same' arithmetic.
"""

from __future__ import annotations

import math
import threading
import weakref
from functools import lru_cache
from typing import Protocol

import numpy as np
from numpy.lib.stride_tricks import as_strided
from numpy.typing import DTypeLike


from ..limits import check_elements

_local = threading.local()


def scratch(slot: str, shape: tuple[int, ...], dtype: DTypeLike) -> np.ndarray:
    """A contiguous work array of `shape`, reused across calls on this thread.

    One growing buffer per (slot, dtype): the contents are garbage on return and only valid
    until the next `scratch(slot, ...)` call, so a layer must not return it or hold it.
    """
    pool: dict | None = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    n = math.prod(shape)
    key = (slot, dtype)
    buf = pool.get(key)
    if buf is None or buf.size < n:  # the limit is checked where memory is allocated
        n = check_elements(shape, f"a work buffer ({slot})")
        buf = pool[key] = np.empty(n, dtype)
        for holder in list(_holders((slot, np.dtype(dtype)))):  # their views would keep the old buffer alive
            holder.release_scratch()
    return buf[:n].reshape(shape)


class ScratchHolder(Protocol):
    def release_scratch(self) -> None: ...


def hold_scratch(slot: str, dtype: np.dtype, holder: ScratchHolder) -> None:
    """Register `holder` as keeping views of this thread's (slot, dtype) buffer across calls
    (Winograd's work arrays): when a bigger buffer replaces it, the holder is told to drop
    them (`release_scratch`) instead of keeping the old buffer alive until its next call.
    ResNet-18 at batch 4 kept 7 MB of old buffers so (peak RSS 190 -> 183 MB without)."""
    _holders((slot, np.dtype(dtype))).add(holder)


def _holders(key: tuple[str, np.dtype]) -> weakref.WeakSet:
    holders: dict | None = getattr(_local, "holders", None)
    if holders is None:
        holders = _local.holders = {}
    return holders.setdefault(key, weakref.WeakSet())


# Work-buffer slots shared by the sliding-window layers (convolution, Winograd, pooling):
# every call uses each slot at most once and holds nothing across calls, so one buffer per
# slot serves them all instead of one per layer type (ResNet-18 at batch 4: 21 -> 13 MB).
PADDED = "window.padded"  # the padded input (pad_spatial), pooling's row phases
WORK = "window.work"  # im2col columns, Winograd's work buffer, pooling's row pass
RESULT = "window.result"  # a GEMM's result before its copy to the output (im2col)

# Work buffers hold at most this many elements (16 MB of float32) unless one batch item
# needs more: bigger batches are processed in chunks (ResNet-18's stem at batch 4: two
# items at a time). Work buffers are kept per thread and count in the peak memory.
SCRATCH_BUDGET = 1 << 22


def batch_chunks(n: int, per_item: int) -> list[slice]:
    """Slices of the batch axis whose work buffers fit SCRATCH_BUDGET (at least one item each)."""
    step = max(1, SCRATCH_BUDGET // max(1, per_item))
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


def out_size(
    n: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int = 1, ceil_mode: bool = False
) -> int:
    """Output length of a window op along one axis (torch's formula, incl. ceil_mode); <= 0 if none fits."""
    room = n + pad_before + pad_after - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return room // stride + 1 if room >= 0 else 0
    out = (room + stride - 1) // stride + 1  # floor division, as torch's div_rtn
    # torch: the last window must start inside the input or the left padding.
    if (out - 1) * stride >= n + pad_before:
        out -= 1
    return out


def same_padding(kernel: int, dilation: int) -> tuple[int, int]:
    """padding='same' as torch splits it: the extra element goes after."""
    total = dilation * (kernel - 1)
    return total // 2, total - total // 2


@lru_cache(maxsize=256)
def pad_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Source index of every padded position along one axis for a non-constant padding mode."""
    i = np.arange(-before, n + after)
    if mode == "reflect":  # mirror without repeating the edge: -1 -> 1
        period = 2 * (n - 1) if n > 1 else 1
        i = np.abs(i) % period
        i = np.where(i >= n, period - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    elif mode == "circular":
        i = i % n
    else:
        raise ValueError(f"unknown padding mode {mode!r}")
    i.setflags(write=False)
    return i


def pad_spatial(
    x: np.ndarray,
    pads: tuple[int, int, int, int],
    mode: str = "zeros",
    value: float = 0.0,
    slot: str = "pad",
    slack: int = 0,
) -> np.ndarray:
    """x (N, C, H, W) padded by (top, bottom, left, right) into a scratch buffer.

    mode: 'zeros'/'constant' (fill with `value`), 'reflect', 'replicate', 'circular'.
    Returns x itself when there is nothing to pad and no `slack` is asked for; with
    `slack`, the result is a contiguous array followed in memory by `slack` more
    elements of the same buffer (zeros), for flat views that run past its end. They land
    in columns that are cropped away, but a reused buffer's leftovers there (NaN, huge
    values) would make the GEMM warn about overflow.
    """
    t, b, left, right = pads
    if t == b == left == right == 0 and not slack:
        return x
    n, c, h, w = x.shape
    shape = (n, c, h + t + b, w + left + right)
    size = check_elements(shape, "the padded input")
    flat = scratch(slot, (size + slack,), x.dtype)
    flat[size:] = 0
    dst = flat[:size].reshape(shape)
    if mode in ("zeros", "constant"):
        fill = x.dtype.type(value)
        dst[:, :, :t] = fill
        dst[:, :, t + h :] = fill
        dst[:, :, t : t + h, :left] = fill
        dst[:, :, t : t + h, left + w :] = fill
        np.copyto(dst[:, :, t : t + h, left : left + w], x)
        return dst
    rows = pad_index(h, t, b, mode)
    cols = pad_index(w, left, right, mode)
    np.take(x.take(rows, axis=2), cols, axis=3, out=dst)
    return dst


def window_view(
    xp: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out_hw: tuple[int, int],
) -> np.ndarray:
    """Read-only (N, C, KH, KW, OH, OW) view: [.., i, j, oh, ow] = xp[.., oh*sh + i*dh, ow*sw + j*dw]."""
    n, c = xp.shape[:2]
    s_n, s_c, s_h, s_w = xp.strides
    return as_strided(
        xp,
        (n, c, kernel[0], kernel[1], out_hw[0], out_hw[1]),
        (s_n, s_c, s_h * dilation[0], s_w * dilation[1], s_h * stride[0], s_w * stride[1]),
        writeable=False,
    )


def output_buffer(out: list[np.ndarray | None], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The runtime's preallocated output when it fits (shape, dtype, C-contiguous), else a new array."""
    buf = out[0] if out else None
    if buf is not None and buf.shape == shape and buf.dtype == dtype and buf.flags.c_contiguous:
        return buf
    check_elements(shape, "the output")
    return np.empty(shape, dtype)
