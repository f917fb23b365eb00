"""Every blob of an ncnn model as ncnn itself computes it (the `ncnn` Python binding), with the
ncnn options a deployment can turn on or off. Run in a child process (isolated.run_ncnn), as
the other framework references: the binding runs what the file says, on sizes it chose.

    blobs = ncnn_blobs("m.ncnn.param", "m.ncnn.bin", {"in0": chw}, options={"use_fp16_storage": True})
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# The options a deployer chooses (ncnn.Option); `baseline` turns every precision-lowering one
# off, so each can be switched on alone.
PRECISION_OPTIONS = (
    "use_fp16_storage",
    "use_fp16_arithmetic",
    "use_fp16_packed",
    "use_bf16_storage",
)
ALGORITHM_OPTIONS = (
    "use_packing_layout",
    "use_winograd_convolution",
    "use_winograd23_convolution",
    "use_winograd43_convolution",
    "use_winograd63_convolution",
    "use_sgemm_convolution",
)
OPTIONS = PRECISION_OPTIONS + ALGORITHM_OPTIONS
BASELINE: dict[str, bool] = {o: False for o in OPTIONS}


def ncnn_version() -> str:
    import ncnn

    return str(getattr(ncnn, "__version__", "?"))


def ncnn_blobs(
    param: str | Path,
    bin_path: str | Path,
    inputs: dict[str, np.ndarray],
    blobs: list[str],
    options: dict[str, bool] | None = None,
) -> dict[str, np.ndarray]:
    """Each of `blobs` (names) extracted from one ncnn run on `inputs`, with ncnn's options as
    BASELINE updated by `options`, or ncnn's own defaults for this CPU when `options` is None
    (one thread: the same order of sums on every run)."""
    import ncnn

    net = ncnn.Net()
    opt: Any = net.opt
    opt.use_vulkan_compute = False
    opt.num_threads = 1
    if options is not None:
        for name, value in {**BASELINE, **options}.items():
            setattr(opt, name, bool(value))
    if net.load_param(str(param)) != 0:
        raise ValueError(f"ncnn could not read {param}")
    if net.load_model(str(bin_path)) != 0:
        raise ValueError(f"ncnn could not read {bin_path}")
    ex = net.create_extractor()
    for name, given in inputs.items():
        # a Mat made from an array only points at it (no refcount): in-place layers (ReLU,
        # LayerNorm…) then write through the pointer and crash; a clone owns its data
        array = np.ascontiguousarray(given, np.float32)
        ex.input(name, ncnn.Mat(array).clone())
    out: dict[str, np.ndarray] = {}
    for name in blobs:
        status, mat = ex.extract(name)
        if status != 0:
            raise ValueError(f"ncnn could not compute blob {name!r} (status {status})")
        out[name] = _shaped(mat)
        del mat
    del ex  # the extractor's blobs go back to the net's allocators before the net goes
    return out


def _shaped(mat: Any) -> np.ndarray:
    """A Mat as a NumPy array of its dims, outermost first ((c, h, w); (c, d, h, w) for 4-D)."""
    a = np.array(mat, dtype=np.float32, copy=True)
    dims = {1: (mat.w,), 2: (mat.h, mat.w), 3: (mat.c, mat.h, mat.w), 4: (mat.c, mat.d, mat.h, mat.w)}[mat.dims]
    return a.reshape(dims)
