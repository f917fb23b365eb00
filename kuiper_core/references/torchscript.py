"""The outputs of a TorchScript module as PyTorch computes them (needs torch)."""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .pnnx_py import flatten


def torchscript_outputs(
    source: str | Path | bytes, inputs: Sequence[np.ndarray], *, isolated: bool = True, timeout: float | None = None
) -> list[np.ndarray]:
    """Run the saved TorchScript module on `inputs`; its outputs flattened in order.
    isolated (the default): in a child process under memory and time limits (isolated.py):
    a TorchScript file's code runs whatever sizes and operators it chose."""
    if isolated:
        from .isolated import run_torchscript

        return run_torchscript(source, [np.asarray(x) for x in inputs], timeout)
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.load's deprecation notice: TorchScript is what we were given
        module = torch.jit.load(io.BytesIO(source) if isinstance(source, bytes) else str(source), map_location="cpu")
    module.eval()
    with torch.no_grad():
        result = module(*[torch.from_numpy(np.ascontiguousarray(x)) for x in inputs])
    return [np.asarray(y.detach().cpu().numpy()) for y in flatten(result) if isinstance(y, torch.Tensor)]


def torch_version() -> str:
    import torch

    return str(torch.__version__)


__all__ = ["torchscript_outputs", "torch_version"]
