"""An LSTM language model (embedding, one LSTM layer, a projection to the vocabulary) on token
streams from a fixed random Markov chain, predicting each next token."""

from __future__ import annotations

import torch
from torch import nn

from roundhouse.agents.workloads.common import synthetic, train
from roundhouse.wire.workloads import WORKLOADS

VOCAB, LENGTH = 256, 16


class LanguageModel(nn.Module):
    def __init__(self, vocab: int = VOCAB, embed: int = 32, hidden: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        hidden, _ = self.lstm(self.embed(tokens))
        return self.out(hidden)


def streams(g: torch.Generator, n: int):
    # Each token has 4 likely successors, so there is something to learn.
    successors = torch.randint(0, VOCAB, (VOCAB, 4), generator=g)
    tokens = torch.empty(n, LENGTH + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(LENGTH):
        pick = torch.randint(0, 4, (n,), generator=g)
        tokens[:, t + 1] = successors[tokens[:, t], pick]
    return tokens[:, :-1], tokens[:, 1:]


def loss(logits, targets):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main() -> None:
    spec = WORKLOADS["LM"]
    train(LanguageModel, synthetic(spec.samples, 11, streams), loss, default_batch=spec.default_batch, lr=0.5)


if __name__ == "__main__":
    main()
