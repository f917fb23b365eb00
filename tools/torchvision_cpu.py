"""Import torchvision's model definitions on the CPU torch wheel (dev tools and tests only).

torchvision 0.28.0 (installed with --no-deps beside torch 2.13.0+cpu) ships a compiled extension
built against another torch: importing it fails with "operator torchvision::nms does not exist",
raised while `torchvision._meta_registrations` registers fake kernels for the extension's ops.
Skipping that module keeps the extension's ops unregistered (torchvision.extension._has_ops() is
False: `torchvision.ops.nms`/`roi_align` need a reference of their own) and every model
definition importable:

    from tools.torchvision_cpu import torchvision
    model = torchvision.models.resnet18().eval()
"""

from __future__ import annotations

import sys
import types

if "torchvision" not in sys.modules:
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))

import torchvision  # noqa: E402

__all__ = ["torchvision"]
