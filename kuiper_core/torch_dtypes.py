"""Torch dtype names as pnnx prints them (`dtype=torch.long`, `torch.float(x)`) -> NumPy dtypes.

One table for the layers' `dtype=` params (layers/torch_args.py) and the casts inside a
pnnx.Expression (expression/functions.py). Both spellings of each dtype appear in pnnx output.
"""

from __future__ import annotations

import numpy as np

TORCH_DTYPES: dict[str, np.dtype] = {
    "torch.float": np.dtype(np.float32),
    "torch.float32": np.dtype(np.float32),
    "torch.double": np.dtype(np.float64),
    "torch.float64": np.dtype(np.float64),
    "torch.half": np.dtype(np.float16),
    "torch.float16": np.dtype(np.float16),
    "torch.long": np.dtype(np.int64),
    "torch.int64": np.dtype(np.int64),
    "torch.int": np.dtype(np.int32),
    "torch.int32": np.dtype(np.int32),
    "torch.short": np.dtype(np.int16),
    "torch.int16": np.dtype(np.int16),
    "torch.int8": np.dtype(np.int8),
    "torch.uint8": np.dtype(np.uint8),
    "torch.bool": np.dtype(np.bool_),
    "torch.complex64": np.dtype(np.complex64),
    "torch.cfloat": np.dtype(np.complex64),
    "torch.complex128": np.dtype(np.complex128),
    "torch.cdouble": np.dtype(np.complex128),
}
