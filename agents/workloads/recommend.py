"""An autoencoder recommender (in the spirit of Recoder, the model Gavel's Recommendation jobs
train): a user's interactions with 512 items, encoded to 64 numbers and decoded back, trained
with a binary cross-entropy on synthetic users drawn from a few taste profiles."""

from __future__ import annotations

import torch
from torch import nn

from roundhouse.agents.workloads.common import synthetic, train
from roundhouse.wire.workloads import WORKLOADS

ITEMS = 512


class AutoEncoder(nn.Module):
    def __init__(self, items: int = ITEMS, hidden: int = 64):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(items, hidden), nn.Tanh())
        self.decode = nn.Linear(hidden, items)

    def forward(self, x):
        return self.decode(self.encode(x))


def users(g: torch.Generator, n: int):
    tastes = (torch.rand(8, ITEMS, generator=g) < 0.05).float()
    who = torch.randint(0, 8, (n,), generator=g)
    noise = (torch.rand(n, ITEMS, generator=g) < 0.01).float()
    x = torch.clamp(tastes[who] + noise, max=1.0)
    return x, x


def main() -> None:
    spec = WORKLOADS["Recommendation"]
    loss = nn.functional.binary_cross_entropy_with_logits
    train(AutoEncoder, synthetic(spec.samples, 13, users), loss, default_batch=spec.default_batch, lr=0.5)


if __name__ == "__main__":
    main()
