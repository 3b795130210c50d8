"""Attempts and leases: every launch of a job is an attempt, journaled before any message leaves.
A launch sends one message per node (the job's ranks there); a kept job gets no message at all
(its lease renews optimistically); a suspended job is revoked through rank 0 only (its workers
agree among themselves on the exit iteration, two-phase). A job relaunched before its previous
attempt has finished checkpointing is launched once that attempt exits, from its checkpoint
(the resume point). When every worker of an attempt has exited, the attempt's outcome decides
what the job does next: finished, requeued from its last checkpoint, retried after a crash, or
failed for good after too many. What a launch sends, and to whom, is runtime/backends/live/launches.py."""

from __future__ import annotations

import logging
import math
from collections import defaultdict, deque
from pathlib import Path

import attrs
import numpy as np

from roundhouse.runtime.backends.live import launches
from roundhouse.runtime.backends.live.launches import attempt_row
from roundhouse.runtime.backends.live.nodes import GONE, SENT, Nodes
from roundhouse.runtime.backends.live.round import Clock, News
from roundhouse.runtime.journal import Journal, ShapeRow
from roundhouse.runtime.resizing import lr_base, lr_scale
from roundhouse.runtime.types import LR_LINEAR
from roundhouse.runtime.world import FINISHED, RUNNING, World

log = logging.getLogger("roundhouse.scheduler")


@attrs.define(eq=False)
class Attempt:
    row: int
    job_id: int
    n: int
    gpus: np.ndarray  # global GPU ids, rank order
    slots: np.ndarray  # node of each rank
    launched_s: float
    master_port: int
    batch: int = 0
    iters_per_s: float = 0.0  # the profile's speed on these GPUs (0: unknown; emulated GPUs hold it)
    start_iteration: int = 0
    resume: str | None = None
    sent: bool = False  # launch messages sent (False: waiting for the previous attempt to exit)
    revoked: bool = False  # suspended by a plan (the world no longer runs it)
    requeued: bool = False  # the world was told it lost its GPUs
    kill_sent: bool = False
    exits: dict[int, dict] = attrs.field(factory=dict)  # rank -> exited body (or a loss)
    exit_wall: dict[int, float] = attrs.field(factory=dict)  # rank -> wall time its exit report arrived
    last_exit_s: float = 0.0
    iteration: int = 0
    checkpoint: str | None = None
    checkpoint_iteration: int | None = None
    ended: bool = False
    successor: Attempt | None = None
    waits_for: Attempt | None = None  # the previous attempt, still checkpointing: launch after it
    generation: int = 0  # in-place resizes so far (runtime/backends/live/resizes.py)
    leaving: set[int] = attrs.field(factory=set)  # ranks an in-place shrink let go (they exit by themselves)
    joiners: set[int] = attrs.field(factory=set)  # ranks an in-place grow started
    # The learning-rate rule of the job's last resize (runtime/types.py LR_RULES; None: never
    # resized by a rule), and the factor it gives the job's own rate at this attempt's batch
    # (None: none; the job keeps the rate it has). Launches and in-place resizes send it.
    lr_rule: int | None = None
    lr_scale: float | None = None
    elastic: bool = False  # its work counts samples (`counts`)
    # Whether `batch` is the global batch (a plan's, or an elastic job's own: each worker gets its
    # share) or what each worker trains with (a job's own batch size when it is not elastic).
    global_batch: bool = False

    @property
    def world_size(self) -> int:
        return len(self.gpus)

    @property
    def worker_batch(self) -> int:
        """The batch size each worker is told: its share of a global batch, or the job's own batch
        size as each worker trains with it (`global_batch`)."""
        return worker_batch(self.batch, self.world_size) if self.global_batch else self.batch

    @property
    def global_batch_size(self) -> int:
        return self.batch if self.global_batch else self.batch * self.world_size

    def lose_ranks(self, ranks, iteration: int, heard: float | None = None, reason: str = "") -> None:
        """These workers are gone with their node (or never reached it); `heard`: the wall time
        their node was last heard from (None: not known, or never); `reason`: why, for the
        journal (none: the node was lost)."""
        for rank in ranks:
            lost = {"outcome": "killed", "iteration": iteration, "lost": True, "heard": heard}
            self.exits.setdefault(int(rank), {**lost, "reason": reason} if reason else lost)

    def lost_with_a_node(self, slack_s: float) -> bool:
        """Whether the attempt ended because a node it ran on was lost: a rank was lost with its
        node, and no worker elsewhere failed while that node was still clearly alive. A worker
        whose peer's node dies fails at once (its collective breaks), before the heartbeat
        timeout declares the node lost: that failure is the loss's, not the job's. A failure
        reported more than `slack_s` (a heartbeat period) before every lost node was last
        heard from came while they were all up, and is the job's own."""
        lost = [e.get("heard") for e in self.exits.values() if e.get("lost")]
        if not lost:
            return False
        silent_since = min(-math.inf if h is None else h for h in lost)
        return not any(
            e["outcome"] == "failed" and not e.get("lost") and self.exit_wall.get(rank, math.inf) < silent_since - slack_s
            for rank, e in self.exits.items()
        )


def counts(jobs, row: int) -> str:
    """What a job's iterations count on the wire (wire/protocol.py `counts`): samples for an
    elastic job (its work and rates are in samples, traces/prepare.py), else steps."""
    return "samples" if jobs.has_column("elastic_model") and jobs.column("elastic_model")[row] >= 0 else "steps"


def learning_rate_factor(rule: int | None, batch: int, base: float) -> float | None:
    """The factor `rule` gives a job's own learning rate at global batch `batch`, `base` being
    the batch its own rate is for (runtime/resizing.py `lr_base`, as the simulator takes it).
    None: no rule, or one that leaves the rate to the job."""
    if rule is None:
        return None
    scale = float(lr_scale(np.array([rule]), np.array([batch / max(float(base), 1.0)]))[0])
    return None if np.isnan(scale) else scale


def worker_batch(batch: int, world_size: int) -> int:
    """A global batch split over `world_size` workers, rounded up (0, the workload's own batch,
    stays 0). Launches and in-place resizes of a global batch both send this, so every worker
    trains with its share of the plan's batch whichever way the job was shaped."""
    return -(-int(batch) // max(int(world_size), 1)) if batch > 0 else 0


def shape_row(att: Attempt, nodes: Nodes, since_s: float) -> ShapeRow:
    """The attempt's shape as it runs from `since_s` on (its generation), for the journal: a
    restarted scheduler takes the attempt back in this shape (runtime/backends/live/takeover.py)."""
    return ShapeRow(
        att.job_id,
        att.n,
        att.generation,
        float(since_s),
        att.gpus.tolist(),
        [nodes.name_at(int(s)) or "?" for s in att.slots],
        att.master_port,
        int(att.batch),
        float(att.iters_per_s),
        att.lr_rule,
        att.lr_scale,
    )


class Attempts:
    def __init__(self, world: World, journal: Journal, options, counters: dict, news: News, clock: Clock, nodes: Nodes):
        self.world = world
        self.journal = journal
        self.options = options
        self.counters = counters
        self.news = news
        self.clock = clock
        self.nodes = nodes
        self.checkpoint_root = str(Path(options.checkpoint_dir).resolve())
        # By job-table row.
        self.current: dict[int, Attempt] = {}
        self.live: dict[tuple[int, int], Attempt] = {}  # (job id, attempt) -> attempt not ended
        self.checkpoints: dict[int, tuple[str, int]] = {}  # the best checkpoint: (path, iteration)
        self.retries: defaultdict[int, int] = defaultdict(int)
        self.reached: dict[int, int] = {}  # iterations reached by the job's latest attempt
        self.until: dict[int, float] = {}  # service accounted up to this time
        self.freed_at: dict[int, float] = {}  # GPUs lost (requeue, failure) at this time
        self.unconfirmed: set[tuple[int, int]] = set()  # after a restart: not yet reported by an agent
        self.ports_used: set[int] = set()
        self._port_range: tuple[int, int] | None = None
        self._free_ports: deque[int] = deque()

    def _column(self, name: str) -> np.ndarray:
        return self.world.jobs.column(name)

    # --- new attempts ---
    def new(self, row: int, gpus: np.ndarray, batch: int, iters_per_s: float, lr_rule: int | None = None) -> Attempt:
        """A new attempt of the job in `row`; `lr_rule`: the learning-rate rule of the resize it
        carries out by checkpoint and restart (else the rule of the job's last resize holds)."""
        prev = self.current.get(row)
        n = prev.n + 1 if prev is not None else 1
        job_id = int(self._column("job_id")[row])
        att = Attempt(row, job_id, n, gpus, self.world.cluster.gpu_node[gpus], self.clock.now, self._pick_port())
        has_model = self._column("has_model")[row]
        own = int(self._column("batch_size")[row])
        att.batch = int(batch or own)
        att.elastic = counts(self.world.jobs, row) == "samples"
        att.global_batch = bool(batch) or att.elastic
        att.iters_per_s = float(iters_per_s) if has_model else 0.0
        att.lr_rule = lr_rule if lr_rule is not None else prev.lr_rule if prev is not None else None
        # A launch carrying a batch size: the factor by the job's rule, linear if never resized
        # (as the simulator books it, resizing.note_launch_lr); without one, as its last rule left it.
        rule = att.lr_rule if att.lr_rule is not None else LR_LINEAR if batch else None
        att.lr_scale = learning_rate_factor(rule, att.batch, float(lr_base(self.world.jobs, np.array([row]))[0]))
        if prev is not None and not prev.ended:
            prev.successor = att
            att.waits_for = prev
        else:
            self.resume_point(att)
        self.current[row] = att
        self.live[(att.job_id, att.n)] = att
        self.ports_used.add(att.master_port)
        self.journal.add_attempt(attempt_row(att, self.nodes))  # committed before any message leaves
        self.journal.add_shape(shape_row(att, self.nodes, att.launched_s))  # (its batch and learning-rate rule)
        self.until[row] = self.clock.now
        return att

    def resume_point(self, att: Attempt) -> None:
        ckpt = self.checkpoints.get(att.row)
        att.resume, att.start_iteration = (ckpt[0], ckpt[1]) if ckpt else (None, 0)
        att.iteration = att.start_iteration

    def _pick_port(self) -> int:
        """A rendezvous port no live attempt uses: the one free longest (ports freed go to the
        back of the line), in constant time; the range's first when every port is taken."""
        lo, hi = self.options.ports
        if self._port_range != (lo, hi):
            self._port_range = (lo, hi)
            self._free_ports = deque(range(lo, hi))
        free = self._free_ports
        while free:
            port = free.popleft()
            if port not in self.ports_used:  # (a port taken back after a restart is skipped here)
                return port
        return lo

    # --- launching (runtime/backends/live/launches.py) and revoking ---
    start_or_defer = launches.start_or_defer
    _send_launch = launches.send_launch
    _cannot_run = launches.cannot_run

    def revoke(self, att: Attempt | None) -> None:
        if att is None or att.ended:
            return
        att.revoked = True
        self.counters["revocations"] += 1
        if not att.sent:
            # Never started (it waited for its predecessor): nothing ran, nothing to checkpoint.
            for rank in range(att.world_size):
                att.exits.setdefault(rank, {"outcome": "preempted", "iteration": att.start_iteration})
            self.maybe_end(att, self.clock.now_s())
            return
        node = self.nodes.slots[int(att.slots[0])]
        # Two-phase: only rank 0 hears of it; it agrees the exit iteration with the others.
        if 0 in att.exits:
            return
        how = self.nodes.to_node(node, "revoke", job=att.job_id, attempt=att.n, kill=False, rank=0)
        if how != GONE:
            assert node is not None  # (to_node is GONE for no node)
            told, until = ("told", "") if how == SENT else ("held for", " until its agent registers again: not connected")
            log.info("revoke job %d attempt %d (%s rank 0 on %s%s)", att.job_id, att.n, told, node.name, until)

    def withhold(self, att: Attempt, reason: str) -> None:
        """A new attempt never to be sent (the run ends before it would start): it ends now as
        preempted at its start iteration, its end journaled with `reason`. No agent hears of it."""
        att.revoked = True
        for rank in range(att.world_size):
            att.exits.setdefault(rank, {"outcome": "preempted", "iteration": att.start_iteration, "reason": reason})
        self.maybe_end(att, self.clock.now)

    def kill_rest(self, att: Attempt) -> None:
        """A worker died: the others would wait for it in their collectives forever."""
        if att.kill_sent or att.world_size == 1:
            return
        att.kill_sent = True
        for slot in sorted({int(s) for r, s in enumerate(att.slots) if r not in att.exits}):
            self.nodes.to_slot(slot, "revoke", job=att.job_id, attempt=att.n, kill=True)

    # --- how attempts end ---
    def requeue_now(self, att: Attempt, t: float) -> None:
        """The world still runs this attempt but it lost its GPUs: requeue the job at once."""
        if att.revoked or att.requeued or self.current.get(att.row) is not att:
            return
        if self._column("status")[att.row] != RUNNING:
            return
        att.requeued = True
        self.news.requeued.append(att.row)
        self.freed_at[att.row] = t
        ckpt = self.checkpoints.get(att.row)
        self.reached[att.row] = ckpt[1] if ckpt else 0

    def maybe_end(self, att: Attempt, t: float, permanent: bool = False) -> None:
        if att.ended or (len(att.exits) < att.world_size and not _joiners_moot(self, att)):
            return
        outcomes = {e["outcome"] for e in att.exits.values()}
        if att.exits[0]["outcome"] == "done":
            outcome = "done"
        elif att.lost_with_a_node(self.options.heartbeat_s):
            outcome = "killed"  # a node loss: requeued from the checkpoint, no retry counted
        elif "failed" in outcomes:
            outcome = "failed"
        elif "killed" in outcomes:
            outcome = "killed"
        else:
            outcome = "preempted"
        self.conclude(att, outcome, t, permanent)

    def _drop(self, att: Attempt) -> None:
        att.ended = True
        self.live.pop((att.job_id, att.n), None)
        if att.master_port in self.ports_used:
            self.ports_used.discard(att.master_port)
            if self._port_range is not None and self._port_range[0] <= att.master_port < self._port_range[1]:
                self._free_ports.append(att.master_port)

    def conclude(self, att: Attempt, outcome: str, t: float, permanent: bool, from_journal: bool = False) -> None:
        self._drop(att)
        self.unconfirmed.discard((att.job_id, att.n))
        row = att.row
        reasons = "; ".join(sorted({e.get("reason", "") for e in att.exits.values() if e.get("reason")}))
        if not from_journal:
            self.journal.end_attempt(
                att.job_id, att.n, t, outcome, att.iteration, att.checkpoint, att.checkpoint_iteration, reasons[:2000]
            )
        current = self.current.get(row) is att
        status = self._column("status")[row]
        news = self.news
        if outcome == "done":
            if status != FINISHED and not any(r == row for r, _ in news.finished):
                news.finished.append((row, t))
                self.freed_at[row] = t
                self.reached.pop(row, None)
                successor = att.successor
                if successor is not None and not successor.ended:
                    self._drop(successor)  # the job is complete: its relaunch never starts
                    self.journal.end_attempt(
                        successor.job_id,
                        successor.n,
                        t,
                        "cancelled",
                        successor.start_iteration,
                        None,
                        None,
                        "the previous attempt completed the job",
                    )
            return
        if outcome == "failed" and not att.revoked and not from_journal:
            self.retries[row] += 1
        has_model = self._column("has_model")[row]
        if current and not att.revoked:
            if outcome == "failed" and (permanent or self.retries[row] > self.options.max_retries):
                why = "cannot run" if permanent else f"failed {self.retries[row]} times"
                log.error("job %d %s; giving up (%s)", att.job_id, why, reasons or "no reason given")
                if status != FINISHED:
                    news.failed.append((row, t))
                    self.freed_at[row] = t
                    self.reached.pop(row, None)
                return
            if not att.requeued:
                self.requeue_now(att, t)
                if outcome == "failed":
                    log.warning(
                        "job %d crashed (try %d of %d); requeued from its last checkpoint",
                        att.job_id,
                        self.retries[row],
                        self.options.max_retries + 1,
                    )
        elif current and att.revoked and att.checkpoint_iteration is not None and has_model:
            self.reached[row] = max(att.checkpoint_iteration, 0)
        elif current and att.revoked and has_model:
            ckpt = self.checkpoints.get(row)
            self.reached[row] = ckpt[1] if ckpt else 0
        successor = att.successor
        if successor is not None and not successor.ended and self.current.get(row) is successor:
            if not successor.revoked:
                self._send_launch(successor)
            else:
                self.conclude(successor, "preempted", t, permanent=False)


def _joiners_moot(books: Attempts, att: Attempt) -> bool:
    """Rank 0 completed the job while ranks an in-place grow started have not reported: they
    have nothing left to do (an agent may also have refused to start them, its rank 0
    having just finished), so they are stopped and the attempt ends without them rather
    than waiting for exits that may never come."""
    first = att.exits.get(0)
    missing = [r for r in range(att.world_size) if r not in att.exits]
    if first is None or first["outcome"] != "done" or not set(missing) <= att.joiners:
        return False
    books.kill_rest(att)
    for rank in missing:
        att.exits[rank] = {"outcome": "killed", "iteration": att.iteration}
    log.info("job %d attempt %d: done before ranks %s it grew to reported", att.job_id, att.n, missing)
    return True
