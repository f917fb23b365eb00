"""MobileNetV3-Small (torchvision's configuration) at 96x96 input."""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import IMAGENET_PREPROCESS, Sample, randomize_batchnorm


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNAct(nn.Module):
    def __init__(
        self, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: type[nn.Module] | None = nn.Hardswish
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act() if act is not None else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.relu = nn.ReLU()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.scale_act = nn.Hardsigmoid()

    def forward(self, x):
        s = self.scale_act(self.fc2(self.relu(self.fc1(self.avgpool(x)))))
        return x * s


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, act: type[nn.Module], stride: int) -> None:
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if exp != cin:
            layers.append(ConvBNAct(cin, exp, 1, act=act))
        layers.append(ConvBNAct(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcitation(exp, _make_divisible(exp // 4)))
        layers.append(ConvBNAct(exp, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return y + x if self.use_res else y


# (input channels, kernel, expanded, output, SE, activation, stride) as in torchvision's "small".
_HS, _RE = nn.Hardswish, nn.ReLU
_SMALL = [
    (16, 3, 16, 16, True, _RE, 2),
    (16, 3, 72, 24, False, _RE, 2),
    (24, 3, 88, 24, False, _RE, 1),
    (24, 5, 96, 40, True, _HS, 2),
    (40, 5, 240, 40, True, _HS, 1),
    (40, 5, 240, 40, True, _HS, 1),
    (40, 5, 120, 48, True, _HS, 1),
    (48, 5, 144, 48, True, _HS, 1),
    (48, 5, 288, 96, True, _HS, 2),
    (96, 5, 576, 96, True, _HS, 1),
    (96, 5, 576, 96, True, _HS, 1),
]


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes: int = 1000, last_channel: int = 1024, width: float = 1.0) -> None:
        """`width`: torchvision's width multiplier (channels scaled, rounded to multiples of 8)."""
        super().__init__()

        def ch(c: int) -> int:
            return _make_divisible(c * width)

        layers: list[nn.Module] = [ConvBNAct(3, ch(16), 3, 2)]
        layers += [
            InvertedResidual(ch(cin), k, ch(exp), ch(cout), se, act, s) for cin, k, exp, cout, se, act, s in _SMALL
        ]
        layers.append(ConvBNAct(ch(96), ch(576), 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(ch(576), last_channel), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(last_channel, num_classes)
        )

    def forward(self, x):
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier(x)


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(3)
    model = MobileNetV3Small()
    randomize_batchnorm(model, batches=2, batch_size=8, input_shape=(3, 96, 96))
    return model, torch.randn(1, 3, 96, 96)


SAMPLES = {
    "mobilenetv3": Sample(
        build,
        {
            "description": "MobileNetV3-Small: depthwise convolutions, squeeze-excite with hardsigmoid, hardswish "
            "and ReLU, 1x1 projections, global pool and a dropout classifier. Random weights.",
            "task": "classification",
            "input_shape": [1, 3, 96, 96],
            "image": True,
            "preprocess": IMAGENET_PREPROCESS,
            "labels": None,
            "trained": False,
        },
    ),
}
