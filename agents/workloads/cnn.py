"""A small residual CNN (ResNet-style: a stem, residual blocks, global pooling) on synthetic
3x16x16 images in 10 classes whose labels a fixed random teacher assigns, so the loss falls.
ResNet-18 jobs use one block per stage, ResNet-50 jobs three."""

from __future__ import annotations

import os

import torch
from torch import nn

from roundhouse.agents.workloads.common import synthetic, train
from roundhouse.wire.workloads import WORKLOADS


class Block(nn.Module):
    def __init__(self, channels_in: int, channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self, blocks_per_stage: int = 1, width: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, channels = [], width
        for stage, out in enumerate((width, 2 * width)):
            for b in range(blocks_per_stage):
                layers.append(Block(channels, out, 2 if stage and b == 0 else 1))
                channels = out
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        return self.head(self.layers(self.stem(x)).mean(dim=(2, 3)))


def images(g: torch.Generator, n: int):
    x = torch.randn(n, 3, 16, 16, generator=g)
    teacher = torch.randn(3 * 16 * 16, 10, generator=g)
    return x, (x.flatten(1) @ teacher).argmax(dim=1)


def main() -> None:
    deep = os.environ.get("ROUNDHOUSE_MODEL", "") == "ResNet-50"
    spec = WORKLOADS["ResNet-50" if deep else "ResNet-18"]
    train(
        lambda: SmallResNet(3 if deep else 1),
        synthetic(spec.samples, 7, images),
        nn.functional.cross_entropy,
        default_batch=spec.default_batch,
    )


if __name__ == "__main__":
    main()
