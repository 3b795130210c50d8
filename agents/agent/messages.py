"""Reading the agent's sockets: one-frame protocol messages, each checked; a bad one is counted
and logged, and neither it nor a bug in its handler stops the agent."""

from __future__ import annotations

import logging

import zmq

from roundhouse.wire import protocol
from roundhouse.wire.protocol import ProtocolError, RefusalLog

log = logging.getLogger("roundhouse.agent")
FROM_SCHEDULER = frozenset({"welcome", "launch", "revoke", "resize", "ack", "unknown", "shutdown", "error", "key_refused"})
FROM_JOBS = frozenset({"report", "checkpointed", "exiting"})
# (one for the process: a flood of bad frames must not fill the log, however many nodes it emulates;
# counted apart by what was refused, a few fixed phrases, so that one flood hides no other)
_REFUSALS = RefusalLog(log)


def drain(sock, handler) -> None:
    """Hand every message waiting on `sock` (up to a thousand) to `handler`."""
    for _ in range(1000):
        try:
            frames = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        try:
            handler(frames)
        except Exception:  # a bug must not stop the agent
            log.exception("error while handling a message")


def decode(frames, allowed, what: str, counters: dict[str, int], wrong_version=None):
    """(type, seq, body) of a one-frame message, or None (counted and logged) if it is bad.
    `wrong_version`, if given, is called with the reason of a message of another version."""
    try:
        if len(frames) != 1:
            raise ProtocolError(f"expected one frame, got {len(frames)}")
        return protocol.decode(frames[0], allowed)
    except protocol.WrongVersion as err:
        counters["bad_messages"] += 1
        if wrong_version is None:
            _REFUSALS.warn(what, "refused %s: %s", what, err.reason)
        else:
            wrong_version(err.reason)
        return None
    except ProtocolError as err:
        counters["bad_messages"] += 1
        _REFUSALS.warn(what, "refused %s: %s", what, err.reason)
        return None
