"""The live backend: the same interface as the simulator, carried out by node agents over ZeroMQ.

The scheduler binds a ROUTER socket. Each node runs `roundhouse agent`, which registers its
GPUs; the backend maps each agent (by node name) onto a node of the graph's cluster, so GPU ids
mean the same thing live and simulated. Every round:

- `poll()` turns what agents reported since the last boundary into the events the simulator
  produces: completions with their exact times, progress (iterations reached, GPU-seconds
  held), and the faults only a live cluster has (jobs requeued after a lost node or a crashed
  process, jobs failed for good, GPUs going offline and online), plus jobs submitted with
  `roundhouse submit` (for `LiveSource`).
- `apply(plan)` journals the round, then sends `revoke` for each suspended job (to one worker
  only: the job's workers agree among themselves on the exit iteration, two-phase) and
  `launch` for each launch (one message per node, with the job's ranks there). A kept job gets
  no message at all: its lease renews optimistically. A job relaunched before its previous
  attempt has finished checkpointing is launched once that attempt exits, from its checkpoint.
- `advance()` serves messages until the wall clock reaches the next boundary.

Faults: an agent silent for longer than the heartbeat timeout is lost: its GPUs go offline and
its jobs are requeued from their last checkpoint (workers of those jobs on other nodes are
killed). A job process that crashes is retried up to a limit, then fails for good. Everything
the run was told is journaled (runtime/journal.py) before it is acted on, so a restarted
scheduler replays the journal through the graph and takes the running jobs back from the
agents as they re-register; exits that happened meanwhile are resent by the agents until
acknowledged, so none is lost.

Every received frame is validated (agents/protocol.py); a bad one is answered with `error` or
dropped, and logged, and the receiver carries on.
"""

from __future__ import annotations

import logging
import math
import shlex
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import zmq

from roundhouse.agents import protocol
from roundhouse.agents.protocol import ProtocolError, SeqTracker
from roundhouse.agents.security import HANDSHAKE_FAILURES, ServerSecurity
from roundhouse.agents.workloads import workload_for
from roundhouse.errors import RoundhouseError, UsageError
from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.backends.live_records import plan_record, record_of, replayed, same_plan
from roundhouse.runtime.backends.live_submissions import Submissions
from roundhouse.runtime.journal import AttemptRow, Journal
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.world import FINISHED, RUNNING, PlanError, World

log = logging.getLogger("roundhouse.scheduler")

# Messages the scheduler accepts, by sender.
FROM_AGENTS = frozenset({"register", "heartbeat", "started", "metrics", "exited"})
FROM_SUBMITTERS = frozenset({"submit", "status", "lease"})
ACCEPTED = FROM_AGENTS | FROM_SUBMITTERS
_DRAIN = 2000  # messages handled per wake-up before other duties (heartbeat checks, commits)


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


@attrs.define(eq=False)
class _Node:
    name: str
    slot: int
    address: str
    identity: bytes | None = None
    session: str = ""
    last_seen: float = 0.0
    online: bool = False
    key: str = ""
    outbox: list = attrs.field(factory=list)  # messages for a node presumed up that has not re-registered


@attrs.define(eq=False)
class _Attempt:
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
    last_exit_s: float = 0.0
    iteration: int = 0
    checkpoint: str | None = None
    checkpoint_iteration: int | None = None
    ended: bool = False
    successor: _Attempt | None = None
    waits_for: _Attempt | None = None  # the previous attempt, still checkpointing: launch after it

    @property
    def world_size(self) -> int:
        return len(self.gpus)


class LiveBackend:
    """Runs a graph's plans on real nodes. See the module docstring."""

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
        self.security = security
        self.journal = journal
        self.options = options
        self._meta = dict(meta or {})
        self.session = uuid.uuid4().hex[:16]
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000  # increasing across restarts, so agents never see it go back
        self._seqs = SeqTracker()
        cluster = world.cluster
        self._slots: list[_Node | None] = [None] * cluster.n_nodes
        self._by_name: dict[str, _Node] = {}
        self._by_identity: dict[bytes, _Node] = {}
        self._online = np.zeros(cluster.n_gpus, dtype=bool)
        self._online_changed = True  # the first poll always reports which GPUs are up
        # Jobs, by job-table row.
        self._current: dict[int, _Attempt] = {}
        self._live: dict[tuple[int, int], _Attempt] = {}
        self._checkpoint: dict[int, tuple[str, int]] = {}
        self._retries: defaultdict[int, int] = defaultdict(int)
        self._reached: dict[int, int] = {}  # iterations reached by the job's latest attempt
        self._until: dict[int, float] = {}  # service accounted up to this time
        self._freed_at: dict[int, float] = {}  # GPUs lost (requeue, failure) at this time
        # Since the last poll.
        self._finished: list[tuple[int, float]] = []
        self._failed: list[tuple[int, float]] = []
        self._requeued: list[int] = []
        self._metrics: dict[int, dict[str, float]] = {}
        self._joined: list[str] = []
        self._lost: list[str] = []
        self._last_record: dict = {}
        self._round_journaled = False
        self._plans: list[dict] = []
        # After commit: replies that promise durability (exit acks, accepted submissions).
        self._after_commit: list[tuple[bytes, str, dict]] = []
        self._k = 0
        self._now = 0.0
        self._epoch = 0.0
        self._replay: list[tuple[int, float, dict]] = []
        self._replay_at = 0
        self._takeover_until: float | None = None
        self._unconfirmed: set[tuple[int, int]] = set()
        self._next_port = options.ports[0]
        self.counters = defaultdict(int)
        self._context: zmq.Context | None = None
        self._socket: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None
        self._auth = None
        self._poller = zmq.Poller()
        self.submissions = Submissions(world, journal)
        self.stop_requested = ""
        self._ports_used: set[int] = set()
        self._checkpoint_root = str(Path(options.checkpoint_dir).resolve())

    # --- lifecycle ---
    @property
    def now(self) -> float:
        return self._now

    @property
    def replaying(self) -> bool:
        return self._replay_at < len(self._replay)

    def start(self) -> None:
        """Bind, then either resume the journal's run or wait for the cluster's agents and start
        a new one at round 0."""
        self._context = zmq.Context()
        # Owned by `close()` from here on: a socket left open makes `Context.term()` wait forever.
        self._socket = sock = self._context.socket(zmq.ROUTER)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.MAXMSGSIZE, protocol.HARD_LIMIT)
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.SNDHWM, 100_000)
        sock.setsockopt(zmq.RCVHWM, 100_000)
        self._auth = self.security.apply(self._context, sock, log)
        self._monitor = sock.get_monitor_socket(sum(HANDSHAKE_FAILURES))
        try:
            sock.bind(self.bind)
        except zmq.ZMQError as err:
            self.close()
            raise UsageError(f"cannot listen on {self.bind}: {zmq.strerror(err.errno)}") from None
        self._poller.register(sock, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)
        log.info("scheduler listening on %s (%s)", self.bind, "INSECURE" if self.security.insecure else "CURVE")
        for name, (slot, address) in self.journal.nodes().items():
            node = _Node(name, slot, address)
            self._by_name[name] = node
            self._slots[slot] = node
        fresh = not self.journal.meta()
        if fresh:
            self._wait_for_agents()
        meta = self.journal.begin(self._meta)
        self._epoch = float(meta["epoch"])
        self._replay = list(self.journal.rounds())
        if self._replay:
            log.info("resuming the journal's run: replaying %d rounds, then taking back running jobs", len(self._replay))
            self._now = self._replay[0][1]
            self._k = self._replay[0][0]
        else:
            self._now = 0.0 if fresh else self._boundary_after(time.time())
            self._k = int(round(self._now / self.round_s))
            if not fresh:
                self._begin_takeover()
        if fresh:
            log.info("round 0 starts now: %d of %d GPUs online", int(self._online.sum()), len(self._online))

    def _wait_for_agents(self) -> None:
        deadline = time.time() + self.options.wait_for_agents_s
        last = -1
        while time.time() < deadline:
            up = sum(1 for n in self._slots if n is not None and n.online)
            if up != last:
                log.info("waiting for agents: %d of %d nodes registered", up, len(self._slots))
                last = up
            if up == len(self._slots):
                return
            self._serve(min(deadline, time.time() + 0.2))
        up = sum(1 for n in self._slots if n is not None and n.online)
        log.warning("starting with %d of %d nodes; the others may join later", up, len(self._slots))

    def close(self) -> None:
        try:
            if self._socket is not None and self.options.stop_agents:
                for node in self._slots:
                    if node is not None and node.online and node.identity is not None:
                        self._send(node.identity, "shutdown", reason="the scheduler's run ended")
            self._flush()
        finally:
            self.journal.commit()
            if self._auth is not None:
                self._auth.stop()
                self._auth = None
            for sock in (self._monitor, self._socket):
                if sock is not None:
                    sock.close(linger=500)
            self._monitor = self._socket = None
            if self._context is not None:
                self._context.term()
                self._context = None

    def request_stop(self, why: str) -> None:
        """Stop at the next round boundary (the engine reads `stop_requested`)."""
        self.stop_requested = why
        log.info("%s: stopping at the next round boundary", why)

    # --- the backend interface ---
    def poll(self) -> tuple[Events, Progress]:
        if self.replaying:
            return self._replayed_poll()
        t = self._now
        world = self.world
        cols = world.jobs._cols
        ids = cols["job_id"]
        running = world.running_rows
        touched = sorted(set(running.tolist()) | set(self._reached))
        rows = np.asarray(touched, dtype=np.int64)
        done = np.zeros(len(rows))
        service = np.zeros(len(rows))
        run_s = np.zeros(len(rows))
        running_mask = np.zeros(len(rows), dtype=bool)
        if len(rows):
            running_mask[np.searchsorted(rows, running)] = True
        held = cols["held"]
        for i, row in enumerate(rows.tolist()):
            if running_mask[i]:
                end = min(self._freed_at.get(row, t), t)
                start = self._until.get(row, t)
                span = max(end - start, 0.0)
                service[i] = held[row] * span
                run_s[i] = span
                self._until[row] = t
                if not cols["has_model"][row]:
                    done[i] = span  # a job known only by duration progresses one unit a second
            if cols["has_model"][row] and row in self._reached:
                done[i] = self._reached[row] - cols["done"][row]
        keep = (done != 0) | running_mask
        progress = Progress(rows[keep], done[keep], service[keep], run_s[keep])
        finished = self._finished + self._failed
        submitted, submitted_ids = self.submissions.take(self._k)
        events = Events(
            time=t,
            finished=[r for r, _ in finished],
            finished_at=[min(max(x, 0.0), t) for _, x in finished],
            failed=[r for r, _ in self._failed],
            requeued=self._requeued,
            online=self._online.copy() if self._online_changed else None,
            nodes_joined=tuple(self._joined),
            nodes_lost=tuple(self._lost),
            metrics=self._metrics,
            submitted=submitted,
        )
        self._last_record = record_of(events, progress, ids, submitted_ids)
        for row in [r for r, _ in finished]:
            self._reached.pop(row, None)
            self._until.pop(row, None)
        for row in list(self._freed_at):
            self._until.pop(row, None)
        self._freed_at.clear()
        self._finished, self._failed, self._requeued = [], [], []
        self._metrics, self._joined, self._lost = {}, [], []
        self._online_changed = False
        self._round_journaled = False
        self._plans = []
        return events, progress

    def apply(self, plan: Plan) -> None:
        """Called with a checked plan before the world's books change."""
        if self.replaying:
            self._check_replayed_plan(plan)
            return
        started = time.perf_counter()
        self._apply(plan)
        self.counters["apply_s"] += time.perf_counter() - started

    def _apply(self, plan: Plan) -> None:
        if plan.launch_partner is not None and (plan.launch_partner >= 0).any():
            raise PlanError(
                "it shares GPUs between jobs (space_sharing=true), which live agents do not do: "
                "they run one job per GPU; space sharing is simulated only"
            )
        world = self.world
        self._plans.append(plan_record(plan, world.jobs._cols["job_id"]))
        # The attempts to revoke, before a move (suspend and launch in one round) makes a new one
        # current. Jobs a plan completes (where plans can: a loss-based termination) stop the
        # same way: they checkpoint and exit, and the world has already counted them finished.
        ending = np.concatenate([plan.suspend, plan.complete])
        revoked = [self._current.get(row) for row in ending.tolist()]
        rates = world.launch_rates(plan).tolist() if len(plan.launch_rows) else []
        launches = [self._new_attempt(a.row, np.asarray(a.gpus), a.batch_size, rate) for a, rate in zip(plan.launch, rates)]
        # Write ahead: the round and the new attempts are durable before any message leaves.
        self._journal_round()
        self._flush()
        for att in revoked:
            self._revoke(att)
        for att in launches:
            self._start_or_defer(att)
        self._flush()

    def advance(self) -> None:
        if self.replaying:
            self._replay_at += 1
            if self.replaying:
                self._k, self._now = self._replay[self._replay_at][0], self._replay[self._replay_at][1]
                return
            self._now = self._boundary_after(time.time())
            self._k = int(round(self._now / self.round_s))
            self._begin_takeover()
        if not self._round_journaled:
            self._journal_round()
        self._flush()
        target = self._now + self.round_s
        wall_target = self._epoch + target
        if time.time() > wall_target:
            target = self._boundary_after(time.time())
            log.warning("round at t=%gs overran its length; the next round is at t=%gs", self._now, target)
            wall_target = self._epoch + target
        self._serve(wall_target)
        if self.stop_requested and time.time() < wall_target:
            target = self._boundary_after(time.time())
        self._now = target
        self._k = int(round(target / self.round_s))

    # --- rounds, journal and replay ---
    def _boundary_after(self, wall: float) -> float:
        return math.ceil((wall - self._epoch) / self.round_s - 1e-9) * self.round_s

    def _journal_round(self) -> None:
        record = dict(self._last_record, plans=self._plans)
        self.journal.add_round(self._k, self._now, record)
        self._round_journaled = True

    def _replayed_poll(self) -> tuple[Events, Progress]:
        k, now, record = self._replay[self._replay_at]
        self._k, self._now = k, now
        submitted = self.submissions.replayed(record["submitted"])
        self._replay_plans = list(record.get("plans", []))
        return replayed(record, now, self.world.jobs, self.world.cluster.n_gpus, submitted)

    def _check_replayed_plan(self, plan: Plan) -> None:
        recorded = self._replay_plans.pop(0) if self._replay_plans else None
        if not same_plan(plan, recorded, self.world.jobs._cols["job_id"]):
            self.counters["replay_divergences"] += 1
            log.warning(
                "replay: round %d's plan differs from the journal's (did the graph change?); "
                "the running jobs are reconciled with the agents after replay",
                self._k,
            )

    def _begin_takeover(self) -> None:
        """After replay: rebuild the books of every job from the journal's attempts, and give
        agents until the deadline to report the running ones."""
        world = self.world
        cols = world.jobs._cols
        status = cols["status"]
        latest: dict[int, AttemptRow] = {}
        for a in self.journal.attempts():
            row = world.jobs.row_of(a.job_id)
            if row is None:
                continue
            latest[row] = a
            if a.checkpoint is not None and a.checkpoint_iteration is not None:
                best = self._checkpoint.get(row)
                if best is None or a.checkpoint_iteration >= best[1]:
                    self._checkpoint[row] = (a.checkpoint, a.checkpoint_iteration)
            if a.outcome == "failed":
                self._retries[row] += 1
        cluster = world.cluster
        for row, a in latest.items():
            gpus = np.asarray(a.gpus, dtype=np.int64)
            att = _Attempt(
                row,
                a.job_id,
                a.attempt,
                gpus,
                cluster.gpu_node[gpus],
                a.launched_s,
                a.master_port,
                a.start_iteration,
                a.resume,
                sent=True,
            )
            att.iteration = a.end_iteration if a.end_iteration is not None else a.start_iteration
            att.checkpoint, att.checkpoint_iteration = a.checkpoint, a.checkpoint_iteration
            self._current[row] = att
            if a.ended_s is not None:
                att.ended = True
                if status[row] == RUNNING:
                    # It ended after the last journaled round: the journal knows how.
                    self._conclude(att, a.outcome or "killed", a.ended_s, permanent=False, from_journal=True)
                continue
            att.revoked = status[row] != RUNNING
            self._live[(a.job_id, a.attempt)] = att
            self._ports_used.add(a.master_port)
            self._unconfirmed.add((a.job_id, a.attempt))
            if status[row] == RUNNING:
                self._reached[row] = int(cols["done"][row]) if cols["has_model"][row] else 0
                self._until[row] = self._now_s()
        # Nodes that were up are presumed up until they re-register or their heartbeat times out.
        wall = time.time()
        self._online = world.online.copy()
        self._online_changed = True
        for node in self._slots:
            if node is not None and self._online[int(cluster.node_first_gpu[node.slot])]:
                node.online, node.identity, node.last_seen = True, None, wall
        self._takeover_until = wall + (self.options.takeover_s or self.options.heartbeat_timeout_s)
        log.info(
            "taking over: %d running job(s) to be confirmed by their agents within %.1fs",
            len(self._unconfirmed),
            self._takeover_until - time.time(),
        )

    def _end_takeover(self) -> None:
        self._takeover_until = None
        for key in sorted(self._unconfirmed):
            att = self._live.get(key)
            if att is None:
                continue
            log.warning("job %d attempt %d: no agent reported it after the restart; requeued from its checkpoint", *key)
            for rank in range(att.world_size):
                att.exits.setdefault(rank, {"outcome": "killed", "iteration": att.iteration, "lost": True})
            self._maybe_end(att, self._now_s())
        self._unconfirmed.clear()

    # --- serving messages ---
    def _now_s(self) -> float:
        return time.time() - self._epoch

    def _serve(self, wall_deadline: float) -> None:
        sock = self._socket
        while True:
            remaining = wall_deadline - time.time()
            if remaining <= 0 or self.stop_requested:
                break
            ready = dict(self._poller.poll(timeout=max(1, int(min(remaining, 0.1) * 1000))))
            if sock in ready:
                for _ in range(_DRAIN):
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._receive(frames)
            if self._monitor in ready:
                self._drain_monitor()
            self._check_nodes()
            self._flush()

    def _receive(self, frames) -> None:
        self.counters["messages_in"] += 1
        identity = frames[0].bytes
        try:
            if len(frames) != 2:
                raise ProtocolError(f"expected one frame per message, got {len(frames) - 1}")
            type_, seq, body = protocol.decode(frames[1].buffer, ACCEPTED)
        except ProtocolError as err:
            self.counters["bad_messages"] += 1
            log.warning("refused a message from %s: %s", self._who(identity), err.reason)
            self._send(identity, "error", reason=err.reason, ref=err.seq)
            return
        if not self._seqs.accept(identity, seq):
            self.counters["bad_messages"] += 1
            log.warning("dropped an out-of-order %s from %s (seq %d)", type_, self._who(identity), seq)
            self._send(identity, "error", reason=f"out-of-order message (seq {seq})", ref=seq)
            return
        try:
            getattr(self, f"_on_{type_}")(identity, seq, body, frames[1])
        except Exception:  # a bug must not stop the scheduler: log it, answer, carry on
            self.counters["handler_errors"] += 1
            log.exception("error while handling %s from %s", type_, self._who(identity))
            self._send(identity, "error", reason=f"internal error while handling {type_}; see the scheduler's log", ref=seq)

    def _who(self, identity: bytes) -> str:
        node = self._by_identity.get(identity)
        return f"agent {node.name}" if node is not None else f"peer {identity.hex()[:10]}"

    def _drain_monitor(self) -> None:
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            except Exception:  # a malformed monitor frame: nothing to act on
                return
            what = HANDSHAKE_FAILURES.get(event.get("event"))
            if what:
                self.counters["refused_peers"] += 1
                log.warning("refused a peer on %s: %s", event.get("endpoint", b"").decode(errors="replace"), what)

    def _send(self, identity: bytes, type_: str, **fields) -> None:
        frame = protocol.encode(type_, self._seq.next(), **fields)
        try:
            self._socket.send_multipart([identity, frame], zmq.NOBLOCK)
            self.counters["messages_out"] += 1
        except zmq.ZMQError as err:  # the peer left (ROUTER_MANDATORY) or its queue is full
            level = logging.WARNING if identity in self._by_identity else logging.DEBUG
            log.log(level, "could not send %s to %s: %s", type_, self._who(identity), err.strerror)

    def _to_node(self, node: _Node | None, type_: str, **fields) -> bool:
        """Send to a node's agent; held for a node presumed up until it re-registers. False
        if the node is gone."""
        if node is None or not node.online:
            return False
        if node.identity is None:
            node.outbox.append((type_, fields))
        else:
            self._send(node.identity, type_, **fields)
        return True

    def _flush(self) -> None:
        """Commit the journal, then send what promised durability."""
        self.journal.commit()
        pending, self._after_commit = self._after_commit, []
        for identity, type_, fields in pending:
            self._send(identity, type_, **fields)

    # --- agents ---
    def _on_register(self, identity, seq, body, frame) -> None:
        cluster = self.world.cluster
        name = body["node"]
        types = {g["type"] for g in body["gpus"]}
        count = len(body["gpus"])
        if len(types) != 1 or sorted(g["index"] for g in body["gpus"]) != list(range(count)):
            self._send(identity, "error", reason="a node registers GPUs 0..N-1, all of one type")
            return
        gpu_type = cluster_type = next(iter(types))
        known = [t for t in cluster.gpu_types if t.lower() == gpu_type.lower()]
        if known:
            cluster_type = known[0]

        def fits(slot: int) -> bool:
            return int(cluster.node_gpus[slot]) == count and cluster.gpu_types[int(cluster.node_type[slot])] == cluster_type

        node = self._by_name.get(name)
        if node is not None and not fits(node.slot):
            reason = (
                f"node {name} is node {node.slot} of the cluster, which has {cluster.node_gpus[node.slot]} "
                f"{cluster.gpu_types[cluster.node_type[node.slot]]} GPU(s); it now registers {count} {gpu_type}"
            )
            log.warning("refused registration: %s", reason)
            self._send(identity, "error", reason=reason)
            return
        if node is None:
            free = [s for s in range(cluster.n_nodes) if self._slots[s] is None and fits(s)]
            free += [s for s in range(cluster.n_nodes) if self._slots[s] is not None and not self._slots[s].online and fits(s)]
            if not free:
                reason = f"the cluster ({cluster.describe()}) has no free node with {count} {gpu_type} GPU(s) for {name}"
                log.warning("refused registration: %s", reason)
                self._send(identity, "error", reason=reason)
                return
            slot = free[0]
            old = self._slots[slot]
            if old is not None:
                del self._by_name[old.name]
                log.info("node %s takes the place of lost node %s (node %d)", name, old.name, slot)
            node = _Node(name, slot, body["address"])
            self._by_name[name] = node
            self._slots[slot] = node
        elif node.online and node.session and node.session != body["session"]:
            # The same node came back as a new agent process: the old one's jobs died with it.
            self._lose_node(node, "its agent restarted")
        if node.identity is not None and node.identity != identity:
            self._by_identity.pop(node.identity, None)
            self._seqs.forget(node.identity)
        node.identity, node.session, node.address = identity, body["session"], body["address"]
        node.last_seen = time.time()
        try:
            node.key = frame.get("User-Id") or ""
        except Exception:
            node.key = ""
        self._by_identity[identity] = node
        self.journal.set_node(name, node.slot, node.address, self._now_s())
        if not node.online:
            node.online = True
            self._set_online(node, True)
            self._joined.append(name)
        first = int(cluster.node_first_gpu[node.slot])
        log.info(
            "node %s registered%s as node %d: GPUs %d-%d (%d x %s), %d running process(es)",
            name,
            f" (key {node.key})" if node.key else "",
            node.slot,
            first,
            first + count - 1,
            count,
            cluster_type,
            len(body["running"]),
        )
        self._send(identity, "welcome", node_index=node.slot, heartbeat_s=self.options.heartbeat_s, session=self.session)
        held, node.outbox = node.outbox, []
        for type_, fields in held:
            self._send(identity, type_, **fields)
        self._reconcile(node, body["running"], registering=True)

    def _on_heartbeat(self, identity, seq, body, frame) -> None:
        node = self._by_identity.get(identity)
        if node is None or not node.online:
            self._send(identity, "unknown", reason="this scheduler does not know this agent: register")
            return
        node.last_seen = time.time()
        self._reconcile(node, body["running"], registering=False)

    def _reconcile(self, node: _Node, running: list[dict], registering: bool) -> None:
        """Match an agent's processes with the attempts this scheduler expects there: update
        progress, confirm takeovers, kill what nobody should be running."""
        stale: set[tuple[int, int]] = set()
        for proc in running:
            key = (proc["job"], proc["attempt"])
            att = self._live.get(key)
            rank = proc["rank"]
            if att is None or rank >= att.world_size or int(att.slots[rank]) != node.slot or rank in att.exits:
                stale.add(key)
                continue
            self._unconfirmed.discard(key)
            self._progress(att, proc["iteration"], proc.get("checkpoint"), proc.get("checkpoint_iteration"))
            if registering and att.revoked and rank == 0:
                self._to_node(node, "revoke", job=att.job_id, attempt=att.n, kill=False, rank=0)
        for job, attempt in sorted(stale):
            log.warning(
                "node %s runs job %d attempt %d, which this scheduler does not expect there: killing it", node.name, job, attempt
            )
            self._to_node(node, "revoke", job=job, attempt=attempt, kill=True)

    def _on_started(self, identity, seq, body, frame) -> None:
        node = self._by_identity.get(identity)
        att = self._live.get((body["job"], body["attempt"]))
        if node is None or att is None:
            return
        node.last_seen = time.time()
        log.debug("job %d attempt %d rank %d started on %s", body["job"], body["attempt"], body["rank"], node.name)

    def _on_metrics(self, identity, seq, body, frame) -> None:
        node = self._by_identity.get(identity)
        att = self._live.get((body["job"], body["attempt"]))
        if node is None or att is None:
            return
        node.last_seen = time.time()
        self._progress(att, body["iteration"], None, None)
        if body["rank"] == 0 and body["values"]:
            self._metrics[att.row] = {**self._metrics.get(att.row, {}), **body["values"], "iteration": float(body["iteration"])}

    def _progress(self, att: _Attempt, iteration: int, checkpoint: str | None, checkpoint_iteration: int | None) -> None:
        if iteration > att.iteration:
            att.iteration = iteration
            if self._current.get(att.row) is att and not att.requeued:
                self._reached[att.row] = iteration
        if checkpoint is not None and checkpoint_iteration is not None:
            if att.checkpoint_iteration is None or checkpoint_iteration > att.checkpoint_iteration:
                att.checkpoint, att.checkpoint_iteration = checkpoint, checkpoint_iteration
                self.journal.note_checkpoint(att.job_id, att.n, checkpoint, checkpoint_iteration)
                best = self._checkpoint.get(att.row)
                if best is None or checkpoint_iteration >= best[1]:
                    self._checkpoint[att.row] = (checkpoint, checkpoint_iteration)

    def _on_exited(self, identity, seq, body, frame) -> None:
        node = self._by_identity.get(identity)
        if node is None:
            self._send(identity, "unknown", reason="this scheduler does not know this agent: register")
            return
        node.last_seen = time.time()
        key = (body["job"], body["attempt"])
        ack = (identity, "ack", {"job": body["job"], "attempt": body["attempt"], "rank": body["rank"]})
        att = self._live.get(key)
        if att is None or body["rank"] >= att.world_size or body["rank"] in att.exits:
            self._after_commit.append(ack)  # already known (a resend), or from before this run: done with it
            return
        self._unconfirmed.discard(key)
        att.exits[body["rank"]] = body
        att.last_exit_s = self._now_s()
        self.journal.add_exit(node.name, att.last_exit_s, body)
        self._progress(att, body["iteration"], body.get("checkpoint"), body.get("checkpoint_iteration"))
        level = logging.INFO if body["outcome"] in ("done", "preempted") else logging.WARNING
        log.log(
            level,
            "job %d attempt %d rank %d on %s: %s at iteration %d%s",
            att.job_id,
            att.n,
            body["rank"],
            node.name,
            body["outcome"],
            body["iteration"],
            f" ({body['reason']})" if body["reason"] else "",
        )
        if body["outcome"] in ("failed", "killed"):
            self._kill_rest(att)
        self._maybe_end(att, att.last_exit_s, permanent=body["permanent"])
        self._after_commit.append(ack)

    def _kill_rest(self, att: _Attempt) -> None:
        """A worker died: the others would wait for it in their collectives forever."""
        if att.kill_sent or att.world_size == 1:
            return
        att.kill_sent = True
        for slot in sorted({int(s) for r, s in enumerate(att.slots) if r not in att.exits}):
            self._to_node(self._slots[slot], "revoke", job=att.job_id, attempt=att.n, kill=True)

    def _check_nodes(self) -> None:
        wall = time.time()
        for node in self._slots:
            if node is not None and node.online and wall - node.last_seen > self.options.heartbeat_timeout_s:
                self._lose_node(node, f"no heartbeat for {wall - node.last_seen:.1f}s")
        if self._takeover_until is not None and wall >= self._takeover_until:
            self._end_takeover()

    def _lose_node(self, node: _Node, why: str) -> None:
        node.online = False
        node.outbox = []
        self._set_online(node, False)
        self._lost.append(node.name)
        self.counters["nodes_lost"] += 1
        affected = [att for att in self._live.values() if (att.slots == node.slot).any()]
        log.warning(
            "node %s lost (%s): its GPUs are offline%s",
            node.name,
            why,
            "; requeueing job(s) " + ", ".join(str(a.job_id) for a in affected) if affected else "",
        )
        t = self._now_s()
        for att in affected:
            for rank in np.flatnonzero(att.slots == node.slot).tolist():
                att.exits.setdefault(rank, {"outcome": "killed", "iteration": att.iteration, "lost": True})
            self._kill_rest(att)
            self._requeue_now(att, t)
            self._maybe_end(att, t)

    def _set_online(self, node: _Node, up: bool) -> None:
        cluster = self.world.cluster
        first = int(cluster.node_first_gpu[node.slot])
        self._online[first : first + int(cluster.node_gpus[node.slot])] = up
        self._online_changed = True

    # --- jobs ---
    def _new_attempt(self, row: int, gpus: np.ndarray, batch: int, iters_per_s: float) -> _Attempt:
        cols = self.world.jobs._cols
        prev = self._current.get(row)
        n = prev.n + 1 if prev is not None else 1
        att = _Attempt(row, int(cols["job_id"][row]), n, gpus, self.world.cluster.gpu_node[gpus], self._now, self._pick_port())
        att.batch = int(batch or cols["batch_size"][row])
        att.iters_per_s = float(iters_per_s) if cols["has_model"][row] else 0.0
        if prev is not None and not prev.ended:
            prev.successor = att
            att.waits_for = prev
        else:
            self._resume_point(att)
        self._current[row] = att
        self._live[(att.job_id, att.n)] = att
        self._ports_used.add(att.master_port)
        self.journal.add_attempt(self._attempt_row(att))  # committed before any message leaves
        self._until[row] = self._now
        return att

    def _resume_point(self, att: _Attempt) -> None:
        ckpt = self._checkpoint.get(att.row)
        att.resume, att.start_iteration = (ckpt[0], ckpt[1]) if ckpt else (None, 0)
        att.iteration = att.start_iteration

    def _attempt_row(self, att: _Attempt) -> AttemptRow:
        names = [self._slots[int(s)].name if self._slots[int(s)] is not None else "?" for s in att.slots]
        return AttemptRow(
            att.job_id, att.n, att.launched_s, att.gpus.tolist(), names, att.master_port, att.start_iteration, att.resume
        )

    def _pick_port(self) -> int:
        lo, hi = self.options.ports
        for _ in range(hi - lo):
            port = self._next_port
            self._next_port = lo + (self._next_port + 1 - lo) % (hi - lo)
            if port not in self._ports_used:
                return port
        return lo

    def _start_or_defer(self, att: _Attempt) -> None:
        prev = att.waits_for
        if prev is not None and not prev.ended:
            log.info("job %d attempt %d waits for attempt %d to checkpoint and exit", att.job_id, att.n, prev.n)
            return
        self._send_launch(att)

    def _send_launch(self, att: _Attempt) -> None:
        world = self.world
        cols = world.jobs._cols
        row = att.row
        if att.waits_for is not None:
            # Launched after its predecessor exited: from the checkpoint that one left.
            att.waits_for = None
            self._resume_point(att)
            self.journal.add_attempt(self._attempt_row(att))
            self.journal.commit()
        if cols["has_model"][row]:
            self._reached[row] = att.start_iteration
        model = cols["model"][row]
        command = cols["command"][row] if "command" in cols else None
        command = command if isinstance(command, str) and command.strip() else None
        workload = workload_for(model) if command is None else None
        if command is None and workload is None:
            reason = f"no workload for model {model!r} and no command: give the job a 'command'"
            log.warning("job %d cannot run: %s", att.job_id, reason)
            for rank in range(att.world_size):
                att.exits[rank] = {"outcome": "failed", "iteration": att.start_iteration, "reason": reason}
            att.sent = True
            self._maybe_end(att, self._now_s(), permanent=True)
            return
        rank0 = self._slots[int(att.slots[0])]
        ckpt_dir = f"{self._checkpoint_root}/job-{att.job_id}"
        common = dict(
            job=att.job_id,
            attempt=att.n,
            world_size=att.world_size,
            master_addr=rank0.address if rank0 is not None else "127.0.0.1",
            master_port=att.master_port,
            iterations=int(math.ceil(cols["work"][row])) if cols["has_model"][row] else 0,
            batch_size=att.batch,
            checkpoint_dir=ckpt_dir,
            checkpoint_every_s=float(self.options.checkpoint_every_s),
            workload=workload,
            command=shlex.split(command) if command else None,
            model=model if isinstance(model, str) else None,
            resume=att.resume,
            resume_iteration=att.start_iteration if att.resume else None,
            seed=int(att.job_id % 2**31),
            iters_per_s=att.iters_per_s or None,
        )
        att.sent = True
        cluster = world.cluster
        for slot in sorted({int(s) for s in att.slots}):
            node = self._slots[slot]
            ranks = [
                {"rank": r, "gpu": int(cluster.gpu_local[g])}
                for r, g in enumerate(att.gpus.tolist())
                if int(att.slots[r]) == slot
            ]
            self.counters["launch_messages"] += 1
            if not self._to_node(node, "launch", ranks=ranks, **common):
                for r in ranks:
                    att.exits.setdefault(r["rank"], {"outcome": "killed", "iteration": att.start_iteration, "lost": True})
        self.counters["launches"] += 1
        where = ", ".join(sorted({self._slots[int(s)].name for s in att.slots if self._slots[int(s)] is not None}))
        log.info(
            "launch job %d attempt %d on %s (GPUs %s)%s",
            att.job_id,
            att.n,
            where,
            ",".join(map(str, att.gpus.tolist())),
            f" from its checkpoint at iteration {att.start_iteration}" if att.resume else "",
        )
        if len(att.exits) == att.world_size:  # every node it was meant for is gone
            self._requeue_now(att, self._now_s())
            self._maybe_end(att, self._now_s())

    def _revoke(self, att: _Attempt | None) -> None:
        if att is None or att.ended:
            return
        att.revoked = True
        self.counters["revocations"] += 1
        if not att.sent:
            # Never started (it waited for its predecessor): nothing ran, nothing to checkpoint.
            for rank in range(att.world_size):
                att.exits.setdefault(rank, {"outcome": "preempted", "iteration": att.start_iteration})
            self._maybe_end(att, self._now_s())
            return
        node = self._slots[int(att.slots[0])]
        # Two-phase: only rank 0 hears of it; it agrees the exit iteration with the others.
        if 0 not in att.exits and self._to_node(node, "revoke", job=att.job_id, attempt=att.n, kill=False, rank=0):
            log.info("revoke job %d attempt %d (told rank 0 on %s)", att.job_id, att.n, node.name)

    def _requeue_now(self, att: _Attempt, t: float) -> None:
        """The world still runs this attempt but it lost its GPUs: requeue the job at once."""
        if att.revoked or att.requeued or self._current.get(att.row) is not att:
            return
        if self.world.jobs._cols["status"][att.row] != RUNNING:
            return
        att.requeued = True
        self._requeued.append(att.row)
        self._freed_at[att.row] = t
        ckpt = self._checkpoint.get(att.row)
        self._reached[att.row] = ckpt[1] if ckpt else 0

    def _maybe_end(self, att: _Attempt, t: float, permanent: bool = False) -> None:
        if att.ended or len(att.exits) < att.world_size:
            return
        outcomes = {e["outcome"] for e in att.exits.values()}
        if att.exits[0]["outcome"] == "done":
            outcome = "done"
        elif "failed" in outcomes:
            outcome = "failed"
        elif "killed" in outcomes:
            outcome = "killed"
        else:
            outcome = "preempted"
        self._conclude(att, outcome, t, permanent)

    def _conclude(self, att: _Attempt, outcome: str, t: float, permanent: bool, from_journal: bool = False) -> None:
        att.ended = True
        self._live.pop((att.job_id, att.n), None)
        self._ports_used.discard(att.master_port)
        self._unconfirmed.discard((att.job_id, att.n))
        row = att.row
        reasons = "; ".join(sorted({e.get("reason", "") for e in att.exits.values() if e.get("reason")}))
        if not from_journal:
            self.journal.end_attempt(
                att.job_id, att.n, t, outcome, att.iteration, att.checkpoint, att.checkpoint_iteration, reasons[:2000]
            )
        current = self._current.get(row) is att
        status = self.world.jobs._cols["status"][row]
        if outcome == "done":
            if status != FINISHED and not any(r == row for r, _ in self._finished):
                self._finished.append((row, t))
                self._freed_at[row] = t
                self._reached.pop(row, None)
                successor = att.successor
                if successor is not None and not successor.ended:
                    successor.ended = True  # the job is complete: its relaunch never starts
                    self._live.pop((successor.job_id, successor.n), None)
                    self._ports_used.discard(successor.master_port)
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
            self._retries[row] += 1
        if current and not att.revoked:
            if outcome == "failed" and (permanent or self._retries[row] > self.options.max_retries):
                why = "cannot run" if permanent else f"failed {self._retries[row]} times"
                log.error("job %d %s; giving up (%s)", att.job_id, why, reasons or "no reason given")
                if status != FINISHED:
                    self._failed.append((row, t))
                    self._freed_at[row] = t
                    self._reached.pop(row, None)
                return
            if not att.requeued:
                self._requeue_now(att, t)
                if outcome == "failed":
                    log.warning(
                        "job %d crashed (try %d of %d); requeued from its last checkpoint",
                        att.job_id,
                        self._retries[row],
                        self.options.max_retries + 1,
                    )
        elif current and att.revoked and att.checkpoint_iteration is not None and self.world.jobs._cols["has_model"][row]:
            self._reached[row] = max(att.checkpoint_iteration, 0)
        elif current and att.revoked and self.world.jobs._cols["has_model"][row]:
            ckpt = self._checkpoint.get(row)
            self._reached[row] = ckpt[1] if ckpt else 0
        successor = att.successor
        if successor is not None and not successor.ended and self._current.get(row) is successor:
            if not successor.revoked:
                self._send_launch(successor)
            else:
                self._conclude(successor, "preempted", t, permanent=False)

    # --- submitters ---
    def _on_submit(self, identity, seq, body, frame) -> None:
        specs = body["jobs"]
        if not specs:
            self._send(identity, "error", reason="no jobs in the submission", ref=seq)
            return
        try:
            ids = self.submissions.accept(specs, self._now_s())
        except RoundhouseError as err:
            self._send(identity, "error", reason=str(err), ref=seq)
            return
        self.counters["submitted"] += len(ids)
        log.info(
            "accepted %d job(s) from a submitter: %s", len(ids), ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
        )
        self._after_commit.append((identity, "accepted", {"job_ids": ids}))

    def _on_status(self, identity, seq, body, frame) -> None:
        cols = self.world.jobs._cols
        n = len(self.world.jobs)
        status = cols["status"][:n]
        failed = cols["failed"][:n]
        numbers = {
            "round": self._k,
            "now_s": self._now,
            "jobs": n,
            "pending": int((status == 0).sum()),
            "running": int((status == RUNNING).sum()),
            "finished": int(((status == FINISHED) & ~failed).sum()),
            "failed": int(failed.sum()),
            "queued_submissions": len(self.journal.pending_submissions()),
            "nodes_online": sum(1 for x in self._slots if x is not None and x.online),
            "nodes": len(self._slots),
            "gpus_online": int(self._online.sum()),
            **{k: v for k, v in self.counters.items()},
        }
        self._send(identity, "status_reply", status={k: float(v) for k, v in numbers.items()})

    def _on_lease(self, identity, seq, body, frame) -> None:
        """A round-trip lease check (what optimistic renewal avoids; kept to measure it)."""
        att = self._live.get((body["job"], body["attempt"]))
        self.counters["lease_checks"] += 1
        self._send(identity, "lease_reply", job=body["job"], attempt=body["attempt"], valid=att is not None and not att.revoked)
