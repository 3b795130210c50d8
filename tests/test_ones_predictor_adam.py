"""ONES' completion predictor fits with its own Adam, torch's CPU Adam written out: a fit gives
the same weights and losses, bit for bit, as torch.optim.Adam's, and fitting no longer imports
torch's compiler (torch._dynamo), whose import cost seconds in every process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from roundhouse.elements.policies import ones_predictor
from roundhouse.elements.policies.ones_predictor import FEATURES, Adam, BetaPredictor


def _torch_adam(params, lr, weight_decay=0.0):
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)


def _points(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Features like the simulator's (log epoch size, initial loss, epochs, reduction, accuracy)
    and labels in (0, 1)."""
    x = np.stack(
        [rng.uniform(5, 12, n), rng.uniform(0, 5, n), rng.integers(0, 30, n), rng.uniform(0, 1, n), rng.uniform(0, 1, n)],
        axis=1,
    )
    return x, rng.uniform(0, 1, n)


def _fits(seed: int, lr: float, steps: list[int]) -> tuple[list[list[float]], list[torch.Tensor]]:
    """Several fits of one predictor, with more points before each (as ONES refits on every
    completion); the losses of each fit and the weights at the end."""
    rng = np.random.default_rng(seed)
    p = BetaPredictor(seed=seed, lr=lr, max_points=150)
    losses = []
    for n in steps:
        p.add(*_points(rng, 60))
        losses.append(p.fit(n))
    return losses, [t.detach().clone() for t in p.net.parameters()]


@pytest.mark.parametrize(("seed", "lr"), [(0, 1e-2), (7, 1e-2), (123, 3e-2)])
def test_fits_match_torch_adam_bit_for_bit(monkeypatch, seed, lr):
    ours = _fits(seed, lr, [1, 40, 150, 25])
    monkeypatch.setattr(ones_predictor, "Adam", _torch_adam)
    theirs = _fits(seed, lr, [1, 40, 150, 25])
    for fit_ours, fit_theirs in zip(ours[0], theirs[0], strict=True):
        assert len(fit_ours) == len(fit_theirs) > 0
        assert torch.equal(torch.tensor(fit_ours, dtype=torch.float64), torch.tensor(fit_theirs, dtype=torch.float64))
    # The fits moved the weights, and both optimizers moved them to the same bits.
    start = [t.detach().clone() for t in BetaPredictor(seed=seed).net.parameters()]
    assert not all(torch.equal(a, b) for a, b in zip(ours[1], start, strict=True))
    for a, b in zip(ours[1], theirs[1], strict=True):
        assert a.dtype == b.dtype == torch.float32
        assert torch.equal(a, b)


def test_steps_match_torch_adam_with_and_without_weight_decay_and_a_parameter_left_out():
    """Optimizer against optimizer on random tensors and gradients, one parameter getting no
    gradient in some steps (torch then skips it, its step count too)."""
    for weight_decay in (0.0, 1e-4, 0.1):
        gen = torch.Generator().manual_seed(int(weight_decay * 1e4))
        shapes = [(64, 5), (64,), (1, 64), (1,)]
        ours = [torch.randn(s, generator=gen) for s in shapes]
        theirs = [t.clone() for t in ours]
        a, b = Adam(ours, lr=1e-2, weight_decay=weight_decay), _torch_adam(theirs, lr=1e-2, weight_decay=weight_decay)
        for step in range(30):
            a.zero_grad()
            b.zero_grad()
            for i, (p, q) in enumerate(zip(ours, theirs, strict=True)):
                if i == 3 and step % 3 == 0:
                    continue
                p.grad = torch.randn(p.shape, generator=gen) * 10.0 ** (step % 5 - 2)
                q.grad = p.grad.clone()
            a.step()
            b.step()
            for p, q in zip(ours, theirs, strict=True):
                assert torch.equal(p, q)


def test_fitting_does_not_import_torchs_compiler():
    code = (
        "import sys, numpy as np\n"
        "from roundhouse.elements.policies.ones_predictor import FEATURES, BetaPredictor\n"
        "p = BetaPredictor(steps=3)\n"
        "rng = np.random.default_rng(0)\n"
        f"p.add(rng.random((20, {FEATURES})), rng.uniform(0.1, 0.9, 20))\n"
        "assert len(p.fit()) == 3\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "False"
