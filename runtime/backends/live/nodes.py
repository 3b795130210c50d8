"""The node registry: which agent (by node name) fills which node of the graph's cluster, so that
GPU ids mean the same thing live and simulated; registrations, heartbeats, lost nodes, and which
GPUs are online. An agent silent for longer than the heartbeat timeout is lost: its GPUs go
offline and the attempts there end (`on_lost`). So is one that says it is stopping without
being asked (stopped by a signal): it says so after its exits, so its node goes offline at once,
and nothing more is launched there. A message that cannot reach a node (its connection dropped)
is held, with every later one, until its agent registers again; and a node whose agent was
told to stop, or said it is stopping, is journaled so: a resumed run keeps it offline until its
agent registers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs
import numpy as np

from roundhouse.runtime.backends.live.round import Clock, News
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.wire import protocol
from roundhouse.wire.protocol import RefusalLog
from roundhouse.wire.security import AGENT, SUBMITTER, key_of_user_id

log = logging.getLogger("roundhouse.scheduler")

# A node's agent silent this many heartbeat periods has stopped (one period, and the delays of a
# busy agent or scheduler): another agent registering under its name takes its place.
SILENT_PERIODS = 1.5

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
    # and when it first tried (`_held_back`).
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

    def load(self) -> None:
        """The nodes the journal's run knew, by name (they keep their places after a restart)."""
        for name, (slot, address) in self.journal.nodes(len(self.slots)).items():
            node = Node(name, slot, address)
            self.by_name[name] = node
            self.slots[slot] = node
        self.stopped = self.journal.stopped_nodes() & set(self.by_name)

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
            self.refusals.warn("unregistered", "dropped stopping from %s: not a registered agent", self.server.who(identity))
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
            self.lose(node, "its key is no longer admitted")

    # --- messages from agents ---
    def on_register(self, identity, seq, body, frame) -> None:
        cluster = self.cluster
        name = body["node"]
        key, role = key_of_user_id(_key_of(frame))
        if role == SUBMITTER:  # (a key given to submit with does not give the cluster's nodes)
            reason = f"node {name} registers with the key of submitter {key}: only an agent's key registers a node"
            return self._refuse(identity, reason)
        if key and key != name:  # (with keys, an agent's name is its key's: no key speaks for another node)
            reason = f"node {name} registers with the key of {key}: an agent registers under its own key's name"
            return self._refuse(identity, reason)
        types = {g["type"] for g in body["gpus"]}
        count = len(body["gpus"])
        if len(types) != 1 or sorted(g["index"] for g in body["gpus"]) != list(range(count)):
            return self._refuse(identity, _bad_gpus(name, body["gpus"]))
        gpu_type = cluster_type = next(iter(types))
        known = [t for t in cluster.gpu_types if t.lower() == gpu_type.lower()]
        if known:
            cluster_type = known[0]

        def fits(slot: int) -> bool:
            return int(cluster.node_gpus[slot]) == count and cluster.gpu_types[int(cluster.node_type[slot])] == cluster_type

        node = self.by_name.get(name)
        if node is not None and not fits(node.slot):
            reason = (
                f"node {name} is node {node.slot} of the cluster, which has {cluster.node_gpus[node.slot]} "
                f"{cluster.gpu_types[cluster.node_type[node.slot]]} GPU(s); it now registers {count} {gpu_type}"
            )
            return self._refuse(identity, reason)
        if node is not None and _held_back(self, node, identity, body["session"]):
            return
        if node is None:
            free = [s for s in range(cluster.n_nodes) if self.slots[s] is None and fits(s)]
            free += [s for s, n in enumerate(self.slots) if n is not None and not n.online and fits(s)]
            if not free:
                reason = f"the cluster ({cluster.describe()}) has no free node with {count} {gpu_type} GPU(s) for {name}"
                return self._refuse(identity, reason)
            slot = free[0]
        else:
            slot = node.slot
        # The answer is checked before anything changes: a welcome that cannot be sent must
        # not leave the node counted online (nor journaled) with no agent behind it.
        welcome = dict(node_index=slot, heartbeat_s=self.options.heartbeat_s, session=self.session)
        try:
            protocol.SCHEMAS["welcome"].check(welcome, "")
        except protocol.ProtocolError as err:
            reason = f"the scheduler cannot welcome node {name}: {err.reason}"
            log.error("refused registration: %s", reason)
            self.server.send(identity, "error", reason=reason)
            return
        # Journaled first: a write that fails leaves the node as it was (not half registered).
        self.journal.set_node(name, slot, body["address"], self.clock.now_s())
        if node is None:
            old = self.slots[slot]
            if old is not None:
                del self.by_name[old.name]
                log.info("node %s takes the place of lost node %s (node %d)", name, old.name, slot)
            node = Node(name, slot, body["address"])
            self.by_name[name] = node
            self.slots[slot] = node
        elif node.online and node.session and node.session != body["session"]:
            # The same node came back as a new agent process: the old one's jobs died with it.
            self.lose(node, "its agent restarted")
        reconnected = node.identity != identity  # (a new connection: what was sent on the old one may be lost)
        if node.identity is not None and node.identity != identity:
            self.by_identity.pop(node.identity, None)
            self.server.forget(node.identity)
        node.identity, node.session, node.address = identity, body["session"], body["address"]
        node.heard = node.last_seen = time.time()
        node.key = key
        node.stopping = node.asked = False  # (an agent back after stopping serves again)
        self.by_identity[identity] = node
        self.stopped.discard(name)
        if not node.online:
            node.online = True
            self.set_online(node, True)
            self.news.joined.append(name)
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
        self.server.send(identity, "welcome", **welcome)
        starting = _deliver_held(self, node, identity)
        self.on_running(node, body["running"], True)
        if reconnected:
            self.on_reconnected(node, body["running"], starting)

    def _refuse(self, identity: bytes, reason: str) -> None:
        log.warning("refused registration: %s", reason)
        self.server.send(identity, "error", reason=reason)

    def on_heartbeat(self, identity, seq, body, frame) -> None:
        node = self.by_identity.get(identity)
        if node is None or not node.online:
            self.refusals.warn(
                "unregistered",
                "answered heartbeat from %s with unknown: %s",
                self.server.who(identity),
                "not a registered agent" if node is None else "its node was lost",
            )
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


def refuses_submission(frame) -> str:
    """Why a submission may not be taken from the key it came with ("" if it may): a node's
    key lies on the node, so it gives no say over the queue. A key made before roles may."""
    key, role = key_of_user_id(_key_of(frame))
    if role != AGENT:
        return ""
    return f"the key of agent {key} submits no jobs: submit with a submitter's key (`roundhouse keys DIR --submitters NAME`)"


def _held_back(nodes: Nodes, node: Node, identity: bytes, session: str) -> bool:
    """Whether a registration by another agent process under the name of a node whose agent
    is up waits (unanswered: agents register again every second) or is refused. An agent
    heard within a heartbeat period may have just restarted (its last heartbeat came before
    it died), or be a second agent given the same name: the newcomer waits until the current
    agent is heard again (a name clash: the newcomer is refused, with the reason) or has been
    silent for `SILENT_PERIODS` heartbeat periods (it restarted: the newcomer takes over)."""
    if not (node.online and node.session and node.session != session):
        node.contender = None
        return False
    wall = time.time()
    if node.contender is None or node.contender[0] != session:
        node.contender = (session, wall)
    if node.heard > node.contender[1]:
        node.contender = None
        reason = (
            f"node {node.name} is already registered by another agent, which is still running: give each agent its own --name"
        )
        log.warning("name clash: refused a second agent registering as node %s: %s", node.name, reason)
        nodes.server.send(identity, "error", reason=reason)
        return True
    if wall - node.heard > SILENT_PERIODS * nodes.options.heartbeat_s:
        node.contender = None
        return False
    log.debug("node %s: another agent registers under its name; waiting to see which one is running", node.name)
    return True


def _deliver_held(nodes: Nodes, node: Node, identity: bytes) -> set[tuple[int, int, int]]:
    """Send a re-registered node the messages held for it, in order; returns the workers
    (job, attempt, rank) the launches and resizes among them start there. Should the new
    connection drop at once, what is left stays held."""
    held, node.outbox = node.outbox, []
    starts: set[tuple[int, int, int]] = set()
    for i, (type_, fields) in enumerate(held):
        if not nodes.server.send(identity, type_, **fields):
            node.outbox = held[i:]
            nodes.disconnected(node)
            break
        if type_ in ("launch", "resize"):
            starts |= {(fields["job"], fields["attempt"], r["rank"]) for r in fields["ranks"]}
    if len(held) > len(node.outbox):
        log.info("node %s: delivered %d held message(s)", node.name, len(held) - len(node.outbox))
    return starts


def _bad_gpus(name: str, gpus: list[dict]) -> str:
    """Why a node's GPUs, as registered, are refused: their indices and types."""
    indices = ", ".join(str(g["index"]) for g in gpus[:16]) + (" ..." if len(gpus) > 16 else "")
    types = ", ".join(sorted({g["type"] for g in gpus}))
    return f"node {name} registers GPUs {indices or '(none)'} of type(s) {types or '(none)'}: a node registers GPUs 0..N-1, all of one type"


def _key_of(frame) -> str:
    """The name of the CURVE key a message came with ("" without keys)."""
    try:
        return frame.get("User-Id") or ""
    except Exception:  # (no authentication on the socket: ZeroMQ has no User-Id to give)
        return ""
