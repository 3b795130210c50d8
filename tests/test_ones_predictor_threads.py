"""ONES' completion predictor runs its small network on one torch thread (fitting it and
predicting with it: a waiting thread only spins on a core the other processes want), and leaves
torch's thread count as it found it."""

from __future__ import annotations

import numpy as np
import torch

from roundhouse.elements.policies.ones_predictor import FEATURES, BetaPredictor


class _CountsThreads(torch.nn.Module):
    """The predictor's network, noting torch's thread count at each forward pass."""

    def __init__(self, net: torch.nn.Module):
        super().__init__()
        self.net, self.seen = net, []

    def forward(self, x):
        self.seen.append(torch.get_num_threads())
        return self.net(x)


def test_fitting_and_predicting_run_on_one_thread_and_leave_the_count_as_it_was():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        p = BetaPredictor(seed=0, steps=3)
        p.net = _CountsThreads(p.net)
        rng = np.random.default_rng(0)
        p.add(rng.random((20, FEATURES)), rng.random(20))
        p.fit()
        p.nll()
        factor = p.factor(rng.random((5, FEATURES)), sample=True, rng=rng)
        assert len(factor) == 5 and np.isfinite(factor).all()
        # Three steps of the fit, the likelihood, the prediction: each on one thread.
        assert p.net.seen == [1] * 5
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
