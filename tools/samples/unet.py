"""A small UNet: conv-BN-ReLU pairs, max-pool down, ConvTranspose2d up, skip concatenations."""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import IMAGENET_PREPROCESS, Sample, randomize_batchnorm


class DoubleConv(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))


class Up(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
        self.conv = DoubleConv(cin, cout)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(nn.Module):
    def __init__(self, in_ch: int = 3, classes: int = 2, base: int = 16) -> None:
        super().__init__()
        c = [base, base * 2, base * 4, base * 8]
        self.inc = DoubleConv(in_ch, c[0])
        self.pool = nn.MaxPool2d(2)
        self.down1 = DoubleConv(c[0], c[1])
        self.down2 = DoubleConv(c[1], c[2])
        self.down3 = DoubleConv(c[2], c[3])
        self.up1 = Up(c[3], c[2])
        self.up2 = Up(c[2], c[1])
        self.up3 = Up(c[1], c[0])
        self.outc = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(self.pool(x1))
        x3 = self.down2(self.pool(x2))
        x4 = self.down3(self.pool(x3))
        x = self.up3(self.up2(self.up1(x4, x3), x2), x1)
        return self.outc(x)


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(4)
    model = UNet()
    randomize_batchnorm(model, batches=2, batch_size=4, input_shape=(3, 64, 64))
    return model, torch.randn(1, 3, 64, 64)


SAMPLES = {
    "unet": Sample(
        build,
        {
            "description": "A small UNet for segmentation: three max-pool steps down, three ConvTranspose2d steps "
            "up, skip connections joined with torch.cat. Outputs 2-class logits per pixel. Random weights.",
            "task": "segmentation",
            "input_shape": [1, 3, 64, 64],
            "image": True,
            "preprocess": IMAGENET_PREPROCESS,
            "labels": ["background", "foreground"],
            "trained": False,
        },
    ),
}
