"""The job processes on a node: launching each job's workers (one process per GPU, with the
environment the client library reads; a launch onto a GPU that a previous job still holds waits
until it is free), signalling them, and reaping their exits into exit reports. Each worker leads
its own process group: the processes it starts are signalled with it, killed when it has exited,
and killed by the guardian if the agent dies."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import attrs

from roundhouse.agents import jobenv
from roundhouse.agents.agent.forkserver import ForkedWorker, ForkServer, die_with_parent
from roundhouse.agents.agent.guardian import Guardian, kill_group
from roundhouse.agents.agent.job_reports import JobReports
from roundhouse.agents.client import Lease
from roundhouse.agents.elastic import write_request
from roundhouse.wire import protocol
from roundhouse.wire.protocol import EXIT_DONE, EXIT_PREEMPTED, RefusalLog

log = logging.getLogger("roundhouse.agent")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
RANKS_MOST = protocol.RANK.hi + 1  # the largest world size a launch can carry


@attrs.define(eq=False)
class Worker:
    job: int
    attempt: int
    rank: int
    gpu: int
    lease_path: Path
    log_path: Path
    process: subprocess.Popen | ForkedWorker | None = None
    launched_at: float = 0.0
    start_iteration: int = 0
    iteration: int = 0
    checkpoint: str | None = None
    checkpoint_iteration: int | None = None
    final: dict | None = None
    revoked_at: float | None = None
    terminate_at: float | None = None
    killed: bool = False
    spec: dict | None = None  # the launch, while waiting for its GPU

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.job, self.attempt, self.rank)


class Workers:
    """The node's workers, by (job, attempt, rank); `report_exit` takes each one's exit."""

    def __init__(
        self,
        gpus: set[int],
        reports: JobReports,
        send,
        report_exit,
        counters: dict[str, int],
        threads_per_gpu: int = 0,
        emulate: bool = False,
    ):
        self.gpus = gpus
        self.reports = reports
        self.send = send
        self.report_exit = report_exit
        self.counters = counters
        self.threads_per_gpu = threads_per_gpu
        self.emulate = emulate
        self.workdir: Path | None = None  # set once the work folder is made
        self.by_key: dict[tuple[int, int, int], Worker] = {}
        self.waiting: deque[Worker] = deque()  # launches whose GPU is still busy
        self._gpu_busy: dict[int, tuple[int, int, int]] = {}
        self.forks: ForkServer | None = None
        self.guardian: Guardian | None = None

    def open(self) -> None:
        """Start the guardian (agents/agent/guardian.py), which kills the workers' process
        groups if the agent dies, and the fork server (agents/agent/forkserver.py): workload
        launches wait until it has imported PyTorch, then fork from it, unless it fails, when
        they start processes."""
        self.guardian = Guardian()
        self.forks = ForkServer(worker_environment())

    def close(self) -> None:
        if self.forks is not None:
            self.forks.close()
            self.forks = None
        if self.guardian is not None:
            self.guardian.close()
            self.guardian = None

    def get(self, key: tuple[int, int, int]) -> Worker | None:
        return self.by_key.get(key)

    def all(self) -> list[Worker]:
        return list(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    def launch(self, body: dict, stopping: bool, known) -> None:
        """A launch from the scheduler: refused (ranks that cannot all run, a GPU this node
        lacks or another rank of the attempt holds, a resume point past its iterations, nothing
        to run, text no worker can be given), preempted at once (the agent is stopping), or its
        workers queued for their GPUs. `known(key)` says whether that worker ran here and exited
        (a repeated or stale launch: not run again)."""

        def here(rank: int) -> bool:  # (a repeated launch's rank: its own exit report ends it)
            return (body["job"], body["attempt"], rank) in self.by_key or known((body["job"], body["attempt"], rank))

        reason = bad_launch(body, self.gpus) or _no_program(body) or shared_gpu(body, self.by_key.values())
        if reason:
            refuse_launch(body, reason, lambda rank: self._end_launch(body, rank, "failed", reason, permanent=True), here)
            return
        if stopping:
            for r in body["ranks"]:
                if not here(r["rank"]):
                    self._end_launch(body, r["rank"], "preempted", "the agent is stopping", permanent=False)
            return
        for r in body["ranks"]:
            key = (body["job"], body["attempt"], r["rank"])
            if key in self.by_key or known(key):
                if key not in self.by_key:
                    ignored_launch(*key)
                continue  # a repeated launch
            w = Worker(
                body["job"],
                body["attempt"],
                r["rank"],
                r["gpu"],
                self.workdir / "leases" / f"{body['job']}-{body['attempt']}-{r['rank']}",
                self.workdir / "logs" / f"job-{body['job']}-attempt-{body['attempt']}-rank-{r['rank']}.log",
            )
            w.spec = body
            w.start_iteration = w.iteration = body.get("resume_iteration") or 0
            w.checkpoint, w.checkpoint_iteration = body.get("resume"), body.get("resume_iteration")
            self.by_key[key] = w
            self.waiting.append(w)
        self.start_waiting()

    def resize(self, body: dict, stopping: bool) -> bool:
        return resize(self, body, stopping)

    def _end_launch(self, body: dict, rank: int, outcome: str, reason: str, permanent: bool) -> None:
        end_unstarted(self.report_exit, body, rank, outcome, reason, permanent)

    def start_waiting(self) -> None:
        for w in list(self.waiting):
            holder = self._gpu_busy.get(w.gpu)
            if holder is not None and holder != w.key:
                continue
            if w.spec.get("workload") and self.forks is not None and not self.forks.lost and not self.forks.ready():
                continue  # the fork server is still importing; a new process would import as long
            self.waiting.remove(w)
            self._spawn(w)

    def _spawn(self, w: Worker) -> None:
        spec = w.spec
        argv = [sys.executable, "-m", spec["workload"]] if spec.get("workload") else list(spec.get("command") or [])
        try:
            job_dir = self.workdir / "jobs" / f"job-{w.job}"
            job_dir.mkdir(parents=True, exist_ok=True)
            Lease.create(w.lease_path)
            env = self._environment(w, spec)
            if spec.get("workload"):
                w.process = start_workload(self.forks, spec["workload"], env, job_dir, w.log_path)
            else:
                w.process = spawn_worker(argv, env, job_dir, w.log_path)
        except Exception as err:  # (whatever it is, the worker ends here, reported: none is left half-started)
            reason = f"cannot start {argv[:1]}: {err or type(err).__name__}"
            # (a bug, not the launch's fault, is logged with its traceback)
            known = isinstance(err, (OSError, ValueError))
            log.warning("job %d attempt %d rank %d: %s", w.job, w.attempt, w.rank, reason, exc_info=not known)
            self.by_key.pop(w.key, None)
            w.process = None
            try:
                w.lease_path.unlink()
            except OSError:
                pass
            self.report_exit(
                w.job,
                w.attempt,
                w.rank,
                "failed",
                w.start_iteration,
                w.start_iteration,
                w.checkpoint,
                w.checkpoint_iteration,
                None,
                reason,
                permanent=True,
            )
            return
        if self.guardian is not None:
            self.guardian.watch(w.process.pid)  # (it leads its own process group)
        w.launched_at = time.time()
        self._gpu_busy[w.gpu] = w.key
        self.counters["launched"] += 1
        log.info(
            "started job %d attempt %d rank %d/%d on GPU %d (pid %d)%s",
            w.job,
            w.attempt,
            w.rank,
            spec["world_size"],
            w.gpu,
            w.process.pid,
            f" from iteration {w.start_iteration}" if spec.get("resume") else "",
        )
        self.send("started", job=w.job, attempt=w.attempt, rank=w.rank)

    def _environment(self, w: Worker, spec: dict) -> dict[str, str]:
        """The worker's environment: the agent's, with the variables the job reads (agents/jobenv.py)."""
        env = worker_environment()
        env.update(
            jobenv.variables(
                gpu=w.gpu,
                rank=w.rank,
                local_rank=sum(1 for r in spec["ranks"] if r["rank"] < w.rank),
                world_size=spec["world_size"],
                master_addr=spec["master_addr"],
                master_port=spec["master_port"],
                job_id=w.job,
                attempt=w.attempt,
                lease=w.lease_path,
                agent=self.reports.endpoint,
                iterations=spec["iterations"],
                batch_size=spec["batch_size"],
                checkpoint_dir=spec["checkpoint_dir"],
                checkpoint_every_s=spec["checkpoint_every_s"],
                model=spec.get("model") or "",
                seed=spec.get("seed") or 0,
                launched_at=time.time(),
                threads=self.threads_per_gpu if self.threads_per_gpu > 0 else None,
                pace_iters_per_s=spec["iters_per_s"] if self.emulate and spec.get("iters_per_s") else None,
                resume=spec.get("resume") or None,
                resume_iteration=(spec.get("resume_iteration") or 0) if spec.get("resume") else None,
                join_generation=spec.get("join_generation"),
                counts=spec.get("counts"),
                lr_scale=spec.get("lr_scale"),
            )
        )
        if self.threads_per_gpu > 0:
            env["OMP_NUM_THREADS"] = str(self.threads_per_gpu)
        if spec["master_addr"].startswith("127.") or spec["master_addr"] == "localhost":
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        return env

    def terminate(self, w: Worker, hard: bool) -> None:
        """Signal the worker's process group: SIGKILL if `hard`, else SIGTERM (SIGKILL 5 s later)."""
        if w.process is None or w.process.poll() is not None:
            return
        w.killed = True
        try:
            os.killpg(w.process.pid, signal.SIGKILL if hard else signal.SIGTERM)
        except ProcessLookupError:
            return
        if not hard and w.terminate_at is None:
            w.terminate_at = time.time() + 5.0  # then SIGKILL

    def reap(self, wait: bool = False) -> None:
        """Report the exits of the workers that have exited (all of them, waiting, if `wait`)."""
        for w in list(self.by_key.values()):
            if w.process is None:
                continue
            code = w.process.wait() if wait else w.process.poll()
            if code is None:
                continue
            self.reports.drain()  # its last report arrived before it exited
            if w.final is None and code in (EXIT_DONE, EXIT_PREEMPTED):
                # The report left the process before it exited, but may still be in transit.
                deadline = time.time() + 1.0
                while w.final is None and time.time() < deadline:
                    self.reports.wait(50)
            # What it started and left behind goes with it (its group's id cannot have been
            # reused while any of them lives).
            kill_group(w.process.pid)
            if self.guardian is not None:
                self.guardian.forget(w.process.pid)
            self._gpu_busy.pop(w.gpu, None)
            del self.by_key[w.key]
            try:
                w.lease_path.unlink()
            except FileNotFoundError:
                pass
            final = w.final or {}
            if code == EXIT_DONE and final.get("outcome", "done") == "done":
                outcome, reason = "done", ""
            elif code in (EXIT_DONE, EXIT_PREEMPTED) and final.get("outcome") == "preempted":
                outcome, reason = "preempted", ""
            elif code == EXIT_DONE and final.get("outcome") == "resized":
                outcome, reason = "resized", "left the job in a resize"
            elif w.killed:
                outcome, reason = "killed", "terminated by the agent"
            else:
                outcome = "failed"
                what = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
                reason = f"{what}; last lines of {w.log_path}: {_tail(w.log_path)}"
            iteration = _within_launch(w, max(final.get("iteration", 0), w.iteration))
            self.report_exit(
                w.job,
                w.attempt,
                w.rank,
                outcome,
                iteration,
                final.get("start_iteration", w.start_iteration),
                final.get("checkpoint") or w.checkpoint,
                final.get("checkpoint_iteration", w.checkpoint_iteration),
                code,
                reason,
                permanent=False,
            )

    def end_unstarted(self, w: Worker, outcome: str, reason: str) -> None:
        """A worker still waiting for its GPU ends without having run."""
        self.by_key.pop(w.key, None)
        self.report_exit(
            w.job,
            w.attempt,
            w.rank,
            outcome,
            w.start_iteration,
            w.start_iteration,
            w.checkpoint,
            w.checkpoint_iteration,
            None,
            reason,
            permanent=False,
        )

    def running(self) -> list[dict]:
        """The workers as registering and heartbeats list them."""
        out = []
        for w in self.by_key.values():
            proc = {"job": w.job, "attempt": w.attempt, "rank": w.rank, "gpu": w.gpu, "iteration": int(w.iteration)}
            if w.checkpoint is not None and w.checkpoint_iteration is not None:
                proc.update(checkpoint=w.checkpoint, checkpoint_iteration=int(w.checkpoint_iteration))
            out.append(proc)
        return out


def resize(self: Workers, body: dict, stopping: bool) -> bool:
    """A resize from the scheduler: ask rank 0 (if it runs here) to re-form the job at its
    next step boundary, and start the new ranks given for this node, which join it (their
    state comes from rank 0). A job whose workers here are all still waiting for their GPUs
    (a previous holder checkpointing) simply starts in its new shape. Refused, and logged,
    for an attempt this node does not run, a GPU it lacks or a rank it already has: nothing
    changes then, and the new ranks given here are reported ended without having run, since
    the scheduler counts them in as soon as it sends the resize."""
    job, attempt = body["job"], body["attempt"]
    mine = sorted((w for w in self.by_key.values() if (w.job, w.attempt) == (job, attempt)), key=lambda w: w.rank)
    running = [w for w in mine if w.process is not None and w.process.poll() is None]
    reason = _resize_refusal(self, body, stopping)
    if not reason and not running and _whole_job_queued(mine):
        _reshape_queued(self, body, mine)
        return True
    if not reason and not running:
        reason = "this node runs no worker of it"
    if reason:
        log.warning("refused resize of job %d attempt %d: %s", job, attempt, reason)
        self.counters["refused_resizes"] = self.counters.get("refused_resizes", 0) + 1
        _end_refused(self, body, reason, running[0].iteration if running else 0)
        return False
    if running[0].rank == 0:
        write_request(
            running[0].lease_path,
            body["generation"],
            body["world_size"],
            body["batch_size"],
            body["master_port"],
            lr_scale=body.get("lr_scale"),
        )
    spec = dict(running[0].spec or {})
    spec.update(
        world_size=body["world_size"],
        batch_size=body["batch_size"],
        master_addr=body["master_addr"],
        master_port=body["master_port"],
        ranks=body["ranks"],
        join_generation=body["generation"],
        resume=None,
        resume_iteration=None,
        # The new ranks start with the resize's learning-rate factor (their state, and the rate
        # it holds, comes from rank 0 before the others apply the factor), or none.
        lr_scale=body.get("lr_scale"),
    )
    if body.get("iters_per_s"):  # (a decoded message holds None for a field it lacks)
        spec["iters_per_s"] = body["iters_per_s"]
    for w in running:
        w.spec = {**(w.spec or {}), "world_size": body["world_size"], "batch_size": body["batch_size"]}
    log.info("resizing job %d attempt %d to %d workers (generation %d)", job, attempt, body["world_size"], body["generation"])
    _queue_new_ranks(self, body, spec, running[0])
    return True


def _resize_refusal(self: Workers, body: dict, stopping: bool) -> str:
    """Why this node cannot carry out its part of a resize ("" if it can)."""
    if stopping:
        return "the agent is stopping"
    bad = _bad_ranks(body["ranks"], body["world_size"]) or not_text(body, ("master_addr",))
    if bad:
        return bad
    for r in body["ranks"]:
        if r["gpu"] not in self.gpus:
            return f"this node has no GPU {r['gpu']}"
        if (body["job"], body["attempt"], r["rank"]) in self.by_key or r["rank"] == 0:
            return f"rank {r['rank']} is not a new rank of a job of {body['world_size']} workers"
    return shared_gpu(body, (w for w in self.by_key.values() if w.rank < body["world_size"]))


def _end_refused(self: Workers, body: dict, reason: str, at: int) -> None:
    """The new ranks of a refused resize end here without having run (preempted, no exit
    status): the scheduler then stops the job's other workers and takes it back from its
    checkpoint, or ends it if it is done, instead of waiting for ranks that never start."""
    for rank in sorted({r["rank"] for r in body["ranks"]}):
        if rank < body["world_size"] and (body["job"], body["attempt"], rank) not in self.by_key:
            self.report_exit(
                body["job"],
                body["attempt"],
                rank,
                "preempted",
                at,
                at,
                None,
                None,
                None,
                f"resize refused: {reason}",
                permanent=False,
            )


def _whole_job_queued(mine: list[Worker]) -> bool:
    """Whether every worker of the attempt is here, none of them started yet."""
    if not mine or any(w.process is not None for w in mine):
        return False
    return {w.rank for w in mine} == set(range(int((mine[0].spec or {}).get("world_size", 0))))


def _reshape_queued(self: Workers, body: dict, mine: list[Worker]) -> None:
    """A resize of a job none of whose workers has started: it starts in the new shape, from
    the point its launch gave (no running worker to join, so no join generation)."""
    job, attempt, world = body["job"], body["attempt"], body["world_size"]
    for w in mine:
        if w.rank >= world:
            if w in self.waiting:
                self.waiting.remove(w)
            self.end_unstarted(w, "resized", "left the job in a resize before it started")
    kept = [w for w in mine if w.rank < world]
    spec = dict(kept[0].spec or {})
    spec.update(
        world_size=world,
        batch_size=body["batch_size"],
        master_addr=body["master_addr"],
        master_port=body["master_port"],
        ranks=[{"rank": w.rank, "gpu": w.gpu} for w in kept] + list(body["ranks"]),
    )
    if body.get("lr_scale") is not None:
        spec["lr_scale"] = body["lr_scale"]
    if body.get("iters_per_s"):  # (a decoded message holds None for a field it lacks)
        spec["iters_per_s"] = body["iters_per_s"]
    for w in kept:
        w.spec = spec
    log.info("job %d attempt %d has not started yet: it starts with %d workers instead", job, attempt, world)
    _queue_new_ranks(self, body, spec, kept[0])


def _queue_new_ranks(self: Workers, body: dict, spec: dict, like: Worker) -> None:
    """Queue the workers of the resize's new ranks on this node; they start from where `like` is."""
    job, attempt = body["job"], body["attempt"]
    for r in body["ranks"]:
        key = (job, attempt, r["rank"])
        w = Worker(
            job,
            attempt,
            r["rank"],
            r["gpu"],
            self.workdir / "leases" / f"{job}-{attempt}-{r['rank']}",
            self.workdir / "logs" / f"job-{job}-attempt-{attempt}-rank-{r['rank']}.log",
        )
        w.spec = spec
        w.start_iteration = w.iteration = like.iteration
        w.checkpoint, w.checkpoint_iteration = like.checkpoint, like.checkpoint_iteration
        self.by_key[key] = w
        self.waiting.append(w)
    self.start_waiting()


def _within_launch(w: Worker, iteration: int) -> int:
    """An exit's iteration, at most the iterations the launch asked for (a worker stops there)."""
    most = (w.spec or {}).get("iterations") or 0  # (0: a job known by its duration counts its own)
    if most and iteration > most:
        log.warning("job %d attempt %d rank %d says it reached iteration %d of %d: taken as %d", *w.key, iteration, most, most)
        return most
    return iteration


def bad_launch(body: dict, gpus: set[int]) -> str:
    """Why a launch cannot run on a node with these GPUs ("" if it can): its ranks (see
    `_bad_ranks`), a GPU the node lacks, or a resume point past the iterations it asks for
    (0 iterations: a job known by its duration, which counts its own)."""
    # (a decoded launch always has its world size; a launch made in code without one limits no rank)
    reason = _bad_ranks(body["ranks"], body.get("world_size") or RANKS_MOST)
    if reason:
        return reason
    for r in body["ranks"]:
        if r["gpu"] not in gpus:
            return f"this node has no GPU {r['gpu']}"
    start, most = body.get("resume_iteration") or 0, body.get("iterations") or 0
    if most and start > most:
        return f"it resumes at iteration {start}, past its {most} iterations"
    if not body["ranks"]:
        return "it names no rank"
    return not_text(body, LAUNCH_TEXTS)


# The fields of a launch that become a worker's environment variables, paths or arguments.
LAUNCH_TEXTS = ("master_addr", "checkpoint_dir", "resume", "model", "command")


def not_text(body: dict, fields) -> str:
    """Why a field of a launch or resize cannot reach a worker ("" if each can): a NUL
    character, which no environment variable, path or argument holds (a forked worker would
    fail setting its environment, a new process would not start)."""
    for field in fields:
        value = body.get(field)
        for i, word in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(word, str) and "\x00" in word:
                where = f"{field}[{i}]" if isinstance(value, list) else field
                return f"{where} holds a NUL character (\\u0000), which no environment variable, path or argument can"
    return ""


def shared_gpu(body: dict, here) -> str:
    """Why the ranks a launch or resize starts cannot have their GPUs ("" if they can): a GPU
    that a worker `here` (objects with job, attempt, rank and gpu) of the same attempt holds.
    The new rank would wait for that GPU, and the worker holding it for the new rank, in their
    rendezvous: neither would ever train. (A worker of another job, or of an earlier attempt,
    is waited for: it is on its way out.) A rank already here is a repeated launch."""
    mine = {w.rank: w for w in here if (w.job, w.attempt) == (body["job"], body["attempt"])}
    by_gpu = {w.gpu: w for w in mine.values()}
    for r in body["ranks"]:
        holder = by_gpu.get(r["gpu"])
        if r["rank"] not in mine and holder is not None:
            return f"GPU {r['gpu']} is rank {holder.rank}'s, of the same attempt, which would wait for rank {r['rank']}"
    return ""


def _no_program(body: dict) -> str:
    """Why a launch names nothing to run ("" if it names a workload this Python has, or a command)."""
    workload = body.get("workload")
    if workload:
        # (a name this machine's Python cannot import would end in the worker's ImportError, a
        # traceback in the job's log: a scheduler of another release may name one)
        return "" if _has_module(workload) else f"its workload {workload!r} is no module this agent's Python has"
    command = body.get("command")
    if command is None:
        return "it names neither a workload nor a command"
    if not command or not command[0]:
        return "its command names no program"
    return ""


def _has_module(name: str) -> bool:
    """Whether this Python can import module `name`, found without running any of its packages'
    code (a workload's package may import torch, which the agent itself never needs)."""
    head, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(head)  # (a top-level name: nothing is imported)
        for part in rest:
            if spec is None or spec.submodule_search_locations is None:
                return False
            spec = importlib.machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return False
    return spec is not None


def end_unstarted(report, body: dict, rank: int, outcome: str, reason: str, permanent: bool) -> None:
    """Report, through `report` (an exit report's call), that rank `rank` of launch `body` ended
    as `outcome` before it started: at the iteration it would have started from."""
    start = body.get("resume_iteration") or 0
    report(
        body["job"],
        body["attempt"],
        rank,
        outcome,
        start,
        start,
        body.get("resume"),
        body.get("resume_iteration"),
        None,
        reason,
        permanent=permanent,
    )


_STALE = RefusalLog(log)  # (launches of workers that ran already: a few a minute)


def ignored_launch(job: int, attempt: int, rank: int) -> None:
    """Log a launch of a worker that ran here and exited: not run again (the scheduler numbers
    every attempt anew, so it is a repeated or stale launch); its exit report stands."""
    _STALE.warn(
        "ran_already", "ignored a launch of job %d attempt %d rank %d: it ran here already and exited", job, attempt, rank
    )


def refuse_launch(body: dict, reason: str, end, here=lambda rank: False) -> None:
    """A refused launch: logged, and every rank it names ended by `end(rank)`, so that the
    scheduler waits for none of them (a rank past the world size is one it ignores); but not a
    rank `here(rank)` says this node has already, running, waiting, or ran and exited (a
    repeated launch): its own exit report says how it ends."""
    log.warning("refused launch of job %d attempt %d: %s", body["job"], body["attempt"], reason)
    for rank in sorted({r["rank"] for r in body["ranks"]}):
        if not here(rank):
            end(rank)


def _bad_ranks(ranks: list[dict], world_size: int) -> str:
    """Why a launch's or resize's ranks cannot all run ("" if they can): a rank at or past the
    world size, a rank given twice, or a GPU given to two ranks (the second would wait for the
    first, which waits for it in the rendezvous)."""
    seen: set[int] = set()
    gpus: set[int] = set()
    for r in ranks:
        if r["rank"] >= world_size:
            return f"rank {r['rank']} is not below the world size {world_size}"
        if r["rank"] in seen:
            return f"rank {r['rank']} is given twice"
        if r["gpu"] in gpus:
            return f"GPU {r['gpu']} is given to two ranks"
        seen.add(r["rank"])
        gpus.add(r["gpu"])
    return ""


def worker_environment() -> dict[str, str]:
    """The agent's environment, with this project importable (where it is not installed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def start_workload(
    forks: ForkServer | None, module: str, env: dict[str, str], cwd: Path, log_path: Path
) -> subprocess.Popen | ForkedWorker:
    """Start a worker that runs a workload module: forked from the fork server when it is
    ready, else (or if it fails to fork) a new process (`python -m module`)."""
    if forks is not None and forks.ready():
        try:
            return forks.start(module, env, cwd, log_path)
        except OSError as err:
            log.warning("fork server: %s; starting the worker as a new process", err)
    return spawn_worker([sys.executable, "-m", module], env, cwd, log_path)


def spawn_worker(argv: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> subprocess.Popen:
    """Start one training process as the agent does: its own session (so it can be signalled
    as a group, and, where the kernel groups sessions for CPU fairness, it gets a session's
    share), output to its log, and death with the agent."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )


def _tail(path: Path, lines: int = 8) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4000))
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return " | ".join(text.strip().splitlines()[-lines:])
