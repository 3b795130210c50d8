"""An agent registering with the scheduler (`Nodes.on_register`): its key must be an agent's,
under its own name; its GPUs must fit a node of the cluster (its own, if the name is known, else
a free one or a lost one's); another agent process under the name of a node whose agent is up
waits, or is refused (`_held_back`). A registration that passes is journaled before anything
changes, its node goes online, and what was held for the node while its agent was away is sent
(`_deliver_held`).

Nodes binds `on_register` as its method (runtime/backends/live/nodes.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from roundhouse.wire import protocol
from roundhouse.wire.security import SUBMITTER, key_of_user_id

if TYPE_CHECKING:
    from roundhouse.runtime.backends.live.nodes import Node, Nodes

log = logging.getLogger("roundhouse.scheduler")

# A node's agent silent this many heartbeat periods has stopped (one period, and the delays of a
# busy agent or scheduler): another agent registering under its name takes its place.
SILENT_PERIODS = 1.5


def on_register(nodes: Nodes, identity, seq, body, frame) -> None:
    """An agent registers (or registers again, on a new connection): refused, with the reason,
    if its key, its GPUs or its name do not fit the cluster; else its node is journaled, put
    online, welcomed, sent what was held for it, and its running workers settled."""
    cluster = nodes.cluster
    name = body["node"]
    key, role = key_of_user_id(key_of_frame(frame))
    if role == SUBMITTER:  # (a key given to submit with does not give the cluster's nodes)
        reason = f"node {name} registers with the key of submitter {key}: only an agent's key registers a node"
        return _refuse(nodes, identity, reason)
    if key and key != name:  # (with keys, an agent's name is its key's: no key speaks for another node)
        reason = f"node {name} registers with the key of {key}: an agent registers under its own key's name"
        return _refuse(nodes, identity, reason)
    types = {g["type"] for g in body["gpus"]}
    count = len(body["gpus"])
    if len(types) != 1 or sorted(g["index"] for g in body["gpus"]) != list(range(count)):
        return _refuse(nodes, identity, _bad_gpus(name, body["gpus"]))
    gpu_type = cluster_type = next(iter(types))
    known = [t for t in cluster.gpu_types if t.lower() == gpu_type.lower()]
    if known:
        cluster_type = known[0]

    def fits(slot: int) -> bool:
        return int(cluster.node_gpus[slot]) == count and cluster.gpu_types[int(cluster.node_type[slot])] == cluster_type

    node = nodes.by_name.get(name)
    # (A second agent under a running node's name is a name clash, whatever GPUs it has: that is
    # found out first, and only then whether an agent taking the node over fits it.)
    if node is not None and _held_back(nodes, node, identity, body["session"]):
        return
    if node is not None and not fits(node.slot):
        reason = (
            f"node {name} is node {node.slot} of the cluster, which has {cluster.node_gpus[node.slot]} "
            f"{cluster.gpu_types[cluster.node_type[node.slot]]} GPU(s); it now registers {count} {gpu_type}"
        )
        return _refuse(nodes, identity, reason)
    if node is None:
        free = [s for s in range(cluster.n_nodes) if nodes.slots[s] is None and fits(s)]
        free += [s for s, n in enumerate(nodes.slots) if n is not None and not n.online and fits(s)]
        if not free:
            return _refuse(nodes, identity, _no_free_node(nodes, name, count, gpu_type, fits))
        slot = free[0]
    else:
        slot = node.slot
    # The answer is checked before anything changes: a welcome that cannot be sent must
    # not leave the node counted online (nor journaled) with no agent behind it.
    welcome = dict(node_index=slot, heartbeat_s=nodes.options.heartbeat_s, session=nodes.session)
    try:
        protocol.SCHEMAS["welcome"].check(welcome, "")
    except protocol.ProtocolError as err:
        reason = f"the scheduler cannot welcome node {name}: {err.reason}"
        log.error("refused registration: %s", reason)
        nodes.server.send(identity, "error", reason=reason)
        return
    # Journaled first: a write that fails leaves the node as it was (not half registered).
    nodes.journal.set_node(name, slot, body["address"], nodes.clock.now_s())
    if node is None:
        old = nodes.slots[slot]
        if old is not None:
            log.info("node %s takes the place of lost node %s (node %d)", name, old.name, slot)
        node = nodes.seat(name, slot, body["address"])
    elif node.online and node.session and node.session != body["session"]:
        # The same node came back as a new agent process: the old one's jobs died with it.
        nodes.lose(node, "its agent restarted")
    reconnected = node.identity != identity  # (a new connection: what was sent on the old one may be lost)
    if node.identity is not None and node.identity != identity:
        nodes.by_identity.pop(node.identity, None)
        nodes.server.forget(node.identity)
    node.identity, node.session, node.address = identity, body["session"], body["address"]
    node.heard = node.last_seen = nodes.wall()
    node.key = key
    node.stopping = node.asked = False  # (an agent back after stopping serves again)
    nodes.by_identity[identity] = node
    nodes.stopped.discard(name)
    if not node.online:
        node.online = True
        nodes.set_online(node, True)
        nodes.news.joined.append(name)
    first = int(cluster.node_first_gpu[node.slot])
    log.info(
        "node %s registered%s as node %d: %s (%d x %s), %d running process(es)",
        name,
        f" (key {node.key})" if node.key else "",
        node.slot,
        f"GPU {first}" if count == 1 else f"GPUs {first}-{first + count - 1}",  # (not "GPUs 0-0")
        count,
        cluster_type,
        len(body["running"]),
    )
    nodes.server.send(identity, "welcome", **welcome)
    starting = _deliver_held(nodes, node, identity)
    nodes.on_running(node, body["running"], True)
    if reconnected:
        nodes.on_reconnected(node, body["running"], starting)


def _refuse(nodes: Nodes, identity: bytes, reason: str) -> None:
    log.warning("refused registration: %s", reason)
    nodes.server.send(identity, "error", reason=reason)


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
    wall = nodes.wall()
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


def _no_free_node(nodes: Nodes, name: str, count: int, gpu_type: str, fits) -> str:
    """Why a new node finds no place: every node of its shape is taken (a name not seen before,
    while the agents of those nodes are up), or the cluster has no node of its shape at all (the
    agent's GPUs, or the cluster `serve` was given, are not what was meant)."""
    said = f"the cluster ({nodes.cluster.describe()}) has no free node with {count} {gpu_type} GPU(s) for node {name}"
    taken = [n.name for n in nodes.slots if n is not None and fits(n.slot)]
    if taken:
        shown = ", ".join(taken[:8]) + (", ..." if len(taken) > 8 else "")
        return f"{said}: every such node is taken (by {shown}), and their agents are running"
    return (
        f"{said}: none of its nodes has {count} {gpu_type} GPU(s); start the agent with the GPUs of one of its nodes "
        "(--fake-gpus COUNT:TYPE), or give serve the cluster the agents form (the graph's cluster setting, or --cluster)"
    )


def _bad_gpus(name: str, gpus: list[dict]) -> str:
    """Why a node's GPUs, as registered, are refused: their indices and types."""
    indices = ", ".join(str(g["index"]) for g in gpus[:16]) + (" ..." if len(gpus) > 16 else "")
    types = ", ".join(sorted({g["type"] for g in gpus}))
    return f"node {name} registers GPUs {indices or '(none)'} of type(s) {types or '(none)'}: a node registers GPUs 0..N-1, all of one type"


def key_of_frame(frame) -> str:
    """The name of the CURVE key a message came with ("" without keys)."""
    try:
        return frame.get("User-Id") or ""
    except Exception:  # (no authentication on the socket: ZeroMQ has no User-Id to give)
        return ""
