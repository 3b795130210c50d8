"""The live backend: the backend interface (poll, apply, advance) over the rooms of this package.
Every round:

- `poll()` turns what agents reported since the last boundary into the events the simulator
  produces: completions with their exact times, progress (iterations reached, GPU-seconds
  held), the faults only a live cluster has (jobs requeued after a lost node or a crashed
  process, jobs failed for good, GPUs going offline and online), and jobs submitted with
  `roundhouse submit` (for `LiveSource`).
- `apply(plan)` journals the round, then revokes each suspended job and launches each launch.
- `advance()` serves messages until the wall clock reaches the next boundary.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.backends.live import resizes
from roundhouse.runtime.backends.live.attempts import Attempts
from roundhouse.runtime.backends.live.ending import checkpoint_running, last_round_sends_nothing, stop_agents, withhold
from roundhouse.runtime.backends.live.nodes import Nodes, refuses_submission
from roundhouse.runtime.backends.live.reports import Reports
from roundhouse.runtime.backends.live.round import Clock, News, SendLags
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.backends.live.submissions import Submissions, as_submitted
from roundhouse.runtime.backends.live.takeover import Takeover
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.values import format_duration
from roundhouse.runtime.world import FINISHED, RUNNING, PlanError, World
from roundhouse.wire.security import ServerSecurity

log = logging.getLogger("roundhouse.scheduler")


@attrs.frozen
class LiveOptions:
    heartbeat_s: float = 2.0  # agents heartbeat this often
    heartbeat_timeout_s: float = 10.0  # an agent silent this long is lost
    max_retries: int = 3  # a crashed job is relaunched this many times, then fails for good
    checkpoint_every_s: float = 60.0  # jobs also checkpoint this often (0: only when revoked)
    checkpoint_dir: str = "checkpoints"  # where jobs write checkpoints: storage every node can read
    ports: tuple[int, int] = (29500, 29999)  # rendezvous ports for multi-worker jobs (half-open)
    wait_for_agents_s: float = 30.0  # before round 0, wait this long for the whole cluster
    takeover_s: float | None = None  # after a restart: time for agents to re-register (default: heartbeat timeout)
    stop_agents: bool = False  # tell the agents to shut down when the run ends
    # At the time limit, wait this long for the running jobs to checkpoint and exit (an agent
    # terminates a worker that has not stopped within its --revoke-grace, 60 s by default).
    end_wait_s: float = 90.0


class LiveBackend:
    """Runs a graph's plans on real nodes. See the package's docstring."""

    wall_clock = True  # the engine: no idle-round jumps, and a live cluster never stalls for good

    def __init__(
        self,
        world: World,
        round_s: float,
        bind: str,
        security: ServerSecurity,
        journal: Journal,
        options: LiveOptions = LiveOptions(),
        meta: dict[str, Any] | None = None,
    ):
        self.world = world
        self.round_s = float(round_s)
        self.bind = bind
        self.journal = journal
        self._meta = dict(meta or {})
        self.session = uuid.uuid4().hex[:16]
        self.counters: defaultdict[str, float] = defaultdict(int)
        self.clock = Clock(self.round_s)
        self.news = News()
        self.stop_requested = ""
        self.hurried = False  # asked to stop again while stopping: the run's end waits for nothing (request_stop)
        self.rounds = 0  # rounds run, replayed ones included: the whole run's (as the summary counts them)
        self.started = False  # the run began (or resumed): start() did not stop while waiting for agents
        self.until: float | None = None  # the run ends at this time (the engine's --until): rounds are cut there
        self.at_limit = False  # the run stopped at `until` (its running jobs are then checkpointed)
        self.ended = False  # the run's end is over (ending.py `end_run`): its agents were told to stop, if so
        self.end_events: Events | None = None  # what the run's end told the world (ending.py), for elements to count
        self.server = Server(bind, security, journal, self.counters, lambda identity: self.nodes.name_of(identity))
        self.nodes = Nodes(world.cluster, self.server, journal, options, self.counters, self.news, self.clock, self.session)
        self.attempts = Attempts(world, journal, options, self.counters, self.news, self.clock, self.nodes)
        self.reports = Reports(self.attempts, self.nodes, self.server)
        self.submissions = Submissions(world, journal)
        self.takeover = Takeover(self.attempts, self.nodes, self.submissions, self.reports)
        self.nodes.on_lost = self.reports.node_lost
        self.server.on_cut_off = self.nodes.on_cut_off
        self.nodes.on_running = self.reports.running
        self.nodes.on_reconnected = self.reports.reconnected
        self.server.handlers.update(
            register=self.nodes.on_register,
            heartbeat=self.nodes.on_heartbeat,
            stopping=self.nodes.on_stopping,
            started=self.reports.on_started,
            metrics=self.reports.on_metrics,
            exited=self.reports.on_exited,
            lease=self.reports.on_lease,
            submit=lambda identity, seq, body, frame: on_submit(self, identity, seq, body, frame),
            status=lambda identity, seq, body, frame: on_status(self, identity, seq, body, frame),
        )
        self.options = options
        self.send_lags = SendLags()

    @property
    def options(self) -> LiveOptions:
        return self._options

    @options.setter
    def options(self, options: LiveOptions) -> None:
        self._options = self.nodes.options = self.attempts.options = options

    # --- lifecycle ---
    @property
    def now(self) -> float:
        return self.clock.now

    @property
    def replaying(self) -> bool:
        return self.takeover.replaying

    def start(self, begin: Callable[[], None] | None = None) -> bool:
        """Bind, then either resume the journal's run or wait for the cluster's agents and start
        a new one at round 0. The journal is locked for the run first (one scheduler at a time),
        and its run checked to be this one before anything of it (its nodes) is read.

        `begin` (the engine's) is called before the socket binds if the run is new, so that
        the ids its sources will bring are known (`Submissions.expect`) before the first
        submission is taken; a resumed run takes none before its clock is set, and its engine
        begins after. Returns whether `begin` was called."""
        self.journal.lock()
        fresh = not self.journal.run_of(self._meta)
        begun = fresh and begin is not None
        if fresh and begin is not None:
            begin()
        self.server.start()
        self.nodes.load()
        if fresh:
            wait_for_agents(self)
            if self.stop_requested:
                return begun  # before the run began: nothing journaled, a rerun starts afresh
        self.started = True
        meta = self.journal.begin(self._meta)
        clock = self.clock
        clock.epoch = float(meta["epoch"])
        self.takeover.load()
        if self.takeover.replay:
            # (Not "resuming" yet: the replay may find the run had ended, which `serve` refuses.)
            log.info("reading the journal's run: replaying its %d rounds", len(self.takeover.replay))
            clock.k, clock.now = self.takeover.replay[0][0], self.takeover.replay[0][1]
        else:
            clock.at(0.0 if fresh else clock.boundary_after(time.time()))
            if not fresh:
                self.takeover.begin()
        if fresh:
            log.info("round 0 starts now: %d of %d GPUs online", int(self.nodes.online.sum()), len(self.nodes.online))
        if not self.takeover.replaying:
            _stop_at_the_limit(self)
        return begun

    def serve(self, wall_deadline: float) -> None:
        """Handle messages until the wall clock reaches `wall_deadline` (or a stop is asked)."""
        self.server.serve(wall_deadline, lambda: bool(self.stop_requested), self._duties)

    def _duties(self) -> None:
        self.nodes.check()
        self.takeover.check()

    def journal_last_round(self) -> None:
        if self.started and self.takeover.last_record and not self.takeover.replaying and not self.takeover.round_journaled:
            # The last round (the engine stopped after its tick) is part of the run too: a
            # resumed run replays it (its finished jobs, its submissions).
            self.takeover.journal_round()

    def close(self) -> None:
        try:
            self.journal_last_round()
            self.stop_agents()  # (unless the run's end told them: ending.py `end_run`)
            if self.server.open:
                self.server.flush()
        finally:
            self.journal.commit()
            self.server.close()

    def stop_agents(self) -> None:
        """With `--stop-agents`, once the run has ended: its agents are told to stop, once (ending.py)."""
        if self.server.open and self.options.stop_agents and not self.ended:
            self.journal_last_round()
            timeout_s, wait_s = self.options.heartbeat_timeout_s, self.options.end_wait_s
            stop_agents(self.nodes, self.server, timeout_s, self.attempts, wait_s, lambda: self.hurried)

    def checkpoint_running(self) -> None:
        """The run ended at its time limit: its running jobs checkpoint and stop (ending.py)."""
        self.journal_last_round()
        checkpoint_running(self.attempts, self.server, self._duties, self.options.end_wait_s, lambda: self.hurried)

    def request_stop(self, why: str) -> None:
        """Stop now: the round in progress is cut short here (`advance`), and the engine, which
        reads `stop_requested`, ends the run after it. Asked again while the run is stopping
        (checkpointing its jobs at the time limit, waiting for stopping agents), it stops
        waiting: `hurried` ends those waits (ending.py), and a rerun with the same journal takes
        back what still runs."""
        if self.stop_requested:
            self.hurried = True
            log.warning(
                "%s while stopping: no longer waiting for jobs or agents to stop; "
                "`roundhouse serve` with the same --journal takes back what still runs",
                why,
            )
            return
        self.stop_requested = why
        # (before round 0 there is no round in progress: the wait for agents ends)
        log.info("%s: stopping now%s", why, " (the round in progress ends here)" if self.started else "")

    # --- the backend interface ---
    def poll(self) -> tuple[Events, Progress]:
        self.rounds += 1
        if self.takeover.replaying:
            return self.takeover.replayed_poll()
        t = self.clock.now
        self._polled_at = time.time()
        self.counters["start_lag_s"] += max(0.0, self._polled_at - self.clock.wall(t))
        news, nodes = self.news, self.nodes
        progress = self.reports.since_last_poll(t, self.world.running_rows)
        finished = news.finished + news.failed
        submitted, submitted_ids = self.submissions.take(self.clock.k)
        events = Events(
            time=t,
            finished=[r for r, _ in finished],
            finished_at=[min(max(x, 0.0), t) for _, x in finished],
            failed=[r for r, _ in news.failed],
            requeued=news.requeued,
            online=nodes.online.copy() if nodes.online_changed else None,
            nodes_joined=tuple(news.joined),
            nodes_lost=tuple(news.lost),
            metrics=news.metrics,
            submitted=submitted,
        )
        self.takeover.polled(events, progress, submitted_ids)
        self.reports.polled([r for r, _ in finished])
        news.clear()
        nodes.online_changed = False
        return events, progress

    def apply(self, plan: Plan) -> None:
        """Called with a checked plan before the world's books change."""
        if self.takeover.replaying:
            self.takeover.check_plan(plan)
            return
        started = time.perf_counter()
        self.counters["tick_s"] += max(0.0, time.time() - getattr(self, "_polled_at", time.time()))
        self._apply(plan)
        self.counters["apply_s"] += time.perf_counter() - started

    def _apply(self, plan: Plan) -> None:
        if plan.launch_partner is not None and (plan.launch_partner >= 0).any():
            raise PlanError(
                "it shares GPUs between jobs (space_sharing=true), which live agents do not do: "
                "they run one job per GPU; space sharing is simulated only"
            )
        books = self.attempts
        resized = resizes.plan_resizes(books, plan)  # checked first: a refused plan leaves no trace
        self.takeover.planned(plan)
        # The attempts to revoke, before a move (suspend and launch in one round) makes a new one
        # current. Jobs a plan completes (where plans can: a loss-based termination) stop the
        # same way: they checkpoint and exit, and the world has already counted them finished.
        ending = np.concatenate([plan.suspend, plan.complete, resizes.restarted_rows(resized)])
        revoked = [books.current.get(row) for row in ending.tolist()]
        rates = self.world.launch_rates(plan).tolist() if len(plan.launch_rows) else []
        launches = [books.new(a.row, np.asarray(a.gpus), a.batch_size, rate) for a, rate in zip(plan.launch, rates)]
        launches += resizes.relaunches(books, resized)  # resizes by checkpoint and restart, as moves
        # Write ahead: the round and the new attempts are durable before any message leaves.
        self.takeover.journal_round()
        self.server.flush()
        for att in revoked:
            books.revoke(att)
        last = last_round_sends_nothing(self.at_limit, self.until, self.stop_requested, self.options.stop_agents)
        if last is not None:
            withhold(books, launches, resized, last)
        else:
            for att in launches:
                books.start_or_defer(att)
            resizes.carry_out(books, self.nodes, resized)
        self.server.flush()
        if revoked or (launches and last is None):
            self.send_lags.add(time.time() - self.clock.wall(self.clock.now))

    def advance(self) -> None:
        clock = self.clock
        if self.takeover.replaying:
            if self.takeover.next_round():
                return
            # Replay is over (its rounds are in the journal already): the run goes on on its schedule, at the
            # next boundary after its last round (which a stop may have cut short) and the wall clock (should
            # that clock step back, the former), taking running jobs back.
            last = clock.k
            target = clock.next_boundary()
            until = self.until
            cut = until is not None and clock.now < until < target  # (the limit falls before that boundary)
            target = until if until is not None and cut else target
            log.info("resuming the journal's run (%d rounds replayed): taking back running jobs", len(self.takeover.replay))
            self.takeover.begin()
            self.serve(clock.wall(target))
            if self._cut_at_the_stop(clock.wall(target)):
                return
            if cut:
                clock.now, clock.k = target, last + 1
            else:
                clock.at(target)
                clock.k = max(clock.k, last + 1)  # after a round cut short at the old run's end
            _stop_at_the_limit(self)
            return
        if not self.takeover.round_journaled:
            self.takeover.journal_round()
        self.server.flush()
        target = clock.now + self.round_s
        wall_target = clock.wall(target)
        if time.time() > wall_target:
            target = clock.boundary_after(time.time())
            log.warning("round at t=%gs overran its length; the next round is at t=%gs", clock.now, target)
            wall_target = clock.wall(target)
        until = self.until
        cut = until is not None and clock.now < until < target
        if until is not None and cut:
            # The run ends inside this round: the round is cut short there, not run to its end.
            target, wall_target = until, clock.wall(until)
        self.serve(wall_target)
        if self._cut_at_the_stop(wall_target):
            return
        if cut:
            clock.now, clock.k = target, clock.k + 1
        else:
            clock.at(target)
        _stop_at_the_limit(self)

    def _cut_at_the_stop(self, wall_target: float) -> bool:
        """Stopped (a signal) before the round's end, `wall_target`: the round is cut short at
        the moment of the stop, as at the time limit, so that the run's last round, its time
        run and its jobs' GPU time end there. Returns whether it was."""
        stopped = time.time()
        if not self.stop_requested or stopped >= wall_target:
            return False
        self.clock.now, self.clock.k = max(self.clock.now, self.clock.now_s()), self.clock.k + 1
        return True


def _stop_at_the_limit(backend: LiveBackend) -> None:
    """The run's time limit is the backend's to keep, not the engine's: a resumed run replays
    its journal to the end (whatever the limit), then runs on until the limit."""
    until, now = backend.until, backend.clock.now
    if until is not None and now + 1e-9 >= until and not backend.stop_requested:
        backend.stop_requested = f"reached the time limit ({format_duration(until)})"
        backend.at_limit = True
        if now > until + 1e-3:  # (a run resumed past it: its clock counts from its first start)
            log.warning(
                "the time limit (--until %s) had passed when the run resumed at t=%s (a resumed run's clock counts "
                "from its first start): it stops now; give a later --until to run on",
                format_duration(until),
                format_duration(now),
            )


def on_status(backend: LiveBackend, identity, seq, body, frame) -> None:
    """A submitter asks how the run goes (`roundhouse status`)."""
    backend.server.send(identity, "status_reply", status={k: float(v) for k, v in status_figures(backend).items()})


def on_submit(backend: LiveBackend, identity, seq, body, frame) -> None:
    """A submission (`roundhouse submit`): checked and journaled (`Submissions.accept`), answered
    once the journal has committed; refused saying why."""
    refused = refuses_submission(frame) or ("" if body["jobs"] else "no jobs in the submission")
    if not refused:
        try:
            ids = backend.submissions.accept(body["jobs"], backend.clock.now_s())
        except RoundhouseError as err:
            refused = str(err)
    if refused:  # (logged as accepted ones are, at most a few lines a minute)
        # (logged naming the job as the submitter did, not by an id the scheduler chose for it)
        said = as_submitted(refused, body["jobs"])
        backend.nodes.refusals.warn("submission", "refused a submission: %s (from %s)", said, backend.server.who(identity))
        backend.server.send(identity, "error", reason=refused, ref=seq)
        return
    backend.counters["submitted"] += len(ids)
    log.info(
        "accepted %d job(s) from a submitter: %s", len(ids), ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
    )
    backend.server.after_commit(identity, "accepted", job_ids=ids)


def status_figures(backend: LiveBackend) -> dict[str, float]:
    """What `roundhouse status` shows: the run's rounds, jobs, nodes, journal and counters."""
    jobs = backend.world.jobs
    status = jobs.column("status")
    failed = jobs.column("failed")
    return {
        "rounds": backend.rounds,
        "now_s": backend.clock.now,
        "jobs": len(status),
        "pending": int((status == 0).sum()),
        "running": int((status == RUNNING).sum()),
        "finished": int(((status == FINISHED) & ~failed).sum()),
        "failed": int(failed.sum()),
        "queued_submissions": len(backend.journal.pending_submissions()),
        "nodes_online": backend.nodes.count_online(),
        "nodes": len(backend.nodes.slots),
        "gpus_online": int(backend.nodes.online.sum()),
        "cpu_s": time.process_time(),
        "journal_writes": backend.journal.writes,
        "journal_commits": backend.journal.commits,
        **backend.send_lags.figures(),
        **dict(backend.counters),
    }


def wait_for_agents(backend: LiveBackend) -> None:
    """Before round 0: serve until every node of the cluster has registered, or the wait ends."""
    deadline = time.time() + backend.options.wait_for_agents_s
    last = -1
    n = len(backend.nodes.slots)
    while time.time() < deadline and not backend.stop_requested:
        up = backend.nodes.count_online()
        if up != last:
            log.info("waiting for agents: %d of %d nodes registered", up, n)
            last = up
        if up == n:
            return
        backend.serve(min(deadline, time.time() + 0.2))
    if not backend.stop_requested:
        log.warning("starting with %d of %d nodes; the others may join later", backend.nodes.count_online(), n)
