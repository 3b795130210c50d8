"""The journal and the takeover after a restart. Every round is journaled (runtime/journal.py)
before it is acted on. A restarted scheduler replays the journal's rounds through the same graph
(elements keep private state, which replay rebuilds exactly); then it rebuilds the books of
every job from the journal's attempts (each in its last journaled shape: an in-place resize
changes its GPUs, port and generation), and the stray workers killed whose exits have not come
(reports.py), and takes the running jobs back from the agents as they re-register. Exits that
happened meanwhile are resent by the agents until acknowledged, so none is lost; a running
attempt that no agent reports before the deadline is requeued from its checkpoint."""

from __future__ import annotations

import logging
import time

import numpy as np

from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.backends.live.attempts import Attempt, Attempts, counts
from roundhouse.runtime.backends.live.nodes import Nodes
from roundhouse.runtime.backends.live.records import plan_record, record_of, replayed, same_plan
from roundhouse.runtime.backends.live.reports import Reports, strays_taken_over
from roundhouse.runtime.backends.live.resizes import regroup
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.journal import AttemptRow, Replay, ShapeRow
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.world import RUNNING

log = logging.getLogger("roundhouse.scheduler")


class Takeover:
    def __init__(self, attempts: Attempts, nodes: Nodes, submissions: Submissions, reports: Reports):
        self.attempts = attempts
        self.nodes = nodes
        self.submissions = submissions
        self.reports = reports
        self.world = attempts.world
        self.journal = attempts.journal
        self.clock = attempts.clock
        self.counters = attempts.counters
        self.replay: Replay | list[tuple[int, float, dict]] = []
        self.replay_at = 0
        self._replay_plans: list[dict] = []
        # The GPUs online as the replayed rounds left them (the world starts with all online).
        self._replayed_online = np.ones(self.world.cluster.n_gpus, dtype=bool)
        self.until: float | None = None  # wall time by which agents must report their jobs
        # The round being journaled: what its poll reported, and the plans carried out.
        self.last_record: dict = {}
        self.plans: list[dict] = []
        self.round_journaled = False

    # --- journaling rounds ---
    def polled(self, events: Events, progress: Progress, submitted_ids: list[int]) -> None:
        self.last_record = record_of(events, progress, self.world.jobs.column("job_id"), submitted_ids)
        self.round_journaled = False
        self.plans = []

    def planned(self, plan: Plan) -> None:
        self.plans.append(plan_record(plan, self.world.jobs.column("job_id")))

    def journal_round(self) -> None:
        record = dict(self.last_record, plans=self.plans)
        self.journal.add_round(self.clock.k, self.clock.now, record)
        self.round_journaled = True

    # --- replay ---
    def load(self) -> None:
        """Read the journal's rounds, and check now which rounds delivered its submissions, and
        its attempts and their shapes: a damaged row is refused before any round replays or any
        agent is heard (which the journal records), not when the replay is over."""
        self.replay = self.journal.replay()
        self.journal.attempts()
        self.journal.shapes()

    @property
    def replaying(self) -> bool:
        return self.replay_at < len(self.replay)

    def replayed_poll(self) -> tuple[Events, Progress]:
        k, now, record = self.replay[self.replay_at]
        self.clock.k, self.clock.now = k, now
        submitted = self.submissions.replayed(record["submitted"])
        self._replay_plans = list(record.get("plans", []))
        events, progress = replayed(record, now, self.world.jobs, self.world.cluster.n_gpus, submitted)
        if events.online is not None:
            self._replayed_online = events.online.copy()
        return events, progress

    def check_plan(self, plan: Plan) -> None:
        recorded = self._replay_plans.pop(0) if self._replay_plans else None
        if not same_plan(plan, recorded, self.world.jobs.column("job_id")):
            self.counters["replay_divergences"] += 1
            log.warning(
                "replay: round %d's plan differs from the journal's (did the graph change?); "
                "the running jobs are reconciled with the agents after replay",
                self.clock.k,
            )

    def next_round(self) -> bool:
        """Move to the next journaled round; False once replay is over."""
        self.replay_at += 1
        if self.replaying:
            self.clock.k, self.clock.now = self.replay[self.replay_at][0], self.replay[self.replay_at][1]
            return True
        return False

    # --- takeover ---
    def begin(self) -> None:
        """After replay: rebuild the books of every job from the journal's attempts, and give
        agents until the deadline to report the running ones."""
        books = self.attempts
        jobs = self.world.jobs
        status, done, has_model = jobs.column("status"), jobs.column("done"), jobs.column("has_model")
        latest: dict[int, AttemptRow] = {}
        for a in self.journal.attempts():
            row = jobs.row_of(a.job_id)
            if row is None:
                continue
            latest[row] = a
            if a.checkpoint is not None and a.checkpoint_iteration is not None:
                best = books.checkpoints.get(row)
                if best is None or a.checkpoint_iteration >= best[1]:
                    books.checkpoints[row] = (a.checkpoint, a.checkpoint_iteration)
            if a.outcome == "failed":
                books.retries[row] += 1
        shapes = self.journal.shapes()
        for row, a in latest.items():
            att = self._rebuilt(row, a, shapes.get((a.job_id, a.attempt), []))
            att.iteration = a.end_iteration if a.end_iteration is not None else a.start_iteration
            att.checkpoint, att.checkpoint_iteration = a.checkpoint, a.checkpoint_iteration
            books.current[row] = att
            if a.ended_s is not None:
                att.ended = True
                if status[row] == RUNNING:
                    # It ended after the last journaled round: the journal knows how.
                    books.conclude(att, a.outcome or "killed", a.ended_s, permanent=False, from_journal=True)
                continue
            att.revoked = status[row] != RUNNING
            books.live[(a.job_id, a.attempt)] = att
            books.ports_used.add(att.master_port)
            books.unconfirmed.add((a.job_id, a.attempt))
            if status[row] == RUNNING:
                books.reached[row] = int(done[row]) if has_model[row] else 0
                # Its service is booked up to the last journaled round (the clock is there): an
                # attempt the agents confirm has held its GPUs throughout, and one requeued
                # held them until then (its journaled end), so the next poll books the time
                # the scheduler was down as the attempt's.
                books.until[row] = self.clock.now
        strays_taken_over(self.reports)
        # Nodes that were up are presumed up until they re-register or their heartbeat times out;
        # not those whose agents were told to stop (or said they were stopping): their workers
        # are gone, and they stay offline until their agents register.
        for node in self.nodes.presume_up(self._replayed_online):
            affected = self.nodes.on_lost(node)
            log.info(
                "node %s: its agent was told to stop, or stopped, in the last run; offline until it registers%s",
                node.name,
                "; requeueing job(s) " + ", ".join(map(str, affected)) if affected else "",
            )
        options = books.options
        self.until = time.time() + (options.takeover_s or options.heartbeat_timeout_s)
        log.info(
            "taking over: %d running job(s) to be confirmed by their agents within %.1fs",
            len(books.unconfirmed),
            self.until - time.time(),
        )

    def _rebuilt(self, row: int, a: AttemptRow, shapes: list[ShapeRow]) -> Attempt:
        """The attempt as the agents run it: as launched, then in its last journaled shape (its
        GPUs, port, generation, batch and learning-rate rule after its in-place resizes); as
        launched alone for a journal written before shapes were kept."""
        att = Attempt(
            row,
            a.job_id,
            a.attempt,
            self._gpus(a.gpus, "attempts", f"job {a.job_id} attempt {a.attempt}"),
            np.empty(0, np.int64),
            a.launched_s,
            a.master_port,
            start_iteration=a.start_iteration,
            resume=a.resume,
            sent=True,
            elastic=counts(self.world.jobs, row) == "samples",
        )
        att.global_batch = att.elastic or any(shape.generation > 0 for shape in shapes)
        size = att.world_size
        for shape in shapes:
            where = f"job {a.job_id} attempt {a.attempt} generation {shape.generation}"
            att.gpus = self._gpus(shape.gpus, "shapes", where)
            att.generation, att.master_port, att.batch = shape.generation, shape.master_port, shape.batch
            att.iters_per_s, att.lr_rule, att.lr_scale = shape.iters_per_s, shape.lr_rule, shape.lr_scale
            regroup(att, size, att.world_size)  # (ranks a shrink let go may still be on their way out)
            size = att.world_size
        att.slots = self.world.cluster.gpu_node[att.gpus]
        return att

    def _gpus(self, gpus: list[int], table: str, where: str) -> np.ndarray:
        n = self.world.cluster.n_gpus
        if not gpus or max(gpus) >= n:
            raise self.journal.damaged(table, where, f"gpus {gpus} are not some of the cluster's, 0 to {n - 1}")
        return np.asarray(gpus, dtype=np.int64)

    def check(self) -> None:
        if self.until is not None and time.time() >= self.until:
            self._end()

    def _end(self) -> None:
        self.until = None
        books = self.attempts
        for key in sorted(books.unconfirmed):
            att = books.live.get(key)
            if att is None:
                continue
            log.warning("job %d attempt %d: no agent reported it after the restart; requeued from its checkpoint", *key)
            att.lose_ranks(range(att.world_size), att.iteration)
            books.maybe_end(att, self.clock.now_s())
        books.unconfirmed.clear()
