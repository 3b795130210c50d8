"""ONES' completion predictor (§3.3.1, Eq. 6): the fraction of its work a job has done,
rho ~ Beta(alpha, beta), with alpha = epochs done and beta = max(f(x), 1) the epochs left as a
function of the job's features x = (log epoch size, initial loss, epochs done, 1 - loss/initial
loss, validation accuracy). f is the artifact's small network (Linear 5->64, tanh, Linear 64->1,
ReLU, + 1); the paper prints it linear (Eq. 6) and calls it a GPR in a footnote. It is refitted,
by maximising the Beta log-likelihood of the labels (processed / total samples), on per-epoch
points of completed jobs, seeded with the artifact's job_history.csv. The artifact passes the raw
epoch size at prediction and its log in training; we use the log in both. The fit runs torch's
Adam written out (Adam below, the same bits), as torch.optim imports torch._dynamo when first used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import numpy as np
import polars as pl
import torch

FEATURES = 5


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Torch on one thread while this lasts, then as it was. The model is so small that more
    threads only add overhead, many times the work itself on a busy machine, and a thread left
    waiting after a parallel step spins on a core the simulator's other processes want."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class Adam:
    """torch.optim.Adam as it runs on CPU tensors (the single-tensor path, L2 weight decay added to
    the gradient, no amsgrad): the same float32 operations in the same order, so a fit gives the
    same bits. Written out because constructing torch's optimizer imports torch._dynamo, seconds
    of every process's first fit for a network of a few hundred weights."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        self.params = list(params)
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        # Per parameter, created at its first step as torch does: steps taken, the moments.
        self.steps: list[int] = [0] * len(self.params)
        self.exp_avg: list[torch.Tensor | None] = [None] * len(self.params)
        self.exp_avg_sq: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        for i, param in enumerate(self.params):
            if param.grad is None:  # torch skips such a parameter, its step count included
                continue
            exp_avg, exp_avg_sq = self.exp_avg[i], self.exp_avg_sq[i]
            if exp_avg is None or exp_avg_sq is None:
                exp_avg = self.exp_avg[i] = torch.zeros_like(param, memory_format=torch.preserve_format)
                exp_avg_sq = self.exp_avg_sq[i] = torch.zeros_like(param, memory_format=torch.preserve_format)
            self.steps[i] += 1
            # torch counts steps in a float32 tensor and reads it back as a Python float.
            step = float(self.steps[i])
            grad = param.grad
            if self.weight_decay != 0:
                grad = grad.add(param, alpha=self.weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = self.lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


def features(epoch_size, initial_loss, epochs, loss, acc) -> np.ndarray:
    """(n, 5) features; a missing loss (NaN) counts as no loss reduction, a missing accuracy
    as 0 (the simulator reports neither unless the trace has loss curves)."""
    epoch_size, initial_loss, epochs, loss, acc = (
        np.asarray(a, dtype=np.float64) for a in (epoch_size, initial_loss, epochs, loss, acc)
    )
    init = np.nan_to_num(np.minimum(initial_loss, 100.0), nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        reduction = np.where(init > 0, 1.0 - loss / init, 0.0)
    return np.stack([np.log(np.maximum(epoch_size, 1.0)), init, epochs, np.nan_to_num(reduction), np.nan_to_num(acc)], axis=1)


def history_points(history: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Training points from per-epoch logs (traces/ones.read_history columns): features and
    the label, samples processed / the job's total samples."""
    h = history
    x = features(h["epoch_size"], h["initial_loss"], h["epoch"], h["loss"], h["acc"])
    label = (h["num_samples"] / h["total_workload"]).to_numpy()
    return x, label


class BetaPredictor:
    """The Beta completion model: fit on (features, label) points, sample or average rho."""

    def __init__(self, seed: int = 0, hidden: int = 64, steps: int = 150, lr: float = 1e-2, max_points: int = 2000):
        self.seed, self.steps, self.lr, self.max_points = seed, steps, lr, max_points
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
        self._rng = np.random.default_rng(seed)
        self.x = np.zeros((0, FEATURES))
        self.y = np.zeros(0)
        self.fits = 0

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        """More training points (bounded: a uniform sample of at most max_points is kept)."""
        self.x = np.concatenate([self.x, x])
        self.y = np.concatenate([self.y, np.clip(y, 1e-4, 1 - 1e-4)])
        if len(self.y) > self.max_points:
            keep = np.sort(self._rng.choice(len(self.y), self.max_points, replace=False))
            self.x, self.y = self.x[keep], self.y[keep]

    def _params(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        alpha = torch.clamp(x[:, 2], min=1.0)
        beta = torch.relu(self.net(x)[:, 0]) + 1.0
        return alpha, beta

    def nll(self) -> float:
        """Mean negative log-likelihood of the training points under the current model."""
        with torch.no_grad(), _one_thread():
            x, log_y, log_1y = self._tensors()
            return float(self._nll(x, log_y, log_1y))

    def _tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The points as tensors, with the logs of the labels the likelihood needs."""
        y = torch.as_tensor(self.y, dtype=torch.float32)
        return torch.as_tensor(self.x, dtype=torch.float32), torch.log(y), torch.log1p(-y)

    def _nll(self, x: torch.Tensor, log_y: torch.Tensor, log_1y: torch.Tensor) -> torch.Tensor:
        # The Beta log-density written out: a third cheaper than torch.distributions.Beta's,
        # which goes through the Dirichlet and recomputes the logs of the labels every step.
        alpha, beta = self._params(x)
        log_p = (alpha - 1) * log_y + (beta - 1) * log_1y + torch.lgamma(alpha + beta) - torch.lgamma(alpha) - torch.lgamma(beta)
        return -log_p.mean()

    def fit(self, steps: int | None = None) -> list[float]:
        """Full-batch Adam on the negative log-likelihood; returns the loss at each step."""
        if not len(self.y):
            return []
        x, log_y, log_1y = self._tensors()
        opt = Adam(self.net.parameters(), lr=self.lr, weight_decay=1e-4)
        losses = []
        with _one_thread():
            for _ in range(self.steps if steps is None else steps):
                opt.zero_grad()
                loss = self._nll(x, log_y, log_1y)
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
        self.fits += 1
        return losses

    def factor(self, x: np.ndarray, sample: bool, rng: np.random.Generator) -> np.ndarray:
        """1/rho - 1 per job (remaining work over work done), rho drawn from each job's Beta
        (sample) or its mean."""
        if not len(x):
            return np.zeros(0)
        with torch.no_grad(), _one_thread():
            alpha, beta = self._params(torch.as_tensor(x, dtype=torch.float32))
        a, b = alpha.double().numpy(), beta.double().numpy()
        rho = rng.beta(a, b) if sample else a / (a + b)
        return 1.0 / np.clip(rho, 1e-3, 1.0) - 1.0
