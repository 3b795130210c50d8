"""The node agent (`roundhouse agent`): Blox's WorkerManager, over ZeroMQ.

One agent runs on every GPU node. It connects a DEALER socket to the scheduler's ROUTER,
registers the node's GPUs (found with NVML or torch, or given with `--fake-gpus 4:V100` on a
machine without GPUs, which still runs real training processes; with `--emulate` as well, each
job is held to the speed the scheduler's profile gives for its model on the faked GPU type, so
that a CPU machine emulates a GPU cluster, heterogeneous ones included), and then:

- launches each job's workers on this node as subprocesses, one per GPU, with
  `CUDA_VISIBLE_DEVICES`, `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`/`MASTER_PORT` and
  the ROUNDHOUSE_ variables the client library reads (agents/jobenv.py); a launch onto a GPU
  that a previous job still holds (it is checkpointing) waits until that GPU is free;
- keeps each worker's lease as one byte of a memory-mapped file: revoking sets it, and the
  worker sees it at its next iteration, checkpoints and exits (the scheduler revokes only
  rank 0 of a multi-worker job; the workers agree on the exit iteration among themselves);
  a worker that does not exit within the grace period is terminated;
- collects the workers' reports on a node-local socket and forwards progress and metrics
  (loss, iteration time) to the scheduler;
- reports every exit (done, preempted with its checkpoint, failed with the end of its log,
  killed) and keeps the report until the scheduler acknowledges it, resending it after a
  reconnection, so that a restarted scheduler loses none;
- heartbeats, and re-registers (listing its running workers) when a restarted scheduler does
  not know it.

Workers die with the agent (Linux PR_SET_PDEATHSIG): a lost agent's jobs are restarted
elsewhere from their checkpoints by the scheduler, and must not run on behind its back.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path

import attrs
import zmq

from roundhouse.agents import jobenv
from roundhouse.agents.client import Lease
from roundhouse.wire import protocol
from roundhouse.wire.protocol import EXIT_DONE, EXIT_PREEMPTED, ProtocolError, SeqTracker
from roundhouse.wire.security import HANDSHAKE_FAILURES, ClientSecurity, check_connect_address

log = logging.getLogger("roundhouse.agent")
PROJECT_ROOT = Path(__file__).resolve().parents[1]
FROM_SCHEDULER = frozenset({"welcome", "launch", "revoke", "ack", "unknown", "shutdown", "error"})
FROM_JOBS = frozenset({"report", "checkpointed", "exiting"})


@attrs.frozen
class Gpu:
    index: int
    type: str


def find_gpus(fake: str | None) -> list[Gpu]:
    """The node's GPUs: `fake` ("4:V100") if given, else NVML, else torch."""
    from roundhouse.errors import UsageError

    if fake:
        count, _, kind = fake.partition(":")
        if not count.isdigit() or int(count) < 1 or not kind:
            raise UsageError(f"--fake-gpus {fake!r}: write COUNT:TYPE, e.g. 4:V100")
        return [Gpu(i, kind) for i in range(int(count))]
    try:
        import pynvml  # type: ignore

        pynvml.nvmlInit()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            gpus.append(Gpu(i, _gpu_type(name.decode() if isinstance(name, bytes) else name)))
        if gpus:
            return gpus
    except Exception:  # no NVML: try torch
        pass
    try:
        import torch

        if torch.cuda.is_available():
            return [Gpu(i, _gpu_type(torch.cuda.get_device_name(i))) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    raise UsageError("no GPUs found (neither NVML nor torch sees one); on a machine without GPUs use --fake-gpus COUNT:TYPE")


def _gpu_type(name: str) -> str:
    """'Tesla V100-SXM2-16GB' -> 'V100' (the profile's names), else the name's last word."""
    for known in ("A100", "H100", "V100", "P100", "K80", "T4", "A10", "L4"):
        if known in name.upper():
            return known
    return name.split()[-1].replace(" ", "-")


@attrs.define(eq=False)
class _Worker:
    job: int
    attempt: int
    rank: int
    gpu: int
    lease_path: Path
    log_path: Path
    process: subprocess.Popen | None = None
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


class Agent:
    def __init__(
        self,
        scheduler: str,
        name: str,
        gpus: list[Gpu],
        security: ClientSecurity,
        address: str = "127.0.0.1",
        workdir: str | None = None,
        revoke_grace_s: float = 60.0,
        threads_per_gpu: int = 0,
        metrics_every_s: float = 1.0,
        emulate: bool = False,
        keep_workdir: bool = False,
    ):
        check_connect_address(scheduler)
        self.scheduler = scheduler
        self.name = name
        self.gpus = gpus
        self.security = security
        self.address = address
        self.workdir = Path(workdir) if workdir else None  # None: a temporary folder, made by run()
        self.keep_workdir = keep_workdir
        self.revoke_grace_s = revoke_grace_s
        self.threads_per_gpu = threads_per_gpu
        self.emulate = emulate
        self.metrics_every_s = metrics_every_s
        self.session = uuid.uuid4().hex[:16]
        self.heartbeat_s = 1.0
        self.workers: dict[tuple[int, int, int], _Worker] = {}
        self.waiting: deque[_Worker] = deque()  # launches whose GPU is still busy
        self.unacked: dict[tuple[int, int, int], tuple[dict, float]] = {}
        self._gpu_busy: dict[int, tuple[int, int, int]] = {}
        self._registered = False
        self._last_register = 0.0
        self._last_heartbeat = 0.0
        self._last_metrics: dict[tuple[int, int], float] = {}
        self._pending_metrics: dict[tuple[int, int], dict] = {}
        self._stopping: str | None = None
        self._stop_deadline = 0.0
        self._refused = False
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000
        self._from_scheduler = SeqTracker()
        self._from_jobs = SeqTracker()
        self.counters: dict[str, int] = {"bad_messages": 0, "launched": 0, "exits": 0}

    # --- running ---
    def run(self) -> int:
        """Serve until told to shut down (or SIGTERM/SIGINT, or refused); returns an exit status.
        What it made in its work folder is removed on the way out unless `keep_workdir`."""
        made = self._make_workdir()
        try:
            return self._serve()
        finally:
            self._leave_workdir(made)

    def _make_workdir(self) -> list[Path]:
        """Make the work folder's parts; return those that did not exist before (ours to remove)."""
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"rh-{self.name}-"))
            made = [self.workdir]
        else:
            made = [] if self.workdir.exists() else [self.workdir]
        for sub in ("leases", "logs", "jobs"):
            path = self.workdir / sub
            if not path.exists():
                made.append(path)
            path.mkdir(parents=True, exist_ok=True)
        return made

    def _leave_workdir(self, made: list[Path]) -> None:
        # The socket is useless once the agent is gone, kept folder or not.
        (self.workdir / "reports.sock").unlink(missing_ok=True)
        if self.keep_workdir:
            log.info("agent %s: kept its work folder %s (job logs in logs/)", self.name, self.workdir)
            return
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        if self.workdir in made:
            log.info("agent %s: removed its work folder %s", self.name, self.workdir)
        else:  # a folder the user named: only what the agent made in it goes
            log.info("agent %s: removed its files (leases, logs, jobs) from %s", self.name, self.workdir)

    def _serve(self) -> int:
        self._context = zmq.Context()
        dealer = self._context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 1000)
        dealer.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing for a scheduler that is not there
        dealer.setsockopt(zmq.MAXMSGSIZE, protocol.HARD_LIMIT)
        dealer.setsockopt(zmq.RECONNECT_IVL, 100)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self.security.apply(dealer, log)
        monitor = dealer.get_monitor_socket(sum(HANDSHAKE_FAILURES))
        dealer.connect(self.scheduler)
        jobs = self._context.socket(zmq.PULL)
        jobs.setsockopt(zmq.MAXMSGSIZE, protocol.HARD_LIMIT)
        jobs.setsockopt(zmq.LINGER, 0)
        self.jobs_endpoint = f"ipc://{self.workdir}/reports.sock"
        if len(self.jobs_endpoint) > 100:  # ipc paths are limited to about 107 bytes
            port = jobs.bind_to_random_port("tcp://127.0.0.1")
            self.jobs_endpoint = f"tcp://127.0.0.1:{port}"
        else:
            jobs.bind(self.jobs_endpoint)
        self._dealer, self._jobs = dealer, jobs
        poller = zmq.Poller()
        poller.register(dealer, zmq.POLLIN)
        poller.register(jobs, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        log.info(
            "agent %s: %d GPU(s) (%s), scheduler %s, work folder %s",
            self.name,
            len(self.gpus),
            ", ".join(sorted({g.type for g in self.gpus})),
            self.scheduler,
            self.workdir,
        )
        if self.emulate:
            log.info("emulating GPUs: every job runs no faster than the scheduler's profile says it would")
        status = 0
        try:
            while True:
                ready = dict(poller.poll(timeout=50))
                if jobs in ready:
                    self._drain(jobs, self._on_job_frame)
                if dealer in ready:
                    self._drain(dealer, self._on_scheduler_frame)
                if monitor in ready:
                    self._drain_monitor(monitor)
                if self._refused:
                    status = 2
                    break
                self._drain(jobs, self._on_job_frame)
                self._reap()
                self._start_waiting()
                self._enforce_grace()
                self._tick_timers()
                if self._stopping and not self.workers and not self.waiting:
                    break
                if self._stopping and time.time() > self._stop_deadline:
                    log.warning("agent %s: workers did not stop in time; killing them", self.name)
                    for w in list(self.workers.values()):
                        self._terminate(w, hard=True)
                    self._reap(wait=True)
                    break
            self._flush_unacked(final=True)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for w in list(self.workers.values()):
                self._terminate(w, hard=True)
            self._reap(wait=True)
            monitor.close(linger=0)
            jobs.close(linger=0)
            dealer.close(linger=1000)
            self._context.term()
        log.info("agent %s stopped%s", self.name, f" ({self._stopping})" if self._stopping else "")
        return status

    def _on_signal(self, signum, frame) -> None:
        self.stop(f"signal {signal.Signals(signum).name}")

    def stop(self, why: str) -> None:
        """Revoke every worker (they checkpoint), report their exits, then exit."""
        if self._stopping:
            return
        self._stopping = why
        self._stop_deadline = time.time() + self.revoke_grace_s + 5
        log.info("agent %s stopping (%s): revoking %d worker(s)", self.name, why, len(self.workers))
        for w in list(self.waiting):
            self._end_unstarted(w, "preempted", "the agent stopped")
        self.waiting.clear()
        for w in list(self.workers.values()):
            self._revoke(w)

    def _drain(self, sock, handler) -> None:
        for _ in range(1000):
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                handler(frames)
            except Exception:  # a bug must not stop the agent
                log.exception("error while handling a message")

    def _drain_monitor(self, monitor) -> None:
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            what = HANDSHAKE_FAILURES.get(event.get("event"))
            if what:
                log.error("the scheduler at %s refused this agent: %s; check the keys (roundhouse keys)", self.scheduler, what)
                self._refused = True

    def _send(self, type_: str, **fields) -> bool:
        try:
            self._dealer.send(protocol.encode(type_, self._seq.next(), **fields), zmq.NOBLOCK)
            return True
        except zmq.Again:
            return False  # not connected: heartbeats are dropped, exits stay unacknowledged and are resent

    def _decode(self, frames, allowed, what: str):
        """(type, seq, body) of a one-frame message, or None (counted and logged) if it is bad."""
        try:
            if len(frames) != 1:
                raise ProtocolError(f"expected one frame, got {len(frames)}")
            return protocol.decode(frames[0], allowed)
        except ProtocolError as err:
            self.counters["bad_messages"] += 1
            log.warning("refused %s: %s", what, err.reason)
            return None

    # --- from the scheduler ---
    def _on_scheduler_frame(self, frames) -> None:
        got = self._decode(frames, FROM_SCHEDULER, "a message from the scheduler")
        if got is None:
            return
        type_, seq, body = got
        if not self._from_scheduler.accept("scheduler", seq):
            self.counters["bad_messages"] += 1
            log.warning("dropped an out-of-order %s from the scheduler (seq %d)", type_, seq)
            return
        getattr(self, f"_on_{type_}")(body)

    def _on_welcome(self, body) -> None:
        first = not self._registered
        self._registered = True
        self.heartbeat_s = body["heartbeat_s"]
        log.info("agent %s registered as node %d (scheduler session %s)", self.name, body["node_index"], body["session"])
        if first or self.unacked:
            self._flush_unacked(force=True)

    def _on_unknown(self, body) -> None:
        if self._registered or time.time() - self._last_register > 1.0:
            log.info("the scheduler does not know this agent (it restarted?): registering again")
            self._registered = False
            self._register()

    def _on_error(self, body) -> None:
        if not self._registered:
            # The only message sent before a welcome is the registration: it was refused.
            log.error("the scheduler refused to register node %s: %s", self.name, body["reason"])
            self._refused = True
            return
        log.warning("the scheduler says: %s", body["reason"])

    def _on_shutdown(self, body) -> None:
        self._send("stopping")  # the scheduler waits for this answer (it may ask again: stop() once)
        self.stop(f"the scheduler asked: {body['reason']}")

    def _on_ack(self, body) -> None:
        self.unacked.pop((body["job"], body["attempt"], body["rank"]), None)

    def _on_launch(self, body) -> None:
        known = {g.index for g in self.gpus}
        for r in body["ranks"]:
            if r["gpu"] not in known:
                reason = f"this node has no GPU {r['gpu']}"
                log.warning("refused launch of job %d attempt %d: %s", body["job"], body["attempt"], reason)
                self._report_exit(
                    body["job"],
                    body["attempt"],
                    r["rank"],
                    "failed",
                    body.get("resume_iteration") or 0,
                    body.get("resume_iteration") or 0,
                    body.get("resume"),
                    body.get("resume_iteration"),
                    None,
                    reason,
                    permanent=True,
                )
                return
        if self._stopping:
            for r in body["ranks"]:
                self._report_exit(
                    body["job"],
                    body["attempt"],
                    r["rank"],
                    "preempted",
                    body.get("resume_iteration") or 0,
                    body.get("resume_iteration") or 0,
                    body.get("resume"),
                    body.get("resume_iteration"),
                    None,
                    "the agent is stopping",
                    permanent=False,
                )
            return
        for r in body["ranks"]:
            key = (body["job"], body["attempt"], r["rank"])
            if key in self.workers or key in self.unacked:
                continue  # a repeated launch
            w = _Worker(
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
            self.workers[key] = w
            self.waiting.append(w)
        self._start_waiting()

    def _on_revoke(self, body) -> None:
        targets = [
            w
            for w in self.workers.values()
            if w.job == body["job"] and w.attempt == body["attempt"] and (body["kill"] or body.get("rank") in (None, w.rank))
        ]
        if not targets:
            log.debug("revoke of job %d attempt %d: not running here (any more)", body["job"], body["attempt"])
            return
        for w in targets:
            if w.process is None:
                self.waiting.remove(w)
                self._end_unstarted(w, "preempted", "revoked before it started")
            elif body["kill"]:
                log.info("killing job %d attempt %d rank %d", w.job, w.attempt, w.rank)
                self._terminate(w, hard=False)
            else:
                self._revoke(w)

    def _revoke(self, w: _Worker) -> None:
        if w.process is None or w.revoked_at is not None:
            return
        w.revoked_at = time.time()
        Lease.revoke(w.lease_path)
        log.info("revoked job %d attempt %d rank %d (lease cleared)", w.job, w.attempt, w.rank)

    # --- workers ---
    def _start_waiting(self) -> None:
        for w in list(self.waiting):
            holder = self._gpu_busy.get(w.gpu)
            if holder is not None and holder != w.key:
                continue
            self.waiting.remove(w)
            self._spawn(w)

    def _spawn(self, w: _Worker) -> None:
        spec = w.spec
        job_dir = self.workdir / "jobs" / f"job-{w.job}"
        job_dir.mkdir(parents=True, exist_ok=True)
        Lease.create(w.lease_path)
        env = dict(os.environ)
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
                agent=self.jobs_endpoint,
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
            )
        )
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        if self.threads_per_gpu > 0:
            env["OMP_NUM_THREADS"] = str(self.threads_per_gpu)
        if spec["master_addr"].startswith("127.") or spec["master_addr"] == "localhost":
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        argv = [sys.executable, "-m", spec["workload"]] if spec.get("workload") else list(spec.get("command") or [])
        try:
            w.process = spawn_worker(argv, env, job_dir, w.log_path)
        except (OSError, ValueError) as err:
            reason = f"cannot start {argv[:1]}: {err}"
            log.warning("job %d attempt %d rank %d: %s", w.job, w.attempt, w.rank, reason)
            del self.workers[w.key]
            self._report_exit(
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
        self._send("started", job=w.job, attempt=w.attempt, rank=w.rank)

    def _terminate(self, w: _Worker, hard: bool) -> None:
        if w.process is None or w.process.poll() is not None:
            return
        w.killed = True
        try:
            os.killpg(w.process.pid, signal.SIGKILL if hard else signal.SIGTERM)
        except ProcessLookupError:
            return
        if not hard and w.terminate_at is None:
            w.terminate_at = time.time() + 5.0  # then SIGKILL

    def _enforce_grace(self) -> None:
        now = time.time()
        for w in list(self.workers.values()):
            if w.process is None:
                continue
            if w.terminate_at is not None and now > w.terminate_at:
                self._terminate(w, hard=True)
            elif w.revoked_at is not None and not w.killed and now - w.revoked_at > self.revoke_grace_s:
                log.warning(
                    "job %d attempt %d rank %d did not stop within %.0fs of its revocation: terminating it",
                    w.job,
                    w.attempt,
                    w.rank,
                    self.revoke_grace_s,
                )
                self._terminate(w, hard=False)

    def _reap(self, wait: bool = False) -> None:
        for w in list(self.workers.values()):
            if w.process is None:
                continue
            code = w.process.wait() if wait else w.process.poll()
            if code is None:
                continue
            self._drain(self._jobs, self._on_job_frame)  # its last report arrived before it exited
            if w.final is None and code in (EXIT_DONE, EXIT_PREEMPTED):
                # The report left the process before it exited, but may still be in transit.
                deadline = time.time() + 1.0
                while w.final is None and time.time() < deadline:
                    if self._jobs.poll(50):
                        self._drain(self._jobs, self._on_job_frame)
            self._gpu_busy.pop(w.gpu, None)
            del self.workers[w.key]
            try:
                w.lease_path.unlink()
            except FileNotFoundError:
                pass
            final = w.final or {}
            if code == EXIT_DONE and final.get("outcome", "done") == "done":
                outcome, reason = "done", ""
            elif code in (EXIT_DONE, EXIT_PREEMPTED) and final.get("outcome") == "preempted":
                outcome, reason = "preempted", ""
            elif w.killed:
                outcome, reason = "killed", "terminated by the agent"
            else:
                outcome = "failed"
                what = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
                reason = f"{what}; last lines of {w.log_path}: {_tail(w.log_path)}"
            iteration = max(final.get("iteration", 0), w.iteration)
            self._report_exit(
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

    def _end_unstarted(self, w: _Worker, outcome: str, reason: str) -> None:
        self.workers.pop(w.key, None)
        self._report_exit(
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

    def _report_exit(
        self, job, attempt, rank, outcome, iteration, start_iteration, checkpoint, checkpoint_iteration, code, reason, permanent
    ) -> None:
        body = dict(
            job=job,
            attempt=attempt,
            rank=rank,
            outcome=outcome,
            iteration=int(iteration),
            start_iteration=int(start_iteration),
            permanent=permanent,
            reason=reason[-3900:],
            checkpoint=checkpoint,
            checkpoint_iteration=checkpoint_iteration,
            exit_code=None if code is None else max(-255, min(255, code)),
        )
        self.counters["exits"] += 1
        level = logging.INFO if outcome in ("done", "preempted") else logging.WARNING
        log.log(
            level,
            "job %d attempt %d rank %d %s at iteration %d%s",
            job,
            attempt,
            rank,
            outcome,
            iteration,
            f": {reason}" if reason else "",
        )
        self.unacked[(job, attempt, rank)] = (body, time.time())
        self._send("exited", **body)
        self._pending_metrics.pop((job, attempt), None)

    # --- from the jobs ---
    def _on_job_frame(self, frames) -> None:
        got = self._decode(frames, FROM_JOBS, "a report from a local process")
        if got is None:
            return
        type_, seq, body = got
        w = self.workers.get((body["job"], body["attempt"], body["rank"]))
        if w is None:
            return
        if not self._from_jobs.accept(w.key, seq):
            self.counters["bad_messages"] += 1
            return
        if type_ == "report":
            w.iteration = max(w.iteration, body["iteration"])
            if w.rank == 0:
                self._pending_metrics[(w.job, w.attempt)] = {"iteration": body["iteration"], "values": body["values"]}
        elif type_ == "checkpointed":
            w.iteration = max(w.iteration, body["iteration"])
            w.checkpoint, w.checkpoint_iteration = body["path"], body["iteration"]
        else:  # exiting
            w.final = body
            w.iteration = max(w.iteration, body["iteration"])
            if body.get("checkpoint") is not None:
                w.checkpoint, w.checkpoint_iteration = body["checkpoint"], body.get("checkpoint_iteration")

    # --- timers ---
    def _tick_timers(self) -> None:
        now = time.time()
        if not self._registered:
            if now - self._last_register >= 1.0:
                self._register()
            return
        if now - self._last_heartbeat >= self.heartbeat_s:
            self._last_heartbeat = now
            self._send("heartbeat", running=self._running())
        for key, report in list(self._pending_metrics.items()):
            if now - self._last_metrics.get(key, 0.0) >= self.metrics_every_s:
                self._last_metrics[key] = now
                del self._pending_metrics[key]
                self._send("metrics", job=key[0], attempt=key[1], rank=0, iteration=report["iteration"], values=report["values"])
        self._flush_unacked()

    def _register(self) -> None:
        self._last_register = time.time()
        self._send(
            "register",
            node=self.name,
            address=self.address,
            session=self.session,
            gpus=[{"index": g.index, "type": g.type} for g in self.gpus],
            running=self._running(),
        )

    def _running(self) -> list[dict]:
        out = []
        for w in self.workers.values():
            proc = {"job": w.job, "attempt": w.attempt, "rank": w.rank, "gpu": w.gpu, "iteration": int(w.iteration)}
            if w.checkpoint is not None and w.checkpoint_iteration is not None:
                proc.update(checkpoint=w.checkpoint, checkpoint_iteration=int(w.checkpoint_iteration))
            out.append(proc)
        return out

    def _flush_unacked(self, force: bool = False, final: bool = False) -> None:
        """Resend exit reports the scheduler has not acknowledged (after 3 s, or at once after
        registering); on the way out, wait briefly for the acknowledgements."""
        now = time.time()
        for key, (body, sent) in list(self.unacked.items()):
            if force or now - sent >= 3.0:
                if self._send("exited", **body):
                    self.unacked[key] = (body, now)
        if final and self.unacked and self._registered:
            deadline = time.time() + 2.0
            while self.unacked and time.time() < deadline:
                if self._dealer.poll(100):
                    self._drain(self._dealer, self._on_scheduler_frame)


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
            preexec_fn=_die_with_parent,
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


try:  # loaded here, not in the forked child (loading a library after fork is unsafe)
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _libc = None


def _die_with_parent() -> None:
    """In the child, before exec: die when the agent dies (Linux), so that a lost agent's jobs
    do not run on while the scheduler restarts them elsewhere."""
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
