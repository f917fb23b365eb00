"""A YOLOv5-style detector shrunk to 128x128: Conv(conv+BN+SiLU), C3, SPPF, FPN/PAN neck, Detect."""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import Sample, randomize_batchnorm


class Conv(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1, p: int | None = None) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1: int, c2: int, shortcut: bool = True) -> None:
        super().__init__()
        self.cv1 = Conv(c1, c2, 1)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = True) -> None:
        super().__init__()
        c_ = c2 // 2
        self.cv1 = Conv(c1, c_)
        self.cv2 = Conv(c1, c_)
        self.cv3 = Conv(2 * c_, c2)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 5) -> None:
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_)
        self.cv2 = Conv(c_ * 4, c2)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Detect(nn.Module):
    """YOLOv5's inference head: per level a 1x1 conv, reshape to (bs, anchors, ny, nx, outputs),
    sigmoid, then box decoding with the grid and anchors. Returns (all boxes, raw maps...)."""

    def __init__(self, nc: int, anchors: list[list[int]], ch: list[int], strides: list[int], sizes: list[int]) -> None:
        super().__init__()
        self.nc, self.no, self.na = nc, nc + 5, len(anchors[0]) // 2
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)
        self.strides = strides
        for i, (a, _s, n) in enumerate(zip(anchors, strides, sizes)):
            yv, xv = torch.meshgrid(
                torch.arange(n, dtype=torch.float32), torch.arange(n, dtype=torch.float32), indexing="ij"
            )
            grid = torch.stack((xv, yv), 2).expand(1, self.na, n, n, 2) - 0.5
            anchor_grid = torch.tensor(a, dtype=torch.float32).view(1, self.na, 1, 1, 2).expand(1, self.na, n, n, 2)
            self.register_buffer(f"grid{i}", grid.contiguous())
            self.register_buffer(f"anchor_grid{i}", anchor_grid.contiguous())

    def forward(self, xs: list[torch.Tensor]):
        z, raw = [], []
        for i, x in enumerate(xs):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            raw.append(x)
            y = x.sigmoid()
            xy = (y[..., 0:2] * 2 + getattr(self, f"grid{i}")) * self.strides[i]
            wh = (y[..., 2:4] * 2) ** 2 * getattr(self, f"anchor_grid{i}")
            y = torch.cat((xy, wh, y[..., 4:]), 4)
            z.append(y.view(bs, self.na * nx * ny, self.no))
        return (torch.cat(z, 1), *raw)


class YoloV5Mini(nn.Module):
    def __init__(self, nc: int = 3, width: int = 16, size: int = 128) -> None:
        super().__init__()
        w = [width, width * 2, width * 4, width * 8, width * 16]
        # backbone
        self.b0 = Conv(3, w[0], 6, 2, 2)  # YOLOv5's 6x6/2 stem
        self.b1 = Conv(w[0], w[1], 3, 2)
        self.b2 = C3(w[1], w[1], 1)
        self.b3 = Conv(w[1], w[2], 3, 2)
        self.b4 = C3(w[2], w[2], 2)
        self.b5 = Conv(w[2], w[3], 3, 2)
        self.b6 = C3(w[3], w[3], 1)
        self.b7 = Conv(w[3], w[4], 3, 2)
        self.b8 = C3(w[4], w[4], 1)
        self.b9 = SPPF(w[4], w[4])
        # neck: FPN top-down then PAN bottom-up
        self.h10 = Conv(w[4], w[3])
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h13 = C3(w[4], w[3], 1, shortcut=False)
        self.h14 = Conv(w[3], w[2])
        self.h17 = C3(w[3], w[2], 1, shortcut=False)
        self.h18 = Conv(w[2], w[2], 3, 2)
        self.h20 = C3(w[3], w[3], 1, shortcut=False)
        self.h21 = Conv(w[3], w[3], 3, 2)
        self.h23 = C3(w[4], w[4], 1, shortcut=False)
        anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
        strides = [8, 16, 32]
        self.detect = Detect(nc, anchors, [w[2], w[3], w[4]], strides, [size // s for s in strides])

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        t10 = self.h10(p5)
        t14 = self.h14(self.h13(torch.cat((self.up(t10), p4), 1)))
        out3 = self.h17(torch.cat((self.up(t14), p3), 1))
        out4 = self.h20(torch.cat((self.h18(out3), t14), 1))
        out5 = self.h23(torch.cat((self.h21(out4), t10), 1))
        return self.detect([out3, out4, out5])


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(5)
    model = YoloV5Mini()
    randomize_batchnorm(model, batches=2, batch_size=4, input_shape=(3, 128, 128))
    return model, torch.randn(1, 3, 128, 128)


SAMPLES = {
    "yolov5s_mini": Sample(
        build,
        {
            "description": "A YOLOv5-style detector at 128x128: Conv+BN+SiLU blocks, C3 bottlenecks, SPPF, an FPN/PAN "
            "neck with nearest upsampling, and a Detect head decoding boxes on 3 scales. Random weights.",
            "task": "detection",
            "input_shape": [1, 3, 128, 128],
            "image": True,
            "preprocess": {
                "text": "RGB, resize to 128x128, scale to 0..1",
                "mode": "RGB",
                "invert": False,
                "resample": "bilinear",
                "mean": [0.0, 0.0, 0.0],
                "std": [1.0, 1.0, 1.0],
            },
            "labels": ["class0", "class1", "class2"],
            "outputs": [
                "boxes (1, 1008, 8): cx, cy, w, h in pixels, objectness, 3 class scores",
                "raw P3 (1, 3, 16, 16, 8)",
                "raw P4 (1, 3, 8, 8, 8)",
                "raw P5 (1, 3, 4, 4, 8)",
            ],
            "trained": False,
        },
    ),
}
