"""The scheduler's socket: a ROUTER that agents and submitters connect to. Receives and validates
every frame (wire/protocol.py), hands each message to the handler registered for its type,
sends replies, and holds back the replies that promise durability until the journal has
committed. A bad frame is answered with `error` or dropped, and logged; the server carries on.
With keys, a message whose key is no longer in the `authorized/` folder (removed, or made again
under its name, after its peer connected) is dropped: logged once per key, answered once per
connection, with `key_refused` to a registered agent (which then stops) and `error` to others."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import zmq

from roundhouse.errors import UsageError
from roundhouse.runtime.backends.live.admitted import AdmittedKeys
from roundhouse.runtime.journal import Journal
from roundhouse.wire import protocol
from roundhouse.wire.protocol import ProtocolError, RefusalLog, SeqTracker
from roundhouse.wire.security import (
    AGENT,
    AUTHORIZED,
    HANDSHAKE_FAILURES,
    KEY_PROPERTY,
    MECHANISM_MISMATCH,
    REFUSALS,
    SAME_SECURITY,
    ServerSecurity,
    allow_ipv6,
    check_port,
    key_of_user_id,
    refusal,
    zmq_reason,
)

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

log = logging.getLogger("roundhouse.scheduler")

_DRAIN = 2000  # messages handled per wake-up before other duties (heartbeat checks, commits)

# handler(identity, seq, body, frame)
Handler = Callable[[bytes, int, dict, zmq.Frame], None]


class Server:
    def __init__(
        self,
        bind: str,
        security: ServerSecurity,
        journal: Journal,
        counters: dict,
        name_of: Callable[[bytes], str | None],
    ):
        self.bind = bind
        self.endpoint = bind  # what `bind` resolved to, once bound (`start`)
        self.security = security
        self.journal = journal
        self.counters = counters
        for counted in ("refused_peers", "bad_messages", "handler_errors"):  # (listed by `status` from the start)
            counters.setdefault(counted, 0)
        self._name_of = name_of  # the node name of an agent's connection, if it registered
        self.handlers: dict[str, Handler] = {}
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000  # increasing across restarts, so agents never see it go back
        self._seqs = SeqTracker()
        self._refusals = RefusalLog(log)  # (a flood of bad frames must not fill the log)
        # After commit: replies that promise durability (exit acks, accepted submissions).
        self._after_commit: list[tuple[bytes, str, dict]] = []
        self._context: zmq.Context | None = None
        self._socket: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None
        self._auth: ThreadAuthenticator | None = None
        self._admitted: AdmittedKeys | None = None  # with keys: the keys admitted now (`_admits`)
        self._told: set[bytes] = set()  # connections told that their key was removed or replaced
        # Called with a registered agent's connection once it is told its key is refused (the
        # node registry takes its node offline at once rather than at the heartbeat timeout).
        self.on_cut_off: Callable[[bytes], None] = lambda identity: None
        self._poller = zmq.Poller()

    @property
    def open(self) -> bool:
        return self._socket is not None

    def start(self) -> None:
        check_port(self.bind)  # (before any socket exists)
        self._context = zmq.Context()
        # Owned by `close()` from here on: a socket left open makes `Context.term()` wait forever.
        self._socket = sock = self._context.socket(zmq.ROUTER)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.MAXMSGSIZE, protocol.HARD_LIMIT)
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.SNDHWM, 100_000)
        sock.setsockopt(zmq.RCVHWM, 100_000)
        try:
            self._auth = self.security.apply(self._context, sock, log)
            if self.security.keys is not None:
                self._admitted = AdmittedKeys(self.security.keys / AUTHORIZED)
        except BaseException:  # (a key ZeroMQ refuses: the socket must not stay open)
            self.close()
            raise
        self._monitor = sock.get_monitor_socket(sum(HANDSHAKE_FAILURES))
        allow_ipv6(sock, self.bind)
        try:
            sock.bind(self.bind)
        except zmq.ZMQError as err:
            self.close()
            raise UsageError(f"cannot listen on {self.bind}: {zmq_reason(err)}") from None
        self._poller.register(sock, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)
        # The address bound, as agents must be told it: a wildcard port (tcp://HOST:*) is chosen now.
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT) or self.bind
        log.info("scheduler listening on %s (%s)", self.endpoint, "INSECURE" if self.security.insecure else "CURVE")

    def close(self) -> None:
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

    def serve(self, wall_deadline: float, stop: Callable[[], bool], duties: Callable[[], None]) -> None:
        """Handle messages until the wall clock reaches `wall_deadline` or `stop()` is true;
        `duties` runs after every wake-up (heartbeat checks), then the journal commits."""
        sock = self._socket
        assert sock is not None, "serve() before start()"
        while True:
            remaining = wall_deadline - time.time()
            if remaining <= 0 or stop():
                break
            ready = dict(self._poller.poll(timeout=max(1, int(min(remaining, 0.1) * 1000))))
            if self._admitted is not None:  # (before the messages: a key removed is refused from the next one on)
                self._readmitted(self._admitted.refresh())
            if self._monitor in ready:  # (before the messages: a status asked after a refusal counts it)
                self._drain_monitor()
            if sock in ready:
                for _ in range(_DRAIN):
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._receive(frames)
            try:
                duties()
            except Exception:  # as a handler's bug: log it, count it, carry on (the next wake-up tries again)
                self.counters["handler_errors"] += 1
                log.exception("error in the scheduler's periodic duties (heartbeat checks, takeovers)")
            self.flush()

    def _receive(self, frames) -> None:
        self.counters["messages_in"] += 1
        self.counters["bytes_in"] += len(frames[-1])
        identity = frames[0].bytes
        if self._admitted is not None and not self._admits(identity, frames[-1]):
            return
        try:
            if len(frames) != 2:
                raise ProtocolError(f"expected one frame per message, got {len(frames) - 1}")
            type_, seq, body = protocol.decode(frames[1].buffer, frozenset(self.handlers))
        except Exception as err:  # (anything else a frame makes decoding raise is a refusal too)
            reason = err.reason if isinstance(err, ProtocolError) else f"the message could not be read ({type(err).__name__})"
            self.counters["bad_messages"] += 1
            self._refusals.warn("bad frame", "refused a message from %s: %s", self.who(identity), reason)
            self.send(identity, "error", reason=reason, ref=getattr(err, "seq", None))
            return
        if not self._seqs.accept(identity, seq):
            self.counters["bad_messages"] += 1
            self._refusals.warn("out of order", "dropped an out-of-order %s from %s (seq %d)", type_, self.who(identity), seq)
            self.send(identity, "error", reason=f"out-of-order message (seq {seq})", ref=seq)
            return
        try:
            self.handlers[type_](identity, seq, body, frames[1])
        except Exception:  # a bug must not stop the scheduler: log it, answer, carry on
            self.counters["handler_errors"] += 1
            log.exception("error while handling %s from %s", type_, self.who(identity))
            self.send(identity, "error", reason=f"internal error while handling {type_}; see the scheduler's log", ref=seq)

    def _admits(self, identity: bytes, frame) -> bool:
        """Whether the key a message came with is still admitted (two lookups). One whose key
        file was removed from `authorized/`, or whose key was made again under its name (the
        connection still uses the old one), is dropped: logged once per key, and its connection
        told once (`_tell_refused`). A registered agent's node goes offline when it is told
        (`on_cut_off`); a submitter's request is not taken."""
        admitted = self._admitted
        assert admitted is not None  # (called with keys only)
        peer = (_user_of(frame), _key_of(frame))
        if admitted.admits(*peer):
            return True
        if peer not in admitted.refused:  # (its key may have been added since the folder was read)
            self._readmitted(admitted.refresh(force=True))
            if admitted.admits(*peer):
                return True
        user = peer[0]
        name, role = key_of_user_id(user)
        whose = f"{role} {name}" if role else name
        replaced = admitted.replaced(*peer)
        if peer not in admitted.refused:
            admitted.refused.add(peer)
            self.counters["refused_peers"] += 1
            what = (
                f"the key of {whose} was made again (a new key in {admitted.folder}), and this connection uses the old one"
                if replaced
                else f"the key of {whose} was removed from {admitted.folder}"
            )
            agent = self._name_of(identity) is not None
            log.warning(
                "refused a message from %s: %s; its messages are refused from now on%s",
                self.who(identity),
                what,
                " (its agent is told so, and stops; its node goes offline)" if agent else "",
            )
        if identity not in self._told:
            self._told.add(identity)
            self._tell_refused(identity, name, replaced, role == AGENT)
        return False

    def _tell_refused(self, identity: bytes, name: str, replaced: bool, agent_key: bool) -> None:
        """Tell a connection once that its key is no longer admitted. An agent (a registered
        connection, or one with an agent's key) is told with `key_refused`, on which it stops
        its workers and exits (it would otherwise run on unheard, its jobs started again
        elsewhere); any other peer (a submitter, a key made before keys said their role) with
        an `error` answering the request it sent. The ROUTER still routes to the connection:
        its key is checked per message, not the connection."""
        if replaced:
            reason = (
                f"the scheduler no longer admits this connection's key '{name}': a new key was made under that name; "
                f"connect again with the new key pair ({name}.key_secret)"
            )
        else:
            reason = f"the scheduler no longer admits the key '{name}': it was removed from the scheduler's {AUTHORIZED}/ folder"
        # (an agent's key, though its connection is not registered: its node was taken over by
        # another registration, and the agent, taking itself for registered, would run on unheard)
        if (agent_key or self._name_of(identity) is not None) and re.fullmatch(protocol.NAME_RE, name):
            cause = protocol.KEY_MADE_AGAIN if replaced else protocol.KEY_REMOVED
            self.send(identity, "key_refused", key=name, cause=cause, reason=reason)
            self.on_cut_off(identity)
        else:
            self.send(identity, "error", reason=reason)

    def _readmitted(self, users: list[str]) -> None:
        for user in users:
            log.info("the key %s is back in %s: its messages are taken again", user, AUTHORIZED)
        if users:
            self._told.clear()

    def forget(self, identity: bytes) -> None:
        """A connection replaced by another (an agent re-registered): its sequence starts over."""
        self._seqs.forget(identity)

    def who(self, identity: bytes) -> str:
        name = self._name_of(identity)
        return f"agent {name}" if name is not None else f"peer {identity.hex()[:10]}"

    def _drain_monitor(self) -> None:
        from zmq.utils.monitor import recv_monitor_message

        if self._monitor is None:
            return
        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            except Exception:  # a malformed monitor frame: nothing to act on
                return
            where = event.get("endpoint", b"").decode(errors="replace")
            if event.get("event") in REFUSALS:
                what = refusal(event, not self.security.insecure, "scheduler")
                if event.get("value") == MECHANISM_MISMATCH:
                    what += f"; {SAME_SECURITY}"
                self.counters["refused_peers"] += 1
                self._refusals.warn("peer", "refused a peer on %s: %s", where, what)
            else:
                log.debug("a peer on %s hung up during the handshake", where)

    def send(self, identity: bytes, type_: str, **fields) -> bool:
        """Send a message; False if its peer is gone (the socket has no route to it). A reason
        is cut to what the message carries; a message that cannot be encoded (a bug) is logged
        and not sent."""
        if isinstance(fields.get("reason"), str):
            fields["reason"] = _carried(type_, fields["reason"])
        try:
            frame = protocol.encode(type_, self._seq.next(), **fields)
        except Exception as err:
            log.error("could not send %s to %s: %s", type_, self.who(identity), _carried("error", str(err), 300))
            return True  # (the peer is not known to be gone)
        if self._socket is None:
            return True  # closed: nobody to send to
        try:
            self._socket.send_multipart([identity, frame], zmq.NOBLOCK)
            self.counters["messages_out"] += 1
            self.counters["bytes_out"] += len(frame)
        except zmq.ZMQError as err:  # the peer left (ROUTER_MANDATORY) or its queue is full
            level = logging.WARNING if self._name_of(identity) is not None else logging.DEBUG
            log.log(level, "could not send %s to %s: %s", type_, self.who(identity), err.strerror)
            return err.errno != zmq.EHOSTUNREACH
        return True

    def after_commit(self, identity: bytes, type_: str, **fields) -> None:
        """Send once what the run was told is committed (the reply promises it is durable)."""
        self._after_commit.append((identity, type_, fields))

    def flush(self) -> None:
        """Commit the journal, then send what promised durability."""
        self.journal.commit()
        pending, self._after_commit = self._after_commit, []
        for identity, type_, fields in pending:
            self.send(identity, type_, **fields)


def _user_of(frame) -> str:
    """The User-Id a message came with: the name of its CURVE key, marked with its role."""
    try:
        return frame.get("User-Id") or ""
    except Exception:  # (no authentication on the socket: ZeroMQ has no User-Id to give)
        return ""


def _key_of(frame) -> str:
    """The public key a message's connection was admitted with ("" if not said)."""
    try:
        return frame.get(KEY_PROPERTY) or ""
    except Exception:  # (a connection the authenticator gave no such property)
        return ""


def _carried(type_: str, reason: str, most: int | None = None) -> str:
    """A reason as a `type_` message carries it: text (a lone surrogate escaped), cut to the
    schema's length (or `most` characters) with "..." where it was cut."""
    spec = protocol.SCHEMAS[type_].fields.get("reason") if type_ in protocol.SCHEMAS else None
    most = most or (spec.max_len if isinstance(spec, protocol.Str) else 4000)
    reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
    return reason if len(reason) <= most else reason[: most - 3] + "..."
