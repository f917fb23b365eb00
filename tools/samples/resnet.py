"""ResNet-18 in exactly torchvision's module layout (names and shapes match its state_dict)."""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import IMAGENET_PREPROCESS, Sample, randomize_batchnorm


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000, width: int = 64) -> None:
        """`width`: channels of the first stage (torchvision: 64); stages use 1, 2, 4, 8 times it."""
        super().__init__()
        w = width
        self.inplanes = w
        self.conv1 = nn.Conv2d(3, w, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(w, 2)
        self.layer2 = self._make_layer(2 * w, 2, stride=2)
        self.layer3 = self._make_layer(4 * w, 2, stride=2)
        self.layer4 = self._make_layer(8 * w, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * w, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(18)
    model = ResNet18()
    randomize_batchnorm(model, batches=2, batch_size=4, input_shape=(3, 224, 224))
    return model, torch.randn(1, 3, 224, 224)


SAMPLES = {
    "resnet18": Sample(
        build,
        {
            "description": "ResNet-18 with torchvision's exact layout (BasicBlocks, 7x7 stem, max pool, four "
            "stages, global average pool, 1000-way linear). Random weights: the classes mean nothing.",
            "task": "classification",
            "input_shape": [1, 3, 224, 224],
            "image": True,
            "preprocess": IMAGENET_PREPROCESS,
            "labels": None,
            "trained": False,
        },
        capture_operands=True,
    ),
}
