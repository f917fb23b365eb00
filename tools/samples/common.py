"""Pieces the sample definitions share: the Sample record and BatchNorm calibration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import torch
import torch.nn as nn

# Preprocessing of an RGB picture for the randomly initialised ImageNet-style models.
IMAGENET_PREPROCESS = {
    "text": "RGB, resize to the input size, scale to 0..1, subtract mean and divide by std per channel",
    "mode": "RGB",
    "invert": False,
    "resample": "bilinear",
    "mean": [0.485, 0.456, 0.406],
    "std": [0.229, 0.224, 0.225],
}


@dataclass
class Sample:
    """One bundled model: how to build it and what models.json says about it."""

    build: Callable[[], tuple[nn.Module, torch.Tensor]]
    meta: dict[str, Any]
    capture_operands: bool = True
    extras: Callable[[str], dict[str, Any]] | None = field(default=None)
    """Optional hook writing extra files (e.g. example inputs); gets the output folder."""


def randomize_batchnorm(
    module: nn.Module, batches: int = 3, batch_size: int = 4, input_shape: tuple[int, ...] = (3, 32, 32)
) -> None:
    """Give every BatchNorm non-trivial affine weights and realistic running statistics.

    Random gamma/beta first, then a few train-mode passes over random data with a
    cumulative average (momentum=None), so that eval-mode activations stay in a sane
    range and folding BN into the convolutions actually changes the weights.
    """
    bns = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
            bn.reset_running_stats()
            bn.momentum = None
        module.train()
        for _ in range(batches):
            module(torch.randn(batch_size, *input_shape))
        for bn in bns:
            bn.momentum = 0.1
    module.eval()
