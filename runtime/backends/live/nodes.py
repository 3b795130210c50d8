"""The node registry: which agent (by node name) fills which node of the graph's cluster, so that
GPU ids mean the same thing live and simulated; registrations, heartbeats, lost nodes, and which
GPUs are online. An agent silent for longer than the heartbeat timeout is lost: its GPUs go
offline and the attempts there end (`on_lost`). So is one that says it is stopping without
being asked (stopped by a signal): it says so after its exits, so its node goes offline at once,
and nothing more is launched there. A message that cannot reach a node (its connection dropped)
is held, with every later one, until its agent registers again; and a node whose agent was
told to stop, or said it is stopping, is journaled so: a resumed run keeps it offline until its
agent registers. How an agent registers is runtime/backends/live/registrations.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import cast

import attrs
import numpy as np

from roundhouse.runtime.backends.live import registrations
from roundhouse.runtime.backends.live.registrations import key_of_frame
from roundhouse.runtime.backends.live.round import Clock, News
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.wire.protocol import RefusalLog
from roundhouse.wire.security import AGENT, key_of_user_id

log = logging.getLogger("roundhouse.scheduler")

# How `Nodes.to_node` dealt with a message: sent on the node's connection, held for the node
# until its agent registers again, or not sent at all (no such node, or it is offline).
SENT, HELD, GONE = "sent", "held", ""


@attrs.define(eq=False)
class Node:
    name: str
    slot: int
    address: str
    identity: bytes | None = None
    session: str = ""
    last_seen: float = 0.0
    heard: float = 0.0  # wall time of its last message (last_seen, unlike this, allows for the scheduler's own stalls)
    online: bool = False
    key: str = ""
    outbox: list = attrs.field(factory=list)  # messages held for a node up but not connected, until it registers
    stopping: bool = False  # its agent said it is stopping (an answer to a shutdown, or unasked)
    asked: bool = False  # the scheduler asked its agent to shut down
    # Another agent process registering under this name while this one was alive: its session,
    # and when it first tried (registrations.py `_held_back`).
    contender: tuple[str, float] | None = None
    # After its agent registered on a new connection: the workers (job, attempt, rank) this
    # scheduler expects there that the agent did not list, to be settled by its next heartbeat
    # (`Reports.running`). None: nothing to settle.
    unlisted: set[tuple[int, int, int]] | None = None


class Nodes:
    def __init__(
        self,
        cluster: Cluster,
        server: Server,
        journal: Journal,
        options,
        counters: dict,
        news: News,
        clock: Clock,
        session: str,
    ):
        self.cluster = cluster
        self.server = server
        self.journal = journal
        self.options = options
        self.counters = counters
        self.news = news
        self.clock = clock
        self.session = session
        self.refusals = RefusalLog(log)
        self.expected_refusals = RefusalLog(cast(logging.Logger, _AtInfo(log)))
        self.started_at = time.time()  # (reset as the run's nodes are loaded: `load`)
        self.known_before: set[str] = set()  # the nodes the journal's run knew (a resumed run)
        self.slots: list[Node | None] = [None] * cluster.n_nodes
        self.by_name: dict[str, Node] = {}
        self.by_identity: dict[bytes, Node] = {}
        self.online = np.zeros(cluster.n_gpus, dtype=bool)
        self.online_changed = True  # the first poll always reports which GPUs are up
        self._checked_at: float | None = None  # when `check` last ran (the scheduler listening)
        # Set by the backend: a node was lost (its attempts lose their workers there), and an
        # agent listed its running processes (registering: it has just (re)connected).
        self.on_lost: Callable[[Node], list[int]] = lambda node: []  # returns the jobs it affected
        self.on_running: Callable[[Node, list[dict], bool], None] = lambda node, running, registering: None
        # And an agent registered on a new connection, listing its running workers, and was
        # sent the launches and resizes held for it, which start these workers (job, attempt, rank).
        self.on_reconnected: Callable[[Node, list[dict], set[tuple[int, int, int]]], None] = lambda node, running, starting: None
        # The nodes whose agents the journal's run told to stop, or that said they were stopping
        # (`load`): a resumed run does not presume them up (`presume_up`).
        self.stopped: set[str] = set()

    # --- looking up ---
    def name_of(self, identity: bytes) -> str | None:
        node = self.by_identity.get(identity)
        return node.name if node is not None else None

    def name_at(self, slot: int) -> str | None:
        node = self.slots[slot]
        return node.name if node is not None else None

    def count_online(self) -> int:
        return sum(1 for n in self.slots if n is not None and n.online)

    def wall(self) -> float:
        """Now, by the wall clock agents are heard by (`Node.heard`, `last_seen`): registrations
        read it here too, so that the registry keeps one clock (tests set this module's `time`)."""
        return time.time()

    def load(self) -> None:
        """The nodes the journal's run knew, by name (they keep their places after a restart)."""
        for name, (slot, address) in self.journal.nodes(len(self.slots)).items():
            self.seat(name, slot, address)
        self.stopped = self.journal.stopped_nodes() & set(self.by_name)
        self.known_before = set(self.by_name)
        self.started_at = time.time()

    def seat(self, name: str, slot: int, address: str) -> Node:
        """A new node, of agent `name`, at `slot` of the cluster: in the place of the node there, if any."""
        old = self.slots[slot]
        if old is not None:
            del self.by_name[old.name]
        node = self.by_name[name] = self.slots[slot] = Node(name, slot, address)
        return node

    # --- sending ---
    def to_node(self, node: Node | None, type_: str, **fields) -> str:
        """Send to a node's agent: SENT; HELD for a node up whose agent is not connected (it
        has not re-registered since a restart, or its connection just dropped), delivered when
        it registers again; GONE (false) for no node, or one offline."""
        if node is None or not node.online:
            return GONE
        if node.identity is None:
            node.outbox.append((type_, fields))
            return HELD
        if self.server.send(node.identity, type_, **fields):
            return SENT
        # No route to the agent: its connection dropped. It comes back on another (ZeroMQ
        # reconnects it), and registers again; until then this message and the next are held.
        self.disconnected(node)
        node.outbox.append((type_, fields))
        return HELD

    def to_slot(self, slot: int, type_: str, **fields) -> str:
        return self.to_node(self.slots[slot], type_, **fields)

    def disconnected(self, node: Node) -> None:
        """The node's connection is gone (the socket has no route to it): forget it, and hold
        what is sent to the node until its agent registers again (or the heartbeat timeout
        declares it lost)."""
        if node.identity is None:
            return
        self.by_identity.pop(node.identity, None)
        self.server.forget(node.identity)
        node.identity = None
        log.warning("node %s: its connection dropped; messages for it are held until its agent registers again", node.name)

    # --- online GPUs ---
    def set_online(self, node: Node, up: bool) -> None:
        first = int(self.cluster.node_first_gpu[node.slot])
        self.online[first : first + int(self.cluster.node_gpus[node.slot])] = up
        self.online_changed = True

    def presume_up(self, online: np.ndarray) -> list[Node]:
        """After a restart: the GPUs that were online are presumed so, and their nodes up, until
        their agents re-register or the heartbeat timeout passes; but not the nodes whose
        agents were told to stop, or said they were stopping (`stopped`): those stay offline
        until their agents register. Returns those nodes."""
        wall = time.time()
        self.online = online.copy()
        self.online_changed = True
        stopped = []
        for node in self.slots:
            if node is None:
                continue
            if node.name in self.stopped:
                self.set_online(node, False)
                stopped.append(node)
            elif self.online[int(self.cluster.node_first_gpu[node.slot])]:
                node.online, node.identity, node.last_seen = True, None, wall
        return stopped

    # --- lost nodes ---
    def check(self) -> None:
        """Lose the agents silent for longer than the heartbeat timeout. Silence counts only while
        the scheduler listens: a gap between two checks longer than a heartbeat period (a round
        that overran, a stalled disk, a paused machine) is the scheduler's own, and an agent
        whose heartbeats stopped reaching it then is not lost for that time."""
        wall = time.time()
        away = 0.0 if self._checked_at is None else wall - self._checked_at - self.options.heartbeat_s
        self._checked_at = wall
        for node in self.slots:
            if node is None or not node.online:
                continue
            if away > 0:
                node.last_seen = min(node.last_seen + away, wall)
            if wall - node.last_seen > self.options.heartbeat_timeout_s:
                self.lose(node, f"no heartbeat for {wall - node.last_seen:.1f}s")

    def lose(self, node: Node, why: str) -> None:
        node.online = False
        node.outbox = []
        node.unlisted = None
        self.set_online(node, False)
        self.news.lost.append(node.name)
        self.counters["nodes_lost"] += 1
        affected = self.on_lost(node)
        log.warning(
            "node %s lost (%s): its GPUs are offline%s",
            node.name,
            why,
            "; requeueing job(s) " + ", ".join(map(str, affected)) if affected else "",
        )

    # --- messages from peers not registered ---
    def unregistered(self, frame, message: str, *args) -> None:
        """Log a message dropped (or answered `unknown`) because its sender is not a registered
        agent: a warning, but only info where it is expected, from an agent that has not
        registered again yet after a restart (`expected_unregistered`)."""
        if self.expected_unregistered(frame):
            self.expected_refusals.warn("unregistered", message + " (expected after a restart, until it registers again)", *args)
        else:
            self.refusals.warn("unregistered", message, *args)

    def expected_unregistered(self, frame) -> bool:
        """Whether a message from a peer not registered is expected: within the time agents have
        to register again after the scheduler starts (their messages on the connection to the
        scheduler that stopped arrive first), or from an agent whose key names a node of the
        journal's run (only with keys: a key says who the peer is)."""
        if self.wall() - self.started_at <= (self.options.takeover_s or self.options.heartbeat_timeout_s):
            return True
        name, role = key_of_user_id(key_of_frame(frame))
        return role in (AGENT, "") and bool(name) and name in self.known_before

    # --- stopping the agents ---
    def ask_to_stop(self, reason: str, gone: set[str]) -> list[Node]:
        """Ask every connected agent that has not answered yet to shut down; returns them. One
        whose connection is gone (its agent died unseen) is added to `gone`, not asked again."""
        asked = [
            n
            for n in self.slots
            if n is not None and n.online and n.identity is not None and not n.stopping and n.name not in gone
        ]
        for node in asked:
            assert node.identity is not None  # (chosen above)
            if not node.asked:  # (journaled: a resumed run does not presume it up)
                node.asked = True
                self.journal.node_stopped(node.name, self.clock.now_s())
            if not self.server.send(node.identity, "shutdown", reason=reason):
                gone.add(node.name)
        return asked

    def on_stopping(self, identity, seq, body, frame) -> None:
        node = self.by_identity.get(identity)
        if node is None:
            self.unregistered(frame, "dropped stopping from %s: not a registered agent", self.server.who(identity))
            return
        node.stopping = True
        self.journal.node_stopped(node.name, self.clock.now_s())  # (a resumed run does not presume it up)
        if node.asked:
            log.info("agent %s is stopping", node.name)
            return
        # Unasked (a signal): its exits came first; one it could not send ends as a lost node's.
        log.info("agent %s is stopping (not asked to): its node goes offline", node.name)
        if node.online:
            self.lose(node, "its agent stopped")

    def on_cut_off(self, identity: bytes) -> None:
        """A registered agent was told its key is no longer admitted: it stops, and nothing it
        says is heard, so its node goes offline now rather than at the heartbeat timeout."""
        node = self.by_identity.get(identity)
        if node is not None and node.online:
            self.journal.node_stopped(node.name, self.clock.now_s())  # (a resumed run does not presume it up)
            self.lose(node, "its key is no longer admitted")

    # --- messages from agents ---
    on_register = registrations.on_register  # (an agent registering: runtime/backends/live/registrations.py)

    def on_heartbeat(self, identity, seq, body, frame) -> None:
        node = self.by_identity.get(identity)
        if node is None:
            self.unregistered(frame, "answered heartbeat from %s with unknown: not a registered agent", self.server.who(identity))
        elif not node.online:
            self.refusals.warn(
                "unregistered", "answered heartbeat from %s with unknown: its node was lost", self.server.who(identity)
            )
        if node is None or not node.online:
            self.server.send(identity, "unknown", reason="this scheduler does not know this agent: register")
            return
        node.heard = node.last_seen = time.time()
        self.on_running(node, body["running"], False)

    def seen(self, identity: bytes) -> Node | None:
        """The registered node of a connection, now known to be alive; None if unknown."""
        node = self.by_identity.get(identity)
        if node is not None:
            node.heard = node.last_seen = time.time()
        return node


class _AtInfo(logging.LoggerAdapter[logging.Logger]):
    """A logger whose warnings are logged at info: a `RefusalLog` of what is expected keeps its
    bound on how many lines a minute, at the level the lines deserve."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def warning(self, msg, *args, **kwargs) -> None:
        self.logger.info(msg, *args, **kwargs)


def refuses_submission(frame) -> str:
    """Why a submission may not be taken from the key it came with ("" if it may): a node's
    key lies on the node, so it gives no say over the queue. A key made before roles may."""
    key, role = key_of_user_id(key_of_frame(frame))
    if role != AGENT:
        return ""
    return f"the key of agent {key} submits no jobs: submit with a submitter's key (`roundhouse keys DIR --submitters NAME`)"
