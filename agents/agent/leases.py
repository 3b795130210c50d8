"""Leases and revocation: stopping a worker in two phases. Each worker holds a lease (one byte
of a memory-mapped file); revoking it sets that byte, and the worker sees it at its next
iteration, checkpoints and exits (the scheduler revokes only rank 0 of a multi-worker job; the
workers agree on the exit iteration among themselves). A worker that has not exited within the
grace period is terminated (SIGTERM, then SIGKILL). A worker revoked before it started cannot
take part in that agreement, so the other workers of its attempt here end with it: those not
started yet as preempted, the started ones terminated (they would wait for it in their
rendezvous or collectives until the dist timeout, holding their GPUs). A revoke that names
ranks (`ranks`) stops only those, and no other: the scheduler names stray workers, which the
attempt as it runs does not have here (a rank left behind by an in-place shrink, say, whose
number a grow gave to another node), while the attempt's real ranks here run on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from roundhouse.agents.agent.processes import Worker, Workers
from roundhouse.agents.client import Lease
from roundhouse.wire.protocol import RefusalLog

log = logging.getLogger("roundhouse.agent")


class Revocations:
    def __init__(self, workers: Workers, grace_s: float, ended_here: Callable[[int, int], bool] = lambda job, attempt: False):
        self.workers = workers
        self.grace_s = grace_s
        self.ended_here = ended_here  # whether a worker of (job, attempt) ran here and exited
        self.refusals = RefusalLog(log)

    def on_revoke(self, body: dict) -> None:
        """The scheduler's revoke: of one rank or all (`rank` absent), or a kill of all; of the
        ranks `ranks` names only, if it names some (stray workers: the others run on)."""
        named = None if body.get("ranks") is None else set(body["ranks"])
        targets = [
            w
            for w in self.workers.all()
            if w.job == body["job"]
            and w.attempt == body["attempt"]
            and (named is None or w.rank in named)
            and (body["kill"] or body.get("rank") in (None, w.rank))
        ]
        if not targets:
            which = "" if named is None else f" rank(s) {','.join(map(str, sorted(named)))}"
            if self.ended_here(body["job"], body["attempt"]):
                # It crossed the exit on the way (the agent stopping, the worker done): the
                # scheduler learns the attempt's end from the exit report.
                log.debug("revoke of job %d attempt %d%s: it has exited here already", body["job"], body["attempt"], which)
                return
            self.refusals.warn(
                "unknown_attempt",
                "dropped the scheduler's revoke of job %d attempt %d%s: not running here (any more)",
                body["job"],
                body["attempt"],
                which,
            )
            return
        unstarted: list[int] = []
        for w in targets:
            if w.process is None:
                self._end_unstarted(w, "revoked before it started")
                if not _joins(w):
                    unstarted.append(w.rank)
            elif body["kill"]:
                log.info("killing job %d attempt %d rank %d", w.job, w.attempt, w.rank)
                self.workers.terminate(w, hard=False)
            else:
                self.revoke(w)
        # (Ranks named are no part of the attempt as the scheduler runs it: the others do not
        # wait for them, and run on.)
        if unstarted and named is None:
            self.end_attempt(body["job"], body["attempt"], f"rank {unstarted[0]} of its attempt was revoked before it started")

    def end_attempt(self, job: int, attempt: int, why: str) -> None:
        """End every worker of an attempt here: one of them ended before it started, so the
        others cannot agree on an exit with it (nor form their process group)."""
        for w in self.workers.all():
            if (w.job, w.attempt) != (job, attempt):
                continue
            if w.process is None:
                self._end_unstarted(w, why)
            elif not w.killed:
                log.info("terminating job %d attempt %d rank %d: %s", w.job, w.attempt, w.rank, why)
                self.workers.terminate(w, hard=False)

    def _end_unstarted(self, w: Worker, why: str) -> None:
        if w in self.workers.waiting:
            self.workers.waiting.remove(w)
        self.workers.end_unstarted(w, "preempted", why)

    def revoke(self, w: Worker) -> None:
        if w.process is None or w.revoked_at is not None:
            return
        w.revoked_at = time.time()
        try:
            Lease.revoke(w.lease_path)
        except OSError as err:
            # The worker cannot be told through its lease (someone removed the file): it is
            # terminated instead, as one past its grace period would be.
            log.warning(
                "job %d attempt %d rank %d: cannot revoke its lease %s (%s): terminating it",
                w.job,
                w.attempt,
                w.rank,
                w.lease_path,
                err.strerror or err,
            )
            self.workers.terminate(w, hard=False)
            return
        log.info("revoked job %d attempt %d rank %d (lease cleared)", w.job, w.attempt, w.rank)

    def revoke_all(self, why: str) -> None:
        """Revoke every worker; those still waiting for their GPU end as preempted at once."""
        ended = {(w.job, w.attempt) for w in self.workers.waiting if not _joins(w)}
        for w in list(self.workers.waiting):
            self.workers.end_unstarted(w, "preempted", why)
        self.workers.waiting.clear()
        for job, attempt in sorted(ended):
            self.end_attempt(job, attempt, f"{why} before a worker of its attempt started")
        for w in self.workers.all():
            self.revoke(w)

    def enforce_grace(self) -> None:
        """The second phase: terminate a revoked worker past its grace period, and kill one that
        has not exited within 5 s of its termination."""
        now = time.time()
        for w in self.workers.all():
            if w.process is None:
                continue
            if w.terminate_at is not None and now > w.terminate_at:
                self.workers.terminate(w, hard=True)
            elif w.revoked_at is not None and not w.killed and now - w.revoked_at > self.grace_s:
                log.warning(
                    "job %d attempt %d rank %d did not stop within %.0fs of its revocation: terminating it",
                    w.job,
                    w.attempt,
                    w.rank,
                    self.grace_s,
                )
                self.workers.terminate(w, hard=False)


def _joins(w: Worker) -> bool:
    """A new rank of a resize in place: the workers already running hold the job's state, and
    they checkpoint and exit by themselves if it never joins (agents/elastic.py)."""
    return (w.spec or {}).get("join_generation") is not None
