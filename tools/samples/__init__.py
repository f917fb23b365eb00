"""The bundled sample models: plain-torch definitions exported by tools/export_samples.py.

Each module here defines `SAMPLES = {name: Sample(...)}`; `all_samples()` merges them in a
fixed order (the order of sample_models/models.json). A Sample's `build()` returns the torch
module (weights set, in eval mode) and its single example input; `meta` is the models.json
entry except the fields the exporter measures itself (operators, file sizes).
"""

from __future__ import annotations

import importlib

from .common import Sample

_MODULES = ["digits", "resnet", "mobilenet", "unet", "yolo", "vit", "expr_zoo", "deep"]


def all_samples() -> dict[str, Sample]:
    samples: dict[str, Sample] = {}
    for mod_name in _MODULES:
        mod = importlib.import_module(f"{__name__}.{mod_name}")
        samples.update(mod.SAMPLES)
    return samples


__all__ = ["Sample", "all_samples"]
