"""The agent itself: its parts put together, its loop, the scheduler's messages, and stopping
(every worker revoked, their exits reported, then out; an agent stopped by a signal, not asked
by the scheduler, then says `stopping`, so that the scheduler takes its node offline at once).
A node whose key the scheduler no longer admits stops the same way, unheard, and exits with
status 2: its jobs are started again elsewhere once the scheduler counts it lost."""

from __future__ import annotations

import logging
import signal
import time
import uuid
from pathlib import Path

import zmq

from roundhouse.agents.agent.exits import ExitReports
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.agents.agent.job_reports import JobReports
from roundhouse.agents.agent.leases import Revocations
from roundhouse.agents.agent.messages import drain
from roundhouse.agents.agent.processes import Workers
from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.agents.agent.workfolder import make_workfolder
from roundhouse.wire.security import ClientSecurity

log = logging.getLogger("roundhouse.agent")


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
        self.name = name
        self.gpus = gpus
        self.workdir = Path(workdir) if workdir else None  # None: a temporary folder, made by run()
        self.keep_workdir = keep_workdir
        self.revoke_grace_s = revoke_grace_s
        self.emulate = emulate
        self.session = uuid.uuid4().hex[:16]
        self.counters: dict[str, int] = {"bad_messages": 0, "launched": 0, "exits": 0}
        hello = dict(node=name, address=address, session=self.session, gpus=[{"index": g.index, "type": g.type} for g in gpus])
        self.link = SchedulerLink(scheduler, security, hello, self.counters)
        self.exits = ExitReports(self.link, self.counters)
        self.reports = JobReports(self.counters, metrics_every_s, find_worker=lambda key: self.workers.get(key))
        self.workers = Workers(
            {g.index for g in gpus},
            self.reports,
            self.link.send,
            self._report_exit,
            self.counters,
            threads_per_gpu=threads_per_gpu,
            emulate=emulate,
        )
        self.revocations = Revocations(self.workers, revoke_grace_s, ended_here=self.exits.attempt_ran)
        self._stopping: str | None = None
        self._asked = False  # the scheduler asked this agent to shut down (and was answered)
        self._stop_deadline = 0.0
        self._remove_on_death = ""  # the work folder the guardian removes if the agent is killed

    # --- running ---
    def run(self) -> int:
        """Serve until told to shut down (or SIGTERM/SIGINT, or refused); returns an exit status.
        What it made in its work folder is removed on the way out unless `keep_workdir`."""
        folder = make_workfolder(self.workdir, self.name)
        self.workdir = self.workers.workdir = folder.path
        # (killed, the agent cannot remove its folder: its guardian does, if the agent made it)
        self._remove_on_death = "" if self.keep_workdir or folder.path not in folder.made else str(folder.path)
        try:
            return self._serve()
        finally:
            folder.leave(self.keep_workdir, self.name)

    def _serve(self) -> int:
        context = zmq.Context()
        dealer, monitor = self.link.open(context)
        jobs = self.reports.open(context, self.workdir)
        poller = zmq.Poller()
        poller.register(dealer, zmq.POLLIN)
        poller.register(jobs, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        self.workers.open()
        if self._remove_on_death and self.workers.guardian is not None:
            self.workers.guardian.remove_on_death(self._remove_on_death)
        log.info(
            "agent %s: %d GPU(s) (%s), scheduler %s, work folder %s",
            self.name,
            len(self.gpus),
            ", ".join(sorted({g.type for g in self.gpus})),
            self.link.scheduler,
            self.workdir,
        )
        if self.emulate:
            log.info("emulating GPUs: every job runs no faster than the scheduler's profile says it would")
        if self.workers.threads_per_gpu > 0:  # (said: agents sharing a machine must share its cores)
            log.info("each worker (a job process on one GPU) trains with %d CPU thread(s)", self.workers.threads_per_gpu)
        status = 0
        try:
            while True:
                ready = dict(poller.poll(timeout=50))
                if jobs in ready:
                    self.reports.drain()
                if dealer in ready:
                    drain(dealer, self._on_scheduler_frame)
                if monitor in ready:
                    self.link.watch_handshakes()
                if self.link.refused:
                    status = 2
                    break
                if self.link.cut_off is not None:  # (its key no longer admitted: it stops as if asked, status 2)
                    status = 2
                    self.stop("its key is no longer admitted by the scheduler")
                self.reports.drain()
                self.workers.reap()
                self.workers.start_waiting()
                self.revocations.enforce_grace()
                self._tick_timers()
                if self._stopping and not self.workers and not self.workers.waiting:
                    break
                if self._stopping and time.time() > self._stop_deadline:
                    log.warning("agent %s: workers did not stop in time; killing them", self.name)
                    for w in self.workers.all():
                        self.workers.terminate(w, hard=True)
                    self.workers.reap(wait=True)
                    break
            self.exits.flush_and_wait(self._on_scheduler_frame)
            self._say_leaving()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for w in self.workers.all():
                self.workers.terminate(w, hard=True)
            self.workers.reap(wait=True)
            self.workers.close()
            self.reports.close()
            self.link.close()
            context.term()
        log.info("agent %s stopped%s", self.name, f" ({self._stopping})" if self._stopping else "")
        return status

    def _on_signal(self, signum, frame) -> None:
        why = f"signal {signal.Signals(signum).name}"
        if not self._stopping:
            self.stop(why)
            if self.workers:
                log.info("agent %s: %s again kills its workers now, without waiting for their checkpoints", self.name, why)
            return
        if self._stop_deadline > time.time():
            # Asked again while stopping: whoever asked will not wait out --revoke-grace for a
            # worker that does not stop (the scheduler takes its job back from its last checkpoint).
            self._stop_deadline = 0.0
            log.warning("agent %s: %s again while stopping: killing %d worker(s) now", self.name, why, len(self.workers))

    def stop(self, why: str) -> None:
        """Revoke every worker (they checkpoint), report their exits, then exit."""
        if self._stopping:
            return
        self._stopping = why
        self._stop_deadline = time.time() + self.revoke_grace_s + 5
        log.info("agent %s stopping (%s): revoking %d worker(s)", self.name, why, len(self.workers))
        self.revocations.revoke_all("the agent stopped")

    def _say_leaving(self) -> None:
        """An agent leaving unasked (a signal) tells the scheduler once its exits are reported
        (they go first on the one connection): its node goes offline now rather than at the
        heartbeat timeout, and nothing more is launched there."""
        if self._stopping and not self._asked and self.link.registered:
            self.link.send("stopping")

    def _report_exit(self, job, attempt, *rest, **keywords) -> None:
        self.exits.report(job, attempt, *rest, **keywords)
        self.reports.forget(job, attempt)

    def _tick_timers(self) -> None:
        now = time.time()
        if not self.link.keep_alive(now, self.workers.running):
            return
        self.reports.forward_metrics(now, self.link.send)
        self.exits.flush()

    # --- from the scheduler ---
    def _on_scheduler_frame(self, frames) -> None:
        got = self.link.receive(frames)
        if got is not None:
            type_, body = got
            getattr(self, f"_on_{type_}")(body)

    def _on_welcome(self, body) -> None:
        first = not self.link.registered
        if not self.link.welcome(body):
            return
        log.info("agent %s registered as node %d (scheduler session %s)", self.name, body["node_index"], body["session"])
        if first or self.exits.unacked:
            self.exits.flush(force=True)

    def _on_unknown(self, body) -> None:
        if self.link.registered or time.time() - self.link.last_register > 1.0:
            log.info("the scheduler does not know this agent (it restarted?): registering again")
            self.link.registered = False
            self.link.register(self.workers.running())

    def _on_error(self, body) -> None:
        if not self.link.registered:
            # The only message sent before a welcome is the registration: it was refused.
            log.error("the scheduler refused to register node %s: %s", self.name, body["reason"])
            self.link.refused = True
            return
        log.warning("the scheduler says: %s", body["reason"])

    def _on_key_refused(self, body) -> None:
        self.link.key_refused(body["key"], body["cause"])

    def _on_shutdown(self, body) -> None:
        self._asked = True
        self.link.send("stopping")  # the scheduler waits for this answer (it may ask again: stop() once)
        self.stop(f"the scheduler asked: {body['reason']}")

    def _on_ack(self, body) -> None:
        self.exits.acknowledged((body["job"], body["attempt"], body["rank"]))

    def _on_launch(self, body) -> None:
        self.workers.launch(body, stopping=bool(self._stopping), known=self.exits.ran)

    def _on_revoke(self, body) -> None:
        self.revocations.on_revoke(body)

    def _on_resize(self, body) -> None:
        self.workers.resize(body, stopping=bool(self._stopping))
