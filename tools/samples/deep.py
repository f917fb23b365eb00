"""A deep, narrow residual net (~1,500 operators) for the big-graph test and benchmark."""

from __future__ import annotations

import torch
import torch.nn as nn

from .common import Sample, randomize_batchnorm

BLOCKS = 299  # 5 operators each at optlevel 2 (conv, relu, conv, add, relu) + stem and head


class Block(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(x + self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))


class Deep(nn.Module):
    def __init__(self, blocks: int = BLOCKS, ch: int = 8, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, 2, 1)
        self.relu = nn.ReLU()
        self.blocks = nn.Sequential(*(Block(ch) for _ in range(blocks)))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(ch, num_classes)

    def forward(self, x):
        x = self.blocks(self.relu(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def build() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(8)
    model = Deep()
    randomize_batchnorm(model, batches=2, batch_size=4, input_shape=(3, 16, 16))
    with torch.no_grad():  # damp each residual branch so 299 additions stay in range
        for blk in model.blocks:
            blk.bn2.weight.mul_(0.2)
            blk.bn2.bias.mul_(0.2)
    return model.eval(), torch.randn(1, 3, 16, 16)


SAMPLES = {
    "deep1500": Sample(
        build,
        {
            "description": "A deep, narrow residual network (299 blocks of 8 channels on an 8x8 map, about 1,500 "
            "operators) to exercise big graphs: ordering, memory planning and the graph view.",
            "task": "classification",
            "input_shape": [1, 3, 16, 16],
            "image": False,
            "preprocess": None,
            "labels": None,
            "trained": False,
        },
    ),
}
