"""The client library for training scripts: leases, checkpoints and metrics (Blox §6.3).

A training script run by a Roundhouse agent wraps its data loader and registers what a
checkpoint holds::

    from roundhouse.agents import client

    job = client.Job.from_env()            # what the agent told this process (env variables)
    job.setup()                            # threads, device, torch.distributed for several workers
    model, optimizer = ..., ...
    job.track(model=model, optimizer=optimizer)
    job.resume()                           # from the checkpoint it was given, if any
    for x, y in job.loader(data_loader):   # stops when the lease is revoked or the work is done
        loss = train_step(x, y)
        job.report(loss=loss.item())
    job.finish()                           # exit: done, or preempted after a checkpoint

The lease is checked every iteration without a round trip: the agent keeps one byte per
process in a memory-mapped file and sets it to revoke; reading it costs well under a
microsecond (renewal is optimistic: no message while the job keeps its GPUs). A job with
several workers revokes in two phases: the agent tells only rank 0; rank 0 proposes to stop
after the next iteration (i + 1) and every worker learns it through an all-reduce the job does
each iteration anyway, so all checkpoint the same iteration and exit together.

Checkpoints are written by rank 0 to the folder the agent gives (storage every node can
read), named by attempt and iteration, atomically; a relaunched job, possibly on other GPUs
of another node, resumes from the one the scheduler names, and its data loader continues at
the same batch. `report(loss=..., **metrics)` sends the loss, the iteration time and any
other numbers to the agent, which forwards them to the scheduler (policies read them: loss for
Optimus-style policies, iteration time for Gavel's throughput estimates).

Outside an agent (no ROUNDHOUSE_ variables) the same script runs standalone: no lease, no
reports, ROUNDHOUSE_ITERATIONS iterations.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from socket import gethostname
from typing import Any

from roundhouse.agents import jobenv
from roundhouse.agents.elastic import ElasticData, Rescale, Scaler
from roundhouse.agents.jobenv import JobEnv
from roundhouse.wire import protocol
from roundhouse.wire.protocol import EXIT_DONE, EXIT_PREEMPTED

LEASE_BYTES = 8
_REVOKED = 1
# What the library itself reports beside a job's own metrics (they count against the wire's limit).
_OWN_METRICS = frozenset({"loss", "iter_time_s", "iters_per_s", "startup_s", "steady_iters_per_s", "checkpoint_s"})
_METRIC_NAME = re.compile(protocol.METRIC_RE)


def _checked_metrics(new: dict[str, Any], held: dict[str, float]) -> dict[str, float]:
    """`new` as numbers, if the wire can carry them beside the metrics `held` already: names of
    lower-case letters, digits and '_' (the wire's rule, checked here too so that a script run by
    hand does not crash only once an agent runs it), and at most the wire's number of names.
    Otherwise a ValueError naming the metric."""
    names = set(held) | _OWN_METRICS
    out = {}
    for name, value in new.items():
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(
                f"metric name {name!r}: use lower-case letters, digits and '_', starting with a letter (up to 32 characters)"
            )
        if name not in names and len(names) >= protocol.METRICS.max_len:
            raise ValueError(
                f"metric {name!r}: a job reports at most {protocol.METRICS.max_len - len(_OWN_METRICS)} metric names "
                f"besides the library's own ({', '.join(sorted(_OWN_METRICS))})"
            )
        names.add(name)
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"metric {name!r}: {value!r} is not a number") from None
    return out


# --- leases -------------------------------------------------------------------------------


class Lease:
    """This process's lease, as the agent keeps it: a memory-mapped byte, 0 while held."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = path
        self._map = None
        if path:
            with open(path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), LEASE_BYTES, access=mmap.ACCESS_READ)

    def revoked(self) -> bool:
        m = self._map
        return m is not None and m[0] == _REVOKED

    def signal(self) -> int:
        """The byte itself: 0 held, 1 revoked, 2 a resize requested (agents/elastic.py)."""
        m = self._map
        return m[0] if m is not None else 0

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    # The agent's side.
    @staticmethod
    def create(path: str | os.PathLike) -> None:
        with open(path, "wb") as f:
            f.write(b"\0" * LEASE_BYTES)

    @staticmethod
    def revoke(path: str | os.PathLike) -> None:
        with open(path, "r+b") as f:
            f.write(bytes([_REVOKED]))
            f.flush()


class CentralLease:
    """A lease checked by a round trip to the scheduler every time: what optimistic renewal
    avoids (Blox Fig. 19). Kept to measure the difference (benchmarks/lease_check.py)."""

    def __init__(self, scheduler: str, job: int, attempt: int, security=None, timeout_s: float = 10.0):
        import zmq

        self._zmq = zmq
        self._context = zmq.Context.instance()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        if security is not None:
            import logging

            security.apply(self._socket, logging.getLogger("roundhouse.client"))
        self._socket.connect(scheduler)
        self._job, self._attempt = job, attempt
        self._seq = protocol.Sequence()
        self._timeout_ms = int(timeout_s * 1000)

    def revoked(self) -> bool:
        self._socket.send(protocol.encode("lease", self._seq.next(), job=self._job, attempt=self._attempt))
        if not self._socket.poll(self._timeout_ms):
            raise TimeoutError("the scheduler did not answer a lease check")
        type_, _, body = protocol.decode(self._socket.recv(), {"lease_reply", "error"})
        if type_ == "error":
            raise RuntimeError(body["reason"])
        return not body["valid"]

    def close(self) -> None:
        self._socket.close()


# --- data position --------------------------------------------------------------------------


class ResumableSampler:
    """Sample indices epoch by epoch in a seeded order, from any (epoch, batch) position, so
    that a resumed job sees the same batches it would have seen. With several workers, each
    takes every `world_size`-th index of the epoch's order (like DistributedSampler)."""

    def __init__(self, length: int, batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        if length < batch_size * world_size:
            raise ValueError(f"a dataset of {length} samples has no full batch of {batch_size} for {world_size} worker(s)")
        self.length, self.batch_size, self.seed = length, batch_size, seed
        self.rank, self.world_size = rank, world_size
        per_rank = length // world_size
        self.per_epoch = per_rank - per_rank % batch_size
        self.epoch, self.start_batch = 0, 0

    def set_position(self, epoch: int, batch: int) -> None:
        self.epoch, self.start_batch = epoch, batch

    def __len__(self) -> int:
        return self.per_epoch

    def __iter__(self) -> Iterator[int]:
        import torch

        g = torch.Generator()
        g.manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.length, generator=g)[self.rank :: self.world_size][: self.per_epoch]
        return iter(order[self.start_batch * self.batch_size :].tolist())


class LeaseLoader:
    """Wraps a data loader: yields its batches, epoch after epoch, until the job's work is done
    or its lease ends (then it checkpoints). See the module docstring."""

    def __init__(self, job: Job, data: Iterable):
        self.job = job
        self.data = data
        self._stop_at: int | None = None

    def __len__(self) -> int:
        """The steps left (for a job counting samples, at its current batch: at least that many)."""
        job = self.job
        left = max(job.iterations - job.progress, 0)
        return -(-left // max(self._step_samples(), 1)) if job.counts == "samples" else left

    def __iter__(self):
        job = self.job
        batches = self._batches()
        last = job.pace.due = time.perf_counter()
        while True:
            if job.progress >= job.iterations:
                job.outcome = "done"
                return
            self._agree()
            if job.outcome == "resized":
                return  # this worker left the job in a resize
            if self._stop_at is not None and job.iteration >= self._stop_at:
                job.save_checkpoint()
                job.outcome = "preempted"
                job.log(f"preempted: checkpointed iteration {job.iteration} and stopping")
                return
            batch = next(batches)
            yield batch
            samples = self._step_samples()
            job.pace.hold(samples if job.counts == "samples" else 1, job.lease.revoked)
            now = time.perf_counter()
            job._step_done(now - last, samples)
            last = now

    def _step_samples(self) -> int:
        """The samples one step trains, all workers together: the elastic data's global batch
        (as it was cut for this step), else the batch size per worker the job was given times
        its workers."""
        data, job = self.data, self.job
        if getattr(data, "elastic", False):
            return int(data.batch_size) * int(data.world_size)
        return max(job.batch_size, 1) * job.world_size

    def _agree(self) -> None:
        """The lease check, and for several workers the per-iteration agreement on when to stop
        (the largest proposal) and when to checkpoint (rank 0's clock decides)."""
        job = self.job
        revoked = job.lease.revoked()
        due = job.checkpoint_due()
        scaler = job.scaler
        resize = scaler.requested()
        if job.world_size > 1:
            import torch
            import torch.distributed as dist

            # The scheduler tells rank 0 only; any worker told (its agent stopping, say) may propose.
            proposal = job.iteration + 1 if revoked and self._stop_at is None else 0
            flags = torch.tensor([proposal, 1 if due and job.rank == 0 else 0, *scaler.pack(resize)], dtype=torch.int64)
            try:
                dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            except Exception as err:  # a worker is gone: keep what this one holds, then stop
                job.stop_after_loss(f"a worker was lost: {err}")
                self._stop_at = job.iteration
                return
            if flags[0] > 0 and self._stop_at is None:
                self._stop_at = int(flags[0])
                job.log(f"revoked: all workers stop after iteration {self._stop_at}")
            if flags[1] and self._stop_at is None:
                job.save_checkpoint()
            resize = scaler.unpack(flags[2:].tolist())
        elif revoked and self._stop_at is None:
            self._stop_at = job.iteration
        elif due:
            job.save_checkpoint()
        if resize is not None and self._stop_at is None:
            change = job.scaling(resize)
            if job.outcome == "preempted":
                self._stop_at = job.iteration
            elif change is not None and not change.leaving:
                self._agree()  # with the new group, as a worker that has just joined does first

    def _batches(self) -> Iterator[Any]:
        data = self.data
        if getattr(data, "elastic", False):
            yield from data  # it keeps its own position (in samples)
            return
        n = len(data) if hasattr(data, "__len__") else 0
        epoch, offset = divmod(self.job.iteration, n) if n else (0, self.job.iteration)
        sampler = getattr(data, "sampler", None)
        while True:
            skip = offset
            if hasattr(sampler, "set_position"):
                sampler.set_position(epoch, offset)
                skip = 0
            elif hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
            got = 0
            for i, batch in enumerate(data):
                if i < skip:
                    continue
                got += 1
                yield batch
            if got == 0 and offset == 0:
                raise RuntimeError("the data loader yields no batches")
            epoch, offset = epoch + 1, 0


# How long an emulated step's wait sleeps before looking at its lease again.
_PACE_SLICE_S = 0.25


class Pace:
    """An emulated GPU's speed (`per_s` units a second; 0: as fast as it goes)."""

    def __init__(self, per_s: float):
        self.per_s = per_s
        self.due = 0.0  # when the last step was due (the loader sets the start)

    def hold(self, units: int = 1, stop: Callable[[], bool] | None = None) -> None:
        """Wait until the step just done is due at the emulated speed: the time of its `units`
        (one step, or the samples it trained) after the previous one ended. Time lost to a slow
        stretch, or to a sleep that overslept on a busy machine, is not made up later: no bursts
        above that speed. The wait is cut short once `stop()` is true (the lease revoked): at a
        very slow emulated speed a step could outlast the revoke's grace, and at one too slow
        for a number of seconds, last for ever."""
        if self.per_s <= 0:
            return
        due = self.due + units / self.per_s
        now = time.perf_counter()
        while due > now:
            time.sleep(min(due - now, _PACE_SLICE_S))
            now = time.perf_counter()
            if stop is not None and stop():
                break
        # When it actually ended (later than due if the sleep overslept), not when it was due.
        self.due = max(due, now)


# --- the job -------------------------------------------------------------------------------


class Job:
    """This training process, as its agent launched it."""

    def __init__(self, env: dict[str, str] | None = None):
        e = JobEnv.read(os.environ if env is None else env)
        self.job_id = e.job_id
        self.attempt = e.attempt
        self.rank = e.rank
        self.world_size = e.world_size
        self.local_rank = e.local_rank
        self.iterations = e.iterations
        self.batch_size = e.batch_size
        self.model = e.model
        self.seed = e.seed
        self.threads = e.threads
        self.checkpoint_dir = Path(e.checkpoint_dir)
        if self.checkpoint_dir.exists() and not self.checkpoint_dir.is_dir():
            raise ValueError(f"{jobenv.VARIABLES['checkpoint_dir']}={e.checkpoint_dir!r}: not a folder")
        self.checkpoint_every_s = e.checkpoint_every_s
        self.resume_path = e.resume
        self.resume_iteration = e.resume_iteration
        self.report_every_s = e.report_every_s
        self.pace_iters_per_s = e.pace_iters_per_s  # an emulated GPU's speed; 0: as fast as it goes
        self.launched_at = e.launched_at if e.launched_at is not None else time.time()
        self.master = (e.master_addr, e.master_port)
        self.dist_timeout_s = e.dist_timeout_s
        self.gpu = e.gpu
        try:
            self.lease = Lease(e.lease)
        except (OSError, ValueError) as err:  # missing, unreadable, or shorter than a lease
            raise ValueError(
                f"{jobenv.VARIABLES['lease']}={e.lease!r}: not a lease file the agent made ({_reason(err)})"
            ) from None
        self.join_generation = e.join_generation  # > 0: started by a resize, joining running workers
        self.counts = e.counts  # what the agent's iterations count (`progress`): steps, or samples
        self.lr_scale = e.lr_scale  # the factor for the job's own learning rate at launch (or None)
        self._agent = e.agent
        self.iteration, self.samples = 0, 0  # steps done; samples trained, all workers together
        self.start_iteration = self.start_progress = 0
        self.outcome: str | None = None
        self.checkpoint_path: str | None = None
        self.checkpoint_iteration: int | None = None  # (steps; and as `progress` counts)
        self.checkpoint_progress: int | None = None
        self.device = "cpu"
        self._tracked: dict[str, Any] = {}
        self._socket: Any = None
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000
        self._latest: dict[str, float] = {}
        self._window_s = 0.0
        self._window_n = 0
        self._last_report = 0.0
        self._last_checkpoint = time.time()
        self._first_step_at: float | None = None
        self._last_step_at = 0.0
        self._steady_from: tuple[float, int] | None = None
        self._checkpoint_s: list[float] = []
        self._distributed = False
        self.pace = Pace(self.pace_iters_per_s)
        self.scaler = Scaler(self)
        if self._agent:
            self._socket = _agent_socket(self._agent)  # now: a bad endpoint is said before any training

    @classmethod
    def from_env(cls) -> Job:
        return cls()

    @property
    def progress(self) -> int:
        """How far the job is as its agent counts it (`counts`): steps done, or samples trained
        (stopping at the first step at or past its work, it says it reached exactly that)."""
        if self.counts == "samples":
            return min(self.samples, self.iterations)
        return self.iteration

    def log(self, text: str) -> None:
        print(f"[job {self.job_id} attempt {self.attempt} rank {self.rank}] {text}", flush=True)

    # --- setting up ---
    def setup(self) -> Job:
        """Threads, device and (for several workers) the process group."""
        import torch

        if self.threads > 0:
            torch.set_num_threads(self.threads)
        if torch.cuda.is_available() and self.gpu not in (None, "-1"):
            self.device = "cuda"
        if self.world_size > 1:
            try:
                self.init_group()
            except Exception as err:
                if not self.join_generation:
                    raise
                self.stop_after_loss(f"joining the resized job failed: {err}")  # the others restart it
                self.finish()
        return self

    def init_group(self) -> None:
        """Join the job's process group (NCCL on GPUs, gloo on CPUs) at `master`."""
        import datetime

        import torch.distributed as dist

        backend = "nccl" if self.device == "cuda" else "gloo"
        dist.init_process_group(
            backend,
            init_method=f"tcp://{self.master[0]}:{self.master[1]}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(seconds=self.dist_timeout_s),
        )
        self._distributed = True

    # --- elastic jobs (agents/elastic.py) ---
    def elastic_data(self, dataset, batch_size: int = 0) -> ElasticData:
        """The dataset's batches for this worker, re-cut when the job is resized."""
        try:
            data = ElasticData(dataset, self.batch_size or batch_size, self.seed, self.rank, self.world_size)
        except ValueError as err:
            if not self.batch_size:
                raise
            raise ValueError(f"{jobenv.VARIABLES['batch_size']}={self.batch_size}: {err}") from None
        return self.scaler.attach(data)

    def on_rescale(self, callback) -> None:
        """Call `callback(Rescale)` after each resize this worker stays in (the learning rate...)."""
        self.scaler.callbacks.append(callback)

    def scaling(self, request: dict[str, int]) -> Rescale | None:
        """The scaling hook, at a step boundary, with the request every worker agreed on:
        re-form the job and return its new shape (world size, rank, batch size); the loader
        calls it. A worker lost on the way: checkpoint, and stop as preempted."""
        return self.scaler.scaling(request)

    def stop_after_loss(self, why: str) -> None:
        """A worker was lost: write the last complete iteration held here, stop as preempted."""
        self.scaler.stop_after_loss(why)

    def track(self, **objects: Any) -> None:
        """What a checkpoint holds: objects with state_dict()/load_state_dict()."""
        self._tracked.update(objects)

    def loader(self, data: Iterable) -> LeaseLoader:
        return LeaseLoader(self, data)

    # --- checkpoints ---
    def resume(self) -> int:
        """Load the checkpoint this attempt was given (if any); returns the iteration to start at."""
        import torch

        if self.join_generation > 0:
            try:  # a worker started by a resize: the state comes from rank 0
                self.scaler.broadcast_state()
            except Exception as err:
                self.stop_after_loss(f"joining the resized job failed: {err}")
                self.finish()
            self.scaler.generation = self.join_generation
            self.start_iteration, self.start_progress = self.iteration, self.progress
            self.log(f"joined as rank {self.rank} of {self.world_size} at iteration {self.iteration}")
            return self.iteration
        if not self.resume_path:
            self.log("starting at iteration 0")
            return 0
        state = _read_checkpoint(self.resume_path)
        self.load_state(state)
        if "rng" in state:
            torch.set_rng_state(state["rng"])
        _resumed(self, self.resume_path)
        return self.iteration

    def checkpoint_due(self) -> bool:
        every = self.checkpoint_every_s
        return every > 0 and time.time() - self._last_checkpoint >= every and self.iteration > (self.checkpoint_iteration or 0)

    def checkpoint_state(self) -> dict[str, Any]:
        import torch

        return {
            "job": self.job_id,
            "iteration": self.iteration,
            "samples": self.samples,
            "objects": {name: _unwrap(obj).state_dict() for name, obj in self._tracked.items()},
            "rng": torch.get_rng_state(),
            "elastic": self.scaler.state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        for name, obj in self._tracked.items():
            if name in state["objects"]:  # a checkpoint from before this object was tracked lacks it
                _unwrap(obj).load_state_dict(state["objects"][name])
        self.iteration = int(state["iteration"])
        self.samples = int(state.get("samples", 0))  # (a checkpoint from before samples were counted: none)
        self.scaler.load(state.get("elastic", {}))

    def save_checkpoint(self, alone: bool = False) -> str:
        """Rank 0 writes the tracked objects at this iteration (atomically); every worker waits
        until it is on disk. Returns the path. `alone`: this worker writes, whatever its rank
        (the others may be gone)."""
        started = time.perf_counter()
        path = self.checkpoint_dir / f"a{self.attempt}-i{self.progress}.pt"
        if self.checkpoint_iteration == self.iteration and self.checkpoint_path:
            return self.checkpoint_path  # nothing new since the last one
        if self.rank == 0 or alone:
            _write_checkpoint(self.checkpoint_state(), path)
        if self._distributed:
            import torch.distributed as dist

            dist.barrier()
        self.checkpoint_path, self.checkpoint_iteration, self.checkpoint_progress = str(path), self.iteration, self.progress
        self._last_checkpoint = time.time()
        self._checkpoint_s.append(time.perf_counter() - started)
        self._send("checkpointed", iteration=self.progress, path=str(path))
        return str(path)

    # --- metrics ---
    def _step_done(self, seconds: float, samples: int = 0) -> None:
        self.iteration += 1
        self.samples += samples
        now = self._last_step_at = time.time()
        if self._first_step_at is None:
            self._first_step_at = now
            self._latest["startup_s"] = now - self.launched_at  # process start to first iteration
        if self._steady_from is None and self.iteration - self.start_iteration >= 3:
            self._steady_from = (now, self.iteration)  # the first iterations warm up caches and allocators
        self._window_s += seconds
        self._window_n += 1
        if now - self._last_report >= self.report_every_s:
            self._flush_report(now)

    def report(self, loss: float | None = None, **metrics: float) -> None:
        """Record the latest loss and other metrics; they reach the scheduler with the next
        report (at most every ROUNDHOUSE_REPORT_EVERY seconds)."""
        new = {} if loss is None else {"loss": loss}
        new.update(metrics)
        self._latest.update(_checked_metrics(new, self._latest))

    def summary(self) -> dict[str, float]:
        """Measured figures: iterations per second (after warm-up), start-up and checkpoint time."""
        out = {}
        if self._steady_from is not None and self.iteration > self._steady_from[1]:
            t0, i0 = self._steady_from
            out["steady_iters_per_s"] = (self.iteration - i0) / max(self._last_step_at - t0, 1e-9)
        if self._first_step_at is not None:
            out["startup_s"] = self._first_step_at - self.launched_at
        if self._checkpoint_s:
            out["checkpoint_s"] = sum(self._checkpoint_s) / len(self._checkpoint_s)
        return out

    def _flush_report(self, now: float) -> None:
        values = dict(self._latest)
        if self._window_n:
            values["iter_time_s"] = self._window_s / self._window_n
            values["iters_per_s"] = self._window_n / max(self._window_s, 1e-9)
        self._window_s, self._window_n = 0.0, 0
        self._last_report = now
        self._send("report", iteration=self.progress, values={k: v for k, v in values.items() if _finite(v)})

    def finish(self) -> None:
        """Tell the agent how this attempt ended and exit (status 0 when done, 3 when preempted)."""
        outcome = self.outcome or ("done" if self.progress >= self.iterations else "preempted")
        summary = self.summary()
        self._latest.update(summary)
        self._flush_report(time.time())
        self._send(
            "exiting",
            outcome=outcome,
            iteration=self.progress,
            start_iteration=self.start_progress,
            checkpoint=self.checkpoint_path,
            checkpoint_iteration=self.checkpoint_progress if self.checkpoint_path else None,
        )
        self.log(f"{outcome} at {_where(self)} ({json.dumps({k: round(v, 4) for k, v in summary.items()})})")
        if self._socket is not None:
            self._socket.close(linger=3000)
            self._socket.context.term()  # waits until the exit message has left this process
        self.lease.close()
        if self._distributed:
            import torch.distributed as dist

            dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip the interpreter's teardown of torch (a second or more): everything that matters
        # (checkpoint files, the exit message) is complete by now.
        os._exit(EXIT_DONE if outcome in ("done", "resized") else EXIT_PREEMPTED)

    def _send(self, type_: str, **fields: Any) -> None:
        if not self._agent:
            return
        import zmq

        if self._socket is None:
            self._socket = _agent_socket(self._agent)

        frame = protocol.encode(type_, self._seq.next(), job=self.job_id, attempt=self.attempt, rank=self.rank, **fields)
        try:
            self._socket.send(frame, zmq.NOBLOCK)
        except zmq.Again:
            pass  # the agent is not reading: a metric report is not worth blocking training for


def _unwrap(obj: Any) -> Any:
    """The module inside a DistributedDataParallel wrapper (checkpoints hold the bare model, so
    a job resumes whatever its worker count)."""
    inner = getattr(obj, "module", None)
    return inner if inner is not None and hasattr(obj, "require_backward_grad_sync") else obj


def _resumed(job: Job, path: str) -> None:
    """The job has loaded checkpoint `path`: it starts there, if it holds the point the
    scheduler says it does."""
    job.start_iteration, job.start_progress = job.iteration, job.progress
    if job.resume_iteration is not None and job.progress != job.resume_iteration:
        held = f"{job.progress} samples" if job.counts == "samples" else f"iteration {job.progress}"
        raise RuntimeError(f"checkpoint {path} holds {held}, not {job.resume_iteration}")
    job.checkpoint_path, job.checkpoint_iteration, job.checkpoint_progress = path, job.iteration, job.progress
    job.log(f"resumed from {path} at {_where(job)}")


def _write_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write `state` to `path` atomically: to a temporary file, on disk (fsync) before it is
    renamed to `path`, so that a name never stands for half a checkpoint; a write that fails
    leaves nothing behind and says which folder (ROUNDHOUSE_CHECKPOINT_DIR) it was. The
    temporary file is named for this process and host (`a1-i40.tmp1234@node3`): one that a
    killed worker left is removed by the next save or load in its folder."""
    import torch

    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}@{_HOST}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path.parent)
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _sync_folder(path.parent)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(
            f"{jobenv.VARIABLES['checkpoint_dir']}={str(path.parent)!r}: cannot write checkpoint {path.name} ({_reason(err)})"
        ) from None


def _read_checkpoint(path: str) -> dict[str, Any]:
    """The checkpoint at `path` (ROUNDHOUSE_RESUME), or a ValueError naming it and why not."""
    import torch

    where = f"{jobenv.VARIABLES['resume']}={path!r}"
    remove_stale_temporaries(Path(path).parent)
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # missing, unreadable, or not a file torch.save wrote
        raise ValueError(f"{where}: cannot read the checkpoint ({_reason(err)})") from None
    if not isinstance(state, dict) or not isinstance(state.get("objects"), dict) or "iteration" not in state:
        raise ValueError(f"{where}: not a checkpoint this library wrote")
    return state


# This host's name as a checkpoint's temporary file carries it (no path separator in it).
_HOST = re.sub(r"[^A-Za-z0-9._-]", "_", gethostname()) or "host"

# A temporary checkpoint file `_write_checkpoint` writes: the checkpoint's name without its
# suffix, the writer's process id and, since it carries one, its host.
_TEMPORARY = re.compile(r"a\d+-i\d+\.tmp(?P<pid>\d+)(?:@(?P<host>[A-Za-z0-9._-]+))?")


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary checkpoint files in `folder` whose writers no longer exist (a
    worker killed while it wrote one); returns those removed. A file is left alone while its
    process lives, and when it was written on another host (storage every node shares: that
    process cannot be seen from here). One named without a host, as earlier versions named
    them, is taken to be this host's. Nothing here stops a save or a load: a folder that cannot
    be listed, or a file gone meanwhile, is passed over."""
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TEMPORARY.fullmatch(name)
        if m is None or m["host"] not in (None, _HOST) or _alive(int(m["pid"])):
            continue
        with contextlib.suppress(OSError):
            (folder / name).unlink()
            removed.append(folder / name)
    return removed


def _alive(pid: int) -> bool:
    """Whether process `pid` exists on this host and is not a zombie (killed and not yet
    reaped: it writes nothing more). This process is alive, and so is one it may not signal."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:  # (a number no process id reaches)
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:  # (no /proc: it exists)
        return True
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] != "Z"


def _agent_socket(endpoint: str) -> Any:
    """A socket to the agent (ROUNDHOUSE_AGENT), or a ValueError naming it if it is no endpoint."""
    import zmq

    socket: Any = zmq.Context.instance().socket(zmq.PUSH)
    socket.setsockopt(zmq.SNDHWM, 1000)
    socket.setsockopt(zmq.LINGER, 3000)
    try:
        socket.connect(endpoint)
    except zmq.ZMQError as err:
        socket.close(linger=0)
        raise ValueError(f"{jobenv.VARIABLES['agent']}={endpoint!r}: not an endpoint to report to ({err})") from None
    return socket


def _reason(err: BaseException) -> str:
    """An error's own words, without the file name it may repeat."""
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (where the system allows opening a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _where(job: Job) -> str:
    return f"iteration {job.iteration}" + (f" ({job.progress} samples)" if job.counts == "samples" else "")


def _finite(v: float) -> bool:
    return v == v and v not in (float("inf"), float("-inf"))


_current: Job | None = None


def current() -> Job:
    """The process's Job (made from the environment on first use)."""
    global _current
    if _current is None:
        _current = Job.from_env()
    return _current


def report(loss: float | None = None, **metrics: float) -> None:
    """`report(loss=..., **metrics)` for the process's job (see Job.report)."""
    current().report(loss, **metrics)
