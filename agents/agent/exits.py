"""Exit reports: every exit of a worker (done, preempted with its checkpoint, failed, killed) is
sent to the scheduler and kept until acknowledged, resent after 3 s or at once after
registering again, so that a restarted scheduler loses none."""

from __future__ import annotations

import logging
import time

from roundhouse.agents.agent.messages import drain
from roundhouse.agents.agent.scheduler_link import SchedulerLink

log = logging.getLogger("roundhouse.agent")
# How many acknowledged exits an agent remembers, so that a launch of a worker that ran here
# already (a stale or repeated launch: the scheduler numbers every attempt anew) is not run again.
ENDED_KEPT = 100_000


class ExitReports:
    def __init__(self, link: SchedulerLink, counters: dict[str, int]):
        self.link = link
        self.counters = counters
        self.unacked: dict[tuple[int, int, int], tuple[dict, float]] = {}
        self.ended: dict[tuple[int, int, int], None] = {}  # acknowledged, oldest first (at most ENDED_KEPT)

    def report(
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
        self.link.send("exited", **body)

    def acknowledged(self, key: tuple[int, int, int]) -> None:
        if self.unacked.pop(key, None) is not None:
            self.ended[key] = None
            if len(self.ended) > ENDED_KEPT:
                del self.ended[next(iter(self.ended))]

    def ran(self, key: tuple[int, int, int]) -> bool:
        """Whether that worker ran here and exited (its exit acknowledged or not)."""
        return key in self.unacked or key in self.ended

    def attempt_ran(self, job: int, attempt: int) -> bool:
        """Whether a worker of that attempt ran here and exited (rare: a scan, asked only of a
        revoke that finds no worker)."""
        return any(key[:2] == (job, attempt) for keys in (self.unacked, self.ended) for key in keys)

    def flush(self, force: bool = False) -> None:
        """Resend the reports the scheduler has not acknowledged (after 3 s, or all if `force`)."""
        now = time.time()
        for key, (body, sent) in list(self.unacked.items()):
            if force or now - sent >= 3.0:
                if self.link.send("exited", **body):
                    self.unacked[key] = (body, now)

    def flush_and_wait(self, on_scheduler_frame) -> None:
        """On the way out: resend what is due, then wait briefly for the acknowledgements."""
        self.flush()
        if self.unacked and self.link.registered and self.link.cut_off is None:  # (cut off: no answer comes)
            deadline = time.time() + 2.0
            while self.unacked and time.time() < deadline:
                if self.link.dealer.poll(100):
                    drain(self.link.dealer, on_scheduler_frame)
