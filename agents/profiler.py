"""Measure the example workloads on this machine, for the simulator's profile table.

For each model, batch size and worker count, `profile()` runs the real workload exactly as the
agent would (one process per worker in its own session, forked from a process that has imported
PyTorch: agents/agent/forkserver.py; data-parallel over gloo or NCCL; the client library's lease
and reports), `concurrent` copies at once (fake GPUs on one machine share its CPUs; profiling
them side by side measures what each gets), and:

1. starts the job, then `concurrent - 1` companions (jobs on the node's other fake GPUs:
   copies of itself, or the models given with `beside`, each in turn), one after another,
   each once the previous one trains steadily (so that launches are timed while other jobs
   train, as in a busy cluster); once all train, counts the job's iterations for `seconds`
   (from its reports), then revokes every lease: the launch overhead is process start to
   first iteration, the checkpoint overhead the time from the revocation to the job's exit;
2. relaunches the job from its checkpoint for a few iterations: the launch overhead of a
   resumed job.

The rows it returns are the profile table's (`model, batch_size, gpu_type, gpus, placement,
iters_per_s`, placement `consolidated`); the overheads are what the graph settings `restore`
(launch to first iteration) and `checkpoint` (revocation to free GPUs) stand for.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
import zmq

from roundhouse.agents import jobenv
from roundhouse.agents.agent.forkserver import ForkServer
from roundhouse.agents.agent.processes import start_workload, worker_environment
from roundhouse.agents.client import Lease
from roundhouse.agents.ports import LOWEST, first_outgoing_port
from roundhouse.agents.workloads import workload_for
from roundhouse.errors import RoundhouseError, UsageError
from roundhouse.wire import protocol
from roundhouse.wire.workloads import WORKLOADS

DEFAULT_BATCH = {model: w.default_batch for model, w in WORKLOADS.items()}
# How much of a failed workload's log a message quotes (its end: where the error is).
LOG_TAIL_CHARS = 2000
# How long a step of measuring may take beyond the seconds it counts iterations for: starting a
# workload on a loaded machine, its first iterations, its checkpoint and exit.
STEP_SLACK_S = 300.0
# The samples in each example workload's fixed dataset: a step takes a batch from it for every
# worker, and a workload given a larger step fails as it starts.
DATASET_SAMPLES = {model: w.samples for model, w in WORKLOADS.items()}
# What the table's columns hold, said in the file it writes (lines of a CSV comment).
COLUMNS_NOTE = (
    "# columns: model; batch_size, each worker's batch; gpu_type; gpus, the job's workers (one a GPU);",
    "# placement, consolidated (all on this machine); iters_per_s, the job's training steps a second",
    "# (a step trains a batch on every worker)",
)


class ProfilingFailed(RoundhouseError):
    """A measurement failed (a workload crashed or hung): said with the model and the end of
    its log (exit status 2, as for an element that failed in a run)."""


@attrs.frozen
class Measurement:
    model: str
    batch_size: int
    gpus: int
    iters_per_s: float  # per job (what the profile table holds), mean over the concurrent copies
    launch_s: float  # process start to first iteration, fresh
    resume_s: float  # process start to first iteration, from a checkpoint
    checkpoint_s: float  # revocation to the last worker's exit


@attrs.frozen
class ProfileResult:
    gpu_type: str
    concurrent: int
    measurements: tuple[Measurement, ...]
    beside: tuple[str, ...] = ()

    @property
    def restore_s(self) -> float:
        """Mean launch overhead of a job started from a checkpoint (the `restore` setting)."""
        return sum(m.resume_s for m in self.measurements) / len(self.measurements)

    @property
    def fresh_launch_s(self) -> float:
        return sum(m.launch_s for m in self.measurements) / len(self.measurements)

    @property
    def checkpoint_s(self) -> float:
        return sum(m.checkpoint_s for m in self.measurements) / len(self.measurements)

    def csv(self, header: str = "") -> str:
        if self.concurrent < 2:
            beside = "each measured alone"
        else:
            others = f"each of {', '.join(self.beside)} in turn" if self.beside else "copies of itself"
            beside = f"each measured with {self.concurrent - 1} other job(s) training beside it ({others})"
        lines = [
            # (every line of the header a comment: a line break in it must not end the comment)
            *(f"# {line}" for line in (header or "measured by `roundhouse profile`").splitlines() or [""]),
            f"# {beside}; gpu_type {self.gpu_type} names the (possibly fake) GPUs measured",
            f"# launch overhead: {self.fresh_launch_s:.2f}s fresh, {self.restore_s:.2f}s from a checkpoint (graph setting restore)",
            f"# revocation to exit, checkpoint included: {self.checkpoint_s:.2f}s (graph setting checkpoint)",
            *COLUMNS_NOTE[:-1],
            # (the mean is said only of a rate that is one: measured beside several models in turn)
            COLUMNS_NOTE[-1] + ("; measured beside several models in turn, the mean over them" if len(self.beside) > 1 else ""),
            "model,batch_size,gpu_type,gpus,placement,iters_per_s",
        ]
        for m in self.measurements:
            lines.append(f"{m.model},{m.batch_size},{self.gpu_type},{m.gpus},consolidated,{m.iters_per_s:.4f}")
        return "\n".join(lines) + "\n"


def profile(
    models: list[str],
    batch_sizes: dict[str, list[int]] | None = None,
    gpus: Sequence[int] = (1,),
    gpu_type: str = "V100",
    seconds: float = 5.0,
    concurrent: int = 1,
    threads: int = 1,
    log=print,
    beside: list[str] | None = None,
) -> ProfileResult:
    """Measure each model, batch size and worker count. With `concurrent` K > 1, K−1 other jobs
    train beside it (fake GPUs share this machine's CPUs): copies of itself, or, with `beside`,
    each of those models in turn (the figures are then averaged over them)."""
    for name, value, low in (("concurrent", concurrent, 1), ("threads", threads, 1)):
        if value < low:
            raise UsageError(f"{name} {value}: must be at least {low}")
    if not 0 < seconds < float("inf"):
        raise UsageError(f"seconds {seconds}: must be a finite time above 0")
    if not models or not gpus:
        raise UsageError(f"give at least one {'model' if not models else 'worker count'} to measure")
    if beside and concurrent < 2:
        raise UsageError(f"beside {', '.join(beside)}: only with concurrent 2 or more (the jobs beside the measured one)")
    for model in [*models, *(beside or ())]:
        if workload_for(model) is None:
            raise UsageError(f"no example workload for model {model!r} (have: {', '.join(DEFAULT_BATCH)})")
    for model in models:
        for batch in (batch_sizes or {}).get(model) or [DEFAULT_BATCH.get(model, 16)]:
            check_batch(model, batch, gpus)
    for other in beside or ():
        check_batch(other, DEFAULT_BATCH.get(other, 16), gpus)
    out = []
    with tempfile.TemporaryDirectory(prefix="rh-profile-") as tmp:
        runner = _Runner(Path(tmp), threads)
        try:
            for model in models:
                for batch in (batch_sizes or {}).get(model) or [DEFAULT_BATCH.get(model, 16)]:
                    for g in gpus:
                        others = [(b, DEFAULT_BATCH.get(b, 16)) for b in beside] if beside else [(model, batch)]
                        try:
                            runs = [runner.measure(model, batch, g, seconds, [o] * (concurrent - 1)) for o in others]
                        except RuntimeError as err:
                            raise ProfilingFailed(f"profiling {model} (batch {batch}, {g} GPU(s)): {err}") from None
                        mean = lambda f, runs=runs: sum(f(r) for r in runs) / len(runs)  # noqa: E731
                        m = Measurement(
                            model,
                            batch,
                            g,
                            mean(lambda r: r.iters_per_s),
                            mean(lambda r: r.launch_s),
                            mean(lambda r: r.resume_s),
                            mean(lambda r: r.checkpoint_s),
                        )
                        log(
                            f"{model:15s} batch {batch:4d} x{g} GPU(s): {m.iters_per_s:8.2f} it/s, launch {m.launch_s:.2f}s "
                            f"(resume {m.resume_s:.2f}s), checkpoint+exit {m.checkpoint_s:.2f}s"
                        )
                        out.append(m)
        finally:
            runner.close()
    return ProfileResult(gpu_type, concurrent, tuple(out), tuple(beside or ()))


def check_batch(model: str, batch: int, gpus: Sequence[int], where: str = "") -> None:
    """Refuse, before anything is measured, a batch size that the model's example workload
    cannot take from its dataset on one of the worker counts (`where`: the option to blame)."""
    samples = DATASET_SAMPLES.get(model)
    if batch < 1:
        raise UsageError(f"{where + ': ' if where else ''}{model}: batch size {batch:,}; give 1 or more")
    for g in gpus:
        if g < 1:
            raise UsageError(f"{where + ': ' if where else ''}{g:,} GPU(s); give 1 or more")
        if samples is not None and batch * g > samples:
            raise UsageError(
                f"{where + ': ' if where else ''}{model}'s example workload has a dataset of {samples:,} samples, "
                f"too few for batch size {batch:,} on each of {g:,} GPU(s) (at most {samples // g:,} a GPU)"
            )


class _Runner:
    """Runs workload processes as an agent would, collecting their reports on a local socket."""

    slack_s = STEP_SLACK_S  # (a test shortens it to see a hung workload killed)

    def __init__(self, folder: Path, threads: int):
        self.folder = folder
        self.threads = threads
        self.ctx = zmq.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.endpoint = f"ipc://{folder}/reports.sock"
        self.pull.bind(self.endpoint)
        self.jobs = 0
        self.models: dict[int, str] = {}  # job -> the model it trains
        self.ports: set[int] = set()  # the rendezvous ports given to jobs
        self.workers: list = []  # every worker process started, to end those still running on close
        self.forks = ForkServer(worker_environment())
        try:
            self.forks.wait_ready()  # so that every launch is timed as the agent makes it
        except BaseException:  # (interrupted while PyTorch loads: no server left running)
            self.close()
            raise

    def _free_port(self) -> int:
        """A rendezvous port for a job: one the system has free now, and none this runner has
        given another job (the jobs profiled side by side on this machine must not meet). It is
        taken below the system's range of ports for outgoing connections, so that no connection
        another process opens is given it between this check and the job's listening; the search
        starts at a random port, so that two profilers at once start apart."""
        lo, hi = LOWEST, max(LOWEST + 1, first_outgoing_port())
        start = random.randint(lo, hi - 1)
        for k in range(hi - lo):
            port = lo + (start - lo + k) % (hi - lo)
            if port in self.ports:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:  # (taken)
                    continue
            self.ports.add(port)
            return port
        raise ProfilingFailed(f"no free port from {lo} to {hi - 1} for a job's rendezvous")

    def close(self) -> None:
        """End every worker still running (measuring interrupted, or failed in a way no step
        caught) and the fork server: a worker started as a new process, when the fork server is
        not ready, would otherwise train on for as long as the process that profiled lives."""
        try:
            self._kill({0: [(0, None, proc) for proc in self.workers]})
        finally:
            self.forks.close()
            self.pull.close(linger=0)
            self.ctx.term()

    def _spawn(
        self,
        job: int,
        attempt: int,
        model: str,
        batch: int,
        gpus: int,
        iterations: int,
        port: int,
        resume: tuple[str, int] | None,
    ):
        self.models[job] = model
        module = workload_for(model)
        if module is None:  # (`profile()` refuses such a model before measuring)
            raise RuntimeError(f"no example workload for model {model!r}")
        procs = []
        for rank in range(gpus):
            lease = self.folder / f"lease-{job}-{attempt}-{rank}"
            Lease.create(lease)
            env = worker_environment()
            env.update(
                jobenv.variables(
                    rank=rank,
                    world_size=gpus,
                    local_rank=rank,
                    master_addr="127.0.0.1",
                    master_port=port,
                    job_id=job,
                    attempt=attempt,
                    lease=lease,
                    agent=self.endpoint,
                    iterations=iterations,
                    batch_size=batch,
                    checkpoint_dir=self.folder / f"ckpt-{job}",
                    checkpoint_every_s=0.0,
                    model=model,
                    seed=job,
                    threads=self.threads,
                    report_every_s=0.2,
                    launched_at=time.time(),
                    resume=resume[0] if resume else None,
                    resume_iteration=resume[1] if resume else None,
                ),
                GLOO_SOCKET_IFNAME="lo",
                OMP_NUM_THREADS=str(self.threads),
            )
            log = self.folder / f"job-{job}-{attempt}-{rank}.log"
            proc = start_workload(self.forks, module, env, self.folder, log)
            self.workers.append(proc)
            procs.append((rank, lease, proc))
        return procs

    def measure(self, model: str, batch: int, gpus: int, seconds: float, companions: list[tuple[str, int]]) -> Measurement:
        """Start the job, then its companions (jobs on the other fake GPUs) one after another,
        each once the previous trains steadily (so that launches are timed while other jobs
        train, as in a busy cluster); count the job's iterations for `seconds` while all train;
        revoke them all; then relaunch the job from its checkpoint alone."""
        state: dict[int, dict] = {}
        procs: dict[int, list] = {}
        warm = 5  # iterations before a copy counts as running steadily

        def start(what: tuple[str, int], attempt: int = 1, resume=None, iterations=10**9):
            # Far more iterations than needed: the lease ends the run.
            self.jobs += 1
            job = self.jobs if resume is None else resume[2]
            procs[job] = self._spawn(job, attempt, what[0], what[1], gpus, iterations, self._free_port(), resume)
            state[job] = {"reports": [], "final": None, "revoked_at": None}
            return job

        def warmed(job) -> bool:
            return any(it >= warm for _, it in state[job]["reports"])

        def ended(job) -> bool:
            # Its workers gone and rank 0's last message (`exiting`) read: the reports before it
            # may still be on their way when the process has exited.
            return all(p.poll() is not None for _, _, p in procs[job]) and state[job]["final"] is not None

        jobs = []
        for what in [(model, batch), *companions]:
            jobs.append(start(what))
            self._pump(state, procs, lambda: warmed(jobs[-1]))
        t0 = time.time()
        self._pump(state, procs, lambda: time.time() - t0 >= seconds, seconds)
        for job in jobs:
            state[job]["revoked_at"] = time.time()
            Lease.revoke(procs[job][0][1])
        self._pump(state, procs, lambda: all(ended(j) for j in jobs))
        done_at = time.time()
        for job in jobs:
            self._check(job, procs[job])
        s = state[jobs[0]]
        window = [(t, it) for t, it in s["reports"] if t0 <= t <= s["revoked_at"]]
        if len(window) < 2:
            raise RuntimeError(f"too few reports from a profiled {model} run; measure for longer (--seconds)")
        (ta, ia), (tb, ib) = window[0], window[-1]
        rate = (ib - ia) / max(tb - ta, 1e-9)
        launch = sum(state[j]["startup_s"] for j in jobs) / len(jobs)
        final = s["final"] or {}
        point = (final.get("checkpoint"), final.get("checkpoint_iteration") or 0, jobs[0])
        job = start((model, batch), 2, point, iterations=point[1] + 3)
        self._pump(state, procs, lambda: ended(job))
        self._check(job, procs[job])
        return Measurement(model, batch, gpus, rate, launch, state[job]["startup_s"], done_at - s["revoked_at"])

    def _pump(self, state, procs, until, seconds: float = 0.0) -> None:
        """Collect rank 0's reports (time, iteration) until `until()` holds: for at most `seconds`
        (what the step counts for) and the slack; a worker that fails ends it at once."""
        timeout_s = seconds + self.slack_s
        deadline = time.time() + timeout_s
        while not until():
            # Every time round, not only after a report: a workload that dies before its first
            # report (a bad batch size, a failed import) is said at once, with its log.
            for job, p in procs.items():
                self._check(job, p, running=procs)
            if time.time() > deadline:
                stuck = [job for job, p in procs.items() if any(proc.poll() is None for _, _, proc in p)]
                self._kill(procs)
                tail = self._log_tail(stuck[0]) if stuck else ""
                raise RuntimeError(
                    f"the workloads did not get to the next step of measuring within {timeout_s:g} s"
                    + (f"; the end of {self._what(stuck[0])}'s log:\n{tail}" if tail else "")
                )
            if self.pull.poll(50):
                self._collect(state)

    def _collect(self, state) -> None:
        """Take in every report waiting on the socket (rank 0's only)."""
        while True:
            try:
                type_, _, body = protocol.decode(self.pull.recv(zmq.NOBLOCK), {"report", "checkpointed", "exiting"})
            except zmq.Again:
                return
            s = state.get(body["job"])
            if s is None or body["rank"] != 0:
                continue
            if type_ == "report":
                s["reports"].append((time.time(), body["iteration"]))
                if "startup_s" in body["values"]:
                    s["startup_s"] = body["values"]["startup_s"]
            elif type_ == "exiting":
                s["final"] = body

    def _check(self, job: int, workers, running=None) -> None:
        """Raise if one of the job's workers has failed, quoting the end of its log; the
        processes in `running` (a step's, by job) are killed first, so that none is left behind."""
        for rank, _, proc in workers:
            code = proc.poll()
            if code is not None and code not in (0, protocol.EXIT_PREEMPTED):
                if running is not None:
                    self._kill(running)
                raise RuntimeError(
                    f"{self._what(job)} failed (exit status {code}); the end of its log:\n{self._log_tail(job, rank)}"
                )

    @staticmethod
    def _kill(procs) -> None:
        """Kill every worker still running, by its process group (each has its own session, as
        the agent's do), and wait for their ends."""
        alive = [proc for p in procs.values() for _, _, proc in p if proc.poll() is None]
        for proc in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10.0)

    def _what(self, job: int) -> str:
        return f"the {self.models.get(job, 'profiled')} workload"

    def _log_tail(self, job: int, rank: int = 0) -> str:
        """The end of the log of a job's latest attempt (of its worker `rank`)."""
        logs = sorted(self.folder.glob(f"job-{job}-*-{rank}.log"))
        return logs[-1].read_text(errors="replace")[-LOG_TAIL_CHARS:].rstrip() if logs else ""
