"""torchvision's compiled ops (`torchvision::nms`, `torchvision::roi_align`) registered from
Python, so that torchvision's detection code runs and traces on the CPU torch wheel, whose
torchvision extension does not load (tools/torchvision_cpu.py). Dev tools and tests only.

    from tools.torchvision_ops import torchvision   # torchvision_cpu's, with the ops registered

The references (what the exports of tools/export_model_styles.py record as PyTorch's answer):
- nms: torchvision's C++ CPU kernel (csrc/ops/cpu/nms_kernel.cpp) written in torch: boxes by
  decreasing score; each kept box suppresses the later ones whose IoU with it is > threshold
  (torchvision has no Python fallback for nms).
- roi_align: torchvision's own Python fallback `_roi_align` (torchvision/ops/roi_align.py),
  which agrees with the C++ kernel for boxes inside the feature map.
"""

from __future__ import annotations

import sys

import torch

from torchvision_cpu import torchvision  # noqa: F401  (imports torchvision without its extension)


def nms_reference(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    x1, y1, x2, y2 = boxes.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = torch.sort(scores, descending=True, stable=True).indices
    suppressed = torch.zeros(len(boxes), dtype=torch.bool)
    keep = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        inter = w * h
        ovr = inter / (areas[i] + areas - inter)
        suppressed |= ovr.double() > iou_threshold
    return torch.tensor(keep, dtype=torch.int64)


def roi_align_reference(x, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    from torchvision.ops.roi_align import _roi_align

    fallback = getattr(_roi_align, "__wrapped__", _roi_align)  # without its lazy torch.compile
    return fallback(x, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)


def _has_ops() -> bool:
    return True


if not hasattr(torch.ops.torchvision, "nms"):
    _lib = torch.library.Library("torchvision", "DEF")
    _lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _lib.define(
        "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
        "int sampling_ratio, bool aligned) -> Tensor"
    )
    _lib.define("box_iou_rotated(Tensor boxes1, Tensor boxes2) -> Tensor")  # named by code TorchScript compiles
    _lib.impl("nms", nms_reference, "CPU")
    _lib.impl("roi_align", roi_align_reference, "CPU")
    import torchvision.extension

    torchvision.extension._has_ops = _has_ops
    sys.modules["torchvision.ops.roi_align"]._has_ops = _has_ops

__all__ = ["torchvision", "nms_reference", "roi_align_reference"]
