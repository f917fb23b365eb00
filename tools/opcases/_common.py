"""Wrappers shared by the case families (not a family: export_opcases.py skips modules named _*).

pnnx traces a module, and a Sequential at top level breaks the Python it generates, so a
case's layer or function is wrapped in one of these.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import torch.nn as nn


class Wrap(nn.Module):
    """One module applied to the input."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)


class Fn(nn.Module):
    """forward(*xs) = fn(*xs, *args, **kwargs): a function of the inputs, optionally with fixed
    trailing arguments (e.g. Fn(F.max_pool2d, 3, 2, ceil_mode=True))."""

    def __init__(self, fn: Callable, *args: Any, **kwargs: Any):
        super().__init__()
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def forward(self, *xs):
        return self.fn(*xs, *self.args, **self.kwargs)
