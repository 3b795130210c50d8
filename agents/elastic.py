"""Elastic jobs: a running job grows or shrinks across worker processes without stopping.

The agent asks for a resize the way it revokes a lease, without a round trip: it writes the new
shape of the job next to rank 0's lease file (`write_request`) and then sets the lease byte to
RESIZE. At its next step boundary the job agrees on it through the all-reduce its loader does
each iteration anyway (rank 0's request reaches every worker), and then, at that boundary:

1. workers whose rank is beyond the new world size leave (exit with the outcome "resized");
2. the others leave the old process group and form a new one (gloo on CPU, NCCL on GPUs), on
   the new rendezvous port, together with the workers the agent started for the new ranks;
3. the data (`ElasticData`) is re-cut for the new rank, world size and batch size, and the
   training script's `on_rescale` callbacks run (to scale the learning rate, say);
4. rank 0 broadcasts everything a checkpoint holds (parameters, optimizer state with the
   learning rate its callbacks set, random state, the iteration and the data position), so
   every worker, the new ones included, continues from the same state.

Training goes on at the next iteration: no step is lost or repeated. If a worker dies while
this happens (the rendezvous or the broadcast fails), the workers that hold the state write a
checkpoint of the last complete iteration and exit as preempted; the scheduler relaunches the
job from it (checkpoint and restart), so no progress is lost either.

`GradientSync` averages gradients across workers and, from the per-replica gradients, measures
the gradient noise scale with Pollux's estimator (Qiao et al., OSDI 2021, §3.1, after McCandlish
et al. 2018): the job reports it with its metrics, for the Pollux elements.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roundhouse.agents.client import Job

RESIZE = 2  # the lease byte's value while a resize is requested (1 is a revocation)
_FIELDS = ("generation", "world_size", "batch_size", "master_port")  # whole numbers; and lr_scale, optional


@dataclasses.dataclass(frozen=True)
class Rescale:
    """A job's new shape, as every worker learns it at the step boundary where it takes effect:
    its world size, this worker's rank in it (ranks are kept; new ones come last), the batch size
    per worker, and the rendezvous of the new process group. `generation` counts the resizes.
    `lr_scale` is the factor the scheduler's learning-rate rule gives the job's own learning
    rate (the one it has at its own batch size) for the new global batch; None when the
    scheduler leaves the learning rate to the job."""

    generation: int
    world_size: int
    rank: int
    batch_size: int
    master_addr: str
    master_port: int
    previous_world_size: int = 1
    previous_batch_size: int = 0
    lr_scale: float | None = None

    @property
    def leaving(self) -> bool:
        return self.rank >= self.world_size

    @property
    def batch_ratio(self) -> float:
        """New global batch over the old one (for a learning-rate scaling rule)."""
        old = self.previous_world_size * self.previous_batch_size
        return self.world_size * self.batch_size / old if old else 1.0


# --- the agent's side ---------------------------------------------------------------------------


def request_path(lease_path: str | os.PathLike) -> Path:
    return Path(f"{lease_path}.resize")


def write_request(
    lease_path: str | os.PathLike,
    generation: int,
    world_size: int,
    batch_size: int,
    master_port: int,
    lr_scale: float | None = None,
) -> None:
    """Ask the worker holding this lease (rank 0) to resize its job: the request first
    (atomically), then the lease byte, so the worker never sees the byte without the request."""
    path = request_path(lease_path)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    body: dict[str, Any] = {
        "generation": generation,
        "world_size": world_size,
        "batch_size": batch_size,
        "master_port": master_port,
    }
    if lr_scale is not None:
        body["lr_scale"] = float(lr_scale)
    tmp.write_text(json.dumps(body))
    os.replace(tmp, path)
    with open(lease_path, "r+b") as f:
        if f.read(1) != b"\x01":  # a revocation stands: it is not turned into a resize
            f.seek(0)
            f.write(bytes([RESIZE]))
            f.flush()


def read_request(lease_path: str | os.PathLike | None) -> dict[str, Any] | None:
    if not lease_path:
        return None
    try:
        body = json.loads(request_path(lease_path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not all(isinstance(body.get(k), int) for k in _FIELDS):
        return None
    out: dict[str, Any] = {k: int(body[k]) for k in _FIELDS}
    out["lr_scale"] = _lr_scale(body.get("lr_scale"))
    return out


def _lr_scale(value: Any) -> float | None:
    """A learning-rate factor as a request holds it: a finite number >= 0, else none."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _lr_code(scale: float | None) -> int:
    """The factor as one whole number for the workers' all-reduce (a maximum: the others send
    0): 0 for none, else its bits plus one (a number >= 0 keeps its order as bits, exactly)."""
    return 0 if scale is None else struct.unpack("<q", struct.pack("<d", scale))[0] + 1


def _lr_decode(code: int) -> float | None:
    return None if code <= 0 else struct.unpack("<d", struct.pack("<q", code - 1))[0]


# --- data that can be re-cut ----------------------------------------------------------------------


class ElasticData:
    """Batches from a map-style dataset, cut from a global position in a seeded per-epoch order
    of the samples: each iteration takes the next `batch_size * world_size` samples of the
    epoch's order, this worker the `rank`-th slice of them. The position counts samples, so it
    stays exact when the world size or the batch size changes (an epoch ends when the rest
    is shorter than one global batch). Checkpoints and resizes carry `position`."""

    elastic = True

    def __init__(self, dataset, batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        self.dataset, self.seed = dataset, seed
        self.epoch, self.offset = 0, 0
        self.reshape(rank, world_size, batch_size)

    def reshape(self, rank: int, world_size: int, batch_size: int) -> None:
        if len(self.dataset) < batch_size * world_size:
            raise ValueError(f"a dataset of {len(self.dataset)} samples has no global batch of {batch_size} x {world_size}")
        self.rank, self.world_size, self.batch_size = rank, world_size, batch_size

    @property
    def position(self) -> tuple[int, int]:
        return self.epoch, self.offset

    @position.setter
    def position(self, value: tuple[int, int]) -> None:
        self.epoch, self.offset = int(value[0]), int(value[1])

    def __iter__(self) -> Iterator[Any]:
        import torch
        from torch.utils.data import default_collate

        order, order_epoch = None, -1
        while True:
            step = self.batch_size * self.world_size
            if self.offset + step > len(self.dataset):
                self.epoch, self.offset = self.epoch + 1, 0
            if order_epoch != self.epoch:
                g = torch.Generator()
                g.manual_seed(self.seed * 1_000_003 + self.epoch)
                order, order_epoch = torch.randperm(len(self.dataset), generator=g), self.epoch
            start = self.offset + self.rank * self.batch_size
            indices = order[start : start + self.batch_size].tolist()
            self.offset += step  # before yielding: at a step boundary the position counts the steps done
            yield default_collate([self.dataset[i] for i in indices])


# --- gradients across workers and their noise scale ---------------------------------------------


class GradientSync:
    """Averages the gradients of `params` over the job's workers (one all-reduce over a flat
    buffer, which also carries each replica's squared gradient norm) and keeps Pollux's
    estimate of the gradient noise scale.

    With local batch b, global batch B = b * n and E|g_b|^2 = |G|^2 + tr(S)/b, the unbiased
    estimates are |G|^2 = (B |g_B|^2 - b mean|g_b|^2) / (B - b) and tr(S) = (mean|g_b|^2 - |g_B|^2)
    / (1/b - 1/B); both are smoothed (exponential moving averages, bias-corrected, as in
    AdaptDL's GradientNoiseScale) and the noise scale is tr(S) / |G|^2. One worker has no second
    replica to compare with: no estimate then."""

    def __init__(self, params, smoothing: float = 0.9):
        self.params = [p for p in params if p.requires_grad]
        self.smoothing = smoothing
        self._sqr = self._var = self._weight = 0.0

    def average(self, local_batch: int) -> dict[str, float]:
        """Average the gradients in place; returns the noise-scale figures measured so far."""
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return self.figures()
        n = dist.get_world_size()
        grads = [p.grad for p in self.params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads] + [torch.zeros(1, dtype=grads[0].dtype, device=grads[0].device)])
        flat[-1] = flat[:-1].pow(2).sum()  # this replica's |g_b|^2
        dist.all_reduce(flat)
        flat.div_(n)
        local_sqr = float(flat[-1])
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        self.observe(local_sqr, float(flat[:-1].pow(2).sum()), local_batch, local_batch * n)
        return self.figures()

    def observe(self, local_sqr: float, global_sqr: float, b: int, big: int) -> None:
        """Fold one step's measurement in: mean squared norm of the per-replica gradients (batch
        b) and squared norm of their average (batch big)."""
        if big <= b:
            return
        grad_sqr = (big * global_sqr - b * local_sqr) / (big - b)
        grad_var = (local_sqr - global_sqr) / (1.0 / b - 1.0 / big)
        a = self.smoothing
        self._sqr = a * self._sqr + (1 - a) * grad_sqr
        self._var = a * self._var + (1 - a) * grad_var
        self._weight = a * self._weight + (1 - a)

    def figures(self) -> dict[str, float]:
        if self._weight <= 0:
            return {}
        sqr, var = self._sqr / self._weight, self._var / self._weight
        out = {"grad_sqr": sqr, "grad_var": var}
        if sqr > 0 and var > 0:
            out["grad_noise_scale"] = var / sqr
        return out

    def state_dict(self) -> dict[str, float]:
        return {"sqr": self._sqr, "var": self._var, "weight": self._weight}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self._sqr, self._var, self._weight = state["sqr"], state["var"], state["weight"]


# --- the job's side: agreeing on a resize and carrying it out -------------------------------------


class Scaler:
    """The scaling hook of one job process (`Job.scaling`): notices rank 0's request, agrees on
    it with the other workers, re-forms the process group and hands the state over."""

    def __init__(self, job: Job):
        self.job = job
        self.generation = job.join_generation
        self.data: ElasticData | None = None
        self.callbacks: list = []
        self.pending_position: tuple[int, int] | None = None

    def scaling(self, request: dict[str, Any]) -> Rescale | None:
        job = self.job
        try:
            change = self.carry_out(request)
        except ResizeFailed as err:
            self.stop_after_loss(str(err))
            return None
        if change.leaving:
            job.outcome = "resized"
        return change

    def stop_after_loss(self, why: str) -> None:
        job = self.job
        job.log(f"{why}; checkpointing iteration {job.iteration} and stopping")
        job._distributed = False  # the group is broken: no barrier, no destroy
        joined = self.generation >= job.join_generation  # a worker still joining holds no state
        if job.iteration > 0 and joined:
            job.save_checkpoint(alone=True)
        job.outcome = "preempted"

    def requested(self) -> dict[str, Any] | None:
        """Rank 0's new request, if the agent made one (the lease byte says so: no file read
        on the usual iteration)."""
        job = self.job
        if job.rank != 0 or job.lease.signal() != RESIZE:
            return None
        body = read_request(job.lease.path)
        if body is None or body["generation"] <= self.generation:
            return None
        return body

    def pack(self, body: dict[str, Any] | None) -> list[int]:
        if not body:
            return [0] * (len(_FIELDS) + 1)
        return [int(body[k]) for k in _FIELDS] + [_lr_code(body.get("lr_scale"))]

    def unpack(self, values: list[int]) -> dict[str, Any] | None:
        ints = [int(v) for v in values]
        body: dict[str, Any] = dict(zip(_FIELDS, ints))
        body["lr_scale"] = _lr_decode(ints[len(_FIELDS)]) if len(ints) > len(_FIELDS) else None
        return body if body["generation"] > self.generation else None

    def carry_out(self, body: dict[str, Any]) -> Rescale:
        """Re-form the job at this step boundary (every current worker calls this at the same
        iteration). Raises ResizeFailed, after checkpointing, when a worker is lost on the way."""
        import torch.distributed as dist

        job = self.job
        change = Rescale(
            body["generation"],
            body["world_size"],
            job.rank,
            body["batch_size"],
            job.master[0],
            body["master_port"],
            job.world_size,
            self.data.batch_size if self.data is not None else job.batch_size,
            body.get("lr_scale"),
        )
        self.generation = change.generation
        job.log(
            f"resizing at iteration {job.iteration}: {job.world_size} -> {change.world_size} workers, "
            f"batch {change.batch_size} per worker (generation {change.generation})"
        )
        if job._distributed:
            dist.destroy_process_group()
            job._distributed = False
        if change.leaving:
            return change
        job.world_size, job.batch_size, job.master = (
            change.world_size,
            change.batch_size,
            (change.master_addr, change.master_port),
        )
        try:
            if change.world_size > 1:
                job.init_group()
        except Exception as err:  # a worker died in the rendezvous
            raise ResizeFailed(f"resize to {change.world_size} workers failed: {err}") from err
        # The data is re-cut and the callbacks run before rank 0 hands its state over, so that
        # what they change in it (the learning rate an optimizer holds, say) reaches every
        # worker: the workers that have just joined run no callback for this resize.
        self.reshape()
        for callback in self.callbacks:
            callback(change)
        try:
            if change.world_size > 1:
                self.broadcast_state()
        except Exception as err:  # a worker died in the hand-over
            raise ResizeFailed(f"resize to {change.world_size} workers failed: {err}") from err
        return change

    def reshape(self) -> None:
        job = self.job
        if self.data is not None:
            self.data.reshape(job.rank, job.world_size, job.batch_size)

    def state(self) -> dict[str, Any]:
        """What a checkpoint holds beyond the tracked objects."""
        out: dict[str, Any] = {"generation": self.generation}
        if self.data is not None:
            out["position"] = self.data.position
        return out

    def load(self, state: dict[str, Any]) -> None:
        if "position" in state:
            self.pending_position = tuple(state["position"])
            if self.data is not None:
                self.data.position = self.pending_position

    def broadcast_state(self) -> None:
        """Rank 0 sends what a checkpoint holds to every worker of the new group; a worker that
        has just joined receives it here too (from Job.resume)."""
        import torch
        import torch.distributed as dist

        job = self.job
        payload = [job.checkpoint_state() if job.rank == 0 else None]
        dist.broadcast_object_list(payload, src=0)
        state = payload[0]
        if job.rank != 0:
            job.load_state(state)
            torch.set_rng_state(state["rng"])

    def attach(self, data: ElasticData) -> ElasticData:
        self.data = data
        if self.pending_position is not None:
            data.position = self.pending_position
        return data


class ResizeFailed(RuntimeError):
    """A worker was lost while the job re-formed; the state was checkpointed first."""
