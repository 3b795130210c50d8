"""The agent's connection to the scheduler: a DEALER socket (secured, watched for a refused
handshake, for a connection that closes during one, and for one that stays silent), numbered
messages in both directions, registration until welcomed, heartbeats. A welcome is taken only as
the answer to the agent's own registration: one that answers none (a confused or rogue peer's)
is logged and changes nothing. A node cut off once it served (its key no longer admitted: the
scheduler said `key_refused`, or refused the key when the agent reconnected) says why and what
to do, once (`cut_off`), and sends nothing more."""

from __future__ import annotations

import logging
import time

import zmq

from roundhouse.agents.agent.messages import FROM_SCHEDULER, decode
from roundhouse.wire import protocol
from roundhouse.wire.protocol import RefusalLog, SeqTracker
from roundhouse.wire.security import (
    AUTHORIZED,
    HANDSHAKE_FAILED,
    HANDSHAKE_FAILURES,
    MECHANISM_MISMATCH,
    REFUSALS,
    SAME_SECURITY,
    SCHEDULER_KEY,
    ClientSecurity,
    allow_ipv6,
    check_connect_address,
    refusal,
)

log = logging.getLogger("roundhouse.agent")
# What a quiet link's security would say (INSECURE MODE), said once by the first link of the
# process instead: an emulating agent of 125 nodes printed it 125 times. (Not under the
# "roundhouse" tree: nothing it is given passes its level, so nothing reaches a handler.)
_unsaid = logging.Logger("roundhouse.agent.unsaid", logging.CRITICAL + 1)

# An agent not yet registered says so this often (a scheduler not started, a wrong address or
# port, a firewall): it keeps trying, but not in silence.
WARN_EVERY_S = 30.0
# A connection made on which no handshake completes within this long is said at once: ZeroMQ
# itself gives up on a handshake only after its handshake interval (30 s), and until then an
# agent pointed at something that accepts connections but does not speak ZeroMQ (or does not
# answer its keys) would say nothing.
STALLED_HANDSHAKE_S = 5.0


class SchedulerLink:
    def __init__(self, scheduler: str, security: ClientSecurity, hello: dict, counters: dict[str, int]):
        check_connect_address(scheduler)
        self.scheduler = scheduler
        self.security = security
        self.hello = hello  # what registering says besides the running workers
        self.counters = counters
        self.heartbeat_s = 1.0
        self.node_index: int | None = None  # what the welcome taken said (None: not welcomed yet)
        self.scheduler_session: str | None = None
        self.asked = False  # a registration sent that no welcome has answered yet
        self._registered = False
        self.refused = False  # refused before it served: it exits at once (nothing runs yet)
        # Why a node that served was cut off (its key no longer admitted): it stops its workers
        # and exits; its messages would be dropped, so none is sent.
        self.cut_off: str | None = None
        self.served = False  # welcomed at least once
        self.last_register = 0.0
        self.last_heartbeat = 0.0
        self.warn_every_s = WARN_EVERY_S
        self.trying_since = time.time()  # when it last began to register (the start, or the scheduler forgot it)
        self.last_warning = self.trying_since
        self.connected = False  # a handshake with the scheduler succeeded, and it has not hung up since
        self.cut_handshakes = 0  # connections closed during the handshake since one last succeeded (or the start)
        self._said_cut = False  # said since the last handshake that succeeded (or the start)
        self.stalled_after_s = STALLED_HANDSHAKE_S
        self.handshake_since: float | None = None  # when the connection whose handshake is under way was made
        self._said_stalled = False  # said since the last handshake that succeeded (or the start)
        # Another link of this process to the same scheduler says what this one would of reaching
        # it (an emulating agent's nodes: one line for all, not one per node).
        self.quiet = False
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000
        self._from_scheduler = SeqTracker()

    def open(self, context: zmq.Context):
        """Connect; returns the sockets to poll: the DEALER and its handshake monitor."""
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 1000)
        dealer.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing for a scheduler that is not there
        dealer.setsockopt(zmq.MAXMSGSIZE, protocol.HARD_LIMIT)
        dealer.setsockopt(zmq.RECONNECT_IVL, 100)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        self.security.apply(dealer, _unsaid if self.quiet else log)
        monitor = dealer.get_monitor_socket(
            sum(HANDSHAKE_FAILURES) | zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
        )
        allow_ipv6(dealer, self.scheduler)
        dealer.connect(self.scheduler)
        self.dealer, self.monitor = dealer, monitor
        return dealer, monitor

    def close(self) -> None:
        self.monitor.close(linger=0)
        self.dealer.close(linger=1000)

    def send(self, type_: str, **fields) -> bool:
        if self.cut_off is not None:
            return False
        try:
            self.dealer.send(protocol.encode(type_, self._seq.next(), **fields), zmq.NOBLOCK)
            return True
        except zmq.Again:
            return False  # not connected: heartbeats are dropped, exits stay unacknowledged and are resent

    def receive(self, frames):
        """(type, body) of a message from the scheduler, or None if it is bad or out of order."""
        got = decode(frames, FROM_SCHEDULER, "a message from the scheduler", self.counters, self._other_release)
        if got is None:
            return None
        type_, seq, body = got
        if not self._from_scheduler.accept("scheduler", seq):
            # (A new connection, not yet read from the monitor, may be to a new scheduler process.)
            self.watch_handshakes()
            if not self._from_scheduler.accept("scheduler", seq):
                self.counters["bad_messages"] += 1
                log.warning("dropped an out-of-order %s from the scheduler (seq %d)", type_, seq)
                return None
        return type_, body

    def _other_release(self, reason: str) -> None:
        """A message of another version of the protocol. Before the agent is welcomed it is the
        scheduler's answer to its registration: nothing that scheduler says can be read, so the
        agent stops (exit status 2) rather than wait for a welcome it cannot understand. Once
        welcomed, it is one bad frame among others: refused and logged."""
        if self.registered:
            log.warning("refused a message from the scheduler: %s", reason)
            return
        log.error(
            "the scheduler at %s speaks another version of the protocol: %s; run the same release of Roundhouse "
            "on the scheduler and every agent",
            self.scheduler,
            reason,
        )
        self.refused = True

    def watch_handshakes(self) -> None:
        """Read the monitor's events. A handshake that failed on the protocol or the key means the
        scheduler refused this agent (it stops, exit status 2). A connection closed during the
        handshake without detail is not a refusal: the scheduler went away (killed, restarting,
        behind a forwarder that accepts for it) or something else listens there; the agent says
        so, keeps its workers, and ZeroMQ reconnects by itself."""
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event.get("event")
            if kind == zmq.EVENT_CONNECTED:  # (a connection made: its handshake begins)
                self.handshake_since = time.time()
                continue
            self.handshake_since = None  # (every other event ends the handshake under way, or the connection)
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                # A new connection, perhaps to another scheduler process (restarted, or on another
                # machine), which numbers its messages afresh from its own clock: messages are
                # in order within one connection, so the order is checked from here on.
                self._from_scheduler.forget("scheduler")
                self.connected = True
                self.cut_handshakes, self._said_cut, self._said_stalled = 0, False, False
            elif kind == zmq.EVENT_DISCONNECTED:
                self._lost_contact()
            elif kind == HANDSHAKE_FAILED:
                self._cut_during_handshake()
            elif kind in REFUSALS and event.get("value") == MECHANISM_MISMATCH:
                # (one end has keys, the other none: said as such, whether or not the agent served)
                why = refusal(event, not self.security.insecure, "agent")
                todo = self._refusal_hint() if self.security.insecure else SAME_SECURITY
                if self.served:
                    self._cut(f"the scheduler at {self.scheduler} refused node {self.node} when it reconnected: {why}", todo)
                else:
                    log.error("the scheduler at %s refused this agent: %s; %s", self.scheduler, why, todo)
                    self.refused = True
            elif kind in REFUSALS and self.served:
                self._refused_on_reconnecting(kind)
            elif kind in REFUSALS:
                log.error("the scheduler at %s refused this agent: %s; %s", self.scheduler, REFUSALS[kind], self._refusal_hint())
                self.refused = True

    @property
    def node(self) -> str:
        return self.hello["node"]

    def key_refused(self, key: str, cause: str) -> None:
        """The scheduler no longer admits this node's key (`key_refused`): cut off."""
        if cause == protocol.KEY_MADE_AGAIN:
            what = f"a new key was made under the name '{key}', and this agent holds the old one"
            todo = (
                f"copy the node's new key pair ({key}.key_secret, with {SCHEDULER_KEY}.key) from the folder "
                f"`roundhouse keys` made into {self.security.keys} and start the agent again"
            )
        else:
            what = f"the key '{key}' was removed from the scheduler's {AUTHORIZED}/ folder"
            todo = (
                f"have its key admitted again (its {key}.key copied back into the scheduler's {AUTHORIZED}/ folder, "
                f"or a new pair made with `roundhouse keys` and copied into {self.security.keys}) and start the agent again"
            )
        self._cut(f"the scheduler at {self.scheduler} no longer admits the key of node {self.node}: {what}", todo)

    def _refused_on_reconnecting(self, kind: int) -> None:
        """A node that served, refused when its connection was made again (the scheduler
        restarted, or the connection broke): its key is no longer admitted, so it is cut off."""
        if self.security.insecure or kind != zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            todo = self._refusal_hint()
        else:
            todo = (
                f"its key may have been removed from the scheduler's {AUTHORIZED}/ folder or made again: copy the "
                f"node's current key pair ({self.security.name}.key_secret, with {SCHEDULER_KEY}.key) from the folder "
                f"`roundhouse keys` made into {self.security.keys} and start the agent again"
            )
        self._cut(f"the scheduler at {self.scheduler} refused node {self.node} when it reconnected: {REFUSALS[kind]}", todo)

    def _cut(self, why: str, todo: str) -> None:
        if self.cut_off is None:
            self.cut_off = why
            log.error("%s; stopping this node's jobs and exiting. To serve node %s again, %s", why, self.node, todo)

    def _refusal_hint(self) -> str:
        """What a refused handshake asks of the operator."""
        if self.security.insecure:  # (this agent offers no keys: the other end wants them, or is not a scheduler)
            return "this agent runs --insecure: does the scheduler there need keys (give the agent --keys DIR), or is it not a Roundhouse scheduler?"
        return "check the keys (roundhouse keys)"

    def _cut_during_handshake(self) -> None:
        """A connection closed during the handshake: said once until a handshake succeeds (each
        reconnection may end so); the warning that the agent is not registered counts them."""
        self.cut_handshakes += 1
        if not self._said_cut:
            self._said_cut = True
            self._say(
                "the connection to the scheduler at %s closed during the handshake; still trying (%s)",
                self.scheduler,
                self._cut_hint(),
            )

    def _cut_hint(self) -> str:
        """What a connection closed during the handshake may mean."""
        if self.security.insecure:
            return "is the scheduler restarting, or is something else listening at that address?"
        return (
            "is the scheduler restarting, is something else listening at that address, or is the "
            "scheduler.key in the key folder another scheduler's?"
        )

    def _warn_stalled(self, now: float) -> None:
        """A connection made on which the handshake has not completed after `stalled_after_s`:
        said once until a handshake succeeds. The agent keeps trying (ZeroMQ gives up on the
        handshake after its own interval, and reconnects)."""
        since = self.handshake_since
        if since is None or self._said_stalled or now - since < self.stalled_after_s:
            return
        self._said_stalled = True
        if self.security.insecure:
            hint = (
                "nothing there seems to speak ZeroMQ: is something other than a Roundhouse scheduler listening at that address?"
            )
        else:
            hint = (
                "nothing there seems to speak ZeroMQ with CURVE keys: is something other than a Roundhouse scheduler "
                "listening at that address, or are the keys mismatched: is the scheduler.key in the key folder "
                "another scheduler's?"
            )
        self._say(
            "connected to the scheduler's address %s, but the handshake has not completed after %.0f s; still trying (%s)",
            self.scheduler,
            now - since,
            hint,
        )

    def _say(self, *message) -> None:
        if not self.quiet:
            log.warning(*message)

    def _lost_contact(self) -> None:
        """The connection to the scheduler broke: said once (ZeroMQ reconnects by itself)."""
        if self.connected:
            self.connected = False
            self._say("lost contact with the scheduler at %s; reconnecting", self.scheduler)

    @property
    def registered(self) -> bool:
        """Welcomed by the scheduler (and not forgotten by it since)."""
        return self._registered

    @registered.setter
    def registered(self, value: bool) -> None:
        if getattr(self, "_registered", False) and not value:  # (the scheduler forgot it: it registers again, from now)
            self.trying_since = self.last_warning = time.time()
        self._registered = value
        self.served = getattr(self, "served", False) or value  # (getattr, as above: a link made without __init__)

    def _warn_unregistered(self, now: float) -> None:
        if now - self.last_warning >= self.warn_every_s:
            self.last_warning = now
            if self.cut_handshakes:
                hint = f"{self.cut_handshakes} connection(s) closed during the handshake: {self._cut_hint()}"
            else:
                hint = "is it running, at that address, and reachable from here?"
            self._say(
                "not registered with the scheduler at %s after %.0f s; still trying (%s)",
                self.scheduler,
                now - self.trying_since,
                hint,
            )

    def register(self, running: list[dict]) -> None:
        self.last_register = time.time()
        self.asked = True
        self.send("register", **self.hello, running=running)

    def welcome(self, body: dict) -> bool:
        """Take a welcome's node index, heartbeat interval and session, if it answers this
        agent's registration; False (changing nothing) if it does not."""
        return _take_welcome(self, body)

    def keep_alive(self, now: float, running) -> bool:
        """Register (once a second until welcomed) or heartbeat when due; False while not registered.
        `running` makes the list of running workers, when one is sent."""
        self._warn_stalled(now)
        if self.cut_off is not None:
            return False
        if not self.registered:
            if now - self.last_register >= 1.0:
                self.register(running())
            self._warn_unregistered(now)
            return False
        if now - self.last_heartbeat >= self.heartbeat_s:
            self.last_heartbeat = now
            self.send("heartbeat", running=running())
        return True


_WELCOMES = RefusalLog(log)  # (unasked welcomes: a few a minute, however many a peer sends)


def _take_welcome(link: SchedulerLink, body: dict) -> bool:
    """A welcome taken only as the answer to the link's registration: one that answers none would
    change the node index, heartbeat interval and session of an agent that has not registered
    anew. One carrying what the agent holds is the answer to a registration sent again before
    the first was answered (the agent registers once a second until welcomed): dropped, said
    only at debug level."""
    said = (body["node_index"], body["heartbeat_s"], body["session"])
    if not link.asked:
        if said != (link.node_index, link.heartbeat_s, link.scheduler_session):
            link.counters["bad_messages"] += 1
            _WELCOMES.warn(
                "unasked_welcome",
                "ignored a welcome from the scheduler that answers no registration of node %s (node index %d, "
                "heartbeats every %g s, session %s): it keeps node index %s, heartbeats every %g s, session %s",
                link.node,
                *said,
                link.node_index,
                link.heartbeat_s,
                link.scheduler_session,
            )
        else:
            log.debug(
                "dropped a repeated welcome from the scheduler: the answer to a registration of node %s sent again", link.node
            )
        return False
    link.asked = False
    link.registered = True
    link.node_index, link.heartbeat_s, link.scheduler_session = said
    return True
