"""The training loop every example workload shares: the client library around a plain
PyTorch loop, synchronous data-parallel when the job has several workers (gradients averaged
with an all-reduce after every backward pass: gloo on CPU, NCCL on GPU).

The optimizer (SGD with momentum) and the gradient averaging are a few lines here rather than
`torch.optim.SGD` and `DistributedDataParallel`: both of those import TorchDynamo, which costs
two to three seconds of CPU per process start on the machines we test on, and these jobs start
often (every preemption is a restart). The arithmetic is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn


def train(build_model: Callable, dataset, loss_fn: Callable, default_batch: int, lr: float = 0.05) -> None:
    import torch

    from roundhouse.agents.client import Job
    from roundhouse.agents.elastic import GradientSync

    try:  # what the agent told it (its environment, the checkpoint it names) must make sense
        job = Job.from_env()
    except ValueError as err:
        _refuse(err)
    job.setup()
    torch.manual_seed(job.seed)
    model = build_model().to(job.device)
    optimizer = SGD(model.parameters(), lr=lr, momentum=0.9)
    sync = GradientSync(model.parameters())
    job.track(model=model, optimizer=optimizer, gradient_noise=sync)
    try:
        job.resume()
        data = job.elastic_data(dataset, default_batch)
    except ValueError as err:
        _refuse(err)
    optimizer.lr = starting_lr(optimizer.lr, lr, job.lr_scale)
    if job.world_size > 1 and not job.join_generation:
        DataParallel(model)  # every worker starts from rank 0's weights
    # A resize changes the global batch: the learning rate follows the scheduler's rule when it
    # gives one (a factor of the job's own rate), else the square root of the batch's change.
    job.on_rescale(lambda change: setattr(optimizer, "lr", rescaled_lr(optimizer.lr, lr, change)))
    model.train()
    for inputs, targets in job.loader(data):
        inputs, targets = inputs.to(job.device), targets.to(job.device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        noise = sync.average(data.batch_size)  # with several workers; their gradient noise scale
        optimizer.step()
        job.report(loss=loss.item(), **noise)
    job.finish()


def _refuse(err: Exception) -> NoReturn:
    """Stop before training, saying why in one line (exit status 2, as for bad usage)."""
    import sys

    print(f"roundhouse workload: {err}", file=sys.stderr, flush=True)
    sys.exit(2)


def rescaled_lr(current: float, own: float, change) -> float:
    """The learning rate after a resize (`change`: agents/elastic.Rescale); `own` is the job's
    learning rate at its own batch size, which the scheduler's `lr_scale` multiplies."""
    if change.lr_scale is not None:
        return own * change.lr_scale
    return current * change.batch_ratio**0.5


def starting_lr(current: float, own: float, scale: float | None) -> float:
    """The learning rate a job starts training with: `own` (its rate at its own batch size) times
    the factor the scheduler gave its launch, whatever its checkpoint holds (it may be launched
    at another global batch than it ran with); without a factor, the rate it has (`current`:
    its own, or its checkpoint's)."""
    return current if scale is None else own * scale


def synthetic(n: int, seed: int, make: Callable):
    """A fixed dataset of n samples drawn once from `make(generator, n)` -> (inputs, targets)."""
    import torch
    from torch.utils.data import TensorDataset

    g = torch.Generator()
    g.manual_seed(seed)
    inputs, targets = make(g, n)
    return TensorDataset(inputs, targets)


class SGD:
    """Stochastic gradient descent with momentum (PyTorch's update rule), checkpointable."""

    def __init__(self, params, lr: float, momentum: float = 0.0):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.momentum = lr, momentum
        self.buffers = [None] * len(self.params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        import torch

        with torch.no_grad():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                step = p.grad
                if self.momentum:
                    buf = self.buffers[i]
                    if buf is None:
                        buf = self.buffers[i] = step.detach().clone()
                    else:
                        buf.mul_(self.momentum).add_(step)
                    step = buf
                p.add_(step, alpha=-self.lr)

    def state_dict(self) -> dict:
        return {"lr": self.lr, "momentum": self.momentum, "buffers": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        self.lr, self.momentum = state["lr"], state["momentum"]
        self.buffers = [None if b is None else b.to(p.device) for b, p in zip(state["buffers"], self.params)]


class DataParallel:
    """Synchronous data parallelism over torch.distributed: every worker starts from rank 0's
    weights, and after each backward pass the gradients are summed across workers (one
    all-reduce over a flat buffer) and divided by the number of workers."""

    def __init__(self, model):
        import torch.distributed as dist

        self.dist = dist
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.world = dist.get_world_size()
        for t in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(t.data, src=0)

    def average_gradients(self) -> None:
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        grads = [p.grad for p in self.params if p.grad is not None]
        flat = _flatten_dense_tensors(grads)
        self.dist.all_reduce(flat)
        flat.div_(self.world)
        for g, averaged in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(averaged)
